//! Picking one instance for clients that cannot balance themselves: weighted random,
//! smooth weighted round-robin (nginx's), and consistent hashing on a key (weighted
//! rendezvous hashing: a key stays on its instance, and removing an instance moves only
//! the keys it had). Instances with weight 0 are never picked.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;

use super::instance::Instance;
use crate::hash::{mix, stable_hash};

/// How to pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Each pick independent, chance proportional to weight.
    WeightedRandom,
    /// Deterministic interleaving proportional to weight.
    RoundRobin,
    /// The same key picks the same instance.
    Hash,
}

impl Strategy {
    /// The strategy named `name` (`random`, `round-robin`, `hash`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "random" | "weighted-random" => Some(Strategy::WeightedRandom),
            "round-robin" | "rr" => Some(Strategy::RoundRobin),
            "hash" | "consistent-hash" => Some(Strategy::Hash),
            _ => None,
        }
    }
}

fn weight(i: &Instance) -> f64 {
    if i.weight.is_finite() && i.weight > 0.0 {
        i.weight
    } else {
        0.0
    }
}

/// Weighted random with `r` uniform in `[0, 1)`.
pub fn weighted_random(hosts: &[Arc<Instance>], r: f64) -> Option<Arc<Instance>> {
    let total: f64 = hosts.iter().map(|h| weight(h)).sum();
    if total <= 0.0 {
        return None;
    }
    let mut target = r * total;
    for h in hosts {
        let w = weight(h);
        if w > 0.0 && target < w {
            return Some(h.clone());
        }
        target -= w;
    }
    // Rounding: the last instance with weight.
    hosts.iter().rev().find(|h| weight(h) > 0.0).cloned()
}

/// Smooth weighted round-robin state of one service (and filter).
#[derive(Debug, Default)]
pub struct RoundRobin {
    /// Current weight per instance address.
    current: HashMap<Arc<str>, f64>,
}

impl RoundRobin {
    /// The next instance: every instance gains its weight, the largest is picked and
    /// loses the total. Over a cycle each is picked in proportion to its weight.
    pub fn next(&mut self, hosts: &[Arc<Instance>]) -> Option<Arc<Instance>> {
        let total: f64 = hosts.iter().map(|h| weight(h)).sum();
        if total <= 0.0 {
            return None;
        }
        // Forget instances that left.
        self.current
            .retain(|addr, _| hosts.iter().any(|h| *h.addr() == **addr));
        let mut best: Option<(&Arc<Instance>, f64)> = None;
        for h in hosts.iter().filter(|h| weight(h) > 0.0) {
            let cur = self.current.entry(h.addr()).or_insert(0.0);
            *cur += weight(h);
            if best.is_none_or(|(_, b)| *cur > b) {
                best = Some((h, *cur));
            }
        }
        let (picked, _) = best?;
        *self.current.get_mut(&picked.addr()).expect("just inserted") -= total;
        Some(picked.clone())
    }
}

/// Round-robin positions, per service and filter (the caller's key). Bounded: cleared
/// when it grows past [`MAX_BALANCERS`] (positions restart, which round-robin
/// tolerates). Not a copy of the registry: each pick chooses among the hosts it is given.
#[derive(Clone, Default)]
pub struct Balancers(Arc<DashMap<String, Mutex<RoundRobin>>>);

/// Most round-robin positions kept.
const MAX_BALANCERS: usize = 10_000;

impl Balancers {
    /// The next round-robin pick among `hosts` for the filter named `id`.
    pub fn next(&self, id: String, hosts: &[Arc<Instance>]) -> Option<Arc<Instance>> {
        if self.0.len() > MAX_BALANCERS {
            self.0.clear();
        }
        let rr = self.0.entry(id).or_default();
        let picked = rr.lock().next(hosts);
        picked
    }
}

/// The instance `key` hashes to: the highest weighted rendezvous score.
pub fn consistent_hash(hosts: &[Arc<Instance>], key: &str) -> Option<Arc<Instance>> {
    let base = stable_hash(key.as_bytes());
    hosts
        .iter()
        .filter(|h| weight(h) > 0.0)
        .map(|h| {
            let addr = stable_hash(h.address.as_bytes());
            let bits = mix(base ^ mix(addr));
            // Uniform in (0, 1): never 0 or 1, so the logarithm is finite and negative.
            let u = ((bits >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            (h, -weight(h) / u.ln())
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(h, _)| h.clone())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::instance::sample;

    fn host(port: u16, weight: f64) -> Arc<Instance> {
        Arc::new(Instance {
            weight,
            ..sample(port)
        })
    }

    fn shares(picks: impl Iterator<Item = Arc<Instance>>, n: usize) -> BTreeMap<u16, f64> {
        let mut counts: BTreeMap<u16, f64> = BTreeMap::new();
        for p in picks {
            *counts.entry(p.port).or_default() += 1.0;
        }
        counts.values_mut().for_each(|c| *c /= n as f64);
        counts
    }

    #[test]
    fn weighted_random_follows_weights() {
        let hosts = [host(1, 1.0), host(2, 3.0), host(3, 0.0), host(4, 6.0)];
        let n = 10_000;
        // An evenly spread r covers the interval exactly; shares equal weights.
        let s = shares(
            (0..n).map(|i| weighted_random(&hosts, (i as f64 + 0.5) / n as f64).unwrap()),
            n,
        );
        assert!(
            (s[&1] - 0.1).abs() < 0.001
                && (s[&2] - 0.3).abs() < 0.001
                && (s[&4] - 0.6).abs() < 0.001,
            "{s:?}"
        );
        assert!(!s.contains_key(&3), "weight 0 is never picked");
        assert!(weighted_random(&[host(1, 0.0)], 0.5).is_none());
    }

    #[test]
    fn round_robin_interleaves_by_weight() {
        let hosts = [host(1, 5.0), host(2, 1.0), host(3, 1.0)];
        let mut rr = RoundRobin::default();
        let seq: Vec<u16> = (0..7).map(|_| rr.next(&hosts).unwrap().port).collect();
        // nginx's example: a a b a c a a (smooth, not a a a a a b c).
        assert_eq!(seq, [1, 1, 2, 1, 3, 1, 1]);
        let s = shares((0..7000).map(|_| rr.next(&hosts).unwrap()), 7000);
        assert!((s[&1] - 5.0 / 7.0).abs() < 0.001);
    }

    #[test]
    fn consistent_hash_is_stable_and_moves_only_the_removed_instances_keys() {
        let hosts: Vec<_> = (1..=5).map(|p| host(p, 1.0)).collect();
        let keys: Vec<String> = (0..2000).map(|i| format!("user-{i}")).collect();
        let before: Vec<u16> = keys
            .iter()
            .map(|k| consistent_hash(&hosts, k).unwrap().port)
            .collect();
        let again: Vec<u16> = keys
            .iter()
            .map(|k| consistent_hash(&hosts, k).unwrap().port)
            .collect();
        assert_eq!(before, again);
        let without_3: Vec<_> = hosts.iter().filter(|h| h.port != 3).cloned().collect();
        for (k, b) in keys.iter().zip(&before) {
            let after = consistent_hash(&without_3, k).unwrap().port;
            if *b != 3 {
                assert_eq!(after, *b, "{k} moved although its instance stayed");
            }
        }
        let s = shares(
            keys.iter().map(|k| consistent_hash(&hosts, k).unwrap()),
            keys.len(),
        );
        assert!(s.values().all(|v| (v - 0.2).abs() < 0.04), "spread: {s:?}");
    }
}
