//! A rolling restart of three nodes under load (issue 21, item 3): a thousand ephemeral
//! gRPC clients that behave as Nacos 2.x clients do (`grpc_load`: each holds one
//! connection, registers its instance, and when its node goes away connects to the next
//! server and registers again), some of them subscribed; persistent writes through every node; readers listing
//! both services on every node. Each node in turn is stopped (SIGTERM), started again and
//! waited for until it holds everything. No acknowledged persistent write may be lost, and
//! no read or push may show an empty list for either service, which is never empty.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, Cluster, Value};

use crate::grpc_load::{Client, Observed, Shape};

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

/// What the readers and the writer saw (the gRPC clients' is [`Observed`]).
#[derive(Default)]
struct Seen {
    /// List answers (HTTP 200) read.
    reads: AtomicUsize,
    /// Every empty list seen, and where.
    empty: Mutex<Vec<String>>,
    /// Persistent instances whose registration was acknowledged.
    acked: Mutex<BTreeSet<String>>,
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
    let seen = Arc::new(Seen::default());
    let observed = Arc::new(Observed::new(CLIENTS));
    let shape = Arc::new(Shape {
        service: |_| EPHEMERAL.to_string(),
        ip: client_ip,
        subscriptions: |k| {
            if k < SUBSCRIBERS {
                vec![EPHEMERAL.to_string(), PERSISTENT.to_string()]
            } else {
                Vec::new()
            }
        },
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
                first: k,
                token: token.clone(),
                stop: stop.clone(),
                seen: observed.clone(),
                shape: shape.clone(),
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
                            observed.on[k].load(Ordering::Relaxed)
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

    let mut empty = seen.empty.lock().unwrap().clone();
    empty.extend(observed.empty.lock().unwrap().iter().cloned());
    assert!(empty.is_empty(), "empty lists seen: {empty:?}");
    let (reads, pushes, sessions) = (
        seen.reads.load(Ordering::Relaxed),
        observed.pushes.load(Ordering::Relaxed),
        observed.sessions.load(Ordering::Relaxed),
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
