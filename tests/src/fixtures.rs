//! Fake Consul and Eureka servers for sync tests: no real server can be installed here.
//!
//! Each fake replays the documented response shapes (reference `foreign-registries.md`
//! §2.2 and §3.4) on a free loopback port, served by its own thread and tokio runtime,
//! so it works from plain `#[test]`s that drive a roster binary and from `#[tokio::test]`s
//! that drive a `roster_sync::Source` alike. Tests control it through plain methods:
//! register, change and remove instances, set check status, fail every request with a
//! status, count requests. Dropping a fake stops it.
//!
//! - [`FakeConsul`]: `/v1/catalog/services` and `/v1/health/service/<name>` with real
//!   blocking-query semantics (`X-Consul-Index`; `index` + `wait` hang until the index
//!   passes `index` or the wait ends), the `dc` parameter, an optional ACL token and
//!   ACL-filtered answers (`X-Consul-Results-Filtered-By-ACLs: true`).
//! - [`FakeEureka`]: `/eureka/apps`, `/eureka/apps/delta` (a recently-changed queue; its
//!   `apps__hashcode` covers the whole registry) and `/eureka/apps/{APP}`, Jackson-shaped
//!   JSON (string `@enabled`, `@class` in empty metadata), optional basic auth.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::Engine;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

// ---------------------------------------------------------------------------------------
// Serving

/// A router served on a free loopback port by its own thread; stopped on drop.
pub struct Served {
    port: u16,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Serves `router`, counting every request and answering a forced failure if set.
    fn start(name: &str, router: Router) -> Self {
        let counters = Arc::new(Counters::default());
        let router = router.layer(axum::middleware::from_fn_with_state(
            counters.clone(),
            count_and_fail,
        ));
        let port = crate::free_port();
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("{name}: cannot bind 127.0.0.1:{port}: {e}"));
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake server runtime");
                runtime.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    // Not a graceful shutdown: blocked queries would hold it for minutes.
                    tokio::select! {
                        _ = axum::serve(listener, router) => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("fake server thread");
        Self {
            port,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Makes every request answer `status` (`None`: serve normally again).
    pub fn fail_with(&self, status: Option<u16>) {
        self.counters
            .fail
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.counters.total.load(Ordering::SeqCst)
    }

    /// Requests served so far for the exact `path`.
    pub fn requests_to(&self, path: &str) -> u64 {
        self.counters.by_path().get(path).copied().unwrap_or(0)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Request counts and the forced failure, shared by both fakes.
#[derive(Default)]
struct Counters {
    total: AtomicU64,
    by_path: Mutex<BTreeMap<String, u64>>,
    /// Status every request gets; 0: none.
    fail: AtomicU16,
}

impl Counters {
    fn by_path(&self) -> MutexGuard<'_, BTreeMap<String, u64>> {
        self.by_path.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts the request; answers the forced failure if one is set.
async fn count_and_fail(
    State(counters): State<Arc<Counters>>,
    req: Request,
    next: Next,
) -> Response {
    counters.total.fetch_add(1, Ordering::SeqCst);
    *counters
        .by_path()
        .entry(req.uri().path().to_string())
        .or_default() += 1;
    match counters.fail.load(Ordering::SeqCst) {
        0 => next.run(req).await,
        code => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "fake failure").into_response()
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn json_response(headers: HeaderMap, body: &Value) -> Response {
    let mut response = (headers, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

// ---------------------------------------------------------------------------------------
// Consul

/// How a [`FakeConsul`] starts.
#[derive(Clone, Debug)]
pub struct ConsulOptions {
    /// Its datacenter; a `dc` parameter naming another gets a 500.
    pub datacenter: String,
    /// ACL token every request must carry (`X-Consul-Token` or `Authorization: Bearer`);
    /// `None`: ACLs off.
    pub token: Option<String>,
}

impl Default for ConsulOptions {
    fn default() -> Self {
        Self {
            datacenter: "dc1".into(),
            token: None,
        }
    }
}

/// A service instance registered in a [`FakeConsul`], with its one service check.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsulService {
    /// Service name (`Service.Service`).
    pub name: String,
    /// Service id, unique per node (`Service.ID`).
    pub id: String,
    /// Node name.
    pub node: String,
    /// Node address.
    pub node_address: String,
    /// Service address; empty: the node's address applies.
    pub address: String,
    /// Port.
    pub port: u16,
    /// Tags.
    pub tags: Vec<String>,
    /// `Service.Meta`.
    pub meta: BTreeMap<String, String>,
    /// `Weights.Passing`, `Weights.Warning`.
    pub weights: (u32, u32),
    /// `Service.Kind` (`""`, `connect-proxy`, ...).
    pub kind: String,
    /// Status of the service check: `passing`, `warning` or `critical`.
    pub status: String,
    /// Service maintenance mode (adds the `_service_maintenance:<id>` check).
    pub maintenance: bool,
}

impl ConsulService {
    /// `name` on node `node-<address>` at `address:port`, id `<name>-<port>`, passing.
    /// Panics if `address` is off this machine ([`crate::addresses`]): roster imports it.
    #[track_caller]
    pub fn new(name: &str, address: &str, port: u16) -> Self {
        crate::addresses::check_ip(address);
        Self {
            name: name.into(),
            id: format!("{name}-{port}"),
            node: format!("node-{address}"),
            node_address: address.into(),
            address: address.into(),
            port,
            tags: Vec::new(),
            meta: BTreeMap::new(),
            weights: (1, 1),
            kind: String::new(),
            status: "passing".into(),
            maintenance: false,
        }
    }
}

/// A fake Consul agent. See the module docs.
pub struct FakeConsul {
    state: Arc<ConsulState>,
    served: Served,
}

struct ConsulState {
    data: Mutex<ConsulData>,
    /// The index after each change; blocked queries wait on it.
    changed: tokio::sync::watch::Sender<u64>,
    options: ConsulOptions,
}

struct ConsulData {
    /// Raft-like index, bumped by every change.
    index: u64,
    /// Index of the last change to the service catalog (any registration or removal).
    catalog_index: u64,
    /// Index of the last change to each service, kept after it is gone.
    service_index: BTreeMap<String, u64>,
    /// Registrations by (node, service id), with their create and modify indexes.
    entries: BTreeMap<(String, String), (ConsulService, u64, u64)>,
    /// Services the ACL token may not see.
    hidden: BTreeSet<String>,
}

impl std::ops::Deref for FakeConsul {
    type Target = Served;

    /// The server: port, address, request counts, forced failures.
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl FakeConsul {
    /// Starts a fake of datacenter `dc1` without ACLs.
    pub fn start() -> Self {
        Self::start_with(ConsulOptions::default())
    }

    /// Starts a fake with `options`.
    pub fn start_with(options: ConsulOptions) -> Self {
        let state = Arc::new(ConsulState {
            data: Mutex::new(ConsulData {
                // A real cluster has done some work before anyone registers.
                index: 10,
                catalog_index: 10,
                service_index: BTreeMap::new(),
                entries: BTreeMap::new(),
                hidden: BTreeSet::new(),
            }),
            changed: tokio::sync::watch::channel(10).0,
            options,
        });
        let router = Router::new()
            .route("/v1/catalog/services", get(consul_services))
            .route("/v1/health/service/{name}", get(consul_health))
            .with_state(state.clone());
        Self {
            served: Served::start("fake-consul", router),
            state,
        }
    }

    /// `consul://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("consul://{}", self.addr())
    }

    /// The current index.
    pub fn index(&self) -> u64 {
        lock(&self.state.data).index
    }

    /// Registers `service`, replacing a registration with the same node and id.
    pub fn register(&self, service: ConsulService) {
        self.change(&service.name.clone(), true, |d, index| {
            let key = (service.node.clone(), service.id.clone());
            let created = d.entries.get(&key).map_or(index, |e| e.1);
            d.entries.insert(key, (service, created, index));
        });
    }

    /// Removes the registration `id` on `node`; whether it existed.
    pub fn deregister(&self, node: &str, id: &str) -> bool {
        let key = (node.to_string(), id.to_string());
        let Some(name) = lock(&self.state.data)
            .entries
            .get(&key)
            .map(|e| e.0.name.clone())
        else {
            return false;
        };
        self.change(&name, true, |d, _| {
            d.entries.remove(&key);
        });
        true
    }

    /// Sets the status of the service check of `id` on `node` (`passing`, `warning`,
    /// `critical`); whether it exists.
    pub fn set_status(&self, node: &str, id: &str, status: &str) -> bool {
        self.modify(node, id, |s| s.status = status.to_string())
    }

    /// Puts `id` on `node` into or out of maintenance mode; whether it exists.
    pub fn set_maintenance(&self, node: &str, id: &str, on: bool) -> bool {
        self.modify(node, id, |s| s.maintenance = on)
    }

    /// Hides `services` from the token, as ACLs would: they vanish from answers, which
    /// then carry `X-Consul-Results-Filtered-By-ACLs: true`. Does not move the index.
    pub fn hide(&self, services: &[&str]) {
        lock(&self.state.data).hidden = services.iter().map(|s| s.to_string()).collect();
    }

    fn modify(&self, node: &str, id: &str, edit: impl FnOnce(&mut ConsulService)) -> bool {
        let key = (node.to_string(), id.to_string());
        let Some(name) = lock(&self.state.data)
            .entries
            .get(&key)
            .map(|e| e.0.name.clone())
        else {
            return false;
        };
        // Check changes move the service's index, not the catalog's.
        self.change(&name, false, |d, index| {
            if let Some(entry) = d.entries.get_mut(&key) {
                edit(&mut entry.0);
                entry.2 = index;
            }
        });
        true
    }

    /// Applies `edit` at a new index and wakes the blocked queries.
    fn change(&self, service: &str, catalog: bool, edit: impl FnOnce(&mut ConsulData, u64)) {
        let index = {
            let mut d = lock(&self.state.data);
            d.index += 1;
            let index = d.index;
            d.service_index.insert(service.to_string(), index);
            if catalog {
                d.catalog_index = index;
            }
            edit(&mut d, index);
            index
        };
        self.state.changed.send_replace(index);
    }
}

/// Checks the token and the datacenter; the answer to give instead, if they are wrong.
fn consul_admit(
    state: &ConsulState,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Option<Response> {
    if let Some(want) = &state.options.token {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let given = header("x-consul-token")
            .or_else(|| header("authorization").and_then(|a| a.strip_prefix("Bearer ")));
        if given != Some(want.as_str()) {
            return Some((StatusCode::FORBIDDEN, "ACL not found").into_response());
        }
    }
    if let Some(dc) = params.get("dc") {
        if *dc != state.options.datacenter {
            return Some(
                (StatusCode::INTERNAL_SERVER_ERROR, "No path to datacenter").into_response(),
            );
        }
    }
    None
}

/// Waits, for a blocking query (`index` > 0), until `current` passes `index` or `wait`
/// (default 5 min, at most 10 min) ends.
async fn consul_block(
    state: &ConsulState,
    params: &HashMap<String, String>,
    current: impl Fn(&ConsulData) -> u64,
) {
    let Some(index) = params
        .get("index")
        .and_then(|i| i.parse::<u64>().ok())
        .filter(|i| *i > 0)
    else {
        return;
    };
    let wait = params
        .get("wait")
        .and_then(|w| parse_wait(w))
        .unwrap_or(Duration::from_secs(300))
        .min(Duration::from_secs(600));
    let deadline = Instant::now() + wait;
    // Subscribed before the check, so a change in between still wakes us.
    let mut changes = state.changed.subscribe();
    loop {
        if current(&lock(&state.data)) > index {
            return;
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

/// `30s`, `100ms`, `5m`, `1h`, or plain seconds.
fn parse_wait(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    Some(match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return None,
    })
}

fn consul_headers(index: u64, filtered: bool) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-consul-index", HeaderValue::from(index));
    h.insert("x-consul-knownleader", HeaderValue::from_static("true"));
    h.insert("x-consul-lastcontact", HeaderValue::from_static("0"));
    if filtered {
        h.insert(
            "x-consul-results-filtered-by-acls",
            HeaderValue::from_static("true"),
        );
    }
    h
}

/// `GET /v1/catalog/services`.
async fn consul_services(
    State(state): State<Arc<ConsulState>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = consul_admit(&state, &params, &headers) {
        return refused;
    }
    consul_block(&state, &params, |d| d.catalog_index).await;
    let d = lock(&state.data);
    let mut services: BTreeMap<&str, BTreeSet<&str>> =
        BTreeMap::from([("consul", BTreeSet::new())]);
    let mut filtered = false;
    for (service, _, _) in d.entries.values() {
        if d.hidden.contains(&service.name) {
            filtered = true;
            continue;
        }
        let tags = services.entry(&service.name).or_default();
        tags.extend(service.tags.iter().map(String::as_str));
    }
    json_response(consul_headers(d.catalog_index, filtered), &json!(services))
}

/// `GET /v1/health/service/<name>`.
async fn consul_health(
    State(state): State<Arc<ConsulState>>,
    Path(name): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = consul_admit(&state, &params, &headers) {
        return refused;
    }
    consul_block(&state, &params, |d| {
        d.service_index.get(&name).copied().unwrap_or(1)
    })
    .await;
    let d = lock(&state.data);
    let index = d.service_index.get(&name).copied().unwrap_or(1);
    if d.hidden.contains(&name) {
        return json_response(consul_headers(index, true), &json!([]));
    }
    let dc = &state.options.datacenter;
    let entries: Vec<Value> = d
        .entries
        .values()
        .filter(|(s, _, _)| s.name == name)
        .map(|(s, created, modified)| consul_entry(s, dc, *created, *modified))
        .collect();
    json_response(consul_headers(index, false), &json!(entries))
}

/// One health entry, shaped like Consul's (reference §2.2).
fn consul_entry(s: &ConsulService, dc: &str, created: u64, modified: u64) -> Value {
    let tagged_address = s.address.clone();
    let mut checks = vec![
        json!({"Node": s.node, "CheckID": "serfHealth", "Name": "Serf Health Status",
               "Status": "passing", "Notes": "", "Output": "Agent alive and reachable",
               "ServiceID": "", "ServiceName": "", "ServiceTags": []}),
        json!({"Node": s.node, "CheckID": format!("service:{}", s.id),
               "Name": format!("Service '{}' check", s.name), "Status": s.status,
               "Notes": "", "Output": "",
               "ServiceID": s.id, "ServiceName": s.name, "ServiceTags": s.tags}),
    ];
    if s.maintenance {
        checks.push(
            json!({"Node": s.node, "CheckID": format!("_service_maintenance:{}", s.id),
               "Name": "Service Maintenance Mode", "Status": "critical",
               "Notes": "", "Output": "", "ServiceID": s.id, "ServiceName": s.name,
               "ServiceTags": s.tags}),
        );
    }
    json!({
        "Node": {
            "ID": format!("00000000-0000-4000-8000-{:012x}", fnv(&s.node) & 0xffff_ffff_ffff),
            "Node": s.node,
            "Address": s.node_address,
            "Datacenter": dc,
            "TaggedAddresses": {"lan": s.node_address, "wan": s.node_address},
            "Meta": {"consul-network-segment": ""},
            "CreateIndex": 5, "ModifyIndex": 5
        },
        "Service": {
            "ID": s.id,
            "Service": s.name,
            "Tags": s.tags,
            "Address": s.address,
            "TaggedAddresses": {
                "lan_ipv4": {"Address": tagged_address, "Port": s.port},
                "wan_ipv4": {"Address": tagged_address, "Port": s.port}
            },
            "Meta": s.meta,
            "Port": s.port,
            "Weights": {"Passing": s.weights.0, "Warning": s.weights.1},
            "EnableTagOverride": false,
            "Kind": s.kind,
            "CreateIndex": created, "ModifyIndex": modified
        },
        "Checks": checks
    })
}

/// FNV-1a, for stable fake node ids.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// ---------------------------------------------------------------------------------------
// Eureka

/// How a [`FakeEureka`] starts.
#[derive(Clone, Debug, Default)]
pub struct EurekaOptions {
    /// HTTP basic credentials every request must carry; `None`: open.
    pub basic_auth: Option<(String, String)>,
}

/// An instance registered in a [`FakeEureka`].
#[derive(Clone, Debug, PartialEq)]
pub struct EurekaInstance {
    /// Application name (stored upper-cased, as Eureka does).
    pub app: String,
    /// `instanceId`.
    pub instance_id: String,
    /// `hostName`.
    pub host_name: String,
    /// `ipAddr`.
    pub ip: String,
    /// `port.$`.
    pub port: u16,
    /// `port.@enabled`.
    pub port_enabled: bool,
    /// `securePort.$`.
    pub secure_port: u16,
    /// `securePort.@enabled`.
    pub secure_port_enabled: bool,
    /// `status`: `UP`, `DOWN`, `STARTING`, `OUT_OF_SERVICE`, `UNKNOWN`.
    pub status: String,
    /// `overriddenStatus`.
    pub overridden_status: String,
    /// `vipAddress` (and `secureVipAddress`).
    pub vip_address: String,
    /// `metadata` (written as Jackson's `EmptyMap` when empty).
    pub metadata: BTreeMap<String, String>,
}

impl EurekaInstance {
    /// A Spring Cloud style registration: app `APP`, id `<ip>:<app>:<port>`, vip `app`,
    /// `UP`, secure port 443 disabled. Panics if `ip` is off this machine
    /// ([`crate::addresses`]): roster imports it.
    #[track_caller]
    pub fn new(app: &str, ip: &str, port: u16) -> Self {
        crate::addresses::check_ip(ip);
        let lower = app.to_lowercase();
        Self {
            app: app.to_uppercase(),
            instance_id: format!("{ip}:{lower}:{port}"),
            host_name: ip.into(),
            ip: ip.into(),
            port,
            port_enabled: true,
            secure_port: 443,
            secure_port_enabled: false,
            status: "UP".into(),
            overridden_status: "UNKNOWN".into(),
            vip_address: lower,
            metadata: BTreeMap::new(),
        }
    }
}

/// A fake Eureka server (Spring Cloud layout, base path `/eureka`). See the module docs.
pub struct FakeEureka {
    state: Arc<EurekaState>,
    served: Served,
}

struct EurekaState {
    data: Mutex<EurekaData>,
    options: EurekaOptions,
}

#[derive(Default)]
struct EurekaData {
    /// App → instance id → instance, its last action and its timestamps.
    apps: BTreeMap<String, BTreeMap<String, Stored>>,
    /// Recently changed instances, oldest first.
    recent: VecDeque<Recent>,
    /// `versions__delta`: bumped by every change.
    version: u64,
    /// Answer 403 to `/apps/delta`.
    delta_disabled: bool,
}

#[derive(Clone)]
struct Stored {
    instance: EurekaInstance,
    action: &'static str,
    updated_ms: u64,
}

struct Recent {
    at: Instant,
    stored: Stored,
}

/// How long a change stays in the delta (Eureka's `retentionTimeInMSInDeltaQueue`).
const DELTA_RETENTION: Duration = Duration::from_secs(180);

impl std::ops::Deref for FakeEureka {
    type Target = Served;

    /// The server: port, address, request counts, forced failures.
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl FakeEureka {
    /// Starts an open fake.
    pub fn start() -> Self {
        Self::start_with(EurekaOptions::default())
    }

    /// Starts a fake with `options`.
    pub fn start_with(options: EurekaOptions) -> Self {
        let state = Arc::new(EurekaState {
            data: Mutex::new(EurekaData {
                version: 1,
                ..EurekaData::default()
            }),
            options,
        });
        let router = Router::new()
            .route("/eureka/apps", get(eureka_apps))
            .route("/eureka/apps/", get(eureka_apps))
            .route("/eureka/apps/delta", get(eureka_delta))
            .route("/eureka/apps/{app}", get(eureka_app))
            .with_state(state.clone());
        Self {
            served: Served::start("fake-eureka", router),
            state,
        }
    }

    /// `eureka://127.0.0.1:<port>/eureka`.
    pub fn url(&self) -> String {
        format!("eureka://{}/eureka", self.addr())
    }

    /// Registers `instance` (`ADDED`), or replaces the one with its app and id
    /// (`MODIFIED`).
    pub fn register(&self, mut instance: EurekaInstance) {
        instance.app = instance.app.to_uppercase();
        let mut d = lock(&self.state.data);
        let app = d.apps.entry(instance.app.clone()).or_default();
        let action = if app.contains_key(&instance.instance_id) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let stored = Stored {
            instance: instance.clone(),
            action,
            updated_ms: now_ms(),
        };
        app.insert(instance.instance_id, stored.clone());
        d.record(stored);
    }

    /// Sets the status of instance `id` of `app` (`MODIFIED`); whether it exists.
    pub fn set_status(&self, app: &str, id: &str, status: &str) -> bool {
        let mut d = lock(&self.state.data);
        let Some(stored) = d
            .apps
            .get_mut(&app.to_uppercase())
            .and_then(|a| a.get_mut(id))
        else {
            return false;
        };
        stored.instance.status = status.to_string();
        stored.action = "MODIFIED";
        stored.updated_ms = now_ms();
        let stored = stored.clone();
        d.record(stored);
        true
    }

    /// Cancels instance `id` of `app` (`DELETED`); whether it existed.
    pub fn cancel(&self, app: &str, id: &str) -> bool {
        let app = app.to_uppercase();
        let mut d = lock(&self.state.data);
        let Some(mut stored) = d.apps.get_mut(&app).and_then(|a| a.remove(id)) else {
            return false;
        };
        if d.apps.get(&app).is_some_and(BTreeMap::is_empty) {
            d.apps.remove(&app);
        }
        stored.action = "DELETED";
        stored.updated_ms = now_ms();
        d.record(stored);
        true
    }

    /// Empties the recently-changed queue, as if its changes had aged out: a client
    /// that had not fetched them finds its hash no longer matches.
    pub fn clear_deltas(&self) {
        lock(&self.state.data).recent.clear();
    }

    /// Answers `/apps/delta` with 403 (deltas disabled on the server) or serves it.
    pub fn set_delta_enabled(&self, enabled: bool) {
        lock(&self.state.data).delta_disabled = !enabled;
    }

    /// The registry's reconcile hash, e.g. `DOWN_1_UP_2_`.
    pub fn hashcode(&self) -> String {
        lock(&self.state.data).hashcode()
    }
}

impl EurekaData {
    fn record(&mut self, stored: Stored) {
        self.version += 1;
        self.recent.push_back(Recent {
            at: Instant::now(),
            stored,
        });
    }

    /// `<STATUS>_<count>_` per status, statuses sorted.
    fn hashcode(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for stored in self.apps.values().flat_map(BTreeMap::values) {
            *counts.entry(stored.instance.status.as_str()).or_default() += 1;
        }
        counts.iter().map(|(s, n)| format!("{s}_{n}_")).collect()
    }

    /// The `applications` document over `stored` instances, grouped by app in order.
    fn document<'a>(&self, stored: impl Iterator<Item = &'a Stored>) -> Value {
        let mut apps: Vec<(String, Vec<Value>)> = Vec::new();
        for s in stored {
            let json = eureka_instance(s);
            match apps.iter_mut().find(|(name, _)| *name == s.instance.app) {
                Some((_, list)) => list.push(json),
                None => apps.push((s.instance.app.clone(), vec![json])),
            }
        }
        let application: Vec<Value> = apps
            .into_iter()
            .map(|(name, instance)| json!({"name": name, "instance": instance}))
            .collect();
        json!({"applications": {
            "versions__delta": self.version.to_string(),
            "apps__hashcode": self.hashcode(),
            "application": application
        }})
    }
}

/// One instance, shaped like Eureka's Jackson codec writes it (reference §3.4).
fn eureka_instance(s: &Stored) -> Value {
    let i = &s.instance;
    let metadata = if i.metadata.is_empty() {
        json!({"@class": "java.util.Collections$EmptyMap"})
    } else {
        json!(i.metadata)
    };
    let base = format!("http://{}:{}", i.host_name, i.port);
    json!({
        "instanceId": i.instance_id,
        "hostName": i.host_name,
        "app": i.app,
        "ipAddr": i.ip,
        "status": i.status,
        "overriddenStatus": i.overridden_status,
        "port": {"$": i.port, "@enabled": i.port_enabled.to_string()},
        "securePort": {"$": i.secure_port, "@enabled": i.secure_port_enabled.to_string()},
        "countryId": 1,
        "dataCenterInfo": {
            "@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
            "name": "MyOwn"
        },
        "leaseInfo": {
            "renewalIntervalInSecs": 30, "durationInSecs": 90,
            "registrationTimestamp": s.updated_ms, "lastRenewalTimestamp": s.updated_ms,
            "evictionTimestamp": 0, "serviceUpTimestamp": s.updated_ms
        },
        "metadata": metadata,
        "homePageUrl": format!("{base}/"),
        "statusPageUrl": format!("{base}/actuator/info"),
        "healthCheckUrl": format!("{base}/actuator/health"),
        "vipAddress": i.vip_address,
        "secureVipAddress": i.vip_address,
        "isCoordinatingDiscoveryServer": "false",
        "lastUpdatedTimestamp": s.updated_ms.to_string(),
        "lastDirtyTimestamp": s.updated_ms.to_string(),
        "actionType": s.action
    })
}

/// Checks basic auth and the Accept header; the answer to give instead, if any.
fn eureka_admit(state: &EurekaState, headers: &HeaderMap) -> Option<Response> {
    if let Some((user, password)) = &state.options.basic_auth {
        let want = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "));
        if given != Some(want.as_str()) {
            return Some(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic realm=\"eureka\"")],
                    "Unauthorized",
                )
                    .into_response(),
            );
        }
    }
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if !wants_json {
        // Eureka's answer to a client that did not ask for JSON.
        let d = lock(&state.data);
        let xml = format!(
            "<applications><versions__delta>{}</versions__delta><apps__hashcode>{}</apps__hashcode></applications>",
            d.version,
            d.hashcode()
        );
        return Some(([(header::CONTENT_TYPE, "application/xml")], xml).into_response());
    }
    None
}

/// `GET /eureka/apps`.
async fn eureka_apps(State(state): State<Arc<EurekaState>>, headers: HeaderMap) -> Response {
    if let Some(answer) = eureka_admit(&state, &headers) {
        return answer;
    }
    let d = lock(&state.data);
    let doc = d.document(d.apps.values().flat_map(BTreeMap::values));
    json_response(HeaderMap::new(), &doc)
}

/// `GET /eureka/apps/delta`.
async fn eureka_delta(State(state): State<Arc<EurekaState>>, headers: HeaderMap) -> Response {
    if let Some(answer) = eureka_admit(&state, &headers) {
        return answer;
    }
    let mut d = lock(&state.data);
    if d.delta_disabled {
        return (StatusCode::FORBIDDEN, "delta disabled").into_response();
    }
    while d
        .recent
        .front()
        .is_some_and(|r| r.at.elapsed() > DELTA_RETENTION)
    {
        d.recent.pop_front();
    }
    let doc = d.document(d.recent.iter().map(|r| &r.stored));
    json_response(HeaderMap::new(), &doc)
}

/// `GET /eureka/apps/{APP}`.
async fn eureka_app(
    State(state): State<Arc<EurekaState>>,
    Path(app): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(answer) = eureka_admit(&state, &headers) {
        return answer;
    }
    let d = lock(&state.data);
    let Some(instances) = d.apps.get(&app.to_uppercase()) else {
        return (StatusCode::NOT_FOUND, "").into_response();
    };
    let list: Vec<Value> = instances.values().map(eureka_instance).collect();
    let doc = json!({"application": {"name": app.to_uppercase(), "instance": list}});
    json_response(HeaderMap::new(), &doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_consul_waits() {
        assert_eq!(parse_wait("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_wait("100ms"), Some(Duration::from_millis(100)));
        assert_eq!(parse_wait("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_wait("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_wait("x"), None);
    }
}
