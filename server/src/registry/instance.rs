//! Instances: one address (`ip:port`) serving a service, with its weight, health and
//! metadata, and the heartbeat settings Nacos clients control through `preserved.*` keys.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

/// Instance metadata: string keys to string values, ordered for stable output.
pub type Metadata = BTreeMap<String, String>;

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
    pub fn from_metadata(metadata: &Metadata) -> Self {
        let read = |key: &str, default: u64| {
            metadata
                .get(key)
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

/// The liveness clock of an ephemeral instance. Beats store into it without taking any
/// lock on the service; the expiry queue reads it when a deadline comes due.
#[derive(Debug, Default)]
pub struct BeatClock {
    /// Wall-clock milliseconds of the last beat or registration.
    last_beat_ms: AtomicU64,
    /// The deadline of the one live entry for this clock in the expiry queue; entries
    /// with another deadline are stale and dropped when popped.
    scheduled_ms: AtomicU64,
}

impl BeatClock {
    /// A clock whose last beat is `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Self {
            last_beat_ms: AtomicU64::new(now_ms),
            scheduled_ms: AtomicU64::new(0),
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

    /// Marks `at_ms` as the live expiry deadline.
    pub fn set_scheduled(&self, at_ms: u64) {
        self.scheduled_ms.store(at_ms, Ordering::Relaxed);
    }

    /// The live expiry deadline.
    pub fn scheduled_ms(&self) -> u64 {
        self.scheduled_ms.load(Ordering::Relaxed)
    }
}

/// One instance of a service. Immutable once published in a service view: changes
/// replace the `Arc<Instance>`; only the beat clock is shared between versions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Instance {
    /// Instance id as the client gave it; `None` for the default
    /// `ip#port#cluster#group@@service`, made when shown (see [`Instance::id`]) rather
    /// than stored: the string would be a tenth of an instance's footprint.
    pub instance_id: Option<Arc<str>>,
    /// IP address or host name.
    pub ip: Arc<str>,
    /// Port.
    pub port: u16,
    /// Cluster name (`DEFAULT` unless given).
    pub cluster: Arc<str>,
    /// Relative weight, 0 to 10000.
    pub weight: f64,
    /// Health: from beats for ephemeral instances, from checks or the API for persistent.
    pub healthy: bool,
    /// Disabled instances stay registered but are not returned to consumers.
    pub enabled: bool,
    /// Ephemeral (kept alive by beats, in memory) or persistent (Raft, on disk).
    pub ephemeral: bool,
    /// Free-form metadata.
    pub metadata: Arc<Metadata>,
    /// Heartbeat timing, from the `preserved.*` metadata.
    pub heartbeat: Heartbeat,
    /// Fields an operator update set, kept over re-registration.
    #[serde(default)]
    pub pinned: Pinned,
    /// The client that owns it when that is not its address: a gRPC connection.
    #[serde(default)]
    pub client: Option<Arc<str>>,
    /// The sync task that imported it and owns its lifetime; `None` for instances
    /// clients registered. Set only by the task's writes, never by an API.
    #[serde(default)]
    pub owner: Option<Arc<str>>,
    /// Liveness clock; present on ephemeral instances only.
    #[serde(skip)]
    pub beat: Option<Arc<BeatClock>>,
}

impl Instance {
    /// The key of this instance within its service.
    pub fn addr(&self) -> Arc<str> {
        addr_key(&self.ip, self.port)
    }

    /// The instance id shown to clients: the one it was given, else Nacos' default for
    /// an instance of service `grouped`.
    pub fn id(&self, grouped: &str) -> Cow<'_, str> {
        match &self.instance_id {
            Some(id) => Cow::Borrowed(id),
            None => Cow::Owned(default_instance_id(
                &self.ip,
                self.port,
                &self.cluster,
                grouped,
            )),
        }
    }

    /// The client that owns it: its gRPC connection, else its address.
    pub fn client_id(&self) -> Arc<str> {
        self.client.clone().unwrap_or_else(|| self.addr())
    }
}

/// The key of an instance within its service: `ip:port`. A client address holds at most
/// one instance per service, as in Nacos 2.x.
pub fn addr_key(ip: &str, port: u16) -> Arc<str> {
    Arc::from(format!("{ip}:{port}"))
}

/// `metadata` as an `Arc`, the one shared empty map when it is empty (most instances
/// have none; an `Arc` each would cost ~50 bytes per instance).
pub fn shared_metadata(metadata: &Metadata) -> Arc<Metadata> {
    static EMPTY: LazyLock<Arc<Metadata>> = LazyLock::new(|| Arc::new(Metadata::new()));
    if metadata.is_empty() {
        EMPTY.clone()
    } else {
        Arc::new(metadata.clone())
    }
}

/// A cluster name as an `Arc`, the one shared `DEFAULT` for the usual case.
pub fn cluster_name(name: &str) -> Arc<str> {
    static DEFAULT: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from("DEFAULT"));
    if name == "DEFAULT" {
        DEFAULT.clone()
    } else {
        Arc::from(name)
    }
}

/// Nacos' default instance id.
pub fn default_instance_id(ip: &str, port: u16, cluster: &str, grouped: &str) -> String {
    format!("{ip}#{port}#{cluster}#{grouped}")
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
    fn beat_clock_never_moves_back() {
        let c = BeatClock::new(100);
        c.beat(50);
        assert_eq!(c.last_beat_ms(), 100);
        c.beat(150);
        assert_eq!(c.last_beat_ms(), 150);
    }
}
