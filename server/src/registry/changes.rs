//! Change notification: each consumer (UDP push, later gRPC push and the console's event
//! stream) owns a [`ChangeSet`]; every service change marks the service in each set and
//! wakes its consumer, which drains the set. Changes to one service coalesce until the
//! consumer drains them, and nothing is dropped when a consumer is slow.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use super::service::ServiceKey;

/// Services changed since the consumer last drained.
#[derive(Default)]
pub struct ChangeSet {
    dirty: Mutex<HashSet<ServiceKey>>,
    notify: Notify,
}

impl ChangeSet {
    /// Waits until at least one service is marked.
    pub async fn changed(&self) {
        loop {
            // Register interest before checking, so a mark between the check and the
            // await is not missed.
            let notified = self.notify.notified();
            if !self.dirty.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Takes every marked service.
    pub fn drain(&self) -> Vec<ServiceKey> {
        self.dirty.lock().drain().collect()
    }

    fn mark(&self, key: &ServiceKey) {
        let newly = {
            let mut dirty = self.dirty.lock();
            let was_empty = dirty.is_empty();
            dirty.insert(key.clone());
            was_empty
        };
        if newly {
            self.notify.notify_one();
        }
    }
}

/// Every consumer's change set.
#[derive(Default)]
pub(crate) struct Watchers {
    sets: RwLock<Vec<Arc<ChangeSet>>>,
}

impl Watchers {
    pub(crate) fn add(&self) -> Arc<ChangeSet> {
        let set = Arc::new(ChangeSet::default());
        self.sets.write().push(set.clone());
        set
    }

    pub(crate) fn mark(&self, key: &ServiceKey) {
        for set in self.sets.read().iter() {
            set.mark(key);
        }
    }
}
