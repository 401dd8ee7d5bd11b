//! Nacos v1 UDP push. A list query that carries `udpPort` from a push-capable client
//! subscribes `ip:udpPort` to the service, where `ip` is the address the query came from ([`push_target`]: a caller may not aim datagrams at
//! anyone else); every change is
//! sent as `{"type":"dom","data":"<ServiceInfo>","lastRefTime":n}` (gzipped from 1 KiB),
//! resent with backoff until the client acks `push-ack` with the same `lastRefTime`, a
//! bounded number of times, or until a newer push to the same subscription replaces it.
//! Subscribers expire when they stop querying, and are dropped once the user they
//! subscribed as may no longer read the service (a grant taken back, a role removed,
//! their tokens ended): checked before each push, and within 250 ms
//! (`MAINTENANCE_EVERY`) of a change to the auth data.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::SubscriberView;
use crate::services::auth::permissions::Resource;
use crate::services::auth::Reader;
use crate::services::metrics::Metrics;
use crate::services::workers::Workers;
use roster_registry::changes::ChangeSet;
use roster_registry::clock::now_ms;
use roster_registry::select::Query;
use roster_registry::service::ServiceKey;
use roster_registry::validate::parse_cluster_list;
use roster_registry::wire::{service_info, ListRequest};
use roster_registry::Registry;

/// Client agents that listen for UDP pushes (Nacos' list; the npm client poses as Java).
const PUSH_AGENTS: [&str; 6] = [
    "Nacos-Java-Client",
    "Nacos-Go-Client",
    "Nacos-DNS",
    "Nacos-C-Client",
    "vip-client4cpp",
    "Nacos-CSharp-Client",
];
/// Packets at least this large are gzipped.
const GZIP_FROM: usize = 1024;
/// Delays before each resend of an unacknowledged push; its length bounds the resends.
const RESEND_AFTER: [Duration; 3] = [
    Duration::from_millis(1000),
    Duration::from_millis(2000),
    Duration::from_millis(4000),
];
/// How long changes are gathered before pushing, so a burst becomes one push.
const COALESCE: Duration = Duration::from_millis(20);
/// How often resends are due, idle subscribers expire and subscribers who may no
/// longer read their service are dropped.
const MAINTENANCE_EVERY: Duration = Duration::from_millis(250);

/// Whether a client with this agent string listens for UDP pushes.
pub fn push_capable(agent: &str) -> bool {
    PUSH_AGENTS.iter().any(|p| agent.starts_with(p))
}

/// Where a list query's UDP pushes go: the IP its connection comes from (`peer`), so
/// that nobody can point a stream of datagrams (four per change, with resends) at a
/// third party. The query's `clientIP` is honoured only from an admin, who may
/// subscribe on another's behalf (an agent behind a proxy); from anyone else it is
/// ignored, and pushes go to the peer. A query without `clientIP` (nacos-sdk-go v1 sends
/// it empty when it finds no interface address to announce) is pushed at the peer too.
/// `None` when the peer is unknown: no pushes.
pub fn push_target(peer: Option<IpAddr>, client_ip: Option<IpAddr>, admin: bool) -> Option<IpAddr> {
    match client_ip {
        Some(named) if admin => Some(named.to_canonical()),
        _ => peer.map(|p| p.to_canonical()),
    }
}

/// One subscriber of one service.
#[derive(Debug)]
pub struct Subscriber {
    /// Where pushes go.
    pub addr: SocketAddr,
    /// The `clusters` the subscriber asked for, as given.
    pub clusters: String,
    /// Its `User-Agent`.
    pub agent: String,
    /// Its `app` parameter.
    pub app: String,
    /// Last list query, wall-clock ms.
    last_seen_ms: AtomicU64,
    /// Who subscribed (`None` with auth off).
    reader: Option<Reader>,
    /// The auth data's revision when the reader last passed its check (`u64::MAX`:
    /// never yet): it holds until the data changes.
    checked: AtomicU64,
}

impl Subscriber {
    /// Whether the subscriber may still read `service`, its service; checked again only
    /// when the auth data changed since it last passed.
    fn still_reads(&self, service: &Resource) -> bool {
        let Some(reader) = &self.reader else {
            return true;
        };
        // The revision before the data: a pass counts for what it saw at the least.
        let revision = reader.revision();
        if self.checked.load(Ordering::Relaxed) == revision {
            return true;
        }
        let reads = reader.still_reads(service);
        if reads {
            self.checked.store(revision, Ordering::Relaxed);
        }
        reads
    }

    /// Whether this subscriber was made by `reader`.
    fn made_by(&self, reader: Option<&Reader>) -> bool {
        match (&self.reader, reader) {
            (None, None) => true,
            (Some(mine), Some(theirs)) => mine.same_as(theirs),
            _ => false,
        }
    }
}

/// Which subscription a push serves: subscriber address, service, clusters asked for.
type Slot = (SocketAddr, ServiceKey, String);

/// A push awaiting its ack.
struct Pending {
    target: SocketAddr,
    /// The subscription it serves, to find it from [`Shared::latest`].
    slot: Slot,
    packet: Arc<Vec<u8>>,
    resends: usize,
    next_at_ms: u64,
}

/// UDP push handle. Cheap to clone.
#[derive(Clone)]
pub struct UdpPush {
    shared: Arc<Shared>,
}

struct Shared {
    socket: UdpSocket,
    registry: Registry,
    metrics: Arc<Metrics>,
    ttl_ms: u64,
    /// Subscribers by service, then by address and cluster filter.
    subscribers: DashMap<ServiceKey, DashMap<(SocketAddr, String), Arc<Subscriber>>>,
    /// Unacknowledged pushes by `lastRefTime`.
    pending: DashMap<u64, Pending>,
    /// The `lastRefTime` of each subscription's newest unacknowledged push. A newer push
    /// supersedes (drops) the older one: resent after it, the old state would overwrite
    /// the new in the client (the Java 1.x client logs "out of date data" and keeps it).
    /// An entry goes with its push's ack or last resend, so this is no larger than
    /// `pending`.
    latest: DashMap<Slot, u64>,
    /// Source of unique, increasing `lastRefTime` values. Starts at wall-clock µs, which
    /// stays below 2^53 so JavaScript clients echo it back exactly.
    seq: AtomicU64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ack {
    #[serde(rename = "type")]
    kind: String,
    /// The Java 1.x and Go v1 clients send it as a string, others as a number.
    #[serde(deserialize_with = "number_or_string")]
    last_ref_time: u64,
}

fn number_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(u64),
        Text(String),
    }
    match Either::deserialize(d)? {
        Either::Number(n) => Ok(n),
        Either::Text(s) => s.trim().parse().map_err(serde::de::Error::custom),
    }
}

impl UdpPush {
    /// A push service sending from `socket`.
    pub fn new(
        socket: UdpSocket,
        registry: Registry,
        metrics: Arc<Metrics>,
        ttl: Duration,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                socket,
                registry,
                metrics,
                ttl_ms: ttl.as_millis() as u64,
                subscribers: DashMap::new(),
                pending: DashMap::new(),
                latest: DashMap::new(),
                seq: AtomicU64::new(now_ms() * 1000),
            }),
        }
    }

    /// Records (or refreshes) a subscription from a list query by `reader`, who must be
    /// able to read the service for it to last.
    pub fn subscribe(
        &self,
        key: &ServiceKey,
        addr: SocketAddr,
        clusters: &str,
        agent: &str,
        app: &str,
        reader: Option<Reader>,
    ) {
        let now = now_ms();
        let per_service = self.shared.subscribers.entry(key.clone()).or_default();
        let id = (addr, clusters.to_string());
        // A query by someone else (or with newer tokens) makes the subscription theirs.
        if let Some(s) = per_service.get(&id).filter(|s| s.made_by(reader.as_ref())) {
            s.last_seen_ms.store(now, Ordering::Relaxed);
            return;
        }
        per_service.insert(
            id,
            Arc::new(Subscriber {
                addr,
                clusters: clusters.to_string(),
                agent: agent.to_string(),
                app: app.to_string(),
                last_seen_ms: AtomicU64::new(now),
                reader,
                checked: AtomicU64::new(u64::MAX),
            }),
        );
    }

    /// The subscribers of `key`, ordered by address.
    pub fn subscribers(&self, key: &ServiceKey) -> Vec<SubscriberView> {
        let mut all: Vec<SubscriberView> = match self.shared.subscribers.get(key) {
            Some(subs) => subs
                .iter()
                .map(|s| SubscriberView {
                    addr_str: s.addr.to_string(),
                    agent: s.agent.clone(),
                    app: s.app.clone(),
                    ip: s.addr.ip().to_string(),
                    port: s.addr.port(),
                    namespace_id: key.namespace.to_string(),
                    service_name: key.grouped(),
                    cluster: s.clusters.clone(),
                    protocol: "udp",
                })
                .collect(),
            None => Vec::new(),
        };
        all.sort_by(|a, b| (&a.addr_str, &a.cluster).cmp(&(&b.addr_str, &b.cluster)));
        all
    }

    /// Number of subscriptions over every service.
    pub fn subscriber_count(&self) -> usize {
        self.shared.subscribers.iter().map(|s| s.len()).sum()
    }

    /// Starts UDP push among `workers`: pushes of the services `changes` marks, the
    /// subscribers' acks, and the expiry of subscribers and unacked pushes.
    pub fn spawn_workers(&self, changes: Arc<ChangeSet>, workers: &mut Workers) {
        workers.spawn(self.clone().run_pusher(changes, workers.stopping()));
        workers.spawn(self.clone().run_acks(workers.stopping()));
        workers.spawn(self.clone().run_maintenance(workers.stopping()));
    }

    /// Pushes changes as they happen until `shutdown` fires.
    pub async fn run_pusher(self, changes: Arc<ChangeSet>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = changes.changed() => {}
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep(COALESCE).await;
            for key in changes.drain() {
                self.push_service(&key).await;
            }
        }
    }

    /// Reads acks until `shutdown` fires.
    pub async fn run_acks(self, mut shutdown: watch::Receiver<bool>) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let received = tokio::select! {
                r = self.shared.socket.recv_from(&mut buf) => r,
                _ = shutdown.changed() => return,
            };
            let (len, from) = match received {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "udp receive failed");
                    continue;
                }
            };
            // Clients answer `push-ack`; `dump-ack` and `unknown-ack` are tolerated.
            if let Ok(ack) = serde_json::from_slice::<Ack>(&buf[..len]) {
                let matches = |p: &Pending| p.target.port() == from.port();
                if ack.kind != "push-ack" {
                    continue;
                }
                let acked = self
                    .shared
                    .pending
                    .remove_if(&ack.last_ref_time, |_, p| matches(p));
                if let Some((ref_time, p)) = acked {
                    self.forget(&p.slot, ref_time);
                    self.shared.metrics.push("acked");
                }
            }
        }
    }

    /// Resends unacknowledged pushes, drops idle subscribers and those who may no
    /// longer read their service, until `shutdown` fires.
    pub async fn run_maintenance(self, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(MAINTENANCE_EVERY);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let now = now_ms();
            self.drop_unreadable();
            self.resend_due(now).await;
            self.expire_subscribers(now);
        }
    }

    async fn push_service(&self, key: &ServiceKey) {
        let resource = Resource::of_service(key);
        let targets: Vec<Arc<Subscriber>> = match self.shared.subscribers.get(key) {
            // Never to a subscriber who may no longer read it (maintenance drops them).
            Some(subs) => subs
                .iter()
                .filter(|s| s.still_reads(&resource))
                .map(|s| s.value().clone())
                .collect(),
            None => return,
        };
        let view = self.shared.registry.service_by_key(key).map(|s| s.view());
        let grouped = key.grouped();
        let now = now_ms();
        for sub in targets {
            let clusters = parse_cluster_list(&sub.clusters).unwrap_or_default();
            let data = service_info(
                view.as_deref(),
                &ListRequest {
                    grouped: &grouped,
                    group: None,
                    clusters_raw: &sub.clusters,
                    query: Query {
                        clusters: &clusters,
                        ..Default::default()
                    },
                    now_ms: now,
                },
            );
            let ref_time = self.shared.seq.fetch_add(1, Ordering::Relaxed);
            let packet = Arc::new(encode_packet(&data, ref_time));
            let slot: Slot = (sub.addr, key.clone(), sub.clusters.clone());
            // Pending before it is sent: a client on the same host can ack before the
            // send returns, and an ack that finds nothing pending is lost (then resent).
            self.shared.pending.insert(
                ref_time,
                Pending {
                    target: sub.addr,
                    slot: slot.clone(),
                    packet: packet.clone(),
                    resends: 0,
                    next_at_ms: now + RESEND_AFTER[0].as_millis() as u64,
                },
            );
            // The subscription's older push, if unacknowledged, is never resent now.
            if let Some(older) = self.shared.latest.insert(slot, ref_time) {
                if self.shared.pending.remove(&older).is_some() {
                    self.shared.metrics.push("superseded");
                }
            }
            self.send(sub.addr, &packet).await;
            self.shared.metrics.push("sent");
        }
    }

    async fn resend_due(&self, now: u64) {
        let due: Vec<u64> = self
            .shared
            .pending
            .iter()
            .filter(|p| p.next_at_ms <= now)
            .map(|p| *p.key())
            .collect();
        for ref_time in due {
            let Some(mut p) = self.shared.pending.get_mut(&ref_time) else {
                continue;
            };
            if p.resends >= RESEND_AFTER.len() {
                drop(p);
                if let Some((_, p)) = self.shared.pending.remove(&ref_time) {
                    self.forget(&p.slot, ref_time);
                }
                self.shared.metrics.push("failed");
                continue;
            }
            let (target, packet) = (p.target, p.packet.clone());
            p.resends += 1;
            let delay = RESEND_AFTER
                .get(p.resends)
                .copied()
                .unwrap_or(RESEND_AFTER[RESEND_AFTER.len() - 1]);
            p.next_at_ms = now + delay.as_millis() as u64;
            drop(p);
            self.send(target, &packet).await;
            self.shared.metrics.push("resent");
        }
    }

    /// Forgets that `ref_time` is `slot`'s newest push, unless a newer one took its place.
    fn forget(&self, slot: &Slot, ref_time: u64) {
        self.shared
            .latest
            .remove_if(slot, |_, newest| *newest == ref_time);
    }

    /// Drops the subscribers who may no longer read their service, with their pushes
    /// awaiting an ack (not sent again).
    fn drop_unreadable(&self) {
        let mut dropped: Vec<Slot> = Vec::new();
        for subs in self.shared.subscribers.iter() {
            let resource = Resource::of_service(subs.key());
            subs.retain(|_, s| {
                let reads = s.still_reads(&resource);
                if !reads {
                    dropped.push((s.addr, subs.key().clone(), s.clusters.clone()));
                }
                reads
            });
        }
        if dropped.is_empty() {
            return;
        }
        self.shared.subscribers.retain(|_, subs| !subs.is_empty());
        for slot in &dropped {
            if let Some((_, ref_time)) = self.shared.latest.remove(slot) {
                self.shared.pending.remove(&ref_time);
            }
        }
        tracing::info!(
            subscribers = dropped.len(),
            "udp subscribers dropped: they may no longer read their service"
        );
    }

    fn expire_subscribers(&self, now: u64) {
        let ttl = self.shared.ttl_ms;
        for subs in self.shared.subscribers.iter() {
            subs.retain(|_, s| s.last_seen_ms.load(Ordering::Relaxed) + ttl > now);
        }
        self.shared.subscribers.retain(|_, subs| !subs.is_empty());
    }

    async fn send(&self, target: SocketAddr, packet: &[u8]) {
        if let Err(e) = self.shared.socket.send_to(packet, target).await {
            tracing::debug!(target = %target, error = %e, "udp push failed");
        }
    }
}

/// The push packet for ServiceInfo JSON `data`, gzipped when large.
fn encode_packet(data: &[u8], ref_time: u64) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Packet<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        data: &'a str,
        last_ref_time: u64,
    }
    let json = serde_json::to_vec(&Packet {
        kind: "dom",
        data: std::str::from_utf8(data).expect("JSON is UTF-8"),
        last_ref_time: ref_time,
    })
    .expect("packet serializes");
    if json.len() < GZIP_FROM {
        return json;
    }
    let mut gz = GzEncoder::new(Vec::with_capacity(json.len() / 4), Compression::fast());
    gz.write_all(&json).expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn acks_carry_last_ref_time_as_a_number_or_a_string() {
        for raw in [
            r#"{"type":"push-ack","lastRefTime":1700000000123,"data":""}"#,
            r#"{"type":"push-ack","lastRefTime":"1700000000123","data":""}"#,
        ] {
            let ack: Ack = serde_json::from_slice(raw.as_bytes()).expect(raw);
            assert_eq!(
                (ack.kind.as_str(), ack.last_ref_time),
                ("push-ack", 1_700_000_000_123)
            );
        }
        assert!(
            serde_json::from_slice::<Ack>(br#"{"type":"push-ack","lastRefTime":"x"}"#).is_err()
        );
    }

    #[test]
    fn pushes_go_to_the_requester_unless_an_admin_names_another() {
        let here: IpAddr = "127.0.0.1".parse().unwrap();
        let there: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(push_target(Some(here), Some(there), false), Some(here));
        assert_eq!(push_target(Some(here), Some(here), false), Some(here));
        assert_eq!(push_target(Some(here), Some(there), true), Some(there));
        assert_eq!(push_target(None, Some(there), false), None);
        // No clientIP: the requester, admin or not.
        assert_eq!(push_target(Some(here), None, false), Some(here));
        assert_eq!(push_target(Some(here), None, true), Some(here));
        assert_eq!(push_target(None, None, true), None);
        // A dual-stack socket sees IPv4 peers as mapped IPv6 addresses.
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(push_target(Some(mapped), Some(there), false), Some(here));
        assert_eq!(push_target(None, Some(mapped), true), Some(here));
        assert_eq!(push_target(Some(mapped), None, true), Some(here));
    }

    #[test]
    fn agents_that_get_pushes() {
        assert!(push_capable("Nacos-Java-Client:v1.0.0"));
        assert!(push_capable("Nacos-Go-Client:v1.2.0"));
        assert!(!push_capable("Nacos-Python-Client:v0.1.16"));
        assert!(!push_capable("curl/8.0"));
    }

    #[test]
    fn packets_embed_data_as_a_string_and_gzip_when_large() {
        let small = encode_packet(br#"{"hosts":[]}"#, 7);
        let v: serde_json::Value = serde_json::from_slice(&small).unwrap();
        assert_eq!(v["type"], "dom");
        assert_eq!(v["data"], r#"{"hosts":[]}"#);
        assert_eq!(v["lastRefTime"], 7);
        let big_data = format!(r#"{{"x":"{}"}}"#, "a".repeat(2000));
        let big = encode_packet(big_data.as_bytes(), 8);
        assert_eq!(&big[..2], &[0x1f, 0x8b], "gzip magic");
        let mut out = String::new();
        flate2::read::GzDecoder::new(&big[..])
            .read_to_string(&mut out)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["data"], big_data);
    }
}
