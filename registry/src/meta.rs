//! Instance metadata as the registry holds it: compact, and shared where it repeats.
//!
//! Real clients send metadata with every instance, and most of it repeats: a Spring
//! Cloud Alibaba fleet sends the same two or three keys and values from every instance,
//! a Dubbo 3 provider nine keys of which only `timestamp` differs between the
//! instances of one application. A `BTreeMap<String, String>` per instance cost about
//! 1,300 bytes for the Dubbo shape (a B-tree leaf and eighteen strings); a [`Meta`]
//! costs about 60 (one that differs from a recent map in its timestamp), and nothing
//! when an equal map is held already:
//!
//! - a map equal to one recently made is the same allocation ([`Meta::new`] looks it up
//!   by content);
//! - the sorted key list is one shared allocation per distinct set of keys;
//! - a value of at most [`INLINE`] bytes (`true`, a port, a 13-digit timestamp) is held
//!   inline in its 16-byte slot; a longer one (a revision hash, a JSON endpoint list) is
//!   shared among equal values;
//! - a map of [`DELTA_MIN`] or more entries that differs in one value from a map made
//!   recently (the Dubbo instances of one application: all but `timestamp`) holds that
//!   map and its one value, ~56 bytes, instead of a slot per value (~184 bytes).
//!
//! Sharing goes through small direct-mapped tables of weak references ([`Recent`]):
//! bounded in size whatever is registered, no sweeping, and a miss only costs a copy.
//! The order of entries is the keys' byte order, as a `BTreeMap<String, String>`
//! iterates, so every answer serializes exactly as before.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// Metadata as clients send it and the API reads it: string keys to string values,
/// ordered for stable output. Instances hold it as a [`Meta`].
pub type Metadata = BTreeMap<String, String>;

/// Longest value held inline in its slot.
pub const INLINE: usize = 14;

/// Slots of the table of recently made maps.
const MAP_SLOTS: usize = 4096;
/// Slots of the table of long values. Each application brings a few long values of its
/// own (a Dubbo revision): two live values in one slot evict each other on every
/// registration that alternates between them, and then each instance keeps a copy of
/// its own. 16,384 slots (256 KiB) keep that rare up to a few thousand applications.
const VALUE_SLOTS: usize = 16_384;
/// Slots of the table of key lists.
const KEY_SLOTS: usize = 256;
/// Slots of the table of maps that others may differ from in one value ([`Values::Delta`]):
/// each such map takes one slot per entry (one per value it could differ in), so 16,384
/// slots (256 KiB) hold the bases of about a thousand nine-key applications.
const BASE_SLOTS: usize = 16_384;
/// Fewest entries for which a map is held as another map and one value: below it a
/// full slot per value costs about as much.
pub const DELTA_MIN: usize = 4;

/// Reading metadata by key, whichever way it is held.
pub trait Lookup {
    /// The value of `key`, if present.
    fn lookup(&self, key: &str) -> Option<&str>;
}

impl Lookup for Metadata {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// An instance's metadata: immutable, cheap to clone (one pointer), shared between
/// equal maps. Compares, serializes and prints as the map it holds.
#[derive(Clone)]
pub struct Meta(Arc<Body>);

struct Body {
    keys: Keys,
    values: Values,
}

/// The values of a [`Body`], the `i`th for `keys[i]`.
enum Values {
    /// Every value.
    Full(Box<[Value]>),
    /// The values of `base` (a full map of the same keys) but the one at `at`.
    Delta {
        base: Arc<Body>,
        value: Value,
        at: u32,
    },
}

/// A sorted list of distinct keys, shared by every map with exactly these keys.
#[derive(Clone)]
struct Keys(Arc<Box<[Box<str>]>>);

/// A value: inline when short, else a shared string.
#[derive(Clone)]
enum Value {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<Box<str>>),
}

impl Value {
    fn as_str(&self) -> &str {
        match self {
            Value::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).expect("copied from a str")
            }
            Value::Shared(s) => s,
        }
    }
}

/// A direct-mapped table of weak references to recently made `T`s: a lookup by hash
/// finds at most one candidate, a miss replaces it. Memory is bounded by the slot count
/// (a dead entry keeps only its allocation's header until replaced).
struct Recent<T> {
    slots: Box<[Mutex<Weak<T>>]>,
}

impl<T> Recent<T> {
    fn new(slots: usize) -> Self {
        Self {
            slots: (0..slots).map(|_| Mutex::new(Weak::new())).collect(),
        }
    }

    /// The live `T` in `hash`'s slot, if any.
    fn peek(&self, hash: u64) -> Option<Arc<T>> {
        self.slots[(hash as usize) % self.slots.len()]
            .lock()
            .upgrade()
    }

    /// Makes `held` the one in `hash`'s slot.
    fn remember(&self, hash: u64, held: &Arc<T>) {
        *self.slots[(hash as usize) % self.slots.len()].lock() = Arc::downgrade(held);
    }

    /// The live `T` in `hash`'s slot for which `same` holds, else `make()`, remembered.
    fn share(&self, hash: u64, same: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> Arc<T> {
        let mut slot = self.slots[(hash as usize) % self.slots.len()].lock();
        if let Some(held) = slot.upgrade().filter(|held| same(held)) {
            return held;
        }
        let made = Arc::new(make());
        *slot = Arc::downgrade(&made);
        made
    }
}

struct Tables {
    hasher: RandomState,
    maps: Recent<Body>,
    values: Recent<Box<str>>,
    keys: Recent<Box<[Box<str>]>>,
    /// Full maps by the hash of their keys and all their values but one, once per entry.
    bases: Recent<Body>,
    empty: Meta,
}

impl Tables {
    fn new() -> Self {
        Tables {
            hasher: RandomState::new(),
            maps: Recent::new(MAP_SLOTS),
            values: Recent::new(VALUE_SLOTS),
            keys: Recent::new(KEY_SLOTS),
            bases: Recent::new(BASE_SLOTS),
            empty: Meta(Arc::new(Body {
                keys: Keys(Arc::new(Box::new([]))),
                values: Values::Full(Box::new([])),
            })),
        }
    }
}

/// The tables every thread shares.
#[cfg(not(test))]
fn tables() -> &'static Tables {
    static TABLES: std::sync::LazyLock<Tables> = std::sync::LazyLock::new(Tables::new);
    &TABLES
}

/// In unit tests, each test's thread has tables of its own: a test of what is shared
/// (a delta's base, a shared value) must not see another test, running beside it, take
/// its slots. A test thread's tables live until the process ends.
#[cfg(test)]
fn tables() -> &'static Tables {
    thread_local! {
        static OWN: &'static Tables = Box::leak(Box::new(Tables::new()));
    }
    OWN.with(|own| *own)
}

impl Meta {
    /// `metadata` as held: an equal map made recently is shared, and so are the key
    /// list and the long values of a new one.
    pub fn new(metadata: &Metadata) -> Self {
        let pairs: Pairs<'_> = metadata
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Self::from_sorted(&pairs)
    }

    /// [`Meta::new`] of entries sorted by key, keys distinct.
    fn from_sorted(pairs: &[(&str, &str)]) -> Self {
        let tables = tables();
        if pairs.is_empty() {
            return tables.empty.clone();
        }
        let mut map_hash = tables.hasher.build_hasher();
        for (k, v) in pairs {
            k.hash(&mut map_hash);
            v.hash(&mut map_hash);
        }
        // The key list and the values are looked up only for a map not held already.
        let keys_hash = || {
            let mut hash = tables.hasher.build_hasher();
            pairs.iter().for_each(|(k, _)| k.hash(&mut hash));
            hash.finish()
        };
        // Each key and value hashed once, for the bases table (maps of DELTA_MIN or more).
        let mut hashes: Option<PairHashes> = None;
        let mut full = false;
        let body = tables.maps.share(
            map_hash.finish(),
            |held| held.same_as(pairs.iter().copied()),
            || {
                let keys = Keys(tables.keys.share(
                    keys_hash(),
                    |held| held.iter().map(|k| &**k).eq(pairs.iter().map(|(k, _)| *k)),
                    || pairs.iter().map(|(k, _)| (*k).into()).collect(),
                ));
                if pairs.len() >= DELTA_MIN {
                    let hashes = hashes.insert(pair_hashes(tables, pairs));
                    if let Some(delta) = delta_of(tables, &keys, pairs, hashes) {
                        return delta;
                    }
                }
                full = true;
                Body {
                    keys,
                    values: Values::Full(pairs.iter().map(|(_, v)| value(tables, v)).collect()),
                }
            },
        );
        if let Some(hashes) = hashes.filter(|_| full) {
            // Maps that differ from this one in one value will be held as this one.
            for at in 0..pairs.len() {
                tables.bases.remember(all_but(tables, &hashes, at), &body);
            }
        }
        Meta(body)
    }

    /// The shared empty map.
    pub fn empty() -> Self {
        tables().empty.clone()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        let at = self.0.keys.0.binary_search_by(|k| (**k).cmp(key)).ok()?;
        Some(self.0.value(at).as_str())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.0.iter()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.keys.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.keys.0.is_empty()
    }

    /// Whether this holds exactly `metadata`.
    pub fn same_as(&self, metadata: &Metadata) -> bool {
        self.0
            .same_as(metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// A plain map of the same entries.
    pub fn to_map(&self) -> Metadata {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl Body {
    /// The value of the `i`th key.
    fn value(&self, i: usize) -> &Value {
        match &self.values {
            Values::Full(values) => &values[i],
            Values::Delta { base, value, at } => {
                if i == *at as usize {
                    value
                } else {
                    base.value(i)
                }
            }
        }
    }

    /// Entries in key order.
    fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.keys
            .0
            .iter()
            .enumerate()
            .map(|(i, k)| (&**k, self.value(i).as_str()))
    }

    /// Whether this holds exactly the entries `pairs` gives, in key order.
    fn same_as<'a>(&self, pairs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> bool {
        self.keys.0.len() == pairs.len()
            && self
                .iter()
                .zip(pairs)
                .all(|((k, v), (mk, mv))| k == mk && v == mv)
    }
}

/// The hash of each key and of each value of a map, in key order.
type PairHashes = SmallVec<[(u64, u64); 16]>;

/// [`PairHashes`] of `pairs`: every string hashed once, however many positions
/// [`all_but`] is then asked for.
fn pair_hashes(tables: &Tables, pairs: &[(&str, &str)]) -> PairHashes {
    pairs
        .iter()
        .map(|(k, v)| (tables.hasher.hash_one(k), tables.hasher.hash_one(v)))
        .collect()
}

/// The hash of a map's keys and of every value but the one at `at`, from its
/// [`pair_hashes`]: maps that differ only there hash alike.
fn all_but(tables: &Tables, hashes: &[(u64, u64)], at: usize) -> u64 {
    let mut hash = tables.hasher.build_hasher();
    at.hash(&mut hash);
    for (i, (k, v)) in hashes.iter().enumerate() {
        k.hash(&mut hash);
        if i != at {
            v.hash(&mut hash);
        }
    }
    hash.finish()
}

/// `pairs` (keys `keys`, hashes `hashes`) as a recently made full map and the one value
/// they differ in, if there is such a map.
fn delta_of(
    tables: &Tables,
    keys: &Keys,
    pairs: &[(&str, &str)],
    hashes: &[(u64, u64)],
) -> Option<Body> {
    (0..pairs.len()).find_map(|at| {
        let base = tables.bases.peek(all_but(tables, hashes, at))?;
        let full = matches!(base.values, Values::Full(_)) && Arc::ptr_eq(&base.keys.0, &keys.0);
        let same_elsewhere = || {
            base.iter()
                .zip(pairs)
                .enumerate()
                .all(|(i, ((_, held), (_, v)))| i == at || held == *v)
        };
        (full && same_elsewhere()).then(|| Body {
            keys: keys.clone(),
            values: Values::Delta {
                value: value(tables, pairs[at].1),
                base,
                at: at as u32,
            },
        })
    })
}

/// Entries as `&str` pairs, on the stack for the sizes clients send.
type Pairs<'a> = SmallVec<[(&'a str, &'a str); 16]>;

/// `v` inline when short, else shared with an equal long value made recently.
fn value(tables: &Tables, v: &str) -> Value {
    if v.len() <= INLINE {
        let mut bytes = [0u8; INLINE];
        bytes[..v.len()].copy_from_slice(v.as_bytes());
        return Value::Inline {
            len: v.len() as u8,
            bytes,
        };
    }
    Value::Shared(
        tables
            .values
            .share(tables.hasher.hash_one(v), |held| **held == *v, || v.into()),
    )
}

impl Default for Meta {
    fn default() -> Self {
        Self::empty()
    }
}

impl Lookup for Meta {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.iter().eq(other.iter())
    }
}

impl Eq for Meta {}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Meta {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// Deserializes as a map would (a key given twice keeps its last value), reading keys
/// and values in place where the format allows (MessagePack from a peer, JSON without
/// escapes) rather than making a `String` of each: a starting node decodes every
/// instance of the cluster.
impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetaVisitor)
    }
}

struct MetaVisitor;

impl<'de> serde::de::Visitor<'de> for MetaVisitor {
    type Value = Meta;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map of strings to strings")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
        let mut entries: SmallVec<[(Text<'de>, Text<'de>); 16]> = SmallVec::new();
        while let Some(entry) = map.next_entry::<Text<'de>, Text<'de>>()? {
            entries.push(entry);
        }
        // Stable: of a key given twice, the last stays last.
        entries.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let mut pairs: Pairs<'_> = SmallVec::with_capacity(entries.len());
        for (i, (k, v)) in entries.iter().enumerate() {
            let later = entries
                .get(i + 1)
                .is_some_and(|next| next.0.as_str() == k.as_str());
            if !later {
                pairs.push((k.as_str(), v.as_str()));
            }
        }
        Ok(Meta::from_sorted(&pairs))
    }
}

/// A string as the deserializer has it: borrowed from the input where it can be.
struct Text<'de>(std::borrow::Cow<'de, str>);

impl Text<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> serde::de::Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(v)))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

impl From<&Metadata> for Meta {
    fn from(metadata: &Metadata) -> Self {
        Meta::new(metadata)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Metadata {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_as_the_map_it_was_made_from() {
        let m = map(&[
            ("timestamp", "1764633600037"),
            ("dubbo.endpoints", r#"[{"port":20880,"protocol":"dubbo"}]"#),
            ("side", "provider"),
            ("", "empty key"),
            ("exactly14bytes", "abcdefghijklmn"),
            ("fifteen", "abcdefghijklmno"),
            ("ünïcödé", "välüe"),
        ]);
        let held = Meta::new(&m);
        assert_eq!(held.len(), m.len());
        assert!(!held.is_empty());
        for (k, v) in &m {
            assert_eq!(held.get(k), Some(v.as_str()), "{k}");
            assert!(held.contains_key(k));
        }
        assert_eq!(held.get("absent"), None);
        assert_eq!(held.to_map(), m);
        assert!(held.same_as(&m));
        assert!(held.iter().map(|(k, _)| k).eq(m.keys().map(String::as_str)));
        // Serializes exactly as the map does, through JSON and MessagePack.
        assert_eq!(
            serde_json::to_string(&held).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
        let packed = rmp_serde::to_vec_named(&held).unwrap();
        assert_eq!(packed, rmp_serde::to_vec_named(&m).unwrap());
        let back: Meta = rmp_serde::from_slice(&packed).unwrap();
        assert_eq!(back, held);
        assert_eq!(format!("{held:?}"), format!("{m:?}"));
    }

    #[test]
    fn equal_maps_share_one_allocation_and_long_values_are_shared() {
        let spring = map(&[
            ("preserved.register.source", "SPRING_CLOUD"),
            ("management.port", "8081"),
        ]);
        let (a, b) = (Meta::new(&spring), Meta::new(&spring.clone()));
        assert!(Arc::ptr_eq(&a.0, &b.0), "an equal map is the same one");
        let revision = "7f6a9a1c2b3d4e5f60718293a4b5c6d7";
        let one = Meta::new(&map(&[("rev", revision), ("timestamp", "1764633600000")]));
        let two = Meta::new(&map(&[("rev", revision), ("timestamp", "1764633600037")]));
        assert!(!Arc::ptr_eq(&one.0, &two.0));
        assert_ne!(one, two);
        assert!(Arc::ptr_eq(&one.0.keys.0, &two.0.keys.0), "one key list");
        match (one.0.value(0), two.0.value(0)) {
            (Value::Shared(x), Value::Shared(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("a 32-byte value is shared, not inline"),
        }
        assert!(matches!(one.0.value(1), Value::Inline { len: 13, .. }));
        // The empty map is one allocation too.
        assert!(Arc::ptr_eq(
            &Meta::new(&Metadata::new()).0,
            &Meta::empty().0
        ));
    }

    #[test]
    fn a_slot_taken_by_another_map_still_gives_equal_maps() {
        // Whatever the tables hold, a made map equals its source: fill them with many
        // distinct maps and make the first again.
        let first = map(&[("k", "value that is long enough to share")]);
        let held = Meta::new(&first);
        for i in 0..(MAP_SLOTS * 2) {
            let _ = Meta::new(&map(&[("k", &format!("distinct value number {i}"))]));
        }
        let again = Meta::new(&first);
        assert_eq!(again, held);
        assert!(again.same_as(&first));
    }

    #[test]
    fn slots_stay_small() {
        // An instance holds one pointer; a value is 16 bytes, inline text included (see
        // the module's figures).
        assert_eq!(std::mem::size_of::<Meta>(), 8);
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert_eq!(std::mem::size_of::<Body>(), 40);
    }

    /// A Dubbo 3 provider's map, its timestamp `t`, its application `app`.
    fn dubbo(app: &str, t: u64) -> Metadata {
        map(&[
            ("application", app),
            ("dubbo.endpoints", r#"[{"port":20880,"protocol":"dubbo"}]"#),
            (
                "dubbo.metadata.revision",
                "7f6a9a1c2b3d4e5f60718293a4b5c6d7",
            ),
            ("dubbo.metadata.storage-type", "local"),
            ("side", "provider"),
            ("timestamp", &t.to_string()),
        ])
    }

    #[test]
    fn maps_that_differ_in_one_value_hold_the_first_and_that_value() {
        let first = Meta::new(&dubbo("orders", 1_764_633_600_000));
        assert!(matches!(first.0.values, Values::Full(_)));
        // Another application in between takes nothing away.
        let other = Meta::new(&dubbo("payments", 1_700_000_000_000));
        let mut held = Vec::new();
        for t in 1..50 {
            let m = dubbo("orders", 1_764_633_600_000 + t);
            let meta = Meta::new(&m);
            match &meta.0.values {
                Values::Delta { base, at, .. } => {
                    assert!(Arc::ptr_eq(base, &first.0), "held as the first map");
                    assert_eq!(*at, 5, "the timestamp");
                }
                Values::Full(_) => panic!("{t}: a full copy"),
            }
            // It reads, compares and serializes as the map it was made from.
            assert!(meta.same_as(&m));
            assert_eq!(meta.to_map(), m);
            assert_eq!(meta.get("timestamp"), Some(m["timestamp"].as_str()));
            assert_eq!(meta.get("side"), Some("provider"));
            assert_eq!(meta, Meta::new(&m));
            assert_ne!(meta, first);
            assert_eq!(
                serde_json::to_string(&meta).unwrap(),
                serde_json::to_string(&m).unwrap()
            );
            let packed = rmp_serde::to_vec_named(&meta).unwrap();
            assert_eq!(rmp_serde::from_slice::<Meta>(&packed).unwrap().to_map(), m);
            held.push(meta);
        }
        // The other application's map is full (it differs in two values), and so is one
        // differing in two values from the first.
        assert!(matches!(other.0.values, Values::Full(_)));
        let mut two = dubbo("orders", 1_764_633_600_999);
        two.insert("side".into(), "consumer".into());
        let two_meta = Meta::new(&two);
        assert!(matches!(two_meta.0.values, Values::Full(_)));
        assert_eq!(two_meta.to_map(), two);
        // A delta outlives its base's own instance.
        drop(first);
        assert_eq!(held[0].get("application"), Some("orders"));
        // Maps too small for a delta stay full.
        let small = Meta::new(&map(&[("a", "1"), ("timestamp", "1")]));
        let small2 = Meta::new(&map(&[("a", "1"), ("timestamp", "2")]));
        assert!(matches!(small.0.values, Values::Full(_)));
        assert!(matches!(small2.0.values, Values::Full(_)));
    }

    proptest! {
        #[test]
        fn any_map_round_trips(
            pairs in proptest::collection::btree_map(".{0,20}", ".{0,40}", 0..12),
            probe in ".{0,20}",
        ) {
            let held = Meta::new(&pairs);
            prop_assert_eq!(held.to_map(), pairs.clone());
            prop_assert!(held.same_as(&pairs));
            prop_assert_eq!(held.get(&probe), pairs.get(&probe).map(String::as_str));
            prop_assert_eq!(Meta::new(&pairs), held.clone());
            prop_assert_eq!(
                serde_json::to_string(&held).unwrap(),
                serde_json::to_string(&pairs).unwrap()
            );
            let packed = rmp_serde::to_vec_named(&held).unwrap();
            prop_assert_eq!(rmp_serde::from_slice::<Meta>(&packed).unwrap(), held.clone());
            prop_assert_eq!(packed, rmp_serde::to_vec_named(&pairs).unwrap());
        }

        /// Maps made one after another, each the last with one value changed (and
        /// sometimes two): each is held as a recent map and one value, or whole, and
        /// reads, compares and serializes as the map it was made from.
        #[test]
        fn maps_that_differ_in_one_value_round_trip(
            base in proptest::collection::btree_map("[a-f]{1,3}", ".{0,20}", DELTA_MIN..10),
            changes in proptest::collection::vec((any::<usize>(), ".{0,20}", any::<bool>()), 1..30),
        ) {
            let keys: Vec<String> = base.keys().cloned().collect();
            let mut m = base.clone();
            let mut held = vec![(Meta::new(&m), m.clone())];
            for (at, value, twice) in changes {
                m.insert(keys[at % keys.len()].clone(), value.clone());
                if twice {
                    m.insert(keys[(at + 1) % keys.len()].clone(), value);
                }
                held.push((Meta::new(&m), m.clone()));
            }
            for (meta, m) in &held {
                prop_assert_eq!(meta.to_map(), m.clone());
                prop_assert!(meta.same_as(m));
                prop_assert_eq!(meta.len(), m.len());
                for (k, v) in m {
                    prop_assert_eq!(meta.get(k), Some(v.as_str()));
                }
                prop_assert_eq!(meta, &Meta::new(m));
                prop_assert_eq!(
                    serde_json::to_string(meta).unwrap(),
                    serde_json::to_string(m).unwrap()
                );
            }
        }

        /// Decoded in place, entries in any order, keys repeated: the map a
        /// `BTreeMap` would build (the last value of a key wins).
        #[test]
        fn decodes_as_a_map_would(
            entries in proptest::collection::vec(("[a-c\\\\\"é]{0,3}", ".{0,20}"), 0..10),
        ) {
            let mut want = Metadata::new();
            let mut json = String::from("{");
            for (i, (k, v)) in entries.iter().enumerate() {
                want.insert(k.clone(), v.clone());
                if i > 0 {
                    json.push(',');
                }
                json += &format!("{}:{}", serde_json::json!(k), serde_json::json!(v));
            }
            json.push('}');
            let got: Meta = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(got.to_map(), want.clone());
            prop_assert_eq!(got, Meta::new(&want));
        }
    }

    #[test]
    fn refuses_what_is_not_a_map_of_strings() {
        assert!(serde_json::from_str::<Meta>(r#"{"a":1}"#).is_err());
        assert!(serde_json::from_str::<Meta>(r#"["a","b"]"#).is_err());
        assert!(serde_json::from_str::<Meta>("{}").unwrap().is_empty());
    }
}
