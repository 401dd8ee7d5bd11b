//! The Nacos 2.x gRPC protocol: a hand-rolled client that checks the wire (handshake,
//! types, errors, push, oversized and malformed messages, Nacos 3's fuzzy watch), the
//! real Rust `nacos-sdk` client, and gRPC clients across a three-node cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingServiceBuilder, ServiceInstance,
};
use nacos_sdk::api::props::ClientProps;
use roster_tests::{eventually, Cluster, Node, Value, ADMIN_PASSWORD};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;

#[derive(Clone, PartialEq, prost::Message)]
struct Metadata {
    #[prost(string, tag = "3")]
    r#type: String,
    #[prost(string, tag = "8")]
    client_ip: String,
    #[prost(map = "string, string", tag = "7")]
    headers: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Payload {
    #[prost(message, optional, tag = "2")]
    metadata: Option<Metadata>,
    #[prost(message, optional, tag = "3")]
    body: Option<Any>,
}

/// A request payload; panics if `body` names an instance address off this machine.
#[track_caller]
pub(crate) fn payload(kind: &str, body: &Value, token: Option<&str>) -> Payload {
    roster_tests::addresses::check_json(body);
    let mut headers = HashMap::new();
    if let Some(t) = token {
        headers.insert("accessToken".to_string(), t.to_string());
    }
    Payload {
        metadata: Some(Metadata {
            r#type: kind.into(),
            client_ip: "127.0.0.1".into(),
            headers,
        }),
        body: Some(Any {
            type_url: String::new(),
            value: serde_json::to_vec(body).unwrap(),
        }),
    }
}

pub(crate) fn decode(p: &Payload) -> (String, Value) {
    let kind = p
        .metadata
        .as_ref()
        .map(|m| m.r#type.clone())
        .unwrap_or_default();
    let body = serde_json::from_slice(&p.body.as_ref().unwrap().value).unwrap();
    (kind, body)
}

/// A gRPC client speaking the Nacos envelope by hand: unary calls and the bi-stream
/// share one HTTP/2 connection, as real clients do. Also the observer test's gRPC query
/// path (`observer/`).
pub(crate) struct RawClient {
    grpc: tonic::client::Grpc<tonic::transport::Channel>,
    to_server: Option<mpsc::Sender<Payload>>,
    from_server: Option<tonic::Streaming<Payload>>,
}

impl RawClient {
    pub(crate) async fn connect(addr: &str) -> Self {
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .expect("grpc connect");
        Self {
            grpc: tonic::client::Grpc::new(channel).max_encoding_message_size(64 * 1024 * 1024),
            to_server: None,
            from_server: None,
        }
    }

    /// A client on `addr` with its stream open and set up, as an SDK connects; an error
    /// instead of a panic when the node does not answer within `within` (the fault
    /// tests connect to nodes that may be down).
    pub(crate) async fn try_set_up(addr: &str, within: Duration) -> Result<Self, String> {
        let set_up = async {
            let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .map_err(|e| e.to_string())?
                .connect_timeout(within)
                .connect()
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready().await.map_err(|e| e.to_string())?;
            let (tx, rx) = mpsc::channel(16);
            let response = grpc
                .streaming(
                    tonic::Request::new(ReceiverStream::new(rx)),
                    PathAndQuery::from_static("/BiRequestStream/requestBiStream"),
                    tonic_prost::ProstCodec::default(),
                )
                .await
                .map_err(|e| format!("open stream: {e}"))?;
            let mut client = Self {
                grpc,
                to_server: Some(tx),
                from_server: Some(response.into_inner()),
            };
            let setup = json!({"clientVersion": "Roster-Test:v1", "tenant": "",
                               "labels": {"source": "sdk", "module": "naming"}, "abilityTable": {}});
            client
                .to_server
                .as_ref()
                .unwrap()
                .send(payload("ConnectionSetupRequest", &setup, None))
                .await
                .map_err(|e| e.to_string())?;
            loop {
                match client.next(within).await {
                    Some((kind, _)) if kind == "SetupAckRequest" => return Ok(client),
                    Some(_) => continue,
                    None => return Err("no SetupAckRequest".to_string()),
                }
            }
        };
        tokio::time::timeout(within, set_up)
            .await
            .unwrap_or_else(|_| Err(format!("not set up within {within:?}")))
    }

    pub(crate) async fn try_unary(&mut self, p: Payload) -> Result<Payload, tonic::Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        self.grpc
            .unary(
                tonic::Request::new(p),
                PathAndQuery::from_static("/Request/request"),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .map(|r| r.into_inner())
    }

    async fn unary(&mut self, kind: &str, body: Value, token: Option<&str>) -> (String, Value) {
        decode(
            &self
                .try_unary(payload(kind, &body, token))
                .await
                .expect("unary call"),
        )
    }

    pub(crate) async fn open_stream(&mut self) {
        let (tx, rx) = mpsc::channel(16);
        self.grpc.ready().await.unwrap();
        let response = self
            .grpc
            .streaming(
                tonic::Request::new(ReceiverStream::new(rx)),
                PathAndQuery::from_static("/BiRequestStream/requestBiStream"),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .expect("open stream");
        self.to_server = Some(tx);
        self.from_server = Some(response.into_inner());
    }

    pub(crate) async fn send(&self, kind: &str, body: Value) {
        self.to_server
            .as_ref()
            .unwrap()
            .send(payload(kind, &body, None))
            .await
            .unwrap();
    }

    /// The next server message on the stream, within `timeout`.
    async fn next(&mut self, timeout: Duration) -> Option<(String, Value)> {
        let stream = self.from_server.as_mut().unwrap();
        match tokio::time::timeout(timeout, stream.message()).await {
            Ok(Ok(Some(p))) => Some(decode(&p)),
            _ => None,
        }
    }

    /// Waits for a message of `kind`, answering pushes on the way.
    pub(crate) async fn expect(&mut self, kind: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (k, body) = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no {kind} within {timeout:?}"));
            if k == "NotifySubscriberRequest" {
                self.send(
                    "NotifySubscriberResponse",
                    json!({"resultCode":200,"errorCode":0,"requestId":body["requestId"]}),
                )
                .await;
            }
            if k == kind {
                return body;
            }
        }
    }

    fn close_stream(&mut self) {
        self.to_server = None;
        self.from_server = None;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn grpc_addr(node: &Node) -> String {
    format!("127.0.0.1:{}", node.http_port + 1000)
}

fn http_ips(node: &Node, query: &str) -> Vec<String> {
    let v = node
        .call("GET", &format!("/nacos/v1/ns/instance/list?{query}"))
        .expect(200)
        .json();
    let mut ips: Vec<String> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect();
    ips.sort();
    ips
}

fn register_body(service: &str, ip: &str, port: i64) -> Value {
    json!({"headers":{},"requestId":null,"namespace":"public","serviceName":service,"groupName":"DEFAULT_GROUP",
           "type":"registerInstance","instance":{"ip":ip,"port":port,"weight":1.0,"healthy":true,"enabled":true,
           "ephemeral":true,"clusterName":"DEFAULT","metadata":{"v":"1"},"instanceId":null},"module":"naming"})
}

#[test]
fn the_wire_protocol_handshake_requests_errors_and_push() {
    let node = Node::start();
    let token = node.token();
    let rt = runtime();
    rt.block_on(async {
        let mut c = RawClient::connect(&grpc_addr(&node)).await;
        // A server check works before any stream.
        let (kind, body) = c.unary("ServerCheckRequest", json!({"headers":{},"requestId":""}), None).await;
        assert_eq!(kind, "ServerCheckResponse");
        assert!(body["connectionId"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!((body["resultCode"].clone(), body["errorCode"].clone(), body["success"].clone()), (json!(200), json!(0), json!(true)));
        assert_eq!(body["supportAbilityNegotiation"], true);
        // Naming before the stream: the connection is unregistered (clients reconnect).
        let (kind, body) = c.unary("InstanceRequest", register_body("wire", "127.80.0.1", 8080), Some(&token)).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("ErrorResponse", json!(301)));
        // The stream, and the ability negotiation.
        c.open_stream().await;
        c.send("ConnectionSetupRequest", json!({"clientVersion":"Roster-Test:v1","tenant":"","labels":{"source":"sdk","module":"naming"},"abilityTable":{}})).await;
        let ack = c.expect("SetupAckRequest", Duration::from_secs(5)).await;
        assert_eq!(ack["abilityTable"]["supportPersistentInstanceByGrpc"], true);
        assert!(ack["headers"].is_object());
        // Auth: no token, a typed 403.
        let (kind, body) = c.unary("InstanceRequest", register_body("wire", "127.80.0.1", 8080), None).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone(), body["success"].clone()), ("InstanceResponse", json!(403), json!(false)));
        // Register; the HTTP API sees it.
        let (kind, body) = c.unary("InstanceRequest", register_body("wire", "127.80.0.1", 8080), Some(&token)).await;
        assert_eq!(kind, "InstanceResponse");
        assert_eq!((body["type"].clone(), body["errorCode"].clone(), body["success"].clone()), (json!("registerInstance"), json!(0), json!(true)));
        assert!(body.get("message").is_none_or(|m| !m.is_null()), "never null: {body}");
        assert_eq!(http_ips(&node, "serviceName=wire"), ["127.80.0.1:8080"]);
        // A second register on the connection replaces the first (one per service).
        c.unary("InstanceRequest", register_body("wire", "127.80.0.2", 8080), Some(&token)).await;
        assert_eq!(http_ips(&node, "serviceName=wire"), ["127.80.0.2:8080"]);
        // Errors: unknown type, malformed body, bad fields.
        let (kind, body) = c.unary("FrobnicateRequest", json!({}), Some(&token)).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("ErrorResponse", json!(302)));
        let bad = Payload { body: Some(Any { type_url: String::new(), value: b"{not json".to_vec() }), ..payload("InstanceRequest", &json!({}), Some(&token)) };
        let (kind, body) = decode(&c.try_unary(bad).await.unwrap());
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("ErrorResponse", json!(400)));
        let (kind, body) = c.unary("InstanceRequest", register_body("wire", "127.80.0.3", 70000), Some(&token)).await;
        assert!(kind == "ErrorResponse" && body["errorCode"] == 400 && body["message"].as_str().unwrap().contains("instance.port"), "{body}");
        // Query, subscribe and push.
        let (kind, body) = c.unary("ServiceQueryRequest", json!({"namespace":"public","serviceName":"wire","groupName":"DEFAULT_GROUP","cluster":"","healthyOnly":false,"udpPort":0}), Some(&token)).await;
        assert_eq!(kind, "QueryServiceResponse");
        let info = &body["serviceInfo"];
        assert_eq!((info["name"].clone(), info["groupName"].clone(), info["clusters"].clone()), (json!("wire"), json!("DEFAULT_GROUP"), json!("")));
        assert_eq!(info["hosts"][0]["metadata"], json!({"v":"1"}));
        assert_eq!(info["hosts"][0]["serviceName"], "DEFAULT_GROUP@@wire");
        let (kind, body) = c.unary("SubscribeServiceRequest", json!({"namespace":"public","serviceName":"wire","groupName":"DEFAULT_GROUP","subscribe":true,"clusters":""}), Some(&token)).await;
        assert_eq!((kind.as_str(), body["message"].clone()), ("SubscribeServiceResponse", json!("success")));
        let first = body["serviceInfo"]["lastRefTime"].as_u64().unwrap();
        let push = c.expect("NotifySubscriberRequest", Duration::from_secs(5)).await;
        assert!(push["requestId"].is_string() && push["headers"].is_object());
        let mut last = push["serviceInfo"]["lastRefTime"].as_u64().unwrap();
        assert!(last > first, "pushes are newer than the subscribe answer");
        // A change over HTTP v1 is pushed over gRPC.
        let started = Instant::now();
        node.call("POST", "/nacos/v1/ns/instance?serviceName=wire&ip=127.80.0.9&port=9&ephemeral=true").expect(200);
        loop {
            let push = c.expect("NotifySubscriberRequest", Duration::from_secs(5)).await;
            let t = push["serviceInfo"]["lastRefTime"].as_u64().unwrap();
            assert!(t > last, "lastRefTime strictly increases");
            last = t;
            if push["serviceInfo"]["hosts"].as_array().unwrap().len() == 2 {
                break;
            }
        }
        eprintln!("HTTP change pushed over gRPC in {:?}", started.elapsed());
        assert!(node.metric("roster_grpc_pushes_total{outcome=\"acked\"}").unwrap_or(0.0) >= 1.0);
        // Service list.
        let (kind, body) = c.unary("ServiceListRequest", json!({"namespace":"public","groupName":"DEFAULT_GROUP","serviceName":"","pageNo":1,"pageSize":10}), Some(&token)).await;
        assert_eq!((kind.as_str(), body["count"].clone(), body["serviceNames"].clone()), ("ServiceListResponse", json!(1), json!(["wire"])));
        // An oversized message is refused, and the server carries on.
        let huge = json!({"serviceName":"wire","pad":"x".repeat(11 * 1024 * 1024)});
        assert!(c.try_unary(payload("ServiceQueryRequest", &huge, Some(&token))).await.is_err());
        let (kind, _) = c.unary("HealthCheckRequest", json!({}), None).await;
        assert_eq!(kind, "HealthCheckResponse");
        // Closing the stream ends the connection: its instance goes, the HTTP one stays.
        c.close_stream();
    });
    eventually(Duration::from_secs(5), || {
        let ips = http_ips(&node, "serviceName=wire");
        if ips == ["127.80.0.9:9"] {
            Ok(())
        } else {
            Err(format!("{ips:?}"))
        }
    });
    assert_eq!(node.metric("roster_grpc_connections "), Some(0.0));
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Vec<String>>>>);

impl NamingEventListener for Events {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let ips = event
            .instances
            .iter()
            .flatten()
            .map(|i| format!("{}:{}", i.ip, i.port))
            .collect();
        self.0.lock().unwrap().push(ips);
    }
}

#[track_caller]
fn instance(ip: &str, port: i32) -> ServiceInstance {
    roster_tests::addresses::check_ip(ip);
    ServiceInstance {
        ip: ip.into(),
        port,
        metadata: HashMap::from([("sdk".to_string(), "rust".to_string())]),
        ..Default::default()
    }
}

async fn rust_client(servers: &str) -> nacos_sdk::api::naming::NamingService {
    let cache = tempfile::tempdir().unwrap();
    let props = ClientProps::new()
        .server_addr(servers)
        .namespace("public")
        .app_name("roster-rust-test")
        .auth_username("nacos")
        .auth_password(ADMIN_PASSWORD)
        .load_cache_at_start(false)
        .cache_dir(cache.keep());
    NamingServiceBuilder::new(props)
        .enable_auth_plugin_http()
        .build()
        .await
        .expect("nacos-sdk client")
}

#[test]
fn the_rust_nacos_sdk_registers_subscribes_batches_and_lists() {
    let node = Node::start();
    let rt = runtime();
    rt.block_on(async {
        let naming = rust_client(&node.addr()).await;
        naming
            .register_instance("rs-orders".into(), None, instance("127.81.0.1", 8080))
            .await
            .expect("register");
        let all = naming
            .get_all_instances("rs-orders".into(), None, vec![], false)
            .await
            .expect("list");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].metadata.get("sdk").map(String::as_str), Some("rust"));
        // Subscribe; a change made over HTTP v1 arrives as an event.
        let events = Events::default();
        naming
            .subscribe("rs-orders".into(), None, vec![], Arc::new(events.clone()))
            .await
            .expect("subscribe");
        let started = Instant::now();
        let n = &node;
        tokio::task::block_in_place(|| {
            n.call(
                "POST",
                "/nacos/v1/ns/instance?serviceName=rs-orders&ip=127.81.0.2&port=8080",
            )
            .expect(200);
        });
        loop {
            if events
                .0
                .lock()
                .unwrap()
                .iter()
                .any(|e| e.contains(&"127.81.0.2:8080".to_string()))
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no push: {:?}",
                events.0.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!("push reached the Rust SDK in {:?}", started.elapsed());
        // The subscription is listed, as a gRPC subscriber with the client's app name.
        tokio::task::block_in_place(|| {
            let subs = n
                .call(
                    "GET",
                    "/nacos/v1/ns/service/subscribers?serviceName=rs-orders",
                )
                .expect(200)
                .json();
            let rows = subs["subscribers"].as_array().unwrap();
            assert!(
                rows.iter()
                    .any(|r| r["protocol"] == "grpc" && r["app"] == "roster-rust-test"),
                "{subs}"
            );
        });
        // Batch register, deregister, service list.
        naming
            .batch_register_instance(
                "rs-batch".into(),
                None,
                vec![instance("127.81.1.1", 1), instance("127.81.1.2", 2)],
            )
            .await
            .expect("batch register");
        tokio::task::block_in_place(|| {
            assert_eq!(
                http_ips(n, "serviceName=rs-batch"),
                ["127.81.1.1:1", "127.81.1.2:2"]
            )
        });
        naming
            .deregister_instance("rs-orders".into(), None, instance("127.81.0.1", 8080))
            .await
            .expect("deregister");
        tokio::task::block_in_place(|| {
            assert_eq!(http_ips(n, "serviceName=rs-orders"), ["127.81.0.2:8080"])
        });
        let (names, count) = naming
            .get_service_list(1, 10, None)
            .await
            .expect("service list");
        assert_eq!(count, 2);
        assert!(
            names.contains(&"rs-orders".to_string()) && names.contains(&"rs-batch".to_string())
        );
    });
}

/// Which node (index) holds gRPC connections.
fn connected_node(c: &Cluster) -> Option<usize> {
    (0..c.nodes.len()).find(|i| {
        c.nodes[*i].is_running()
            && c.nodes[*i]
                .metric("roster_grpc_connections ")
                .unwrap_or(0.0)
                > 0.0
    })
}

#[test]
fn a_grpc_client_follows_a_dying_node_and_its_old_copies_expire() {
    let mut c = Cluster::start(3, &["--distro-verify-secs", "1"]);
    let rt = runtime();
    let servers = c.server_list();
    let naming = rt.block_on(async {
        let naming = rust_client(&servers).await;
        naming
            .register_instance("rs-ha".into(), None, instance("127.82.0.1", 8080))
            .await
            .expect("register");
        naming
    });
    let holder = eventually(Duration::from_secs(5), || {
        connected_node(&c).ok_or("no connection".to_string())
    });
    for node in &c.nodes {
        eventually(Duration::from_secs(3), || {
            let ips = http_ips(node, "serviceName=rs-ha");
            if ips == ["127.82.0.1:8080"] {
                Ok(())
            } else {
                Err(format!("{ips:?}"))
            }
        });
    }
    c.nodes[holder].kill();
    let survivor = (holder + 1) % 3;
    // The client reconnects to a survivor and registers again; the instance is back
    // under its new connection, and the dead connection's copy is gone.
    let started = Instant::now();
    eventually(Duration::from_secs(30), || {
        let now_on = connected_node(&c).ok_or("not reconnected yet")?;
        let ips = http_ips(&c.nodes[survivor], "serviceName=rs-ha");
        if now_on != holder && ips == ["127.82.0.1:8080"] {
            Ok(())
        } else {
            Err(format!("{ips:?}"))
        }
    });
    eprintln!(
        "client back on node {} after {:?}",
        connected_node(&c).unwrap() + 1,
        started.elapsed()
    );
    // Copies of the dead node's connection expire (four verification rounds); the
    // re-registered instance stays on every survivor.
    std::thread::sleep(Duration::from_secs(6));
    for i in (0..3).filter(|i| *i != holder) {
        assert_eq!(
            http_ips(&c.nodes[i], "serviceName=rs-ha"),
            ["127.82.0.1:8080"],
            "node {}",
            i + 1
        );
        let view = c.nodes[i].call("GET", "/api/v1/cluster").expect(200).json();
        assert!(
            view["distroOwned"][(holder + 1).to_string()].is_null(),
            "no client left owned by the dead node: {view}"
        );
    }
    drop(naming);
}

/// Issue 36's failover case, as dubbo-go providers met it: gRPC clients (the Rust SDK,
/// which redoes its registrations on a new connection) on the node that is killed move
/// to the survivors, and every survivor keeps listing every instance all the while —
/// sampled every 100 ms for 30 seconds, through the dead node's "peer is down", the
/// clients' reconnection (about 10 s later: the SDK's health check) and the expiry of
/// the dead connections' copies. It used to lose some of them for seconds: the
/// survivor a client moved to pushed the new connection's copy and the old
/// connection's copy without the address, and a peer that applied them in that order
/// left the new copy out (the address still held) and then removed the old one.
#[test]
fn killing_the_node_of_redoing_grpc_clients_never_empties_a_survivors_list() {
    redoing_clients_stay_listed_on_the_others(None);
}

/// The same with the node frozen (SIGSTOP) for 8 s instead: its clients move, and the
/// node, back, finds its connections gone.
#[test]
fn pausing_the_node_of_redoing_grpc_clients_never_empties_another_nodes_list() {
    redoing_clients_stay_listed_on_the_others(Some(Duration::from_secs(8)));
}

/// Kills (`pause`: `None`) or freezes for `pause` the node holding the most of nine
/// Rust SDK clients, and samples the other nodes' lists every 100 ms for 30 s.
fn redoing_clients_stay_listed_on_the_others(pause: Option<Duration>) {
    let mut c = Cluster::start(3, &[]);
    let rt = runtime();
    let servers = c.server_list();
    // Eight providers of one service and one provider alone in its own: the SDK picks a
    // node at random, so the node with the most connections holds several of them.
    let clients = rt.block_on(async {
        let mut clients = Vec::new();
        for i in 0..9u8 {
            let naming = rust_client(&servers).await;
            let (service, ip) = match i {
                8 => ("rs-failover-alone", "127.84.1.1".to_string()),
                _ => ("rs-failover", format!("127.84.0.{}", i + 1)),
            };
            naming
                .register_instance(service.into(), None, instance(&ip, 8080))
                .await
                .expect("register");
            clients.push(naming);
        }
        clients
    });
    let expected: Vec<String> = (0..8).map(|i| format!("127.84.0.{}:8080", i + 1)).collect();
    let lists = |node: &Node| {
        (
            http_ips(node, "serviceName=rs-failover"),
            http_ips(node, "serviceName=rs-failover-alone"),
        )
    };
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || match lists(node) {
            (all, alone) if all == expected && alone.len() == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        });
    }
    let holder = (0..3)
        .max_by_key(|i| {
            c.nodes[*i]
                .metric("roster_grpc_connections ")
                .unwrap_or(0.0) as u64
        })
        .unwrap();
    let held = c.nodes[holder].metric("roster_grpc_connections ").unwrap();
    let what = if pause.is_some() {
        "freezing"
    } else {
        "killing"
    };
    eprintln!("{what} node {} with {held} connections", holder + 1);
    match pause {
        Some(_) => c.nodes[holder].pause(),
        None => c.nodes[holder].kill(),
    }
    let hit = Instant::now();
    let mut resumed = false;
    let mut gaps = Vec::new();
    while hit.elapsed() < Duration::from_secs(30) {
        if pause.is_some_and(|p| hit.elapsed() > p) && !resumed {
            c.nodes[holder].resume();
            resumed = true;
        }
        for (i, node) in c.nodes.iter().enumerate().filter(|(i, _)| *i != holder) {
            let (all, alone) = lists(node);
            if all != expected || alone.len() != 1 {
                gaps.push(format!(
                    "{:?} after {what}, node {}: {} of 8 listed, alone: {alone:?}",
                    hit.elapsed(),
                    i + 1,
                    all.len()
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        gaps.is_empty(),
        "other nodes stopped listing live clients' instances:\n{}",
        gaps.join("\n")
    );
    // Every client is connected again (a frozen node's clients moved, or stayed).
    let connected: f64 = (0..3)
        .filter(|i| c.nodes[*i].is_running())
        .map(|i| c.nodes[i].metric("roster_grpc_connections ").unwrap_or(0.0))
        .sum();
    assert_eq!(connected, 9.0);
    drop(clients);
}

#[test]
fn a_graceful_shutdown_moves_grpc_clients_to_other_nodes() {
    let mut c = Cluster::start(3, &[]);
    let rt = runtime();
    let servers = c.server_list();
    let naming = rt.block_on(async {
        let naming = rust_client(&servers).await;
        naming
            .register_instance("rs-move".into(), None, instance("127.83.0.1", 8080))
            .await
            .expect("register");
        naming
    });
    let holder = eventually(Duration::from_secs(5), || {
        connected_node(&c).ok_or("no connection".to_string())
    });
    let watcher = (holder + 1) % 3;
    eventually(Duration::from_secs(3), || {
        if http_ips(&c.nodes[watcher], "serviceName=rs-move").len() == 1 {
            Ok(())
        } else {
            Err("not replicated".into())
        }
    });
    let status = c.nodes[holder].terminate();
    assert!(status.success());
    // The instance is missing at most for the reconnect, and comes back.
    let started = Instant::now();
    eventually(Duration::from_secs(15), || {
        if http_ips(&c.nodes[watcher], "serviceName=rs-move") == ["127.83.0.1:8080"]
            && connected_node(&c).is_some()
        {
            Ok(())
        } else {
            Err("not back".into())
        }
    });
    eprintln!(
        "instance back {:?} after the graceful shutdown",
        started.elapsed()
    );
    drop(naming);
}

#[test]
fn grpc_registrations_follow_the_address_rules() {
    let node = Node::start();
    let token = node.token();
    let rt = runtime();
    rt.block_on(async {
        let mut c = RawClient::connect(&grpc_addr(&node)).await;
        c.open_stream().await;
        c.send("ConnectionSetupRequest", json!({"clientVersion":"Roster-Test:v1","tenant":"","labels":{},"abilityTable":{}})).await;
        c.expect("SetupAckRequest", Duration::from_secs(5)).await;
        for bad in ["999.1.1.1", "1.1.1", "127.000.000.001"] {
            // `inet_aton` reads `1.1.1` as an address off this machine: it is never
            // tried persistent (persistent instances are probed).
            let kinds: &[&str] = if bad == "1.1.1" { &["InstanceRequest"] } else { &["InstanceRequest", "PersistentInstanceRequest"] };
            for kind in kinds {
                let (reply, body) = c.unary(kind, register_body("addr", bad, 80), Some(&token)).await;
                assert!(
                    reply == "ErrorResponse" && body["errorCode"] == 400 && body["message"].as_str().unwrap().contains("'instance.ip'"),
                    "{kind} {bad}: {body}"
                );
            }
            let batch = json!({"namespace":"public","serviceName":"addr","groupName":"DEFAULT_GROUP","type":"batchRegisterInstance",
                               "instances":[{"ip":"127.81.0.1","port":80},{"ip":bad,"port":81}]});
            let (reply, body) = c.unary("BatchInstanceRequest", batch, Some(&token)).await;
            assert!(reply == "ErrorResponse" && body["errorCode"] == 400, "batch {bad}: {body}");
        }
        assert_eq!(http_ips(&node, "serviceName=addr"), Vec::<String>::new());
        // The uncompressed spelling of ::1 is kept as "::1", ephemeral and persistent.
        let (reply, body) = c.unary("InstanceRequest", register_body("addr", "0:0:0:0:0:0:0:1", 80), Some(&token)).await;
        assert_eq!(reply, "InstanceResponse", "{body}");
        assert_eq!(http_ips(&node, "serviceName=addr"), ["::1:80"]);
        let (reply, body) = c.unary("PersistentInstanceRequest", register_body("addr6", "0000:0000:0000:0000:0000:0000:0000:0001", 81), Some(&token)).await;
        assert_eq!(reply, "InstanceResponse", "{body}");
        assert_eq!(http_ips(&node, "serviceName=addr6"), ["::1:81"]);
        // A body that is not UTF-8 JSON is refused with a 400, not read lossily.
        let bad = Payload { body: Some(Any { type_url: String::new(), value: b"{\"serviceName\":\"a\xff\"}".to_vec() }), ..payload("InstanceRequest", &json!({}), Some(&token)) };
        let (kind, body) = decode(&c.try_unary(bad).await.unwrap());
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("ErrorResponse", json!(400)));
        c.close_stream();
    });
}

/// A fuzzy watch body (Nacos 3's `NamingFuzzyWatchRequest`).
fn fuzzy_body(pattern: &str, watch_type: &str, initializing: bool, received: &[&str]) -> Value {
    json!({"headers":{},"requestId":null,"module":"naming","namespace":"public","groupKeyPattern":pattern,
           "receivedGroupKeys":received,"watchType":watch_type,"initializing":initializing})
}

/// The service keys of a `NamingFuzzyWatchSyncRequest`'s contexts with their change types, sorted.
fn contexts(sync: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = sync["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["serviceKey"].as_str().unwrap().to_string(),
                c["changedType"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn fuzzy_watches_sync_are_bounded_and_hear_changes_made_on_another_node() {
    let c = Cluster::start(
        2,
        &[
            "--naming-fuzzy-watch-max-patterns",
            "2",
            "--naming-fuzzy-watch-max-services",
            "3",
        ],
    );
    let (node, other) = (&c.nodes[0], &c.nodes[1]);
    let token = node.token();
    // Persistent instances through the other node (Raft), seen here once applied.
    let add = |name: &str, ip: &str| {
        other
            .call(
                "POST",
                &format!(
                    "/nacos/v1/ns/instance?serviceName={name}&ip={ip}&port=80&ephemeral=false"
                ),
            )
            .expect(200);
    };
    add("fz-a1", "127.81.1.1");
    add("fz-a2", "127.81.1.2");
    eventually(Duration::from_secs(10), || {
        let seen = (
            http_ips(node, "serviceName=fz-a1").len(),
            http_ips(node, "serviceName=fz-a2").len(),
        );
        if seen == (1, 1) {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    });
    let key = |name: &str| format!("public@@DEFAULT_GROUP@@{name}");
    let rt = runtime();
    rt.block_on(async {
        let mut c = RawClient::connect(&grpc_addr(node)).await;
        c.open_stream().await;
        c.send("ConnectionSetupRequest", json!({"clientVersion":"Nacos-Java-Client:v3.1.0","tenant":"","labels":{},"abilityTable":{"fuzzyWatch":true}})).await;
        let ack = c.expect("SetupAckRequest", Duration::from_secs(5)).await;
        assert_eq!(ack["abilityTable"]["fuzzyWatch"], true, "Nacos 3 clients watch only when told");
        // A first watch: what matches, and what the client holds that is gone, then the end.
        let watch = fuzzy_body("public>>DEFAULT_GROUP>>fz-a*", "WATCH", true, &["public@@DEFAULT_GROUP@@fz-gone"]);
        let (kind, body) = c.unary("NamingFuzzyWatchRequest", watch, Some(&token)).await;
        assert_eq!((kind.as_str(), body["success"].clone()), ("NamingFuzzyWatchResponse", json!(true)), "{body}");
        let sync = c.expect("NamingFuzzyWatchSyncRequest", Duration::from_secs(5)).await;
        assert_eq!((sync["syncType"].clone(), sync["totalBatch"].clone(), sync["currentBatch"].clone()), (json!("FUZZY_WATCH_INIT_NOTIFY"), json!(1), json!(1)));
        assert_eq!(sync["groupKeyPattern"], "public>>DEFAULT_GROUP>>fz-a*");
        let expected = [(key("fz-a1"), "ADD_SERVICE"), (key("fz-a2"), "ADD_SERVICE"), (key("fz-gone"), "DELETE_SERVICE")];
        assert_eq!(contexts(&sync), expected.map(|(k, t)| (k, t.to_string())));
        let finish = c.expect("NamingFuzzyWatchSyncRequest", Duration::from_secs(5)).await;
        assert_eq!(finish["syncType"], "FINISH_FUZZY_WATCH_INIT_NOTIFY");
        // A service come through the other node is told.
        add("fz-a3", "127.81.1.3");
        let change = c.expect("NamingFuzzyWatchChangeNotifyRequest", Duration::from_secs(10)).await;
        assert_eq!((change["serviceKey"].clone(), change["changedType"].clone(), change["syncType"].clone()), (json!(key("fz-a3")), json!("ADD_SERVICE"), json!("FUZZY_WATCH_RESOURCE_CHANGED")));
        // The pattern keeps 3: a fourth is not told, and a re-watch says the pattern is over its count.
        add("fz-a4", "127.81.1.4");
        let held = [key("fz-a1"), key("fz-a2"), key("fz-a3")];
        let held: Vec<&str> = held.iter().map(String::as_str).collect();
        let (kind, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>DEFAULT_GROUP>>fz-a*", "WATCH", false, &held), Some(&token)).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("NamingFuzzyWatchResponse", json!(50311)), "{body}");
        // Two patterns on the node at most: a third is refused.
        let (_, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>DEFAULT_GROUP>>fz-b*", "WATCH", true, &[]), Some(&token)).await;
        assert_eq!(body["success"], true, "{body}");
        let (kind, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>*>>fz-c*", "WATCH", true, &[]), Some(&token)).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone()), ("NamingFuzzyWatchResponse", json!(50310)), "{body}");
        // A service gone from the full pattern is told, and the room it leaves filled.
        other.call("DELETE", "/nacos/v1/ns/instance?serviceName=fz-a1&ip=127.81.1.1&port=80&ephemeral=false").expect(200);
        let gone = c.expect("NamingFuzzyWatchChangeNotifyRequest", Duration::from_secs(10)).await;
        assert_eq!((gone["serviceKey"].clone(), gone["changedType"].clone()), (json!(key("fz-a1")), json!("DELETE_SERVICE")));
        let filled = c.expect("NamingFuzzyWatchChangeNotifyRequest", Duration::from_secs(10)).await;
        assert_eq!((filled["serviceKey"].clone(), filled["changedType"].clone()), (json!(key("fz-a4")), json!("ADD_SERVICE")));
        // A cancelled watch makes room for another pattern; a malformed pattern is a 400.
        let (_, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>DEFAULT_GROUP>>fz-b*", "CANCEL_WATCH", false, &[]), Some(&token)).await;
        assert_eq!(body["success"], true, "{body}");
        let (_, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>*>>fz-c*", "WATCH", true, &[]), Some(&token)).await;
        assert_eq!(body["success"], true, "{body}");
        let (kind, body) = c.unary("NamingFuzzyWatchRequest", fuzzy_body("public>>fz", "WATCH", true, &[]), Some(&token)).await;
        assert!(kind == "ErrorResponse" && body["errorCode"] == 400 && body["message"].as_str().unwrap().contains("groupKeyPattern"), "{body}");
        c.close_stream();
    });
    assert!(
        node.metric("roster_grpc_requests_total{kind=\"NamingFuzzyWatchRequest\"}")
            .unwrap_or(0.0)
            >= 7.0
    );
}
