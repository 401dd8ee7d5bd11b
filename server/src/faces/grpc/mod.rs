//! The Nacos 2.x gRPC protocol on `--grpc` (HTTP port + 1000): [`proto`] the envelope
//! and services, [`kind`] the table of request kinds (each request's type decoded once),
//! [`connection`] the per-transport connections, [`config`] the
//! configuration requests and their push, and here the naming request handlers, server
//! push and connection upkeep. Every request goes through the same registry (and
//! configuration store) as HTTP, so what any protocol writes is listed, pushed and
//! managed through all of them.

mod audited;
pub mod config;
pub mod connection;
pub mod kind;
pub mod proto;
mod reply;
pub mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tonic::codegen::BoxFuture;
use tonic::{Status, Streaming};

use crate::error::Error;
use crate::services::auth::permissions::{Action, Resource, DENIED};
use crate::services::auth::{Credentials, Identity};
use crate::state::AppState;
use connection::{Connection, Connections, Pushed};
use kind::{Access, RequestKind};
use proto::{BiStreamServer, Handler, Outbound, Payload, RequestServer};
use reply::{failure, refusal, respond, respond_answer, Answer};
use roster_registry::changes::ChangeSet;
use roster_registry::clock::{now_ms, now_secs};
use roster_registry::instance::Metadata;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::service::ServiceKey;
use roster_registry::validate::{
    self, check_group, check_namespace_id, check_port, check_service_name, parse_cluster_list,
    DEFAULT_CLUSTER, DEFAULT_GROUP,
};
use roster_registry::wire::{grpc_service_info, page, GrpcInfoRequest};
use roster_registry::Registration;
use tls::GrpcTls;

/// A connection silent this long is probed with `ClientDetectionRequest` (Nacos: 20 s).
const IDLE_PROBE_MS: u64 = 20_000;
/// ... and closed when the probe is unanswered this long (Nacos: 5 s).
const PROBE_TIMEOUT_MS: u64 = 5_000;
/// An unacknowledged push is sent again after this long, up to [`PUSH_ATTEMPTS`] times.
const PUSH_ACK_TIMEOUT_MS: u64 = 5_000;
const PUSH_ATTEMPTS: u32 = 3;
/// How long after a subscription its first push goes out (Nacos: 500 ms).
const SUBSCRIBE_PUSH_DELAY: Duration = Duration::from_millis(500);

/// The gRPC side of a node. Cheap to share (`Arc`).
pub struct GrpcServer {
    app: AppState,
    /// Live connections.
    pub connections: Connections,
    /// Source of strictly increasing `lastRefTime` values (clients drop a push whose
    /// `lastRefTime` is not newer than what they hold).
    last_ref: AtomicU64,
    /// This server, for tasks it starts from `&self`.
    me: std::sync::Weak<GrpcServer>,
}

/// A naming request body, read leniently: every field optional, `null` accepted, unknown
/// keys ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct NamingRequest {
    namespace: Option<String>,
    service_name: Option<String>,
    group_name: Option<String>,
    r#type: Option<String>,
    instance: Option<WireInstance>,
    instances: Option<Vec<WireInstance>>,
    cluster: Option<String>,
    clusters: Option<String>,
    healthy_only: Option<bool>,
    /// The Python client's spelling of `healthyOnly`.
    health_only: Option<bool>,
    subscribe: Option<bool>,
    page_no: Option<u64>,
    page_size: Option<u64>,
}

/// An instance as clients send it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WireInstance {
    instance_id: Option<String>,
    ip: Option<String>,
    port: Option<i64>,
    weight: Option<f64>,
    healthy: Option<bool>,
    enabled: Option<bool>,
    ephemeral: Option<bool>,
    cluster_name: Option<String>,
    metadata: Option<HashMap<String, Value>>,
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

/// Reads a naming request's JSON body; a body that is not one answers `ErrorResponse`
/// 400 with the reason (bytes that are not UTF-8 JSON included).
fn parse_request(kind: RequestKind, body: &[u8]) -> Result<NamingRequest, Box<Payload>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new(failure(
            "ErrorResponse",
            400,
            &format!("Invalid request: the body is not a {}: {e}", kind.name()),
        ))
    })
}

/// Reads an instance a client sent (`client`: the connection registering it, if
/// ephemeral) by the rules every face registers by; the address is kept in normal form.
fn registration(
    wire: &WireInstance,
    client: Option<&Arc<str>>,
    max_metadata_bytes: usize,
) -> Result<Registration, Error> {
    let ip = wire
        .ip
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| Error::missing("instance.ip"))?;
    let port = wire.port.ok_or_else(|| Error::missing("instance.port"))?;
    let port = check_port("instance.port", port)?;
    let cluster = wire
        .cluster_name
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or(DEFAULT_CLUSTER);
    let metadata: Metadata = wire
        .metadata
        .iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect();
    let mut reg = Registration {
        ip: ip.to_string(),
        port,
        cluster: cluster.to_string(),
        weight: wire.weight.unwrap_or(1.0),
        healthy: wire.healthy.unwrap_or(true),
        enabled: wire.enabled.unwrap_or(true),
        ephemeral: wire.ephemeral.unwrap_or(true),
        metadata,
        instance_id: wire.instance_id.clone().filter(|i| !i.trim().is_empty()),
        client: client.map(|c| c.to_string()),
        owner: None,
    };
    validate::registration(&mut reg, "instance.", max_metadata_bytes)?;
    Ok(reg)
}

impl GrpcServer {
    /// A gRPC server over the node's state.
    pub fn new(app: AppState, connections: Connections) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            app,
            connections,
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

    /// Whether `identity` may make this naming request, by its permissions as they are
    /// now and what its kind needs ([`RequestKind::access`]). A request that names no
    /// valid service is refused as `naming` would refuse it.
    fn authorize(
        &self,
        identity: &Identity,
        kind: RequestKind,
        request: &NamingRequest,
    ) -> Result<bool, Error> {
        if identity.admin {
            return Ok(true);
        }
        let auth = &self.app.auth;
        let action = match kind.access() {
            Access::Namespace => {
                let (namespace, _) = Self::scope(request)?;
                return Ok(auth.allowed(identity, &Resource::Namespace(&namespace), Action::Read));
            }
            Access::Service(action) => action,
            // Not naming requests: never asked here.
            Access::Public | Access::Config(_) => Action::Write,
        };
        let key = Self::service_key(request)?;
        let service = Resource::Service {
            namespace: &key.namespace,
            group: &key.group,
            name: &key.name,
        };
        Ok(auth.allowed(identity, &service, action))
    }

    /// The namespace and group a request addresses (defaults: public, DEFAULT_GROUP).
    fn scope(request: &NamingRequest) -> Result<(String, String), Error> {
        let namespace = request
            .namespace
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(PUBLIC_NAMESPACE);
        check_namespace_id("namespace", namespace)?;
        let group = request
            .group_name
            .as_deref()
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .unwrap_or(DEFAULT_GROUP);
        check_group(group)?;
        Ok((namespace.to_string(), group.to_string()))
    }

    fn service_key(request: &NamingRequest) -> Result<ServiceKey, Error> {
        let (namespace, group) = Self::scope(request)?;
        let raw = request
            .service_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Error::missing("serviceName"))?;
        // A grouped name (`group@@name`) overrides groupName.
        let (group, name) = match raw.split_once("@@") {
            Some((g, n)) => (g.to_string(), n.to_string()),
            None => (group, raw.to_string()),
        };
        check_group(&group)?;
        check_service_name(&name)?;
        Ok(ServiceKey::new(&namespace, &group, &name))
    }

    async fn naming(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        request: NamingRequest,
    ) -> Result<Answer, Error> {
        match kind {
            RequestKind::ServiceQuery | RequestKind::SubscribeService => {
                let key = Self::service_key(&request)?;
                self.read(kind, conn, identity, key, request)
            }
            _ => self
                .change(kind, conn, identity, request)
                .await
                .map(Answer::Fields),
        }
    }

    /// A query or a subscription.
    fn read(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        key: ServiceKey,
        request: NamingRequest,
    ) -> Result<Answer, Error> {
        if kind == RequestKind::ServiceQuery {
            let clusters = request.cluster.clone().unwrap_or_default();
            parse_cluster_list(&clusters)?;
            let healthy_only = request
                .healthy_only
                .or(request.health_only)
                .unwrap_or(false);
            let info = self.service_info(&key, &clusters, healthy_only);
            return Ok(Answer::ServiceInfo {
                subscribed: false,
                info,
            });
        }
        let clusters = request.clusters.clone().unwrap_or_default();
        parse_cluster_list(&clusters)?;
        let info = self.service_info(&key, &clusters, false);
        if request.subscribe.unwrap_or(true) {
            // Kept while its subscriber may read the service (see `run_push`).
            let reader = self.app.auth.reader(identity);
            conn.subscribe(key.clone(), clusters.clone(), reader);
            // Also push it, as Nacos does, a moment later: a push that overtook the
            // reply would make the client discard the reply as stale.
            if let Some(me) = self.me.upgrade() {
                let (conn, key) = (conn.clone(), key.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(SUBSCRIBE_PUSH_DELAY).await;
                    if conn.subscriptions.lock().contains_key(&key) {
                        me.push(&conn, &key, &clusters, 1);
                    }
                });
            }
        } else {
            conn.subscriptions.lock().remove(&key);
        }
        Ok(Answer::ServiceInfo {
            subscribed: true,
            info,
        })
    }

    /// A service list, or a change to instances.
    async fn change(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        request: NamingRequest,
    ) -> Result<Value, Error> {
        let registry = &self.app.registry;
        let max_metadata = self.app.limits.max_metadata_bytes;
        if kind == RequestKind::ServiceList {
            // Lists a group; it names no service. Only what the caller may read.
            let (namespace, group) = Self::scope(&request)?;
            let page_no = request.page_no.unwrap_or(1).max(1) as usize;
            let page_size = request.page_size.unwrap_or(10).clamp(1, 10_000) as usize;
            let mut names = registry.service_names(&namespace, &group);
            names.retain(|name| {
                let service = Resource::Service {
                    namespace: &namespace,
                    group: &group,
                    name,
                };
                self.app.auth.allowed(identity, &service, Action::Read)
            });
            let count = names.len();
            let page: Vec<String> = page(names, page_no, page_size);
            return Ok(json!({ "count": count, "serviceNames": page }));
        }
        let key = Self::service_key(&request)?;
        match kind {
            RequestKind::Instance | RequestKind::PersistentInstance => {
                let op = request.r#type.clone().unwrap_or_default();
                let wire = request
                    .instance
                    .as_ref()
                    .ok_or_else(|| Error::missing("instance"))?;
                let persistent =
                    kind == RequestKind::PersistentInstance || wire.ephemeral == Some(false);
                let writes = self.app.writes();
                match (op.as_str(), persistent) {
                    ("registerInstance", false) => {
                        // One instance per service per connection, as in Nacos 2.x.
                        let reg = registration(wire, Some(&conn.client), max_metadata)?;
                        tracing::debug!(connection = %conn.id, service = %key.grouped(), ip = %reg.ip, port = reg.port, "grpc client registers");
                        writes.replace_connection_instances(&conn.client, &key, &[reg])?;
                    }
                    ("deregisterInstance", false) => {
                        tracing::debug!(connection = %conn.id, service = %key.grouped(), "grpc client deregisters");
                        writes.replace_connection_instances(&conn.client, &key, &[])?;
                    }
                    ("registerInstance", true) => {
                        let mut reg = registration(wire, None, max_metadata)?;
                        reg.ephemeral = false;
                        writes.register(key, reg).await?;
                    }
                    ("deregisterInstance", true) => {
                        let reg = registration(wire, None, max_metadata)?;
                        writes.deregister_persistent(key, &reg.ip, reg.port).await?;
                    }
                    _ => return Err(Error::bad_request(format!("Unsupported request type {op}"))),
                }
                self.app.metrics.instance_write(&op);
                Ok(json!({ "type": op }))
            }
            RequestKind::BatchInstance => {
                let op = request.r#type.clone().unwrap_or_default();
                if op != "batchRegisterInstance" {
                    return Err(Error::bad_request(format!("Unsupported request type {op}")));
                }
                let wires = request.instances.as_deref().unwrap_or_default();
                let regs = wires
                    .iter()
                    .map(|w| registration(w, Some(&conn.client), max_metadata))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(r) = regs.iter().find(|r| !r.ephemeral) {
                    return Err(Error::illegal(
                        "instances",
                        format!(
                            "batch registration is for ephemeral instances only ({}:{} is not).",
                            r.ip, r.port
                        ),
                    ));
                }
                // The batch replaces the connection's instances of the service.
                self.app
                    .writes()
                    .replace_connection_instances(&conn.client, &key, &regs)?;
                self.app.metrics.registrations.inc_by(regs.len() as u64);
                Ok(json!({ "type": op }))
            }
            _ => Err(Error::bad_request(format!(
                "Unsupported request {}",
                kind.name()
            ))),
        }
    }

    /// `ServiceInfo` as gRPC clients expect it, serialized: the plain name, the group,
    /// the clusters string as given, and a `lastRefTime` newer than any before.
    fn service_info(&self, key: &ServiceKey, clusters_raw: &str, healthy_only: bool) -> Vec<u8> {
        let clusters = parse_cluster_list(clusters_raw).unwrap_or_default();
        let view = self.app.registry.service_by_key(key).map(|s| s.view());
        let grouped = key.grouped();
        grpc_service_info(
            view.as_deref(),
            &GrpcInfoRequest {
                name: &key.name,
                group: &key.group,
                grouped: &grouped,
                clusters_raw,
                clusters: &clusters,
                healthy_only,
                now_ms: self.next_ref_time(),
            },
        )
    }

    /// Pushes the current state of `key` to one subscriber.
    fn push(&self, conn: &Arc<Connection>, key: &ServiceKey, clusters: &str, attempt: u32) {
        let info = self.service_info(key, clusters, false);
        self.push_info(conn, key, &info, attempt);
    }

    /// Pushes `info`, the serialized state of `key`, to one subscriber.
    fn push_info(&self, conn: &Arc<Connection>, key: &ServiceKey, info: &[u8], attempt: u32) {
        let request_id = self.connections.next_request_id();
        let mut body = Vec::with_capacity(info.len() + 96);
        body.extend_from_slice(br#"{"headers":{},"requestId":"#);
        serde_json::to_writer(&mut body, &request_id).expect("strings serialize");
        body.extend_from_slice(br#","module":"naming","serviceInfo":"#);
        body.extend_from_slice(info);
        body.push(b'}');
        conn.track(&request_id, Pushed::Service(key.clone()), attempt);
        if conn.send(Payload::from_json("NotifySubscriberRequest", body)) {
            self.app.metrics.grpc_push("sent");
        } else {
            conn.acknowledge(&request_id);
            self.app.metrics.grpc_push("failed");
        }
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
                        "abilityTable": { "supportPersistentInstanceByGrpc": true },
                        "module": "internal",
                    });
                    conn.send(Payload::new("SetupAckRequest", &ack));
                }
            }
            // Acks: nacos-sdk-python 3.x answers config pushes as NotifySubscriberResponse.
            "NotifySubscriberResponse"
            | "ConfigChangeNotifyResponse"
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

    /// Forgets a connection: its instances and subscriptions go, and the removal
    /// replicates like any change.
    fn disconnect(&self, conn: &Arc<Connection>) {
        if self.connections.remove(conn) {
            self.app
                .metrics
                .grpc_connections
                .set(self.connections.count() as i64);
            conn.listens.lock().clear();
            let removed = self.app.registry.remove_client(&conn.client, now_ms());
            tracing::info!(connection = %conn.id, instances = removed, "grpc client disconnected");
        }
    }

    /// Pushes changes to subscribers until `stopping`; drops the subscriptions of
    /// those who may no longer read them as soon as the auth data changes.
    pub async fn run_push(
        self: Arc<Self>,
        changes: Arc<ChangeSet>,
        mut stopping: watch::Receiver<bool>,
    ) {
        let mut access = self.app.auth.changes();
        loop {
            tokio::select! {
                _ = changes.changed() => {}
                Ok(()) = access.changed() => {
                    self.connections.drop_unreadable();
                    continue;
                }
                _ = stopping.changed() => return,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Raft applies in commit order: a revocation not swept yet may have been
            // applied before these changes, and its subscribers must not hear of them.
            if access_changed(&mut access) {
                self.connections.drop_unreadable();
            }
            let keys = changes.drain();
            // One serialization per service and clusters string, whatever the number
            // of subscribers that want it.
            let mut infos: HashMap<(ServiceKey, String), Vec<u8>> = HashMap::new();
            for conn in self.connections.all() {
                let wanted: Vec<(ServiceKey, String)> = {
                    let subs = conn.subscriptions.lock();
                    keys.iter()
                        .filter_map(|k| subs.get(k).map(|s| (k.clone(), s.clusters.clone())))
                        .collect()
                };
                for (key, clusters) in wanted {
                    let info = infos.entry((key.clone(), clusters)).or_insert_with_key(
                        |(key, clusters)| self.service_info(key, clusters, false),
                    );
                    self.push_info(&conn, &key, info, 1);
                }
            }
        }
    }

    /// Re-sends unacknowledged pushes and probes, then drops, silent connections, until
    /// `stopping`; then tells every client to reconnect elsewhere.
    pub async fn run_upkeep(self: Arc<Self>, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => {
                    self.reset_all();
                    return;
                }
            }
            let now = now_ms();
            for conn in self.connections.all() {
                // Sent again while the client still wants it, up to PUSH_ATTEMPTS.
                for p in conn.take_late(now, PUSH_ACK_TIMEOUT_MS) {
                    let attempt = p.attempts + 1;
                    let resent = p.attempts < PUSH_ATTEMPTS
                        && match &p.what {
                            Pushed::Service(key) => {
                                let clusters = conn.subscriptions.lock().get(key).cloned();
                                clusters
                                    .map(|s| self.push(&conn, key, &s.clusters, attempt))
                                    .is_some()
                            }
                            Pushed::Config(key) => self.push_config(&conn, key, attempt),
                        };
                    if !resent {
                        self.app.metrics.grpc_push("failed");
                    }
                }
                let probe = conn.detection_sent();
                if probe == 0 && conn.idle_ms(now) >= IDLE_PROBE_MS {
                    let body = json!({ "headers": {}, "requestId": self.connections.next_request_id(), "module": "internal" });
                    conn.send(Payload::new("ClientDetectionRequest", &body));
                    conn.mark_detection(now);
                } else if probe > 0 && now.saturating_sub(probe) > PROBE_TIMEOUT_MS {
                    tracing::info!(connection = %conn.id, "grpc client did not answer the detection probe; closing");
                    conn.close(Status::unavailable(
                        "no answer to the client detection probe",
                    ));
                    self.disconnect(&conn);
                }
            }
        }
    }

    /// Asks every client to reconnect to another node, then ends the streams (clients
    /// that cannot parse `ConnectResetRequest` reconnect when their stream ends).
    fn reset_all(&self) {
        for conn in self.connections.all() {
            let body = json!({
                "headers": {},
                "requestId": self.connections.next_request_id(),
                "serverIp": "",
                "serverPort": "",
                "connectionId": conn.id,
                "module": "internal",
            });
            conn.send(Payload::new("ConnectResetRequest", &body));
            conn.close(Status::unavailable(
                "this node is shutting down; connect to another",
            ));
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

/// The TLS settings of `--grpc-tls-cert`, `--grpc-tls-key` and `--grpc-tls-optional`,
/// checked: unreadable files, or a certificate and key that do not parse or do not fit,
/// stop the node before it serves anything.
pub fn tls_config(args: &crate::node::args::NodeArgs) -> anyhow::Result<Option<GrpcTls>> {
    match (&args.grpc_tls_cert, &args.grpc_tls_key) {
        (Some(cert), Some(key)) => Ok(Some(GrpcTls::load(cert, key, args.grpc_tls_optional)?)),
        _ => Ok(None),
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

/// Whether the auth data changed since `access` last saw it (now marked seen): the push
/// loops then sweep what may no longer be read before they push.
fn access_changed(access: &mut watch::Receiver<u64>) -> bool {
    let changed = access.has_changed().unwrap_or(false);
    if changed {
        access.borrow_and_update();
    }
    changed
}
