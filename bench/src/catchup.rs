//! Catch-up at scale (roster only): a three-node cluster holds a million Dubbo-shaped
//! ephemeral instances, owned by Nacos 2.x gRPC connections to node 1 (5,000
//! connections, 200 instances each, so no beats are needed to keep them), and 10,000
//! persistent ones; every node's RSS is read once all three hold them; then node 3 is
//! killed with SIGKILL and started again on its data, and the group times how long it
//! takes to answer `/health/ready` 200 and to hold every instance again; then a fourth
//! node is started with `--join` and added through node 1 (what `roster cluster add`
//! sends), timed the same way from its start; last, 1,000 more connections each
//! register 100 instances in one `BatchInstanceRequest` through node 1. The CPU each
//! node spends per registration, and while idle with everything held, is read too.

use std::net::Ipv4Addr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::sync::Semaphore;

use crate::api::{Api, Instance};
use crate::grpc::Connection;
use crate::machine::{cpu_secs, rss_kib};
use crate::report::{thousands, Report, Row, Target, Unit};
use crate::servers::{self, Cluster, Node, System};
use crate::shapes::Shape;
use crate::Bench;

/// Services the gRPC connections register in: each connection one instance in each.
const SERVICES: usize = 200;
/// Connections registering at once.
const CONCURRENCY: usize = 100;
/// Persistent registrations in flight.
const PERSISTENT_CONCURRENCY: usize = 32;
/// How long every node may take to hold what node 1 holds, and the restarted node to
/// catch up (the target is 10 s; past this the run gives up).
const CONVERGE: Duration = Duration::from_secs(120);
/// How many times a persistent registration answered 503 is sent again.
const RETRIES: usize = 3;
/// Persistent registrations sent again (reported in the notes).
static RETRIED: AtomicUsize = AtomicUsize::new(0);
/// The catch-up targets, seconds.
const TARGET_SECS: f64 = 10.0;
/// RSS target per node at a million instances, MiB.
const TARGET_MIB: f64 = 1024.0;

/// Connections of the batch phase, each sending one `BatchInstanceRequest`.
const BATCH_CONNECTIONS: usize = 1_000;
/// Instances per batch.
const BATCH_SIZE: usize = 100;

/// Opens `count` gRPC connections to `node`, [`CONCURRENCY`] at a time, connection `c`
/// from the loopback address `ip_of(c)`, and has `register` register its instances
/// through it. The connections, each once its registrations were acknowledged (their
/// instances last as long as they do).
async fn open_registering<F, R>(
    node: &Node,
    count: usize,
    ip_of: fn(usize) -> Ipv4Addr,
    register: F,
) -> Result<Vec<Connection>>
where
    F: Fn(usize, Ipv4Addr, Connection) -> R + Clone + Send + 'static,
    R: std::future::Future<Output = Result<Connection>> + Send,
{
    let gate = Arc::new(Semaphore::new(CONCURRENCY));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(count);
    for c in 0..count {
        let (gate, answered, addr) = (gate.clone(), answered.clone(), node.grpc);
        let register = register.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            let ip = ip_of(c);
            let connection = Connection::open(addr, ip, answered).await?;
            register(c, ip, connection).await
        }));
    }
    let mut open = Vec::with_capacity(count);
    for task in tasks {
        open.push(task.await.context("a registering task panicked")??);
    }
    Ok(open)
}

/// Opens [`BATCH_CONNECTIONS`] gRPC connections to `node`, from `127.200.x.y`, each
/// registering [`BATCH_SIZE`] instances of its address (ports from 20000) in one of 50
/// services in one request, with the Dubbo metadata. The count acknowledged, and the
/// connections.
async fn register_batches(node: &Node) -> Result<(usize, Vec<Connection>)> {
    let ip_of = |c: usize| Ipv4Addr::new(127, 200, (c / 256) as u8, c as u8);
    let open = open_registering(
        node,
        BATCH_CONNECTIONS,
        ip_of,
        |c, ip, mut connection| async move {
            let service = format!("cb-{}", c % 50);
            let instances: Vec<Instance> = (0..BATCH_SIZE)
                .map(|i| Instance {
                    service: service.clone(),
                    ip: ip.to_string(),
                    port: 20_000 + i as u16,
                    k: c * BATCH_SIZE + i,
                })
                .collect();
            connection
                .register_batch(&service, &instances, |i| {
                    Shape::Dubbo.metadata(&i.service, i.k)
                })
                .await?;
            Ok(connection)
        },
    )
    .await?;
    Ok((open.len() * BATCH_SIZE, open))
}

/// How long the idle CPU of the loaded nodes is read over.
const QUIET: Duration = Duration::from_secs(10);

/// Each node's CPU seconds so far.
fn cpu_of(cluster: &Cluster) -> Result<Vec<f64>> {
    cluster.nodes.iter().map(|n| cpu_secs(n.pid)).collect()
}

/// `instanceCount` of `GET /nacos/v1/ns/operator/metrics?onlyStatus=false`.
async fn held(api: &Api) -> Option<usize> {
    let answer = api
        .get("/nacos/v1/ns/operator/metrics?onlyStatus=false")
        .await
        .ok()?;
    if answer.status != 200 {
        return None;
    }
    answer.json().ok()?["instanceCount"]
        .as_u64()
        .map(|n| n as usize)
}

async fn ready(api: &Api) -> bool {
    matches!(api.get("/health/ready").await, Ok(a) if a.status == 200)
}

/// Opens `connections` gRPC connections to `node`, each from its own loopback address
/// `127.<1+c/65536>.<c/256%256>.<c%256>`, each registering that address in
/// `cu-0..SERVICES` with the Dubbo metadata. The open connections and the count
/// acknowledged.
async fn register_ephemeral(node: &Node, connections: usize) -> Result<(Vec<Connection>, usize)> {
    let ip_of = |c: usize| Ipv4Addr::new(127, 1 + (c / 65536) as u8, (c / 256) as u8, c as u8);
    let open = open_registering(
        node,
        connections,
        ip_of,
        |c, ip, mut connection| async move {
            for s in 0..SERVICES {
                let instance = Instance {
                    service: format!("cu-{s}"),
                    ip: ip.to_string(),
                    port: 8080,
                    k: c * SERVICES + s,
                };
                let metadata = Shape::Dubbo.metadata(&instance.service, instance.k);
                connection.register(&instance, metadata).await?;
            }
            Ok(connection)
        },
    )
    .await?;
    let acked = open.len() * SERVICES;
    Ok((open, acked))
}

/// Registers `count` persistent instances through `api` (`pe-0..99`, addresses
/// `127.200.<k/256%256>.<k%256>:<9000+k/65536>`): how many were acknowledged.
async fn register_persistent(api: &Api, count: usize) -> Result<usize> {
    let gate = Arc::new(Semaphore::new(PERSISTENT_CONCURRENCY));
    let mut tasks = Vec::with_capacity(count);
    for k in 0..count {
        let (gate, api) = (gate.clone(), api.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            let instance = Instance {
                service: format!("pe-{}", k % 100),
                ip: format!("127.200.{}.{}", (k / 256) % 256, k % 256),
                port: 9000 + (k / 65536) as u16,
                k,
            };
            // A write whose outcome is unknown (503: the leader did not answer in
            // time) is sent again, as clients do; registering is idempotent.
            let mut tries = 0;
            loop {
                match api.register(&instance, false, Shape::None).await {
                    Err(e) if tries < RETRIES && e.to_string().contains(" 503 ") => {
                        tries += 1;
                        RETRIED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    outcome => break outcome,
                }
            }
        }));
    }
    let mut acked = 0;
    for task in tasks {
        task.await.context("a registering task panicked")??;
        acked += 1;
    }
    Ok(acked)
}

/// Waits until every node holds `want` instances: the time it took, or the counts seen
/// last when `CONVERGE` passed.
async fn converge(cluster: &Cluster, want: usize) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let mut counts = Vec::new();
        for node in &cluster.nodes {
            counts.push(held(&node.api()).await);
        }
        if counts.iter().all(|c| *c == Some(want)) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > CONVERGE {
            bail!("after {CONVERGE:?} the nodes hold {counts:?} instances, not {want}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs the group.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let connections = bench.plan.catchup_connections;
    let persistent = bench.plan.catchup_persistent;
    let mut cluster = servers::start_cluster(System::Roster, &bench.setup, "catchup").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| rss_kib(n.pid))
        .collect::<Result<_>>()?;
    let first = cluster.nodes[0].api();

    let cpu_before = cpu_of(&cluster)?;
    let started = Instant::now();
    let (open, ephemeral) = register_ephemeral(&cluster.nodes[0], connections).await?;
    let ephemeral_secs = started.elapsed().as_secs_f64();
    let cpu_registering: Vec<f64> = cpu_of(&cluster)?
        .iter()
        .zip(&cpu_before)
        .map(|(after, before)| (after - before) * 1e6 / ephemeral.max(1) as f64)
        .collect();
    let started = Instant::now();
    let persisted = register_persistent(&first, persistent).await?;
    let persistent_secs = started.elapsed().as_secs_f64();
    let want = ephemeral + persisted;
    eprintln!(
        "  registered {} ephemeral in {ephemeral_secs:.1} s ({} connections), {} persistent in {persistent_secs:.1} s",
        thousands(ephemeral as u64),
        thousands(open.len() as u64),
        thousands(persisted as u64)
    );
    let spread = converge(&cluster, want).await?;
    let loaded: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| rss_kib(n.pid))
        .collect::<Result<_>>()?;
    let per_instance: Vec<f64> = loaded
        .iter()
        .zip(&idle)
        .map(|(l, i)| l.saturating_sub(*i) as f64 * 1024.0 / want as f64)
        .collect();
    let worst_mib = loaded.iter().copied().max().unwrap_or(0) as f64 / 1024.0;
    let rss_text = loaded
        .iter()
        .map(|k| format!("{:.0}", *k as f64 / 1024.0))
        .collect::<Vec<_>>()
        .join(" / ");
    eprintln!("  every node holds {want} after {spread:.1?}; RSS MiB {rss_text}");
    // What holding them costs while nothing changes: verification rounds, sweeps, the
    // connections' keep-alives.
    let quiet_from = cpu_of(&cluster)?;
    tokio::time::sleep(QUIET).await;
    let cpu_idle: Vec<f64> = cpu_of(&cluster)?
        .iter()
        .zip(&quiet_from)
        .map(|(after, before)| (after - before) * 1000.0 / QUIET.as_secs_f64())
        .collect();

    // Node 3 (never the one the clients talk to) crashes and comes back.
    let node = &mut cluster.nodes[2];
    let api = node.api();
    let started = Instant::now();
    node.kill_and_restart()?;
    let restarted = caught_up(&api, want, started).await;
    let restarted_rss = rss_kib(node.pid).ok();

    // A fourth node starts with `--join` and is added (what `roster cluster add` sends).
    let started = Instant::now();
    cluster.add_roster_node(&bench.setup, "catchup", 4).await?;
    let added = caught_up(&cluster.nodes[3].api(), want, started).await;
    let added_rss = rss_kib(cluster.nodes[3].pid).ok();

    // gRPC batch registration through node 1 (of the four now), beside the one-by-one
    // registrations above.
    let started = Instant::now();
    let (batched, batch_conns) = register_batches(&cluster.nodes[0]).await?;
    let batch_secs = started.elapsed().as_secs_f64();
    let batch_spread = converge(&cluster, want + batched).await?;
    drop(batch_conns);
    drop(open);

    let scale = format!(
        "{} ephemeral (Dubbo metadata, gRPC-owned: {} connections to node 1, {SERVICES} each) + {} persistent",
        thousands(ephemeral as u64),
        thousands(connections as u64),
        thousands(persisted as u64)
    );
    report.check(format!(
        "catchup: {scale}; registered in {ephemeral_secs:.1} s + {persistent_secs:.1} s \
         ({} persistent registrations answered 503, the leader not answering in time, \
         and were sent again); all three nodes held them {spread:.1?} later",
        RETRIED.load(std::sync::atomic::Ordering::Relaxed)
    ));
    for (how, from, times, rss) in [
        (
            "node killed with -9 and restarted",
            "the restart",
            &restarted,
            restarted_rss,
        ),
        (
            "node added with `roster cluster add`",
            "its start with `--join`",
            &added,
            added_rss,
        ),
    ] {
        catch_up_rows(report, how, from, times, rss, want, &scale);
    }
    report.rows.push(Row::pair(
        "catchup",
        format!(
            "gRPC batch registration through node 1 of 4, {BATCH_SIZE} instances per request"
        ),
        Unit::PerSec,
        Some(batched as f64 / batch_secs),
        None,
        None,
        format!(
            "{} Dubbo-shaped instances in {} `BatchInstanceRequest`s over as many new connections ({CONCURRENCY} at a time), acknowledged in {batch_secs:.1} s; every node held them {batch_spread:.1?} later (the cluster already holding {})",
            thousands(batched as u64),
            thousands(BATCH_CONNECTIONS as u64),
            thousands(want as u64)
        ),
    ));
    let listed = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    report.rows.push(Row::pair(
        "catchup",
        format!(
            "3 nodes at {} instances: CPU per ephemeral registration, node 1",
            thousands(want as u64)
        ),
        Unit::Us,
        cpu_registering.first().copied(),
        None,
        None,
        format!(
            "CPU seconds of each node over the registrations / instances registered, µs: {} (node 1 holds the connections; the others apply copies)",
            listed(&cpu_registering)
        ),
    ));
    report.rows.push(Row::pair(
        "catchup",
        format!(
            "3 nodes at {} instances: CPU per second while idle, busiest node",
            thousands(want as u64)
        ),
        Unit::Ms,
        cpu_idle.iter().copied().reduce(f64::max),
        None,
        None,
        format!(
            "CPU ms per second over {QUIET:?} with nothing changing (1,000 = one core), per node: {}",
            listed(&cpu_idle)
        ),
    ));
    report.rows.push(Row::pair(
        "catchup",
        format!(
            "3 nodes at {} instances: RSS, worst node",
            thousands(want as u64)
        ),
        Unit::MiB,
        Some(worst_mib),
        None,
        Some(Target::AtMost(TARGET_MIB)),
        format!(
            "per node {rss_text} MiB (idle {}); memory per instance per node {} B",
            idle.iter()
                .map(|k| format!("{:.0}", *k as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" / "),
            per_instance
                .iter()
                .map(|b| format!("{b:.0}"))
                .collect::<Vec<_>>()
                .join(" / ")
        ),
    ));
    Ok(())
}

/// When a starting node answered `/health/ready` 200 and held `want` instances, from
/// `started`, polled every 100 ms; and what it held last.
struct CatchUp {
    ready_at: Option<Duration>,
    held_at: Option<Duration>,
    last: Option<usize>,
}

async fn caught_up(api: &Api, want: usize, started: Instant) -> CatchUp {
    let mut c = CatchUp {
        ready_at: None,
        held_at: None,
        last: None,
    };
    while (c.ready_at.is_none() || c.held_at.is_none()) && started.elapsed() <= CONVERGE {
        if c.ready_at.is_none() && ready(api).await {
            c.ready_at = Some(started.elapsed());
        }
        if c.held_at.is_none() {
            c.last = held(api).await;
            if c.last == Some(want) {
                c.held_at = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c
}

/// The two rows of a catch-up: ready, and holding every instance.
fn catch_up_rows(
    report: &mut Report,
    how: &str,
    from: &str,
    c: &CatchUp,
    rss_kib: Option<u64>,
    want: usize,
    scale: &str,
) {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let at = thousands(want as u64);
    report.rows.push(Row::pair(
        "catchup",
        format!("{how} at {at} instances: ready"),
        Unit::Secs,
        secs(c.ready_at),
        None,
        Some(Target::AtMost(TARGET_SECS)),
        format!("{scale}; `/health/ready` 200, from {from}"),
    ));
    report.rows.push(Row::pair(
        "catchup",
        format!("{how} at {at} instances: holds every instance"),
        Unit::Secs,
        secs(c.held_at),
        None,
        Some(Target::AtMost(TARGET_SECS)),
        format!(
            "`instanceCount` of `/nacos/v1/ns/operator/metrics` = {want}, polled every 100 ms from {from}{}; RSS after: {} MiB",
            match (c.held_at, c.last) {
                (None, Some(n)) => format!(" (held {n} when the run gave up)"),
                _ => String::new(),
            },
            rss_kib.map_or("?".to_string(), |k| format!("{:.0}", k as f64 / 1024.0))
        ),
    ));
}
