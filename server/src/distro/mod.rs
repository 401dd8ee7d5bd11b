//! Distro: AP replication of ephemeral instances (docs/architecture.md, "Distro"), in three steps.
//!
//! 1. **Responsibility** ([`responsibility`]): each client (an instance address) has one
//!    owner among the live members. Writes and beats for a client are forwarded to its
//!    owner over the peer channel; if the owner cannot be reached, the receiving node
//!    handles them itself. Only the owner judges beat expiry.
//! 2. **Propagation**: clients changed on a node are gathered for ~100 ms and pushed to
//!    every live peer as whole client states; a receiver takes a state only if its
//!    revision is newer, so duplicates and reordering are harmless.
//! 3. **Verification**: every few seconds each node tells every peer the revision and
//!    last beat of each client it owns; a peer whose copy differs asks for it. A copy that
//!    no owner confirms is offered back to it after two rounds and dropped after four. A starting node loads every client
//!    from a peer before it reports ready.
//!
//! When a member dies, its clients hash to survivors, which keep the instances and
//! judge them from the last beat the dead owner reported, not from zero or "now".

pub mod forward;
pub mod responsibility;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use roster_raft::NodeId;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::cluster::members::Members;
use crate::cluster::peer::PeerClient;
use crate::error::Error;
use crate::registry::client::ClientData;
use crate::registry::instance::{Addr, Heartbeat};
use crate::registry::service::ServiceKey;
use crate::registry::{InstancePatch, Registration, Registry};
use responsibility::{connection_owner, owner_of};

/// How long changes are gathered before they are pushed.
const BATCH: Duration = Duration::from_millis(100);
/// How often failed pushes are retried.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How long a deletion is remembered, so that it replicates.
const KEEP_DELETED_MS: u64 = 60_000;
/// Timeout of one forwarded operation.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(3);

/// A write or beat for an ephemeral instance, executed by the client's owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EphemeralOp {
    /// Register or re-register.
    Register {
        /// The service.
        key: ServiceKey,
        /// The instance.
        registration: Registration,
    },
    /// Deregister.
    Deregister {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
    },
    /// An operator's update.
    Update {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
        /// What changes.
        patch: InstancePatch,
    },
    /// A heartbeat; with a registration to fall back on when the instance is unknown
    /// (a full beat re-registers).
    Beat {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
        /// Re-register with this when the instance is unknown.
        re_register: Option<Registration>,
    },
}

impl EphemeralOp {
    /// The address (`ip`, `port`) of the client the op is about.
    pub fn address(&self) -> (&str, u16) {
        match self {
            EphemeralOp::Register { registration, .. } => (&registration.ip, registration.port),
            EphemeralOp::Deregister { ip, port, .. }
            | EphemeralOp::Update { ip, port, .. }
            | EphemeralOp::Beat { ip, port, .. } => (ip, *port),
        }
    }
}

/// What an op returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpReply {
    /// Done.
    Done,
    /// A beat for a known (or re-registered) instance, with its beat interval.
    BeatOk(u64),
    /// A beat for an unknown instance without a registration to fall back on.
    BeatUnknown,
}

/// Client states pushed to a peer.
#[derive(Serialize, Deserialize)]
pub struct SyncMessage {
    /// Whole client states.
    pub clients: Vec<ClientData>,
}

/// Every client a node has, and whether that node had itself loaded when it answered
/// (a node that is starting too has nothing to give yet).
#[derive(Serialize, Deserialize)]
pub struct SnapshotMessage {
    /// Whether the answering node had loaded its own state.
    pub loaded: bool,
    /// Whole client states.
    pub clients: Vec<ClientData>,
}

/// What an owner confirms: `(client, revision, last beat ms)` for each client it owns.
#[derive(Serialize, Deserialize)]
pub struct VerifyMessage {
    /// The owner's clients.
    pub clients: Vec<(String, u64, u64)>,
}

/// The clients a peer's copy disagrees on.
#[derive(Serialize, Deserialize)]
pub struct VerifyReply {
    /// Clients to send whole.
    pub need: Vec<String>,
}

/// Distro handle. Cheap to clone.
#[derive(Clone)]
pub struct Distro {
    shared: Arc<Shared>,
}

struct Shared {
    me: NodeId,
    registry: Registry,
    members: Members,
    peers: PeerClient,
    verify_every: Duration,
    /// Clients to push, per peer; held only to add or take.
    pending: Mutex<BTreeMap<NodeId, HashSet<Arc<str>>>>,
    /// Set once the startup snapshot was loaded (or there was nobody to load it from).
    loaded: AtomicBool,
    /// Whether a gRPC connection client of this node is live (this node is the
    /// authority on its own connections).
    holds_connection: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Distro {
    /// Distro for node `me`.
    pub fn new(
        me: NodeId,
        registry: Registry,
        members: Members,
        peers: PeerClient,
        verify_every: Duration,
        holds_connection: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                me,
                registry,
                members,
                peers,
                verify_every,
                pending: Mutex::new(BTreeMap::new()),
                loaded: AtomicBool::new(false),
                holds_connection: Box::new(holds_connection),
            }),
        }
    }

    /// The owner of `client` among the live members.
    pub fn owner_of(&self, client: &str) -> NodeId {
        owner_of(client, &self.shared.members.live_ids())
    }

    /// The owner of the address client `ip:port`, without allocating. Alone among the
    /// live members this node owns every address client.
    fn address_owner(&self, ip: &str, port: u16) -> NodeId {
        let live = self.shared.members.live_ids();
        match live.as_slice() {
            [only] => *only,
            live => owner_of(&Addr::new(ip, port), live),
        }
    }

    /// The part of [`Distro::execute`] for a beat that nearly every beat takes: this
    /// node owns the client and holds the instance, so the beat is applied here without
    /// building the op. `None` when it is not: then execute the op.
    pub fn beat_here(
        &self,
        ns: &str,
        grouped: &str,
        ip: &str,
        port: u16,
        now: u64,
    ) -> Option<Heartbeat> {
        if self.address_owner(ip, port) != self.shared.me {
            return None;
        }
        self.shared.registry.beat_in(ns, grouped, ip, port, now)
    }

    /// Whether this node owns `client`.
    pub fn owns(&self, client: &str) -> bool {
        self.owner_of(client) == self.shared.me
    }

    /// Whether this node may judge beat expiry for a client: it owns it and sees a
    /// majority of the members. A node that sees only a minority is more likely the one
    /// cut off (or it was frozen) than its clients, and its clocks may be stale. One
    /// reading of the live members answers for many clients (an expiry pass).
    pub fn judgement(&self) -> impl Fn(&str) -> bool + Send + 'static {
        let live = self.shared.members.live();
        let members = self.shared.members.peers().len() + 1;
        let quorum = live.len() > members / 2;
        let me = self.shared.me;
        move |client| quorum && owner_of(client, &live) == me
    }

    /// Clients owned by each live member, as this node sees them.
    pub fn ownership_counts(&self) -> BTreeMap<NodeId, usize> {
        let live = self.shared.members.live();
        let mut counts: BTreeMap<NodeId, usize> = live.iter().map(|id| (*id, 0)).collect();
        for id in self.shared.registry.clients().ids() {
            if self
                .shared
                .registry
                .clients()
                .get(&id)
                .is_some_and(|r| !r.entries.is_empty())
            {
                *counts.entry(owner_of(&id, &live)).or_default() += 1;
            }
        }
        counts
    }

    /// Whether the startup snapshot is loaded.
    pub fn loaded(&self) -> bool {
        self.shared.loaded.load(Ordering::Acquire)
    }

    /// Runs `op` on the client's owner: here, or forwarded over the peer channel. When
    /// the owner cannot be reached, this node handles it.
    pub async fn execute(&self, op: EphemeralOp) -> Result<OpReply, Error> {
        let (ip, port) = op.address();
        let owner = self.address_owner(ip, port);
        if owner != self.shared.me {
            if let Some(addr) = self.shared.members.peer_addr(owner) {
                match forward::call(&self.shared.peers, &addr, &op, FORWARD_TIMEOUT).await {
                    Ok(reply) => return reply,
                    Err(e) => {
                        tracing::debug!(owner, client = %format_args!("{ip}:{port}"), error = %e, "owner unreachable; handling here");
                    }
                }
            }
        }
        self.apply_local(op, now_ms())
    }

    /// Runs `op` here (this node owns the client, the owner is unreachable, or the op
    /// was forwarded here).
    pub fn apply_local(&self, op: EphemeralOp, now: u64) -> Result<OpReply, Error> {
        let registry = &self.shared.registry;
        match op {
            EphemeralOp::Register { key, registration } => {
                registry
                    .register(&key, &registration, now)
                    .map_err(Error::from)?;
                Ok(OpReply::Done)
            }
            EphemeralOp::Deregister { key, ip, port } => {
                registry.deregister(&key, &ip, port, Some(true), now);
                Ok(OpReply::Done)
            }
            EphemeralOp::Update {
                key,
                ip,
                port,
                patch,
            } => {
                registry
                    .update_instance(&key, &ip, port, true, &patch, now)
                    .map_err(Error::from)?;
                Ok(OpReply::Done)
            }
            EphemeralOp::Beat {
                key,
                ip,
                port,
                re_register,
            } => {
                if let Some(hb) = registry.beat(&key, &ip, port, now) {
                    return Ok(OpReply::BeatOk(hb.interval_ms));
                }
                match re_register {
                    Some(registration) => {
                        registry
                            .register(&key, &registration, now)
                            .map_err(Error::from)?;
                        Ok(OpReply::BeatOk(
                            Heartbeat::from_metadata(&registration.metadata).interval_ms,
                        ))
                    }
                    None => Ok(OpReply::BeatUnknown),
                }
            }
        }
    }

    // ----- the peer side ---------------------------------------------------------------

    /// Applies client states pushed by peer `from`. A copy of one of this node's own
    /// gRPC connections that no longer exists (a restart ended it) is refused, and a
    /// deletion goes back to the sender so that the copy does not come back to life.
    pub fn on_sync(&self, from: NodeId, message: SyncMessage) {
        let now = now_ms();
        let registry = &self.shared.registry;
        let mut refused = Vec::new();
        for client in &message.clients {
            let mine = connection_owner(&client.id) == Some(self.shared.me);
            if mine && !client.instances.is_empty() && !(self.shared.holds_connection)(&client.id) {
                let id: Arc<str> = client.id.as_str().into();
                let known = registry
                    .clients()
                    .get(&client.id)
                    .map(|r| r.revision)
                    .unwrap_or(0);
                registry.clients().replace(
                    &id,
                    known.max(client.revision) + 1,
                    Default::default(),
                    now,
                );
                refused.push(id);
                continue;
            }
            registry.apply_client(client, now);
        }
        if !refused.is_empty() {
            tracing::debug!(
                from,
                clients = refused.len(),
                "refused copies of connections this node no longer has"
            );
            self.shared
                .pending
                .lock()
                .entry(from)
                .or_default()
                .extend(refused);
        }
    }

    /// Confirms the copies an owner vouches for; returns those this node lacks or has
    /// older. Where this node knows newer (a deletion the owner missed while it was cut
    /// off), it sends its state back to the owner.
    pub fn on_verify(&self, from: NodeId, message: VerifyMessage) -> VerifyReply {
        let now = now_ms();
        let registry = &self.shared.registry;
        let mut need = Vec::new();
        let mut newer_here = Vec::new();
        for (id, revision, last_beat) in message.clients {
            if registry.clients().confirm(&id, revision, now) {
                registry.refresh_client_beat(&id, last_beat);
                continue;
            }
            match registry.clients().get(&id) {
                Some(r) if r.revision > revision => newer_here.push(Arc::from(id.as_str())),
                _ => need.push(id),
            }
        }
        if !newer_here.is_empty() {
            self.shared
                .pending
                .lock()
                .entry(from)
                .or_default()
                .extend(newer_here);
        }
        VerifyReply { need }
    }

    /// Every client this node has instances of.
    pub fn on_snapshot(&self) -> SnapshotMessage {
        let registry = &self.shared.registry;
        let clients = registry
            .clients()
            .ids()
            .iter()
            .filter_map(|id| registry.client_data(id))
            .filter(|c| !c.instances.is_empty())
            .collect();
        SnapshotMessage {
            loaded: self.loaded(),
            clients,
        }
    }

    // ----- workers ---------------------------------------------------------------------

    /// Loads every client from a live peer. Gives up (and reports loaded) when no peer
    /// answers within `patience`: then this node starts the cluster's ephemeral state.
    pub async fn load_snapshot(&self, patience: Duration) {
        if self.shared.members.peers().is_empty() {
            // A cluster of one: there is nobody to load from.
            self.shared.loaded.store(true, Ordering::Release);
            return;
        }
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            for (id, peer) in self.shared.members.peers() {
                if !self.shared.members.is_live(id) {
                    continue;
                }
                match self
                    .shared
                    .peers
                    .post(
                        &peer.peer_addr,
                        "distro/snapshot",
                        Vec::new(),
                        Duration::from_secs(30),
                    )
                    .await
                {
                    Ok(bytes) => match rmp_serde::from_slice::<SnapshotMessage>(&bytes) {
                        // A peer that is starting too has nothing yet; ask another.
                        Ok(snapshot) if !snapshot.loaded => {}
                        Ok(snapshot) => {
                            let count = snapshot.clients.len();
                            self.on_sync(
                                id,
                                SyncMessage {
                                    clients: snapshot.clients,
                                },
                            );
                            tracing::info!(
                                from = id,
                                clients = count,
                                "loaded ephemeral instances from a peer"
                            );
                            self.shared.loaded.store(true, Ordering::Release);
                            return;
                        }
                        Err(e) => tracing::warn!(peer = id, error = %e, "bad distro snapshot"),
                    },
                    Err(e) => tracing::debug!(peer = id, error = %e, "distro snapshot failed"),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                if !self.shared.members.peers().is_empty() {
                    tracing::info!("no peer answered with ephemeral instances; starting from none");
                }
                self.shared.loaded.store(true, Ordering::Release);
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Pushes clients changed here to every live peer until `stopping`.
    pub async fn run_propagation(self, mut stopping: watch::Receiver<bool>) {
        let clients = self.shared.registry.clients();
        loop {
            tokio::select! {
                _ = clients.changed_here() => tokio::time::sleep(BATCH).await,
                _ = tokio::time::sleep(RETRY_EVERY) => {}
                _ = stopping.changed() => return,
            }
            let changed = clients.drain_changed();
            let live = self.shared.members.live();
            {
                let mut pending = self.shared.pending.lock();
                // Peers that are down get everything by verification when they return.
                pending.retain(|id, _| live.contains(id));
                for id in live.iter().filter(|id| **id != self.shared.me) {
                    pending
                        .entry(*id)
                        .or_default()
                        .extend(changed.iter().cloned());
                }
            }
            self.push_pending().await;
        }
    }

    async fn push_pending(&self) {
        let batches: Vec<(NodeId, Vec<Arc<str>>)> = {
            let mut pending = self.shared.pending.lock();
            pending
                .iter_mut()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(peer, ids)| (*peer, ids.drain().collect()))
                .collect()
        };
        let mut sends = JoinSet::new();
        for (peer, ids) in batches {
            let Some(addr) = self.shared.members.peer_addr(peer) else {
                continue;
            };
            let message = SyncMessage {
                clients: ids
                    .iter()
                    .filter_map(|id| self.shared.registry.client_data(id))
                    .collect(),
            };
            let body = rmp_serde::to_vec_named(&message).expect("sync serializes");
            let client = self.shared.peers.clone();
            sends.spawn(async move {
                let result = client
                    .post(&addr, "distro/sync", body, Duration::from_secs(5))
                    .await;
                (peer, ids, result)
            });
        }
        while let Some(done) = sends.join_next().await {
            let Ok((peer, ids, result)) = done else {
                continue;
            };
            if let Err(e) = result {
                tracing::debug!(peer, error = %e, "distro push failed; will retry");
                self.shared
                    .pending
                    .lock()
                    .entry(peer)
                    .or_default()
                    .extend(ids);
            }
        }
    }

    /// Every `verify_every`, confirms owned clients to each live peer (sending those it
    /// lacks) and drops copies nobody confirmed for four rounds, until `stopping`.
    pub async fn run_verification(self, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.shared.verify_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => return,
            }
            self.drop_unconfirmed(now_ms());
            self.verify_round().await;
        }
    }

    async fn verify_round(&self) {
        let registry = &self.shared.registry;
        let live = self.shared.members.live();
        // Alone, there is nobody to confirm anything to.
        if self.alone(&live) {
            return;
        }
        let mut owned: Vec<(String, u64, u64)> = Vec::new();
        for (n, c) in registry.clients().summaries().into_iter().enumerate() {
            if c.held && owner_of(&c.id, &live) == self.shared.me {
                let last_beat = registry.client_last_beat(&c.id);
                owned.push((c.id.to_string(), c.revision, last_beat));
            }
            // A round over many clients must not hold a worker for its whole length.
            if n % 1024 == 1023 {
                tokio::task::yield_now().await;
            }
        }
        let body =
            rmp_serde::to_vec_named(&VerifyMessage { clients: owned }).expect("verify serializes");
        let mut calls = JoinSet::new();
        for id in live.into_iter().filter(|id| *id != self.shared.me) {
            let Some(addr) = self.shared.members.peer_addr(id) else {
                continue;
            };
            let client = self.shared.peers.clone();
            let body = body.clone();
            calls.spawn(async move {
                (
                    id,
                    client
                        .post(&addr, "distro/verify", body, Duration::from_secs(5))
                        .await,
                )
            });
        }
        while let Some(done) = calls.join_next().await {
            let Ok((peer, Ok(reply))) = done else {
                continue;
            };
            let Ok(reply) = rmp_serde::from_slice::<VerifyReply>(&reply) else {
                continue;
            };
            if !reply.need.is_empty() {
                tracing::debug!(
                    peer,
                    clients = reply.need.len(),
                    "peer lacks clients; sending them"
                );
                self.shared
                    .pending
                    .lock()
                    .entry(peer)
                    .or_default()
                    .extend(reply.need.iter().map(|s| Arc::from(s.as_str())));
            }
        }
        self.push_pending().await;
    }

    /// Whether this node is the only live member.
    fn alone(&self, live: &[NodeId]) -> bool {
        live.iter().all(|id| *id == self.shared.me)
    }

    /// Copies of clients owned elsewhere that their owner does not confirm: after two
    /// rounds this node offers its copy to the owner (which takes it unless it knows
    /// newer, e.g. a deletion); after four rounds it drops the copy.
    fn drop_unconfirmed(&self, now: u64) {
        let registry = &self.shared.registry;
        let live = self.shared.members.live();
        // Alone, every client is this node's own: no copies to judge.
        if self.alone(&live) {
            return;
        }
        let round = self.shared.verify_every.as_millis() as u64;
        let mut offers: BTreeMap<NodeId, Vec<Arc<str>>> = BTreeMap::new();
        for client in registry.clients().summaries() {
            let id = client.id;
            let owner = owner_of(&id, &live);
            if !client.held || owner == self.shared.me {
                continue;
            }
            let age = now.saturating_sub(client.confirmed_ms);
            if age > 4 * round {
                tracing::info!(client = %id, owner, "dropping a copy its owner does not confirm");
                registry.drop_client_copy(&id, now);
            } else if age > 2 * round {
                offers.entry(owner).or_default().push(id);
            }
        }
        if !offers.is_empty() {
            let mut pending = self.shared.pending.lock();
            for (owner, ids) in offers {
                pending.entry(owner).or_default().extend(ids);
            }
        }
        registry.clients().forget_deleted(KEEP_DELETED_MS, now);
    }
}
