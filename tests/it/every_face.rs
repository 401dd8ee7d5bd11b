//! One registry under every face (issue 41, item 4): on three nodes, one instance of a
//! service is registered through Nacos v1 HTTP (node 1), one through Nacos gRPC (node 2),
//! one through Eureka (node 3) and one through Consul's agent API (node 1, a TTL check
//! kept passing); every face of every node — Nacos v1's list, the console's catalog, a
//! gRPC query, Eureka's application, Prometheus service discovery and Consul's
//! `health/service` — lists all four, healthy. Then the Eureka client stops renewing, as a
//! killed client does: Consul's face on every node shows it critical before it goes, and
//! every face of every node stops showing it within its lease and the sweep, and the other
//! three stay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use roster_tests::{enc, Cluster, Node, Value, ADMIN_PASSWORD};
use serde_json::json;

use crate::consul_face::{aggregated, token_of, Consul};
use crate::grpc::{decode, payload, RawClient};

const SERVICE: &str = "every-face";
const APP: &str = "EVERY-FACE";
const V1_IP: &str = "127.42.0.1";
const GRPC_IP: &str = "127.42.0.2";
const EUREKA_IP: &str = "127.42.0.3";
const CONSUL_IP: &str = "127.42.0.4";

fn basic() -> String {
    let pair = format!("nacos:{ADMIN_PASSWORD}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// A JSON request to the Eureka face with the admin's Basic credentials.
fn eureka(node: &Node, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", node.addr()))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("authorization", basic())
        .body(body.map(Value::to_string).unwrap_or_default())
        .expect("request");
    let mut answer = agent
        .run(request)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    (
        answer.status().as_u16(),
        answer.body_mut().read_to_string().unwrap_or_default(),
    )
}

/// What one face of one node shows: `ip:port` → up (healthy and enabled, or Eureka's UP).
type Shown = Vec<(String, bool)>;

fn sorted(mut shown: Shown) -> Shown {
    shown.sort();
    shown
}

fn nacos_v1(node: &Node) -> Shown {
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={SERVICE}&healthyOnly=false"),
        )
        .expect(200)
        .json();
    sorted(hosts(&list["hosts"]))
}

fn console_catalog(node: &Node) -> Shown {
    let page = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/catalog/instances?serviceName={SERVICE}&clusterName=DEFAULT&pageNo=1&pageSize=100"),
        )
        .expect(200)
        .json();
    sorted(hosts(&page["list"]))
}

fn hosts(list: &Value) -> Shown {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            (
                format!("{}:{}", h["ip"].as_str().unwrap_or(""), h["port"]),
                h["healthy"] == true && h["enabled"] != false,
            )
        })
        .collect()
}

fn grpc_query(rt: &tokio::runtime::Runtime, node: &Node) -> Shown {
    let addr = format!("127.0.0.1:{}", node.http_port + 1000);
    let token = node.token();
    let info = rt.block_on(async {
        let mut client = RawClient::try_set_up(&addr, Duration::from_secs(10))
            .await
            .expect("grpc set up");
        let body = json!({"namespace":"public","serviceName":SERVICE,"groupName":"DEFAULT_GROUP",
                          "cluster":"","healthyOnly":false,"udpPort":0});
        let answer = client
            .try_unary(payload("ServiceQueryRequest", &body, Some(&token)))
            .await
            .expect("query");
        decode(&answer).1
    });
    sorted(hosts(&info["serviceInfo"]["hosts"]))
}

fn eureka_app(node: &Node) -> Shown {
    let (status, body) = eureka(node, "GET", &format!("/eureka/apps/{APP}"), None);
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{body}");
    let app: Value = serde_json::from_str(&body).expect("json");
    let shown = app["application"]["instance"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                format!("{}:{}", i["ipAddr"].as_str().unwrap_or(""), i["port"]["$"]),
                i["status"] == "UP",
            )
        })
        .collect();
    sorted(shown)
}

fn prometheus_sd(node: &Node) -> Shown {
    let groups = node
        .call(
            "GET",
            &format!("/nacos/prometheus/namespaceId/public/service/{SERVICE}"),
        )
        .expect(200)
        .json();
    let shown = groups
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            (
                g["targets"][0].as_str().unwrap_or("").to_string(),
                g["labels"]["__meta_roster_healthy"] == "true"
                    && g["labels"]["__meta_roster_enabled"] == "true",
            )
        })
        .collect();
    sorted(shown)
}

fn consul_health(node: &Node, token: &str) -> Shown {
    let entries = Consul::new(&node.addr(), token).health(SERVICE, "");
    let shown = entries
        .iter()
        .map(|e| {
            (
                format!(
                    "{}:{}",
                    e["Service"]["Address"].as_str().unwrap_or(""),
                    e["Service"]["Port"]
                ),
                aggregated(e) == "passing",
            )
        })
        .collect();
    sorted(shown)
}

/// A face's name and how to read it from a node.
type Face<'a> = (&'a str, &'a dyn Fn(&Node) -> Shown);

/// Waits until every face of every node shows `wanted`.
fn every_face_shows(
    c: &Cluster,
    rt: &tokio::runtime::Runtime,
    consul_token: &str,
    wanted: &Shown,
    within: Duration,
) {
    let faces: [Face<'_>; 6] = [
        ("nacos v1", &nacos_v1),
        ("console catalog", &console_catalog),
        ("grpc", &|n: &Node| grpc_query(rt, n)),
        ("eureka", &eureka_app),
        ("prometheus", &prometheus_sd),
        ("consul", &|n: &Node| consul_health(n, consul_token)),
    ];
    let deadline = Instant::now() + within;
    for (i, node) in c.nodes.iter().enumerate() {
        for (face, read) in &faces {
            loop {
                let shown = read(node);
                if &shown == wanted {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {} {face} shows {shown:?}, expected {wanted:?}",
                    i + 1
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

#[test]
fn one_registry_under_every_face_on_three_nodes() {
    let c = Cluster::start(3, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Nacos v1 through node 1: an ephemeral instance kept by heartbeats (below).
    let v1 = format!("{V1_IP}:8080");
    c.nodes[0]
        .call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName={SERVICE}&ip={V1_IP}&port=8080"),
        )
        .expect(200);
    // Nacos gRPC through node 2: held while its connection lives.
    let token = c.nodes[1].token();
    let grpc_addr = format!("127.0.0.1:{}", c.nodes[1].http_port + 1000);
    let _grpc_client = rt.block_on(async {
        let mut client = RawClient::try_set_up(&grpc_addr, Duration::from_secs(10))
            .await
            .expect("grpc set up");
        let body = json!({"namespace":"public","serviceName":SERVICE,"groupName":"DEFAULT_GROUP",
            "type":"registerInstance","instance":{"ip":GRPC_IP,"port":8080,"weight":1.0,
            "healthy":true,"enabled":true,"ephemeral":true,"clusterName":"DEFAULT","metadata":{}},
            "module":"naming"});
        let (kind, answer) = decode(
            &client
                .try_unary(payload("InstanceRequest", &body, Some(&token)))
                .await
                .expect("register"),
        );
        assert_eq!(
            (kind.as_str(), &answer["success"]),
            ("InstanceResponse", &json!(true)),
            "{answer}"
        );
        client
    });
    // Eureka through node 3: a 6 s lease renewed every second, until it "dies".
    let registration = json!({"instance": {
        "instanceId": "every-1", "app": APP, "ipAddr": EUREKA_IP, "hostName": EUREKA_IP,
        "status": "UP", "port": {"$": 8080, "@enabled": "true"},
        "securePort": {"$": 443, "@enabled": "false"},
        "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
        "leaseInfo": {"renewalIntervalInSecs": 1, "durationInSecs": 6},
        "vipAddress": SERVICE, "lastDirtyTimestamp": "1700000000000",
    }});
    let (status, body) = eureka(
        &c.nodes[2],
        "POST",
        &format!("/eureka/apps/{APP}"),
        Some(&registration),
    );
    assert_eq!(status, 204, "{body}");
    // Consul through node 1: a TTL check (10 s) that starts passing, passed below.
    let consul_token = token_of(&c.nodes[0], "nacos");
    Consul::new(&c.nodes[0].addr(), &consul_token).register(&json!({
        "Name": SERVICE, "ID": "every-consul", "Address": CONSUL_IP, "Port": 8080,
        "Check": {"TTL": "10s", "Status": "passing"},
    }));
    // The clients' keep-alives: the v1 client beats and the Consul client passes its
    // check through node 1 every 2 s for the whole test; the Eureka client renews through
    // node 3 every second while `alive`.
    let (alive, stop) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    let keeper = {
        let (alive, stop) = (alive.clone(), stop.clone());
        let renew = format!("http://{}/eureka/apps/{APP}/every-1", c.nodes[2].addr());
        let beat_json = json!({"ip": V1_IP, "port": 8080, "cluster": "DEFAULT",
                               "serviceName": format!("DEFAULT_GROUP@@{SERVICE}")});
        let beat = format!(
            "http://{}/nacos/v1/ns/instance/beat?serviceName={SERVICE}&beat={}&accessToken={}",
            c.nodes[0].addr(),
            enc(&beat_json.to_string()),
            enc(&c.nodes[0].token())
        );
        let pass = format!(
            "http://{}/v1/agent/check/pass/service:every-consul",
            c.nodes[0].addr()
        );
        let consul_token = consul_token.clone();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(5)))
                .build()
                .into();
            // Bounded: at most five minutes.
            for tick in 0..300 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if alive.load(Ordering::Relaxed) {
                    let _ = agent
                        .put(&renew)
                        .header("authorization", basic())
                        .send_empty();
                }
                if tick % 2 == 0 {
                    let _ = agent.put(&beat).send_empty();
                    let _ = agent
                        .put(&pass)
                        .header("x-consul-token", &consul_token)
                        .send_empty();
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let everyone = sorted(vec![
        (v1.clone(), true),
        (format!("{GRPC_IP}:8080"), true),
        (format!("{EUREKA_IP}:8080"), true),
        (format!("{CONSUL_IP}:8080"), true),
    ]);
    every_face_shows(&c, &rt, &consul_token, &everyone, Duration::from_secs(30));

    // The Eureka client dies: no renewal after its 6 s lease (unhealthy after three
    // missed renewals, removed at the lease's end). Consul's face on every node shows it
    // critical in between; on every face of every node it is gone within the lease and
    // the sweep; the other three stay up.
    alive.store(false, Ordering::Relaxed);
    let watching = Arc::new(AtomicBool::new(true));
    let critical_seen = {
        let (watching, token) = (watching.clone(), consul_token.clone());
        let addrs: Vec<String> = c.nodes.iter().map(Node::addr).collect();
        std::thread::spawn(move || {
            let mut seen = vec![false; addrs.len()];
            // Bounded: at most 40 s of 100 ms rounds.
            for _ in 0..400 {
                if !watching.load(Ordering::Relaxed) {
                    break;
                }
                for (i, addr) in addrs.iter().enumerate() {
                    let entries = Consul::new(addr, &token).health(SERVICE, "");
                    let lapsed = entries.iter().any(|e| {
                        e["Service"]["Address"] == EUREKA_IP && aggregated(e) == "critical"
                    });
                    seen[i] |= lapsed;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        })
    };
    // The keeper renews at most once more (it may be past its check).
    std::thread::sleep(Duration::from_millis(1100));
    let died = Instant::now();
    let survivors = sorted(vec![
        (v1, true),
        (format!("{GRPC_IP}:8080"), true),
        (format!("{CONSUL_IP}:8080"), true),
    ]);
    every_face_shows(&c, &rt, &consul_token, &survivors, Duration::from_secs(20));
    let took = died.elapsed();
    eprintln!("the dead Eureka client was gone from every face of every node {took:?} after its last renewal");
    // Its last renewal was at most ~1.1 s before `died`, its lease 6 s.
    assert!(
        took >= Duration::from_secs(4),
        "gone before its lease ran out: {took:?}"
    );
    watching.store(false, Ordering::Relaxed);
    let seen = critical_seen.join().expect("watcher");
    assert_eq!(
        seen,
        [true, true, true],
        "Consul's face on each node showed the lapsed Eureka instance critical"
    );
    stop.store(true, Ordering::Relaxed);
    keeper.join().expect("keeper");
}
