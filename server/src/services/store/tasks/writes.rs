//! Where a sync task write goes: the API's changes to the task table, and what a
//! task's runner imports and reports. All through Raft, with the proposal time inside
//! the command; the state machine refuses a batch of a task that no longer exists.

use roster_sync::{TaskSpec, TaskStatus};

use super::SyncTasks;
use crate::error::Error;
use crate::services::configs::{ConfigKey, Imported, Retention};
use crate::services::store::command::CommandV1;
use crate::services::store::{ProposeError, Store};
use roster_registry::clock::now_ms;
use roster_registry::service::ServiceKey;
use roster_registry::Registration;

/// The sync task writes of the API, over the task table and Raft.
#[derive(Clone, Copy)]
pub struct Writes<'a> {
    /// Raft.
    pub store: &'a Store,
    /// The task table (read for the checks).
    pub tasks: &'a SyncTasks,
}

impl<'a> Writes<'a> {
    /// The task writes over `store` and `tasks`.
    pub fn new(store: &'a Store, tasks: &'a SyncTasks) -> Self {
        Self { store, tasks }
    }

    /// Stores a new task (a name taken is refused when applied).
    pub async fn create(&self, spec: TaskSpec) -> Result<(), Error> {
        self.store.propose(CommandV1::CreateSyncTask(spec)).await?;
        Ok(())
    }

    /// Pauses or resumes task `name`.
    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<(), Error> {
        self.store
            .propose(CommandV1::SetSyncTaskPaused {
                name: name.to_string(),
                paused,
            })
            .await?;
        Ok(())
    }

    /// Turns dry-run task `name` into a real import: 404 for an unknown task, 409 for
    /// one that is not a dry run.
    pub async fn apply(&self, name: &str) -> Result<(), Error> {
        // Judged on this node's copy after a read barrier, so a task applied through
        // another node a moment ago is a 409 here too. Two applies racing both pass; the
        // state machine applies the second as a no-op.
        self.store.read_barrier().await?;
        let task = self
            .tasks
            .get(name)
            .ok_or_else(|| Error::not_found(format!("sync task '{name}' not found")))?;
        if !task.spec.dry_run {
            return Err(Error::conflict(format!(
                "sync task '{name}' is not a dry run: it already imports"
            )));
        }
        self.store
            .propose(CommandV1::ApplySyncTask {
                name: name.to_string(),
            })
            .await?;
        Ok(())
    }

    /// Deletes task `name` and every instance and configuration item it imported.
    pub async fn delete(&self, name: &str) -> Result<(), Error> {
        self.store
            .propose(CommandV1::DeleteSyncTask {
                name: name.to_string(),
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }
}

/// Task `task`'s batch of instance imports: `upserts` (registrations it owns) and
/// `removals` (service, IP, port of its own instances).
pub async fn import_instances(
    store: &Store,
    task: &str,
    upserts: Vec<(ServiceKey, Registration)>,
    removals: Vec<(ServiceKey, String, u16)>,
) -> Result<(), ProposeError> {
    store
        .propose(CommandV1::SyncApply {
            task: task.to_string(),
            upserts,
            removals,
            at_ms: now_ms(),
        })
        .await
}

/// Task `task`'s batch of configuration imports, with this node's history `retention`.
pub async fn import_configs(
    store: &Store,
    task: &str,
    upserts: Vec<(ConfigKey, Imported)>,
    removals: Vec<ConfigKey>,
    retention: Retention,
) -> Result<(), ProposeError> {
    store
        .propose(CommandV1::SyncConfigs {
            task: task.to_string(),
            upserts,
            removals,
            retention,
            at_ms: now_ms(),
        })
        .await
}

/// Task `task`'s status, as its runner reports it.
pub async fn report(store: &Store, task: &str, status: TaskStatus) -> Result<(), ProposeError> {
    store
        .propose(CommandV1::SyncStatus {
            name: task.to_string(),
            status,
        })
        .await
}
