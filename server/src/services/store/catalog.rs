//! Changes to the Raft-held catalog beside the registry's services — namespaces, users,
//! roles and permissions, sync tasks — as the state machine applies them, for the console's event streams
//! (`faces::http::events`). Every node applies every committed command, so a change made
//! through any node is seen on all of them.
//!
//! Like the registry's `ChangeSet`: marks coalesce in a set until the one consumer
//! drains it, and nothing is dropped when it is slow. The set stays small: it holds at
//! most one entry per namespace or task name changed since the last drain.

use std::collections::BTreeSet;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::command::CommandV1;

/// One change to the catalog. Says only *what* changed, never how: a stream reader
/// refetches what it shows, through the API that checks its rights.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CatalogChange {
    /// A namespace was declared, renamed or deleted.
    Namespace(String),
    /// Users were created, deleted or given a new password (which user is not said).
    Users,
    /// Roles were bound or unbound, or permissions granted or taken back: what callers
    /// who are not admins may see may have changed.
    Access,
    /// A sync task was created, paused, resumed, applied or deleted, or reported a new
    /// status.
    Task(String),
    /// Anything may have changed: the state was replaced from a snapshot.
    Everything,
}

impl CatalogChange {
    /// The change `command` makes to the catalog once applied, if any. Service and
    /// instance commands change the registry, which reports them itself; a sync
    /// task's imports (`SyncApply`) are instance changes too.
    pub fn of(command: &CommandV1) -> Option<Self> {
        Some(match command {
            CommandV1::CreateNamespace(info) | CommandV1::UpdateNamespace(info) => {
                Self::Namespace(info.id.clone())
            }
            CommandV1::DeleteNamespace { id } => Self::Namespace(id.clone()),
            CommandV1::Bootstrap { .. }
            | CommandV1::CreateUser { .. }
            | CommandV1::SetPassword { .. }
            | CommandV1::DeleteUser { .. }
            | CommandV1::CreateApiToken { .. }
            | CommandV1::RevokeApiToken { .. } => Self::Users,
            CommandV1::AddRole { .. }
            | CommandV1::DeleteRole { .. }
            | CommandV1::AddPermission { .. }
            | CommandV1::DeletePermission { .. } => Self::Access,
            CommandV1::CreateSyncTask(spec) => Self::Task(spec.name.clone()),
            CommandV1::SetSyncTaskPaused { name, .. }
            | CommandV1::ApplySyncTask { name }
            | CommandV1::DeleteSyncTask { name, .. }
            | CommandV1::SyncStatus { name, .. } => Self::Task(name.clone()),
            CommandV1::CreateService { .. }
            | CommandV1::UpdateService { .. }
            | CommandV1::PutCluster { .. }
            | CommandV1::DeleteService { .. }
            | CommandV1::Register { .. }
            | CommandV1::Deregister { .. }
            | CommandV1::UpdateInstance { .. }
            | CommandV1::SetHealth { .. }
            | CommandV1::SyncApply { .. }
            | CommandV1::RotateKey { .. }
            // The configuration store reports its changes itself.
            | CommandV1::PublishConfig { .. }
            | CommandV1::RemoveConfig { .. }
            | CommandV1::PublishConfigGray { .. }
            | CommandV1::RemoveConfigGray { .. }
            | CommandV1::SyncConfigs { .. }
            | CommandV1::PruneConfigHistory { .. } => return None,
        })
    }
}

/// Catalog changes applied since the consumer last drained.
#[derive(Default)]
pub struct CatalogChanges {
    /// Guards only the set; never held across an await.
    pending: Mutex<BTreeSet<CatalogChange>>,
    notify: Notify,
}

impl CatalogChanges {
    /// Records `change` and wakes the consumer.
    pub fn mark(&self, change: CatalogChange) {
        let newly = {
            let mut pending = self.pending.lock();
            let was_empty = pending.is_empty();
            pending.insert(change);
            was_empty
        };
        if newly {
            // `notify_one` keeps a permit when nobody waits: a mark made while the
            // consumer is busy is not lost.
            self.notify.notify_one();
        }
    }

    /// Waits until at least one change is recorded.
    pub async fn changed(&self) {
        loop {
            // Register interest before checking, so a mark in between is not missed.
            let notified = self.notify.notified();
            if !self.pending.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Takes every recorded change, each once, in order. `Everything` stands for all
    /// the others, so it comes alone.
    pub fn drain(&self) -> Vec<CatalogChange> {
        let pending = std::mem::take(&mut *self.pending.lock());
        if pending.contains(&CatalogChange::Everything) {
            return vec![CatalogChange::Everything];
        }
        pending.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_coalesce_until_drained() {
        let set = CatalogChanges::default();
        set.mark(CatalogChange::Task("b".into()));
        set.mark(CatalogChange::Users);
        set.mark(CatalogChange::Task("b".into()));
        set.mark(CatalogChange::Namespace("dev".into()));
        set.mark(CatalogChange::Users);
        assert_eq!(
            set.drain(),
            vec![
                CatalogChange::Namespace("dev".into()),
                CatalogChange::Users,
                CatalogChange::Task("b".into()),
            ]
        );
        assert!(set.drain().is_empty());
    }

    #[test]
    fn everything_stands_for_the_rest() {
        let set = CatalogChanges::default();
        set.mark(CatalogChange::Users);
        set.mark(CatalogChange::Everything);
        set.mark(CatalogChange::Task("t".into()));
        assert_eq!(set.drain(), vec![CatalogChange::Everything]);
    }

    #[tokio::test]
    async fn a_mark_before_the_wait_is_not_missed() {
        let set = CatalogChanges::default();
        set.mark(CatalogChange::Users);
        tokio::time::timeout(std::time::Duration::from_secs(1), set.changed())
            .await
            .expect("changed() returns at once");
        set.drain();
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), set.changed());
        assert!(
            waiting.await.is_err(),
            "nothing marked, nothing to wake for"
        );
    }
}
