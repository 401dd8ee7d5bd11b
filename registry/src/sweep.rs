//! The expiry sweep: marks silent ephemeral instances unhealthy and removes expired
//! ones, by the rule in [`super::expiry`], in the services whose earliest deadline
//! passed. Only the owner of a client judges it (Distro), and the eviction guard
//! ([`EvictionGuard`]) holds removals when much of a namespace falls silent at once.
//! The node's expiry worker calls it on a timer, passing `now`: the sweep reads no clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::expiry::{judge, Verdict};
use super::instance::Instance;
use super::service::{Changed, Service};
use super::Registry;
use crate::guard::{EvictionGuard, HELD_RECHECK_MS};

/// How soon the sweep looks again at a silent instance whose client another node owns
/// (its owner judges it; when ownership moves here, [`Registry::recheck_all`] brings the
/// look forward). Only silent copies cost a look.
pub const NOT_OWNED_RECHECK_MS: u64 = 5_000;

/// What one pass of the expiry check did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Instances turned unhealthy.
    pub unhealthy: usize,
    /// Instances removed.
    pub removed: usize,
    /// Removals the eviction guard held back.
    pub held: usize,
    /// Namespaces where the guard engaged in this pass.
    pub engaged: Vec<Arc<str>>,
    /// Namespaces where it released.
    pub released: Vec<Arc<str>>,
}

/// A sweep's expired instances of one service: the service's place in the pass's list
/// and the instances as they stood when judged.
type ExpiredIn = (usize, Vec<Arc<Instance>>);

impl Registry {
    /// Judges the ephemeral instances of every service whose earliest deadline passed:
    /// marks silent ones unhealthy, removes expired ones. Only clients `owns` approves
    /// are judged (Distro: the owner decides); the others are looked at again later.
    ///
    /// Two phases, so that the outcome does not depend on the order services are
    /// visited in: first every silent instance is marked unhealthy (an expired one too:
    /// it is silent before it is gone), then each namespace with expired instances is
    /// judged once by the eviction `guard`, over its counts after the marking. A mass
    /// silence that jumps straight past the delete timeout (a node frozen or cut off for
    /// longer than it) is thus seen as the mass silence it is, and held.
    ///
    /// A sweep rather than a queue of deadlines: a service that is not due costs one
    /// atomic load, and an instance costs nothing beyond its beat clock (a queue entry
    /// per instance was a tenth of the registry's memory).
    pub fn expire_due(
        &self,
        now_ms: u64,
        owns: &dyn Fn(&str) -> bool,
        guard: &EvictionGuard,
    ) -> ExpiryReport {
        let mut report = ExpiryReport::default();
        let due: Vec<Arc<Service>> = self
            .shared
            .namespaces
            .iter()
            .flat_map(|ns| {
                ns.services
                    .iter()
                    .filter(|s| s.expiry_due(now_ms))
                    .map(|s| s.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        // Phase 1: mark the silent, gather the expired (as marked) by namespace.
        let mut swept: Vec<(Arc<Service>, u64)> = Vec::with_capacity(due.len());
        let mut expired: BTreeMap<Arc<str>, Vec<ExpiredIn>> = BTreeMap::new();
        for svc in due {
            let (next, gone) = self.mark_silent(&svc, now_ms, owns, &mut report);
            if !gone.is_empty() {
                expired
                    .entry(svc.key.namespace.clone())
                    .or_default()
                    .push((swept.len(), gone));
            }
            swept.push((svc, next));
        }
        // Phase 2: one verdict of the guard per namespace.
        for (ns, services) in expired {
            let (silent, total) = self.ephemeral_counts(&ns);
            if guard.policy.holds(silent, total) {
                if guard.hold(&ns, now_ms) {
                    report.engaged.push(ns.clone());
                }
                for (at, gone) in services {
                    report.held += gone.len();
                    // Look again later: an instance whose beats come back is alive
                    // whatever the guard says; only the dead wait for the release.
                    let next = &mut swept[at].1;
                    *next = (*next).min(now_ms + HELD_RECHECK_MS);
                }
                continue;
            }
            if guard.release(&ns) {
                report.released.push(ns.clone());
            }
            for (at, gone) in services {
                report.removed += self.remove_expired(&swept[at].0, &gone, now_ms);
            }
        }
        for (svc, next) in swept {
            svc.swept(next);
        }
        report
    }

    /// Phase 1 of the sweep for one service: judges its owned ephemeral instances, marks
    /// the silent (and expired) ones unhealthy, and returns when the service is next due
    /// and the expired instances, each as it now stands.
    fn mark_silent(
        &self,
        svc: &Arc<Service>,
        now_ms: u64,
        owns: &dyn Fn(&str) -> bool,
        report: &mut ExpiryReport,
    ) -> (u64, Vec<Arc<Instance>>) {
        let view = svc.view();
        let mut next = u64::MAX;
        // Instances to mark unhealthy and to remove, each the version judged: one that
        // changed meanwhile (re-registered, revived) is left to the next sweep, which
        // the change brings forward.
        let mut silent: Vec<Arc<Instance>> = Vec::new();
        let mut expired: Vec<Arc<Instance>> = Vec::new();
        for inst in view.instances.values() {
            let Some(clock) = inst.clock() else {
                continue;
            };
            let heartbeat = inst.heartbeat();
            let verdict = judge(clock.last_beat_ms(), &heartbeat, now_ms);
            // Ownership is asked only of instances that would be acted on (it hashes the
            // client id against the members).
            if !matches!(verdict, Verdict::Alive { .. }) && !owns(&inst.address) {
                // Another node owns this client; its copy here is judged by the owner.
                // When the owner dies the client moves here, and the expiry worker then
                // brings every service forward ([`Registry::recheck_all`]).
                next = next.min(now_ms + NOT_OWNED_RECHECK_MS);
                continue;
            }
            match verdict {
                Verdict::Expired => {
                    // Removed in phase 2, or held, or changed meanwhile: a look later
                    // settles the last two.
                    expired.push(inst.clone());
                    next = next.min(now_ms + HELD_RECHECK_MS);
                }
                Verdict::Silent { recheck_at } => {
                    if inst.healthy {
                        silent.push(inst.clone());
                    }
                    next = next.min(recheck_at);
                }
                Verdict::Alive { recheck_at } => next = next.min(recheck_at),
            }
        }
        if silent.is_empty() && expired.iter().all(|i| !i.healthy) {
            return (next, expired);
        }
        let applied = svc.update(now_ms, |view| {
            let mut marked = Vec::new();
            for inst in silent.iter().chain(&expired) {
                match view.instances.get(&inst.address) {
                    Some(cur) if Arc::ptr_eq(cur, inst) && cur.healthy => {
                        let next = Instance {
                            healthy: false,
                            ..Instance::clone(cur)
                        };
                        view.instances.insert(Arc::new(next));
                        marked.push(inst.address.clone());
                    }
                    _ => {}
                }
            }
            // The expired, as they stand after the marking (gone or replaced: left to
            // the next sweep).
            let expired: Vec<Arc<Instance>> = expired
                .iter()
                .filter_map(|inst| {
                    let cur = view.instances.get(&inst.address)?;
                    let same =
                        Arc::ptr_eq(cur, inst) || (marked.contains(&inst.address) && !cur.healthy);
                    same.then(|| cur.clone())
                })
                .collect();
            let changed = if marked.is_empty() {
                Changed::No
            } else {
                Changed::Yes
            };
            (changed, (marked, expired))
        });
        let Some((changed, (marked, expired))) = applied else {
            return (next, Vec::new());
        };
        if changed == Changed::Yes {
            self.shared.watchers.mark(&svc.key);
        }
        // Only address clients have beat clocks: the client is the address.
        for addr in &marked {
            self.shared
                .clients
                .changed(addr, &svc.key, addr, true, now_ms);
        }
        report.unhealthy += marked.len();
        (next, expired)
    }

    /// Phase 2 of the sweep for one service: removes the expired instances the guard let
    /// go, unless they changed since they were judged. Returns how many went.
    fn remove_expired(&self, svc: &Arc<Service>, expired: &[Arc<Instance>], now_ms: u64) -> usize {
        let applied = svc.update(now_ms, |view| {
            let mut removed = Vec::new();
            for inst in expired {
                if view
                    .instances
                    .get(&inst.address)
                    .is_some_and(|cur| Arc::ptr_eq(cur, inst))
                {
                    view.instances.remove(&inst.address);
                    removed.push(inst.address.clone());
                }
            }
            let changed = if removed.is_empty() {
                Changed::No
            } else {
                Changed::Yes
            };
            (changed, removed)
        });
        let Some((changed, removed)) = applied else {
            return 0;
        };
        if changed == Changed::Yes {
            self.shared.watchers.mark(&svc.key);
        }
        for addr in &removed {
            self.shared
                .clients
                .changed(addr, &svc.key, addr, false, now_ms);
        }
        removed.len()
    }

    /// Brings every service's next expiry check forward to now. The expiry worker calls
    /// it when the live members change: ownership of clients (and whether this node may
    /// judge at all) changed, and an inherited silent instance must be judged on time.
    pub fn recheck_all(&self) {
        for ns in self.shared.namespaces.iter() {
            for svc in ns.services.iter() {
                svc.check_by(0);
            }
        }
    }

    /// Counts (unhealthy, all) ephemeral instances of namespace `ns`.
    fn ephemeral_counts(&self, ns: &str) -> (usize, usize) {
        let mut counts = (0, 0);
        let Some(ns) = self.namespace(ns) else {
            return counts;
        };
        for svc in ns.services.iter() {
            for inst in svc.view().instances.values().filter(|i| i.ephemeral) {
                counts.1 += 1;
                if !inst.healthy {
                    counts.0 += 1;
                }
            }
        }
        counts
    }
}
