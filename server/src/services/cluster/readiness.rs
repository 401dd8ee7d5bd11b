//! Whether the node serves API requests ([`Readiness`]): not yet while starting, then
//! yes, and never again once it learns it was removed from the cluster. Startup sets it
//! ready; [`super::watch`] sets it removed; the faces and the health checker read it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// What a node removed from the cluster answers clients, its readiness probe included.
pub const REMOVED: &str = "this node was removed from the cluster; stop it and delete its data dir";

/// Whether the node serves API requests: not yet while starting, then yes, and never
/// again once it learns it was removed from the cluster.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicU8>);

const STARTING: u8 = 0;
const READY: u8 = 1;
const REMOVED_STATE: u8 = 2;

impl Readiness {
    /// True once the node has a leader, has replayed its state and is bootstrapped, and
    /// while it is still a member.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire) == READY
    }

    /// Why the node refuses clients: `None` when ready, `starting` while starting, and
    /// [`REMOVED`] once removed.
    pub fn refusal(&self, starting: &'static str) -> Option<&'static str> {
        match self.0.load(Ordering::Acquire) {
            READY => None,
            REMOVED_STATE => Some(REMOVED),
            _ => Some(starting),
        }
    }

    /// Whether the node learned it was removed from the cluster.
    pub fn is_removed(&self) -> bool {
        self.0.load(Ordering::Acquire) == REMOVED_STATE
    }

    /// Marks the node ready (startup finished), unless it was removed meanwhile.
    pub fn set(&self) {
        let _ = self
            .0
            .compare_exchange(STARTING, READY, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Marks the node removed from the cluster, for good.
    pub fn set_removed(&self) {
        self.0.store(REMOVED_STATE, Ordering::Release);
    }
}
