//! The instances of one service view: a persistent sorted sequence, keyed by `ip:port`.
//!
//! A service's writers change one copy in place and readers get published copies of it
//! (see [`super::service::Service`]), so a copy must be cheap; every instance is held
//! here, so each must cost little. A two-level structure does both: sorted chunks of at
//! most [`CHUNK`] instances, each behind an `Arc`. Copying copies the chunk pointers
//! (one per [`CHUNK`] instances); the first write to a chunk a published copy shares
//! copies that chunk, sized exactly, and later writes change it in place.
//!
//! Beside each instance pointer lies its address' first 16 bytes ([`Prefix`]), and
//! beside each chunk pointer its first instance's: a search compares those and reads an
//! address string only to confirm a match. Searching through the pointers instead cost
//! two cache misses per step (instance, then its address) and was a fifth of a
//! registration's CPU time with half a million instances. An instance costs its pointer,
//! its prefix and the chunk's slack — about 27 bytes, where a general persistent map
//! (`imbl::OrdMap`, whose every node has room for 64 entries and 65 children) cost about
//! 50 with the key beside it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::instance::Instance;

/// Most instances per chunk; a chunk that outgrows it splits in two.
const CHUNK: usize = 64;

/// A full chunk that takes another instance grows by its length over this.
const GROWTH: usize = 8;

/// An address' first 16 bytes, zero-padded, as two big-endian words: prefixes order as
/// their addresses do wherever they differ (a pad byte sorts below any byte it meets:
/// the shorter address is a prefix of the longer), and equal prefixes leave the order to
/// the whole strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Prefix([u64; 2]);

impl Prefix {
    fn of(addr: &str) -> Self {
        let mut bytes = [0u8; 16];
        let n = addr.len().min(16);
        bytes[..n].copy_from_slice(&addr.as_bytes()[..n]);
        let (hi, lo) = bytes.split_at(8);
        Self([
            u64::from_be_bytes(hi.try_into().expect("8 bytes")),
            u64::from_be_bytes(lo.try_into().expect("8 bytes")),
        ])
    }
}

/// Where an entry (its prefix, and its address read only if the prefixes tie) stands
/// against `addr`, whose prefix is `prefix`. The address comes from a closure so that
/// the search does not load it (a cache miss) for every step.
fn order<'a>(
    entry_prefix: Prefix,
    entry_addr: impl FnOnce() -> &'a str,
    prefix: Prefix,
    addr: &str,
) -> Ordering {
    entry_prefix
        .cmp(&prefix)
        .then_with(|| entry_addr().cmp(addr))
}

type Chunk = Vec<(Prefix, Arc<Instance>)>;

/// Where an address is, or would go, in one version of [`Instances`] (from
/// [`Instances::find`]): valid for [`Instances::put`] until that version is written to.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    chunk: usize,
    at: Result<usize, usize>,
}

/// Instances ordered by address (`ip:port` as a string, the order lists show).
#[derive(Debug, Default)]
pub struct Instances {
    /// Non-empty, sorted chunks, each with its first address' prefix; the first address
    /// of each is above every address of the previous one.
    chunks: Vec<(Prefix, Arc<Chunk>)>,
    len: usize,
    /// Instances with a beat clock that a write replaced while a published copy (or a
    /// reader) still held them: their clocks are carried over to the new versions once
    /// published (see [`Instances::take_replaced`]). A version nobody else held cannot
    /// have been beaten, so it is not kept: at most one entry per published instance.
    replaced: Vec<Arc<Instance>>,
}

impl Clone for Instances {
    /// A copy to publish: the same instances, nothing replaced.
    fn clone(&self) -> Self {
        Self {
            chunks: self.chunks.clone(),
            len: self.len,
            replaced: Vec::new(),
        }
    }
}

impl Instances {
    /// No instances.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunk that holds `addr` if any does (the last whose first address is not
    /// above it), and where in it `addr` is or would go; the start when there are no
    /// chunks.
    fn locate(&self, addr: &str) -> (usize, Result<usize, usize>) {
        if self.chunks.is_empty() {
            return (0, Err(0));
        }
        let prefix = Prefix::of(addr);
        let after = self
            .chunks
            .partition_point(|(p, c)| order(*p, || &c[0].1.address, prefix, addr).is_le())
            .max(1)
            - 1;
        let at = self.chunks[after]
            .1
            .binary_search_by(|(p, i)| order(*p, || &i.address, prefix, addr));
        (after, at)
    }

    /// The instance at `addr`.
    pub fn get(&self, addr: &str) -> Option<&Arc<Instance>> {
        self.find(addr).0
    }

    /// The instance at `addr`, and its slot for a [`Instances::put`] that follows (a
    /// write that reads first searches once).
    pub fn find(&self, addr: &str) -> (Option<&Arc<Instance>>, Slot) {
        let (chunk, at) = self.locate(addr);
        let found = at.ok().map(|at| &self.chunks[chunk].1[at].1);
        (found, Slot { chunk, at })
    }

    /// Inserts `instance` at its address, returning the one it replaced.
    pub fn insert(&mut self, instance: Arc<Instance>) -> Option<Arc<Instance>> {
        let slot = self.find(&instance.address).1;
        self.put(slot, instance)
    }

    /// Inserts `instance` at `slot`, which [`Instances::find`] gave for its address on
    /// this version; returns the one it replaced.
    pub fn put(&mut self, slot: Slot, instance: Arc<Instance>) -> Option<Arc<Instance>> {
        debug_assert_eq!(
            self.locate(&instance.address),
            (slot.chunk, slot.at),
            "a slot from another version or address"
        );
        let prefix = Prefix::of(&instance.address);
        if self.chunks.is_empty() {
            self.chunks
                .push((prefix, Arc::new(vec![(prefix, instance)])));
            self.len = 1;
            return None;
        }
        let (first, chunk) = &mut self.chunks[slot.chunk];
        match slot.at {
            Ok(at) => {
                let old = std::mem::replace(&mut own(chunk, 0)[at].1, instance);
                if old.clock().is_some() && Arc::strong_count(&old) > 1 {
                    self.replaced.push(old.clone());
                }
                Some(old)
            }
            Err(at) => {
                let c = own(chunk, 1);
                if c.len() == c.capacity() {
                    // Grown by an eighth, not doubled: chunks written in place would
                    // otherwise carry up to their size again in slack (a megabyte per
                    // 100,000 instances), for a reallocation every few inserts.
                    c.reserve_exact((c.len() / GROWTH).max(1));
                }
                c.insert(at, (prefix, instance));
                if at == 0 {
                    *first = prefix;
                }
                if c.len() > CHUNK {
                    let upper = c.split_off(c.len() / 2);
                    c.shrink_to_fit();
                    self.chunks
                        .insert(slot.chunk + 1, (upper[0].0, Arc::new(upper)));
                }
                self.len += 1;
                None
            }
        }
    }

    /// Removes the instance at `addr`, returning it.
    pub fn remove(&mut self, addr: &str) -> Option<Arc<Instance>> {
        let (chunk, Ok(at)) = self.locate(addr) else {
            return None;
        };
        self.len -= 1;
        let (first, c) = &mut self.chunks[chunk];
        if c.len() == 1 {
            let (_, c) = self.chunks.remove(chunk);
            return Some(c[0].1.clone());
        }
        let c = own(c, 0);
        let (_, old) = c.remove(at);
        c.shrink_to_fit();
        *first = c[0].0;
        Some(old)
    }

    /// Keeps the instances `keep` approves.
    pub fn retain(&mut self, mut keep: impl FnMut(&Arc<Instance>) -> bool) {
        let kept: Vec<Arc<Instance>> = self.values().filter(|i| keep(i)).cloned().collect();
        if kept.len() != self.len {
            *self = kept.into_iter().collect();
        }
    }

    /// Takes the instances with beat clocks that writes to this copy replaced.
    pub fn take_replaced(&mut self) -> Vec<Arc<Instance>> {
        std::mem::take(&mut self.replaced)
    }

    /// The instances, in address order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Arc<Instance>> + Clone + '_ {
        self.chunks
            .iter()
            .flat_map(|(_, c)| c.iter().map(|(_, i)| i))
    }
}

/// `chunk` for writing: a copy sized for `extra` more instances when a published view
/// shares it (the first write to it since the last publication).
fn own(chunk: &mut Arc<Chunk>, extra: usize) -> &mut Chunk {
    if Arc::get_mut(chunk).is_none() {
        let mut copy = Vec::with_capacity(chunk.len() + extra);
        copy.extend(chunk.iter().cloned());
        *chunk = Arc::new(copy);
    }
    Arc::get_mut(chunk).expect("just made unique")
}

impl FromIterator<Arc<Instance>> for Instances {
    /// Builds from instances in any order; a later one at an address replaces an earlier.
    fn from_iter<I: IntoIterator<Item = Arc<Instance>>>(iter: I) -> Self {
        let mut all: Vec<Arc<Instance>> = iter.into_iter().collect();
        // Stable: equal addresses keep their order, and the last of each run wins.
        all.sort_by(|a, b| a.address.cmp(&b.address));
        let mut unique: Vec<(Prefix, Arc<Instance>)> = Vec::with_capacity(all.len());
        for i in all {
            match unique.last_mut() {
                Some((_, last)) if last.address == i.address => *last = i,
                _ => unique.push((Prefix::of(&i.address), i)),
            }
        }
        let len = unique.len();
        let chunks = unique
            .chunks(CHUNK)
            .map(|c| (c[0].0, Arc::new(c.to_vec())))
            .collect();
        Self {
            chunks,
            len,
            replaced: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::{addr_key, sample};

    fn inst(port: u16, weight: f64) -> Arc<Instance> {
        Arc::new(Instance {
            weight,
            ..sample(port)
        })
    }

    fn ports(set: &Instances) -> Vec<u16> {
        set.values().map(|i| i.port).collect()
    }

    /// Ports whose `10.0.0.1:port` strings sort in the order the model (a sorted vector
    /// of strings) keeps.
    fn model_order(ports: &[u16]) -> Vec<u16> {
        let mut keyed: Vec<(String, u16)> = ports
            .iter()
            .map(|p| (format!("10.0.0.1:{p}"), *p))
            .collect();
        keyed.sort();
        keyed.dedup();
        keyed.into_iter().map(|(_, p)| p).collect()
    }

    #[test]
    fn inserts_and_removes_keep_address_order_across_chunks() {
        let mut set = Instances::new();
        let mut inserted = Vec::new();
        // A scrambled order over enough ports to split chunks several times.
        for n in 0..500u32 {
            let port = (n * 7919 % 1000) as u16 + 1;
            assert!(set.insert(inst(port, 1.0)).is_none());
            inserted.push(port);
        }
        assert_eq!(set.len(), 500);
        assert_eq!(ports(&set), model_order(&inserted));
        assert!(set
            .chunks
            .iter()
            .all(|(p, c)| !c.is_empty() && c.len() <= CHUNK && *p == c[0].0));

        // Replacing keeps the count and returns the old one.
        let old = set.insert(inst(inserted[10], 5.0)).unwrap();
        assert_eq!(old.weight, 1.0);
        let key = addr_key("10.0.0.1", inserted[10]);
        assert_eq!(set.get(&key).unwrap().weight, 5.0);
        assert_eq!(set.len(), 500);

        // Remove every other one.
        for port in inserted.iter().step_by(2) {
            assert!(set.remove(&addr_key("10.0.0.1", *port)).is_some());
        }
        assert!(set.remove("10.0.0.1:9999").is_none());
        let left: Vec<u16> = inserted.iter().skip(1).step_by(2).copied().collect();
        assert_eq!(ports(&set), model_order(&left));
        assert_eq!(set.len(), 250);
        for port in &left {
            assert!(set.get(&addr_key("10.0.0.1", *port)).is_some());
        }
        for port in inserted.iter().step_by(2) {
            assert!(set.get(&addr_key("10.0.0.1", *port)).is_none());
        }
        // Below the first and above the last.
        assert!(set.get("0").is_none());
        assert!(set.get("z").is_none());
    }

    #[test]
    fn prefixes_order_as_their_addresses_do() {
        let addrs = [
            "",
            "1",
            "10.0.0.1:80",
            "10.0.0.1:8",
            "10.0.0.1:800",
            "10.100.200.123:10001",
            "10.100.200.123:10002",
            "10.100.200.123:1000",
            "10.100.200.12:10001",
            "[fe80::1:2:3:4]:8080",
            "[fe80::1:2:3:4]:80",
            "host-with-a-long-name.example:80",
            "host-with-a-long-name.example",
            "a\0",
            "a",
        ];
        for a in addrs {
            for b in addrs {
                let by_prefix = order(Prefix::of(a), || a, Prefix::of(b), b);
                assert_eq!(by_prefix, a.cmp(b), "{a:?} against {b:?}");
                if Prefix::of(a) != Prefix::of(b) {
                    assert_eq!(
                        Prefix::of(a).cmp(&Prefix::of(b)),
                        a.cmp(b),
                        "{a:?} against {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn long_addresses_that_share_a_prefix_are_kept_apart() {
        // Addresses longer than a prefix, most of them sharing one: the search must fall
        // back to the whole string.
        let addr = |n: u32| format!("10.100.{}.{}:{}", 200 + n % 3, 100 + n % 7, 10000 + n);
        let mut set = Instances::new();
        let mut model = Vec::new();
        for n in 0..300u32 {
            let n = n * 7919 % 300;
            let a = addr(n);
            let inst = Arc::new(Instance {
                address: a.as_str().into(),
                ..sample(10000 + n as u16)
            });
            assert!(set.insert(inst).is_none());
            model.push(a);
        }
        model.sort();
        let held: Vec<&str> = set.values().map(|i| &*i.address).collect();
        assert_eq!(held, model);
        for a in &model {
            assert_eq!(&*set.get(a).unwrap().address, a.as_str());
        }
        for a in model.iter().step_by(3) {
            assert!(set.remove(a).is_some());
            assert!(set.get(a).is_none());
        }
        assert_eq!(set.len(), 200);
        assert!(set
            .chunks
            .iter()
            .all(|(p, c)| *p == c[0].0 && *p == Prefix::of(&c[0].1.address)));
    }

    #[test]
    fn find_then_put_writes_where_find_looked() {
        let mut set = Instances::new();
        let (none, slot) = set.find("10.0.0.1:5");
        assert!(none.is_none());
        set.put(slot, inst(5, 1.0));
        for port in (10..200).step_by(2) {
            let slot = set.find(&addr_key("10.0.0.1", port)).1;
            assert!(set.put(slot, inst(port, 1.0)).is_none());
        }
        // A new address between two others, then a replacement.
        let (none, slot) = set.find("10.0.0.1:101");
        assert!(none.is_none());
        set.put(slot, inst(101, 1.0));
        let (found, slot) = set.find("10.0.0.1:101");
        assert_eq!(found.unwrap().weight, 1.0);
        let old = set.put(slot, inst(101, 4.0)).unwrap();
        assert_eq!(old.weight, 1.0);
        assert_eq!(set.get("10.0.0.1:101").unwrap().weight, 4.0);
        assert_eq!(set.len(), 1 + 95 + 1);
        let mut expected: Vec<u16> = vec![5, 101];
        expected.extend((10..200).step_by(2));
        assert_eq!(ports(&set), model_order(&expected));
    }

    #[test]
    fn a_clone_is_unchanged_by_writes_to_the_original() {
        let mut set: Instances = (1..=200).map(|p| inst(p, 1.0)).collect();
        let before = set.clone();
        set.insert(inst(7, 9.0));
        set.remove("10.0.0.1:8");
        set.insert(inst(999, 1.0));
        assert_eq!(before.len(), 200);
        assert_eq!(before.get("10.0.0.1:7").unwrap().weight, 1.0);
        assert!(before.get("10.0.0.1:8").is_some());
        assert!(before.get("10.0.0.1:999").is_none());
        assert_eq!(set.get("10.0.0.1:7").unwrap().weight, 9.0);
        assert_eq!(set.len(), 200);
    }

    #[test]
    fn collecting_keeps_the_last_of_an_address_and_retain_filters() {
        let mut set: Instances = [inst(2, 1.0), inst(1, 1.0), inst(2, 3.0)]
            .into_iter()
            .collect();
        assert_eq!(ports(&set), [1, 2]);
        assert_eq!(set.get("10.0.0.1:2").unwrap().weight, 3.0);
        set.retain(|i| i.port != 1);
        assert_eq!(ports(&set), [2]);
        set.remove("10.0.0.1:2");
        assert!(set.is_empty() && set.chunks.is_empty());
    }
}
