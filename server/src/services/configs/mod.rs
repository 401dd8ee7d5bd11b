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
//! [`apply`] how the state machine applies the configuration commands.

pub mod apply;
pub mod archive;
pub mod listen;
pub mod listeners;
pub mod prune;
pub mod validate;
pub mod writes;

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

/// A configuration item a sync task imports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Imported {
    /// Content.
    pub content: String,
    /// Content type; empty: kept (new items: `text`).
    pub r#type: String,
    /// Application.
    pub app_name: String,
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

/// What a version of an item records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Created.
    Insert,
    /// Changed.
    Update,
    /// Deleted (the version holds the content it had).
    Delete,
}

impl Op {
    /// Nacos' letter for it in history listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "I",
            Op::Update => "U",
            Op::Delete => "D",
        }
    }
}

/// One version of an item: what was published (or what was deleted), when and by whom.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Version {
    /// History id, unique across the store and increasing.
    pub id: u64,
    /// What happened.
    pub op: Op,
    /// The content of this version.
    pub content: Arc<str>,
    /// Its md5.
    pub md5: String,
    /// Content type.
    pub r#type: String,
    /// Application.
    pub app_name: String,
    /// Who.
    pub by: String,
    /// From where.
    pub src_ip: String,
    /// When, ms since the epoch.
    pub at_ms: u64,
}

/// Why a publication was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ConfigRejection {
    /// The stored md5 is not the one a compare-and-set expected.
    #[error("Cas publish fail, server md5 may have changed.")]
    CasMismatch,
}

/// A search of the items.
#[derive(Clone, Debug, Default)]
pub struct Search<'a> {
    /// Only this namespace (all when `None`).
    pub namespace: Option<&'a str>,
    /// The dataId: exact, or with `blur` a pattern (`*` any run; without `*`, a part).
    pub data_id: Option<&'a str>,
    /// The group, likewise.
    pub group: Option<&'a str>,
    /// Exactly this application.
    pub app_name: Option<&'a str>,
    /// Items carrying every one of these tags.
    pub tags: Vec<&'a str>,
    /// Patterns rather than exact names.
    pub blur: bool,
}

/// One page of a search.
pub struct Page {
    /// How many items matched in all.
    pub total: usize,
    /// The items of the page, by key.
    pub items: Vec<(ConfigKey, ConfigItem)>,
}

#[derive(Default)]
struct State {
    items: BTreeMap<ConfigKey, ConfigItem>,
    /// Oldest first.
    history: HashMap<ConfigKey, VecDeque<Version>>,
    next_id: u64,
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

/// Whether `value` matches `pattern` (`*` any run of characters).
fn glob(pattern: &str, value: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == value;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first) || value.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    if !value.ends_with(last) {
        return false;
    }
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `value` is matched by `wanted`: exactly, or under `blur` as a pattern (a
/// pattern without `*` matches any value containing it).
fn name_matches(wanted: Option<&str>, value: &str, blur: bool) -> bool {
    match wanted {
        None => true,
        Some(w) if !blur => w == value,
        Some(w) if w.contains('*') => glob(w, value),
        Some(w) => value.contains(w),
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

    /// The items matching `search` that `visible` admits (the caller's permissions),
    /// ordered by namespace, group and dataId; page `page_no` (from 1) of `page_size`.
    pub fn search(
        &self,
        search: &Search,
        visible: impl Fn(&ConfigKey, &ConfigItem) -> bool,
        page_no: usize,
        page_size: usize,
    ) -> Page {
        let state = self.0.state.read();
        // Keys order by namespace first: one namespace is one range.
        let all: Box<dyn Iterator<Item = (&ConfigKey, &ConfigItem)>> = match search.namespace {
            Some(ns) => {
                let from = ConfigKey {
                    namespace: ns.to_string(),
                    group: String::new(),
                    data_id: String::new(),
                };
                Box::new(
                    state
                        .items
                        .range(from..)
                        .take_while(move |(k, _)| k.namespace == ns),
                )
            }
            None => Box::new(state.items.iter()),
        };
        let matching = all.filter(|(k, item)| {
            name_matches(search.data_id, &k.data_id, search.blur)
                && name_matches(search.group, &k.group, search.blur)
                && search.app_name.is_none_or(|a| a == item.app_name)
                && search
                    .tags
                    .iter()
                    .all(|t| item.tags.split(',').any(|have| have.trim() == *t))
                && visible(k, item)
        });
        let mut total = 0;
        let skip = page_no.saturating_sub(1).saturating_mul(page_size);
        let mut items = Vec::new();
        for (k, item) in matching {
            if total >= skip && items.len() < page_size {
                items.push((k.clone(), item.clone()));
            }
            total += 1;
        }
        Page { total, items }
    }

    /// The versions of `key`, newest first.
    pub fn history(&self, key: &ConfigKey) -> Vec<Version> {
        let state = self.0.state.read();
        state
            .history
            .get(key)
            .map(|h| h.iter().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Version `id` of `key`.
    pub fn version(&self, key: &ConfigKey, id: u64) -> Option<Version> {
        let state = self.0.state.read();
        state.history.get(key)?.iter().find(|v| v.id == id).cloned()
    }

    /// The version of `key` before version `id`.
    pub fn previous(&self, key: &ConfigKey, id: u64) -> Option<Version> {
        let state = self.0.state.read();
        state
            .history
            .get(key)?
            .iter()
            .rev()
            .find(|v| v.id < id)
            .cloned()
    }

    /// The keys of the items of `namespace` that have history, items deleted since
    /// among them.
    pub fn keys_with_history(&self, namespace: &str) -> Vec<ConfigKey> {
        let state = self.0.state.read();
        let mut keys: Vec<ConfigKey> = state
            .history
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// Whether [`Configs::prune_history`] at `now` would drop anything: the pruner asks
    /// this before it proposes, so that an idle store writes nothing to the log.
    pub fn history_due(&self, retention: Retention, now: u64) -> bool {
        let state = self.0.state.read();
        let oldest_kept = now.saturating_sub(retention.max_age_ms);
        state.history.iter().any(|(key, versions)| {
            let keep = usize::from(state.items.contains_key(key));
            versions.len() > keep && versions.front().is_some_and(|v| v.at_ms < oldest_kept)
        })
    }

    /// Drops every version older than `retention` at `at_ms` (applied by the state
    /// machine, so every node prunes alike): an item that exists keeps its newest
    /// version whatever its age; a removed item's history goes once its newest version
    /// is that old. Writes prune the history they touch ([`record`]); this reaches the
    /// items nobody writes any more. Returns how many versions went.
    pub fn prune_history(&self, retention: Retention, at_ms: u64) -> usize {
        let mut state = self.0.state.write();
        let State { items, history, .. } = &mut *state;
        let oldest_kept = at_ms.saturating_sub(retention.max_age_ms);
        let mut dropped = 0;
        history.retain(|key, versions| {
            let keep = usize::from(items.contains_key(key));
            while versions.len() > keep && versions.front().is_some_and(|v| v.at_ms < oldest_kept) {
                versions.pop_front();
                dropped += 1;
            }
            !versions.is_empty()
        });
        dropped
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

    /// Removes `key` (applied by the state machine); removing what is not there changes
    /// nothing. Returns whether it was there.
    pub fn remove(
        &self,
        key: &ConfigKey,
        by: &str,
        src_ip: &str,
        retention: Retention,
        at_ms: u64,
    ) -> bool {
        let removed = take(&mut self.0.state.write(), key, by, src_ip, retention, at_ms);
        if removed {
            self.0.changes.mark([key.clone()]);
        }
        removed
    }

    /// The items sync task `task` imported and still owns.
    pub fn owned_by(&self, task: &str) -> Vec<(ConfigKey, ConfigItem)> {
        let state = self.0.state.read();
        state
            .items
            .iter()
            .filter(|(_, i)| i.owner.as_deref() == Some(task))
            .map(|(k, i)| (k.clone(), i.clone()))
            .collect()
    }

    /// Whether `key` holds an item that is not sync task `task`'s (published through
    /// the API, or another task's import).
    pub fn held_by_other(&self, key: &ConfigKey, task: &str) -> bool {
        let state = self.0.state.read();
        state
            .items
            .get(key)
            .is_some_and(|i| i.owner.as_deref() != Some(task))
    }

    /// A sync task's batch (applied by the state machine): `upserts` written unless the
    /// key holds an item that is not the task's, `removals` removed if they are the
    /// task's. Returns how many upserts were skipped.
    pub fn apply_import(
        &self,
        task: &str,
        upserts: &[(ConfigKey, Imported)],
        removals: &[ConfigKey],
        retention: Retention,
        at_ms: u64,
    ) -> usize {
        let by = format!("sync:{task}");
        let mut changed = Vec::new();
        let mut skipped = 0;
        {
            let mut state = self.0.state.write();
            for (key, imported) in upserts {
                let held = state
                    .items
                    .get(key)
                    .is_some_and(|i| i.owner.as_deref() != Some(task));
                if held {
                    skipped += 1;
                    continue;
                }
                let p = Publish {
                    key: key.clone(),
                    content: imported.content.clone(),
                    r#type: Some(imported.r#type.clone()).filter(|t| !t.is_empty()),
                    app_name: Some(imported.app_name.clone()),
                    desc: None,
                    tags: None,
                    cas_md5: None,
                    by: by.clone(),
                    src_ip: String::new(),
                    retention,
                };
                put(&mut state, &p, Some(task.to_string()), at_ms);
                changed.push(key.clone());
            }
            for key in removals {
                let mine = state
                    .items
                    .get(key)
                    .is_some_and(|i| i.owner.as_deref() == Some(task));
                if mine && take(&mut state, key, &by, "", retention, at_ms) {
                    changed.push(key.clone());
                }
            }
        }
        if !changed.is_empty() {
            self.0.changes.mark(changed);
        }
        skipped
    }

    /// Removes every item sync task `task` owns (the task was deleted).
    pub fn remove_owned(&self, task: &str, retention: Retention, at_ms: u64) -> usize {
        let keys: Vec<ConfigKey> = self.owned_by(task).into_iter().map(|(k, _)| k).collect();
        self.apply_import(task, &[], &keys, retention, at_ms);
        keys.len()
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
            touched.extend(state.items.keys().cloned());
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
    };
    record(state, key, version, retention, at_ms);
    true
}

/// Appends `version` to `key`'s history and prunes it to `retention` (always keeping
/// the newest version).
fn record(state: &mut State, key: &ConfigKey, version: Version, retention: Retention, now: u64) {
    let history = state.history.entry(key.clone()).or_default();
    history.push_back(version);
    let max = retention.max_versions.max(1) as usize;
    while history.len() > max {
        history.pop_front();
    }
    let oldest_kept = now.saturating_sub(retention.max_age_ms);
    while history.len() > 1 && history.front().is_some_and(|v| v.at_ms < oldest_kept) {
        history.pop_front();
    }
}

#[cfg(test)]
mod tests;
