//! The versions kept of each configuration item: what each publication or removal
//! was, by whom and when, pruned to the retention as writes touch an item ([`record`])
//! and, for items nobody writes any more, by the leader's pruner (`super::prune`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ConfigKey, Configs, Retention, State};

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
    /// The gray version it was (`beta`, `tag_<tag>`); `None`: the formal content.
    #[serde(default)]
    pub gray: Option<String>,
}

impl Configs {
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
    /// is that old. Writes prune the history they touch (`record`); this reaches the
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
}

/// Appends `version` to `key`'s history and prunes it to `retention` (always keeping
/// the newest version).
pub(super) fn record(
    state: &mut State,
    key: &ConfigKey,
    version: Version,
    retention: Retention,
    now: u64,
) {
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
