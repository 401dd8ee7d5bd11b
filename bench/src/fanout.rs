//! Push fan-out over Nacos 2.x gRPC: a fresh single node per system (roster first)
//! takes the plan's subscribers (10,000; 1,000 with `--quick`), each a connection of
//! its own from its own loopback address (`127.<3 + c/65536>.<c/256 % 256>.<c % 256>`;
//! roster caps connections at 500 per address), opened 200 at a time with the Java
//! client 2.x's handshake, then, once all are open (RSS read), subscribed to one service
//! (`SubscribeServiceRequest`) 200 at a time, every connection answering the server's requests (`NotifySubscriberRequest`,
//! `ClientDetectionRequest`) on its stream. Memory per connection is (RSS with every
//! connection open and subscribed − idle RSS of the same node) / connections open.
//! Then each round registers a new ephemeral instance of the service through
//! `POST /nacos/v1/ns/instance` and times, per subscriber, the first push whose
//! `serviceInfo.hosts` lists it, from just before the registration was sent (a miss
//! after [`ROUND_TIMEOUT`]); the instance is deregistered after the round and the
//! removal pushes are waited for (at most [`REMOVAL_TIMEOUT`]), so no instance expires
//! (30 s without beats) during a later round and each round starts from a quiet node.
//! Last, [`curve`] reads roster's RSS and CPU against subscribers, step by step, on one
//! more fresh node (issue 20's cost curve).

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::api::{Api, Instance};
use crate::grpc::{Connection, Options, Push};
use crate::machine::{established_to, rss_kib};
use crate::report::{percentile, thousands, Report, Row, Target, Unit};
use crate::servers::{self, Node, System};
use crate::shapes::Shape;
use crate::Bench;

/// The subscribed service.
const SERVICE: &str = "fanout";
/// Connections making their handshake and subscription at once.
const CONCURRENCY: usize = 200;
/// How long one connection may take to open and subscribe.
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long opening every connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(300);
/// Settling time before each RSS reading.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a round waits for every subscriber to see the new instance.
const ROUND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the removal pushes after a round are waited for.
const REMOVAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after the removal pushes, before the next round.
const BETWEEN_ROUNDS: Duration = Duration::from_millis(200);
/// Rounds in a row in which no subscriber saw the instance end the rounds.
const EMPTY_ROUNDS_STOP: usize = 2;
/// Descriptors the driver and each server keep beyond the connections.
const DESCRIPTOR_MARGIN: usize = 500;
/// The per-connection memory target, bytes ("≤ 20 KB").
const BYTES_TARGET: f64 = 20_000.0;
/// The push latency target (p99), ms.
const P99_TARGET_MS: f64 = 1000.0;

/// What one system's run measured.
struct Run {
    system: System,
    /// Connections asked for.
    wanted: usize,
    /// Connections open and subscribed.
    open: usize,
    /// Connections that failed to open or subscribe.
    failed: usize,
    /// The first failure, if any.
    first_error: Option<String>,
    /// Opening and subscribing all of them, seconds.
    connect_secs: f64,
    /// Established TCP connections to the server's gRPC port at the reading.
    established: usize,
    /// Subscribers the server lists for the service (`None`: not available).
    listed: Option<u64>,
    idle_mib: f64,
    /// RSS with every connection open, before any subscribed.
    connected_mib: f64,
    /// Connections open before the subscriptions.
    connected: usize,
    /// RSS with every connection open and subscribed.
    loaded_mib: f64,
    /// RSS after the rounds.
    after_mib: f64,
    /// What the push rounds saw (latencies sorted).
    rounds: Rounds,
    /// Server requests answered on the streams, in all.
    answered: usize,
    /// CPU used opening and subscribing.
    connect_cpu: Cpu,
    /// CPU used during the rounds.
    rounds_cpu: Cpu,
}

impl Run {
    /// Bytes per connection open, over the node's idle RSS.
    fn per_connection(&self) -> Option<f64> {
        (self.open > 0).then(|| (self.loaded_mib - self.idle_mib) * 1_048_576.0 / self.open as f64)
    }

    fn p(&self, p: f64) -> Option<f64> {
        percentile(&self.rounds.latencies_ms, p)
    }

    fn max(&self) -> Option<f64> {
        self.rounds.latencies_ms.last().copied()
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The loopback address connection `c` connects from.
fn client_ip(c: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 3 + (c / 65536) as u8, (c / 256) as u8, c as u8)
}

/// The instance registered in `round` (0-based).
fn round_instance(round: usize) -> Instance {
    Instance {
        service: SERVICE.to_string(),
        ip: format!("127.79.{}.{}", round / 250, 1 + round % 250),
        port: 8080,
        k: round,
    }
}

/// Whether `service` (a `serviceInfo`) lists `ip:port`.
fn lists(service: &Value, ip: &str, port: u16) -> bool {
    service["hosts"].as_array().is_some_and(|hosts| {
        hosts
            .iter()
            .any(|h| h["ip"].as_str() == Some(ip) && h["port"].as_u64() == Some(u64::from(port)))
    })
}

/// The subscriber count the plan asks for, lowered to what this process's descriptor
/// limit allows (the servers inherit the same limit) with a margin.
fn subscribers(wanted: usize) -> (usize, u64) {
    use rustix::process::{getrlimit, Resource};
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let room = (limit as usize).saturating_sub(DESCRIPTOR_MARGIN);
    (wanted.min(room), limit)
}

/// Runs the fan-out group: roster, then r-nacos, one fresh node each.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let wanted = bench.plan.fanout_subscribers;
    let rounds = bench.plan.fanout_rounds;
    let (n, limit) = subscribers(wanted);
    if n < wanted {
        report.check(format!(
            "fanout: {} subscribers instead of {} (descriptor limit {limit}, {DESCRIPTOR_MARGIN} kept)",
            thousands(n as u64),
            thousands(wanted as u64)
        ));
    }
    if n == 0 {
        bail!("no descriptors for gRPC connections (limit {limit})");
    }
    let mut runs = Vec::new();
    for system in System::BOTH {
        match measure(bench, report, system, n, rounds).await {
            Ok(run) => runs.push(run),
            Err(e) => report.check(format!("fanout FAILED for {system}: {e:#}")),
        }
    }
    for run in &runs {
        report.raw(
            format!("fanout.{}", run.system.key()),
            json!({
                "wanted": run.wanted, "open": run.open, "failed": run.failed,
                "connectSecs": run.connect_secs, "established": run.established,
                "listedSubscribers": run.listed, "idleMiB": run.idle_mib,
                "connectedMiB": run.connected_mib, "connected": run.connected,
                "connectCpu": {"serverSecs": run.connect_cpu.server,
                    "driverSecs": run.connect_cpu.driver, "wallSecs": run.connect_cpu.wall},
                "roundsCpu": {"serverSecs": run.rounds_cpu.server,
                    "driverSecs": run.rounds_cpu.driver, "wallSecs": run.rounds_cpu.wall},
                "loadedMiB": run.loaded_mib, "afterRoundsMiB": run.after_mib,
                "bytesPerConnection": run.per_connection(), "rounds": run.rounds.count,
                "receipts": run.rounds.latencies_ms.len(), "missed": run.rounds.missed,
                "p50Ms": run.p(50.0), "p99Ms": run.p(99.0), "maxMs": run.max(),
                "removalP99Ms": percentile(&run.rounds.removal_ms, 99.0),
                "removalMissed": run.rounds.removal_missed, "pushes": run.rounds.pushes,
                "stalePushes": run.rounds.stale,
                "answered": run.answered,
            }),
        );
    }
    rows(report, &runs, n, limit);
    match curve(bench, report, n).await {
        Ok(steps) => curve_rows(report, &steps),
        Err(e) => report.check(format!("fanout curve FAILED: {e:#}")),
    }
    Ok(())
}

/// The table rows.
fn rows(report: &mut Report, runs: &[Run], n: usize, limit: u64) {
    let of = |system: System| runs.iter().find(|r| r.system == system);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    let both = |f: &dyn Fn(&Run) -> Option<f64>| (roster.and_then(f), rnacos.and_then(f));
    let each = |f: &dyn Fn(&Run) -> String| {
        [roster, rnacos]
            .iter()
            .flatten()
            .map(|r| format!("{}: {}", r.system, f(r)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let count = thousands(n as u64);

    let (a, b) = both(&|r| Some(r.loaded_mib));
    report.rows.push(Row::pair(
        "fanout",
        format!("RSS with {count} gRPC subscribers"),
        Unit::MiB,
        a,
        b,
        None,
        each(&|r| {
            format!(
                "{} open ({} failed{}) in {:.1} s, {} established, {} subscribers listed, \
                 idle {:.1} MiB, {:.1} MiB with the connections open before they subscribed, \
                 {:.1} MiB after the rounds",
                thousands(r.open as u64),
                r.failed,
                r.first_error
                    .as_deref()
                    .map(|e| format!(", first: {e}"))
                    .unwrap_or_default(),
                r.connect_secs,
                thousands(r.established as u64),
                r.listed
                    .map(thousands)
                    .unwrap_or_else(|| "no count".to_string()),
                r.idle_mib,
                r.connected_mib,
                r.after_mib,
            )
        }),
    ));
    let (a, b) = both(&|r| r.per_connection());
    report.rows.push(Row::pair(
        "fanout",
        format!("memory per gRPC connection, {count} subscribed"),
        Unit::Bytes,
        a,
        b,
        Some(Target::AtMost(BYTES_TARGET)),
        format!(
            "(RSS with every connection open and subscribed − idle RSS of the same node) / \
             connections open, measured at {count} (the issue's 20,000 per node does not fit \
             the hard descriptor limit of {} that binds the driver and each server alike); {}",
            thousands(limit),
            each(&|r| format!(
                "{} connections, {} B each with the connections open before they subscribed",
                thousands(r.open as u64),
                thousands(
                    ((r.connected_mib - r.idle_mib).max(0.0) * 1_048_576.0
                        / r.connected.max(1) as f64)
                        .round() as u64
                )
            ))
        ),
    ));
    let receipts = |r: &Run| {
        format!(
            "{} of {} receipts over {} rounds, {} missed; {} pushes received",
            thousands(r.rounds.latencies_ms.len() as u64),
            thousands((r.open * r.rounds.count) as u64),
            r.rounds.count,
            thousands(r.rounds.missed as u64),
            thousands(r.rounds.pushes as u64),
        )
    };
    let (a, b) = both(&|r| r.p(50.0));
    report.rows.push(Row::pair(
        "fanout",
        format!("gRPC push fan-out to {count} subscribers, p50"),
        Unit::Ms,
        a,
        b,
        None,
        format!(
            "registration sent → first push listing the instance, per subscriber; {}",
            each(&receipts)
        ),
    ));
    let (a, b) = both(&|r| r.p(99.0));
    report.rows.push(Row::pair(
        "fanout",
        format!("gRPC push fan-out to {count} subscribers, p99"),
        Unit::Ms,
        a,
        b,
        Some(Target::Below(P99_TARGET_MS)),
        each(&|r| {
            format!(
                "max {:.0} ms, {} missed (after {} s); deregistration pushes p99 {:.0} ms, {} \
                 missed; during the rounds {}",
                r.max().unwrap_or(f64::NAN),
                thousands(r.rounds.missed as u64),
                ROUND_TIMEOUT.as_secs(),
                percentile(&r.rounds.removal_ms, 99.0).unwrap_or(f64::NAN),
                thousands(r.rounds.removal_missed as u64),
                r.rounds_cpu,
            )
        }),
    ));
}

/// Rounds run at each step of the cost curve.
const CURVE_ROUNDS: usize = 3;
/// How long the idle CPU of each curve step is read over.
const CURVE_IDLE: Duration = Duration::from_secs(5);
/// A step whose server CPU per change and subscriber is this many times the first
/// step's is the curve's knee (as is one whose p99 misses the latency target).
const KNEE_GROWTH: f64 = 1.5;

/// One step of the cost curve: what a node with `subscribers` subscribed connections
/// costs at rest and per change.
struct Step {
    subscribers: usize,
    rss_mib: f64,
    /// Server CPU per second of wall time with nothing changing, ms.
    idle_ms_per_sec: f64,
    /// Server CPU per change (a registration or a deregistration and its pushes), ms.
    cpu_per_change_ms: f64,
    p99_ms: Option<f64>,
    missed: usize,
}

impl Step {
    /// Server CPU per change and subscriber, µs.
    fn per_subscriber_us(&self) -> f64 {
        self.cpu_per_change_ms * 1000.0 / self.subscribers.max(1) as f64
    }
}

/// The curve's subscriber counts for a plan of `n`: a tenth, a quarter, half, all.
fn curve_steps(n: usize) -> Vec<usize> {
    let mut steps: Vec<usize> = [n / 10, n / 4, n / 2, n]
        .into_iter()
        .filter(|&s| s > 0)
        .collect();
    steps.dedup();
    steps
}

/// The first step past the knee: CPU per change and subscriber [`KNEE_GROWTH`] times
/// the first step's, or a p99 over the latency target.
fn knee(steps: &[Step]) -> Option<&Step> {
    let base = steps.first()?.per_subscriber_us();
    steps.iter().skip(1).find(|s| {
        s.per_subscriber_us() > base * KNEE_GROWTH || s.p99_ms.is_some_and(|p| p >= P99_TARGET_MS)
    })
}

/// CPU and RSS against subscribers (issue 20's cost curve): one fresh roster node takes
/// the subscribers in [`curve_steps`], and at each step, once they are open and
/// subscribed, its RSS, its CPU over [`CURVE_IDLE`] with nothing changing, and its CPU
/// over [`CURVE_ROUNDS`] push rounds are read.
async fn curve(bench: &Bench, report: &mut Report, n: usize) -> Result<Vec<Step>> {
    let system = System::Roster;
    let node = servers::start(system, &bench.setup, "fanout-curve").await?;
    tokio::time::sleep(SETTLE).await;
    let answered = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<Push>();
    let mut connections = Vec::new();
    let mut subscribed = HashSet::new();
    let mut steps = Vec::new();
    let mut opened_to = 0;
    let mut round = 0;
    for want in curve_steps(n) {
        eprintln!("  curve: {} subscribers", thousands(want as u64));
        let opened = open_all(node.grpc, opened_to..want, answered.clone(), tx.clone()).await;
        let opened = subscribe_all(opened).await;
        opened_to = want;
        subscribed.extend(opened.indices.iter().copied());
        connections.extend(opened.connections);
        tokio::time::sleep(SETTLE).await;
        let rss_mib = mib(rss_kib(node.pid)?);
        let idle = CpuMark::now(node.pid);
        tokio::time::sleep(CURVE_IDLE).await;
        let idle = idle.since(node.pid);
        let cpu = CpuMark::now(node.pid);
        let label = format!("curve {}", thousands(want as u64));
        let rounds = push_rounds(
            &node,
            &mut rx,
            &subscribed,
            n,
            round..round + CURVE_ROUNDS,
            &label,
        )
        .await?;
        let used = cpu.since(node.pid);
        round += rounds.count;
        let mut latencies = rounds.latencies_ms;
        latencies.sort_by(f64::total_cmp);
        let step = Step {
            subscribers: subscribed.len(),
            rss_mib,
            idle_ms_per_sec: idle.server * 1000.0 / idle.wall,
            cpu_per_change_ms: used.server * 1000.0 / (2 * rounds.count.max(1)) as f64,
            p99_ms: percentile(&latencies, 99.0),
            missed: rounds.missed + rounds.removal_missed,
        };
        report.check(format!(
            "fanout curve: {} of {want} subscribed, RSS {:.1} MiB, idle {:.1} ms of CPU per s, \
             {:.2} ms of CPU per change ({:.1} µs per subscriber), p99 {:.0} ms, {} missed; \
             rounds: {used}",
            thousands(step.subscribers as u64),
            step.rss_mib,
            step.idle_ms_per_sec,
            step.cpu_per_change_ms,
            step.per_subscriber_us(),
            step.p99_ms.unwrap_or(f64::NAN),
            step.missed,
        ));
        steps.push(step);
        if rounds.stopped {
            report.check(format!(
                "fanout curve: {EMPTY_ROUNDS_STOP} rounds in a row without a push; curve stopped"
            ));
            break;
        }
    }
    drop(connections);
    Ok(steps)
}

/// The curve's rows: RSS and CPU per change at each step, the knee named.
fn curve_rows(report: &mut Report, steps: &[Step]) {
    let knee = knee(steps);
    let knee_note = match knee {
        Some(k) => format!(
            "knee at {} subscribers (CPU per change and subscriber {:.1} µs against {:.1} at the \
             first step, p99 {:.0} ms)",
            thousands(k.subscribers as u64),
            k.per_subscriber_us(),
            steps[0].per_subscriber_us(),
            k.p99_ms.unwrap_or(f64::NAN)
        ),
        None => format!(
            "no knee up to {} subscribers (CPU per change and subscriber within {KNEE_GROWTH}x \
             of the first step's, p99 under {P99_TARGET_MS:.0} ms)",
            thousands(steps.last().map_or(0, |s| s.subscribers) as u64)
        ),
    };
    for step in steps {
        let count = thousands(step.subscribers as u64);
        report.rows.push(Row::pair(
            "fanout",
            format!("cost curve, {count} gRPC subscribers: RSS"),
            Unit::MiB,
            Some(step.rss_mib),
            None,
            None,
            format!(
                "one roster node, subscribers added step by step; idle {:.1} ms of CPU per s",
                step.idle_ms_per_sec
            ),
        ));
        report.rows.push(Row::pair(
            "fanout",
            format!("cost curve, {count} gRPC subscribers: server CPU per change"),
            Unit::Ms,
            Some(step.cpu_per_change_ms),
            None,
            None,
            format!(
                "{:.1} µs per subscriber; {CURVE_ROUNDS} registrations and their removals, p99 \
                 {:.0} ms, {} missed; {knee_note}",
                step.per_subscriber_us(),
                step.p99_ms.unwrap_or(f64::NAN),
                step.missed,
            ),
        ));
    }
}

/// One fresh node of `system`: idle RSS, `n` subscribers, RSS, then the push rounds.
async fn measure(
    bench: &Bench,
    report: &mut Report,
    system: System,
    n: usize,
    rounds: usize,
) -> Result<Run> {
    let node = servers::start(system, &bench.setup, &format!("fanout-{}", system.key())).await?;
    let api = node.api();
    tokio::time::sleep(SETTLE).await;
    let idle_mib = mib(rss_kib(node.pid)?);

    let answered = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<Push>();
    let started = Instant::now();
    eprintln!("  {system}: opening {} subscribers", thousands(n as u64));
    let cpu = CpuMark::now(node.pid);
    let opened = open_all(node.grpc, 0..n, answered.clone(), tx).await;
    let open_secs = started.elapsed().as_secs_f64();
    let connected = opened.connections.len();
    tokio::time::sleep(SETTLE).await;
    let connected_mib = mib(rss_kib(node.pid)?);
    let subscribing = Instant::now();
    let opened = subscribe_all(opened).await;
    let connect_secs = open_secs + subscribing.elapsed().as_secs_f64();
    let connect_cpu = cpu.since(node.pid);
    let open = opened.connections.len();
    tokio::time::sleep(SETTLE).await;
    let loaded_mib = mib(rss_kib(node.pid)?);
    let established = established_to(node.grpc.port());
    let listed = listed_subscribers(&api).await;
    report.check(format!(
        "fanout {system}: {} of {} gRPC connections open and subscribed in {connect_secs:.1} s \
         ({} opened in {open_secs:.1} s; {} failed{}); {} established to the gRPC port; {} \
         subscribers listed; RSS idle {idle_mib:.1} MiB, {connected_mib:.1} MiB connected, \
         {loaded_mib:.1} MiB subscribed; {connect_cpu}",
        thousands(open as u64),
        thousands(n as u64),
        thousands(connected as u64),
        opened.failed,
        opened
            .first_error
            .as_deref()
            .map(|e| format!(", first: {e}"))
            .unwrap_or_default(),
        thousands(established as u64),
        listed
            .map(thousands)
            .unwrap_or_else(|| "no count".to_string()),
    ));
    if open == 0 {
        bail!(
            "no connection opened: {}",
            opened.first_error.unwrap_or_default()
        );
    }

    let mut run = Run {
        system,
        wanted: n,
        open,
        failed: opened.failed,
        first_error: opened.first_error.clone(),
        connect_secs,
        established,
        listed,
        idle_mib,
        connected_mib,
        connected,
        loaded_mib,
        after_mib: loaded_mib,
        connect_cpu,
        rounds_cpu: Cpu::default(),
        rounds: Rounds::default(),
        answered: 0,
    };
    let subscribed: HashSet<usize> = opened.indices.iter().copied().collect();
    let cpu = CpuMark::now(node.pid);
    let rounds = push_rounds(
        &node,
        &mut rx,
        &subscribed,
        n,
        0..rounds,
        &system.to_string(),
    )
    .await?;
    if rounds.stopped {
        report.check(format!(
            "fanout {system}: {EMPTY_ROUNDS_STOP} rounds in a row without a push; rounds stopped"
        ));
    }
    run.rounds = rounds;
    run.rounds_cpu = cpu.since(node.pid);
    while rx.try_recv().is_ok() {
        run.rounds.stale += 1;
    }
    run.rounds.latencies_ms.sort_by(f64::total_cmp);
    run.rounds.removal_ms.sort_by(f64::total_cmp);
    run.after_mib = mib(rss_kib(node.pid)?);
    run.answered = answered.load(Ordering::Relaxed);
    report.check(format!(
        "fanout {system}: {} rounds, {} of {} receipts ({} missed after {} s), p50 {:.1} ms, \
         p99 {:.1} ms, max {:.1} ms; removal pushes p99 {:.1} ms ({} missed); {} pushes \
         received in the timed waits, {} outside them (on subscribing, late ones); {} server \
         requests answered on the streams (pushes and any other request); RSS after the \
         rounds {:.1} MiB; rounds: {}",
        run.rounds.count,
        thousands(run.rounds.latencies_ms.len() as u64),
        thousands((open * run.rounds.count) as u64),
        thousands(run.rounds.missed as u64),
        ROUND_TIMEOUT.as_secs(),
        run.p(50.0).unwrap_or(f64::NAN),
        run.p(99.0).unwrap_or(f64::NAN),
        run.max().unwrap_or(f64::NAN),
        percentile(&run.rounds.removal_ms, 99.0).unwrap_or(f64::NAN),
        thousands(run.rounds.removal_missed as u64),
        thousands(run.rounds.pushes as u64),
        thousands(run.rounds.stale as u64),
        thousands(run.answered as u64),
        run.after_mib,
        run.rounds_cpu,
    ));
    // The connections close before the node goes.
    drop(opened);
    Ok(run)
}

/// What a series of push rounds saw.
#[derive(Default)]
struct Rounds {
    /// Rounds run.
    count: usize,
    /// Registration → push latencies, ms, unsorted.
    latencies_ms: Vec<f64>,
    /// (subscriber, round) pairs that never saw the instance.
    missed: usize,
    /// Deregistration → push latencies, ms, unsorted.
    removal_ms: Vec<f64>,
    /// Subscriber-rounds that saw no removal push in time.
    removal_missed: usize,
    /// Pushes received in the timed waits.
    pushes: usize,
    /// Pushes received outside them (on subscribing, late ones).
    stale: usize,
    /// Whether the rounds stopped early, [`EMPTY_ROUNDS_STOP`] rounds in a row unseen.
    stopped: bool,
}

/// Runs the rounds numbered `numbers` on `node`: each registers
/// [`round_instance`]`(number)`, waits for every subscriber in `subscribed` to be pushed
/// a list naming it, deregisters it and waits for the removal pushes.
async fn push_rounds(
    node: &Node,
    rx: &mut mpsc::UnboundedReceiver<Push>,
    subscribed: &HashSet<usize>,
    n: usize,
    numbers: Range<usize>,
    label: &str,
) -> Result<Rounds> {
    let api = node.api();
    let open = subscribed.len();
    let mut out = Rounds::default();
    let mut empty_rounds = 0;
    for round in numbers {
        // Stale pushes (subscription, earlier rounds) must not count for this round.
        while rx.try_recv().is_ok() {
            out.stale += 1;
        }
        let instance = round_instance(round);
        let sent = Instant::now();
        api.register(&instance, true, Shape::None)
            .await
            .with_context(|| format!("round {}: registering", round + 1))?;
        let (seen, pushes) = await_pushes(rx, subscribed, n, sent, ROUND_TIMEOUT, |s| {
            lists(s, &instance.ip, instance.port)
        })
        .await;
        out.pushes += pushes;
        out.count += 1;
        let got = seen.len();
        out.missed += open - got;
        out.latencies_ms.extend(seen.iter().map(ms));
        let removed = Instant::now();
        deregister(node, &instance)
            .await
            .with_context(|| format!("round {}: deregistering", round + 1))?;
        let (gone, pushes) = await_pushes(rx, subscribed, n, removed, REMOVAL_TIMEOUT, |s| {
            !lists(s, &instance.ip, instance.port)
        })
        .await;
        out.pushes += pushes;
        out.removal_missed += open - gone.len();
        out.removal_ms.extend(gone.iter().map(ms));
        let mut this: Vec<f64> = seen.iter().map(ms).collect();
        this.sort_by(f64::total_cmp);
        eprintln!(
            "  {label} round {}: {} of {open} saw it, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; \
             removal seen by {}",
            round + 1,
            got,
            percentile(&this, 50.0).unwrap_or(f64::NAN),
            percentile(&this, 99.0).unwrap_or(f64::NAN),
            this.last().copied().unwrap_or(f64::NAN),
            gone.len(),
        );
        empty_rounds = if got == 0 { empty_rounds + 1 } else { 0 };
        if empty_rounds >= EMPTY_ROUNDS_STOP {
            out.stopped = true;
            break;
        }
        tokio::time::sleep(BETWEEN_ROUNDS).await;
    }
    Ok(out)
}

fn ms(d: &Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits until every subscriber in `subscribed` has had a push that `wanted` accepts,
/// or `timeout` after `from`; each one's first such push, timed from `from`, and the
/// pushes received in all.
async fn await_pushes(
    rx: &mut mpsc::UnboundedReceiver<Push>,
    subscribed: &HashSet<usize>,
    n: usize,
    from: Instant,
    timeout: Duration,
    wanted: impl Fn(&Value) -> bool,
) -> (Vec<Duration>, usize) {
    let deadline = from + timeout;
    let mut got: Vec<Option<Duration>> = vec![None; n];
    let mut remaining = subscribed.len();
    let mut pushes = 0;
    while remaining > 0 {
        let push = match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
            Ok(Some(p)) => p,
            Ok(None) | Err(_) => break,
        };
        pushes += 1;
        let s = push.subscriber;
        if s < n && got[s].is_none() && subscribed.contains(&s) && wanted(&push.service) {
            got[s] = Some(push.at.saturating_duration_since(from));
            remaining -= 1;
        }
    }
    (got.into_iter().flatten().collect(), pushes)
}

/// Deregisters `instance` (`DELETE /nacos/v1/ns/instance`, ephemeral).
async fn deregister(node: &Node, instance: &Instance) -> Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let answer = client
        .delete(format!(
            "http://{}/nacos/v1/ns/instance?serviceName={}&ip={}&port={}&ephemeral=true",
            node.http, instance.service, instance.ip, instance.port
        ))
        .send()
        .await?;
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("deregistering answered {status} {body}");
    }
    Ok(())
}

/// The subscribers the server lists for the service, if it answers.
async fn listed_subscribers(api: &Api) -> Option<u64> {
    let answer = api
        .get(&format!(
            "/nacos/v1/ns/service/subscribers?serviceName={SERVICE}&pageNo=1&pageSize=1"
        ))
        .await
        .ok()?;
    if answer.status != 200 {
        return None;
    }
    answer.json().ok()?["count"].as_u64()
}

/// The open, subscribed connections and what failed.
struct Opened {
    connections: Vec<Connection>,
    /// Index of each open connection.
    indices: Vec<usize>,
    failed: usize,
    first_error: Option<String>,
}

/// Opens the connections numbered `range` to `addr`, [`CONCURRENCY`] at a time,
/// connection `c` from [`client_ip`]`(c)`, its pushes sent to `tx` under index `c`.
async fn open_all(
    addr: SocketAddr,
    range: Range<usize>,
    answered: Arc<AtomicUsize>,
    tx: mpsc::UnboundedSender<Push>,
) -> Opened {
    let gate = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = JoinSet::new();
    let n = range.len();
    for c in range {
        let (gate, answered, tx) = (gate.clone(), answered.clone(), tx.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let options = Options {
                token: None,
                pushes: Some((c, tx)),
            };
            let outcome = tokio::time::timeout(
                OPEN_TIMEOUT,
                Connection::open_with(addr, client_ip(c), answered, options),
            )
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("opening timed out")));
            (c, outcome)
        });
    }
    drop(tx);
    collect(tasks, n, 0, None).await
}

/// Subscribes every connection of `opened` to [`SERVICE`], [`CONCURRENCY`] at a time;
/// the connections whose subscription was answered.
async fn subscribe_all(opened: Opened) -> Opened {
    let gate = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = JoinSet::new();
    let n = opened.connections.len();
    for (c, mut connection) in opened.indices.into_iter().zip(opened.connections) {
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let outcome =
                match tokio::time::timeout(OPEN_TIMEOUT, connection.subscribe(SERVICE)).await {
                    Ok(Ok(_)) => Ok(connection),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(anyhow::anyhow!("subscribing timed out")),
                };
            (c, outcome)
        });
    }
    collect(tasks, n, opened.failed, opened.first_error).await
}

/// Gathers what `tasks` return (at most [`CONNECT_TIMEOUT`]; what is still running
/// then counts as failed and is aborted), on top of `failed` earlier failures.
async fn collect(
    mut tasks: JoinSet<(usize, Result<Connection>)>,
    n: usize,
    failed: usize,
    first_error: Option<String>,
) -> Opened {
    let mut opened = Opened {
        connections: Vec::with_capacity(n),
        indices: Vec::with_capacity(n),
        failed,
        first_error,
    };
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, tasks.join_next()).await {
            Ok(Some(Ok((c, Ok(connection))))) => {
                opened.connections.push(connection);
                opened.indices.push(c);
            }
            Ok(Some(Ok((_, Err(e))))) => {
                opened.failed += 1;
                opened.first_error.get_or_insert(format!("{e:#}"));
            }
            Ok(Some(Err(e))) => {
                opened.failed += 1;
                opened.first_error.get_or_insert(format!("{e:#}"));
            }
            Ok(None) => break,
            Err(_) => {
                // The set aborts what is still running when dropped.
                opened.failed += tasks.len();
                opened
                    .first_error
                    .get_or_insert_with(|| format!("not done in {CONNECT_TIMEOUT:?}"));
                break;
            }
        }
    }
    opened
}

/// CPU time `pid` (or this process, `None`) has used, user and system, seconds
/// (`/proc/PID/stat`, in USER_HZ ticks: 100 a second on Linux).
fn cpu_secs(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // After the command name: state is the first field, utime the 12th, stime the 13th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// CPU seconds used by the server and by the driver between two readings.
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    server: f64,
    driver: f64,
    wall: f64,
}

/// A CPU reading of the server `pid` and of the driver.
struct CpuMark {
    server: Option<f64>,
    driver: Option<f64>,
    at: Instant,
}

impl CpuMark {
    fn now(pid: u32) -> Self {
        Self {
            server: cpu_secs(Some(pid)),
            driver: cpu_secs(None),
            at: Instant::now(),
        }
    }

    /// What was used since `self`.
    fn since(&self, pid: u32) -> Cpu {
        let now = Self::now(pid);
        let diff = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        };
        Cpu {
            server: diff(self.server, now.server),
            driver: diff(self.driver, now.driver),
            wall: now.at.duration_since(self.at).as_secs_f64(),
        }
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server {:.1} s, driver {:.1} s of CPU over {:.1} s",
            self.server, self.driver, self.wall
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_addresses_are_distinct_loopback() {
        let ips: HashSet<Ipv4Addr> = (0..20_000).map(client_ip).collect();
        assert_eq!(ips.len(), 20_000);
        assert!(ips.iter().all(|ip| ip.is_loopback()));
        assert!((0..500).all(|r| round_instance(r)
            .ip
            .parse::<Ipv4Addr>()
            .unwrap()
            .is_loopback()));
    }

    #[test]
    fn curve_steps_grow_to_the_plan() {
        assert_eq!(curve_steps(10_000), [1_000, 2_500, 5_000, 10_000]);
        assert_eq!(curve_steps(3), [1, 3]);
        assert_eq!(curve_steps(1), [1]);
    }

    #[test]
    fn the_knee_is_where_cost_per_subscriber_grows() {
        let step = |subscribers, cpu_per_change_ms, p99| Step {
            subscribers,
            rss_mib: 0.0,
            idle_ms_per_sec: 0.0,
            cpu_per_change_ms,
            p99_ms: Some(p99),
            missed: 0,
        };
        let flat = [step(1_000, 10.0, 50.0), step(2_000, 21.0, 90.0)];
        assert!(knee(&flat).is_none());
        let steep = [
            step(1_000, 10.0, 50.0),
            step(2_000, 20.0, 90.0),
            step(4_000, 80.0, 300.0),
        ];
        assert_eq!(knee(&steep).map(|s| s.subscribers), Some(4_000));
        let slow = [step(1_000, 10.0, 50.0), step(2_000, 20.0, 1_200.0)];
        assert_eq!(knee(&slow).map(|s| s.subscribers), Some(2_000));
    }

    #[test]
    fn hosts_are_matched_by_ip_and_port() {
        let service = json!({"hosts": [{"ip": "127.79.0.1", "port": 8080}]});
        assert!(lists(&service, "127.79.0.1", 8080));
        assert!(!lists(&service, "127.79.0.1", 8081));
        assert!(!lists(&service, "127.79.0.2", 8080));
        assert!(!lists(&Value::Null, "127.79.0.1", 8080));
    }
}
