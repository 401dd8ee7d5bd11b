//! The configuration API (Nacos v1 `/nacos/v1/cs/configs`): reads per second of a 1 KiB
//! properties item, and the latency from a change's acknowledgement to the long poll
//! that listens to it answering, with 1,000 long-poll connections listening to 10
//! items each (10,000 distinct items) — the load of 1,000 Nacos 1.x client
//! applications.
//!
//! Each poller is one client application: a connection of its own, first a `GET` of its
//! items (as a client reads them at start), then `POST /configs/listener` with their
//! md5s and `Long-Pulling-Timeout: 30000`, again right after every answer; after an
//! answer that names items it `GET`s them and listens with the new md5s, as the Nacos
//! clients do. Measuring starts once every poll is in flight and every connection is
//! established (counted in `/proc/net/tcp`). Each round then publishes a new content
//! for one item (distinct items, the same pseudo-random sequence for both systems) and
//! times, from the publish's `true`, the answer of the poll listening to it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use md5::{Digest, Md5};
use serde_json::json;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

use crate::api::{config_path, decode, Api};
use crate::list::failures;
use crate::machine::established_to;
use crate::report::{percentile, thousands, Report, Row, Target, Unit};
use crate::servers::{self, Node, System};
use crate::wrk::{latency_rows, Load, Runs};
use crate::Bench;

/// The group of every item.
const GROUP: &str = "DEFAULT_GROUP";
/// The item read by wrk.
const READ_ID: &str = "bench-read.properties";
/// Its size in bytes.
const READ_SIZE: usize = 1024;
/// Long-poll connections.
const POLLERS: usize = 1_000;
/// Items each poll listens to (distinct across pollers).
const PER_POLLER: usize = 10;
/// Items published beforehand and listened to.
const LISTENED: usize = POLLERS * PER_POLLER;
/// Publications in flight while loading.
const LOAD_CONCURRENCY: usize = 32;
/// Pollers reading their items at start at once.
const START_CONCURRENCY: usize = 32;
/// The long poll's timeout header (ms), as the Nacos 1.x clients send it.
const POLL_TIMEOUT_MS: &str = "30000";
/// A poller's per-request timeout (beyond the server's hold of at most 30 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(40);
/// A poller's pause after a failed request.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long every poll may take to be established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
/// Quiet time once they are, before the first round.
const SETTLE: Duration = Duration::from_secs(1);
/// A round whose notification has not come this long after the acknowledgement is a miss.
const ROUND_TIMEOUT: Duration = Duration::from_secs(5);
/// Consecutive misses that end the rounds early (the system is not notifying).
const MAX_CONSECUTIVE_MISSES: usize = 5;
/// Pause between rounds.
const BETWEEN_ROUNDS: Duration = Duration::from_millis(100);
/// Seed of the sequence of changed items (the same for both systems).
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The data id of listened item `k`.
fn listened_id(k: usize) -> String {
    format!("bench-listen-{k}.properties")
}

/// Item `k`'s content at `version`: a few properties lines.
fn listened_content(k: usize, version: usize) -> String {
    format!(
        "# bench item {k}\nservice.name=bench-{k}\nservice.timeout.ms=3000\nfeature.flag=on\nversion={version}\n"
    )
}

/// The read item: properties lines padded to exactly [`READ_SIZE`] bytes.
fn read_content() -> String {
    let mut text = String::from("# bench: 1 KiB properties item\n");
    let mut i = 0;
    while text.len() < READ_SIZE - 40 {
        text.push_str(&format!("app.setting.key{i:03}=value-{i:03}-abcdefgh\n"));
        i += 1;
    }
    while text.len() < READ_SIZE - 1 {
        text.push('x');
    }
    text.push('\n');
    text
}

/// Lower-case hex md5, as Nacos names a content.
fn md5_hex(content: &[u8]) -> String {
    format!("{:x}", Md5::digest(content))
}

/// `Listening-Configs`: `dataId^2group^2md5^1` per item.
fn listening_configs(held: &[(usize, String)]) -> String {
    held.iter()
        .map(|(k, md5)| format!("{}\u{2}{GROUP}\u{2}{md5}\u{1}", listened_id(*k)))
        .collect()
}

/// The items a long poll's answer names: (dataId, group), from the URL-encoded
/// `dataId^2group[^2tenant]^1...`.
fn changed_items(body: &str) -> Vec<(String, String)> {
    decode(body.trim())
        .split('\u{1}')
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| {
            let mut fields = line.split('\u{2}');
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .collect()
}

/// A xorshift64* generator: the same sequence on every run, no dependency.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// `n` distinct numbers below `below` (a partial Fisher-Yates shuffle).
    fn distinct(&mut self, n: usize, below: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..below).collect();
        let n = n.min(below);
        for i in 0..n {
            let j = i + (self.next() % (below - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(n);
        all
    }
}

/// Makes sure this process (and the servers it starts, which inherit it) may open
/// `need` descriptors: raises the soft limit to the hard one if it is lower. Returns
/// the limit in force.
fn ensure_descriptors(need: u64) -> Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= need {
        return Ok(current);
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised).context("raising the descriptor limit")?;
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if now < need {
        bail!("the descriptor limit is {now} (hard limit), {need} are needed: raise `ulimit -n`");
    }
    Ok(now)
}

/// The long polls roster says it holds (its `roster_config_long_polls` gauge); `None`
/// when the server does not publish it (r-nacos, or an older roster).
async fn held_polls(api: &Api) -> Option<usize> {
    let answer = api.get("/metrics").await.ok()?;
    if answer.status != 200 {
        return None;
    }
    gauge(&answer.text(), "roster_config_long_polls")
}

/// The value of an unlabelled gauge `name` in a Prometheus text exposition.
fn gauge(text: &str, name: &str) -> Option<usize> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse::<f64>().ok().map(|v| v as usize)
    })
}

/// What the pollers share: counters, and the first error.
#[derive(Default)]
struct Shared {
    /// Polls in flight (sent with the md5s of what the poller holds, not answered).
    listening: AtomicUsize,
    /// Pollers that read their items at start.
    started: AtomicUsize,
    /// Poll answers that named items.
    answers_changed: AtomicUsize,
    /// Poll answers that named nothing (the hold ran out).
    answers_empty: AtomicUsize,
    /// Items named that the poller does not listen to.
    unexpected: AtomicUsize,
    /// `GET`s of items (at start and after a change).
    reads: AtomicUsize,
    /// Failed requests.
    errors: AtomicUsize,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    fn error(&self, e: impl std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| e.to_string());
    }
}

/// One poll answer naming an item.
struct Notice {
    /// The item.
    item: usize,
    /// When the answer arrived.
    at: Instant,
}

/// Poller tasks, aborted (their connections closed) when dropped.
struct Pollers(Vec<JoinHandle<()>>);

impl Drop for Pollers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Reads item `k` until it answers (a client retries too), counting failures.
async fn read_item(api: &Api, shared: &Shared, k: usize) -> String {
    loop {
        shared.reads.fetch_add(1, Ordering::Relaxed);
        match api.config(&listened_id(k), GROUP).await {
            Ok(content) => return md5_hex(&content),
            Err(e) => {
                shared.error(format!("{e:#}"));
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// One client application listening to items `first..first + PER_POLLER`.
async fn poller(
    addr: SocketAddr,
    first: usize,
    shared: Arc<Shared>,
    start: Arc<Semaphore>,
    notices: mpsc::UnboundedSender<Notice>,
) {
    let api = Api::dedicated(addr, CLIENT_TIMEOUT);
    let mut held: Vec<(usize, String)> = Vec::with_capacity(PER_POLLER);
    {
        let Ok(_permit) = start.acquire().await else {
            return;
        };
        for k in first..first + PER_POLLER {
            let md5 = read_item(&api, &shared, k).await;
            held.push((k, md5));
        }
        shared.started.fetch_add(1, Ordering::Relaxed);
    }
    let headers = [("Long-Pulling-Timeout", POLL_TIMEOUT_MS)];
    loop {
        let listening = listening_configs(&held);
        shared.listening.fetch_add(1, Ordering::Relaxed);
        let result = api
            .post_form(
                "/nacos/v1/cs/configs/listener",
                &[("Listening-Configs", &listening)],
                &headers,
            )
            .await;
        let at = Instant::now();
        shared.listening.fetch_sub(1, Ordering::Relaxed);
        let answer = match result {
            Ok(answer) if answer.status == 200 => answer,
            Ok(answer) => {
                shared.error(format!(
                    "the listener answered {} {}",
                    answer.status,
                    answer.text()
                ));
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            Err(e) => {
                shared.error(format!("{e:#}"));
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let changed = changed_items(&answer.text());
        if changed.is_empty() {
            shared.answers_empty.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        shared.answers_changed.fetch_add(1, Ordering::Relaxed);
        for (data_id, group) in changed {
            let Some(slot) = held
                .iter_mut()
                .find(|(k, _)| group == GROUP && listened_id(*k) == data_id)
            else {
                shared.unexpected.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let _ = notices.send(Notice { item: slot.0, at });
            // As a client does: read the new content, then listen with its md5.
            slot.1 = read_item(&api, &shared, slot.0).await;
        }
    }
}

/// One system's notification figures.
#[derive(Debug, Default)]
struct Notified {
    /// Changes published (rounds run).
    published: usize,
    /// Publications refused or failed.
    publish_failed: usize,
    /// Acknowledgement → notification, ms, sorted.
    from_ack_ms: Vec<f64>,
    /// Publish sent → notification, ms, sorted.
    from_send_ms: Vec<f64>,
    /// Publish round trips, ms, sorted.
    publish_ms: Vec<f64>,
    /// Notifications that arrived before the publish's acknowledgement (counted as 0 ms).
    before_ack: usize,
    /// Rounds without a notification within [`ROUND_TIMEOUT`].
    missed: usize,
    /// Notices for other items than the changed one, or repeated ones.
    strays: usize,
    /// The rounds ended early after consecutive misses.
    stopped_early: bool,
    /// Connections established to the server when measuring started.
    connections: usize,
    /// Polls in flight when measuring started.
    polls: usize,
    /// Polls the server said it held then (roster's gauge), if it says.
    held: Option<usize>,
    /// Poller counters at the end.
    answers_changed: usize,
    answers_empty: usize,
    unexpected: usize,
    reads: usize,
    errors: usize,
    first_error: Option<String>,
    /// Seconds the pollers took to be established.
    establish_secs: f64,
}

impl Notified {
    fn seen(&self) -> usize {
        self.from_ack_ms.len()
    }

    fn p50(&self) -> Option<f64> {
        percentile(&self.from_ack_ms, 50.0)
    }

    fn p99(&self) -> Option<f64> {
        percentile(&self.from_ack_ms, 99.0)
    }

    fn p99_from_send(&self) -> Option<f64> {
        percentile(&self.from_send_ms, 99.0)
    }

    fn summary(&self) -> String {
        format!(
            "{} of {} seen ({} missed{}), max {:.1} ms, publish round trip p50 {:.1} ms, \
             from the publish sent p50 {:.1} ms{}",
            self.seen(),
            self.published,
            self.missed,
            if self.stopped_early {
                ", stopped early"
            } else {
                ""
            },
            self.from_ack_ms.last().copied().unwrap_or(0.0),
            percentile(&self.publish_ms, 50.0).unwrap_or(0.0),
            percentile(&self.from_send_ms, 50.0).unwrap_or(0.0),
            if self.before_ack > 0 {
                format!(", {} before the ack (0 ms)", self.before_ack)
            } else {
                String::new()
            }
        )
    }
}

/// Publishes `count` listened items (`LOAD_CONCURRENCY` at a time); (published, secs).
async fn load_listened(api: &Api, count: usize) -> Result<(usize, f64)> {
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..LOAD_CONCURRENCY {
        let (api, next) = (api.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut published = 0;
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= count {
                    return Ok::<usize, anyhow::Error>(published);
                }
                api.publish_config(&listened_id(k), GROUP, &listened_content(k, 0))
                    .await?;
                published += 1;
            }
        }));
    }
    let mut published = 0;
    for task in tasks {
        published += task.await??;
    }
    Ok((published, started.elapsed().as_secs_f64()))
}

/// The content of `data_id`, retried for up to 3 s while the server answers an error.
async fn settled(api: &Api, data_id: &str) -> Result<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match api.config(data_id, GROUP).await {
            Ok(bytes) => return Ok(bytes),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Publishes the read item and the listened ones on `node`, and checks them.
async fn load(node: &Node, report: &mut Report) -> Result<()> {
    let api = node.api();
    let content = read_content();
    api.publish_config(READ_ID, GROUP, &content).await?;
    let (published, secs) = load_listened(&api, LISTENED).await?;
    // Spot checks: the read item as wrk will read it, and the first and last listened.
    // r-nacos answered a 404 for an item it had just acknowledged once (its reads
    // follow its writes a moment later): a setup check, so give both systems a few
    // seconds.
    let read = settled(&api, READ_ID).await?;
    if read != content.as_bytes() {
        bail!(
            "{}: the read item answered {} bytes, not the {} published",
            node.system,
            read.len(),
            content.len()
        );
    }
    for k in [0, LISTENED - 1] {
        let held = settled(&api, &listened_id(k)).await?;
        if held != listened_content(k, 0).as_bytes() {
            bail!("{}: item {k} answered other content", node.system);
        }
    }
    report.check(format!(
        "{}: {} configuration items published in {secs:.1} s ({:.0}/s, {LOAD_CONCURRENCY} in flight), read back",
        node.system,
        thousands(published as u64 + 1),
        published as f64 / secs
    ));
    Ok(())
}

/// Starts the pollers on `node`, waits until every poll is established, then runs the
/// rounds.
async fn notifications(node: &Node, items: &[usize]) -> Result<Notified> {
    let shared = Arc::new(Shared::default());
    let start = Arc::new(Semaphore::new(START_CONCURRENCY));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let began = Instant::now();
    let _pollers = Pollers(
        (0..POLLERS)
            .map(|p| {
                tokio::spawn(poller(
                    node.http,
                    p * PER_POLLER,
                    shared.clone(),
                    start.clone(),
                    tx.clone(),
                ))
            })
            .collect(),
    );
    drop(tx);
    let port = node.http.port();
    let api = node.api();
    // roster also says how many polls it holds; r-nacos has no such figure.
    let asks = node.system == System::Roster && held_polls(&api).await.is_some();
    let deadline = began + ESTABLISH_TIMEOUT;
    loop {
        let (polls, connections) = (
            shared.listening.load(Ordering::Relaxed),
            established_to(port),
        );
        let held = if asks { held_polls(&api).await } else { None };
        if polls >= POLLERS && connections >= POLLERS && held.is_none_or(|h| h >= POLLERS) {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "{}: {polls} of {POLLERS} long polls in flight, {connections} connections \
                 established{} after {ESTABLISH_TIMEOUT:?} ({} pollers started, {} errors{})",
                node.system,
                held.map(|h| format!(", {h} held by the server"))
                    .unwrap_or_default(),
                shared.started.load(Ordering::Relaxed),
                shared.errors.load(Ordering::Relaxed),
                shared
                    .first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_deref()
                    .map(|e| format!(", first: {e}"))
                    .unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let establish_secs = began.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let mut out = Notified {
        polls: shared.listening.load(Ordering::Relaxed),
        held: if asks { held_polls(&api).await } else { None },
        connections: established_to(port),
        establish_secs,
        ..Notified::default()
    };
    // Nothing changed yet: an answer naming an item now would be a false alarm.
    while rx.try_recv().is_ok() {
        out.strays += 1;
    }
    eprintln!(
        "  {}: {} long polls in flight on {} connections after {establish_secs:.1} s",
        node.system, out.polls, out.connections
    );

    let mut consecutive_misses = 0;
    for (round, &item) in items.iter().enumerate() {
        while rx.try_recv().is_ok() {
            out.strays += 1;
        }
        let content = listened_content(item, round + 1);
        let sent = Instant::now();
        out.published += 1;
        if let Err(e) = api
            .publish_config(&listened_id(item), GROUP, &content)
            .await
        {
            out.publish_failed += 1;
            shared.error(format!("{e:#}"));
            continue;
        }
        let acked = Instant::now();
        out.publish_ms
            .push(acked.duration_since(sent).as_secs_f64() * 1000.0);
        let until = acked + ROUND_TIMEOUT;
        let mut seen = None;
        while seen.is_none() {
            match tokio::time::timeout_at(until.into(), rx.recv()).await {
                Ok(Some(notice)) if notice.item == item && notice.at >= sent => {
                    seen = Some(notice.at)
                }
                Ok(Some(_)) => out.strays += 1,
                Ok(None) | Err(_) => break,
            }
        }
        match seen {
            Some(at) => {
                consecutive_misses = 0;
                if at < acked {
                    out.before_ack += 1;
                }
                out.from_ack_ms
                    .push(at.saturating_duration_since(acked).as_secs_f64() * 1000.0);
                out.from_send_ms
                    .push(at.duration_since(sent).as_secs_f64() * 1000.0);
            }
            None => {
                out.missed += 1;
                consecutive_misses += 1;
                if consecutive_misses >= MAX_CONSECUTIVE_MISSES {
                    out.stopped_early = true;
                    break;
                }
            }
        }
        tokio::time::sleep(BETWEEN_ROUNDS).await;
    }
    // Late duplicates of the last round's notice.
    tokio::time::sleep(BETWEEN_ROUNDS).await;
    while rx.try_recv().is_ok() {
        out.strays += 1;
    }
    for v in [
        &mut out.from_ack_ms,
        &mut out.from_send_ms,
        &mut out.publish_ms,
    ] {
        v.sort_by(f64::total_cmp);
    }
    out.answers_changed = shared.answers_changed.load(Ordering::Relaxed);
    out.answers_empty = shared.answers_empty.load(Ordering::Relaxed);
    out.unexpected = shared.unexpected.load(Ordering::Relaxed);
    out.reads = shared.reads.load(Ordering::Relaxed);
    out.errors = shared.errors.load(Ordering::Relaxed);
    out.first_error = shared
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(out)
}

/// Runs the config metrics: both systems loaded once; reads alternate in rounds as the
/// list group's do; then the notification rounds on each system, roster first.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    // The pollers' connections, the servers' ends of them (the servers inherit the
    // limit) and a margin.
    let limit = ensure_descriptors(POLLERS as u64 + 1_024)?;
    report.check(format!(
        "descriptor limit {limit} (the driver's, inherited by the servers; {POLLERS} long polls need as many)"
    ));
    let mut nodes = Vec::new();
    for system in System::BOTH {
        let node =
            servers::start(system, &bench.setup, &format!("config-{}", system.key())).await?;
        load(&node, report).await?;
        nodes.push(node);
    }
    let node_of = |system: System| {
        nodes
            .iter()
            .find(|n| n.system == system)
            .context("a node per system")
    };

    let mut reads: Vec<(System, Runs)> = Vec::new();
    for round in bench.rounds() {
        for system in bench.order(round) {
            let node = node_of(system)?;
            let load = || Load {
                url: format!("http://{}{}", node.http, config_path(READ_ID, GROUP)),
                script: None,
                secs: bench.plan.secs,
                headers: Vec::new(),
            };
            let name = format!("config-read-{}-r{}", system.key(), round + 1);
            bench.warm_up(&name, load()).await?;
            let measured = bench.wrk(&name, load()).await?;
            match reads.iter_mut().find(|(s, _)| *s == system) {
                Some((_, runs)) => runs.0.push(measured),
                None => reads.push((system, Runs(vec![measured]))),
            }
        }
    }
    let of = |system| reads.iter().find(|(s, _)| *s == system).map(|(_, r)| r);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    for (system, runs) in &reads {
        report.raw(format!("config.read.{}", system.key()), runs);
    }
    let metric = "config read, 1 KiB item";
    report.rows.push(Row::pair(
        "config",
        format!("{metric}, QPS"),
        Unit::PerSec,
        roster.and_then(Runs::rate),
        rnacos.and_then(Runs::rate),
        Some(Target::RatioAtLeast(2.0)),
        format!(
            "GET /nacos/v1/cs/configs, {READ_SIZE} B body; per round {} vs {}{}",
            roster.map(Runs::rates).unwrap_or_default(),
            rnacos.map(Runs::rates).unwrap_or_default(),
            failures(roster, rnacos)
        ),
    ));
    report
        .rows
        .extend(latency_rows("config", metric, roster, rnacos));

    // The same changed items, in the same order, for both systems.
    let items = Sequence(SEED).distinct(bench.plan.config_rounds, LISTENED);
    let mut notified: Vec<(System, Notified)> = Vec::new();
    for system in System::BOTH {
        let node = node_of(system)?;
        let figures = match notifications(node, &items).await {
            Ok(figures) => figures,
            Err(e) => {
                // One system failing does not lose the other's figures.
                report.check(format!("{system}: notifications FAILED: {e:#}"));
                continue;
            }
        };
        report.check(format!(
            "{system}: {} long polls in flight on {} established connections ({} listened items; \
             {}) after {:.1} s; changes: {}; poll answers: {} naming items, {} empty (hold ran \
             out); {} GETs by the pollers; {} stray notices, {} unknown items named; {} failed \
             requests{}",
            figures.polls,
            figures.connections,
            thousands(LISTENED as u64),
            match figures.held {
                Some(held) => format!("the server's gauge: {held} held"),
                None => "no server-side count".to_string(),
            },
            figures.establish_secs,
            figures.summary(),
            figures.answers_changed,
            figures.answers_empty,
            thousands(figures.reads as u64),
            figures.strays,
            figures.unexpected,
            figures.errors + figures.publish_failed,
            figures
                .first_error
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        ));
        report.raw(
            format!("config.notify.{}", system.key()),
            json!({
                "pollers": POLLERS, "listenedPerPoller": PER_POLLER,
                "polls": figures.polls, "connections": figures.connections, "heldByServer": figures.held,
                "published": figures.published, "publishFailed": figures.publish_failed,
                "seen": figures.seen(), "missed": figures.missed, "beforeAck": figures.before_ack,
                "stoppedEarly": figures.stopped_early, "strays": figures.strays,
                "fromAckMs": figures.from_ack_ms, "fromSendMs": figures.from_send_ms,
                "publishMs": figures.publish_ms, "answersChanged": figures.answers_changed,
                "answersEmpty": figures.answers_empty, "errors": figures.errors,
            }),
        );
        notified.push((system, figures));
    }
    let of = |system| notified.iter().find(|(s, _)| *s == system).map(|(_, n)| n);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    let metric = format!(
        "config change → long-poll notification, {} polls × {PER_POLLER} items",
        thousands(POLLERS as u64)
    );
    let summary = |n: Option<&Notified>| n.map(Notified::summary).unwrap_or("failed".to_string());
    report.rows.push(Row::pair(
        "config",
        format!("{metric}, p50"),
        Unit::Ms,
        roster.and_then(Notified::p50),
        rnacos.and_then(Notified::p50),
        None,
        format!(
            "from the publish's `true` to the poll's answer naming the item; roster: {}",
            summary(roster)
        ),
    ));
    report.rows.push(Row::pair(
        "config",
        format!("{metric}, p99"),
        Unit::Ms,
        roster.and_then(Notified::p99),
        rnacos.and_then(Notified::p99),
        Some(Target::Below(100.0)),
        format!("r-nacos: {}", summary(rnacos)),
    ));
    report.rows.push(Row::pair(
        "config",
        format!("{metric}, from the publish sent, p99"),
        Unit::Ms,
        roster.and_then(Notified::p99_from_send),
        rnacos.and_then(Notified::p99_from_send),
        Some(Target::Below(100.0)),
        "the publish's round trip (its durable write) included; a notice that comes before \
         the publish's `true` counts 0 ms in the rows above",
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_item_is_one_kib_of_properties() {
        let content = read_content();
        assert_eq!(content.len(), READ_SIZE);
        assert!(content.lines().skip(1).take(3).all(|l| l.contains('=')));
    }

    #[test]
    fn md5s_are_lower_case_hex() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn listening_configs_and_answers_are_read_as_nacos_writes_them() {
        let held = vec![(3, "abc".to_string()), (4, "def".to_string())];
        assert_eq!(
            listening_configs(&held),
            "bench-listen-3.properties\u{2}DEFAULT_GROUP\u{2}abc\u{1}\
             bench-listen-4.properties\u{2}DEFAULT_GROUP\u{2}def\u{1}"
        );
        let answer = "bench-listen-3.properties%02DEFAULT_GROUP%01bench-listen-4.properties%02DEFAULT_GROUP%02dev%01\n";
        assert_eq!(
            changed_items(answer),
            vec![
                ("bench-listen-3.properties".to_string(), GROUP.to_string()),
                ("bench-listen-4.properties".to_string(), GROUP.to_string()),
            ]
        );
        assert!(changed_items("").is_empty());
    }

    #[test]
    fn changed_items_are_distinct_and_repeatable() {
        let a = Sequence(SEED).distinct(100, LISTENED);
        let b = Sequence(SEED).distinct(100, LISTENED);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 100);
        assert!(a.iter().all(|&k| k < LISTENED));
    }

    #[test]
    fn gauges_are_read_from_the_exposition() {
        let text = "# HELP roster_config_long_polls HTTP long polls\n\
                    # TYPE roster_config_long_polls gauge\n\
                    roster_config_long_polls_total 3\n\
                    roster_config_long_polls 1000\n";
        assert_eq!(gauge(text, "roster_config_long_polls"), Some(1000));
        assert_eq!(gauge(text, "roster_configs"), None);
    }
}
