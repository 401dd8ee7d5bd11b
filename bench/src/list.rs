//! Instance-list QPS and latency for services of 10 and 100 persistent instances, over
//! HTTP (`GET /nacos/v1/ns/instance/list`, wrk) and over gRPC (`ServiceQueryRequest`,
//! the driver's own Nacos 2.x client), roster with authentication on (every request
//! carries the admin's token, as a logged-in client's does) and r-nacos with its
//! open-API auth off; and the same-machine ceiling: a bare axum handler answering
//! roster's exact 10-instance bytes under the same wrk load.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{Answer, Api, Instance};
use crate::grpc::{self, Connection};
use crate::report::{median, percentile, Report, Row, Target, Unit};
use crate::servers::{self, free_port, Node, System};
use crate::shapes::Shape;
use crate::wrk::{latency_rows, Failures, Figures, Load, Runs, CONNECTIONS};
use crate::Bench;

/// Service sizes measured.
const SIZES: [usize; 2] = [10, 100];
/// The list path, as wrk requests it.
const LIST_PATH: &str = "/nacos/v1/ns/instance/list";
/// The target of both faces: roster with authentication on, r-nacos without.
const TARGET: f64 = 2.5;

/// A task aborted when dropped.
struct Task<T>(JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// TCP listeners that accept and drop connections: the addresses of the persistent
/// instances, so both systems' TCP health checks find them alive.
struct LiveAddresses {
    ports: Vec<u16>,
    _accepting: Vec<Task<()>>,
}

impl LiveAddresses {
    async fn bind(n: usize) -> Result<Self> {
        let mut ports = Vec::with_capacity(n);
        let mut accepting = Vec::with_capacity(n);
        for _ in 0..n {
            let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
            ports.push(listener.local_addr()?.port());
            accepting.push(Task(tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    drop(stream);
                }
            })));
        }
        Ok(Self {
            ports,
            _accepting: accepting,
        })
    }
}

fn list_path(service: &str) -> String {
    format!("{LIST_PATH}?serviceName={service}")
}

/// Waits (at most 5 s) until the default list query of `service` answers `n` hosts.
async fn expect_hosts(api: &Api, service: &str, n: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let hosts = api.hosts(service, false).await?.len();
        if hosts == n {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{service} lists {hosts} hosts, expected {n}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the list metrics and the ceiling. Both systems are loaded once, then each round
/// measures both (alternating which goes first) and the ceiling.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let live = LiveAddresses::bind(SIZES[1]).await?;
    let mut nodes = Vec::new();
    let mut body_sizes: HashMap<(System, usize), usize> = HashMap::new();
    let mut roster_body: Option<Answer> = None;
    for system in System::BOTH {
        let name = format!("list-{}", system.key());
        let (node, token) = match system {
            System::Roster => {
                let (node, token) = servers::start_roster_with_auth(&bench.setup, &name).await?;
                (node, Some(token))
            }
            System::RNacos => (servers::start(system, &bench.setup, &name).await?, None),
        };
        let api = client(&node, token.as_deref());
        for size in SIZES {
            let service = format!("list{size}");
            for port in &live.ports[..size] {
                let instance = Instance {
                    service: service.clone(),
                    ip: "127.0.0.1".to_string(),
                    port: *port,
                    k: 0,
                };
                api.register(&instance, false, Shape::None).await?;
            }
        }
        for size in SIZES {
            let service = format!("list{size}");
            expect_hosts(&api, &service, size).await?;
            let body = api.get(&list_path(&service)).await?;
            // Kept next to wrk's reports, to compare what each system answers.
            let _ = std::fs::write(
                bench
                    .wrk_dir
                    .join(format!("list{size}-{}.body.json", system.key())),
                &body.body,
            );
            body_sizes.insert((system, size), body.body.len());
            if system == System::Roster && size == SIZES[0] {
                roster_body = Some(body);
            }
        }
        let connections = open_connections(&node, token.as_deref()).await?;
        nodes.push(Loaded {
            system,
            node,
            token,
            connections,
        });
    }
    let body = roster_body.context("no roster list body for the ceiling")?;
    let ceiling_server = serve_ceiling(&body).await?;

    let mut figures: HashMap<(System, usize), Runs> = HashMap::new();
    let mut grpc_figures: HashMap<(System, usize), Runs> = HashMap::new();
    let mut cpu = CpuRounds::new();
    let mut ceiling = Runs::default();
    for round in bench.rounds() {
        for system in bench.order(round) {
            let loaded = nodes
                .iter_mut()
                .find(|l| l.system == system)
                .context("a node per system")?;
            let api = client(&loaded.node, loaded.token.as_deref());
            for size in SIZES {
                let service = format!("list{size}");
                let url = api.url(&list_path(&service));
                let load = || Load {
                    url: url.clone(),
                    script: None,
                    secs: bench.plan.secs,
                    headers: Vec::new(),
                };
                let name = format!("list{size}-{}-r{}", system.key(), round + 1);
                bench.warm_up(&name, load()).await?;
                let before = CpuUse::now(loaded.node.pid)?;
                let measured = bench.wrk(&name, load()).await?;
                let used = before.per_request(measured.ok())?;
                cpu.entry(("http", system, size)).or_default().push(used);
                // The figure counts only if the answers were complete throughout.
                expect_hosts(&api, &service, size).await?;
                figures.entry((system, size)).or_default().0.push(measured);
            }
            for size in SIZES {
                let service = format!("list{size}");
                let name = format!("grpc-list{size}-{}-r{}", system.key(), round + 1);
                let connections = std::mem::take(&mut loaded.connections);
                let (connections, _) =
                    query_load(connections, &service, size, bench.plan.warm_up_secs).await?;
                let before = CpuUse::now(loaded.node.pid)?;
                let (connections, measured) =
                    query_load(connections, &service, size, bench.plan.secs).await?;
                let used = before.per_request(measured.ok())?;
                cpu.entry(("grpc", system, size)).or_default().push(used);
                loaded.connections = connections;
                eprintln!(
                    "  {name}: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms{}",
                    measured.ok_per_sec(),
                    measured.p50_ms,
                    measured.p99_ms,
                    measured.failures()
                );
                grpc_figures
                    .entry((system, size))
                    .or_default()
                    .0
                    .push(measured);
            }
        }
        let load = || Load {
            url: ceiling_server.url.clone(),
            script: None,
            secs: bench.plan.secs,
            headers: Vec::new(),
        };
        let name = format!("list10-ceiling-r{}", round + 1);
        bench.warm_up(&name, load()).await?;
        ceiling.0.push(bench.wrk(&name, load()).await?);
    }
    for ((system, size), runs) in &figures {
        report.raw(format!("list{size}.{}", system.key()), runs);
    }
    for ((system, size), runs) in &grpc_figures {
        report.raw(format!("grpc-list{size}.{}", system.key()), runs);
    }
    report.raw("list10.ceiling", &ceiling);

    for size in SIZES {
        let roster = figures.get(&(System::Roster, size));
        let rnacos = figures.get(&(System::RNacos, size));
        let note = format!(
            "bodies {} / {} B; per round {} vs {}{}",
            body_sizes
                .get(&(System::Roster, size))
                .copied()
                .unwrap_or(0),
            body_sizes
                .get(&(System::RNacos, size))
                .copied()
                .unwrap_or(0),
            roster.map(Runs::rates).unwrap_or_default(),
            rnacos.map(Runs::rates).unwrap_or_default(),
            failures(roster, rnacos)
        );
        report.rows.push(Row::pair(
            "list",
            format!("instance list, {size} instances, QPS"),
            Unit::PerSec,
            roster.and_then(Runs::rate),
            rnacos.and_then(Runs::rate),
            Some(Target::RatioAtLeast(TARGET)),
            note,
        ));
        if size == SIZES[0] {
            report.rows.push(Row::ceiling(
                "list",
                format!("instance list, {size} instances, QPS vs bare axum"),
                roster.and_then(Runs::rate),
                ceiling.rate(),
                Target::RatioAtLeast(0.6),
                format!(
                    "ceiling {}/s (per round {}), p99 {:.2} ms: axum handler returning roster's {} B",
                    crate::report::thousands(ceiling.rate().unwrap_or(0.0).round() as u64),
                    ceiling.rates(),
                    ceiling.p99().unwrap_or(0.0),
                    body.body.len()
                ),
            ));
        }
        let metric = format!("instance list, {size} instances");
        report
            .rows
            .extend(latency_rows("list", &metric, roster, rnacos));
    }
    for size in SIZES {
        let roster = grpc_figures.get(&(System::Roster, size));
        let rnacos = grpc_figures.get(&(System::RNacos, size));
        report.rows.push(Row::pair(
            "list",
            format!("gRPC ServiceQuery, {size} instances, QPS"),
            Unit::PerSec,
            roster.and_then(Runs::rate),
            rnacos.and_then(Runs::rate),
            Some(Target::RatioAtLeast(TARGET)),
            format!(
                "{CONNECTIONS} connections, one query in flight on each; per round {} vs {}{}",
                roster.map(Runs::rates).unwrap_or_default(),
                rnacos.map(Runs::rates).unwrap_or_default(),
                failures(roster, rnacos)
            ),
        ));
        let metric = format!("gRPC ServiceQuery, {size} instances");
        report
            .rows
            .extend(latency_rows("list", &metric, roster, rnacos));
    }
    for (face, label) in [("http", "instance list"), ("grpc", "gRPC ServiceQuery")] {
        for size in SIZES {
            let server = |system| median(cpu.get(&(face, system, size))?.iter().map(|c| c.0));
            let driver = |system| median(cpu.get(&(face, system, size))?.iter().map(|c| c.1));
            let load = if face == "http" { "wrk" } else { "the driver" };
            report.rows.push(Row::pair(
                "list",
                format!("{label}, {size} instances, server CPU per request"),
                Unit::Us,
                server(System::Roster),
                server(System::RNacos),
                None,
                format!(
                    "user + system CPU of the server process over the measured run / answers; \
                     {load} used {:.1} / {:.1} µs per answer",
                    driver(System::Roster).unwrap_or(0.0),
                    driver(System::RNacos).unwrap_or(0.0)
                ),
            ));
        }
    }
    Ok(())
}

/// CPU per answered request, µs, in each round, (server, load generator), by face
/// (`http`, `grpc`), system and service size.
type CpuRounds = HashMap<(&'static str, System, usize), Vec<(f64, f64)>>;

/// CPU time used so far by a server and by the load generator (wrk, a child of this
/// process once it has been waited for, or this process itself for gRPC).
pub(crate) struct CpuUse {
    pid: u32,
    server: f64,
    driver: f64,
}

impl CpuUse {
    pub(crate) fn now(pid: u32) -> Result<Self> {
        Ok(Self {
            pid,
            server: crate::machine::cpu_secs(pid)?,
            driver: crate::machine::own_cpu_secs()?,
        })
    }

    /// (server, driver) µs per answer since `self`.
    pub(crate) fn per_request(&self, answers: u64) -> Result<(f64, f64)> {
        let answers = answers.max(1) as f64;
        let server = crate::machine::cpu_secs(self.pid)? - self.server;
        let driver = crate::machine::own_cpu_secs()? - self.driver;
        Ok((server * 1e6 / answers, driver * 1e6 / answers))
    }
}

/// A loaded node of one system: its token (roster) and its open gRPC connections.
struct Loaded {
    system: System,
    node: Node,
    token: Option<String>,
    connections: Vec<Connection>,
}

/// An HTTP client for `node`, sending `token` if there is one.
fn client(node: &Node, token: Option<&str>) -> Api {
    match token {
        Some(token) => node.api().with_token(token),
        None => node.api(),
    }
}

/// As many gRPC connections to `node` as wrk opens, each from its own loopback address
/// (`127.0.3.<1+i>`), with `token` on every request.
async fn open_connections(node: &Node, token: Option<&str>) -> Result<Vec<Connection>> {
    let answered = Arc::new(AtomicUsize::new(0));
    let mut connections = Vec::new();
    for i in 0..CONNECTIONS {
        let local = Ipv4Addr::new(127, 0, 3, 1 + i as u8);
        let options = grpc::Options {
            token: token.map(str::to_string),
            pushes: None,
        };
        connections.push(Connection::open_with(node.grpc, local, answered.clone(), options).await?);
    }
    Ok(connections)
}

/// `ServiceQueryRequest`s for `service` on every connection, one in flight on each,
/// for `secs` seconds: the connections back, and the figures as wrk would give them
/// (a refused or failed query counts as non-2xx). Every answer is checked for result
/// 200, and each connection's last answer to list `size` hosts.
async fn query_load(
    connections: Vec<Connection>,
    service: &str,
    size: usize,
    secs: u64,
) -> Result<(Vec<Connection>, Figures)> {
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for mut connection in connections {
        let query = connection.query_of(service);
        tasks.push(tokio::spawn(async move {
            let mut latencies: Vec<u32> = Vec::new();
            let mut failed = 0u64;
            let mut first_error = None;
            let mut last = None;
            while Instant::now() < until {
                let sent = Instant::now();
                match connection.query(&query).await {
                    Ok(body) => {
                        latencies.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        last = Some(body);
                    }
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (connection, latencies, failed, first_error, last)
        }));
    }
    let mut connections = Vec::new();
    let mut latencies = Vec::new();
    let mut failed = 0;
    let mut error = None;
    for task in tasks {
        let (connection, mut l, f, e, last) = task.await.context("a query task panicked")?;
        if let Some(e) = e {
            error.get_or_insert(e);
        }
        connections.push(connection);
        latencies.append(&mut l);
        failed += f;
        if let Some(body) = last {
            let hosts = grpc::hosts_in(&body)?;
            if hosts != size {
                bail!("gRPC query of {service} listed {hosts} hosts, expected {size}");
            }
        }
    }
    if let Some(e) = error {
        if latencies.is_empty() {
            return Err(e.context(format!("every gRPC query of {service} failed")));
        }
        eprintln!("  {failed} gRPC queries of {service} failed, the first: {e:#}");
    }
    let secs = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let ms: Vec<f64> = latencies.iter().map(|us| f64::from(*us) / 1000.0).collect();
    let figures = Figures {
        requests: latencies.len() as u64 + failed,
        secs,
        non_2xx: failed,
        socket_errors: 0,
        p50_ms: percentile(&ms, 50.0).unwrap_or(0.0),
        p99_ms: percentile(&ms, 99.0).unwrap_or(0.0),
    };
    Ok((connections, figures))
}

/// `; roster: 3 non-2xx` and the like, empty when both systems' runs were clean.
pub fn failures<T: Failures>(roster: Option<&T>, rnacos: Option<&T>) -> String {
    let mut out = String::new();
    for (name, runs) in [("roster", roster), ("r-nacos", rnacos)] {
        if let Some(runs) = runs {
            let text = runs.failures();
            if !text.is_empty() {
                out.push_str(&format!("; {name}: {text}"));
            }
        }
    }
    out
}

/// A ceiling server, running until dropped.
struct Ceiling {
    /// Its list URL.
    url: String,
    _server: Task<()>,
}

/// The ceiling: an axum handler that answers `body` as roster did, under the same load.
async fn serve_ceiling(body: &Answer) -> Result<Ceiling> {
    let bytes = Bytes::from(body.body.clone());
    let content_type = body.content_type.clone();
    let app = axum::Router::new().route(
        LIST_PATH,
        axum::routing::get(move || {
            let (bytes, content_type) = (bytes.clone(), content_type.clone());
            async move { ([(CONTENT_TYPE, content_type)], bytes) }
        }),
    );
    let listener = TcpListener::bind(("127.0.0.1", free_port()?)).await?;
    let addr = listener.local_addr()?;
    let server = Task(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }));
    Ok(Ceiling {
        url: format!("http://{addr}{}", list_path("list10")),
        _server: server,
    })
}
