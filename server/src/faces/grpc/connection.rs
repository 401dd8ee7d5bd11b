//! gRPC connections: one per HTTP/2 transport, identified by the peer address the unary
//! calls and the bi-stream of one client share. A connection is registered when its
//! bi-stream opens and unregistered when the stream ends; its client id
//! (`g:<node>:<connection id>`) owns the instances registered over it.
//!
//! Each transport (TCP connection) is also tracked from accept to close
//! ([`super::transport`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;
use roster_raft::NodeId;
use tokio::sync::mpsc;
use tonic::Status;

use super::proto::{Payload, Queued};
use super::transport::Transport;
pub use super::transport::{Incoming, SetupDeadline};
use crate::services::auth::permissions::Resource;
use crate::services::auth::Reader;
use crate::services::configs::listeners::{ListenerList, ListenerView};
use crate::services::configs::ConfigKey;
use crate::services::push::connections::{ConnectionList, ConnectionView, Redirect};
use crate::services::push::{SubscriberList, SubscriberView};
use roster_registry::clock::now_ms;
use roster_registry::service::ServiceKey;

/// What the client told about itself in `ConnectionSetupRequest`.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// e.g. `Nacos-Java-Client:v2.5.1`.
    pub client_version: String,
    /// Its namespace (`tenant`).
    pub tenant: String,
    /// Labels (`source`, `module`, `AppName`, ...).
    pub labels: HashMap<String, String>,
    /// The client's own idea of its IP.
    pub client_ip: String,
}

/// How a connection listens to a configuration item.
#[derive(Clone, Debug)]
pub struct Listening {
    /// The tenant as the client spelled it (`""` or `public` for the public namespace),
    /// which its pushes repeat: clients key their caches by it.
    pub tenant: String,
    /// The md5 it said it holds when it last listened (empty: none).
    pub md5: String,
    /// Who listens (`None` with auth off): the listen lasts while they may read the
    /// item ([`Connections::drop_unreadable_listens`]). Shared by the items of one
    /// `ConfigBatchListenRequest`.
    pub reader: Option<Arc<Reader>>,
}

/// One service subscription of a connection.
#[derive(Clone, Debug)]
pub struct Subscription {
    /// The `clusters` string the client gave.
    pub clusters: String,
    /// Who subscribed (`None` with auth off): the subscription lasts while they may
    /// read the service ([`Connections::drop_unreadable`]). Shared by the connection's
    /// subscriptions made by the same user.
    pub reader: Option<Arc<Reader>>,
}

/// What a push told the client about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// A subscribed service's instances (`NotifySubscriberRequest`).
    Service(ServiceKey),
    /// A listened configuration item changed (`ConfigChangeNotifyRequest`).
    Config(ConfigKey),
    /// A fuzzy watch's sync or change (`…FuzzyWatchSyncRequest`,
    /// `…FuzzyWatchChangeNotifyRequest`): never sent again, as the client's next re-watch
    /// repairs what it missed.
    Fuzzy,
}

/// A push awaiting its ack.
#[derive(Clone, Debug)]
pub struct PendingPush {
    /// What was pushed.
    pub what: Pushed,
    /// When it was sent, ms.
    pub sent_ms: u64,
    /// Sends so far.
    pub attempts: u32,
}

/// One client connection.
pub struct Connection {
    /// `<first seen ms>_<ip>_<port>`, as Nacos forms it.
    pub id: String,
    /// The registry client id that owns its instances.
    pub client: Arc<str>,
    /// The transport's peer address.
    pub remote: SocketAddr,
    /// What the client said at setup.
    pub setup: Mutex<Setup>,
    /// Outbound messages on the bi-stream.
    tx: mpsc::Sender<Queued>,
    /// Last message from the client (unary or stream), ms.
    last_active: AtomicU64,
    /// When a `ClientDetectionRequest` went out unanswered (0: none), ms.
    detection_sent: AtomicU64,
    /// Subscriptions, by service.
    pub subscriptions: Mutex<HashMap<ServiceKey, Subscription>>,
    /// Listened configuration items, with the tenant as the client spelled it and the
    /// md5 it last said it holds. Filled and emptied by `ConfigBatchListenRequest`s, at
    /// most `--config-max-listeners` items; gone with the connection.
    pub listens: Mutex<HashMap<ConfigKey, Listening>>,
    /// Pushes awaiting acks, by request id.
    pending: Mutex<HashMap<String, PendingPush>>,
    /// Whether its client was asked to move to another node (`ConnectResetRequest`):
    /// its instances outlive the connection by [`MOVE_GRACE`].
    moving: AtomicBool,
}

/// How long the instances of a client asked to move stay after its connection ends:
/// it registers them again on the node it moves to, and its services are never seen
/// without them meanwhile.
pub const MOVE_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

impl Connection {
    /// Whether its client was asked to move to another node.
    pub fn is_moving(&self) -> bool {
        self.moving.load(Ordering::Acquire)
    }

    /// Marks the client active now.
    pub fn touch(&self) {
        self.last_active.store(now_ms(), Ordering::Relaxed);
        self.detection_sent.store(0, Ordering::Relaxed);
    }

    /// Milliseconds since the client was last heard from.
    pub fn idle_ms(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_active.load(Ordering::Relaxed))
    }

    /// When an unanswered detection probe went out (0: none).
    pub fn detection_sent(&self) -> u64 {
        self.detection_sent.load(Ordering::Relaxed)
    }

    /// Records a detection probe.
    pub fn mark_detection(&self, now: u64) {
        self.detection_sent.store(now, Ordering::Relaxed);
    }

    /// Queues a message to the client; false if the stream is gone or backed up.
    pub fn send(&self, payload: Payload) -> bool {
        self.tx.try_send(Ok(Box::new(payload))).is_ok()
    }

    /// Ends the stream with `status`; the client reconnects.
    pub fn close(&self, status: Status) {
        let _ = self.tx.try_send(Err(status));
    }

    /// Records a push about to go out as `request_id` (before it is sent, so that its
    /// ack can never arrive first); `attempts`: sends so far, this one included.
    pub fn track(&self, request_id: &str, what: Pushed, attempts: u32) {
        let push = PendingPush {
            what,
            sent_ms: now_ms(),
            attempts,
        };
        self.pending.lock().insert(request_id.to_string(), push);
    }

    /// Forgets the push sent as `request_id` (acknowledged, or never sent); whether it
    /// was pending.
    pub fn acknowledge(&self, request_id: &str) -> bool {
        let mut pending = self.pending.lock();
        let was = pending.remove(request_id).is_some();
        release_if_empty(&mut pending);
        was
    }

    /// Takes the pushes sent more than `timeout_ms` before `now` and still unacknowledged.
    pub fn take_late(&self, now: u64, timeout_ms: u64) -> Vec<PendingPush> {
        let mut pending = self.pending.lock();
        let late: Vec<String> = pending
            .iter()
            .filter(|(_, p)| now.saturating_sub(p.sent_ms) > timeout_ms)
            .map(|(id, _)| id.clone())
            .collect();
        let late = late.iter().filter_map(|id| pending.remove(id)).collect();
        release_if_empty(&mut pending);
        late
    }

    /// Subscribes the connection to `key` (or changes how), as `reader` — unless the
    /// reader may no longer read the service by now: a revocation applied since the
    /// request was let in, whose sweep ([`Connections::drop_unreadable`]) may have come
    /// first. Checked under the lock the sweep takes, so one of the two sees it.
    pub fn subscribe(&self, key: ServiceKey, clusters: String, reader: Option<Reader>) {
        let mut subscriptions = self.subscriptions.lock();
        // A connection's subscriptions nearly always come from one user: one copy of
        // them (looking at one other subscription keeps this O(1)).
        let reader = reader.map(|r| {
            subscriptions
                .values()
                .next()
                .and_then(|s| s.reader.clone())
                .filter(|other| other.same_as(&r))
                .unwrap_or_else(|| Arc::new(r))
        });
        let reads = reader
            .as_ref()
            .is_none_or(|r| r.still_reads(&Resource::of_service(&key)));
        if reads {
            subscriptions.insert(key, Subscription { clusters, reader });
        } else {
            subscriptions.remove(&key);
        }
    }

    /// Adds `items` to the listen set (or refreshes them), unless the set would then
    /// hold more than `max`: then nothing is added, and the size it would have had is
    /// the error. An item its reader may no longer read by now is left out (and an
    /// earlier listen of it dropped): a revocation applied since the request was let
    /// in, whose sweep ([`Connections::drop_unreadable_listens`]) may have come first.
    /// Checked under the lock the sweep takes, so one of the two sees it.
    pub fn listen(&self, items: Vec<(ConfigKey, Listening)>, max: usize) -> Result<(), usize> {
        let mut listens = self.listens.lock();
        let added = items
            .iter()
            .map(|(key, _)| key)
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .filter(|key| !listens.contains_key(*key))
            .count();
        if listens.len() + added > max {
            return Err(listens.len() + added);
        }
        for (key, listening) in items {
            if still_reads(&key, &listening) {
                listens.insert(key, listening);
            } else {
                listens.remove(&key);
            }
        }
        Ok(())
    }

    /// Removes `keys` from the listen set.
    pub fn unlisten<'a>(&self, keys: impl IntoIterator<Item = &'a ConfigKey>) {
        let mut listens = self.listens.lock();
        for key in keys {
            listens.remove(key);
        }
    }

    /// The tenant spelling `key` is listened to with, if it is.
    pub fn listens_to(&self, key: &ConfigKey) -> Option<String> {
        self.listens.lock().get(key).map(|l| l.tenant.clone())
    }

    /// Those of `keys` listened to.
    pub fn listening<'a>(&self, keys: &'a [ConfigKey]) -> Vec<&'a ConfigKey> {
        let listens = self.listens.lock();
        keys.iter().filter(|k| listens.contains_key(*k)).collect()
    }
}

/// Whether the listener of `key` may still read it (always, with auth off).
fn still_reads(key: &ConfigKey, listening: &Listening) -> bool {
    let resource = Resource::Config {
        namespace: &key.namespace,
        group: &key.group,
        data_id: &key.data_id,
    };
    listening
        .reader
        .as_ref()
        .is_none_or(|r| r.still_reads(&resource))
}

/// Frees an emptied map's table: most connections are idle with nothing pending most
/// of the time, and a table kept for the next push would cost each of them a few
/// hundred bytes.
fn release_if_empty<K: Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>) {
    if map.is_empty() && map.capacity() > 0 {
        map.shrink_to_fit();
    }
}

/// Every connection on this node. Cheap to clone.
#[derive(Clone)]
pub struct Connections {
    pub(super) shared: Arc<Shared>,
}

pub(super) struct Shared {
    node: NodeId,
    by_remote: DashMap<SocketAddr, Arc<Connection>>,
    by_client: DashMap<Arc<str>, Arc<Connection>>,
    /// Open transports, by peer address.
    pub(super) transports: DashMap<SocketAddr, Arc<Transport>>,
    /// Source of request ids of server-pushed messages.
    next_request: AtomicU64,
}

impl Connections {
    /// An empty registry for node `node`.
    pub fn new(node: NodeId) -> Self {
        Self {
            shared: Arc::new(Shared {
                node,
                by_remote: DashMap::new(),
                by_client: DashMap::new(),
                transports: DashMap::new(),
                next_request: AtomicU64::new(1),
            }),
        }
    }

    /// The connection id a transport at `remote` has (or would get now).
    pub fn id_for(&self, remote: SocketAddr) -> String {
        match self.shared.by_remote.get(&remote) {
            Some(c) => c.id.clone(),
            None => format!("{}_{}_{}", now_ms(), remote.ip(), remote.port()),
        }
    }

    /// Registers the connection of a bi-stream from `remote`, sending through `tx`.
    pub fn open(&self, remote: SocketAddr, tx: mpsc::Sender<Queued>) -> Arc<Connection> {
        let id = format!("{}_{}_{}", now_ms(), remote.ip(), remote.port());
        let client: Arc<str> = format!("g:{}:{id}", self.shared.node).into();
        let conn = Arc::new(Connection {
            id,
            client: client.clone(),
            remote,
            setup: Mutex::new(Setup::default()),
            tx,
            last_active: AtomicU64::new(now_ms()),
            detection_sent: AtomicU64::new(0),
            subscriptions: Mutex::new(HashMap::new()),
            listens: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            moving: AtomicBool::new(false),
        });
        // A transport carries one bi-stream; a new one replaces a stale entry.
        if let Some(old) = self.shared.by_remote.insert(remote, conn.clone()) {
            self.shared.by_client.remove(&old.client);
        }
        self.shared.by_client.insert(client, conn.clone());
        conn
    }

    /// Unregisters `conn` (if it is still the registered one for its transport); its
    /// transport's setup deadline starts again.
    pub fn remove(&self, conn: &Arc<Connection>) -> bool {
        let removed = self
            .shared
            .by_remote
            .remove_if(&conn.remote, |_, c| Arc::ptr_eq(c, conn))
            .is_some();
        self.shared.by_client.remove(&conn.client);
        if removed {
            if let Some(transport) = self.shared.transports.get(&conn.remote) {
                transport.set_up.store(false, Ordering::Release);
            }
        }
        removed
    }

    /// Marks the transport of `conn` as set up: its client said who it is.
    pub fn set_up(&self, conn: &Connection) {
        if let Some(transport) = self.shared.transports.get(&conn.remote) {
            transport.set_up.store(true, Ordering::Release);
        }
    }

    /// The connection of the transport at `remote`.
    pub fn get(&self, remote: &SocketAddr) -> Option<Arc<Connection>> {
        self.shared.by_remote.get(remote).map(|c| c.clone())
    }

    /// Whether a connection client id belongs to a live connection here.
    pub fn holds(&self, client: &str) -> bool {
        self.shared.by_client.contains_key(client)
    }

    /// Every connection.
    pub fn all(&self) -> Vec<Arc<Connection>> {
        self.shared.by_remote.iter().map(|c| c.clone()).collect()
    }

    /// The connections subscribed to `key`, as the subscriber list shows them.
    pub fn subscribers(&self, key: &ServiceKey) -> Vec<SubscriberView> {
        let mut all: Vec<SubscriberView> = self
            .shared
            .by_remote
            .iter()
            .filter_map(|conn| {
                let clusters = conn.subscriptions.lock().get(key)?.clusters.clone();
                let setup = conn.setup.lock();
                // The client's own idea of its address beats a NAT's.
                let ip = if setup.client_ip.is_empty() {
                    conn.remote.ip().to_string()
                } else {
                    setup.client_ip.clone()
                };
                let app = ["AppName", "appName", "app"]
                    .iter()
                    .find_map(|k| setup.labels.get(*k))
                    .cloned()
                    .unwrap_or_else(|| "unknown".into());
                Some(SubscriberView {
                    addr_str: format!("{ip}:{}", conn.remote.port()),
                    agent: setup.client_version.clone(),
                    app,
                    ip,
                    port: conn.remote.port(),
                    namespace_id: key.namespace.to_string(),
                    service_name: key.grouped(),
                    cluster: clusters,
                    protocol: "grpc",
                })
            })
            .collect();
        all.sort_by(|a, b| a.addr_str.cmp(&b.addr_str));
        all
    }

    /// Drops every subscription whose subscriber may no longer read its service (a
    /// grant taken back, a role removed, their tokens ended by a password change or
    /// their deletion): nothing more is pushed for it, and its pushes awaiting an ack
    /// are not sent again. Called whenever the auth data changes; returns how many went.
    pub fn drop_unreadable(&self) -> usize {
        let dropped = self.sweep(
            |conn| &conn.subscriptions,
            |key, s| {
                let resource = Resource::of_service(key);
                s.reader.as_ref().is_none_or(|r| r.still_reads(&resource))
            },
        );
        if dropped > 0 {
            tracing::info!(
                subscriptions = dropped,
                "grpc subscriptions dropped: their subscribers may no longer read them"
            );
        }
        dropped
    }

    /// Drops every configuration listen whose listener may no longer read its item,
    /// for the same reasons as [`Connections::drop_unreadable`]: no change of it is
    /// pushed any more, and its pushes awaiting an ack are not sent again. Called
    /// whenever the auth data changes; returns how many went.
    pub fn drop_unreadable_listens(&self) -> usize {
        let dropped = self.sweep(|conn| &conn.listens, still_reads);
        if dropped > 0 {
            tracing::info!(
                listens = dropped,
                "grpc config listens dropped: their listeners may no longer read them"
            );
        }
        dropped
    }

    /// Keeps, in the map `of` picks on every connection, the entries `keep` keeps;
    /// returns how many went.
    fn sweep<K, V>(
        &self,
        of: impl Fn(&Connection) -> &Mutex<HashMap<K, V>>,
        keep: impl Fn(&K, &V) -> bool,
    ) -> usize {
        let mut dropped = 0;
        for conn in self.shared.by_remote.iter() {
            let mut map = of(&conn).lock();
            let before = map.len();
            map.retain(|k, v| keep(k, v));
            dropped += before - map.len();
        }
        dropped
    }

    /// How many connections there are.
    pub fn count(&self) -> usize {
        self.shared.by_remote.len()
    }

    /// A fresh request id for a server-pushed message.
    pub fn next_request_id(&self) -> String {
        self.shared
            .next_request
            .fetch_add(1, Ordering::Relaxed)
            .to_string()
    }
}

impl SubscriberList for Connections {
    fn subscribers(&self, key: &ServiceKey) -> Vec<SubscriberView> {
        Connections::subscribers(self, key)
    }
}

impl ConnectionList for Connections {
    fn count(&self) -> usize {
        self.shared.by_remote.len()
    }

    fn created(&self) -> Vec<(String, u64)> {
        self.shared
            .by_remote
            .iter()
            .map(|conn| (conn.id.clone(), created_ms(&conn.id)))
            .collect()
    }

    fn connections(&self) -> Vec<ConnectionView> {
        let mut all: Vec<ConnectionView> = self
            .shared
            .by_remote
            .iter()
            .map(|conn| {
                let setup = conn.setup.lock().clone();
                let mut subscriptions: Vec<(ServiceKey, String)> = conn
                    .subscriptions
                    .lock()
                    .iter()
                    .map(|(key, s)| (key.clone(), s.clusters.clone()))
                    .collect();
                subscriptions.sort_by(|a, b| a.0.cmp(&b.0));
                let mut labels: Vec<(String, String)> = setup.labels.into_iter().collect();
                labels.sort();
                ConnectionView {
                    id: conn.id.clone(),
                    client: conn.client.to_string(),
                    remote_ip: conn.remote.ip().to_string(),
                    remote_port: conn.remote.port(),
                    client_ip: setup.client_ip,
                    version: setup.client_version,
                    tenant: setup.tenant,
                    labels,
                    // The id starts with the time it was set up.
                    created_ms: created_ms(&conn.id),
                    last_active_ms: conn.last_active.load(Ordering::Relaxed),
                    subscriptions,
                }
            })
            .collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    fn reset(&self, id: &str, redirect: Redirect<'_>) -> bool {
        let Some(conn) = self
            .shared
            .by_client
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.clone())
        else {
            return false;
        };
        let (ip, port) = redirect.unwrap_or(("", ""));
        // As Nacos moves a client: the client connects elsewhere and ends this stream
        // itself (one that cannot parse the request stays).
        let body = serde_json::json!({
            "headers": {},
            "requestId": self.next_request_id(),
            "serverIp": ip,
            "serverPort": port,
            "connectionId": conn.id,
            "module": "internal",
        });
        let sent = conn.send(Payload::new("ConnectResetRequest", &body));
        if sent {
            conn.moving.store(true, Ordering::Release);
        }
        sent
    }
}

/// When a connection was set up, from its id (`<ms>_<ip>_<port>`, as Nacos names them).
fn created_ms(id: &str) -> u64 {
    id.split_once('_')
        .and_then(|(ms, _)| ms.parse().ok())
        .unwrap_or(0)
}

impl ListenerList for Connections {
    fn listeners(&self, key: &ConfigKey) -> Vec<ListenerView> {
        let mut all: Vec<ListenerView> = self
            .shared
            .by_remote
            .iter()
            .filter_map(|conn| {
                let md5 = conn.listens.lock().get(key)?.md5.clone();
                let setup = conn.setup.lock();
                let ip = if setup.client_ip.is_empty() {
                    conn.remote.ip().to_string()
                } else {
                    setup.client_ip.clone()
                };
                Some(ListenerView {
                    address: format!("{ip}:{}", conn.remote.port()),
                    protocol: "grpc",
                    client: setup.client_version.clone(),
                    md5,
                })
            })
            .collect();
        all.sort_by(|a, b| a.address.cmp(&b.address));
        all
    }

    fn listened_by(&self, ip: &str) -> Vec<(ConfigKey, String)> {
        let mut all = Vec::new();
        for conn in self.shared.by_remote.iter() {
            let matches = {
                let setup = conn.setup.lock();
                match setup.client_ip.as_str() {
                    "" => conn.remote.ip().to_string() == ip,
                    own => own == ip,
                }
            };
            if matches {
                let listens = conn.listens.lock();
                all.extend(listens.iter().map(|(k, l)| (k.clone(), l.md5.clone())));
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::services::auth::permissions::{Grant, Granted};
    use crate::services::auth::{Auth, AuthData, Identity, User};

    /// Auth on, `ann` reading namespace `dev` through role `dev`; and that data.
    fn auth_with_reader() -> (Auth, AuthData) {
        let auth = Auth::new(true, 100);
        let mut data = AuthData::default();
        let user = User {
            password_hash: String::new(),
            admin: false,
        };
        data.users.insert("ann".into(), user);
        data.roles.insert("ann".into(), ["dev".to_string()].into());
        let grant = Grant {
            resource: "dev:*:*".into(),
            action: Granted::Read,
        };
        data.permissions.insert("dev".into(), [grant].into());
        auth.set_data(data.clone());
        (auth, data)
    }

    #[test]
    fn a_listen_lasts_while_its_listener_may_read_the_item() {
        let (auth, data) = auth_with_reader();
        let connections = Connections::new(1);
        let (tx, _rx) = mpsc::channel(1);
        let conn = connections.open("127.0.0.1:5000".parse().unwrap(), tx);
        let ann = Identity {
            username: Cow::Borrowed("ann"),
            admin: false,
        };
        let reader = auth.reader(&ann).map(Arc::new);
        let listening = |reader: &Option<Arc<Reader>>| Listening {
            tenant: "dev".into(),
            md5: String::new(),
            reader: reader.clone(),
        };
        let (dev, prod) = (
            ConfigKey::new("dev", "G", "a"),
            ConfigKey::new("prod", "G", "a"),
        );
        // An item its reader may not read (a revocation that came first) is left out.
        let items = vec![
            (dev.clone(), listening(&reader)),
            (prod, listening(&reader)),
        ];
        conn.listen(items, 10).unwrap();
        assert_eq!(conn.listens.lock().len(), 1);
        assert_eq!(connections.drop_unreadable_listens(), 0);
        // The grant taken back: the sweep drops the listen; one without a reader (auth
        // off) stays.
        let other = ConfigKey::new("dev", "G", "b");
        conn.listen(vec![(other.clone(), listening(&None))], 10)
            .unwrap();
        let mut revoked = data;
        revoked.permissions.clear();
        auth.set_data(revoked);
        assert_eq!(connections.drop_unreadable_listens(), 1);
        assert!(conn.listens_to(&dev).is_none() && conn.listens_to(&other).is_some());
        // Listening again after it is refused too, should the request have passed first.
        conn.listen(vec![(dev.clone(), listening(&reader))], 10)
            .unwrap();
        assert!(conn.listens_to(&dev).is_none());
    }

    #[test]
    fn what_an_ip_listens_to_is_found_by_the_ip_the_client_gave_else_its_peer() {
        let connections = Connections::new(2);
        let (tx, _rx) = mpsc::channel(1);
        let peer = connections.open("127.0.0.1:5000".parse().unwrap(), tx.clone());
        let behind_nat = connections.open("127.0.0.1:5001".parse().unwrap(), tx);
        behind_nat.setup.lock().client_ip = "10.0.0.7".into();
        let key = ConfigKey::new("dev", "G", "a");
        let listening = Listening {
            tenant: "dev".into(),
            md5: "m1".into(),
            reader: None,
        };
        for conn in [&peer, &behind_nat] {
            conn.listen(vec![(key.clone(), listening.clone())], 10)
                .unwrap();
        }
        let by = |ip| ListenerList::listened_by(&connections, ip);
        assert_eq!(by("127.0.0.1"), [(key.clone(), "m1".to_string())]);
        assert_eq!(by("10.0.0.7"), [(key, "m1".to_string())]);
        assert!(by("10.0.0.8").is_empty());
    }
}
