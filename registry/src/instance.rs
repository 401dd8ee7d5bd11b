//! Instances: one address (`ip:port`) serving a service, with its weight, health and
//! metadata, and the heartbeat settings Nacos clients control through `preserved.*` keys.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

pub use super::meta::{Lookup, Meta, Metadata};

/// Metadata key: milliseconds between client beats.
pub const BEAT_INTERVAL_KEY: &str = "preserved.heart.beat.interval";
/// Metadata key: milliseconds of silence after which the instance is unhealthy.
pub const BEAT_TIMEOUT_KEY: &str = "preserved.heart.beat.timeout";
/// Metadata key: milliseconds of silence after which the instance is removed.
pub const DELETE_TIMEOUT_KEY: &str = "preserved.ip.delete.timeout";
/// Metadata key: how the instance id was generated.
pub const ID_GENERATOR_KEY: &str = "preserved.instance.id.generator";

/// Heartbeat timing of one instance, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// How often the client is told to beat.
    pub interval_ms: u64,
    /// Silence after which the instance turns unhealthy.
    pub timeout_ms: u64,
    /// Silence after which the instance is removed.
    pub delete_ms: u64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        // Nacos' defaults: beat every 5 s, unhealthy after 15 s, removed after 30 s.
        Self {
            interval_ms: 5_000,
            timeout_ms: 15_000,
            delete_ms: 30_000,
        }
    }
}

impl Heartbeat {
    /// Reads the `preserved.*` overrides from `metadata`; values that are not positive
    /// integers are ignored, as Nacos does.
    pub fn from_metadata(metadata: &impl Lookup) -> Self {
        let read = |key: &str, default: u64| {
            metadata
                .lookup(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let d = Self::default();
        Self {
            interval_ms: read(BEAT_INTERVAL_KEY, d.interval_ms),
            timeout_ms: read(BEAT_TIMEOUT_KEY, d.timeout_ms),
            delete_ms: read(DELETE_TIMEOUT_KEY, d.delete_ms),
        }
    }
}

/// Fields an operator set through an update; a re-registration by the client keeps them
/// (Nacos' "instance metadata" overlay, without its loss on restart for persistent data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    /// The weight was set by an update.
    pub weight: bool,
    /// The enabled flag was set by an update.
    pub enabled: bool,
    /// The metadata was set by an update.
    pub metadata: bool,
}

/// The liveness clock of an ephemeral instance, held in the instance itself. Beats store
/// into it without taking any lock on the service; the expiry sweep reads it. A new
/// version of an instance starts from the old one's clock, and no beat is lost to a
/// writer replacing the instance meanwhile: the writer carries the old clock over again
/// once the new version is published ([`super::service::Service::update`]), and a beat
/// that finds the view changed after storing stores again into the current version
/// ([`super::Registry::beat`]).
#[derive(Debug, Default)]
pub struct BeatClock {
    /// Wall-clock milliseconds of the last beat or registration.
    last_beat_ms: AtomicU64,
}

impl BeatClock {
    /// A clock whose last beat is `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Self {
            last_beat_ms: AtomicU64::new(now_ms),
        }
    }

    /// Records a beat at `now_ms` (never moves the clock backwards).
    pub fn beat(&self, now_ms: u64) {
        self.last_beat_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// When the instance was last heard from.
    pub fn last_beat_ms(&self) -> u64 {
        self.last_beat_ms.load(Ordering::Relaxed)
    }
}

impl Clone for BeatClock {
    /// A clock at the same time (clocks are copied, never shared).
    fn clone(&self) -> Self {
        Self::new(self.last_beat_ms())
    }
}

/// What keeps an instance alive. An address client's instance lives by the beats of its
/// address and carries their clock; a connection client's lives as long as its gRPC
/// connection and carries the connection's client id. An instance needs one or the
/// other, never both, so they share 16 bytes (see [`Instance`]'s size).
#[derive(Clone, Debug)]
pub enum Keeper {
    /// The clock of the address's beats (persistent instances carry one, unused, at 0).
    Beats(BeatClock),
    /// The client id of the gRPC connection that registered it.
    Connection(Arc<str>),
}

impl Keeper {
    /// The connection's, or else a beat clock at `last_beat_ms`.
    pub fn new(client: Option<Arc<str>>, last_beat_ms: u64) -> Self {
        match client {
            Some(client) => Keeper::Connection(client),
            None => Keeper::Beats(BeatClock::new(last_beat_ms)),
        }
    }
}

/// One instance of a service. Immutable once published in a service view (but for its
/// beat clock): changes replace the `Arc<Instance>`.
///
/// On the wire (snapshots, Distro) it travels as [`InstanceWire`], with `ip` as its own
/// field; in memory the address is one string, `ip:port`, which is also the instance's
/// key in its service and its client's id (shared, not copied).
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "InstanceWire")]
pub struct Instance {
    /// `ip:port` (see [`addr_key`]); [`Instance::ip`] is the part before the last colon.
    pub address: Arc<str>,
    /// Port.
    pub port: u16,
    /// Cluster name (`DEFAULT` unless given).
    pub cluster: ClusterName,
    /// Relative weight, 0 to 10000.
    pub weight: f64,
    /// Health: from beats for ephemeral instances, from checks or the API for persistent.
    pub healthy: bool,
    /// Disabled instances stay registered but are not returned to consumers.
    pub enabled: bool,
    /// Ephemeral (kept alive by beats, in memory) or persistent (Raft, on disk).
    pub ephemeral: bool,
    /// Free-form metadata, compact and shared where it repeats.
    pub metadata: Meta,
    /// Fields an operator update set, kept over re-registration.
    pub pinned: Pinned,
    /// What keeps it alive: its address's beats, or a gRPC connection.
    pub keeper: Keeper,
    /// Explicit id, importing task and beat timing: `None` when all are the defaults.
    pub rare: Option<Box<Rare>>,
}

/// The parts of an instance most instances leave at their defaults, boxed so that those
/// do not carry them (72 bytes of an instance's ~100).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rare {
    /// Instance id as the client gave it; `None` for the default
    /// `ip#port#cluster#group@@service`, made when shown (see [`Instance::id`]).
    pub instance_id: Option<Arc<str>>,
    /// The sync task that imported it and owns its lifetime; `None` for instances
    /// clients registered. Set only by the task's writes, never by an API.
    pub owner: Option<Arc<str>>,
    /// Heartbeat timing, from the `preserved.*` metadata.
    pub heartbeat: Heartbeat,
}

impl Rare {
    /// The box for these values, or `None` when they are all defaults.
    pub fn boxed(
        instance_id: Option<Arc<str>>,
        owner: Option<Arc<str>>,
        heartbeat: Heartbeat,
    ) -> Option<Box<Rare>> {
        let rare = Rare {
            instance_id,
            owner,
            heartbeat,
        };
        (rare != Rare::default()).then(|| Box::new(rare))
    }
}

impl Instance {
    /// The key of this instance within its service: `ip:port`.
    pub fn addr(&self) -> Arc<str> {
        self.address.clone()
    }

    /// IP address or host name.
    pub fn ip(&self) -> &str {
        ip_of(&self.address)
    }

    /// The beat clock, for an ephemeral instance of an address client (a connection
    /// client's instances live as long as the connection).
    pub fn clock(&self) -> Option<&BeatClock> {
        match &self.keeper {
            Keeper::Beats(clock) if self.ephemeral => Some(clock),
            _ => None,
        }
    }

    /// The client that owns it when that is not its address: a gRPC connection.
    pub fn client(&self) -> Option<&Arc<str>> {
        match &self.keeper {
            Keeper::Connection(client) => Some(client),
            Keeper::Beats(_) => None,
        }
    }

    /// The id the client gave, if it gave one.
    pub fn instance_id(&self) -> Option<&Arc<str>> {
        self.rare.as_ref().and_then(|r| r.instance_id.as_ref())
    }

    /// The sync task that imported it, if one did.
    pub fn owner(&self) -> Option<&Arc<str>> {
        self.rare.as_ref().and_then(|r| r.owner.as_ref())
    }

    /// Heartbeat timing, from the `preserved.*` metadata.
    pub fn heartbeat(&self) -> Heartbeat {
        self.rare.as_ref().map(|r| r.heartbeat).unwrap_or_default()
    }

    /// Sets the metadata and the beat timing it implies.
    pub fn set_metadata(&mut self, metadata: Meta) {
        let heartbeat = Heartbeat::from_metadata(&metadata);
        self.metadata = metadata;
        self.rare = Rare::boxed(
            self.instance_id().cloned(),
            self.owner().cloned(),
            heartbeat,
        );
    }

    /// The instance id shown to clients: the one it was given, else Nacos' default for
    /// an instance of service `grouped`.
    pub fn id(&self, grouped: &str) -> Cow<'_, str> {
        match self.instance_id() {
            Some(id) => Cow::Borrowed(id),
            None => Cow::Owned(default_instance_id(
                self.ip(),
                self.port,
                &self.cluster,
                grouped,
            )),
        }
    }

    /// The client that owns it: its gRPC connection, else its address.
    pub fn client_id(&self) -> Arc<str> {
        self.client().cloned().unwrap_or_else(|| self.addr())
    }
}

/// The key of an instance within its service: `ip:port`. A client address holds at most
/// one instance per service, as in Nacos 2.x.
pub fn addr_key(ip: &str, port: u16) -> Arc<str> {
    Arc::from(&*Addr::new(ip, port))
}

/// `ip:port` written on the stack (a heap string only for host names longer than 57
/// bytes): lookups by address allocate nothing, and [`addr_key`] copies it once
/// (`format!` then `Arc::from` allocated two or three times on every write).
pub enum Addr {
    /// The common case.
    Inline { buf: [u8; 64], len: u8 },
    /// A long host name.
    Heap(String),
}

impl Addr {
    /// `ip:port`.
    pub fn new(ip: &str, port: u16) -> Self {
        let mut buf = [0u8; 64];
        if ip.len() + 6 > buf.len() {
            return Addr::Heap(format!("{ip}:{port}"));
        }
        buf[..ip.len()].copy_from_slice(ip.as_bytes());
        let mut at = ip.len();
        buf[at] = b':';
        at += 1;
        let mut digits = itoa::Buffer::new();
        let tail = digits.format(port).as_bytes();
        buf[at..at + tail.len()].copy_from_slice(tail);
        at += tail.len();
        Addr::Inline { buf, len: at as u8 }
    }
}

impl std::ops::Deref for Addr {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Addr::Inline { buf, len } => {
                std::str::from_utf8(&buf[..usize::from(*len)]).expect("a str, ':' and digits")
            }
            Addr::Heap(s) => s,
        }
    }
}

/// The IP part of an `ip:port` key (an IPv6 address keeps its colons: the port is after
/// the last one).
pub fn ip_of(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(ip, _)| ip)
}

/// An instance as it is serialized: the fields of [`Instance`] with the address as `ip`
/// and `port`, the shape snapshots and Distro messages have always had.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InstanceWire {
    instance_id: Option<Arc<str>>,
    ip: Arc<str>,
    port: u16,
    cluster: ClusterName,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: Meta,
    heartbeat: Heartbeat,
    #[serde(default)]
    pinned: Pinned,
    #[serde(default)]
    client: Option<Arc<str>>,
    #[serde(default)]
    owner: Option<Arc<str>>,
}

impl From<InstanceWire> for Instance {
    fn from(w: InstanceWire) -> Self {
        Self {
            address: addr_key(&w.ip, w.port),
            port: w.port,
            cluster: w.cluster,
            weight: w.weight,
            healthy: w.healthy,
            enabled: w.enabled,
            ephemeral: w.ephemeral,
            metadata: w.metadata,
            pinned: w.pinned,
            keeper: Keeper::new(w.client, 0),
            rare: Rare::boxed(w.instance_id, w.owner, w.heartbeat),
        }
    }
}

/// [`InstanceWire`] borrowed from an instance: the same fields in the same order, so
/// it serializes byte for byte alike, without the copy of the instance (and of its
/// `ip`) that serde's `into` would make for every instance of a snapshot or a Distro
/// push.
#[derive(Serialize)]
struct InstanceWireRef<'a> {
    instance_id: Option<&'a str>,
    ip: &'a str,
    port: u16,
    cluster: &'a ClusterName,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: &'a Meta,
    heartbeat: Heartbeat,
    pinned: Pinned,
    client: Option<&'a str>,
    owner: Option<&'a str>,
}

impl Serialize for Instance {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let rare = self.rare.as_deref();
        InstanceWireRef {
            instance_id: rare.and_then(|r| r.instance_id.as_deref()),
            ip: self.ip(),
            port: self.port,
            cluster: &self.cluster,
            weight: self.weight,
            healthy: self.healthy,
            enabled: self.enabled,
            ephemeral: self.ephemeral,
            metadata: &self.metadata,
            heartbeat: rare.map_or_else(Heartbeat::default, |r| r.heartbeat),
            pinned: self.pinned,
            client: self.client().map(|c| &**c),
            owner: rare.and_then(|r| r.owner.as_deref()),
        }
        .serialize(serializer)
    }
}

/// A cluster name, interned: instances of the same cluster share one allocation, and each
/// holds a thin pointer to it (8 bytes where an `Arc<str>` took 16). Compares, orders,
/// hashes and serializes as the name.
#[derive(Clone)]
pub struct ClusterName(Arc<Box<str>>);

/// The cluster names in use, for [`ClusterName::new`]: weak, so a name no instance holds
/// any more is dropped; the dead entries are swept whenever the table doubles.
struct ClusterNames {
    names: std::collections::HashMap<Box<str>, std::sync::Weak<Box<str>>>,
    sweep_at: usize,
}

impl ClusterName {
    /// The interned `name`; `DEFAULT`, the usual case, without a lock.
    pub fn new(name: &str) -> Self {
        static DEFAULT: LazyLock<ClusterName> =
            LazyLock::new(|| ClusterName(Arc::new("DEFAULT".into())));
        static NAMES: LazyLock<parking_lot::Mutex<ClusterNames>> = LazyLock::new(|| {
            parking_lot::Mutex::new(ClusterNames {
                names: std::collections::HashMap::new(),
                sweep_at: 64,
            })
        });
        if name == "DEFAULT" {
            return DEFAULT.clone();
        }
        let mut table = NAMES.lock();
        if let Some(live) = table.names.get(name).and_then(std::sync::Weak::upgrade) {
            return ClusterName(live);
        }
        let interned = Arc::new(Box::<str>::from(name));
        table.names.insert(name.into(), Arc::downgrade(&interned));
        if table.names.len() >= table.sweep_at {
            table.names.retain(|_, held| held.strong_count() > 0);
            table.sweep_at = (table.names.len() * 2).max(64);
        }
        ClusterName(interned)
    }
}

impl std::ops::Deref for ClusterName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq for ClusterName {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || **self == **other
    }
}

impl Eq for ClusterName {}

impl PartialOrd for ClusterName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ClusterName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::hash::Hash for ClusterName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl std::fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl std::fmt::Display for ClusterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl Serialize for ClusterName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self)
    }
}

impl<'de> Deserialize<'de> for ClusterName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(ClusterName::new(&name))
    }
}

/// Nacos' default instance id.
pub fn default_instance_id(ip: &str, port: u16, cluster: &str, grouped: &str) -> String {
    format!("{ip}#{port}#{cluster}#{grouped}")
}

/// Test instances: an ephemeral instance of address client `10.0.0.1:port` with
/// weight 1 and defaults elsewhere; tests change fields with struct update syntax.
#[cfg(test)]
pub(crate) fn sample(port: u16) -> Instance {
    Instance {
        address: addr_key("10.0.0.1", port),
        port,
        cluster: ClusterName::new("DEFAULT"),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        metadata: Meta::empty(),
        pinned: Pinned::default(),
        keeper: Keeper::new(None, 0),
        rare: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_overrides_come_from_metadata() {
        let mut m = Metadata::new();
        m.insert(BEAT_TIMEOUT_KEY.into(), "3000".into());
        m.insert(DELETE_TIMEOUT_KEY.into(), "junk".into());
        let hb = Heartbeat::from_metadata(&m);
        assert_eq!(hb.timeout_ms, 3000);
        assert_eq!(hb.delete_ms, 30_000);
        assert_eq!(hb.interval_ms, 5_000);
    }

    #[test]
    fn the_ip_is_what_precedes_the_port() {
        assert_eq!(ip_of("10.0.0.1:80"), "10.0.0.1");
        assert_eq!(ip_of("::1:8080"), "::1");
        assert_eq!(ip_of("host.example:1"), "host.example");
    }

    #[test]
    fn instances_serialize_as_their_wire_form_does() {
        let mut metadata = Metadata::new();
        metadata.insert("side".into(), "provider".into());
        metadata.insert(BEAT_TIMEOUT_KEY.into(), "3000".into());
        let full = InstanceWire {
            instance_id: Some("id-1".into()),
            ip: "127.0.0.7".into(),
            port: 20880,
            cluster: ClusterName::new("blue"),
            weight: 2.5,
            healthy: false,
            enabled: true,
            ephemeral: true,
            metadata: Meta::from(&metadata),
            heartbeat: Heartbeat::from_metadata(&metadata),
            pinned: Pinned {
                weight: true,
                ..Pinned::default()
            },
            client: Some("g:1:c".into()),
            owner: Some("task".into()),
        };
        let bare = InstanceWire {
            instance_id: None,
            client: None,
            owner: None,
            heartbeat: Heartbeat::default(),
            metadata: Meta::empty(),
            ..full.clone()
        };
        for wire in [full, bare] {
            let inst = Instance::from(wire.clone());
            assert_eq!(
                rmp_serde::to_vec_named(&inst).unwrap(),
                rmp_serde::to_vec_named(&wire).unwrap()
            );
            assert_eq!(
                rmp_serde::to_vec(&inst).unwrap(),
                rmp_serde::to_vec(&wire).unwrap()
            );
            assert_eq!(
                serde_json::to_string(&inst).unwrap(),
                serde_json::to_string(&wire).unwrap()
            );
        }
    }

    #[test]
    fn instances_serialize_with_ip_and_port() {
        let inst = Instance::from(InstanceWire {
            instance_id: None,
            ip: "fe80::1".into(),
            port: 8848,
            cluster: ClusterName::new("DEFAULT"),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Meta::empty(),
            heartbeat: Heartbeat::default(),
            pinned: Pinned::default(),
            client: None,
            owner: None,
        });
        assert_eq!((inst.ip(), &*inst.address), ("fe80::1", "fe80::1:8848"));
        let json = serde_json::to_value(&inst).unwrap();
        assert_eq!(
            (&json["ip"], &json["port"]),
            (&"fe80::1".into(), &8848.into())
        );
        let back: Instance =
            rmp_serde::from_slice(&rmp_serde::to_vec_named(&inst).unwrap()).unwrap();
        assert_eq!(back.address, inst.address);
    }

    #[test]
    fn an_instance_stays_small() {
        // Every registered instance is one of these behind an `Arc`: 72 bytes plus the
        // `Arc`'s 16 fit glibc's 96-byte chunk (at 88 it took a 112-byte one), beat clock
        // or connection included (see the README's memory figures).
        assert_eq!(std::mem::size_of::<Instance>(), 72);
        assert_eq!(std::mem::size_of::<Keeper>(), 16);
    }

    #[test]
    fn cluster_names_are_shared_and_compare_as_text() {
        let a = ClusterName::new("zone-a");
        let again = ClusterName::new("zone-a");
        assert!(
            Arc::ptr_eq(&a.0, &again.0),
            "one allocation per name in use"
        );
        assert_eq!(a, again);
        assert!(Arc::ptr_eq(
            &ClusterName::new("DEFAULT").0,
            &ClusterName::new("DEFAULT").0
        ));
        let b = ClusterName::new("zone-b");
        assert_ne!(a, b);
        assert!(a < b && &*b == "zone-b");
        assert_eq!(format!("{a} {a:?}"), "zone-a \"zone-a\"");
        // A name nobody holds any more is made anew, and still equals its text.
        drop((a, again));
        let fresh = ClusterName::new("zone-a");
        assert_eq!(&*fresh, "zone-a");
        // Through serde it is the bare name, and comes back interned.
        let json = serde_json::to_string(&fresh).unwrap();
        assert_eq!(json, "\"zone-a\"");
        let back: ClusterName = serde_json::from_str(&json).unwrap();
        assert!(Arc::ptr_eq(&back.0, &fresh.0));
    }

    #[test]
    fn a_keeper_is_a_clock_or_a_connection() {
        let beats = sample(80);
        assert!(beats.clock().is_some() && beats.client().is_none());
        assert_eq!(&*beats.client_id(), "10.0.0.1:80");
        let held = Instance {
            keeper: Keeper::new(Some("g:1:c".into()), 0),
            ..sample(81)
        };
        assert!(
            held.clock().is_none(),
            "a connection's instance has no beat clock"
        );
        assert_eq!(held.client().map(|c| &**c), Some("g:1:c"));
        assert_eq!(&*held.client_id(), "g:1:c");
        let persistent = Instance {
            ephemeral: false,
            ..sample(82)
        };
        assert!(persistent.clock().is_none());
    }

    #[test]
    fn beat_clock_never_moves_back() {
        let c = BeatClock::new(100);
        c.beat(50);
        assert_eq!(c.last_beat_ms(), 100);
        c.beat(150);
        assert_eq!(c.last_beat_ms(), 150);
    }

    #[test]
    fn address_keys_read_as_ip_colon_port() {
        let long_host = format!("{}.example", "a".repeat(70));
        for (ip, port) in [
            ("10.0.0.1", 8080),
            ("10.0.0.1", 0),
            ("fe80::1", 65535),
            ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", 9),
            (long_host.as_str(), 443),
        ] {
            assert_eq!(&*addr_key(ip, port), format!("{ip}:{port}"));
            assert_eq!(&*Addr::new(ip, port), format!("{ip}:{port}"));
        }
    }
}
