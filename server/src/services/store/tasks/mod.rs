//! The sync task table: every import task and the status its runner last reported.
//! Raft data like namespaces and users, so it lives in the store: written only by the
//! state machine ([`super::machine`]), read by the API and by the node's task supervisor
//! (`crate::faces::sync`), which runs the unpaused tasks on the leader. [`writes`] holds
//! the task commands as the API and the runners propose them, [`apply`] how the state
//! machine applies them.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use roster_sync::{TaskSpec, TaskState, TaskStatus};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::command::{Outcome, Rejection};

pub mod apply;
pub mod writes;

/// A task as Raft holds it: what it is and what its runner last reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredTask {
    /// The task.
    pub spec: TaskSpec,
    /// Its last reported status.
    #[serde(default)]
    pub status: TaskStatus,
}

/// The sync task table, written only by the Raft state machine. Cheap to clone.
#[derive(Clone, Default)]
pub struct SyncTasks {
    tasks: Arc<RwLock<BTreeMap<String, StoredTask>>>,
    /// Woken when a task is created, deleted, paused, resumed or applied (not on status
    /// reports).
    changed: Arc<Notify>,
}

impl SyncTasks {
    /// Every task, by name.
    pub fn all(&self) -> Vec<StoredTask> {
        self.tasks.read().values().cloned().collect()
    }

    /// The task `name`.
    pub fn get(&self, name: &str) -> Option<StoredTask> {
        self.tasks.read().get(name).cloned()
    }

    /// Whether task `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.tasks.read().contains_key(name)
    }

    /// Stores a new task.
    pub fn create(&self, spec: TaskSpec) -> Outcome {
        let mut tasks = self.tasks.write();
        if tasks.contains_key(&spec.name) {
            return Err(Rejection::SyncTaskExists(spec.name));
        }
        let status = TaskStatus {
            state: if spec.paused {
                TaskState::Paused
            } else {
                TaskState::Pending
            },
            ..TaskStatus::default()
        };
        tasks.insert(spec.name.clone(), StoredTask { spec, status });
        drop(tasks);
        self.changed.notify_waiters();
        Ok(())
    }

    /// Pauses or resumes task `name`.
    pub fn set_paused(&self, name: &str, paused: bool) -> Outcome {
        self.edit(name, |t| {
            t.spec.paused = paused;
            t.status.state = if paused {
                TaskState::Paused
            } else {
                TaskState::Pending
            };
            t.status.runner = None;
        })
    }

    /// Turns task `name`'s dry run off: its runner restarts (the spec changed) and
    /// imports. The dry-run report goes with the old status. A task that is not a dry
    /// run is left alone, so a repeated apply changes nothing.
    pub fn end_dry_run(&self, name: &str) -> Outcome {
        self.edit(name, |t| {
            if !t.spec.dry_run {
                return;
            }
            t.spec.dry_run = false;
            t.status = TaskStatus {
                state: if t.spec.paused {
                    TaskState::Paused
                } else {
                    TaskState::Pending
                },
                ..TaskStatus::default()
            };
        })
    }

    /// Records task `name`'s status. A paused task keeps saying so (a report can race
    /// with the pause), and an applied one drops a late dry-run report (one can race
    /// with the apply).
    pub fn set_status(&self, name: &str, status: TaskStatus) -> Outcome {
        self.edit(name, |t| {
            let stale_dry_run = status.dry_run.is_some() && !t.spec.dry_run;
            if !t.spec.paused && !stale_dry_run {
                t.status = status;
            }
        })
    }

    /// Deletes task `name`.
    pub fn delete(&self, name: &str) -> Outcome {
        let removed = self.tasks.write().remove(name);
        match removed {
            Some(_) => {
                self.changed.notify_waiters();
                Ok(())
            }
            None => Err(Rejection::SyncTaskNotFound(name.to_string())),
        }
    }

    /// Replaces the table (snapshot restore).
    pub fn restore(&self, tasks: Vec<StoredTask>) {
        *self.tasks.write() = tasks
            .into_iter()
            .map(|t| (t.spec.name.clone(), t))
            .collect();
        self.changed.notify_waiters();
    }

    /// A future that completes at the next change of the runnable set (see `changed`):
    /// create it before reading [`SyncTasks::runnable`], so no change slips in between.
    pub(crate) fn changed(&self) -> impl std::future::Future<Output = ()> + '_ {
        self.changed.notified()
    }

    fn edit(&self, name: &str, f: impl FnOnce(&mut StoredTask)) -> Outcome {
        let mut tasks = self.tasks.write();
        let task = tasks
            .get_mut(name)
            .ok_or_else(|| Rejection::SyncTaskNotFound(name.to_string()))?;
        let before = task.spec.clone();
        f(task);
        let spec_changed = task.spec != before;
        drop(tasks);
        if spec_changed {
            self.changed.notify_waiters();
        }
        Ok(())
    }

    /// Unpaused tasks.
    pub(crate) fn runnable(&self) -> BTreeMap<String, TaskSpec> {
        self.tasks
            .read()
            .values()
            .filter(|t| !t.spec.paused)
            .map(|t| (t.spec.name.clone(), t.spec.clone()))
            .collect()
    }
}

/// The source URL with its secrets hidden.
pub fn redacted(source: &str) -> String {
    source
        .parse::<roster_sync::SourceUrl>()
        .map(|u| u.redacted())
        .unwrap_or_else(|_| "(unreadable source URL)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> TaskSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn applying_a_dry_run_turns_it_into_a_real_task_once() {
        let tasks = SyncTasks::default();
        tasks
            .create(spec(serde_json::json!({
                "name": "t", "source": "etcd://127.0.0.1:1", "dryRun": true
            })))
            .unwrap();
        let report = TaskStatus {
            state: TaskState::Running,
            dry_run: Some(Default::default()),
            ..TaskStatus::default()
        };
        tasks.set_status("t", report.clone()).unwrap();
        tasks.end_dry_run("t").unwrap();
        // A report the dry run sent before it stopped is dropped.
        tasks.set_status("t", report).unwrap();
        let t = tasks.get("t").unwrap();
        assert!(!t.spec.dry_run);
        assert_eq!(t.status.state, TaskState::Pending);
        assert_eq!(t.status.dry_run, None, "the stale report goes");
        assert!(tasks.runnable().contains_key("t"));
        // Again: nothing changes.
        tasks.end_dry_run("t").unwrap();
        assert_eq!(tasks.get("t").unwrap().status.state, TaskState::Pending);
        assert_eq!(
            tasks.end_dry_run("none"),
            Err(Rejection::SyncTaskNotFound("none".into()))
        );
    }
}
