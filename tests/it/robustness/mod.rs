//! Proof under faults, as etcd's robustness suite proves etcd (issue 36): clients drive
//! three real nodes in the test's own network namespaces through every node, over HTTP
//! and gRPC ([`workload`]: configuration items published, compared-and-set, removed and
//! read; persistent instances registered, deregistered and listed), while a nemesis
//! kills, freezes and partitions them and restarts the whole cluster at once
//! ([`nemesis`]). Every operation is recorded with its call and return times
//! ([`history`]), and the history is checked by `roster-checker` (tests/checker: Go,
//! porcupine): configuration writes, compare-and-sets and `consistent=true` reads, and
//! `consistent=true` instance lists, must be linearizable per key; a plain read must
//! return a value its key held no earlier than [`READ_LAG`] before it began, unless a
//! fault hit its node or took the leader away. Beside them, ephemeral clients that keep beating or stay
//! connected must be listed by every node not hit by a fault, and by every node again
//! within [`RECOVERY_BOUND`] of a heal ([`ephemeral`]).
//!
//! A run in `scripts/test` takes [`CI_SECS`] of faults; `ROSTER_ROBUSTNESS_SECS` makes
//! a longer campaign, `ROSTER_ROBUSTNESS_SEED` replays a seed (the schedule of faults and
//! operations; timing differs). The history is kept in `target/robustness/<seed>/` and,
//! when the checker refuses it, its failing keys are printed as tables and drawn by
//! porcupine's visualization there.

mod ephemeral;
mod history;
mod nemesis;
mod rng;
mod workload;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roster_tests::netlab::NetLab;
use roster_tests::{workspace_root, Cluster};

use history::History;
use nemesis::Fault;
use rng::Rng;
use workload::{Endpoint, Shared};

/// Seconds of faults in a run of the suite.
const CI_SECS: u64 = 100;
/// How far a plain read may lag the writes before it, on a node no fault hit: a
/// follower hears of each commit with the leader's next message, at most a heartbeat
/// (250 ms) later; the rest is room for a loaded machine.
const READ_LAG: Duration = Duration::from_secs(1);
/// How long after a heal a node may take to list every live ephemeral client again (a
/// restarted node loads them from a peer before it is ready; after a whole-cluster
/// restart the clients register again on their next beat or reconnection).
const RECOVERY_BOUND: Duration = Duration::from_secs(20);
/// CP clients.
const CLIENTS: usize = 6;

/// The checker binary `scripts/test` builds.
fn checker() -> PathBuf {
    let path = std::env::var_os("ROSTER_CHECKER")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/roster-checker"));
    assert!(
        path.exists(),
        "the history checker is not built at {} (scripts/test builds it from tests/checker with Go)",
        path.display()
    );
    path
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name}={v} is not a number: {e}"))
    })
}

#[test]
fn histories_under_faults_are_linearizable_and_live_clients_stay_listed() {
    let checker = checker();
    let seed = env_u64("ROSTER_ROBUSTNESS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let secs = env_u64("ROSTER_ROBUSTNESS_SECS").unwrap_or(CI_SECS);
    eprintln!(
        "robustness: seed {seed}, {secs} s of faults (replay the schedule: ROSTER_ROBUSTNESS_SEED={seed})"
    );
    let lab = NetLab::create(3)
        .unwrap_or_else(|e| panic!("this test needs network namespaces (root and iproute2): {e}"));
    let mut c = Cluster::start_in(&lab, 3, &[]);
    let token = c.nodes[0].token();
    let endpoints: Vec<Endpoint> = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Endpoint {
            node: i + 1,
            http: n.addr(),
            grpc: format!("{}:{}", lab.http_host(i + 1), n.http_port + 1000),
        })
        .collect();
    let history = Arc::new(History::new());
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    eprintln!(
        "robustness: the history's clock starts at {:.3} (Unix time, for the nodes' logs)",
        epoch.as_secs_f64()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let ap = ephemeral::Ephemeral::start(&endpoints, &token, history.clone(), stop.clone());
    let shared = Arc::new(Shared {
        endpoints: endpoints.clone(),
        token,
        history: history.clone(),
        stop: stop.clone(),
    });
    let clients = workload::spawn(CLIENTS, seed, shared);

    let mut rng = Rng::fork(seed, u64::MAX);
    let until = Instant::now() + Duration::from_secs(secs);
    let pace = nemesis::Pace {
        until,
        catch_up: READ_LAG * 2,
        recovery: RECOVERY_BOUND,
    };
    let faults = nemesis::run(&mut c, &lab, &mut rng, &history, pace, &|since_us| {
        ap.all_listed_since(since_us)
    });
    // A quiet spell at the end: every node back, every client listed again.
    std::thread::sleep(RECOVERY_BOUND);
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let samples = ap.finish();

    let dir = workspace_root().join(format!("target/robustness/{seed}"));
    let path = dir.join("history.json");
    history.write(&path, seed, READ_LAG.as_millis() as u64);
    eprintln!(
        "robustness: {} operations, {} faults ({}), {} list samples; history in {}",
        history.len(),
        faults.len(),
        Fault::ALL
            .iter()
            .map(|f| format!(
                "{} {}",
                faults.iter().filter(|i| i.fault == *f).count(),
                f.name()
            ))
            .collect::<Vec<_>>()
            .join(", "),
        samples.len(),
        path.display()
    );
    for (op, count) in history.summary() {
        eprintln!("  {count:>6} {op}");
    }
    eprintln!(
        "  {:>6} requests refused a connection (a node down): not sent, not recorded",
        history.not_sent()
    );
    eprintln!(
        "robustness: every node ready again at most {:.1} s after a heal; the slowest node listed every live client again {:.1} s after one",
        faults.iter().map(|f| f.ready_us - f.healed_us).max().unwrap_or(0) as f64 / 1e6,
        ephemeral::longest_recovery(&samples, &faults) as f64 / 1e6
    );

    // A minute, and more for a long campaign (the check of a 600 s one takes about a
    // second; the bound is for a history that is hard to decide, which then fails).
    let out = Command::new(&checker)
        .arg("--timeout")
        .arg(format!("{}s", 60 + secs / 5))
        .arg("--html")
        .arg(&dir)
        .arg(&path)
        .output()
        .expect("run the history checker");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{report}");
    ephemeral::write_samples(&dir.join("samples.json"), &samples);
    let lost = ephemeral::violations(&samples, &faults, RECOVERY_BOUND);
    if !lost.is_empty() || !out.status.success() {
        // The nodes' logs go beside the history (the temp dirs go with the nodes).
        for (i, node) in c.nodes.iter().enumerate() {
            for (start, log) in node.log_paths().iter().enumerate() {
                let to = dir.join(format!("node-{}-start-{}.log", i + 1, start + 1));
                let _ = std::fs::copy(log, to);
            }
        }
        eprintln!("robustness: the nodes' logs are in {}", dir.display());
    }
    assert!(
        lost.is_empty(),
        "seed {seed}: live ephemeral clients missing from a node's list ({} samples):\n{}",
        lost.len(),
        lost.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(
        out.status.success(),
        "seed {seed}: the checker refused the history ({}); it is in {}",
        out.status,
        dir.display()
    );
    // The nemesis ran (a fault takes 5-20 s with its quiet spell and recovery).
    assert!(
        faults.len() >= (secs / 20) as usize,
        "only {} faults in {secs} s",
        faults.len()
    );
}
