//! Prometheus metrics: request counts and latencies per route, the HTTP listener's
//! refusals and body timeouts, registry sizes, beats, expiry, pushes, Raft position,
//! sync task states, the data dir's filesystem and the served certificates' expiry,
//! rendered in the text exposition format. Every metric is described in
//! `docs/metrics.md`; a black-box test holds the two in step.
//!
//! Every label comes from a closed set, because a label value lives as long as the
//! process and each one adds a dozen series: HTTP methods are the seven standard ones
//! or `other`, routes are the endpoints' labels or `unmatched` (`faces::http::Front` picks both),
//! gRPC request types are the known ones or `other`, push outcomes are static, and
//! node labels are cluster members. Before, one anonymous request with an invented
//! 100 kB method added ~1.6 MB to `/metrics` for good.
//!
//! The console's Overview page charts the node's recent figures without a Prometheus:
//! [`faces`] times requests per API face, [`history`] samples every 5 s and keeps the
//! last 15 minutes.

pub mod faces;
pub mod history;
mod scrape;

pub use history::spawn_sampler;
pub use scrape::{task_state_labels, NodeFigures};

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::Method;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry as PromRegistry;
use roster_sync::TaskState;

use crate::services::net::tls::ReloadingCert;
use crate::services::net::HttpListenerCounters;

/// Labels of an HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The matched route pattern, or `unmatched`.
    pub route: String,
    /// HTTP method: one of [`HTTP_METHODS`] or `other`.
    pub method: &'static str,
}

/// The HTTP methods counted under their own name; any other is `other`.
pub const HTTP_METHODS: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];

/// The label of `method`: its name if it is one of [`HTTP_METHODS`], else `other`
/// (CONNECT and TRACE included: no route serves them). A comparison of the method's
/// tag for the standard ones, no allocation.
pub fn http_method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Labels of an HTTP response.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// The matched route pattern, or `unmatched`.
    pub route: String,
    /// HTTP method: one of [`HTTP_METHODS`] or `other`.
    pub method: &'static str,
    /// Status code.
    pub status: u16,
}

/// One thread's handles of the figures of one route, method and status.
struct Handles {
    method: &'static str,
    status: u16,
    latency: Histogram,
    requests: Counter,
}

/// Labels of a per-member figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// Node id.
    pub node: String,
}

/// Labels of a gRPC request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// The request type (`InstanceRequest`, ...), or `other`.
    pub kind: &'static str,
}

/// Labels of a push outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PushLabels {
    /// `sent`, `acked`, `superseded` (UDP only) or `failed`.
    pub outcome: &'static str,
}

/// Labels of a sync task state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskStateLabels {
    /// One of [`TASK_STATES`].
    pub state: &'static str,
}

/// Every sync task state, as the sync API names them: each is exported, at zero too, so
/// an alert on `state="error"` has a series to watch before the first error.
pub const TASK_STATES: [&str; 6] = [
    "pending", "starting", "running", "holding", "error", "paused",
];

/// The label of a task state.
fn task_state_label(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "pending",
        TaskState::Starting => "starting",
        TaskState::Running => "running",
        TaskState::Holding => "holding",
        TaskState::Error => "error",
        TaskState::Paused => "paused",
    }
}

/// Labels of a TLS face's certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// `http`, `grpc` or `peer`.
    pub listener: &'static str,
}

/// Labels of a refused connection.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CapLabels {
    /// The cap that refused it: `total` (`--http-max-connections`) or `per_ip`
    /// (`--http-max-connections-per-ip`).
    pub cap: &'static str,
}

/// What `/metrics` reads from outside the node's state at each scrape, registered once by
/// the wiring (`node`): the data dir, whose filesystem may fill, and the certificates the
/// TLS faces serve, which may expire (read from their reloading holders, so a renewed
/// certificate shows at the next scrape).
#[derive(Default)]
struct Watched {
    data_dir: Option<PathBuf>,
    certificates: Vec<(&'static str, ReloadingCert)>,
}

/// Every metric the node exports.
pub struct Metrics {
    registry: PromRegistry,
    /// Requests by route, method and status.
    pub requests: Family<StatusLabels, Counter>,
    /// Request latency by route and method, seconds.
    pub latency: Family<RouteLabels, Histogram>,
    /// Tells this instance's entries in the per-thread handle cache from another's.
    id: u64,
    /// Heartbeats received.
    pub beats: Counter,
    /// Instances marked unhealthy by beat expiry.
    pub expired_unhealthy: Counter,
    /// Instances removed by beat expiry.
    pub expired_removed: Counter,
    /// UDP pushes by outcome.
    pub pushes: Family<PushLabels, Counter>,
    /// Removals the eviction guard held back.
    pub eviction_held: Counter,
    /// gRPC requests by type.
    pub grpc_requests: Family<GrpcLabels, Counter>,
    /// gRPC pushes by outcome.
    pub grpc_pushes: Family<PushLabels, Counter>,
    /// Open gRPC connections.
    pub grpc_connections: Gauge,
    /// The HTTP listener's refusals and body timeouts.
    pub http_listener: HttpListenerCounters,
    /// Audit lines lost: the audit queue was full, or the file could not be written.
    pub audit_dropped: Counter,
    /// Instance registrations accepted from clients (what counts: `history`).
    pub registrations: Counter,
    /// Instance deregistrations accepted from clients.
    pub deregistrations: Counter,
    /// Request counts and latencies per API face, for the overview.
    pub faces: faces::Faces,
    /// Pushes put on the wire, UDP and gRPC, for the overview (`history::tally_push`).
    pushes_out: AtomicU64,
    /// Pushes with any other outcome than that or `acked`, for the overview.
    push_failures: AtomicU64,
    /// The overview's samples.
    pub history: history::History,
    services: Gauge,
    instances: Gauge,
    healthy_instances: Gauge,
    subscribers: Gauge,
    configs: Gauge,
    config_long_polls: Gauge,
    list_cache_bytes: Gauge,
    raft_term: Gauge,
    raft_is_leader: Gauge,
    raft_last_log_index: Gauge,
    raft_last_applied: Gauge,
    raft_snapshot_index: Gauge,
    distro_clients: Gauge,
    distro_owned: Gauge,
    eviction_engaged: Gauge,
    ready: Gauge,
    members: Gauge,
    members_live: Gauge,
    raft_commit_index: Gauge,
    replication_lag: Family<NodeLabels, Gauge>,
    owned_by: Family<NodeLabels, Gauge>,
    sync_tasks: Family<TaskStateLabels, Gauge>,
    data_dir_size: Gauge,
    data_dir_avail: Gauge,
    certificate_expiry: Family<ListenerLabels, Gauge>,
    /// Guarded for registration and for each render; never held across an await.
    watched: parking_lot::Mutex<Watched>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = PromRegistry::with_prefix("roster");
        let requests = Family::<StatusLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 50 µs .. ~3.3 s
            Histogram::new(exponential_buckets(0.000_05, 3.0, 11))
        });
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency",
            latency.clone(),
        );
        let beats = Counter::default();
        registry.register("beats", "Instance heartbeats received", beats.clone());
        let expired_unhealthy = Counter::default();
        registry.register(
            "expiry_unhealthy",
            "Ephemeral instances marked unhealthy after missing beats",
            expired_unhealthy.clone(),
        );
        let expired_removed = Counter::default();
        registry.register(
            "expiry_removed",
            "Ephemeral instances removed after missing beats",
            expired_removed.clone(),
        );
        let eviction_held = Counter::default();
        registry.register(
            "eviction_held",
            "Removals of silent instances held back by the eviction guard",
            eviction_held.clone(),
        );
        let grpc_requests = Family::<GrpcLabels, Counter>::default();
        registry.register(
            "grpc_requests",
            "gRPC requests by type",
            grpc_requests.clone(),
        );
        let grpc_pushes = Family::<PushLabels, Counter>::default();
        registry.register(
            "grpc_pushes",
            "gRPC pushes to subscribers by outcome",
            grpc_pushes.clone(),
        );
        let grpc_connections = Gauge::default();
        registry.register(
            "grpc_connections",
            "Open gRPC client connections",
            grpc_connections.clone(),
        );
        let http_refused = Family::<CapLabels, Counter>::default();
        registry.register(
            "http_connections_refused",
            "HTTP connections closed at once, by the cap they met",
            http_refused.clone(),
        );
        let http_body_timeouts = Counter::default();
        registry.register(
            "http_body_timeouts",
            "HTTP requests answered 408: their body went --http-body-timeout-secs without a byte",
            http_body_timeouts.clone(),
        );
        // Both caps are exported from the start, at zero, for alerts to watch. One
        // statement each: `get_or_create` holds the family's read lock until the end of
        // its statement, and the second would wait for its write lock for ever.
        let total = http_refused
            .get_or_create(&CapLabels { cap: "total" })
            .clone();
        let per_ip = http_refused
            .get_or_create(&CapLabels { cap: "per_ip" })
            .clone();
        let http_listener = HttpListenerCounters {
            refused: crate::services::net::Refusals { total, per_ip },
            body_timeouts: http_body_timeouts,
        };
        let audit_dropped = Counter::default();
        registry.register(
            "audit_dropped_lines",
            "Audit log lines lost: the writer's queue was full or the file could not be written",
            audit_dropped.clone(),
        );
        let registrations = Counter::default();
        registry.register(
            "registrations",
            "Instance registrations accepted from clients (HTTP and gRPC; replicas not counted)",
            registrations.clone(),
        );
        let deregistrations = Counter::default();
        registry.register(
            "deregistrations",
            "Instance deregistrations accepted from clients (HTTP and gRPC; replicas not counted)",
            deregistrations.clone(),
        );
        let pushes = Family::<PushLabels, Counter>::default();
        registry.register(
            "udp_pushes",
            "UDP pushes to v1 subscribers by outcome",
            pushes.clone(),
        );
        let gauge = |registry: &mut PromRegistry, name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let services = gauge(&mut registry, "services", "Services in every namespace");
        let instances = gauge(&mut registry, "instances", "Instances in every namespace");
        let healthy_instances = gauge(&mut registry, "instances_healthy", "Healthy instances");
        let subscribers = gauge(
            &mut registry,
            "udp_subscribers",
            "Registered UDP push subscribers",
        );
        let configs = gauge(
            &mut registry,
            "configs",
            "Configuration items in every namespace",
        );
        let config_long_polls = gauge(
            &mut registry,
            "config_long_polls",
            "HTTP long polls of configuration listeners held by this node",
        );
        let list_cache_bytes = gauge(
            &mut registry,
            "list_cache_bytes",
            "Bytes of serialized instance lists kept cached (at most --list-cache-mib)",
        );
        let raft_term = gauge(&mut registry, "raft_term", "Current Raft term");
        let raft_is_leader = gauge(&mut registry, "raft_is_leader", "1 if this node leads");
        let raft_last_log_index = gauge(
            &mut registry,
            "raft_last_log_index",
            "Index of the last Raft log entry",
        );
        let raft_last_applied = gauge(
            &mut registry,
            "raft_last_applied",
            "Index of the last applied (committed) entry",
        );
        let raft_snapshot_index = gauge(
            &mut registry,
            "raft_snapshot_index",
            "Index covered by the latest snapshot",
        );
        let distro_clients = gauge(
            &mut registry,
            "distro_clients",
            "Ephemeral clients (instance addresses) known here",
        );
        let distro_owned = gauge(
            &mut registry,
            "distro_clients_owned",
            "Ephemeral clients this node owns",
        );
        let eviction_engaged = gauge(
            &mut registry,
            "eviction_guard_engaged",
            "Namespaces where the eviction guard holds removals",
        );
        let ready = gauge(&mut registry, "ready", "1 once the node serves requests");
        let members = gauge(&mut registry, "cluster_members", "Members of the cluster");
        let members_live = gauge(
            &mut registry,
            "cluster_members_live",
            "Members this node hears from (itself included)",
        );
        let raft_commit_index = gauge(
            &mut registry,
            "raft_commit_index",
            "Commit index (on the leader; 0 elsewhere)",
        );
        let replication_lag = Family::<NodeLabels, Gauge>::default();
        registry.register(
            "raft_replication_lag",
            "Entries each member is behind the leader's log (on the leader)",
            replication_lag.clone(),
        );
        let owned_by = Family::<NodeLabels, Gauge>::default();
        registry.register(
            "distro_clients_owned_by",
            "Ephemeral clients owned by each live member, as this node sees them",
            owned_by.clone(),
        );
        let sync_tasks = Family::<TaskStateLabels, Gauge>::default();
        registry.register(
            "sync_tasks",
            "Sync tasks by the state their runner last reported",
            sync_tasks.clone(),
        );
        let data_dir_size = gauge(
            &mut registry,
            "data_dir_filesystem_size_bytes",
            "Size of the filesystem that holds --data-dir",
        );
        let data_dir_avail = gauge(
            &mut registry,
            "data_dir_filesystem_avail_bytes",
            "Bytes of the --data-dir filesystem that roster may still write",
        );
        let certificate_expiry = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the certificate each TLS listener serves expires (its notAfter), Unix seconds",
            certificate_expiry.clone(),
        );
        static IDS: AtomicU64 = AtomicU64::new(0);
        Self {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            registry,
            sync_tasks,
            data_dir_size,
            data_dir_avail,
            certificate_expiry,
            watched: parking_lot::Mutex::default(),
            ready,
            members,
            members_live,
            raft_commit_index,
            replication_lag,
            owned_by,
            distro_clients,
            distro_owned,
            eviction_engaged,
            requests,
            latency,
            beats,
            expired_unhealthy,
            expired_removed,
            pushes,
            eviction_held,
            grpc_requests,
            grpc_pushes,
            grpc_connections,
            http_listener,
            audit_dropped,
            registrations,
            deregistrations,
            faces: faces::Faces::default(),
            pushes_out: AtomicU64::new(0),
            push_failures: AtomicU64::new(0),
            history: history::History::default(),
            services,
            instances,
            healthy_instances,
            subscribers,
            configs,
            config_long_polls,
            list_cache_bytes,
            raft_term,
            raft_is_leader,
            raft_last_log_index,
            raft_last_applied,
            raft_snapshot_index,
        }
    }

    /// Counts and times one HTTP request. A family's lookup takes the family's lock
    /// (shared by every worker) and hashes the labels, twice per request; instead each
    /// thread keeps the handles it used, by route, and goes to the families only for a
    /// route, method and status it has not counted yet. `route` and `method` must come
    /// from closed sets (see the module's comment).
    pub fn http_request(&self, route: &str, method: &'static str, status: u16, secs: f64) {
        thread_local! {
            static HANDLES: RefCell<(u64, HashMap<String, Vec<Handles>>)> =
                RefCell::new((u64::MAX, HashMap::new()));
        }
        HANDLES.with_borrow_mut(|(owner, cache)| {
            if *owner != self.id {
                // A thread that served another node (tests run several in a process).
                *owner = self.id;
                cache.clear();
            }
            let handles = match cache.get_mut(route) {
                Some(handles) => handles,
                None => cache.entry(route.to_string()).or_default(),
            };
            let found = handles
                .iter()
                .position(|h| h.status == status && h.method == method);
            let h = match found {
                Some(at) => &handles[at],
                None => {
                    let labels = RouteLabels {
                        route: route.to_string(),
                        method,
                    };
                    handles.push(Handles {
                        method,
                        status,
                        latency: self.latency.get_or_create(&labels).clone(),
                        requests: self
                            .requests
                            .get_or_create(&StatusLabels {
                                route: labels.route,
                                method: labels.method,
                                status,
                            })
                            .clone(),
                    });
                    handles.last().expect("just pushed")
                }
            };
            h.latency.observe(secs);
            h.requests.inc();
        });
        if let Some(face) = faces::Face::of_route(route) {
            self.faces
                .observe(face, std::time::Duration::from_secs_f64(secs));
        }
    }

    /// Exports the size and free space of the filesystem holding `dir` from now on.
    pub fn watch_data_dir(&self, dir: &Path) {
        self.watched.lock().data_dir = Some(dir.to_path_buf());
    }

    /// Exports the expiry of the certificate `cert` serves on `listener` (`http`, `grpc`
    /// or `peer`) from now on.
    pub fn watch_certificate(&self, listener: &'static str, cert: ReloadingCert) {
        self.watched.lock().certificates.push((listener, cert));
    }

    /// Counts a push outcome.
    pub fn push(&self, outcome: &'static str) {
        self.pushes.get_or_create(&PushLabels { outcome }).inc();
        self.tally_push(outcome);
    }

    /// Counts an instance write a gRPC client's `op` (`registerInstance`,
    /// `deregisterInstance`) made.
    pub fn instance_write(&self, op: &str) {
        match op {
            "registerInstance" => self.registrations.inc(),
            "deregisterInstance" => self.deregistrations.inc(),
            _ => 0,
        };
    }

    /// Counts a gRPC request of type `kind` (unknown types are counted together).
    pub fn grpc_request(&self, kind: &str) {
        const KNOWN: [&str; 15] = [
            "ServerCheckRequest",
            "HealthCheckRequest",
            "InstanceRequest",
            "BatchInstanceRequest",
            "PersistentInstanceRequest",
            "ServiceQueryRequest",
            "SubscribeServiceRequest",
            "ServiceListRequest",
            "ConnectionSetupRequest",
            "ConfigQueryRequest",
            "ConfigPublishRequest",
            "ConfigRemoveRequest",
            "ConfigBatchListenRequest",
            "NamingFuzzyWatchRequest",
            "ConfigFuzzyWatchRequest",
        ];
        let kind = KNOWN
            .iter()
            .find(|k| **k == kind)
            .copied()
            .unwrap_or("other");
        self.grpc_requests.get_or_create(&GrpcLabels { kind }).inc();
    }

    /// Times a gRPC request until the guard is dropped, for the overview.
    pub fn grpc_timer(&self) -> faces::Timer<'_> {
        self.faces.timer(faces::Face::Grpc)
    }

    /// Counts a gRPC push outcome.
    pub fn grpc_push(&self, outcome: &'static str) {
        self.grpc_pushes
            .get_or_create(&PushLabels { outcome })
            .inc();
        self.tally_push(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_are_a_closed_set() {
        for name in HTTP_METHODS {
            let method = Method::from_bytes(name.as_bytes()).unwrap();
            assert_eq!(http_method_label(&method), name);
        }
        let long = "X".repeat(100_000);
        for invented in ["get", "BREW", "CONNECT", "TRACE", long.as_str()] {
            let method = Method::from_bytes(invented.as_bytes()).unwrap();
            assert_eq!(http_method_label(&method), "other");
        }
    }

    #[test]
    fn grpc_request_types_are_a_closed_set() {
        let m = Metrics::new();
        m.grpc_request("InstanceRequest");
        m.grpc_request(&"Invented".repeat(1_000));
        m.grpc_request("AnotherInvented");
        let mut page = String::new();
        prometheus_client::encoding::text::encode(&mut page, &m.registry).unwrap();
        let kinds: Vec<&str> = page
            .lines()
            .filter(|l| l.starts_with("roster_grpc_requests_total"))
            .collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert!(
            page.contains(r#"roster_grpc_requests_total{kind="other"} 2"#),
            "{page}"
        );
    }

    #[test]
    fn every_task_state_has_its_label_and_series() {
        let states = [
            TaskState::Pending,
            TaskState::Starting,
            TaskState::Running,
            TaskState::Holding,
            TaskState::Error,
            TaskState::Paused,
        ];
        let labels = task_state_labels(states.into_iter());
        assert_eq!(labels, TASK_STATES);
        // The API's names, so that `roster sync list` and the metric agree.
        for (state, label) in states.iter().zip(labels) {
            assert_eq!(serde_json::to_value(state).unwrap(), label);
        }
    }

    #[test]
    fn requests_are_counted_per_node_route_method_and_status() {
        // Two nodes in one thread: the per-thread handles must not mix them.
        let (a, b) = (Metrics::new(), Metrics::new());
        a.http_request("/x", "GET", 200, 0.001);
        b.http_request("/x", "GET", 200, 0.001);
        a.http_request("/x", "GET", 200, 0.001);
        a.http_request("/x", "POST", 404, 0.001);
        a.http_request("/y", "GET", 200, 0.001);
        let count = |m: &Metrics, route: &str, method: &'static str, status| {
            m.requests
                .get_or_create(&StatusLabels {
                    route: route.into(),
                    method,
                    status,
                })
                .get()
        };
        assert_eq!(count(&a, "/x", "GET", 200), 2);
        assert_eq!(count(&b, "/x", "GET", 200), 1);
        assert_eq!(count(&a, "/x", "POST", 404), 1);
        assert_eq!(count(&a, "/y", "GET", 200), 1);
        assert_eq!(count(&b, "/y", "GET", 200), 0);
    }
}
