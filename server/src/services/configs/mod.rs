//! The Nacos configuration store: configuration items keyed by namespace, group and
//! dataId, the versions each went through, and the changes listeners wait for.
//!
//! Written only by the Raft state machine (`store::machine`), through [`Configs::publish`]
//! and [`Configs::remove`], so every node holds the same items and history; read
//! locally by every face. Everything an apply needs comes inside the command (time,
//! who, the history retention), so applying is deterministic.
//!
//! [`validate`] holds Nacos' rules for dataIds, groups and content; [`listen`] the
//! listener wire format (`Listening-Configs`) and the md5 comparison every listener
//! (HTTP long poll, gRPC) makes; [`writes`] the write path every face takes (Raft);
//! [`apply`] how the state machine applies the configuration commands. The store's
//! reads and writes by concern: this file the items, their publication and removal,
//! snapshots and change notices; [`history`] the versions kept of each item and their
//! pruning; [`search`] the console's search; [`imports`] the items sync tasks own.

pub mod apply;
pub mod archive;
pub mod gray;
pub mod history;
pub mod imports;
pub mod listen;
pub mod listeners;
pub mod prune;
pub mod search;
pub mod validate;
pub mod writes;

use history::record;
pub use history::{Op, Version};
pub use imports::Imported;
pub use search::{Page, Search};

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use md5::{Digest, Md5};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Notify};

use roster_registry::namespace::PUBLIC_NAMESPACE;

/// A configuration item's identity. `namespace` is a namespace id (`public` for Nacos'
/// empty tenant).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConfigKey {
    /// Namespace id (Nacos' tenant; `public` for the empty one).
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Data id.
    pub data_id: String,
}

impl ConfigKey {
    /// The key of `data_id` in `group` of the namespace a client calls `tenant` (empty or
    /// absent: `public`).
    pub fn new(tenant: &str, group: &str, data_id: &str) -> Self {
        Self {
            namespace: namespace_of(tenant).to_string(),
            group: group.to_string(),
            data_id: data_id.to_string(),
        }
    }

    /// The tenant as Nacos clients spell it: empty for `public`.
    pub fn tenant(&self) -> &str {
        tenant_of(&self.namespace)
    }
}

/// The namespace id of a Nacos tenant: `public` for the empty one.
pub fn namespace_of(tenant: &str) -> &str {
    if tenant.is_empty() {
        PUBLIC_NAMESPACE
    } else {
        tenant
    }
}

/// The Nacos tenant of a namespace id: empty for `public`.
pub fn tenant_of(namespace: &str) -> &str {
    if namespace == PUBLIC_NAMESPACE {
        ""
    } else {
        namespace
    }
}

/// The `casMd5` of a publisher that saw no item: Dubbo 3 creates an interface's mapping
/// with it (`NacosMetadataReport.getConfigItem`'s ticket for an absent item). It matches
/// no stored md5, and a compare-and-set with it inserts the item when there is none.
pub const CAS_ABSENT: &str = "0";

/// The md5 of `content`, in lower-case hex, as Nacos computes it (over the UTF-8 bytes).
pub fn md5_hex(content: &str) -> String {
    let digest = Md5::digest(content.as_bytes());
    let mut out = String::with_capacity(32);
    for b in digest {
        use std::fmt::Write;
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// A stored configuration item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigItem {
    /// Its id: the history id of the version that created it.
    pub id: u64,
    /// The content.
    pub content: Arc<str>,
    /// md5 of the content.
    pub md5: String,
    /// Content type (`text`, `yaml`, `properties`, `json`, `xml`, `html`, ...).
    pub r#type: String,
    /// The application it belongs to.
    pub app_name: String,
    /// Description.
    pub desc: String,
    /// Tags, comma-separated, as given.
    pub tags: String,
    /// When it was created, ms since the epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub modified_ms: u64,
    /// Who created it.
    pub created_by: String,
    /// Who last changed it.
    pub modified_by: String,
    /// Where the last change came from.
    pub src_ip: String,
    /// The sync task that imported it and keeps it in step with its source; `None`
    /// for items published through the API (a publication through the API takes an
    /// item from its task).
    #[serde(default)]
    pub owner: Option<String>,
}

/// How many versions of a configuration item are kept, and for how long. Carried in
/// each command (the proposer's settings), so every node prunes alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Versions older than this are dropped, ms.
    pub max_age_ms: u64,
    /// At most this many versions per item.
    pub max_versions: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age_ms: 30 * 24 * 3600 * 1000,
            max_versions: 100,
        }
    }
}

/// The configuration API's settings (`--config-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Largest content accepted, bytes.
    pub max_content_bytes: usize,
    /// Most items one listener (a long poll, a gRPC connection) may listen to.
    pub max_listeners: usize,
    /// History retention.
    pub retention: Retention,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_content_bytes: 1024 * 1024,
            max_listeners: 10_000,
            retention: Retention::default(),
        }
    }
}

/// A publication: a new item or a new version of one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Publish {
    /// What is published.
    pub key: ConfigKey,
    /// The content.
    pub content: String,
    /// Content type; absent: the stored one (a new item: `text`).
    pub r#type: Option<String>,
    /// Application; absent: the stored one.
    pub app_name: Option<String>,
    /// Description; absent: the stored one.
    pub desc: Option<String>,
    /// Tags; absent: the stored ones.
    pub tags: Option<String>,
    /// Compare-and-set: published only when the stored md5 is this one. An item that does
    /// not exist has none, so any `cas_md5` is refused for it (Nacos inserts), except
    /// [`CAS_ABSENT`], the md5 of no item.
    pub cas_md5: Option<String>,
    /// Who publishes.
    pub by: String,
    /// From where.
    pub src_ip: String,
    /// History retention.
    pub retention: Retention,
}

/// Why a publication was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ConfigRejection {
    /// The stored md5 is not the one a compare-and-set expected.
    #[error("Cas publish fail, server md5 may have changed.")]
    CasMismatch,
    /// The item holds as many gray versions as it may (`gray::MAX_GRAYS`).
    #[error("gray config version is over max count: {}", gray::MAX_GRAYS)]
    TooManyGrays,
}

#[derive(Default)]
struct State {
    items: BTreeMap<ConfigKey, ConfigItem>,
    /// Oldest first.
    history: HashMap<ConfigKey, VecDeque<Version>>,
    next_id: u64,
    /// Gray versions, by item, in the order they are matched.
    grays: BTreeMap<ConfigKey, Vec<gray::Gray>>,
}

/// What a snapshot holds of the store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigData {
    /// The items.
    pub items: Vec<(ConfigKey, ConfigItem)>,
    /// Each item's versions, oldest first (including deleted items' versions).
    pub history: Vec<(ConfigKey, Vec<Version>)>,
    /// The next history id.
    pub next_id: u64,
    /// Each item's gray versions (absent from snapshots of builds before them).
    #[serde(default)]
    pub grays: Vec<(ConfigKey, Vec<gray::Gray>)>,
}

/// The configuration store of a node. Cheap to clone (one reference count).
#[derive(Clone, Default)]
pub struct Configs(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: RwLock<State>,
    changes: Changes,
}

/// Changed keys, for the one consumer that pushes them (gRPC listeners), and a sequence
/// for any number of waiters (HTTP long polls), who compare their md5s when it moves.
struct Changes {
    pending: Mutex<BTreeSet<ConfigKey>>,
    notify: Notify,
    seq: watch::Sender<u64>,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            pending: Mutex::default(),
            notify: Notify::new(),
            seq: watch::channel(0).0,
        }
    }
}

impl Changes {
    fn mark(&self, keys: impl IntoIterator<Item = ConfigKey>) {
        self.pending.lock().extend(keys);
        self.notify.notify_one();
        self.seq.send_modify(|s| *s += 1);
    }
}

impl Configs {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The item `key`, if stored.
    pub fn get(&self, key: &ConfigKey) -> Option<ConfigItem> {
        self.0.state.read().items.get(key).cloned()
    }

    /// What `f` makes of item `key`, read in place (no copy of the item), if stored.
    pub fn with<R>(&self, key: &ConfigKey, f: impl FnOnce(&ConfigItem) -> R) -> Option<R> {
        self.0.state.read().items.get(key).map(f)
    }

    /// The md5 of item `key`, if stored.
    pub fn md5(&self, key: &ConfigKey) -> Option<String> {
        self.0.state.read().items.get(key).map(|i| i.md5.clone())
    }

    /// Whether a listener holding `md5` of `key` (empty: it holds nothing) is behind.
    pub fn is_changed(&self, key: &ConfigKey, md5: &str) -> bool {
        let state = self.0.state.read();
        match state.items.get(key) {
            Some(item) => item.md5 != md5,
            None => !md5.is_empty(),
        }
    }

    /// How many items there are.
    pub fn len(&self) -> usize {
        self.0.state.read().items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items namespace `namespace` holds.
    pub fn count_in(&self, namespace: &str) -> usize {
        self.0
            .state
            .read()
            .items
            .keys()
            .filter(|k| k.namespace == namespace)
            .count()
    }

    /// The keys of the items namespace `namespace` holds, in key order (what a fuzzy
    /// watch of it matches against).
    pub fn keys_in(&self, namespace: &str) -> Vec<ConfigKey> {
        let first = ConfigKey {
            namespace: namespace.to_string(),
            group: String::new(),
            data_id: String::new(),
        };
        let state = self.0.state.read();
        state
            .items
            .range(first..)
            .map(|(k, _)| k)
            .take_while(|k| k.namespace == namespace)
            .cloned()
            .collect()
    }

    /// Publishes (applied by the state machine). Published through the API, an item
    /// belongs to no sync task from then on.
    pub fn publish(&self, p: &Publish, at_ms: u64) -> Result<(), ConfigRejection> {
        {
            let mut state = self.0.state.write();
            if let Some(cas) = &p.cas_md5 {
                let holds = match state.items.get(&p.key) {
                    Some(item) => &item.md5 == cas,
                    None => cas == CAS_ABSENT,
                };
                if !holds {
                    return Err(ConfigRejection::CasMismatch);
                }
            }
            put(&mut state, p, None, at_ms);
        }
        self.0.changes.mark([p.key.clone()]);
        Ok(())
    }

    /// Removes `key` and its gray versions (applied by the state machine); removing
    /// what is not there changes nothing. Returns whether anything was there.
    pub fn remove(
        &self,
        key: &ConfigKey,
        by: &str,
        src_ip: &str,
        retention: Retention,
        at_ms: u64,
    ) -> bool {
        let removed = {
            let mut state = self.0.state.write();
            let grays = gray::remove_all(&mut state, key, by, src_ip, retention, at_ms);
            take(&mut state, key, by, src_ip, retention, at_ms) | grays
        };
        if removed {
            self.0.changes.mark([key.clone()]);
        }
        removed
    }

    /// The store's content, for a snapshot.
    pub fn data(&self) -> ConfigData {
        let state = self.0.state.read();
        let mut history: Vec<(ConfigKey, Vec<Version>)> = state
            .history
            .iter()
            .map(|(k, h)| (k.clone(), h.iter().cloned().collect()))
            .collect();
        history.sort_by(|a, b| a.0.cmp(&b.0));
        ConfigData {
            items: state
                .items
                .iter()
                .map(|(k, i)| (k.clone(), i.clone()))
                .collect(),
            history,
            next_id: state.next_id,
            grays: state
                .grays
                .iter()
                .map(|(k, g)| (k.clone(), g.clone()))
                .collect(),
        }
    }

    /// Replaces the store's content with a snapshot's; every key held before or after
    /// counts as changed.
    pub fn restore(&self, data: &ConfigData) {
        let mut touched: BTreeSet<ConfigKey> = BTreeSet::new();
        {
            let mut state = self.0.state.write();
            touched.extend(state.items.keys().cloned());
            state.items = data.items.iter().cloned().collect();
            state.history = data
                .history
                .iter()
                .map(|(k, h)| (k.clone(), h.iter().cloned().collect()))
                .collect();
            state.next_id = data.next_id;
            touched.extend(state.grays.keys().cloned());
            state.grays = data.grays.iter().cloned().collect();
            touched.extend(state.items.keys().cloned());
            touched.extend(state.grays.keys().cloned());
        }
        self.0.changes.mark(touched);
    }

    /// The keys changed since the last call (for the one consumer that pushes them).
    pub fn drain_changes(&self) -> Vec<ConfigKey> {
        std::mem::take(&mut *self.0.changes.pending.lock())
            .into_iter()
            .collect()
    }

    /// Waits until a change is marked after the last [`Configs::drain_changes`].
    pub async fn changed(&self) {
        let notified = self.0.changes.notify.notified();
        if !self.0.changes.pending.lock().is_empty() {
            return;
        }
        notified.await;
    }

    /// A receiver whose value moves at every change: waiters compare their md5s again.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.0.changes.seq.subscribe()
    }
}

/// Writes `p` into `state` (its compare-and-set decided already), owned by `owner`,
/// and records the version.
fn put(state: &mut State, p: &Publish, owner: Option<String>, at_ms: u64) {
    let existing = state.items.get(&p.key);
    let md5 = md5_hex(&p.content);
    let content: Arc<str> = Arc::from(p.content.as_str());
    let pick = |given: &Option<String>, stored: Option<&String>, default: &str| {
        given
            .clone()
            .or_else(|| stored.cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let r#type = pick(&p.r#type, existing.map(|i| &i.r#type), "text");
    let app_name = pick(&p.app_name, existing.map(|i| &i.app_name), "");
    let desc = pick(&p.desc, existing.map(|i| &i.desc), "");
    let tags = pick(&p.tags, existing.map(|i| &i.tags), "");
    let id = state.next_id + 1;
    let (op, item) = match existing {
        Some(old) => (
            Op::Update,
            ConfigItem {
                content: content.clone(),
                md5: md5.clone(),
                r#type: r#type.clone(),
                app_name: app_name.clone(),
                desc,
                tags,
                modified_ms: at_ms,
                modified_by: p.by.clone(),
                src_ip: p.src_ip.clone(),
                owner,
                ..old.clone()
            },
        ),
        None => (
            Op::Insert,
            ConfigItem {
                id,
                content: content.clone(),
                md5: md5.clone(),
                r#type: r#type.clone(),
                app_name: app_name.clone(),
                desc,
                tags,
                created_ms: at_ms,
                modified_ms: at_ms,
                created_by: p.by.clone(),
                modified_by: p.by.clone(),
                src_ip: p.src_ip.clone(),
                owner,
            },
        ),
    };
    state.next_id = id;
    state.items.insert(p.key.clone(), item);
    let version = Version {
        id,
        op,
        content,
        md5,
        r#type,
        app_name,
        by: p.by.clone(),
        src_ip: p.src_ip.clone(),
        at_ms,
        gray: None,
    };
    record(state, &p.key, version, p.retention, at_ms);
}

/// Removes `key` from `state`, recording the deleted version; false if absent.
fn take(
    state: &mut State,
    key: &ConfigKey,
    by: &str,
    src_ip: &str,
    retention: Retention,
    at_ms: u64,
) -> bool {
    let Some(old) = state.items.remove(key) else {
        return false;
    };
    state.next_id += 1;
    let version = Version {
        id: state.next_id,
        op: Op::Delete,
        content: old.content,
        md5: old.md5,
        r#type: old.r#type,
        app_name: old.app_name,
        by: by.to_string(),
        src_ip: src_ip.to_string(),
        at_ms,
        gray: None,
    };
    record(state, key, version, retention, at_ms);
    true
}

#[cfg(test)]
mod tests;
