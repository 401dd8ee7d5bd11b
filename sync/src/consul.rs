//! Consul as a source, through its HTTP API v1.
//!
//! `list` reads `/v1/catalog/services`, then `/v1/health/service/<name>` for every
//! admitted service (never the built-in `consul` service, never entries of another kind
//! such as `connect-proxy`). `watch` runs blocking queries (`index` + `wait`) as
//! background tasks feeding one channel: one on the service list, which starts and stops
//! the others, and one per service. Each task reports only when its mapped answer really
//! changed, since a blocking query may return without a change. The tasks end on the next
//! `list` and when the source is dropped.
//!
//! Mapping: address `Service.Address`, else `Node.Address`; weight `Weights.Passing`, or
//! `Weights.Warning` while a check warns; unhealthy when a check is critical; disabled
//! under node or service maintenance; metadata `Service.Meta` plus `k=v` tags plus
//! `consul.*` keys; source id `Node/ServiceID`; cluster `DEFAULT`. An answer Consul
//! filtered by ACL (`X-Consul-Results-Filtered-By-ACLs: true`) makes the snapshot partial.
//!
//! URL: `consul://host:8500[,host:8500]?dc=dc1&ns=team&token=secret`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout_at, Instant};

use crate::rest::{fetch_all, json_text, query, segment, Rest};
use crate::{
    Filter, Metadata, ServiceName, Services, Snapshot, Source, SourceError, SourceInstance,
    SourceUrl, Update,
};

/// How long a blocking query waits for a change (Consul adds up to `WAIT / 16`).
const WAIT: Duration = Duration::from_secs(30);
/// Timeout of a call that does not block.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack on top of `WAIT + WAIT / 16` before a blocking call counts as timed out.
const BLOCKING_SLACK: Duration = Duration::from_secs(5);
/// How long `watch` waits before answering "nothing changed".
const IDLE: Duration = Duration::from_secs(30);
/// Health reads in flight at once during `list`.
const CONCURRENCY: usize = 16;
/// Watch events queued before the watch tasks wait for `watch` to take them.
const EVENT_QUEUE: usize = 1024;
/// Each blocking-query loop runs on a token bucket: this many back-to-back queries...
const LOOP_BURST: f64 = 2.0;
/// ...then one more per this interval, so a server that answers at once (index reset,
/// a flapping service) does not make the loop spin.
const LOOP_REFILL: Duration = Duration::from_secs(1);
/// Response header with the blocking index.
const INDEX_HEADER: &str = "x-consul-index";
/// Response header set when ACLs hid part of the answer.
const FILTERED_HEADER: &str = "x-consul-results-filtered-by-acls";
/// Consul's own service, never imported.
const BUILTIN_SERVICE: &str = "consul";
/// Cluster of every imported instance.
const DEFAULT_CLUSTER: &str = "DEFAULT";

/// Reads a Consul datacenter.
pub struct ConsulSource {
    api: Api,
    filter: Filter,
    /// The blocking queries started by the last `list`; `None` before it and after a
    /// watch failed.
    watch: Option<Watch>,
}

impl ConsulSource {
    /// A source for `url` (`dc`, `ns` and `token` parameters), reading the services
    /// `filter` admits. Connects on the first `list`.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        Ok(Self {
            api: Api::new(url)?,
            filter: filter.clone(),
            watch: None,
        })
    }
}

#[async_trait::async_trait]
impl Source for ConsulSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        // Stop the old blocking queries first: their answers belong to the old state.
        self.watch = None;
        let catalog = self.api.services(0).await?;
        let names = admitted(&self.filter, catalog.body);
        let api = self.api.clone();
        let answers = fetch_all(names.iter().cloned().collect(), CONCURRENCY, move |name| {
            let api = api.clone();
            async move { api.health(&name, 0).await }
        })
        .await?;
        let mut snapshot = Snapshot {
            partial: catalog.partial,
            ..Snapshot::default()
        };
        let mut watched = Vec::new();
        for (name, answer) in answers {
            snapshot.partial |= answer.partial;
            let mapped = map_entries(&answer.body);
            let reported = (!mapped.proxy_only).then(|| {
                snapshot
                    .services
                    .insert(ServiceName::plain(&name), mapped.instances.clone());
                mapped.instances
            });
            watched.push((name, next_index(0, answer.index), reported));
        }
        let catalog_index = next_index(0, catalog.index);
        self.watch = Some(Watch::start(
            self.api.clone(),
            self.filter.clone(),
            (catalog_index, names),
            watched,
        ));
        Ok(snapshot)
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        let deadline = Instant::now() + IDLE;
        let mut changes = Services::new();
        loop {
            let Some(watch) = self.watch.as_mut() else {
                return Ok(Update::Resync);
            };
            let first = match timeout_at(deadline, watch.events.recv()).await {
                Err(_) => return Ok(Update::Services(changes)),
                // Unreachable while `watch` holds a sender; list again to be safe.
                Ok(None) => return Ok(Update::Resync),
                Ok(Some(event)) => event,
            };
            // Take whatever else is queued, so a burst comes back as one update.
            let mut batch = vec![first];
            while let Ok(event) = watch.events.try_recv() {
                batch.push(event);
            }
            for event in batch {
                match watch.apply(event, &mut changes) {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Resync) => {
                        self.watch = None;
                        return Ok(Update::Resync);
                    }
                    Err(e) => {
                        self.watch = None;
                        return Err(e);
                    }
                }
            }
            if !changes.is_empty() {
                return Ok(Update::Services(changes));
            }
        }
    }
}

/// The names among `names` that are imported: admitted by `filter`, not Consul's own.
fn admitted(filter: &Filter, names: BTreeSet<String>) -> BTreeSet<String> {
    names
        .into_iter()
        .filter(|n| n != BUILTIN_SERVICE && filter.admits(n))
        .collect()
}

// ---------------------------------------------------------------------------------------
// HTTP calls

/// The calls this source makes. Cheap to clone; every watch task holds one.
#[derive(Clone)]
struct Api {
    rest: Rest,
    /// `dc` parameter: the datacenter to read (the agent's own when absent).
    dc: Option<String>,
    /// `ns` parameter: the Enterprise namespace to read.
    ns: Option<String>,
}

/// One answer of a blocking endpoint.
#[derive(Debug)]
struct Answer<T> {
    body: T,
    /// `X-Consul-Index` (0 when absent or unreadable).
    index: u64,
    /// ACLs hid part of the answer.
    partial: bool,
}

impl Api {
    fn new(url: &SourceUrl) -> Result<Self, SourceError> {
        let mut headers = Vec::new();
        if let Some(token) = url.param("token") {
            headers.push(("x-consul-token", token.to_string()));
        }
        Ok(Self {
            rest: Rest::new(url, "", &headers, None)?,
            dc: url.param("dc").map(str::to_string),
            ns: url.param("ns").map(str::to_string),
        })
    }

    /// Every service name (`/v1/catalog/services`); blocks while the index is `index`.
    async fn services(&self, index: u64) -> Result<Answer<BTreeSet<String>>, SourceError> {
        let answer: Answer<Option<BTreeMap<String, Value>>> =
            self.get("/v1/catalog/services", index).await?;
        Ok(Answer {
            body: answer.body.unwrap_or_default().into_keys().collect(),
            index: answer.index,
            partial: answer.partial,
        })
    }

    /// The entries of one service with their checks (`/v1/health/service/<name>`);
    /// blocks while the index is `index`.
    async fn health(
        &self,
        service: &str,
        index: u64,
    ) -> Result<Answer<Vec<HealthEntry>>, SourceError> {
        let path = format!("/v1/health/service/{}", segment(service));
        let answer: Answer<Option<Vec<HealthEntry>>> = self.get(&path, index).await?;
        Ok(Answer {
            body: answer.body.unwrap_or_default(),
            index: answer.index,
            partial: answer.partial,
        })
    }

    /// `GET path` with `dc`, `ns` and, for `index > 0`, a blocking `index` + `wait`.
    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        index: u64,
    ) -> Result<Answer<T>, SourceError> {
        let index_text = index.to_string();
        let wait_text = format!("{}s", WAIT.as_secs());
        let mut pairs = Vec::new();
        if let Some(dc) = &self.dc {
            pairs.push(("dc", dc.as_str()));
        }
        if let Some(ns) = &self.ns {
            pairs.push(("ns", ns.as_str()));
        }
        let timeout = if index > 0 {
            pairs.push(("index", &index_text));
            pairs.push(("wait", &wait_text));
            // Consul may hold the call for up to WAIT + WAIT / 16.
            WAIT + WAIT / 16 + BLOCKING_SLACK
        } else {
            CALL_TIMEOUT
        };
        let reply = self
            .rest
            .get(&format!("{path}{}", query(&pairs)), timeout)
            .await?
            .success()?;
        Ok(Answer {
            body: reply.json()?,
            index: reply
                .header(INDEX_HEADER)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
            partial: reply
                .header(FILTERED_HEADER)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        })
    }
}

/// The index for the next blocking query after an answer carrying `received`, by
/// Consul's rules: start over (0, which does not block) when the index went backwards;
/// never block on an index below 1.
fn next_index(previous: u64, received: u64) -> u64 {
    if received < previous {
        0
    } else {
        received.max(1)
    }
}

/// A token bucket for one blocking-query loop ([`LOOP_BURST`], [`LOOP_REFILL`]). Tokens
/// may go negative: that is a debt the caller sleeps off.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(now: Instant) -> Self {
        Self {
            tokens: LOOP_BURST,
            at: now,
        }
    }

    /// Takes a token at `now`; returns how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        let earned =
            now.saturating_duration_since(self.at).as_secs_f64() / LOOP_REFILL.as_secs_f64();
        self.tokens = (self.tokens + earned).min(LOOP_BURST) - 1.0;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            LOOP_REFILL.mul_f64(-self.tokens)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Watching

/// What a watch task reports.
#[derive(Debug)]
enum Event {
    /// The admitted service names changed.
    Catalog {
        names: BTreeSet<String>,
        partial: bool,
    },
    /// A service's instances changed.
    Instances {
        service: String,
        instances: Vec<SourceInstance>,
        partial: bool,
    },
    /// A blocking query failed; the task has stopped.
    Failed(SourceError),
}

/// What `watch` does after an event.
enum Flow {
    Continue,
    /// The change cannot be reported as complete lists: list again.
    Resync,
}

/// The running blocking queries. Dropping it stops them.
struct Watch {
    api: Api,
    filter: Filter,
    events: mpsc::Receiver<Event>,
    /// Handed to each new task.
    sender: mpsc::Sender<Event>,
    catalog: JoinHandle<()>,
    /// One task per admitted service.
    services: BTreeMap<String, JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.catalog.abort();
        for task in self.services.values() {
            task.abort();
        }
    }
}

/// A service to watch: name, index to block on, what was last reported (`None`: not
/// reported yet).
type Watched = (String, u64, Option<Vec<SourceInstance>>);

impl Watch {
    /// Starts the catalog query at `catalog` (index and known names) and one query per
    /// `services` entry.
    fn start(
        api: Api,
        filter: Filter,
        catalog: (u64, BTreeSet<String>),
        services: Vec<Watched>,
    ) -> Self {
        let (sender, events) = mpsc::channel(EVENT_QUEUE);
        let catalog = tokio::spawn(watch_catalog(
            api.clone(),
            filter.clone(),
            catalog,
            sender.clone(),
        ));
        let mut watch = Self {
            api,
            filter,
            events,
            sender,
            catalog,
            services: BTreeMap::new(),
        };
        for service in services {
            watch.start_service(service);
        }
        watch
    }

    fn start_service(&mut self, (name, index, last): Watched) {
        let task = tokio::spawn(watch_service(
            self.api.clone(),
            name.clone(),
            index,
            last,
            self.sender.clone(),
        ));
        if let Some(old) = self.services.insert(name, task) {
            old.abort();
        }
    }

    /// Folds `event` into `changes`.
    fn apply(&mut self, event: Event, changes: &mut Services) -> Result<Flow, SourceError> {
        match event {
            Event::Failed(e) => Err(e),
            Event::Catalog { partial: true, .. } | Event::Instances { partial: true, .. } => {
                // A name or instance missing from a filtered answer may be hidden, not
                // gone: only a (partial) list can say what to keep.
                Ok(Flow::Resync)
            }
            Event::Catalog { names, .. } => {
                let gone: Vec<String> = self
                    .services
                    .keys()
                    .filter(|n| !names.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    if let Some(task) = self.services.remove(&name) {
                        task.abort();
                    }
                    changes.insert(ServiceName::plain(name), Vec::new());
                }
                for name in names {
                    if !self.services.contains_key(&name) && self.filter.admits(&name) {
                        // Index 0: the first answer comes at once and is reported.
                        self.start_service((name, 0, None));
                    }
                }
                Ok(Flow::Continue)
            }
            Event::Instances {
                service, instances, ..
            } => {
                // An answer of a task stopped since is stale.
                if self.services.contains_key(&service) {
                    changes.insert(ServiceName::plain(service), instances);
                }
                Ok(Flow::Continue)
            }
        }
    }
}

/// Blocks on the service list; reports when the admitted names change.
async fn watch_catalog(
    api: Api,
    filter: Filter,
    (mut index, mut last): (u64, BTreeSet<String>),
    events: mpsc::Sender<Event>,
) {
    let mut bucket = Bucket::new(Instant::now());
    loop {
        sleep(bucket.take(Instant::now())).await;
        let answer = match api.services(index).await {
            Ok(a) => a,
            Err(e) => {
                let _ = events.send(Event::Failed(e)).await;
                return;
            }
        };
        index = next_index(index, answer.index);
        let names = admitted(&filter, answer.body);
        if names == last {
            continue;
        }
        last = names.clone();
        let event = Event::Catalog {
            names,
            partial: answer.partial,
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// Blocks on one service's health; reports when its mapped instances change.
async fn watch_service(
    api: Api,
    service: String,
    mut index: u64,
    mut last: Option<Vec<SourceInstance>>,
    events: mpsc::Sender<Event>,
) {
    let mut bucket = Bucket::new(Instant::now());
    loop {
        sleep(bucket.take(Instant::now())).await;
        let answer = match api.health(&service, index).await {
            Ok(a) => a,
            Err(e) => {
                let _ = events.send(Event::Failed(e)).await;
                return;
            }
        };
        index = next_index(index, answer.index);
        let mapped = map_entries(&answer.body);
        let changed = match &last {
            // A service of proxies only is not reported until it has plain instances.
            None => !mapped.proxy_only,
            Some(previous) => *previous != mapped.instances,
        };
        if !changed {
            continue;
        }
        last = Some(mapped.instances.clone());
        let event = Event::Instances {
            service: service.clone(),
            instances: mapped.instances,
            partial: answer.partial,
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Mapping

/// One entry of `/v1/health/service/<name>`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HealthEntry {
    #[serde(default)]
    node: Option<NodeInfo>,
    #[serde(default)]
    service: Option<ServiceInfo>,
    #[serde(default)]
    checks: Option<Vec<Check>>,
}

/// `Node` of a health entry (the fields used).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct NodeInfo {
    node: Option<String>,
    address: Option<String>,
    datacenter: Option<String>,
}

/// `Service` of a health entry (the fields used).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct ServiceInfo {
    #[serde(rename = "ID")]
    id: Option<String>,
    service: Option<String>,
    tags: Option<Vec<String>>,
    address: Option<String>,
    meta: Option<BTreeMap<String, Value>>,
    port: Option<i64>,
    weights: Option<Weights>,
    kind: Option<String>,
}

/// `Service.Weights`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct Weights {
    passing: Option<f64>,
    warning: Option<f64>,
}

/// One of `Checks`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct Check {
    #[serde(rename = "CheckID")]
    check_id: Option<String>,
    status: Option<String>,
}

/// A health answer, mapped.
#[derive(Debug, PartialEq)]
struct Mapped {
    /// The importable instances, ordered by source id.
    instances: Vec<SourceInstance>,
    /// Every entry was of another kind (`connect-proxy`, gateways): not a service to import.
    proxy_only: bool,
}

fn map_entries(entries: &[HealthEntry]) -> Mapped {
    let mut instances = Vec::new();
    let mut others = 0;
    for entry in entries {
        let Some(service) = &entry.service else {
            continue;
        };
        if service.kind.as_deref().is_some_and(|k| !k.is_empty()) {
            others += 1;
            continue;
        }
        match map_entry(entry, service) {
            Some(instance) => instances.push(instance),
            None => tracing::debug!(
                service = ?service.service,
                id = ?service.id,
                "consul entry without address or valid port skipped"
            ),
        }
    }
    instances.sort_by(|a, b| a.source_id.cmp(&b.source_id));
    Mapped {
        instances,
        proxy_only: others > 0 && others == entries.len(),
    }
}

/// A check's status, worst last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Passing,
    Warning,
    Critical,
}

/// The checks of one entry, aggregated like Consul's `AggregatedStatus`, except that
/// maintenance is kept apart so health stays known under it.
#[derive(Debug, PartialEq)]
struct Health {
    /// Worst status of the checks other than maintenance.
    worst: Status,
    /// A node or service maintenance check is present.
    maintenance: bool,
}

fn health(checks: &[Check]) -> Health {
    let mut health = Health {
        worst: Status::Passing,
        maintenance: false,
    };
    for check in checks {
        let id = check.check_id.as_deref().unwrap_or("");
        if id == "_node_maintenance" || id.starts_with("_service_maintenance:") {
            health.maintenance = true;
            continue;
        }
        let status = match check.status.as_deref() {
            Some("passing") => Status::Passing,
            Some("warning") => Status::Warning,
            // `critical`, and anything unknown: do not call it healthy.
            _ => Status::Critical,
        };
        health.worst = health.worst.max(status);
    }
    health
}

fn map_entry(entry: &HealthEntry, service: &ServiceInfo) -> Option<SourceInstance> {
    let node = entry.node.as_ref();
    let ip = non_empty(service.address.as_deref())
        .or_else(|| non_empty(node.and_then(|n| n.address.as_deref())))?;
    let port = service
        .port
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)?;
    let health = health(entry.checks.as_deref().unwrap_or(&[]));
    let weights = service.weights.as_ref();
    let weight = match health.worst {
        Status::Warning => weights.and_then(|w| w.warning),
        _ => weights.and_then(|w| w.passing),
    }
    .unwrap_or(1.0);
    let node_name = node.and_then(|n| n.node.as_deref()).unwrap_or("");
    let id = non_empty(service.id.as_deref())
        .or_else(|| non_empty(service.service.as_deref()))
        .unwrap_or("");
    Some(SourceInstance {
        cluster: DEFAULT_CLUSTER.to_string(),
        ip: ip.to_string(),
        port,
        weight,
        healthy: health.worst != Status::Critical,
        enabled: !health.maintenance,
        metadata: metadata(service, node, node_name, id),
        source_id: format!("{node_name}/{id}"),
    })
}

/// `Service.Meta`, then `k=v` tags for keys Meta lacks (older Spring Cloud Consul), then
/// `consul.node`, `consul.datacenter`, `consul.serviceId`, `consul.tags`.
fn metadata(service: &ServiceInfo, node: Option<&NodeInfo>, node_name: &str, id: &str) -> Metadata {
    let mut m: Metadata = service
        .meta
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), json_text(v)))
        .collect();
    let tags = service.tags.as_deref().unwrap_or(&[]);
    for tag in tags {
        if let Some((k, v)) = tag.split_once('=') {
            if !k.is_empty() {
                m.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
    }
    m.insert("consul.node".into(), node_name.to_string());
    if let Some(dc) = non_empty(node.and_then(|n| n.datacenter.as_deref())) {
        m.insert("consul.datacenter".into(), dc.to_string());
    }
    m.insert("consul.serviceId".into(), id.to_string());
    if !tags.is_empty() {
        m.insert("consul.tags".into(), tags.join(","));
    }
    m
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalog example of the reference (§2.2).
    const SERVICES: &str = r#"{
      "consul": [],
      "order-service": ["secure=false", "v1"],
      "payment-service": []
    }"#;

    /// The health example of the reference (§2.2).
    const HEALTH: &str = r#"[
      {
        "Node": {
          "ID": "40e4a748-2192-161a-0510-9bf59fe950b5",
          "Node": "node-a",
          "Address": "10.1.10.12",
          "Datacenter": "dc1",
          "TaggedAddresses": {"lan": "10.1.10.12", "wan": "10.1.10.12"},
          "Meta": {"consul-network-segment": ""},
          "CreateIndex": 13, "ModifyIndex": 14
        },
        "Service": {
          "ID": "order-service-8080",
          "Service": "order-service",
          "Tags": ["secure=false", "v1"],
          "Address": "10.1.10.12",
          "TaggedAddresses": {
            "lan_ipv4": {"Address": "10.1.10.12", "Port": 8080},
            "wan_ipv4": {"Address": "10.1.10.12", "Port": 8080}
          },
          "Meta": {"secure": "false", "zone": "az1", "version": "1.4.2"},
          "Port": 8080,
          "Weights": {"Passing": 10, "Warning": 1},
          "EnableTagOverride": false,
          "Kind": "",
          "Namespace": "default",
          "CreateIndex": 4690, "ModifyIndex": 4690
        },
        "Checks": [
          {"Node": "node-a", "CheckID": "serfHealth", "Name": "Serf Health Status",
           "Status": "passing", "Notes": "", "Output": "Agent alive and reachable",
           "ServiceID": "", "ServiceName": "", "ServiceTags": []},
          {"Node": "node-a", "CheckID": "service:order-service-8080",
           "Name": "Service 'order-service' check", "Status": "warning",
           "Notes": "", "Output": "HTTP GET http://10.1.10.12:8080/actuator/health: 429",
           "ServiceID": "order-service-8080", "ServiceName": "order-service",
           "ServiceTags": ["secure=false", "v1"]}
        ]
      }
    ]"#;

    fn check(id: &str, status: &str) -> Check {
        Check {
            check_id: Some(id.into()),
            status: Some(status.into()),
        }
    }

    #[test]
    fn catalog_example_skips_consul_itself() {
        let map: BTreeMap<String, Value> = serde_json::from_str(SERVICES).unwrap();
        let names = admitted(&Filter::all(), map.into_keys().collect());
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            vec!["order-service", "payment-service"]
        );
        let only_pay = Filter::parse(Some("pay*")).unwrap();
        let map: BTreeMap<String, Value> = serde_json::from_str(SERVICES).unwrap();
        assert_eq!(admitted(&only_pay, map.into_keys().collect()).len(), 1);
    }

    #[test]
    fn health_example_maps_per_reference() {
        let entries: Vec<HealthEntry> = serde_json::from_str(HEALTH).unwrap();
        let mapped = map_entries(&entries);
        assert!(!mapped.proxy_only);
        let [i] = mapped.instances.as_slice() else {
            panic!("one instance expected: {mapped:?}")
        };
        assert_eq!(i.ip, "10.1.10.12");
        assert_eq!(i.port, 8080);
        assert_eq!(i.cluster, "DEFAULT");
        // The service check warns: the Warning weight applies, and it stays healthy.
        assert_eq!(i.weight, 1.0);
        assert!(i.healthy);
        assert!(i.enabled);
        assert_eq!(i.source_id, "node-a/order-service-8080");
        let m = &i.metadata;
        assert_eq!(m["zone"], "az1");
        assert_eq!(m["version"], "1.4.2");
        assert_eq!(m["secure"], "false");
        assert_eq!(m["consul.node"], "node-a");
        assert_eq!(m["consul.datacenter"], "dc1");
        assert_eq!(m["consul.serviceId"], "order-service-8080");
        assert_eq!(m["consul.tags"], "secure=false,v1");
    }

    #[test]
    fn address_falls_back_to_node_and_tags_fill_meta() {
        let json = r#"[{"Node": {"Node": "n1", "Address": "10.0.0.9"},
            "Service": {"ID": "a-1", "Service": "a", "Address": "", "Port": 81,
                        "Tags": ["zone=z9", "plain", "=x"], "Meta": null, "Weights": null},
            "Checks": null}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let i = &map_entries(&entries).instances[0];
        assert_eq!(i.ip, "10.0.0.9");
        assert_eq!(i.weight, 1.0, "default weight");
        assert_eq!(i.metadata["zone"], "z9");
        assert!(!i.metadata.contains_key(""));
        assert!(!i.metadata.contains_key("consul.datacenter"));
    }

    #[test]
    fn proxies_and_portless_entries_are_skipped() {
        let json = r#"[
            {"Node": {"Node": "n1", "Address": "10.0.0.9"},
             "Service": {"ID": "web-proxy", "Service": "web-sidecar-proxy", "Port": 21000,
                         "Kind": "connect-proxy"}, "Checks": []}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let mapped = map_entries(&entries);
        assert!(mapped.proxy_only && mapped.instances.is_empty());

        let json = r#"[{"Node": {"Node": "n1", "Address": "10.0.0.9"},
            "Service": {"ID": "dns", "Service": "dns", "Port": 0}, "Checks": []}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let mapped = map_entries(&entries);
        assert!(!mapped.proxy_only && mapped.instances.is_empty());
        assert!(!map_entries(&[]).proxy_only);
    }

    #[test]
    fn checks_aggregate() {
        let h = |checks: &[Check]| health(checks);
        assert_eq!(h(&[]).worst, Status::Passing);
        let warn = h(&[
            check("serfHealth", "passing"),
            check("service:a", "warning"),
        ]);
        assert_eq!(warn.worst, Status::Warning);
        let crit = h(&[
            check("serfHealth", "critical"),
            check("service:a", "warning"),
        ]);
        assert_eq!(crit.worst, Status::Critical);
        let maint = h(&[
            check("_service_maintenance:a", "critical"),
            check("service:a", "passing"),
        ]);
        assert!(maint.maintenance);
        assert_eq!(
            maint.worst,
            Status::Passing,
            "maintenance does not count as critical"
        );
        assert!(h(&[check("_node_maintenance", "critical")]).maintenance);
        assert_eq!(h(&[check("x", "bogus")]).worst, Status::Critical);
    }

    #[test]
    fn critical_and_maintenance_map_to_health_and_enabled() {
        let entry = |checks: Vec<Check>| HealthEntry {
            node: Some(NodeInfo {
                node: Some("n".into()),
                address: Some("10.0.0.1".into()),
                datacenter: None,
            }),
            service: Some(ServiceInfo {
                id: Some("s-1".into()),
                service: Some("s".into()),
                port: Some(80),
                weights: Some(Weights {
                    passing: Some(7.0),
                    warning: Some(2.0),
                }),
                ..ServiceInfo::default()
            }),
            checks: Some(checks),
        };
        let map = |e: HealthEntry| map_entries(&[e]).instances.remove(0);
        let critical = map(entry(vec![check("service:s-1", "critical")]));
        assert!(!critical.healthy && critical.enabled);
        assert_eq!(critical.weight, 7.0);
        let maint = map(entry(vec![check("_service_maintenance:s-1", "critical")]));
        assert!(maint.healthy && !maint.enabled);
        let warning = map(entry(vec![check("service:s-1", "warning")]));
        assert_eq!(warning.weight, 2.0);
    }

    #[test]
    fn index_rules() {
        assert_eq!(next_index(0, 4711), 4711);
        assert_eq!(next_index(4711, 4711), 4711);
        assert_eq!(next_index(4711, 12), 0, "backwards: start over");
        assert_eq!(next_index(0, 0), 1, "never below 1");
        assert_eq!(
            next_index(1, 0),
            0,
            "backwards wins, then the floor applies next time"
        );
        assert_eq!(next_index(0, next_index(1, 0)), 1);
    }

    #[test]
    fn bucket_allows_a_burst_then_one_per_refill() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), LOOP_REFILL);
        // After sleeping that off, the next one waits a full interval again.
        assert_eq!(b.take(t0 + LOOP_REFILL), LOOP_REFILL);
        // A quiet spell refills the burst, no further.
        let later = t0 + LOOP_REFILL * 10;
        assert_eq!(b.take(later), Duration::ZERO);
        assert_eq!(b.take(later), Duration::ZERO);
        assert!(b.take(later) > Duration::ZERO);
    }

    #[test]
    fn watch_events_fold_into_changes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let url: SourceUrl = "consul://127.0.0.1:1".parse().unwrap();
            let api = Api::new(&url).unwrap();
            let mut watch = Watch::start(
                api,
                Filter::all(),
                (1, BTreeSet::from(["a".to_string()])),
                vec![("a".into(), 1, Some(Vec::new()))],
            );
            let mut changes = Services::new();
            // Service `a` vanished from the catalog: reported empty.
            let flow = watch.apply(
                Event::Catalog {
                    names: BTreeSet::new(),
                    partial: false,
                },
                &mut changes,
            );
            assert!(matches!(flow, Ok(Flow::Continue)));
            assert_eq!(changes.get(&ServiceName::plain("a")), Some(&Vec::new()));
            // A late answer of its stopped task is ignored.
            changes.clear();
            let late = Event::Instances {
                service: "a".into(),
                instances: Vec::new(),
                partial: false,
            };
            assert!(matches!(
                watch.apply(late, &mut changes),
                Ok(Flow::Continue)
            ));
            assert!(changes.is_empty());
            // A filtered answer means: list again.
            let filtered = Event::Catalog {
                names: BTreeSet::new(),
                partial: true,
            };
            assert!(matches!(
                watch.apply(filtered, &mut changes),
                Ok(Flow::Resync)
            ));
        });
    }
}
