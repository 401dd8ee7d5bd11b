//! Connection balancing (issue 40, item 4): gRPC clients that behave as Nacos clients do
//! (`grpc_load`: they honour `ConnectResetRequest`, connecting to the server it names
//! and registering again there) spread back over three nodes after one restarts, at a
//! bounded rate, never moving a client twice within a minute, losing no registration
//! and never showing a subscriber an empty list; with `--no-grpc-rebalance` nothing
//! moves until Nacos' `loader/smartReloadCluster` asks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, Cluster, Value};

use crate::grpc_load::{Client, Observed, Shape};

/// Instances per service: a move of all of one service's clients at once would empty it.
const PER_SERVICE: usize = 3;
/// Connections younger than this are never moved (the server's rule, `balance::MIN_AGE`).
const MIN_AGE: Duration = Duration::from_secs(60);

fn service(k: usize) -> String {
    format!("balanced-{}", k / PER_SERVICE)
}

fn ip(k: usize) -> String {
    format!("127.23.{}.{}", k / 250, 1 + k % 250)
}

/// A load of `clients` on `c`, client k starting on server `first(k)`.
struct Load {
    rt: tokio::runtime::Runtime,
    seen: Arc<Observed>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    http: Vec<String>,
    token: String,
    clients: usize,
}

impl Load {
    fn start(c: &Cluster, clients: usize, first: fn(usize) -> usize) -> Self {
        let token = c.nodes[0].token();
        let servers: Arc<Vec<String>> = Arc::new(
            c.nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.http_port + 1000))
                .collect(),
        );
        let seen = Arc::new(Observed::new(clients));
        let stop = Arc::new(AtomicBool::new(false));
        let shape = Arc::new(Shape {
            service,
            ip,
            subscriptions: |k| vec![service(k)],
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let tasks = (0..clients)
            .map(|k| {
                let client = Client {
                    k,
                    servers: servers.clone(),
                    first: first(k),
                    token: token.clone(),
                    stop: stop.clone(),
                    seen: seen.clone(),
                    shape: shape.clone(),
                };
                rt.spawn(client.run())
            })
            .collect();
        let load = Self {
            rt,
            seen,
            stop,
            tasks,
            http: c.nodes.iter().map(|n| n.addr()).collect(),
            token,
            clients,
        };
        load.wait_all_listed(Duration::from_secs(60));
        load
    }

    /// Waits until every node lists every client's instance.
    fn wait_all_listed(&self, within: Duration) {
        for addr in &self.http {
            eventually(within, || {
                let listed = self.listed(addr)?;
                if listed == self.clients {
                    Ok(())
                } else {
                    Err(format!(
                        "{addr} lists {listed} of {} instances",
                        self.clients
                    ))
                }
            });
        }
    }

    /// Instances the node at `addr` lists over all the services (v1, as a user reads).
    fn listed(&self, addr: &str) -> Result<usize, String> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let mut listed = 0;
        for s in 0..self.clients.div_ceil(PER_SERVICE) {
            let mut answer = agent
                .get(format!(
                    "http://{addr}/nacos/v1/ns/instance/list?serviceName=balanced-{s}&healthyOnly=false&accessToken={}",
                    enc(&self.token)
                ))
                .call()
                .map_err(|e| e.to_string())?;
            let body: Value = answer.body_mut().read_json().map_err(|e| e.to_string())?;
            listed += body["hosts"].as_array().map_or(0, Vec::len);
        }
        Ok(listed)
    }

    /// Each node's gRPC connections, as its `loader/current` lists them.
    fn counts(&self, c: &Cluster) -> Vec<usize> {
        c.nodes
            .iter()
            .map(|n| {
                let r = n.call("GET", "/nacos/v3/admin/core/loader/current");
                assert_eq!(r.status, 200, "{}", r.body);
                r.json()["data"].as_object().map_or(0, |m| m.len())
            })
            .collect()
    }

    /// Stops the clients; what they saw.
    fn stop(self) -> Arc<Observed> {
        self.stop.store(true, Ordering::Relaxed);
        self.rt.block_on(async {
            for task in self.tasks {
                tokio::time::timeout(Duration::from_secs(10), task)
                    .await
                    .expect("clients stop")
                    .expect("client task");
            }
        });
        self.seen
    }
}

/// Whether every count is within 10 % (or 5) of their mean.
fn balanced(counts: &[usize]) -> bool {
    let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    let slack = (mean * 0.1).max(5.0);
    counts.iter().all(|n| (*n as f64 - mean).abs() <= slack)
}

/// What the nodes logged of their moves, for a failure's message.
fn moves_logged(c: &Cluster) -> String {
    let mut logged = String::new();
    for (i, node) in c.nodes.iter().enumerate() {
        for path in node.log_paths() {
            let log = std::fs::read_to_string(path).unwrap_or_default();
            for line in log.lines().filter(|l| l.contains("less loaded")) {
                logged.push_str(&format!("\nnode {}: {line}", i + 1));
            }
        }
    }
    logged
}

/// No client was asked to move to a named server twice within [`MIN_AGE`].
fn never_moved_twice_within_a_minute(seen: &Observed) {
    for (k, moves) in seen.redirects.iter().enumerate() {
        let moves = moves.lock().unwrap();
        for pair in moves.windows(2) {
            let apart = pair[1].duration_since(pair[0]);
            assert!(
                apart >= MIN_AGE - Duration::from_secs(1),
                "client {k} moved twice {apart:?} apart"
            );
        }
    }
}

#[test]
fn a_restarted_node_gets_its_share_of_grpc_clients_back() {
    const CLIENTS: usize = 300;
    let mut c = Cluster::start(3, &[]);
    let load = Load::start(&c, CLIENTS, |k| k);
    let connected = Instant::now();
    assert_eq!(load.counts(&c), [100, 100, 100]);

    // Balanced: nothing moves while the connections age past the minute.
    std::thread::sleep(MIN_AGE + Duration::from_secs(2) - connected.elapsed().min(MIN_AGE));
    assert_eq!(load.seen.redirects(), 0, "balanced clients were moved");

    // Node 1 stops: its clients go to the next server (node 2), which then shares them
    // with node 3 (a member leaving is a change of balance too).
    assert!(c.nodes[0].terminate().success(), "node 1 stops cleanly");
    eventually(Duration::from_secs(60), || {
        let on = [1, 2, 3].map(|i| load.seen.on_server(i));
        if on[0] == 0 && on[1] + on[2] == CLIENTS && balanced(&on[1..]) {
            Ok(())
        } else {
            Err(format!("clients per node {on:?}"))
        }
    });
    let while_away = load.seen.redirects();
    assert!(while_away >= 35, "{while_away} moved from node 2 to node 3");
    c.nodes[0].start_again();
    c.nodes[0].wait_ready();
    let back = Instant::now();
    assert!(!balanced(&load.counts(&c)), "{:?}", load.counts(&c));

    let mut history = Vec::new();
    eventually(Duration::from_secs(90), || {
        let counts = load.counts(&c);
        history.push((back.elapsed().as_secs(), counts.clone()));
        if balanced(&counts) && counts.iter().sum::<usize>() == CLIENTS {
            Ok(())
        } else {
            Err(format!("connections per node over time: {history:?}"))
        }
    });
    let took = back.elapsed();
    let moved = load.seen.redirects() - while_away;
    eprintln!(
        "{while_away} clients moved while node 1 was away; balanced {took:?} after it was \
         ready, {moved} clients moved: {history:?}"
    );
    // The moves came a batch at a time (20 per node, then 5 s for the counts to show
    // them): each loaded node's 50 extra took more than one batch.
    assert!(took >= Duration::from_secs(5), "balanced in {took:?}");
    assert!((80..=130).contains(&moved), "{moved} moves for 100 extra");

    // It stays balanced: no more moves.
    std::thread::sleep(Duration::from_secs(8));
    assert!(balanced(&load.counts(&c)), "{:?}", load.counts(&c));
    assert_eq!(
        load.seen.redirects() - while_away,
        moved,
        "clients moved after balance: {}",
        moves_logged(&c)
    );
    // Every registration is listed on every node, and the clients' own view agrees.
    load.wait_all_listed(Duration::from_secs(30));
    let on: Vec<usize> = [1, 2, 3].map(|i| load.seen.on_server(i)).into();
    assert!(balanced(&on), "clients' own view: {on:?}");

    let seen = load.stop();
    eprintln!("moves: {}", moves_logged(&c));
    let empty = seen.empty.lock().unwrap().clone();
    assert!(empty.is_empty(), "subscribers saw empty lists: {empty:?}");
    never_moved_twice_within_a_minute(&seen);
}

#[test]
fn without_rebalancing_clients_stay_until_smart_reload_asks() {
    const CLIENTS: usize = 60;
    let c = Cluster::start(3, &["--no-grpc-rebalance"]);
    // Every client on node 1, as after the others restarted.
    let load = Load::start(&c, CLIENTS, |_| 0);
    let connected = Instant::now();
    std::thread::sleep(MIN_AGE + Duration::from_secs(3) - connected.elapsed().min(MIN_AGE));
    assert_eq!(
        load.counts(&c),
        [60, 0, 0],
        "moved with --no-grpc-rebalance"
    );
    assert_eq!(load.seen.redirects(), 0);

    // Every member's count, as node 2 learned them from the hellos.
    let metrics = c.nodes[1].call("GET", "/nacos/v3/admin/core/loader/cluster");
    let data = &metrics.json()["data"];
    assert_eq!(data["total"], 60, "{data}");
    assert_eq!(
        (data["max"].clone(), data["min"].clone()),
        (60.into(), 0.into()),
        "{data}"
    );
    assert_eq!(data["completed"], true, "{data}");

    // Bad input changes nothing.
    let bad = c.nodes[1].call(
        "POST",
        "/nacos/v3/admin/core/loader/smartReloadCluster?loaderFactor=2",
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("loaderFactor"), "{}", bad.body);
    // Asked through another node than the loaded one.
    let r = c.nodes[1].call(
        "POST",
        "/nacos/v3/admin/core/loader/smartReloadCluster?loaderFactor=0.1",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["code"], 0, "{}", r.body);
    // One round: a batch (20) at most, shared by the two empty nodes.
    eventually(Duration::from_secs(10), || {
        let counts = load.counts(&c);
        if counts == [40, 10, 10] {
            Ok(())
        } else {
            Err(format!("after one round: {counts:?}"))
        }
    });
    // More rounds finish it; with the automatic balancing off, nothing moves between.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(load.counts(&c), [40, 10, 10], "moved without being asked");
    for _ in 0..2 {
        let r = c.nodes[2].call("POST", "/nacos/v3/admin/core/loader/smartReloadCluster");
        assert_eq!(r.status, 200, "{}", r.body);
        std::thread::sleep(Duration::from_secs(3));
    }
    eventually(Duration::from_secs(10), || {
        let counts = load.counts(&c);
        if balanced(&counts) && counts.iter().sum::<usize>() == CLIENTS {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        }
    });
    load.wait_all_listed(Duration::from_secs(30));
    let seen = load.stop();
    let empty = seen.empty.lock().unwrap().clone();
    assert!(empty.is_empty(), "subscribers saw empty lists: {empty:?}");
    never_moved_twice_within_a_minute(&seen);
}
