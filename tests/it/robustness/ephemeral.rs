//! The AP side under the same faults: ephemeral instances of clients that live through
//! the whole run — HTTP clients that beat every second, as the Nacos 1.x clients do,
//! and move to another node when theirs does not answer, and gRPC clients (the Rust
//! `nacos-sdk`, which redoes its registrations on a new connection) — and a sampler
//! that lists both services on every node every 200 ms. The promise checked: a node
//! lists every live client's instance at every sample, except a node hit by a fault,
//! from the fault until a stated bound after it was healed — and that includes the
//! whole cluster restarted at once while the clients redo their registrations (Nacos'
//! alibaba/nacos#15857, where fresh registrations were deleted cluster-wide).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder, ServiceInstance};
use nacos_sdk::api::props::ClientProps;
use serde_json::{json, Value};

use super::history::History;
use super::nemesis::Injected;
use super::workload::Endpoint;

/// The service of the HTTP (beating) clients.
pub const HTTP_SERVICE: &str = "ap-http";
/// The service of the gRPC clients.
pub const GRPC_SERVICE: &str = "ap-grpc";
/// How many clients of each kind.
const CLIENTS: usize = 3;

/// The address of beating client `i`.
fn http_addr(i: usize) -> (String, u16) {
    (format!("127.0.37.{}", i + 1), 9100)
}

/// The address of gRPC client `i`.
fn grpc_addr(i: usize) -> (String, u16) {
    (format!("127.0.38.{}", i + 1), 9200)
}

/// Every instance the live clients have registered.
pub fn expected() -> (BTreeSet<String>, BTreeSet<String>) {
    let fmt = |(ip, port): (String, u16)| format!("{ip}:{port}");
    (
        (0..CLIENTS).map(|i| fmt(http_addr(i))).collect(),
        (0..CLIENTS).map(|i| fmt(grpc_addr(i))).collect(),
    )
}

/// One listing of both services by one node: `None` when the node did not answer.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The node (from 1).
    pub node: usize,
    /// When the answer came, µs of the history's clock.
    pub at_us: u64,
    /// The HTTP clients' and the gRPC clients' instances listed.
    pub listed: Option<(BTreeSet<String>, BTreeSet<String>)>,
}

/// The running clients and sampler.
pub struct Ephemeral {
    threads: Vec<JoinHandle<()>>,
    grpc: Vec<NamingService>,
    runtime: tokio::runtime::Runtime,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// When every node first listed every instance, µs: samples from then on are judged.
    listed_from_us: u64,
}

impl Ephemeral {
    /// Registers every client and starts the beats and the sampler; returns once every
    /// node lists every instance.
    pub fn start(
        endpoints: &[Endpoint],
        token: &str,
        history: Arc<History>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let servers = endpoints
            .iter()
            .map(|e| e.http.clone())
            .collect::<Vec<_>>()
            .join(",");
        let grpc = runtime.block_on(async {
            let mut clients = Vec::new();
            for i in 0..CLIENTS {
                let props = ClientProps::new()
                    .server_addr(&servers)
                    .namespace("public")
                    .app_name("roster-robustness")
                    .auth_username("nacos")
                    .auth_password(roster_tests::ADMIN_PASSWORD)
                    .load_cache_at_start(false)
                    .cache_dir(tempfile::tempdir().unwrap().keep());
                let naming = NamingServiceBuilder::new(props)
                    .enable_auth_plugin_http()
                    .build()
                    .await
                    .expect("nacos-sdk client");
                let (ip, port) = grpc_addr(i);
                roster_tests::addresses::check_ip(&ip);
                let instance = ServiceInstance {
                    ip,
                    port: i32::from(port),
                    ..Default::default()
                };
                naming
                    .register_instance(GRPC_SERVICE.into(), None, instance)
                    .await
                    .expect("register");
                clients.push(naming);
            }
            clients
        });
        let mut threads = Vec::new();
        for i in 0..CLIENTS {
            let (endpoints, token, stop) = (endpoints.to_vec(), token.to_string(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ap-beater-{i}"))
                    .spawn(move || beat(i, &endpoints, &token, &stop))
                    .unwrap(),
            );
        }
        let samples = Arc::new(Mutex::new(Vec::new()));
        {
            let (endpoints, token, stop) = (endpoints.to_vec(), token.to_string(), stop.clone());
            let (samples, history) = (samples.clone(), history.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("ap-sampler".into())
                    .spawn(move || sample(&endpoints, &token, &stop, &history, &samples))
                    .unwrap(),
            );
        }
        let mut this = Self {
            threads,
            grpc,
            runtime,
            samples,
            listed_from_us: 0,
        };
        // Every node lists every instance before the faults start.
        let (want_http, want_grpc) = expected();
        roster_tests::eventually(Duration::from_secs(20), || {
            let samples = this.samples.lock().unwrap();
            for e in endpoints {
                let last = samples.iter().rev().find(|s| s.node == e.node);
                match last.and_then(|s| s.listed.as_ref()) {
                    Some((h, g)) if *h == want_http && *g == want_grpc => {}
                    other => return Err(format!("node {}: {other:?}", e.node)),
                }
            }
            Ok(())
        });
        this.listed_from_us = history.now_us();
        this
    }

    /// Whether every node has answered a sample taken after `since_us` listing every
    /// live client's instance.
    pub fn all_listed_since(&self, since_us: u64) -> bool {
        let (want_http, want_grpc) = expected();
        let samples = self.samples.lock().unwrap();
        let nodes: std::collections::BTreeSet<usize> = samples.iter().map(|s| s.node).collect();
        nodes.iter().all(|node| {
            samples
                .iter()
                .rev()
                .take_while(|s| s.at_us > since_us)
                .any(|s| {
                    s.node == *node
                        && s.listed
                            .as_ref()
                            .is_some_and(|(h, g)| *h == want_http && *g == want_grpc)
                })
        })
    }

    /// Stops the clients (the stop flag must be set) and returns the samples taken
    /// since every node first listed every instance.
    pub fn finish(self) -> Vec<Sample> {
        for t in self.threads {
            t.join().unwrap();
        }
        drop(self.grpc);
        self.runtime.shutdown_timeout(Duration::from_secs(2));
        let from = self.listed_from_us;
        let samples = std::mem::take(&mut *self.samples.lock().unwrap());
        samples.into_iter().filter(|s| s.at_us >= from).collect()
    }
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

fn request(agent: &ureq::Agent, method: &str, url: &str) -> Result<(u16, String), String> {
    let req = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .body(())
        .map_err(|e| e.to_string())?;
    let mut response = agent.run(req).map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// Beating client `i`: registers, then beats every second with the whole instance (so
/// that a node that does not know it registers it again, as Nacos' clients do), moving
/// to the next node when one does not answer within a second.
fn beat(i: usize, endpoints: &[Endpoint], token: &str, stop: &AtomicBool) {
    let agent = agent(Duration::from_secs(1));
    let (ip, port) = http_addr(i);
    let beat = json!({"ip": ip, "port": port, "cluster": "DEFAULT", "weight": 1.0,
                      "serviceName": format!("DEFAULT_GROUP@@{HTTP_SERVICE}"), "metadata": {}})
    .to_string();
    let mut at = i % endpoints.len();
    let mut registered = false;
    while !stop.load(Ordering::Relaxed) {
        let e = &endpoints[at];
        let path = if registered {
            format!(
                "/nacos/v1/ns/instance/beat?serviceName={HTTP_SERVICE}&beat={}&accessToken={token}",
                roster_tests::enc(&beat)
            )
        } else {
            format!("/nacos/v1/ns/instance?serviceName={HTTP_SERVICE}&ip={ip}&port={port}&accessToken={token}")
        };
        roster_tests::addresses::check_request(&path, None);
        let method = if registered { "PUT" } else { "POST" };
        match request(&agent, method, &format!("http://{}{}", e.http, path)) {
            Ok((200, body)) => {
                // A beat answered 20404 (unknown instance) registers again.
                let unknown =
                    serde_json::from_str::<Value>(&body).is_ok_and(|v| v["code"] == 20404);
                registered = !unknown;
                std::thread::sleep(Duration::from_secs(1));
            }
            _ => at = (at + 1) % endpoints.len(),
        }
    }
}

/// Lists both services on every node, every 200 ms.
fn sample(
    endpoints: &[Endpoint],
    token: &str,
    stop: &AtomicBool,
    history: &History,
    samples: &Mutex<Vec<Sample>>,
) {
    let agent = agent(Duration::from_millis(800));
    let list = |e: &Endpoint, service: &str| -> Option<BTreeSet<String>> {
        let url = format!(
            "http://{}/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false&accessToken={token}",
            e.http
        );
        match request(&agent, "GET", &url) {
            Ok((200, body)) => {
                let v: Value = serde_json::from_str(&body).ok()?;
                Some(
                    v["hosts"]
                        .as_array()?
                        .iter()
                        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap_or("?"), h["port"]))
                        .collect(),
                )
            }
            _ => None,
        }
    };
    while !stop.load(Ordering::Relaxed) {
        for e in endpoints {
            let listed = list(e, HTTP_SERVICE).zip(list(e, GRPC_SERVICE));
            let at_us = history.now_us();
            samples.lock().unwrap().push(Sample {
                node: e.node,
                at_us,
                listed,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The samples that break the promise: a node that answered without a live client's
/// instance, outside the windows of the faults that hit it (from the fault's start until
/// `bound` after it was healed). A node that did not answer is not judged.
pub fn violations(samples: &[Sample], faults: &[Injected], bound: Duration) -> Vec<String> {
    let (want_http, want_grpc) = expected();
    let bound_us = bound.as_micros() as u64;
    let exempt = |node: usize, at: u64| {
        faults
            .iter()
            .any(|f| f.nodes.contains(&node) && at >= f.from_us && at <= f.healed_us + bound_us)
    };
    let mut out = Vec::new();
    for s in samples {
        let Some((http, grpc)) = &s.listed else {
            continue;
        };
        if exempt(s.node, s.at_us) {
            continue;
        }
        let missing: Vec<&String> = want_http
            .difference(http)
            .chain(want_grpc.difference(grpc))
            .collect();
        if !missing.is_empty() {
            out.push(format!(
                "at {:.2} s node {} did not list {missing:?}",
                s.at_us as f64 / 1e6,
                s.node
            ));
        }
    }
    out
}

/// The longest a node hit by a fault took, after the heal, to list every instance
/// again (µs), over the faults whose nodes answered before the next fault.
pub fn longest_recovery(samples: &[Sample], faults: &[Injected]) -> u64 {
    let (want_http, want_grpc) = expected();
    let mut longest = 0;
    for (k, f) in faults.iter().enumerate() {
        let next = faults.get(k + 1).map_or(u64::MAX, |n| n.from_us);
        for node in &f.nodes {
            let whole = samples.iter().find(|s| {
                s.node == *node
                    && s.at_us >= f.healed_us
                    && s.at_us < next
                    && s.listed
                        .as_ref()
                        .is_some_and(|(h, g)| *h == want_http && *g == want_grpc)
            });
            if let Some(s) = whole {
                longest = longest.max(s.at_us - f.healed_us);
            }
        }
    }
    longest
}

/// Writes the samples beside the history, one JSON object per line (for a failure's
/// post-mortem: which node listed what, when).
pub fn write_samples(path: &std::path::Path, samples: &[Sample]) {
    let lines: Vec<String> = samples
        .iter()
        .map(|s| {
            json!({"node": s.node, "at_us": s.at_us,
                   "listed": s.listed.as_ref().map(|(h, g)| json!({"http": h, "grpc": g}))})
            .to_string()
        })
        .collect();
    let _ = std::fs::write(path, lines.join("\n"));
}
