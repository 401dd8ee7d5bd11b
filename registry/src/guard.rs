//! The eviction guard (Eureka's self-preservation, which Nacos lacks): when a large
//! share of a namespace's ephemeral instances fall silent at once, the registry — not
//! the instances — is the likely one cut off, so it stops removing them. They stay
//! listed as unhealthy until beats return or the share drops.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// When to hold removals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardPolicy {
    /// Hold when more than this share of a namespace's ephemeral instances is silent.
    pub share: f64,
    /// ... and at least this many are.
    pub min_count: usize,
}

impl Default for GuardPolicy {
    fn default() -> Self {
        Self {
            share: 0.5,
            min_count: 10,
        }
    }
}

impl GuardPolicy {
    /// Whether removals hold with `silent` of `total` ephemeral instances silent. A
    /// share of 1 or more turns the guard off.
    pub fn holds(&self, silent: usize, total: usize) -> bool {
        self.share < 1.0 && silent >= self.min_count && silent as f64 > self.share * total as f64
    }
}

/// Which namespaces the guard holds, and since when.
pub struct EvictionGuard {
    /// The policy.
    pub policy: GuardPolicy,
    /// Namespaces holding removals, with the last time a removal was held.
    engaged: Mutex<HashMap<Arc<str>, u64>>,
}

/// How long a removal the eviction guard held waits before it is judged again.
pub const HELD_RECHECK_MS: u64 = 2_000;

/// A namespace held for this long without a held removal is released (held removals
/// come back every [`HELD_RECHECK_MS`], so this must be longer).
const RELEASE_AFTER_MS: u64 = HELD_RECHECK_MS + 1_000;

impl EvictionGuard {
    /// A guard with `policy`.
    pub fn new(policy: GuardPolicy) -> Self {
        Self {
            policy,
            engaged: Mutex::new(HashMap::new()),
        }
    }

    /// Records a held removal in `namespace`; true if the guard just engaged there.
    pub fn hold(&self, namespace: &Arc<str>, now_ms: u64) -> bool {
        self.engaged
            .lock()
            .insert(namespace.clone(), now_ms)
            .is_none()
    }

    /// Records an allowed removal in `namespace`; true if the guard was engaged there.
    pub fn release(&self, namespace: &str) -> bool {
        self.engaged.lock().remove(namespace).is_some()
    }

    /// Releases namespaces with no held removal lately; returns them.
    pub fn release_idle(&self, now_ms: u64) -> Vec<Arc<str>> {
        let mut released = Vec::new();
        self.engaged.lock().retain(|ns, last| {
            let keep = *last + RELEASE_AFTER_MS > now_ms;
            if !keep {
                released.push(ns.clone());
            }
            keep
        });
        released
    }

    /// Namespaces the guard holds.
    pub fn engaged(&self) -> Vec<Arc<str>> {
        self.engaged.lock().keys().cloned().collect()
    }
}

impl Default for EvictionGuard {
    fn default() -> Self {
        Self::new(GuardPolicy::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_only_for_many_and_most() {
        let p = GuardPolicy::default();
        assert!(!p.holds(1, 1), "a single silent instance is removed");
        assert!(!p.holds(9, 10), "fewer than the minimum count");
        assert!(p.holds(10, 10));
        assert!(p.holds(20, 30));
        assert!(!p.holds(15, 30), "exactly half is not more than half");
        let off = GuardPolicy {
            share: 1.0,
            min_count: 1,
        };
        assert!(!off.holds(100, 100));
    }

    #[test]
    fn engages_and_releases() {
        let g = EvictionGuard::default();
        let ns: Arc<str> = "public".into();
        assert!(g.hold(&ns, 0));
        assert!(!g.hold(&ns, 100));
        assert_eq!(g.engaged(), std::slice::from_ref(&ns));
        // Still held until a whole release period passed after the last held removal.
        assert!(g.release_idle(100 + RELEASE_AFTER_MS - 1).is_empty());
        assert_eq!(
            g.release_idle(100 + RELEASE_AFTER_MS),
            std::slice::from_ref(&ns)
        );
        assert!(!g.release("public"));
    }
}
