//! A load of gRPC clients that behave as the Nacos 2.x/3.x clients do, for the fault and
//! balancing tests (`rolling`, `rebalance`): each holds one connection, sets it up,
//! registers its one ephemeral instance, subscribes if its shape says so, and answers
//! the server's requests. When its node goes away it connects to the next server; when
//! asked to move (`ConnectResetRequest`) it connects to the server the request names
//! (its `serverIp`, and `serverPort` + 1000, as the Java client does) or, when it names
//! none, to the next one; either way it registers and subscribes again there.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roster_tests::Value;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;

use crate::grpc::{decode, payload, Payload};

/// What client `k` registers and subscribes to.
pub(crate) struct Shape {
    /// The service its instance is in (group `DEFAULT_GROUP`, namespace `public`).
    pub service: fn(usize) -> String,
    /// Its instance's IP (port 8080).
    pub ip: fn(usize) -> String,
    /// The services it subscribes to.
    pub subscriptions: fn(usize) -> Vec<String>,
}

/// What the clients saw.
pub(crate) struct Observed {
    /// Pushes received.
    pub pushes: AtomicUsize,
    /// Sessions opened (first connections and reconnections).
    pub sessions: AtomicUsize,
    /// Every empty list a subscription answer or push showed, and where.
    pub empty: Mutex<Vec<String>>,
    /// Per client, the server (1-based, in the servers list) it last registered on; 0
    /// while it has none.
    pub on: Vec<AtomicUsize>,
    /// Per client, when the server asked it to move to a named server, in order.
    pub redirects: Vec<Mutex<Vec<Instant>>>,
}

impl Observed {
    pub(crate) fn new(clients: usize) -> Self {
        Self {
            pushes: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            empty: Mutex::new(Vec::new()),
            on: (0..clients).map(|_| AtomicUsize::new(0)).collect(),
            redirects: (0..clients).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// How many clients are registered on server `i` (1-based).
    pub(crate) fn on_server(&self, i: usize) -> usize {
        self.on
            .iter()
            .filter(|n| n.load(Ordering::Relaxed) == i)
            .count()
    }

    /// Moves to a named server, all clients together.
    pub(crate) fn redirects(&self) -> usize {
        self.redirects.iter().map(|r| r.lock().unwrap().len()).sum()
    }

    fn empty(&self, what: String) {
        self.empty.lock().unwrap().push(what);
    }
}

/// One client.
pub(crate) struct Client {
    /// Its index.
    pub k: usize,
    /// The servers' gRPC addresses (`127.0.0.1:port`).
    pub servers: Arc<Vec<String>>,
    /// Its first server, an index into `servers`.
    pub first: usize,
    /// The token its requests carry.
    pub token: String,
    /// Set when the test is over.
    pub stop: Arc<AtomicBool>,
    /// Shared by all clients.
    pub seen: Arc<Observed>,
    /// Shared by all clients.
    pub shape: Arc<Shape>,
}

/// Why a session ended.
enum End {
    /// The test is over.
    Stopped,
    /// The server went away (why): connect to the next one.
    Lost(String),
    /// The server asked it to move to this gRPC address.
    Moved(String),
}

type Grpc = tonic::client::Grpc<tonic::transport::Channel>;

impl Client {
    /// Sessions until the test stops, each on the server the last one ended with.
    pub(crate) async fn run(self) {
        let mut server = self.servers[self.first % self.servers.len()].clone();
        loop {
            let end = self.session(&server).await;
            self.seen.on[self.k].store(0, Ordering::Relaxed);
            match end {
                End::Stopped => return,
                End::Moved(to) => server = to,
                End::Lost(why) => {
                    if self.k == 0 {
                        eprintln!("client 0 moves on from {server}: {why}");
                    }
                    let at = self.servers.iter().position(|s| *s == server).unwrap_or(0);
                    server = self.servers[(at + 1) % self.servers.len()].clone();
                    tokio::time::sleep(Duration::from_millis(100 + (self.k % 10) as u64 * 30))
                        .await;
                }
            }
        }
    }

    /// Connects to `addr`, sets the connection up, registers (and subscribes), then
    /// answers the server's requests until the connection ends or the test stops.
    async fn session(&self, addr: &str) -> End {
        let channel = match tokio::time::timeout(
            Duration::from_secs(5),
            tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect(),
        )
        .await
        {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => return End::Lost(format!("connect: {e}")),
            Err(_) => return End::Lost("connect timed out".into()),
        };
        let mut grpc = tonic::client::Grpc::new(channel);
        let (tx, rx) = mpsc::channel::<Payload>(16);
        if grpc.ready().await.is_err() {
            return End::Lost("not ready".into());
        }
        let stream = grpc
            .streaming(
                tonic::Request::new(ReceiverStream::new(rx)),
                PathAndQuery::from_static("/BiRequestStream/requestBiStream"),
                tonic_prost::ProstCodec::<Payload, Payload>::default(),
            )
            .await;
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(e) => return End::Lost(format!("stream: {e}")),
        };
        let setup = json!({"clientVersion":"Roster-Test:v1","tenant":"","labels":{"source":"sdk","module":"naming"},"abilityTable":{}});
        if tx
            .send(payload("ConnectionSetupRequest", &setup, None))
            .await
            .is_err()
        {
            return End::Lost("setup not sent".into());
        }
        match tokio::time::timeout(Duration::from_secs(10), stream.message()).await {
            Ok(Ok(Some(p))) if decode(&p).0 == "SetupAckRequest" => {}
            other => return End::Lost(format!("no setup ack: {:?}", other.map(|r| r.is_ok()))),
        }
        self.seen.sessions.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.register(&mut grpc).await {
            return End::Lost(e);
        }
        let node = 1 + self.servers.iter().position(|s| s == addr).unwrap_or(99);
        self.seen.on[self.k].store(node, Ordering::Relaxed);
        for service in (self.shape.subscriptions)(self.k) {
            let body = json!({"namespace":"public","serviceName":service,"groupName":"DEFAULT_GROUP","subscribe":true,"clusters":""});
            match self.unary(&mut grpc, "SubscribeServiceRequest", body).await {
                Ok((_, body)) => self.check(
                    &body["serviceInfo"],
                    &format!("subscribe answer from {addr}"),
                ),
                Err(e) => return End::Lost(e),
            }
        }
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                () = tokio::time::sleep(Duration::from_millis(200)) => {
                    if self.stop.load(Ordering::Relaxed) {
                        return End::Stopped;
                    }
                    continue;
                }
            };
            let (kind, body) = match message {
                Ok(Some(p)) => decode(&p),
                Ok(None) => return End::Lost("stream ended".into()),
                Err(e) => return End::Lost(format!("stream: {e}")),
            };
            let answer = kind.replace("Request", "Response");
            if kind == "NotifySubscriberRequest" {
                self.seen.pushes.fetch_add(1, Ordering::Relaxed);
                self.check(&body["serviceInfo"], &format!("push from {addr}"));
            }
            let ack = json!({"resultCode":200,"errorCode":0,"requestId":body["requestId"]});
            if tx.send(payload(&answer, &ack, None)).await.is_err() {
                return End::Lost("stream closed".into());
            }
            if kind == "ConnectResetRequest" {
                return match redirect(&body) {
                    Some(to) => {
                        self.seen.redirects[self.k]
                            .lock()
                            .unwrap()
                            .push(Instant::now());
                        End::Moved(to)
                    }
                    None => End::Lost("asked to move".into()),
                };
            }
        }
    }

    /// Registers this client's instance on the connection.
    async fn register(&self, grpc: &mut Grpc) -> Result<(), String> {
        let body = json!({"namespace":"public","serviceName":(self.shape.service)(self.k),
            "groupName":"DEFAULT_GROUP","type":"registerInstance","instance":{
            "ip":(self.shape.ip)(self.k),"port":8080,"weight":1.0,
            "healthy":true,"enabled":true,"ephemeral":true,"clusterName":"DEFAULT",
            "metadata":{"dubbo.metadata.revision":"a1b2c3d4e5f6","side":"provider"}},"module":"naming"});
        let (kind, answer) = self.unary(grpc, "InstanceRequest", body).await?;
        if kind == "InstanceResponse" && answer["success"] == true {
            Ok(())
        } else {
            Err(format!("register answered {kind} {answer}"))
        }
    }

    async fn unary(
        &self,
        grpc: &mut Grpc,
        kind: &str,
        body: Value,
    ) -> Result<(String, Value), String> {
        grpc.ready().await.map_err(|e| e.to_string())?;
        let call = grpc.unary(
            tonic::Request::new(payload(kind, &body, Some(&self.token))),
            PathAndQuery::from_static("/Request/request"),
            tonic_prost::ProstCodec::<Payload, Payload>::default(),
        );
        match tokio::time::timeout(Duration::from_secs(10), call).await {
            Ok(Ok(answer)) => Ok(decode(&answer.into_inner())),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("{kind} timed out")),
        }
    }

    /// Records `info` (a `serviceInfo`) if it lists nothing.
    fn check(&self, info: &Value, what: &str) {
        if info["hosts"].as_array().is_some_and(|h| h.is_empty()) {
            self.seen.empty(format!("client {} {what}: {info}", self.k));
        }
    }
}

/// The gRPC address a `ConnectResetRequest` names, as a Java client reads it: its
/// `serverIp` and its `serverPort` plus the gRPC offset (1000); none when it names no
/// server.
fn redirect(request: &Value) -> Option<String> {
    let ip = request["serverIp"].as_str().filter(|ip| !ip.is_empty())?;
    let port: u16 = request["serverPort"].as_str()?.parse().ok()?;
    Some(format!("{ip}:{}", port.checked_add(1000)?))
}
