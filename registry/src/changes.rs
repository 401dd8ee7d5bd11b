//! Change notification: each consumer (UDP push, gRPC push and the console's event
//! stream) owns a [`ChangeSet`]; every service change marks the service in each set and
//! wakes its consumer, which drains the set. Changes to one service coalesce until the
//! consumer drains them, and nothing is dropped when a consumer is slow.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use super::service::ServiceKey;

/// Services changed since the consumer last drained.
#[derive(Default)]
pub struct ChangeSet {
    /// Marked services by the address of their key: a service has one `Arc` key, so
    /// marking hashes a pointer instead of three strings (a registration marks every
    /// consumer's set). A service dropped and made again has a new key and may appear
    /// twice; [`ChangeSet::drain`] returns each key once.
    dirty: Mutex<HashMap<usize, Arc<ServiceKey>, BuildHasherDefault<PointerHasher>>>,
    notify: Notify,
}

/// Hashes a pointer: multiplies it so that the high bits (which the table uses) vary.
#[derive(Default)]
struct PointerHasher(u64);

impl Hasher for PointerHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
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

    /// Takes every marked service, each once, in key order.
    pub fn drain(&self) -> Vec<ServiceKey> {
        let mut keys: Vec<ServiceKey> = self
            .dirty
            .lock()
            .drain()
            .map(|(_, key)| ServiceKey::clone(&key))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn mark(&self, key: &Arc<ServiceKey>) {
        let newly = {
            let mut dirty = self.dirty.lock();
            let was_empty = dirty.is_empty();
            dirty
                .entry(Arc::as_ptr(key) as usize)
                .or_insert_with(|| key.clone());
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

    pub(crate) fn mark(&self, key: &Arc<ServiceKey>) {
        for set in self.sets.read().iter() {
            set.mark(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_drained_once_whatever_its_key_copies() {
        let watchers = Watchers::default();
        let set = watchers.add();
        let a = Arc::new(ServiceKey::new("public", "g", "a"));
        let b = Arc::new(ServiceKey::new("public", "g", "b"));
        // A service dropped and made again: an equal key behind another pointer.
        let a_again = Arc::new(ServiceKey::new("public", "g", "a"));
        for key in [&b, &a, &a, &a_again] {
            watchers.mark(key);
        }
        assert_eq!(set.drain(), [ServiceKey::clone(&a), ServiceKey::clone(&b)]);
        assert!(set.drain().is_empty());
    }
}
