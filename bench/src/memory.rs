//! Resident memory of a fresh single node per system, round and instance shape
//! ([`Shape`]): idle, then right after the last of the plan's ephemeral registrations
//! (100,000; 30,000 with `--quick`) of that shape is acknowledged, and for the `none`
//! shape also at 10,000 on the way. HTTP shapes register 1,000 services of 100 through
//! `POST /nacos/v1/ns/instance` (32 in flight); the gRPC shape opens one Nacos 2.x
//! connection per 100 instances (1,000), each registering one instance in each of 100
//! services (50 connections registering at a time, all held open until the readings are
//! taken). The count each server holds is read from its API just after each reading, so
//! the figure is for what it really held (ephemeral HTTP instances expire 30 s after
//! registration without beats; the age of the oldest one at the reading is reported),
//! and one listed instance's metadata is compared with what was sent. Memory per
//! instance is (loaded RSS − idle RSS of the same node) / instances held.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::api::{services, Api, Bulk, Instance, Layout};
use crate::grpc::Connection;
use crate::machine::rss_kib;
use crate::report::{median, thousands, Report, Row, Target, Unit};
use crate::servers::{self, System};
use crate::shapes::Shape;
use crate::Bench;

/// Instance layout of the HTTP shapes: 100 per service.
const LAYOUT: Layout = Layout {
    prefix: "mem",
    per_service: 100,
};
/// Services each gRPC connection registers one instance in (`mem-0..99`).
const GRPC_SERVICES: usize = 100;
/// gRPC connections making their handshake and registrations at once.
const GRPC_CONCURRENCY: usize = 50;
/// Settling time before the idle reading.
const IDLE_SETTLE: Duration = Duration::from_secs(2);

/// One reading of a loaded node.
#[derive(Clone, Copy, Debug)]
struct Reading {
    /// Instances registered (acknowledged or not) when it was taken.
    registered: usize,
    /// VmRSS, MiB.
    rss_mib: f64,
    /// Instances the server listed right after.
    held: usize,
    /// Age of the oldest instance at the reading, seconds.
    oldest_secs: f64,
}

/// One node's readings.
struct Run {
    round: usize,
    system: System,
    shape: Shape,
    idle_mib: f64,
    /// In registration order; the last is at the plan's count.
    loaded: Vec<Reading>,
}

impl Run {
    /// The reading at the plan's count.
    fn full(&self) -> Option<&Reading> {
        self.loaded.last()
    }

    /// Bytes per instance held at the full reading, over the node's idle RSS.
    fn per_instance(&self) -> Option<f64> {
        self.full()
            .filter(|r| r.held > 0)
            .map(|r| (r.rss_mib - self.idle_mib) * 1_048_576.0 / r.held as f64)
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the memory readings: for each round, each shape, each system (in the round's
/// ABBA order) a fresh node.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let [first, count] = bench.plan.rss_counts;
    let mut runs: Vec<Run> = Vec::new();
    for round in bench.rounds() {
        for &shape in &bench.shapes {
            // `none` keeps the reading at 10,000 on the way, the other shapes read once.
            let counts = if shape == Shape::None {
                vec![first, count]
            } else {
                vec![count]
            };
            for system in bench.order(round) {
                match measure(bench, report, round, system, shape, &counts).await {
                    Ok(run) => runs.push(run),
                    // One run failing (a system refusing a shape) keeps the others.
                    Err(e) => report.check(format!(
                        "FAILED: {system}, {}, round {}: {e:#}",
                        shape.key(),
                        round + 1
                    )),
                }
            }
        }
    }
    for system in System::BOTH {
        let raw: Vec<Value> = runs
            .iter()
            .filter(|r| r.system == system)
            .map(|r| {
                json!({
                    "round": r.round + 1,
                    "shape": r.shape.key(),
                    "idleMiB": r.idle_mib,
                    "loaded": r.loaded.iter().map(|x| json!({
                        "registered": x.registered, "held": x.held, "rssMiB": x.rss_mib,
                        "oldestSecs": x.oldest_secs,
                    })).collect::<Vec<_>>(),
                    "bytesPerInstance": r.per_instance(),
                })
            })
            .collect();
        report.raw(format!("rss.{}", system.key()), raw);
    }
    rows(bench, report, &runs, first, count);
    Ok(())
}

/// The table rows: idle once, then per shape the loaded RSS and the memory per
/// instance (with the target).
fn rows(bench: &Bench, report: &mut Report, runs: &[Run], first: usize, count: usize) {
    // A system's figures over the runs `pick` reads: the median, and each run's figure.
    let of = |system: System, pick: &dyn Fn(&Run) -> Option<f64>, digits: usize| {
        let values: Vec<f64> = runs
            .iter()
            .filter(|r| r.system == system)
            .filter_map(pick)
            .collect();
        let rounds = values
            .iter()
            .map(|v| format!("{v:.digits$}"))
            .collect::<Vec<_>>()
            .join(" · ");
        (median(values), rounds)
    };
    let idle = |r: &Run| Some(r.idle_mib);
    let ((roster, roster_idle), (rnacos, rnacos_idle)) =
        (of(System::Roster, &idle, 1), of(System::RNacos, &idle, 1));
    report.rows.push(Row::pair(
        "rss",
        "RSS idle",
        Unit::MiB,
        roster,
        rnacos,
        None,
        format!(
            "fresh node, 2 s after ready, one per shape and round ({} shape{} × {} round{}); \
             per node {roster_idle} vs {rnacos_idle}",
            bench.shapes.len(),
            if bench.shapes.len() == 1 { "" } else { "s" },
            bench.plan.rounds,
            if bench.plan.rounds == 1 { "" } else { "s" },
        ),
    ));
    for &shape in &bench.shapes {
        let of_shape: Vec<&Run> = runs.iter().filter(|r| r.shape == shape).collect();
        // Every run must have held every instance at each reading.
        let short: Vec<String> = of_shape
            .iter()
            .flat_map(|r| r.loaded.iter().map(move |x| (r, x)))
            .filter(|(_, x)| x.held < x.registered)
            .map(|(r, x)| {
                format!(
                    "{} round {} held {} of {}",
                    r.system,
                    r.round + 1,
                    thousands(x.held as u64),
                    thousands(x.registered as u64)
                )
            })
            .collect();
        let expected = 2 * bench.plan.rounds;
        let held_note = if !short.is_empty() {
            format!("HELD FEWER: {}", short.join(", "))
        } else if of_shape.len() < expected {
            format!(
                "{} of {expected} runs failed (see Checks)",
                expected - of_shape.len()
            )
        } else {
            "every run held every instance".to_string()
        };
        let readings = if shape == Shape::None {
            vec![(0, first), (1, count)]
        } else {
            vec![(0, count)]
        };
        for (i, at) in readings {
            let rss = |r: &Run| {
                (r.shape == shape)
                    .then(|| r.loaded.get(i).map(|x| x.rss_mib))
                    .flatten()
            };
            let ((roster, roster_rounds), (rnacos, rnacos_rounds)) =
                (of(System::Roster, &rss, 1), of(System::RNacos, &rss, 1));
            report.rows.push(Row::pair(
                "rss",
                format!("RSS at {} instances, {}", thousands(at as u64), shape.key()),
                Unit::MiB,
                roster,
                rnacos,
                None,
                format!("{held_note}; per round {roster_rounds} vs {rnacos_rounds}"),
            ));
        }
        let per = |r: &Run| (r.shape == shape).then(|| r.per_instance()).flatten();
        let ((roster, roster_rounds), (rnacos, rnacos_rounds)) =
            (of(System::Roster, &per, 0), of(System::RNacos, &per, 0));
        report.rows.push(Row::pair(
            "rss",
            format!("memory per instance, {}", shape.key()),
            Unit::Bytes,
            roster,
            rnacos,
            Some(Target::RatioAtMost(0.5)),
            format!(
                "(RSS at {} − idle RSS of the same node) / instances held; per round \
                 {roster_rounds} vs {rnacos_rounds}",
                thousands(count as u64)
            ),
        ));
    }
}

/// One fresh node of `system`: its idle RSS, then `counts` instances of `shape`.
async fn measure(
    bench: &Bench,
    report: &mut Report,
    round: usize,
    system: System,
    shape: Shape,
    counts: &[usize],
) -> Result<Run> {
    let name = format!("rss-{}-{}-r{}", shape.key(), system.key(), round + 1);
    let node = servers::start(system, &bench.setup, &name).await?;
    let api = node.api();
    tokio::time::sleep(IDLE_SETTLE).await;
    let mut run = Run {
        round,
        system,
        shape,
        idle_mib: mib(rss_kib(node.pid)?),
        loaded: Vec::new(),
    };
    let label = format!("{system}, {}, round {}", shape.key(), round + 1);
    if shape.is_grpc() {
        let count = *counts.last().unwrap_or(&0);
        let answered = Arc::new(AtomicUsize::new(0));
        let first_registration = Instant::now();
        let (connections, bulk) = register_grpc(node.grpc, count, answered.clone()).await;
        let rss_mib = mib(rss_kib(node.pid)?);
        let oldest_secs = first_registration.elapsed().as_secs_f64();
        let service_names = services(LAYOUT.prefix, GRPC_SERVICES.min(count));
        let held = api.count(&service_names).await?;
        let metadata = metadata_check(&api, &service_names[0], shape).await;
        report.check(format!(
            "{label}: RSS {rss_mib:.1} MiB with {} instances held ({} registered over {} gRPC \
             connections at {:.0}/s, {} failed; {} server requests answered on the streams; {metadata})",
            thousands(held as u64),
            thousands(count as u64),
            thousands(connections.len() as u64),
            bulk.acked as f64 / bulk.secs,
            bulk.failed,
            answered.load(Ordering::Relaxed),
        ));
        run.loaded.push(Reading {
            registered: count,
            rss_mib,
            held,
            oldest_secs,
        });
        // The connections close once the readings are taken.
        drop(connections);
    } else {
        let first_registration = Instant::now();
        let mut registered = 0;
        for &count in counts {
            let bulk = api
                .register_bulk(LAYOUT, registered..count, true, shape)
                .await?;
            let rss_mib = mib(rss_kib(node.pid)?);
            let oldest_secs = first_registration.elapsed().as_secs_f64();
            let held = api.count(&LAYOUT.services(count)).await?;
            let metadata = metadata_check(&api, &LAYOUT.services(1)[0], shape).await;
            report.check(format!(
                "{label}: RSS {rss_mib:.1} MiB with {} instances held ({} registered at {:.0}/s, \
                 {} failed; oldest {oldest_secs:.0} s old; {metadata})",
                thousands(held as u64),
                thousands((count - registered) as u64),
                bulk.acked as f64 / bulk.secs,
                bulk.failed,
            ));
            run.loaded.push(Reading {
                registered: count,
                rss_mib,
                held,
                oldest_secs,
            });
            registered = count;
        }
    }
    for x in &run.loaded {
        if x.held < x.registered {
            report.check(format!(
                "FAIL: {label} held {} of {} instances registered",
                thousands(x.held as u64),
                thousands(x.registered as u64)
            ));
        }
    }
    Ok(run)
}

/// Whether the first instance `service` lists carries the metadata of `shape` (the
/// instance-specific `timestamp` aside), as a note.
async fn metadata_check(api: &Api, service: &str, shape: Shape) -> String {
    let hosts = match api.hosts(service, true).await {
        Ok(h) => h,
        Err(e) => return format!("metadata not read: {e:#}"),
    };
    let Some(host) = hosts.first() else {
        return "no instance to check the metadata of".to_string();
    };
    let held = host["metadata"].as_object().cloned().unwrap_or_default();
    let mut expected = shape.metadata(service, 0).unwrap_or_default();
    let same = held.len() == expected.len()
        && expected
            .iter_mut()
            .all(|(key, value)| key == "timestamp" || held.get(key) == Some(value));
    if same {
        format!("metadata as sent, {} keys", held.len())
    } else {
        format!(
            "METADATA DIFFERS: {} keys held, {} sent",
            held.len(),
            expected.len()
        )
    }
}

/// Opens `count / GRPC_SERVICES` gRPC connections to `addr`, `GRPC_CONCURRENCY` making
/// their handshake and registrations at a time; connection `c` connects from
/// `127.<1 + c/65536>.<c/256 % 256>.<c % 256>` and registers that address, port 8080, in each of
/// `mem-0..GRPC_SERVICES`. Returns the open connections (the instances live as long as
/// they do) and what the registrations achieved.
async fn register_grpc(
    addr: SocketAddr,
    count: usize,
    answered: Arc<AtomicUsize>,
) -> (Vec<Connection>, Bulk) {
    let started = Instant::now();
    let gate = Arc::new(Semaphore::new(GRPC_CONCURRENCY));
    let connections = count / GRPC_SERVICES;
    let mut tasks = Vec::with_capacity(connections);
    for c in 0..connections {
        let (gate, answered) = (gate.clone(), answered.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            let mut acked = 0;
            let outcome = async {
                // The connection comes from the address its instances name.
                let ip = Ipv4Addr::new(127, 1 + (c / 65536) as u8, (c / 256) as u8, c as u8);
                let mut connection = Connection::open(addr, ip, answered).await?;
                for s in 0..GRPC_SERVICES {
                    let instance = Instance {
                        service: format!("{}-{s}", LAYOUT.prefix),
                        ip: ip.to_string(),
                        port: 8080,
                        k: c * GRPC_SERVICES + s,
                    };
                    let metadata = Shape::Grpc.metadata(&instance.service, instance.k);
                    connection.register(&instance, metadata).await?;
                    acked += 1;
                }
                Ok::<Connection, anyhow::Error>(connection)
            }
            .await;
            (outcome, acked)
        }));
    }
    let mut open = Vec::with_capacity(connections);
    let mut bulk = Bulk {
        acked: 0,
        failed: 0,
        secs: 0.0,
    };
    let mut first_error = None;
    for task in tasks {
        let (outcome, acked) = match task.await {
            Ok(x) => x,
            Err(e) => (Err(anyhow::Error::new(e)), 0),
        };
        bulk.acked += acked;
        bulk.failed += GRPC_SERVICES - acked;
        match outcome {
            Ok(connection) => open.push(connection),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    bulk.secs = started.elapsed().as_secs_f64();
    if let Some(e) = first_error {
        eprintln!("  gRPC registration failed: {e:#}");
    }
    (open, bulk)
}
