//! Services: the key that names one, its stored settings, and the immutable view of its
//! instances that readers load without locking.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::instance::{ClusterName, Instance, Metadata};
use super::instances::Instances;

/// Names a service: namespace, group and service name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceKey {
    /// Namespace id (`public` by default).
    pub namespace: Arc<str>,
    /// Group (`DEFAULT_GROUP` by default).
    pub group: Arc<str>,
    /// Service name without the group.
    pub name: Arc<str>,
}

impl ServiceKey {
    /// A key from its three parts.
    pub fn new(namespace: &str, group: &str, name: &str) -> Self {
        Self {
            namespace: namespace.into(),
            group: group.into(),
            name: name.into(),
        }
    }

    /// The name as Nacos writes it on the wire: `group@@service`.
    pub fn grouped(&self) -> String {
        grouped(&self.group, &self.name)
    }
}

/// `group@@name`, the name Nacos uses on the wire and services are kept under.
pub fn grouped(group: &str, name: &str) -> String {
    let mut out = String::with_capacity(group.len() + 2 + name.len());
    write_grouped(&mut out, group, name);
    out
}

/// Appends `group@@name` to `out`. Not `format!`: this runs on every query, and the
/// formatting machinery costs more than the copy.
pub fn write_grouped(out: &mut String, group: &str, name: &str) {
    out.push_str(group);
    out.push_str("@@");
    out.push_str(name);
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@@{}", self.namespace, self.group, self.name)
    }
}

/// How persistent instances of a cluster are checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum HealthChecker {
    /// Connect to the port.
    #[serde(rename = "TCP")]
    Tcp,
    /// `GET path` and expect a status code.
    #[serde(rename = "HTTP")]
    Http {
        /// Request path.
        #[serde(default)]
        path: String,
        /// Extra headers, `Name:value` separated by `|`.
        #[serde(default)]
        headers: String,
        /// The status code that means healthy.
        #[serde(default = "default_expected_code", rename = "expectedResponseCode")]
        expected_code: u16,
    },
    /// No checking: health is set through the API.
    #[serde(rename = "NONE")]
    None,
}

fn default_expected_code() -> u16 {
    200
}

/// Settings of one cluster of a service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterSettings {
    /// How persistent instances are checked.
    pub health_checker: HealthChecker,
    /// Port to check when `use_instance_port` is false.
    pub check_port: u16,
    /// Check the instance's own port.
    pub use_instance_port: bool,
    /// Free-form cluster metadata.
    pub metadata: Metadata,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            health_checker: HealthChecker::Tcp,
            check_port: 80,
            use_instance_port: true,
            metadata: Metadata::new(),
        }
    }
}

/// A service selector, as Nacos stores it: `none`, `label` (Nacos' CMDB labels, kept
/// for compatibility and not applied), or roster's `metadata` (a label selector over
/// instance metadata, applied to queries that give none).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Selector {
    /// `none`, `label` or `metadata`.
    pub kind: String,
    /// The expression.
    pub expression: String,
}

/// The selector kind roster applies to instance queries.
pub const METADATA_SELECTOR: &str = "metadata";

/// Settings an operator stored for a service (through Raft).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceSettings {
    /// When healthy/total <= this, queries return every instance. Negative: off.
    pub protect_threshold: f64,
    /// Free-form service metadata.
    pub metadata: Metadata,
    /// The stored selector.
    pub selector: Selector,
    /// Per-cluster settings.
    pub clusters: BTreeMap<String, ClusterSettings>,
    /// The instance metadata key that names an instance's lane (default `lane`).
    #[serde(default)]
    pub lane_key: Option<String>,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            protect_threshold: 0.0,
            metadata: Metadata::new(),
            selector: Selector {
                kind: "none".into(),
                expression: String::new(),
            },
            clusters: BTreeMap::new(),
            lane_key: None,
        }
    }
}

/// Everything a reader sees of a service at one moment. Never mutated once published.
#[derive(Clone, Debug)]
pub struct ServiceView {
    /// Stored settings; `None` for a service that only exists because of registrations.
    pub settings: Option<Arc<ServiceSettings>>,
    /// Instances by `ip:port`.
    pub instances: Instances,
    /// Bumped on every change.
    pub revision: u64,
    /// Wall-clock milliseconds of the last change.
    pub modified_ms: u64,
    /// The serialized answer to the plain instance-list query (no clusters, selector,
    /// lanes or `healthyOnly`), made by the first reader of this view.
    pub list_cache: ListCache,
}

/// A per-view cache of a serialized list answer, split around `lastRefTime` (the one
/// field that changes per request). Cloning a view for a change yields an empty cache,
/// so a cached answer never outlives the view it was made from.
#[derive(Debug, Default)]
pub struct ListCache(std::sync::OnceLock<ListParts>);

/// A list answer split around its `lastRefTime` value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListParts {
    /// Up to the value: `{..."hosts":[...],"lastRefTime":`.
    pub head: bytes::Bytes,
    /// After it: `,"checksum":...}`.
    pub tail: bytes::Bytes,
    /// Where `"hosts":` starts in `head` (gRPC answers copy the head from there).
    pub hosts_at: usize,
}

/// Bytes of list bodies every [`ListCache`] holds together.
static LIST_CACHE_HELD: AtomicUsize = AtomicUsize::new(0);
/// Most bytes of list bodies kept ([`set_list_cache_budget`]).
static LIST_CACHE_BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_LIST_CACHE_BUDGET);
/// The default budget of cached list bodies: 64 MiB.
pub const DEFAULT_LIST_CACHE_BUDGET: usize = 64 << 20;

/// Sets the most bytes of list bodies the node keeps cached (`--list-cache-mib`). A
/// body over the budget is served and not kept: with instances that carry metadata a
/// body is as large as the instances themselves (~900 bytes of JSON per Dubbo-shaped
/// instance), so an unbounded cache doubled a node's memory once every service had
/// been listed.
pub fn set_list_cache_budget(bytes: usize) {
    LIST_CACHE_BUDGET.store(bytes, Ordering::Relaxed);
}

/// Bytes of list bodies cached now.
pub fn list_cache_held() -> usize {
    LIST_CACHE_HELD.load(Ordering::Relaxed)
}

impl Clone for ListCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Drop for ListCache {
    fn drop(&mut self) {
        if let Some(parts) = self.0.get() {
            LIST_CACHE_HELD.fetch_sub(parts.head.len() + parts.tail.len(), Ordering::Relaxed);
        }
    }
}

impl ListCache {
    /// The answer's parts before and after the `lastRefTime` value: the cached ones, or
    /// made by `make` and kept if the node's budget allows.
    pub fn get_or_make(&self, make: impl FnOnce() -> ListParts) -> ListParts {
        if let Some(parts) = self.0.get() {
            return parts.clone();
        }
        let parts = make();
        let size = parts.head.len() + parts.tail.len();
        let held = LIST_CACHE_HELD.load(Ordering::Relaxed);
        // A reader that lost the race to another has its parts served, not kept.
        if held + size <= LIST_CACHE_BUDGET.load(Ordering::Relaxed)
            && self.0.set(parts.clone()).is_ok()
        {
            LIST_CACHE_HELD.fetch_add(size, Ordering::Relaxed);
        }
        parts
    }
}

impl ServiceView {
    /// Stored settings, or the defaults.
    pub fn settings_or_default(&self) -> Arc<ServiceSettings> {
        match &self.settings {
            Some(s) => s.clone(),
            None => DEFAULT_SETTINGS.clone(),
        }
    }

    /// Whether the view holds ephemeral instances (`Some(true)`), persistent ones
    /// (`Some(false)`), or none.
    pub fn kind(&self) -> Option<bool> {
        self.instances.values().next().map(|i| i.ephemeral)
    }

    /// Names of the clusters that hold instances, in order.
    pub fn cluster_names(&self) -> Vec<ClusterName> {
        let mut names: Vec<ClusterName> =
            self.instances.values().map(|i| i.cluster.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// Number of healthy instances.
    pub fn healthy_count(&self) -> usize {
        self.instances.values().filter(|i| i.healthy).count()
    }
}

static DEFAULT_SETTINGS: LazyLock<Arc<ServiceSettings>> =
    LazyLock::new(|| Arc::new(ServiceSettings::default()));

/// A service: its key, its current state, and the view readers load.
///
/// Writers change the current state (`draft`) in place, serialized on its lock, and
/// mark it unpublished; the first reader after a change publishes a copy of it as the
/// new view. A run of writes with no read in between thus costs no copy at all (a copy
/// per write was a third of a registration's registry time, and most of the garbage),
/// and a copy shares every chunk of instances the writes since the last one did not
/// touch. Readers load the view without locking while nothing is unpublished.
#[derive(Debug)]
pub struct Service {
    /// The service's key.
    pub key: Arc<ServiceKey>,
    /// `group@@name`, kept to answer queries without formatting.
    pub grouped: Arc<str>,
    /// The last published view.
    view: ArcSwap<ServiceView>,
    /// The current state; its lock serializes writers and publishers. Its list cache
    /// stays empty (only published views are read).
    draft: Mutex<ServiceView>,
    /// Whether `draft` holds changes `view` does not show. Set by a writer after its
    /// change, cleared by a publisher after its store, both under the `draft` lock.
    unpublished: AtomicBool,
    /// Set (under `draft`) when the service is dropped from its namespace; a writer that
    /// finds it set must look the service up again.
    removed: AtomicBool,
    /// Wall-clock ms before which the expiry sweep need not look at this service: the
    /// earliest deadline of its ephemeral instances when it was last swept (beats only
    /// move deadlines later), or earlier if a writer added one since.
    next_check_ms: AtomicU64,
}

impl Service {
    /// An empty service.
    pub fn new(key: ServiceKey, now_ms: u64) -> Self {
        let grouped = Arc::from(key.grouped());
        let empty = ServiceView {
            list_cache: ListCache::default(),
            settings: None,
            instances: Instances::new(),
            revision: 0,
            modified_ms: now_ms,
        };
        Self {
            key: Arc::new(key),
            grouped,
            view: ArcSwap::from_pointee(empty.clone()),
            draft: Mutex::new(empty),
            unpublished: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            next_check_ms: AtomicU64::new(0),
        }
    }

    /// The current view: every change that returned before this call is in it.
    pub fn view(&self) -> Arc<ServiceView> {
        if self.unpublished.load(Ordering::Acquire) {
            self.publish();
        }
        self.view.load_full()
    }

    /// Runs `f` on the current state, changes not yet published included, under the
    /// writer lock and without publishing it. For the node's own replication reads
    /// (building a client's state for its peers): through [`Service::view`] each such
    /// read after a change published a copy, and the next write to the service then
    /// copied its chunk of instances again — on three nodes, a chunk copy per
    /// replicated registration.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&ServiceView) -> R) -> R {
        f(&self.draft.lock())
    }

    /// Publishes the current state, unless another reader just did.
    #[cold]
    fn publish(&self) {
        let mut draft = self.draft.lock();
        if !self.unpublished.load(Ordering::Acquire) {
            return;
        }
        let replaced = draft.instances.take_replaced();
        let next = Arc::new(ServiceView::clone(&draft));
        self.view.store(next.clone());
        self.unpublished.store(false, Ordering::Release);
        // A beat may have stored into a version a writer replaced after the writer copied
        // its clock and before this publication: carry it over now, still under the lock
        // (a writer replacing the new version meanwhile would copy its clock too early).
        // A beat that lands later finds the view changed and stores again: see
        // `Registry::beat`.
        for old in replaced {
            let same_client = |new: &&Arc<Instance>| new.client_id() == old.client_id();
            if let Some(new) = next.instances.get(&old.address).filter(same_client) {
                if let (Some(from), Some(to)) = (old.clock(), new.clock()) {
                    to.beat(from.last_beat_ms());
                }
            }
        }
    }

    /// Runs `f` on the current state with the writer lock held. `f` must answer
    /// `Changed::Yes` if it changed anything (the change is then counted and published
    /// to the next reader), and may only answer `Changed::No` if it changed nothing.
    /// Returns `None` if the service was removed.
    pub(crate) fn update<R>(
        &self,
        now_ms: u64,
        f: impl FnOnce(&mut ServiceView) -> (Changed, R),
    ) -> Option<(Changed, R)> {
        let mut draft = self.draft.lock();
        if self.removed.load(Ordering::Acquire) {
            return None;
        }
        let (changed, result) = f(&mut draft);
        if changed == Changed::Yes {
            draft.revision += 1;
            draft.modified_ms = now_ms;
            self.unpublished.store(true, Ordering::Release);
        }
        Some((changed, result))
    }

    /// Whether the expiry sweep is due to look at this service at `now_ms`; if so, it
    /// must report what it found through [`Service::swept`].
    pub(crate) fn expiry_due(&self, now_ms: u64) -> bool {
        // Until the sweep reports, only a writer's deadline brings it back; one racing
        // this exchange is not overwritten.
        let mut current = self.next_check_ms.load(Ordering::Acquire);
        loop {
            if current > now_ms {
                return false;
            }
            match self.next_check_ms.compare_exchange(
                current,
                u64::MAX,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Brings the sweep's next look forward to `at_ms` at the latest: writers call it for
    /// every instance with a beat clock they add or whose timing they change.
    pub(crate) fn check_by(&self, at_ms: u64) {
        self.next_check_ms.fetch_min(at_ms, Ordering::AcqRel);
    }

    /// Records the earliest deadline a sweep found; an earlier one a writer asked for
    /// meanwhile ([`Service::check_by`]) wins.
    pub(crate) fn swept(&self, next_check_ms: u64) {
        self.next_check_ms
            .fetch_min(next_check_ms, Ordering::AcqRel);
    }

    /// Marks the service removed if `may_remove` approves its current state, with the
    /// writer lock held so that no registration slips in between.
    pub(crate) fn retire(&self, may_remove: impl FnOnce(&ServiceView) -> bool) -> bool {
        let draft = self.draft.lock();
        if self.removed.load(Ordering::Acquire) || !may_remove(&draft) {
            return false;
        }
        self.removed.store(true, Ordering::Release);
        true
    }
}

/// Whether an update changed the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    /// Publish the new view and notify subscribers.
    Yes,
    /// Keep the old view.
    No,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_body_is_made_once_per_version_within_the_budget() {
        // The unit tests never lower the budget (it is the node's, shared by every test).
        let cache = ListCache::default();
        let parts = cache.get_or_make(|| ListParts {
            head: bytes::Bytes::from_static(b"{\"a\":"),
            tail: "}".into(),
            hosts_at: 0,
        });
        let again = cache.get_or_make(|| panic!("kept: not made again"));
        assert_eq!(parts, again);
        assert!(
            list_cache_held() >= 6,
            "counted while kept: {}",
            list_cache_held()
        );
        // A copy (a new version) starts empty.
        let copy = cache.clone();
        let fresh = ListParts {
            head: "x".into(),
            tail: "y".into(),
            hosts_at: 0,
        };
        assert_eq!(copy.get_or_make(|| fresh.clone()), fresh);
    }
}
