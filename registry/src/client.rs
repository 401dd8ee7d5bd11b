//! Clients: the unit Distro replicates. An HTTP-beat client is one instance address
//! (`ip:port`), which may have ephemeral instances in several services; a gRPC client is
//! one connection (`g:<node>:<connection id>`), which may hold several instances per
//! service. The registry keeps, per client, its instances (service and address) and a
//! revision that grows with every change made here, so that copies on other nodes can be
//! compared and replaced wholesale.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use tokio::sync::Notify;

use super::instance::Instance;
use super::service::ServiceKey;

/// Whether `id` names a gRPC connection client (`g:<node>:<connection>`), whose
/// instances live as long as the connection and carry no beat clock; an address client
/// is `ip:port` (a host named `g` gives `g:<port>`, with no second colon).
pub fn is_connection(id: &str) -> bool {
    id.strip_prefix("g:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(node, _)| !node.is_empty() && node.bytes().all(|b| b.is_ascii_digit()))
}

/// One instance of a client: its service's key (shared with the service) and address.
pub type Entry = (Arc<ServiceKey>, Arc<str>);

/// A client's instances: service and address, sorted. Most clients hold one, which is
/// kept inline in the client's record: no allocation of its own (a vector's was 80
/// bytes per client, a `BTreeSet`'s first node ~720).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entries(SmallVec<[Entry; 1]>);

/// Orders an entry against a service key and address without building an entry.
fn cmp_entry(e: &Entry, key: &ServiceKey, addr: &str) -> std::cmp::Ordering {
    (&*e.0, &*e.1).cmp(&(key, addr))
}

impl Entries {
    /// Adds an entry (no duplicates).
    pub fn insert(&mut self, key: &Arc<ServiceKey>, addr: &Arc<str>) {
        if let Err(at) = self.0.binary_search_by(|e| cmp_entry(e, key, addr)) {
            self.0.insert(at, (key.clone(), addr.clone()));
        }
    }

    /// Removes an entry if present.
    pub fn remove(&mut self, key: &ServiceKey, addr: &str) {
        if let Ok(at) = self.0.binary_search_by(|e| cmp_entry(e, key, addr)) {
            self.0.remove(at);
            self.0.shrink_to_fit();
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The entries, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Entry> {
        self.0.iter()
    }

    /// The entries in service `key`, in order (found by binary search: they are
    /// together).
    pub fn of_service(&self, key: &ServiceKey) -> &[Entry] {
        let start = self.0.partition_point(|e| &*e.0 < key);
        let len = self.0[start..].partition_point(|e| &*e.0 == key);
        &self.0[start..start + len]
    }
}

impl FromIterator<Entry> for Entries {
    fn from_iter<I: IntoIterator<Item = Entry>>(iter: I) -> Self {
        let mut v: SmallVec<[Entry; 1]> = iter.into_iter().collect();
        v.sort();
        v.dedup();
        v.shrink_to_fit();
        Self(v)
    }
}

impl<'a> IntoIterator for &'a Entries {
    type Item = &'a Entry;
    type IntoIter = std::slice::Iter<'a, Entry>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// What the registry knows of one client.
#[derive(Clone, Debug, Default)]
pub struct ClientRecord {
    /// Grows with every change; copies with a lower revision are older.
    pub revision: u64,
    /// The client's ephemeral instances: service and address (empty: a deletion, kept a
    /// while so that the deletion replicates).
    pub entries: Entries,
    /// When this copy was last written or confirmed by its owner, wall-clock ms.
    pub confirmed_ms: u64,
}

/// What Distro's rounds need of a client: see [`Clients::summaries`].
#[derive(Clone, Debug)]
pub struct ClientSummary {
    /// The client id.
    pub id: Arc<str>,
    /// Its revision.
    pub revision: u64,
    /// When its copy was last written or confirmed, wall-clock ms.
    pub confirmed_ms: u64,
    /// Whether it holds instances (false: a deletion kept to replicate).
    pub held: bool,
}

/// A client's whole state, as it travels between nodes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientData {
    /// The client id: `ip:port`, or `g:<node>:<connection>`.
    pub id: String,
    /// Its revision.
    pub revision: u64,
    /// The newest beat the sender saw, wall-clock ms.
    pub last_beat_ms: u64,
    /// Its instances; empty when the client was removed.
    pub instances: Vec<(ServiceKey, Instance)>,
}

/// A client's whole state as this node sends it (a Distro push, a snapshot part):
/// [`ClientData`]'s shape on the wire, holding the registry's own instances and keys
/// rather than copies of them.
#[derive(Clone, Debug, Serialize)]
pub struct ClientShare {
    /// The client id.
    pub id: Arc<str>,
    /// Its revision.
    pub revision: u64,
    /// The newest beat this node saw, wall-clock ms.
    pub last_beat_ms: u64,
    /// Its instances, as the services hold them.
    pub instances: Vec<(Arc<ServiceKey>, Arc<Instance>)>,
}

impl ClientShare {
    /// The same state as a peer receives it.
    pub fn to_data(&self) -> ClientData {
        ClientData {
            id: self.id.to_string(),
            revision: self.revision,
            last_beat_ms: self.last_beat_ms,
            instances: self
                .instances
                .iter()
                .map(|(k, i)| (ServiceKey::clone(k), Instance::clone(i)))
                .collect(),
        }
    }
}

/// The next revision after `current`: one more, and never below the clock (shifted so
/// that a thousand changes per millisecond stay ordered), so that a new owner's
/// revisions outgrow the old owner's.
pub fn next_revision(current: u64, now_ms: u64) -> u64 {
    (current + 1).max(now_ms << 10)
}

/// Every client and the ones changed here since Distro last looked.
#[derive(Default)]
pub struct Clients {
    records: DashMap<Arc<str>, ClientRecord>,
    /// Clients changed by this node (API calls, expiry) and not yet handed to Distro,
    /// as often as they changed: a push per change is cheaper than hashing each id
    /// again, and Distro takes them every 100 ms ([`Clients::drain_changed`] dedups).
    dirty: Mutex<Vec<Arc<str>>>,
    notify: Notify,
    /// Clients whose copy here lacks an instance because another client's copy held the
    /// same address when it came ([`crate::Registry::apply_client`]), with
    /// that copy as it came: it is taken again as soon as a client's instance leaves an
    /// address here (the old connection's copy giving the address up), and it is never
    /// confirmed, so its owner's next verification round sends it again too. Almost
    /// always empty (a client that moved to another node while its old connection's copy
    /// was still here), hence the flag read before the lock.
    shadowed: Mutex<HashMap<Arc<str>, Arc<ClientData>>>,
    any_shadowed: AtomicBool,
}

impl Clients {
    /// Records a local change of client `id`'s instance at `addr` in service `key`:
    /// present or gone.
    pub(crate) fn changed(
        &self,
        id: &Arc<str>,
        key: &Arc<ServiceKey>,
        addr: &Arc<str>,
        present: bool,
        now_ms: u64,
    ) {
        {
            let mut rec = self.records.entry(id.clone()).or_default();
            if present {
                rec.entries.insert(key, addr);
            } else {
                rec.entries.remove(key, addr);
            }
            rec.revision = next_revision(rec.revision, now_ms);
            rec.confirmed_ms = now_ms;
        }
        let was_empty = {
            let mut dirty = self.dirty.lock();
            let was_empty = dirty.is_empty();
            dirty.push(id.clone());
            was_empty
        };
        if was_empty {
            self.notify.notify_one();
        }
    }

    /// Sets a client's record from a copy received from its owner (whole: no longer
    /// shadowed).
    pub fn replace(&self, id: &Arc<str>, revision: u64, entries: Entries, now_ms: u64) {
        self.set_shadowed(id, None);
        self.records.insert(
            id.clone(),
            ClientRecord {
                revision,
                entries,
                confirmed_ms: now_ms,
            },
        );
    }

    /// The record of `id`.
    pub fn get(&self, id: &str) -> Option<ClientRecord> {
        self.records.get(id).map(|r| r.clone())
    }

    /// How many instances client `id` holds (0: unknown, or a deletion).
    pub fn instances_of(&self, id: &str) -> usize {
        self.records.get(id).map_or(0, |r| r.entries.len())
    }

    /// Records that this node's copy of `id` lacks an instance another client's copy
    /// holds, keeping `copy` to take again (see [`Clients::shadowed`]); `None`: it does
    /// not.
    pub(crate) fn set_shadowed(&self, id: &Arc<str>, copy: Option<Arc<ClientData>>) {
        if copy.is_none() && !self.any_shadowed.load(Ordering::Acquire) {
            return;
        }
        let mut shadowed = self.shadowed.lock();
        match copy {
            Some(copy) => {
                shadowed.insert(id.clone(), copy);
            }
            None => {
                shadowed.remove(id);
            }
        }
        self.any_shadowed
            .store(!shadowed.is_empty(), Ordering::Release);
    }

    /// The shadowed copies that are still this node's copy of their client (no other
    /// revision since), to take again.
    pub(crate) fn shadowed_copies(&self) -> Vec<Arc<ClientData>> {
        if !self.any_shadowed.load(Ordering::Acquire) {
            return Vec::new();
        }
        let copies: Vec<Arc<ClientData>> = self.shadowed.lock().values().cloned().collect();
        copies
            .into_iter()
            .filter(|c| {
                self.records
                    .get(c.id.as_str())
                    .is_some_and(|r| r.revision == c.revision)
            })
            .collect()
    }

    /// Whether this node's copy of `id` lacks an instance another client's copy holds.
    pub fn is_shadowed(&self, id: &str) -> bool {
        self.any_shadowed.load(Ordering::Acquire) && self.shadowed.lock().contains_key(id)
    }

    /// Marks the copy of `id` confirmed by its owner at `revision`; false if this node's
    /// copy has another revision, or lacks an instance another client's copy holds (so
    /// that the owner sends it again).
    pub fn confirm(&self, id: &str, revision: u64, now_ms: u64) -> bool {
        if self.is_shadowed(id) {
            return false;
        }
        match self.records.get_mut(id) {
            Some(mut r) if r.revision == revision => {
                r.confirmed_ms = now_ms;
                true
            }
            _ => false,
        }
    }

    /// Marks the copy of `id` as current without a revision check (this node just
    /// served the client itself, standing in for an unreachable owner).
    pub fn confirm_here(&self, id: &str, now_ms: u64) {
        if let Some(mut r) = self.records.get_mut(id) {
            r.confirmed_ms = now_ms;
        }
    }

    /// Every client's id, revision, confirmation time and whether it holds instances, in
    /// one pass and without copying entries (Distro's periodic rounds read this).
    pub fn summaries(&self) -> Vec<ClientSummary> {
        self.records
            .iter()
            .map(|r| ClientSummary {
                id: r.key().clone(),
                revision: r.revision,
                confirmed_ms: r.confirmed_ms,
                held: !r.entries.is_empty(),
            })
            .collect()
    }

    /// Runs `f` on the entries of client `id` without copying them (`f` must not touch
    /// the clients: a shard lock is held meanwhile).
    pub fn with_entries<R>(&self, id: &str, f: impl FnOnce(&Entries) -> R) -> Option<R> {
        self.records.get(id).map(|r| f(&r.entries))
    }

    /// Ids of every client (deleted ones included).
    pub fn ids(&self) -> Vec<Arc<str>> {
        self.records.iter().map(|r| r.key().clone()).collect()
    }

    /// Forgets deleted clients whose deletion is older than `keep_ms`.
    pub fn forget_deleted(&self, keep_ms: u64, now_ms: u64) {
        self.records
            .retain(|_, r| !r.entries.is_empty() || r.confirmed_ms + keep_ms > now_ms);
        if self.any_shadowed.load(Ordering::Acquire) {
            let mut shadowed = self.shadowed.lock();
            shadowed.retain(|id, _| self.records.contains_key(id));
            self.any_shadowed
                .store(!shadowed.is_empty(), Ordering::Release);
        }
    }

    /// Waits until a client changed here.
    pub async fn changed_here(&self) {
        loop {
            let notified = self.notify.notified();
            if !self.dirty.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Takes the clients changed here, each once, in order.
    pub fn drain_changed(&self) -> Vec<Arc<str>> {
        let mut ids = std::mem::take(&mut *self.dirty.lock());
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Number of clients with instances.
    pub fn live_count(&self) -> usize {
        self.records
            .iter()
            .filter(|r| !r.entries.is_empty())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_stays_small() {
        // One entry inline, no allocation: this record is per client, and most clients
        // are one instance (see the README's memory figures).
        assert_eq!(std::mem::size_of::<ClientRecord>(), 48);
    }

    #[test]
    fn connection_clients_are_told_from_address_clients() {
        assert!(is_connection("g:1:1733900000000_127.0.0.1_50012"));
        assert!(is_connection("g:12:x"));
        for address in ["127.0.0.1:8080", "g:8080", "g::x", "g:a:x", "[::1]:80", ""] {
            assert!(!is_connection(address), "{address}");
        }
    }

    #[test]
    fn a_services_entries_are_found_together() {
        let key = |name: &str| Arc::new(ServiceKey::new("public", "g", name));
        let (a, b, c) = (key("a"), key("b"), key("c"));
        let addr = |s: &str| -> Arc<str> { s.into() };
        let mut e = Entries::default();
        for (k, x) in [
            (&c, "127.0.0.1:1"),
            (&a, "127.0.0.1:2"),
            (&b, "127.0.0.1:3"),
        ] {
            e.insert(k, &addr(x));
        }
        e.insert(&b, &addr("127.0.0.1:1"));
        let of = |k: &ServiceKey| -> Vec<String> {
            e.of_service(k).iter().map(|(_, x)| x.to_string()).collect()
        };
        assert_eq!(of(&b), ["127.0.0.1:1", "127.0.0.1:3"]);
        assert_eq!(of(&a), ["127.0.0.1:2"]);
        assert_eq!(of(&c), ["127.0.0.1:1"]);
        assert!(of(&ServiceKey::new("public", "g", "bb")).is_empty());
        assert!(Entries::default().of_service(&a).is_empty());
    }

    #[test]
    fn entries_stay_sorted_and_unique() {
        let a = Arc::new(ServiceKey::new("public", "g", "a"));
        let b = Arc::new(ServiceKey::new("public", "g", "b"));
        let (x, y): (Arc<str>, Arc<str>) = ("10.0.0.1:1".into(), "10.0.0.1:2".into());
        let mut e = Entries::default();
        e.insert(&b, &x);
        e.insert(&a, &y);
        e.insert(&a, &x);
        e.insert(&b, &x);
        let listed: Vec<(&str, &str)> = e.iter().map(|(k, s)| (&*k.name, &**s)).collect();
        assert_eq!(
            listed,
            [
                ("a", "10.0.0.1:1"),
                ("a", "10.0.0.1:2"),
                ("b", "10.0.0.1:1")
            ]
        );
        // Collected entries come out sorted and unique, as inserted ones do.
        let collected: Entries = [
            (b.clone(), x.clone()),
            (a.clone(), y.clone()),
            (a.clone(), x.clone()),
            (a.clone(), y.clone()),
        ]
        .into_iter()
        .collect();
        assert_eq!(collected, e);
        // Removal matches by value (an equal key from elsewhere), and a missing entry
        // is no error.
        e.remove(&ServiceKey::new("public", "g", "a"), "10.0.0.1:2");
        e.remove(&a, "10.0.0.1:9");
        let listed: Vec<(&str, &str)> = e.iter().map(|(k, s)| (&*k.name, &**s)).collect();
        assert_eq!(listed, [("a", "10.0.0.1:1"), ("b", "10.0.0.1:1")]);
    }

    #[test]
    fn revisions_grow_and_follow_the_clock() {
        assert_eq!(next_revision(0, 1), 1 << 10);
        assert_eq!(next_revision(5_000, 1), 5_001);
        assert!(next_revision(next_revision(0, 100), 100) > next_revision(0, 100));
    }

    #[test]
    fn local_changes_are_marked_and_replicas_are_not() {
        let c = Clients::default();
        let id: Arc<str> = "10.0.0.1:80".into();
        let key = Arc::new(ServiceKey::new("public", "g", "s"));
        let other: Arc<str> = "10.0.0.2:80".into();
        c.changed(&id, &key, &id, true, 1);
        c.changed(&other, &key, &other, true, 1);
        c.changed(&id, &key, &id, true, 1);
        assert_eq!(c.drain_changed(), [id.clone(), other.clone()], "each once");
        assert!(c.drain_changed().is_empty());
        let rev = c.get("10.0.0.1:80").unwrap().revision;
        assert!(c.confirm("10.0.0.1:80", rev, 2));
        assert!(!c.confirm("10.0.0.1:80", rev + 1, 2));
        c.replace(&id, rev + 7, Entries::default(), 3);
        assert!(c.drain_changed().is_empty());
        c.forget_deleted(10, 12);
        assert!(c.get("10.0.0.1:80").is_some());
        c.forget_deleted(10, 13);
        assert!(c.get("10.0.0.1:80").is_none());
    }
}
