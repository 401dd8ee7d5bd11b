//! The configuration items sync tasks import: which task owns which item, and a
//! task's batches, which never overwrite an item published through the API or owned
//! by another task.

use serde::{Deserialize, Serialize};

use super::{put, take, ConfigItem, ConfigKey, Configs, Publish, Retention};

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

impl Configs {
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
}
