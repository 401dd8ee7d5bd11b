//! A rolling restart of three nodes under load (issue 21, item 3): a thousand ephemeral
//! gRPC clients that behave as Nacos 2.x clients do (each holds one connection, registers
//! its instance, and when its node goes away connects to the next server and registers
//! again), some of them subscribed; persistent writes through every node; readers listing
//! both services on every node. Each node in turn is stopped (SIGTERM), started again and
//! waited for until it holds everything. No acknowledged persistent write may be lost, and
//! no read or push may show an empty list for either service, which is never empty.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, Cluster, Value};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;

use crate::grpc::{decode, payload, Payload};

/// Ephemeral gRPC clients, one instance each.
const CLIENTS: usize = 1_000;
/// Of them, the ones also subscribed to both services.
const SUBSCRIBERS: usize = 10;
/// The service the gRPC clients register in.
const EPHEMERAL: &str = "rolling-eph";
/// The service the persistent writes go to.
const PERSISTENT: &str = "rolling-per";
/// Longest a node may take to hold everything again after it restarts.
const CATCH_UP: Duration = Duration::from_secs(60);

/// What the readers, subscribers and writer saw.
#[derive(Default)]
struct Seen {
    /// List answers (HTTP 200) read.
    reads: AtomicUsize,
    /// Pushes received by the subscribers for either service.
    pushes: AtomicUsize,
    /// Sessions the clients opened (first connections and reconnections).
    sessions: AtomicUsize,
    /// Every empty list seen, and where.
    empty: Mutex<Vec<String>>,
    /// Persistent instances whose registration was acknowledged.
    acked: Mutex<BTreeSet<String>>,
    /// Per client, the node (1-based) it last registered on, 0 while it has none.
    on: Vec<AtomicUsize>,
}

impl Seen {
    fn empty(&self, what: String) {
        self.empty.lock().unwrap().push(what);
    }
}

fn client_ip(k: usize) -> String {
    format!("127.21.{}.{}", k / 250, 1 + k % 250)
}

fn persistent_ip(k: usize) -> String {
    format!("127.22.{}.{}", k / 250, 1 + k % 250)
}

#[test]
fn a_rolling_restart_under_load_loses_no_write_and_never_lists_empty() {
    let mut c = Cluster::start(3, &[]);
    let token = c.nodes[0].token();
    let http: Arc<Vec<String>> = Arc::new(c.nodes.iter().map(|n| n.addr()).collect());
    let grpc: Arc<Vec<String>> = Arc::new(
        c.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.http_port + 1000))
            .collect(),
    );
    let seen = Arc::new(Seen {
        on: (0..CLIENTS).map(|_| AtomicUsize::new(0)).collect(),
        ..Seen::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop_load = Arc::new(AtomicBool::new(false));

    // The persistent service is never empty: one instance before any load.
    let seed = persistent_ip(0);
    c.nodes[0]
        .call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName={PERSISTENT}&ip={seed}&port=8080&ephemeral=false"),
        )
        .expect(200);
    seen.acked.lock().unwrap().insert(format!("{seed}:8080"));

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|k| {
            let client = Client {
                k,
                servers: grpc.clone(),
                token: token.clone(),
                stop: stop.clone(),
                seen: seen.clone(),
            };
            rt.spawn(client.run())
        })
        .collect();
    eventually(Duration::from_secs(90), || {
        let held = ips(&http[0], &token, EPHEMERAL).map_or(0, |ips| ips.len());
        if held == CLIENTS {
            Ok(())
        } else {
            Err(format!(
                "{held} of {CLIENTS} ephemeral instances registered"
            ))
        }
    });

    let writer = {
        let (http, token, stop, seen) =
            (http.clone(), token.clone(), stop_load.clone(), seen.clone());
        std::thread::spawn(move || write_persistent(&http, &token, &stop, &seen))
    };
    let readers: Vec<_> = (0..http.len())
        .map(|i| {
            let (http, token, stop, seen) =
                (http.clone(), token.clone(), stop_load.clone(), seen.clone());
            std::thread::spawn(move || read_lists(&http[i], &token, &stop, &seen))
        })
        .collect();

    for i in 0..c.nodes.len() {
        let started = Instant::now();
        assert!(
            c.nodes[i].terminate().success(),
            "node {} stops cleanly",
            i + 1
        );
        c.nodes[i].start_again();
        c.nodes[i].wait_ready();
        let ready = started.elapsed();
        let acked = seen.acked.lock().unwrap().clone();
        eventually(CATCH_UP, || holds_everything(&http[i], &token, &acked));
        eprintln!(
            "node {}: ready {ready:?} after SIGTERM, holding everything after {:?}",
            i + 1,
            started.elapsed()
        );
    }

    // The writer and readers stop first: the clients must stay connected until every node
    // has been seen holding them all (on the way out their instances go).
    stop_load.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    for reader in readers {
        reader.join().expect("reader");
    }
    let acked = seen.acked.lock().unwrap().clone();
    for (i, addr) in http.iter().enumerate() {
        eventually(Duration::from_secs(30), || {
            holds_everything(addr, &token, &acked).map_err(|e| {
                let held: BTreeSet<String> = ips(addr, &token, EPHEMERAL)
                    .unwrap_or_default()
                    .into_iter()
                    .collect();
                let missing: Vec<String> = (0..CLIENTS)
                    .filter(|&k| !held.contains(&format!("{}:8080", client_ip(k))))
                    .take(5)
                    .map(|k| {
                        let elsewhere: Vec<bool> = http
                            .iter()
                            .map(|a| {
                                ips(a, &token, EPHEMERAL)
                                    .unwrap_or_default()
                                    .contains(&format!("{}:8080", client_ip(k)))
                            })
                            .collect();
                        format!(
                            "client {k} on node {} held by {elsewhere:?}",
                            seen.on[k].load(Ordering::Relaxed)
                        )
                    })
                    .collect();
                format!("node {}: {e}; missing {missing:?}", i + 1)
            })
        });
    }
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for client in clients {
            tokio::time::timeout(Duration::from_secs(10), client)
                .await
                .expect("clients stop")
                .expect("client task");
        }
    });

    let empty = seen.empty.lock().unwrap().clone();
    assert!(empty.is_empty(), "empty lists seen: {empty:?}");
    let (reads, pushes, sessions) = (
        seen.reads.load(Ordering::Relaxed),
        seen.pushes.load(Ordering::Relaxed),
        seen.sessions.load(Ordering::Relaxed),
    );
    eprintln!(
        "{reads} list reads, {pushes} pushes, {sessions} client sessions, {} persistent writes acknowledged",
        acked.len()
    );
    // The checks above mean something only if the load ran through the restarts.
    assert!(reads >= 300, "only {reads} list reads");
    assert!(pushes >= SUBSCRIBERS * 3, "only {pushes} pushes");
    assert!(acked.len() >= 50, "only {} persistent writes", acked.len());
    assert!(
        sessions > CLIENTS + CLIENTS / 2,
        "the restarts moved only {} clients",
        sessions - CLIENTS
    );
}

/// Whether the node at `addr` lists every client's instance and every acknowledged
/// persistent one.
fn holds_everything(addr: &str, token: &str, acked: &BTreeSet<String>) -> Result<(), String> {
    let ephemeral = ips(addr, token, EPHEMERAL)?;
    if ephemeral.len() != CLIENTS {
        return Err(format!("{} of {CLIENTS} ephemeral", ephemeral.len()));
    }
    let persistent: BTreeSet<String> = ips(addr, token, PERSISTENT)?.into_iter().collect();
    let missing: Vec<_> = acked.difference(&persistent).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} acknowledged persistent instances missing, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(3)]
        ))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// `ip:port` of every instance the node lists for `service` (all, healthy or not), or
/// why it did not answer.
fn ips(addr: &str, token: &str, service: &str) -> Result<Vec<String>, String> {
    let list = list(&agent(), addr, token, service)?;
    Ok(hosts(&list)
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap_or(""), h["port"]))
        .collect())
}

fn hosts(list: &Value) -> Vec<Value> {
    list["hosts"].as_array().cloned().unwrap_or_default()
}

/// A v1 instance list, or why there is none (not answering, not 200).
fn list(agent: &ureq::Agent, addr: &str, token: &str, service: &str) -> Result<Value, String> {
    let mut answer = agent
        .get(format!(
            "http://{addr}/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false&accessToken={}",
            enc(token)
        ))
        .call()
        .map_err(|e| e.to_string())?;
    let status = answer.status().as_u16();
    let body = answer
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status} {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
}

/// Registers persistent instances through each node in turn until `stop`, recording the
/// acknowledged ones.
fn write_persistent(http: &[String], token: &str, stop: &AtomicBool, seen: &Seen) {
    let agent = agent();
    let mut k = 1;
    while !stop.load(Ordering::Relaxed) && k < 60_000 {
        let ip = persistent_ip(k);
        let addr = &http[k % http.len()];
        let answer = agent
            .post(format!(
                "http://{addr}/nacos/v1/ns/instance?serviceName={PERSISTENT}&ip={ip}&port=8080&ephemeral=false&accessToken={}",
                enc(token)
            ))
            .send_empty();
        if answer.is_ok_and(|a| a.status() == 200) {
            seen.acked.lock().unwrap().insert(format!("{ip}:8080"));
        }
        k += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Lists both services on the node at `addr` until `stop`; a 200 answer with no hosts
/// is recorded (a node that is down or not ready answers nothing or an error).
fn read_lists(addr: &str, token: &str, stop: &AtomicBool, seen: &Seen) {
    let agent = agent();
    while !stop.load(Ordering::Relaxed) {
        for service in [EPHEMERAL, PERSISTENT] {
            if let Ok(list) = list(&agent, addr, token, service) {
                seen.reads.fetch_add(1, Ordering::Relaxed);
                if hosts(&list).is_empty() {
                    seen.empty(format!("GET {service} on {addr}: {list}"));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One Nacos 2.x-style gRPC client.
struct Client {
    k: usize,
    servers: Arc<Vec<String>>,
    token: String,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
}

/// Why a session ended.
enum End {
    /// The test is over.
    Stopped,
    /// The server went away or asked the client to move (why): connect to the next one.
    Lost(String),
}

impl Client {
    /// Sessions until the test stops, each on the next server after the last one lost.
    async fn run(self) {
        let mut server = self.k % self.servers.len();
        loop {
            let end = self.session(&self.servers[server]).await;
            self.seen.on[self.k].store(0, Ordering::Relaxed);
            match end {
                End::Stopped => return,
                End::Lost(why) => {
                    if self.k == 0 {
                        eprintln!("client 0 moves on from {}: {why}", self.servers[server]);
                    }
                    server = (server + 1) % self.servers.len();
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
        let subscriber = self.k < SUBSCRIBERS;
        if subscriber {
            for service in [EPHEMERAL, PERSISTENT] {
                match self.unary(&mut grpc, "SubscribeServiceRequest", json!({"namespace":"public","serviceName":service,"groupName":"DEFAULT_GROUP","subscribe":true,"clusters":""})).await {
                    Ok((_, body)) => self.check(&body["serviceInfo"], &format!("subscribe answer from {addr}")),
                    Err(e) => return End::Lost(e),
                }
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
                return End::Lost("asked to move".into());
            }
        }
    }

    /// Registers this client's instance on the connection.
    async fn register(&self, grpc: &mut Grpc) -> Result<(), String> {
        let body = json!({"namespace":"public","serviceName":EPHEMERAL,"groupName":"DEFAULT_GROUP",
            "type":"registerInstance","instance":{"ip":client_ip(self.k),"port":8080,"weight":1.0,
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
            self.seen.empty(format!("{what}: {info}"));
        }
    }
}

type Grpc = tonic::client::Grpc<tonic::transport::Channel>;
