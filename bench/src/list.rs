//! Instance-list QPS and latency for services of 10 and 100 persistent instances, and
//! the same-machine ceiling: a bare axum handler answering roster's exact 10-instance
//! bytes under the same load.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{Answer, Api, Instance};
use crate::report::{Report, Row, Target, Unit};
use crate::servers::{self, free_port, System};
use crate::shapes::Shape;
use crate::wrk::{Failures, Load, Runs};
use crate::Bench;

/// Service sizes measured.
const SIZES: [usize; 2] = [10, 100];
/// The list path, as wrk requests it.
const LIST_PATH: &str = "/nacos/v1/ns/instance/list";

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
        let node = servers::start(system, &bench.setup, &format!("list-{}", system.key())).await?;
        let api = node.api();
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
        nodes.push((system, node));
    }
    let body = roster_body.context("no roster list body for the ceiling")?;
    let ceiling_server = serve_ceiling(&body).await?;

    let mut figures: HashMap<(System, usize), Runs> = HashMap::new();
    let mut ceiling = Runs::default();
    for round in bench.rounds() {
        for system in bench.order(round) {
            let node = nodes
                .iter()
                .find(|(s, _)| *s == system)
                .map(|(_, n)| n)
                .context("a node per system")?;
            let api = node.api();
            for size in SIZES {
                let service = format!("list{size}");
                let url = format!("http://{}{}", node.http, list_path(&service));
                let load = || Load {
                    url: url.clone(),
                    script: None,
                    secs: bench.plan.secs,
                };
                let name = format!("list{size}-{}-r{}", system.key(), round + 1);
                bench.warm_up(&name, load()).await?;
                let measured = bench.wrk(&name, load()).await?;
                // The figure counts only if the answers were complete throughout.
                expect_hosts(&api, &service, size).await?;
                figures.entry((system, size)).or_default().0.push(measured);
            }
        }
        let load = || Load {
            url: ceiling_server.url.clone(),
            script: None,
            secs: bench.plan.secs,
        };
        let name = format!("list10-ceiling-r{}", round + 1);
        bench.warm_up(&name, load()).await?;
        ceiling.0.push(bench.wrk(&name, load()).await?);
    }
    for ((system, size), runs) in &figures {
        report.raw(format!("list{size}.{}", system.key()), runs);
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
            Some(Target::RatioAtLeast(2.0)),
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
        for (label, pick) in [
            ("p50", Runs::p50 as fn(&Runs) -> Option<f64>),
            ("p99", Runs::p99),
        ] {
            report.rows.push(Row::pair(
                "list",
                format!("instance list, {size} instances, {label}"),
                Unit::Ms,
                roster.and_then(pick),
                rnacos.and_then(pick),
                None,
                "",
            ));
        }
    }
    Ok(())
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
