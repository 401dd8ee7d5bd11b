//! roster's other registries' faces against its own Nacos v1 list, on one node with
//! authentication on and the same data (r-nacos serves none of them): reads of one
//! service of 10 ephemeral instances through Consul's health and catalog, Eureka's
//! application (bearer token and HTTP Basic), Eureka's whole registry (100 services of
//! 10) and Prometheus HTTP SD; and heartbeats over 1,000 instances each as Consul TTL
//! passes, Eureka renewals and Nacos v1 beats. Every row is compared with the Nacos v1
//! figure of the same kind (`Row::reference`), without a target.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::api::{encode, Api, Instance, Layout};
use crate::list::{failures, CpuUse};
use crate::report::{median, thousands, Report, Row, Unit};
use crate::servers::{self, Node, ADMIN_PASSWORD};
use crate::shapes::Shape;
use crate::wrk::{Figures, Load, Runs, THREADS};
use crate::Bench;

const GROUP: &str = "faces";
/// The read data: 100 services of 10 ephemeral instances, the `spring-cloud` shape.
const READ_LAYOUT: Layout = Layout {
    prefix: "faces",
    per_service: 10,
};
const READ_SERVICES: usize = 100;
/// The service every single-service read asks for, and its Eureka application.
const SERVICE: &str = "faces-0";
const APP: &str = "FACES-0";
/// Instances each heartbeat run cycles over, 100 per service.
const BEATS: usize = 1_000;
const NACOS_BEATS: Layout = Layout {
    prefix: "nbeat",
    per_service: 100,
};
const CONSUL_BEATS: Layout = Layout {
    prefix: "cbeat",
    per_service: 100,
};
const EUREKA_BEATS: Layout = Layout {
    prefix: "ebeat",
    per_service: 100,
};
/// How often the driver beats the Nacos-registered instances it does not measure, as a
/// Nacos client does (they turn unhealthy after 15 s without one).
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Beats in flight at once while keeping instances alive: enough that a cycle fits in
/// the 15 s even when a heavy read (`/eureka/apps`) holds every answer for over a second,
/// as 1,000 clients beating on their own timers would.
const KEEP_ALIVE_CONCURRENCY: usize = 250;
/// How long a read's answer may take to list every instance healthy again after a run
/// (the keep-alive beats catching up) before the group fails.
const RECOVERY: Duration = Duration::from_secs(30);
/// The `lastDirtyTimestamp` the Eureka instances register and renew with.
const LAST_DIRTY: &str = "1764633600000";
/// Registrations in flight at once (Consul, Eureka).
const REGISTER_CONCURRENCY: usize = 16;
/// The name of the reference in every ratio.
const READ_REFERENCE: &str = "v1 list";
const BEAT_REFERENCE: &str = "v1 beats";

/// One read measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Read {
    V1List,
    ConsulHealth,
    ConsulCatalog,
    EurekaApp,
    EurekaAppBasic,
    EurekaApps,
    Prometheus,
}

impl Read {
    const ALL: [Read; 7] = [
        Read::V1List,
        Read::ConsulHealth,
        Read::ConsulCatalog,
        Read::EurekaApp,
        Read::EurekaAppBasic,
        Read::EurekaApps,
        Read::Prometheus,
    ];

    fn key(self) -> &'static str {
        match self {
            Read::V1List => "v1-list",
            Read::ConsulHealth => "consul-health",
            Read::ConsulCatalog => "consul-catalog",
            Read::EurekaApp => "eureka-app",
            Read::EurekaAppBasic => "eureka-app-basic",
            Read::EurekaApps => "eureka-apps",
            Read::Prometheus => "prometheus-sd",
        }
    }

    /// The row's name.
    fn label(self) -> &'static str {
        match self {
            Read::V1List => "Nacos v1 instance list, 10 instances",
            Read::ConsulHealth => "Consul /v1/health/service, 10 instances",
            Read::ConsulCatalog => "Consul /v1/catalog/service, 10 instances",
            Read::EurekaApp => "Eureka /eureka/apps/APP (JSON, bearer), 10 instances",
            Read::EurekaAppBasic => "Eureka /eureka/apps/APP (JSON, HTTP Basic), 10 instances",
            Read::EurekaApps => "Eureka /eureka/apps (JSON), 100 apps × 10 instances",
            Read::Prometheus => "Prometheus HTTP SD, one service, 10 instances",
        }
    }

    fn path(self) -> String {
        match self {
            Read::V1List => format!("/nacos/v1/ns/instance/list?serviceName={SERVICE}"),
            Read::ConsulHealth => format!("/v1/health/service/{SERVICE}"),
            Read::ConsulCatalog => format!("/v1/catalog/service/{SERVICE}"),
            Read::EurekaApp | Read::EurekaAppBasic => format!("/eureka/apps/{APP}"),
            Read::EurekaApps => "/eureka/apps".to_string(),
            Read::Prometheus => format!("/nacos/prometheus/namespaceId/public/service/{SERVICE}"),
        }
    }

    /// The credentials as this face's clients send them (the v1 list: `accessToken` in
    /// the query, added by the token-carrying client), and what else they ask for.
    fn headers(self, auth: &Auth) -> Vec<(String, String)> {
        let bearer = (
            "Authorization".to_string(),
            format!("Bearer {}", auth.token),
        );
        let json = ("Accept".to_string(), "application/json".to_string());
        match self {
            Read::V1List => Vec::new(),
            Read::ConsulHealth | Read::ConsulCatalog => {
                vec![("X-Consul-Token".to_string(), auth.token.clone())]
            }
            Read::EurekaApp | Read::EurekaApps => vec![bearer, json],
            Read::EurekaAppBasic => vec![("Authorization".to_string(), auth.basic.clone()), json],
            Read::Prometheus => vec![bearer],
        }
    }

    /// Healthy instances the answer should list.
    fn expected(self) -> usize {
        match self {
            Read::EurekaApps => READ_SERVICES * READ_LAYOUT.per_service,
            _ => READ_LAYOUT.per_service,
        }
    }
}

/// The admin's credentials: a token, and HTTP Basic as a Eureka client's `defaultZone`
/// carries them.
struct Auth {
    token: String,
    basic: String,
}

impl Auth {
    fn new(token: String) -> Self {
        Self {
            token,
            basic: format!("Basic {}", base64(&format!("nacos:{ADMIN_PASSWORD}"))),
        }
    }
}

/// Standard base64 with padding.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Healthy (or passing, `UP`) instances a face's answer lists.
fn healthy_in(read: Read, body: &Value) -> Result<usize> {
    let array = |v: &Value, what: &str| -> Result<Vec<Value>> {
        v.as_array()
            .cloned()
            .with_context(|| format!("{}: no {what} array in {body}", read.key()))
    };
    let up = |instances: &[Value]| instances.iter().filter(|i| i["status"] == "UP").count();
    Ok(match read {
        Read::V1List => array(&body["hosts"], "hosts")?
            .iter()
            .filter(|h| h["healthy"] == true)
            .count(),
        Read::ConsulHealth => array(body, "entry")?
            .iter()
            .filter(|entry| {
                entry["Checks"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c["Status"] == "passing"))
            })
            .count(),
        // The catalog carries no health.
        Read::ConsulCatalog => array(body, "service")?.len(),
        Read::EurekaApp | Read::EurekaAppBasic => up(&array(
            &body["application"]["instance"],
            "application.instance",
        )?),
        Read::EurekaApps => array(&body["applications"]["application"], "application")?
            .iter()
            .map(|app| app["instance"].as_array().map_or(0, |i| up(i)))
            .sum(),
        Read::Prometheus => array(body, "target group")?
            .iter()
            .filter(|g| g["labels"]["__meta_roster_healthy"] == "true")
            .map(|g| g["targets"].as_array().map_or(0, Vec::len))
            .sum(),
    })
}

/// A task aborted when dropped.
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the keep-alive beats met.
#[derive(Default)]
struct KeepStats {
    failed: AtomicU64,
    /// The slowest answer, µs.
    slowest_us: AtomicU64,
}

/// Beats `instances` (Nacos v1, `spring-cloud` metadata for the read layout) every
/// [`KEEP_ALIVE`] until dropped, or for at most an hour; failed beats are counted.
fn keep_alive(api: Api, instances: Vec<(Instance, Shape)>, stats: Arc<KeepStats>) -> Task {
    let instances = Arc::new(instances);
    Task(tokio::spawn(async move {
        let until = Instant::now() + Duration::from_secs(3600);
        while Instant::now() < until {
            let started = Instant::now();
            let mut tasks = Vec::new();
            for slice in 0..KEEP_ALIVE_CONCURRENCY {
                let (api, instances, stats) = (api.clone(), instances.clone(), stats.clone());
                tasks.push(tokio::spawn(async move {
                    for (instance, shape) in
                        instances.iter().skip(slice).step_by(KEEP_ALIVE_CONCURRENCY)
                    {
                        let sent = Instant::now();
                        if beat(&api, instance, *shape).await.is_err() {
                            stats.failed.fetch_add(1, Ordering::Relaxed);
                        }
                        let us = sent.elapsed().as_micros().min(u64::MAX as u128) as u64;
                        stats.slowest_us.fetch_max(us, Ordering::Relaxed);
                    }
                }));
            }
            for task in tasks {
                let _ = task.await;
            }
            tokio::time::sleep_until((started + KEEP_ALIVE).into()).await;
        }
    }))
}

/// One Nacos 1.x beat of `instance`, with its metadata; Ok only for code 10200.
async fn beat(api: &Api, instance: &Instance, shape: Shape) -> Result<()> {
    let metadata = shape
        .metadata(&instance.service, instance.k)
        .map_or(json!({}), Value::Object);
    let beat = json!({
        "ip": instance.ip,
        "port": instance.port,
        "serviceName": format!("DEFAULT_GROUP@@{}", instance.service),
        "cluster": "DEFAULT",
        "weight": 1.0,
        "metadata": metadata,
    });
    let answer = api
        .put(&format!(
            "/nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40{}&beat={}",
            instance.service,
            encode(&beat.to_string())
        ))
        .await?;
    let code = answer.json().ok().and_then(|v| v["code"].as_u64());
    if answer.status != 200 || code != Some(10200) {
        bail!("a beat answered {} {}", answer.status, answer.text());
    }
    Ok(())
}

/// Runs `call(k)` for every `k` in `0..count`, [`REGISTER_CONCURRENCY`] at a time;
/// fails with the first error.
async fn each<F, Fut>(count: usize, call: F) -> Result<()>
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..REGISTER_CONCURRENCY {
        let (next, call) = (next.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= count {
                    return Ok::<(), anyhow::Error>(());
                }
                call(k).await?;
            }
        }));
    }
    for task in tasks {
        task.await.context("a registration task panicked")??;
    }
    Ok(())
}

/// `GET` of `read` as wrk sends it (`api`: the client for the node without a token,
/// `with_token`: with one, for the v1 list): its status must be 200 and its JSON list
/// every expected instance healthy. The body's size.
async fn check_read(plain: &Api, with_token: &Api, auth: &Auth, read: Read) -> Result<usize> {
    let api = match read {
        Read::V1List => with_token,
        _ => plain,
    };
    let headers = read.headers(auth);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let answer = api.get_with(&read.path(), &headers).await?;
    if answer.status != 200 {
        bail!(
            "{} answered {} {}",
            read.key(),
            answer.status,
            answer.text()
        );
    }
    let body = answer
        .json()
        .with_context(|| format!("{} did not answer JSON", read.key()))?;
    let healthy = healthy_in(read, &body)?;
    if healthy != read.expected() {
        bail!(
            "{} lists {healthy} healthy instances, expected {}",
            read.key(),
            read.expected()
        );
    }
    Ok(answer.body.len())
}

/// The runs and CPU of one measured load, by key.
#[derive(Default)]
struct Measured {
    runs: Runs,
    /// (server, wrk) µs per answer, per round.
    cpu: Vec<(f64, f64)>,
}

impl Measured {
    fn server_cpu(&self) -> Option<f64> {
        median(self.cpu.iter().map(|c| c.0))
    }

    fn driver_cpu(&self) -> Option<f64> {
        median(self.cpu.iter().map(|c| c.1))
    }
}

/// Warm-up, then a measured run of `load` with the server's CPU over it.
async fn measure(
    bench: &Bench,
    node: &Node,
    name: &str,
    load: impl Fn() -> Load,
) -> Result<(Figures, (f64, f64))> {
    bench.warm_up(name, load()).await?;
    let before = CpuUse::now(node.pid)?;
    let measured = bench.wrk(name, load()).await?;
    let cpu = before.per_request(measured.ok())?;
    Ok((measured, cpu))
}

/// Runs the group: reads, then heartbeats, on one node.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let (node, token) = servers::start_roster_with_auth(&bench.setup, GROUP).await?;
    let auth = Auth::new(token);
    let plain = node.api();
    let api = plain.clone().with_token(&auth.token);
    let keep = Arc::new(KeepStats::default());

    let count = READ_SERVICES * READ_LAYOUT.per_service;
    let bulk = api
        .register_bulk(READ_LAYOUT, 0..count, true, Shape::SpringCloud)
        .await?;
    if bulk.failed > 0 {
        bail!("{} of {count} registrations failed", bulk.failed);
    }
    let read_instances = (0..count)
        .map(|k| (READ_LAYOUT.instance(k), Shape::SpringCloud))
        .collect();
    let _keep_reads = keep_alive(api.clone(), read_instances, keep.clone());
    let mut sizes = HashMap::new();
    for read in Read::ALL {
        sizes.insert(read, check_read(&plain, &api, &auth, read).await?);
    }

    let mut reads: HashMap<Read, Measured> = HashMap::new();
    let mut incomplete: HashMap<Read, Vec<String>> = HashMap::new();
    for round in bench.rounds() {
        let mut order = Read::ALL.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for read in order {
            let url = match read {
                Read::V1List => api.url(&read.path()),
                _ => plain.url(&read.path()),
            };
            let headers: Vec<String> = read
                .headers(&auth)
                .into_iter()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect();
            let load = || Load {
                url: url.clone(),
                script: None,
                secs: bench.plan.secs,
                headers: headers.clone(),
            };
            let name = format!("faces-{}-r{}", read.key(), round + 1);
            let (figures, cpu) = measure(bench, &node, &name, load).await?;
            // Every instance must still be listed healthy; one that is not after a heavy
            // run (its beats starved) must be again within RECOVERY, and shows.
            if let Err(e) = check_read(&plain, &api, &auth, read).await {
                let after = Instant::now();
                let recovered = loop {
                    if after.elapsed() > RECOVERY {
                        break None;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if check_read(&plain, &api, &auth, read).await.is_ok() {
                        break Some(after.elapsed().as_secs_f64());
                    }
                };
                let text = match recovered {
                    Some(secs) => format!("{e:#}, all healthy again {secs:.0} s later"),
                    None => format!(
                        "{e:#}, not all healthy again within {} s",
                        RECOVERY.as_secs()
                    ),
                };
                report.check(format!("faces: FAIL: right after {name}: {text}"));
                incomplete
                    .entry(read)
                    .or_default()
                    .push(format!("right after round {}: {text}", round + 1));
                if recovered.is_none() {
                    bail!("{name}: {text}");
                }
            }
            let entry = reads.entry(read).or_default();
            entry.runs.0.push(figures);
            entry.cpu.push(cpu);
        }
    }
    report.check(format!(
        "faces: every read answered 200 with {} healthy instances ({} for /eureka/apps) before \
         each run, and after it {}; the driver's keep-alive beats' slowest answer {:.0} ms",
        READ_LAYOUT.per_service,
        thousands(count as u64),
        if incomplete.is_empty() {
            "too"
        } else {
            "too except as listed above"
        },
        keep.slowest_us.load(Ordering::Relaxed) as f64 / 1000.0
    ));
    let reference = reads.get(&Read::V1List);
    for read in Read::ALL {
        let Some(m) = reads.get(&read) else { continue };
        report.raw(format!("faces.{}", read.key()), &m.runs);
        let note = format!(
            "body {} B; per round {}{}{}",
            thousands(sizes.get(&read).copied().unwrap_or(0) as u64),
            m.runs.rates(),
            failures(Some(&m.runs), None),
            incomplete
                .get(&read)
                .map(|i| format!("; NOT all healthy {}", i.join("; ")))
                .unwrap_or_default()
        );
        push_rows(
            report,
            read.label(),
            "request",
            READ_REFERENCE,
            m,
            reference,
            note,
        );
    }

    // Heartbeats: 1,000 instances of each face.
    api.register_bulk(NACOS_BEATS, 0..BEATS, true, Shape::None)
        .await
        .and_then(|b| match b.failed {
            0 => Ok(()),
            n => bail!("{n} Nacos registrations failed"),
        })?;
    let nacos_instances = (0..BEATS)
        .map(|k| (NACOS_BEATS.instance(k), Shape::None))
        .collect();
    let consul_token = auth.token.clone();
    let consul = plain.clone();
    each(BEATS, move |k| {
        let (api, token) = (consul.clone(), consul_token.clone());
        async move {
            let instance = CONSUL_BEATS.instance(k);
            let body = json!({
                "Name": instance.service,
                "ID": format!("{}-{k}", CONSUL_BEATS.prefix),
                "Address": instance.ip,
                "Port": instance.port,
                "Check": {"TTL": "60s", "Status": "passing"},
            });
            let answer = api
                .send_with(
                    Method::PUT,
                    "/v1/agent/service/register",
                    &[("X-Consul-Token", &token)],
                    Some(body.to_string()),
                )
                .await?;
            if answer.status != 200 {
                bail!(
                    "Consul register answered {} {}",
                    answer.status,
                    answer.text()
                );
            }
            Ok(())
        }
    })
    .await?;
    let eureka_basic = auth.basic.clone();
    let eureka = plain.clone();
    each(BEATS, move |k| {
        let (api, basic) = (eureka.clone(), eureka_basic.clone());
        async move {
            let instance = EUREKA_BEATS.instance(k);
            let app = instance.service.to_uppercase();
            let body = json!({"instance": {
                "instanceId": format!("{}-{k}", EUREKA_BEATS.prefix),
                "app": app,
                "hostName": instance.ip,
                "ipAddr": instance.ip,
                "vipAddress": instance.service,
                "status": "UP",
                "port": {"$": instance.port, "@enabled": "true"},
                "securePort": {"$": 443, "@enabled": "false"},
                "dataCenterInfo": {
                    "@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
                    "name": "MyOwn"
                },
                "leaseInfo": {"renewalIntervalInSecs": 30, "durationInSecs": 90},
                "lastDirtyTimestamp": LAST_DIRTY,
            }});
            let answer = api
                .send_with(
                    Method::POST,
                    &format!("/eureka/apps/{app}"),
                    &[("Authorization", &basic)],
                    Some(body.to_string()),
                )
                .await?;
            if answer.status != 204 {
                bail!(
                    "Eureka register answered {} {}",
                    answer.status,
                    answer.text()
                );
            }
            Ok(())
        }
    })
    .await?;
    // The Nacos ones turn unhealthy 15 s after their last beat, while the other faces'
    // runs go on: beaten every 5 s as their clients would.
    let _keep_beats = keep_alive(api.clone(), nacos_instances, keep.clone());

    let beat_faces = [Beat::Nacos, Beat::Consul, Beat::Eureka];
    for face in beat_faces {
        face.by_hand(&plain, &api, &auth).await?;
    }
    let mut beats: HashMap<Beat, Measured> = HashMap::new();
    for round in bench.rounds() {
        let mut order = beat_faces.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for face in order {
            let (script, args) = face.script(bench);
            let headers = vec![face.header(&auth)];
            let load = || Load {
                url: format!("http://{}/", node.http),
                script: Some((script.clone(), args.clone())),
                secs: bench.plan.secs,
                headers: headers.clone(),
            };
            let name = format!("faces-{}-r{}", face.key(), round + 1);
            let (figures, cpu) = measure(bench, &node, &name, load).await?;
            let entry = beats.entry(face).or_default();
            entry.runs.0.push(figures);
            entry.cpu.push(cpu);
        }
    }
    let mut held = Vec::new();
    for face in beat_faces {
        let healthy = face.healthy(&plain, &api, &auth).await?;
        held.push(format!("{} {}", face.name(), thousands(healthy as u64)));
        if healthy != BEATS {
            report.check(format!(
                "faces: FAIL: {} holds {healthy} healthy instances after the beats, expected {BEATS}",
                face.name()
            ));
        }
    }
    report.check(format!(
        "faces: healthy after the heartbeat runs: {}; the driver's keep-alive beats (every {} s) \
         failed {} times, the slowest answered in {:.0} ms",
        held.join(", "),
        KEEP_ALIVE.as_secs(),
        keep.failed.load(Ordering::Relaxed),
        keep.slowest_us.load(Ordering::Relaxed) as f64 / 1000.0
    ));
    let reference = beats.get(&Beat::Nacos);
    for face in beat_faces {
        let Some(m) = beats.get(&face) else { continue };
        report.raw(format!("faces.{}", face.key()), &m.runs);
        let note = format!(
            "{}; per round {}; healthy after: {}{}",
            face.how(),
            m.runs.rates(),
            held.join(", "),
            failures(Some(&m.runs), None)
        );
        push_rows(
            report,
            face.label(),
            "beat",
            BEAT_REFERENCE,
            m,
            reference,
            note,
        );
    }
    Ok(())
}

/// A heartbeat face.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Beat {
    Nacos,
    Consul,
    Eureka,
}

impl Beat {
    fn key(self) -> &'static str {
        match self {
            Beat::Nacos => "v1-beats",
            Beat::Consul => "consul-ttl-passes",
            Beat::Eureka => "eureka-renewals",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Beat::Nacos => "Nacos v1",
            Beat::Consul => "Consul",
            Beat::Eureka => "Eureka",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Beat::Nacos => "Nacos v1 beats over 1,000 instances",
            Beat::Consul => "Consul TTL passes over 1,000 instances",
            Beat::Eureka => "Eureka renewals over 1,000 instances",
        }
    }

    fn how(self) -> &'static str {
        match self {
            Beat::Nacos => "PUT /nacos/v1/ns/instance/beat (beat.lua), accessToken header",
            Beat::Consul => {
                "PUT /v1/agent/check/pass/service:<id> (cycle.lua), X-Consul-Token; \
                 registered with a 60 s TTL check"
            }
            Beat::Eureka => {
                "PUT /eureka/apps/<APP>/<id>?status=UP&lastDirtyTimestamp= (cycle.lua), \
                 HTTP Basic as Eureka clients send it"
            }
        }
    }

    /// Where its instances are.
    fn layout(self) -> Layout {
        match self {
            Beat::Nacos => NACOS_BEATS,
            Beat::Consul => CONSUL_BEATS,
            Beat::Eureka => EUREKA_BEATS,
        }
    }

    /// The credentials header wrk sends.
    fn header(self, auth: &Auth) -> String {
        match self {
            Beat::Nacos => format!("accessToken: {}", auth.token),
            Beat::Consul => format!("X-Consul-Token: {}", auth.token),
            Beat::Eureka => format!("Authorization: {}", auth.basic),
        }
    }

    /// The path of instance `k`'s heartbeat, as `cycle.lua`'s template (`{k}`, `{s}`).
    fn template(self) -> String {
        match self {
            Beat::Nacos => String::new(),
            Beat::Consul => format!("/v1/agent/check/pass/service:{}-{{k}}", CONSUL_BEATS.prefix),
            Beat::Eureka => format!(
                "/eureka/apps/{}-{{s}}/{}-{{k}}?status=UP&lastDirtyTimestamp={LAST_DIRTY}",
                EUREKA_BEATS.prefix.to_uppercase(),
                EUREKA_BEATS.prefix
            ),
        }
    }

    fn script(self, bench: &Bench) -> (std::path::PathBuf, Vec<String>) {
        match self {
            Beat::Nacos => (
                bench.script("beat.lua"),
                vec![
                    NACOS_BEATS.prefix.to_string(),
                    BEATS.to_string(),
                    NACOS_BEATS.per_service.to_string(),
                    THREADS.to_string(),
                ],
            ),
            Beat::Consul | Beat::Eureka => (
                bench.script("cycle.lua"),
                vec![
                    "PUT".to_string(),
                    self.template(),
                    BEATS.to_string(),
                    self.layout().per_service.to_string(),
                    THREADS.to_string(),
                ],
            ),
        }
    }

    /// One heartbeat by hand, to see that the script's request is understood.
    async fn by_hand(self, plain: &Api, api: &Api, auth: &Auth) -> Result<()> {
        if self == Beat::Nacos {
            return beat(api, &NACOS_BEATS.instance(0), Shape::None).await;
        }
        let path = self.template().replace("{k}", "0").replace("{s}", "0");
        let header = self.header(auth);
        let (name, value) = header.split_once(": ").context("a header")?;
        let answer = plain
            .send_with(Method::PUT, &path, &[(name, value)], None)
            .await?;
        if answer.status != 200 {
            bail!(
                "{} {path} answered {} {}",
                self.name(),
                answer.status,
                answer.text()
            );
        }
        Ok(())
    }

    /// Healthy (passing, `UP`) instances of this face's 1,000.
    async fn healthy(self, plain: &Api, api: &Api, auth: &Auth) -> Result<usize> {
        let mut healthy = 0;
        for s in 0..BEATS / self.layout().per_service {
            healthy += match self {
                Beat::Nacos => api
                    .hosts(&format!("{}-{s}", NACOS_BEATS.prefix), true)
                    .await?
                    .iter()
                    .filter(|h| h["healthy"] == true)
                    .count(),
                Beat::Consul => {
                    let path = format!("/v1/health/service/{}-{s}", CONSUL_BEATS.prefix);
                    let answer = plain
                        .get_with(&path, &[("X-Consul-Token", &auth.token)])
                        .await?;
                    healthy_in(Read::ConsulHealth, &answer.json()?)?
                }
                Beat::Eureka => {
                    let path = format!("/eureka/apps/{}-{s}", EUREKA_BEATS.prefix.to_uppercase());
                    let answer = plain
                        .get_with(
                            &path,
                            &[
                                ("Authorization", &auth.basic),
                                ("Accept", "application/json"),
                            ],
                        )
                        .await?;
                    healthy_in(Read::EurekaApp, &answer.json()?)?
                }
            };
        }
        Ok(healthy)
    }
}

/// The rate, p50, p99 and server-CPU rows of one load, each compared with the
/// reference's figure of the same kind.
fn push_rows(
    report: &mut Report,
    label: &str,
    per: &str,
    name: &'static str,
    m: &Measured,
    reference: Option<&Measured>,
    note: String,
) {
    let refs = |pick: fn(&Runs) -> Option<f64>| reference.and_then(|r| pick(&r.runs));
    report.rows.push(Row::reference(
        GROUP,
        format!("{label}, rate"),
        Unit::PerSec,
        m.runs.rate(),
        name,
        refs(Runs::rate),
        note,
    ));
    report.rows.push(Row::reference(
        GROUP,
        format!("{label}, p50"),
        Unit::Ms,
        m.runs.p50(),
        name,
        refs(Runs::p50),
        "",
    ));
    report.rows.push(Row::reference(
        GROUP,
        format!("{label}, p99"),
        Unit::Ms,
        m.runs.p99(),
        name,
        refs(Runs::p99),
        "",
    ));
    report.rows.push(Row::reference(
        GROUP,
        format!("{label}, server CPU per {per}"),
        Unit::Us,
        m.server_cpu(),
        name,
        reference.and_then(Measured::server_cpu),
        format!(
            "user + system CPU of roster over the measured run / answers; wrk and the driver \
             (its keep-alive beats) used {:.1} µs per answer",
            m.driver_cpu().unwrap_or(0.0)
        ),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_base64() {
        assert_eq!(base64("nacos:pa:ss"), "bmFjb3M6cGE6c3M=");
        assert_eq!(base64("ab"), "YWI=");
        assert_eq!(base64("abc"), "YWJj");
        assert_eq!(base64("a"), "YQ==");
    }

    #[test]
    fn answers_are_counted_per_face() {
        let v1 = json!({"hosts": [{"healthy": true}, {"healthy": false}]});
        assert_eq!(healthy_in(Read::V1List, &v1).unwrap(), 1);
        let consul = json!([
            {"Checks": [{"Status": "passing"}, {"Status": "passing"}]},
            {"Checks": [{"Status": "critical"}]}
        ]);
        assert_eq!(healthy_in(Read::ConsulHealth, &consul).unwrap(), 1);
        assert_eq!(healthy_in(Read::ConsulCatalog, &consul).unwrap(), 2);
        let app = json!({"application": {"instance": [{"status": "UP"}, {"status": "DOWN"}]}});
        assert_eq!(healthy_in(Read::EurekaApp, &app).unwrap(), 1);
        let apps = json!({"applications": {"application": [
            {"instance": [{"status": "UP"}]}, {"instance": [{"status": "UP"}]}
        ]}});
        assert_eq!(healthy_in(Read::EurekaApps, &apps).unwrap(), 2);
        let sd = json!([
            {"targets": ["127.0.0.1:8080"], "labels": {"__meta_roster_healthy": "true"}},
            {"targets": ["127.0.0.2:8080"], "labels": {"__meta_roster_healthy": "false"}}
        ]);
        assert_eq!(healthy_in(Read::Prometheus, &sd).unwrap(), 1);
        assert!(healthy_in(Read::V1List, &json!({})).is_err());
    }

    #[test]
    fn heartbeat_templates_name_the_registered_instances() {
        assert_eq!(
            Beat::Consul.template().replace("{k}", "7"),
            "/v1/agent/check/pass/service:cbeat-7"
        );
        assert_eq!(
            Beat::Eureka
                .template()
                .replace("{k}", "7")
                .replace("{s}", "0"),
            "/eureka/apps/EBEAT-0/ebeat-7?status=UP&lastDirtyTimestamp=1764633600000"
        );
    }
}
