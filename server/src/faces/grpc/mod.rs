//! The Nacos 2.x gRPC protocol on `--grpc` (HTTP port + 1000): [`proto`] the envelope
//! and services, [`kind`] the table of request kinds (each request's type decoded once),
//! [`connection`] the per-transport connections ([`transport`] the transports under
//! them), [`naming`] the naming requests,
//! [`config`] the configuration requests and their push, [`fuzzy`] Nacos 3's fuzzy
//! watches of services and configuration items, [`push`] the naming push and
//! the connections' upkeep, and here the server itself: each unary request decoded,
//! authenticated and dispatched, the stream's messages, the listener. Every request goes through the same registry (and
//! configuration store) as HTTP, so what any protocol writes is listed, pushed and
//! managed through all of them.

mod audited;
pub mod config;
pub mod connection;
pub mod fuzzy;
pub mod kind;
mod naming;
pub mod proto;
mod push;
mod reply;
pub mod tls;
mod transport;
pub mod workers;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tonic::codegen::BoxFuture;
use tonic::{Status, Streaming};

use crate::error::Error;
use crate::services::auth::permissions::DENIED;
use crate::services::auth::{Credentials, Identity};
use crate::state::AppState;
use connection::{Connection, Connections, MOVE_GRACE};
use fuzzy::{FuzzyLimits, FuzzyWatches};
use kind::RequestKind;
use naming::{parse_request, NamingRequest};
use proto::{BiStreamServer, Handler, Outbound, Payload, RequestServer};
use reply::{failure, refusal, respond, respond_answer};
use roster_registry::clock::{now_ms, now_secs};
use tls::GrpcTls;

/// The gRPC side of a node. Cheap to share (`Arc`).
pub struct GrpcServer {
    app: AppState,
    /// Live connections.
    pub connections: Connections,
    /// The fuzzy watches of this node's connections.
    fuzzy: FuzzyWatches,
    /// Source of strictly increasing `lastRefTime` values (clients drop a push whose
    /// `lastRefTime` is not newer than what they hold).
    last_ref: AtomicU64,
    /// This server, for tasks it starts from `&self`.
    me: std::sync::Weak<GrpcServer>,
}

/// What Nacos answers while a node starts.
const STARTING: &str = "Server is starting,please try later.";

fn header<'a>(payload: &'a Payload, name: &str) -> Option<&'a str> {
    payload.metadata.as_ref().and_then(|m| {
        m.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    })
}

impl GrpcServer {
    /// A gRPC server over the node's state, its fuzzy watches bounded by `fuzzy`.
    pub fn new(app: AppState, connections: Connections, fuzzy: FuzzyLimits) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            app,
            connections,
            fuzzy: FuzzyWatches::new(fuzzy),
            last_ref: AtomicU64::new(0),
            me: me.clone(),
        })
    }

    fn next_ref_time(&self) -> u64 {
        let now = now_ms();
        let mut last = self.last_ref.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self.last_ref.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(current) => last = current,
            }
        }
    }

    async fn unary(self: Arc<Self>, remote: Option<SocketAddr>, payload: Payload) -> Payload {
        // The payload's type, decoded once.
        let kind = RequestKind::decode(payload.kind());
        self.app.metrics.grpc_request(kind.label());
        let _timed = self.app.metrics.grpc_timer();
        let Some(remote) = remote else {
            return failure("ErrorResponse", 500, "no peer address");
        };
        if let Some(why) = self.app.ready.refusal(STARTING) {
            return failure("ErrorResponse", 300, why);
        }
        if kind == RequestKind::ServerCheck {
            return respond(
                "ServerCheckResponse",
                json!({ "connectionId": self.connections.id_for(remote), "supportAbilityNegotiation": true }),
            );
        }
        let Some(conn) = self.connections.get(&remote) else {
            return failure("ErrorResponse", 301, "Connection is unregistered.");
        };
        conn.touch();
        if kind == RequestKind::HealthCheck {
            return respond("HealthCheckResponse", json!({}));
        }
        let Some(reply_type) = kind.reply_type() else {
            return failure("ErrorResponse", 302, "RequestHandler Not Found");
        };
        let identity = match self.authenticate(&payload).await {
            Ok(identity) => identity,
            Err(e) => {
                tracing::debug!(error = %e, "grpc request refused");
                let error = Error::from(e);
                // Too busy checking passwords: say so (429), as HTTP does; any other
                // refusal keeps Nacos' answer, which clients match on.
                let busy = error.kind == crate::error::ErrorKind::TooManyRequests;
                let status = if busy { error.grpc_code() } else { 403 };
                let entry = audited::unread(kind, payload.body_bytes());
                self.audit(entry, None, remote, status);
                if busy {
                    return failure("ErrorResponse", status, &error.message);
                }
                return refusal(reply_type, "Validate Identity failed.");
            }
        };
        if kind.is_fuzzy_watch() {
            let body = payload.body_bytes();
            return self.fuzzy_watch(&conn, &identity, kind, reply_type, body);
        }
        if kind.is_config() {
            let body = payload.body_bytes();
            return self
                .config(remote, &conn, &identity, kind, reply_type, body)
                .await;
        }
        let request = match parse_request(kind, payload.body_bytes()) {
            Ok(r) => r,
            Err(refusal) => return *refusal,
        };
        // The audit trail (writes only): what the request addresses, read before
        // `naming` takes it; who, from where and the outcome once it is answered or
        // refused.
        let audited = audited::naming(kind, &request);
        // As Nacos: a caller without the permission gets the reply type with 403.
        let (status, refused) = match self.authorize(&identity, kind, &request) {
            Ok(true) => (200, None),
            Ok(false) => (403, Some(refusal(reply_type, DENIED))),
            Err(e) => (
                e.grpc_code(),
                Some(failure("ErrorResponse", e.grpc_code(), &e.message)),
            ),
        };
        if let Some(refused) = refused {
            self.audit(audited, Some(&identity), remote, status);
            return refused;
        }
        let answer = self.naming(kind, &conn, &identity, request).await;
        let status = answer.as_ref().map_or_else(Error::grpc_code, |_| 200);
        self.audit(audited, Some(&identity), remote, status);
        match answer {
            Ok(answer) => respond_answer(reply_type, answer),
            // As Nacos: a refused identity answers the reply type, a failed request
            // `ErrorResponse` (clients that validate the reply type's fields could not
            // read the message otherwise).
            Err(e) => failure("ErrorResponse", e.grpc_code(), &e.message),
        }
    }

    /// Who sent a request: its `accessToken` (or `Authorization`) header, else its
    /// `username` and `password` headers, checked on every request.
    async fn authenticate(
        &self,
        payload: &Payload,
    ) -> Result<Identity, crate::services::auth::AuthError> {
        if !self.app.auth.enabled() {
            return Ok(Identity {
                username: std::borrow::Cow::Borrowed("anonymous"),
                admin: true,
            });
        }
        let token = header(payload, "accessToken").or_else(|| {
            header(payload, "Authorization").map(|v| v.strip_prefix("Bearer ").unwrap_or(v))
        });
        let creds = Credentials {
            token,
            username: header(payload, "username"),
            password: header(payload, "password"),
        };
        self.app.auth.identify(&creds, now_secs()).await
    }

    fn on_stream_message(&self, conn: &Arc<Connection>, payload: Payload) {
        let body: Value = serde_json::from_slice(payload.body_bytes()).unwrap_or(Value::Null);
        match payload.kind() {
            "ConnectionSetupRequest" => {
                // The transport has said who it is: its setup deadline stops.
                self.connections.set_up(conn);
                {
                    let mut setup = conn.setup.lock();
                    setup.client_version = body["clientVersion"].as_str().unwrap_or("").to_string();
                    setup.tenant = body["tenant"].as_str().unwrap_or("").to_string();
                    setup.client_ip = payload
                        .metadata
                        .as_ref()
                        .map(|m| m.client_ip.clone())
                        .unwrap_or_default();
                    if let Some(labels) = body["labels"].as_object() {
                        setup.labels = labels
                            .iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                            .collect();
                    }
                }
                tracing::debug!(connection = %conn.id, version = body["clientVersion"].as_str().unwrap_or(""), "grpc client set up");
                // Clients that negotiate abilities wait for this (and give up without it).
                if body.get("abilityTable").is_some_and(|t| !t.is_null()) {
                    let ack = json!({
                        "headers": {},
                        "abilityTable": {
                            "supportPersistentInstanceByGrpc": true,
                            // Nacos 3 clients refuse to fuzzy watch without it.
                            "fuzzyWatch": true,
                        },
                        "module": "internal",
                    });
                    conn.send(Payload::new("SetupAckRequest", &ack));
                }
            }
            // Acks: nacos-sdk-python 3.x answers config pushes as NotifySubscriberResponse;
            // Java answers a naming fuzzy sync as a change.
            "NotifySubscriberResponse"
            | "ConfigChangeNotifyResponse"
            | "NamingFuzzyWatchSyncResponse"
            | "NamingFuzzyWatchChangeNotifyResponse"
            | "ConfigFuzzyWatchSyncResponse"
            | "ConfigFuzzyWatchChangeNotifyResponse"
            | "ClientDetectionResponse"
            | "ConnectResetResponse" => {
                let id = match &body["requestId"] {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                if conn.acknowledge(&id) {
                    self.app.metrics.grpc_push("acked");
                }
            }
            other => {
                tracing::debug!(connection = %conn.id, kind = other, "unexpected message on the stream")
            }
        }
    }

    async fn read_stream(self: Arc<Self>, conn: Arc<Connection>, mut inbound: Streaming<Payload>) {
        loop {
            match inbound.message().await {
                Ok(Some(payload)) => {
                    conn.touch();
                    self.on_stream_message(&conn, payload);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(connection = %conn.id, error = %e, "grpc stream ended");
                    break;
                }
            }
        }
        self.disconnect(&conn);
    }

    /// Forgets a connection: its instances, subscriptions and fuzzy watches go, and the removal
    /// replicates like any change. The instances of a client that was asked to move go
    /// [`MOVE_GRACE`] later (it registers them again where it moved, and another
    /// client's registration of the same address takes it over meanwhile).
    fn disconnect(&self, conn: &Arc<Connection>) {
        if self.connections.remove(conn) {
            self.app
                .metrics
                .grpc_connections
                .set(self.connections.count() as i64);
            conn.listens.lock().clear();
            self.fuzzy.forget(&conn.client);
            if conn.is_moving() {
                let (registry, client) = (self.app.registry.clone(), conn.client.clone());
                tracing::info!(connection = %conn.id, "grpc client moved away");
                tokio::spawn(async move {
                    tokio::time::sleep(MOVE_GRACE).await;
                    registry.remove_client(&client, now_ms());
                });
                return;
            }
            let removed = self.app.registry.remove_client(&conn.client, now_ms());
            tracing::info!(connection = %conn.id, instances = removed, "grpc client disconnected");
        }
    }
}

impl Handler for GrpcServer {
    fn request(
        self: Arc<Self>,
        remote: Option<SocketAddr>,
        payload: Payload,
    ) -> BoxFuture<Payload, Status> {
        // Password checks made for the request are throttled per source address.
        let source = remote.map(|r| r.ip());
        Box::pin(async move {
            let answering = self.unary(remote, payload);
            Ok(crate::services::auth::throttle::with_source(source, answering).await)
        })
    }

    fn stream(
        self: Arc<Self>,
        remote: Option<SocketAddr>,
        inbound: Streaming<Payload>,
    ) -> BoxFuture<Outbound, Status> {
        Box::pin(async move {
            let remote = remote.ok_or_else(|| Status::internal("no peer address"))?;
            if let Some(why) = self.app.ready.refusal(STARTING) {
                return Err(Status::unavailable(why));
            }
            let (tx, rx) = mpsc::channel(1024);
            // Registered at stream open, so that the unary calls that follow the setup
            // message never race it.
            let conn = self.connections.open(remote, tx);
            self.app
                .metrics
                .grpc_connections
                .set(self.connections.count() as i64);
            tracing::debug!(connection = %conn.id, "grpc stream opened");
            tokio::spawn(self.clone().read_stream(conn, inbound));
            Ok(Outbound::new(rx))
        })
    }
}

/// The gRPC port's TLS files (`--grpc-tls-cert`, `--grpc-tls-key`,
/// `--grpc-tls-optional`): the node's wiring fills it from its flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlsFiles<'a> {
    /// The certificate chain (PEM).
    pub cert: Option<&'a std::path::Path>,
    /// Its private key (PEM).
    pub key: Option<&'a std::path::Path>,
    /// Whether plaintext clients are served too.
    pub optional: bool,
}

impl TlsFiles<'_> {
    /// The TLS settings, checked: unreadable files, or a certificate and key that do
    /// not parse or do not fit, stop the node before it serves anything. `None` without
    /// both files.
    pub fn load(self) -> anyhow::Result<Option<GrpcTls>> {
        match (self.cert, self.key) {
            (Some(cert), Some(key)) => Ok(Some(GrpcTls::load(cert, key, self.optional)?)),
            _ => Ok(None),
        }
    }
}

/// Limits of the gRPC listener (`--max-grpc-connections`,
/// `--max-grpc-connections-per-ip`, `--grpc-setup-timeout-secs`).
#[derive(Clone, Copy, Debug)]
pub struct GrpcLimits {
    /// Most transports open at once.
    pub max_connections: usize,
    /// Most transports open at once from one IP.
    pub max_per_ip: usize,
    /// How long a transport may go without a set-up connection (from accept, and after
    /// its stream ends).
    pub setup_timeout: Duration,
}

/// Serves gRPC on `listener` (over TLS with `tls`) until `stopping` (then every client is
/// told to move on). Transports over a cap are closed at once; the others are closed
/// when they go `setup_timeout` without a set-up connection.
pub async fn serve(
    server: Arc<GrpcServer>,
    listener: TcpListener,
    tls: Option<GrpcTls>,
    limits: GrpcLimits,
    mut stopping: watch::Receiver<bool>,
) {
    let gate =
        crate::services::net::Gate::new("grpc", limits.max_connections, Some(limits.max_per_ip));
    let incoming = server
        .connections
        .incoming(listener, tls, gate, limits.setup_timeout);
    let shutdown = async move {
        let _ = stopping.changed().await;
    };
    let result = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(RequestServer(server.clone()))
        .add_service(BiStreamServer(server))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "grpc server failed");
    }
}
