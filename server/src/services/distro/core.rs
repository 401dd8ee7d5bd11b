//! Distro's decisions as plain synchronous code: no clock, no network, no tasks. Every
//! decision takes `now` (wall-clock ms) and the live member set as this node sees it,
//! writes the [`Registry`] (itself pure) where the protocol says so, and returns what
//! to send to whom. `distro/mod.rs` reads the clock and the members, asks [`Core`], and
//! does the I/O through a [`super::transport::Transport`] — as chitchat's
//! `process_message` decides and its `server.rs` sends.
//!
//! The state beside the registry is small: the clients to push to each peer, whether
//! the startup snapshot is loaded, and since when the verification rounds have seen
//! each peer live.
//!
//! Invariants:
//! - a client's owner is [`owner_of`] over the live members; only the owner confirms a
//!   client, and only copies owned elsewhere are judged unconfirmed;
//! - a copy replaces this node's record only if its revision is newer
//!   ([`Registry::apply_client`]), so duplicates and reordering are harmless;
//! - whatever goes to a peer is a client id in its pending set; the state sent is read
//!   when the push is built, so a client queued twice goes once, in its latest state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use roster_raft::NodeId;

use super::messages::{
    EphemeralOp, OpReply, SnapshotMessage, SnapshotRequest, SyncMessage, VerifyMessage, VerifyReply,
};
use super::responsibility::{connection_created, connection_owner, owner_of};
use crate::error::Error;
use roster_registry::client::{ClientShare, ClientSummary};
use roster_registry::instance::{Addr, Heartbeat};
use roster_registry::Registry;

/// How long a deletion is remembered, so that it replicates (and so that an owner that
/// missed it is sent it back), ms.
pub const KEEP_DELETED_MS: u64 = 60_000;
/// A copy its owner has not confirmed for more than this many rounds is offered back to
/// the owner, which takes it unless it knows newer.
pub const OFFER_AFTER_ROUNDS: u64 = 2;
/// A copy its owner has not confirmed for more than this many rounds, counted while the
/// owner was in sight of this node's running rounds, is dropped.
pub const DROP_AFTER_ROUNDS: u64 = 4;
/// Most instances in one push to a peer (a client with more goes alone), and in one
/// part of a snapshot given to a starting peer. A Dubbo 3 provider's instance, with its
/// nine metadata keys, is about 800 bytes on the wire: 20,000 make ~16 MB, a quarter of
/// the peer channel's 64 MiB limit, which instances with up to ~3 KB of metadata each
/// still fit. (One message for everything failed from ~80,000 such instances on: a
/// restarted node never got them back.)
pub const MESSAGE_INSTANCES: usize = 20_000;

/// Clients with more instances than this are pushed at most once per
/// [`push_interval_ms`]; smaller ones (an address client holds one) at once.
const LARGE_CLIENT: usize = 32;
/// The longest a changed client waits for its push, ms.
const MAX_PUSH_INTERVAL_MS: u64 = 1_000;

/// How long a client of `instances` waits after a push before the next: 100 ms per 32
/// instances, at most [`MAX_PUSH_INTERVAL_MS`].
fn push_interval_ms(instances: usize) -> u64 {
    (100 * instances.div_ceil(LARGE_CLIENT) as u64).min(MAX_PUSH_INTERVAL_MS)
}

/// The snapshot part client `id` belongs to, of `parts`: a hash every node computes
/// alike, so that the parts a starting node asks one peer for cover every client once.
fn snapshot_part_of(id: &str, parts: u32) -> u32 {
    (roster_registry::hash::mix(roster_registry::hash::stable_hash(id.as_bytes()))
        % u64::from(parts)) as u32
}

/// One peer's share of a push: the clients taken from its pending set and their
/// states as this node has them now.
#[derive(Debug)]
pub struct Push {
    /// The peer.
    pub peer: NodeId,
    /// The clients (put back with [`Core::push_failed`] if the push fails).
    pub ids: Vec<Arc<str>>,
    /// What goes on the wire (a client pushed to several peers at once is built once
    /// and shared by their pushes).
    pub message: SyncMessage<Arc<ClientShare>>,
}

/// What [`Core::on_sync`] did with a message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SyncOutcome {
    /// Copies newer than this node's, applied.
    pub applied: usize,
    /// Copies not newer than this node's, ignored.
    pub ignored: usize,
    /// Copies of this node's own gRPC connections that no longer exist: refused, and a
    /// tombstone queued back to the sender.
    pub refused: Vec<Arc<str>>,
}

/// What [`Core::on_verify`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct VerifyOutcome {
    /// Copies that matched the owner's revision: confirmed, beat clocks moved.
    pub confirmed: usize,
    /// The answer: clients this node lacks or has older.
    pub reply: VerifyReply,
    /// Clients this node knows newer than the owner (a deletion it missed): queued back
    /// to the owner.
    pub newer_here: Vec<Arc<str>>,
}

/// What [`Core::drop_unconfirmed`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unconfirmed {
    /// Copies offered back to their owners, per owner (queued to them).
    pub offered: BTreeMap<NodeId, Vec<Arc<str>>>,
    /// Copies dropped.
    pub dropped: Vec<Arc<str>>,
}

/// Distro's protocol state and decisions for one node.
pub struct Core {
    me: NodeId,
    registry: Registry,
    /// The verification period, ms: the unit of "rounds" below.
    round_ms: u64,
    /// Whether a gRPC connection client of this node is live (this node is the
    /// authority on its own connections).
    holds_connection: Box<dyn Fn(&str) -> bool + Send + Sync>,
    /// When this node (this run of it) started, wall-clock ms: its connections set up
    /// before then died with its previous run.
    started_ms: u64,
    /// Clients to push, per peer. Held only to add or take, never across an await.
    pending: Mutex<BTreeMap<NodeId, HashSet<Arc<str>>>>,
    /// Set once the startup snapshot was loaded (or there was nobody to load it from).
    loaded: AtomicBool,
    /// Which peers the verification rounds have seen live, and since when.
    sight: Mutex<Sight>,
    /// Most instances in one push or snapshot part ([`MESSAGE_INSTANCES`]; tests lower
    /// it to see messages split without registering tens of thousands).
    message_instances: AtomicUsize,
    /// When each large client was last pushed, ms ([`Core::take_pushes`]).
    large_pushed: Mutex<HashMap<Arc<str>, u64>>,
}

/// What the verification rounds saw of the peers ([`Core::drop_unconfirmed`]).
#[derive(Default)]
struct Sight {
    /// Since when each live peer has been live without a break, ms.
    since: BTreeMap<NodeId, u64>,
    /// When the last round ran, ms.
    last_round: Option<u64>,
}

impl Core {
    /// The core of node `me`, over `registry`, with verification rounds every
    /// `round_ms`, started at `started_ms`.
    pub fn new(
        me: NodeId,
        registry: Registry,
        round_ms: u64,
        holds_connection: impl Fn(&str) -> bool + Send + Sync + 'static,
        started_ms: u64,
    ) -> Self {
        Self {
            me,
            registry,
            round_ms: round_ms.max(1),
            holds_connection: Box::new(holds_connection),
            started_ms,
            pending: Mutex::new(BTreeMap::new()),
            loaded: AtomicBool::new(false),
            sight: Mutex::new(Sight::default()),
            message_instances: AtomicUsize::new(MESSAGE_INSTANCES),
            large_pushed: Mutex::new(HashMap::new()),
        }
    }

    /// Sets the most instances in one push or snapshot part (tests).
    #[cfg(test)]
    pub fn set_message_instances(&self, n: usize) {
        self.message_instances.store(n.max(1), Ordering::Relaxed);
    }

    fn message_instances(&self) -> usize {
        self.message_instances.load(Ordering::Relaxed)
    }

    /// This node.
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// The registry this core writes.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    // ----- responsibility --------------------------------------------------------------

    /// The owner of the address client `ip:port` among `live`, without allocating.
    /// Alone among the live members this node owns every address client.
    pub fn address_owner(&self, ip: &str, port: u16, live: &[NodeId]) -> NodeId {
        match live {
            [only] => *only,
            live => owner_of(&Addr::new(ip, port), live),
        }
    }

    /// Whether this node may judge beat expiry for a client: it owns it and sees a
    /// majority of the `members` (this node included). A node that sees only a minority
    /// is more likely the one cut off (or it was frozen) than its clients, and its clocks
    /// may be stale. One reading of the live members answers for many clients.
    pub fn judgement(&self, live: Vec<NodeId>, members: usize) -> impl Fn(&str) -> bool + Send {
        let quorum = live.len() > members / 2;
        let me = self.me;
        move |client| quorum && owner_of(client, &live) == me
    }

    /// Clients with instances owned by each live member, as this node sees them.
    pub fn ownership_counts(&self, live: &[NodeId]) -> BTreeMap<NodeId, usize> {
        let mut counts: BTreeMap<NodeId, usize> = live.iter().map(|id| (*id, 0)).collect();
        let clients = self.registry.clients();
        for id in clients.ids() {
            if clients.get(&id).is_some_and(|r| !r.entries.is_empty()) {
                *counts.entry(owner_of(&id, live)).or_default() += 1;
            }
        }
        counts
    }

    /// Runs `op` here (this node owns the client, the owner is unreachable, or the op
    /// was forwarded here).
    pub fn apply_op(&self, op: EphemeralOp, now: u64) -> Result<OpReply, Error> {
        let registry = &self.registry;
        match op {
            EphemeralOp::Register { key, registration } => {
                registry.register(&key, &registration, now)?;
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
                registry.update_instance(&key, &ip, port, true, &patch, now)?;
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
                        registry.register(&key, &registration, now)?;
                        Ok(OpReply::BeatOk(
                            Heartbeat::from_metadata(&registration.metadata).interval_ms,
                        ))
                    }
                    None => Ok(OpReply::BeatUnknown),
                }
            }
        }
    }

    // ----- propagation -----------------------------------------------------------------

    /// Takes the clients changed here and queues them for every live peer. The pending
    /// sets of peers that are not live are dropped: verification catches them up when
    /// they return. Returns how many clients changed.
    pub fn queue_changes(&self, live: &[NodeId]) -> usize {
        let changed = self.registry.clients().drain_changed();
        let mut pending = self.pending.lock();
        pending.retain(|id, _| live.contains(id));
        for id in live.iter().filter(|id| **id != self.me) {
            pending
                .entry(*id)
                .or_default()
                .extend(changed.iter().cloned());
        }
        changed.len()
    }

    /// Takes every non-empty pending set and builds its push from the clients' current
    /// states (a client this node no longer knows at all is left out).
    /// A peer's clients go in as many pushes as it takes to keep each at most
    /// [`MESSAGE_INSTANCES`] instances (a larger client goes alone), so that no message
    /// comes near the peer channel's limit when many clients are pending at once (a
    /// peer that restarted asks for every client).
    ///
    /// A push carries a client whole, so a client with many instances that keeps
    /// changing (a gRPC connection registering in 200 services one by one) would be
    /// sent again with every change: such a client waits, after a push, for
    /// [`push_interval_ms`] before the next (it stays pending meanwhile; the retry tick
    /// takes it), which bounds what it costs to about one copy per interval.
    pub fn take_pushes(&self, now: u64) -> Vec<Push> {
        let batches: Vec<(NodeId, Vec<Arc<str>>)> = {
            let mut pending = self.pending.lock();
            pending
                .iter_mut()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(peer, ids)| (*peer, ids.drain().collect()))
                .collect()
        };
        // Which large clients wait: decided once for every peer.
        let waiting: HashSet<Arc<str>> = {
            let mut pushed = self.large_pushed.lock();
            pushed.retain(|_, at| now.saturating_sub(*at) < MAX_PUSH_INTERVAL_MS);
            let clients = self.registry.clients();
            let unique: HashSet<&Arc<str>> = batches.iter().flat_map(|(_, ids)| ids).collect();
            let mut waiting = HashSet::new();
            for id in unique {
                let size = clients.instances_of(id);
                if size <= LARGE_CLIENT {
                    continue;
                }
                match pushed.get(id) {
                    Some(at) if now.saturating_sub(*at) < push_interval_ms(size) => {
                        waiting.insert(id.clone());
                    }
                    // Pushed now: its interval starts now.
                    _ => {
                        pushed.insert(id.clone(), now);
                    }
                }
            }
            waiting
        };
        let mut pushes = Vec::new();
        // Each client's state is read once, whichever peers it goes to.
        let mut shares: HashMap<Arc<str>, Option<Arc<ClientShare>>> = HashMap::new();
        for (peer, mut ids) in batches {
            if !waiting.is_empty() {
                let (wait, go): (Vec<Arc<str>>, Vec<Arc<str>>) =
                    ids.into_iter().partition(|id| waiting.contains(id));
                self.queue(peer, wait);
                ids = go;
            }
            let mut push = Push {
                peer,
                ids: Vec::new(),
                message: SyncMessage {
                    clients: Vec::new(),
                },
            };
            let mut instances = 0;
            for id in ids {
                let share = shares
                    .entry(id.clone())
                    .or_insert_with(|| self.registry.client_share(&id).map(Arc::new));
                let Some(data) = share.clone() else {
                    continue;
                };
                let size = data.instances.len().max(1);
                if instances > 0 && instances + size > self.message_instances() {
                    let next = Push {
                        peer,
                        ids: Vec::new(),
                        message: SyncMessage {
                            clients: Vec::new(),
                        },
                    };
                    pushes.push(std::mem::replace(&mut push, next));
                    instances = 0;
                }
                instances += size;
                push.ids.push(id);
                push.message.clients.push(data);
            }
            if !push.ids.is_empty() {
                pushes.push(push);
            }
        }
        pushes
    }

    /// Puts back the clients of a push that failed, for the next retry.
    pub fn push_failed(&self, peer: NodeId, ids: Vec<Arc<str>>) {
        self.queue(peer, ids);
    }

    /// The clients queued for `peer`, sorted (for inspection).
    pub fn pending(&self, peer: NodeId) -> Vec<Arc<str>> {
        let mut ids: Vec<Arc<str>> = self
            .pending
            .lock()
            .get(&peer)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    fn queue(&self, peer: NodeId, ids: impl IntoIterator<Item = Arc<str>>) {
        self.pending.lock().entry(peer).or_default().extend(ids);
    }

    /// Applies client states pushed by peer `from`. A copy of one of this node's own
    /// gRPC connections that no longer exists is never taken. One this run of the node
    /// set up (and has seen close) is refused: this node records a deletion newer than
    /// the copy and queues it back to the sender, so that the copy does not come back to
    /// life. One set up before this node started died with its previous run, as a dead
    /// node's connections die: it is ignored, and its copies stay on the peers, never
    /// confirmed, until they drop them ([`DROP_AFTER_ROUNDS`] in sight of this node) —
    /// or its client, connected elsewhere, registers again first. A restart then takes
    /// nothing away from clients that have not moved yet (they keep their instances
    /// for those rounds, as when a node dies and stays dead).
    pub fn on_sync(&self, from: NodeId, message: SyncMessage, now: u64) -> SyncOutcome {
        let registry = &self.registry;
        let mut outcome = SyncOutcome::default();
        for client in &message.clients {
            let mine = connection_owner(&client.id) == Some(self.me);
            if mine && !client.instances.is_empty() && !(self.holds_connection)(&client.id) {
                if connection_created(&client.id).is_some_and(|at| at < self.started_ms) {
                    outcome.ignored += 1;
                    continue;
                }
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
                outcome.refused.push(id);
                continue;
            }
            if registry.apply_client(client, now) {
                tracing::debug!(from, client = %client.id, revision = client.revision, instances = client.instances.len(), shadowed = registry.clients().is_shadowed(&client.id), "took a copy");
                outcome.applied += 1;
            } else {
                outcome.ignored += 1;
            }
        }
        if !outcome.refused.is_empty() {
            self.queue(from, outcome.refused.iter().cloned());
        }
        outcome
    }

    // ----- verification ----------------------------------------------------------------

    /// The peers a verification round confirms to: every other live member; none when
    /// this node is alone.
    pub fn verify_targets(&self, live: &[NodeId]) -> Vec<NodeId> {
        live.iter().copied().filter(|id| *id != self.me).collect()
    }

    /// What this node confirms, out of `clients` (a slice of
    /// [`roster_registry::client::Clients::summaries`], so that a long round can yield
    /// between slices): `(id, revision, last beat)` of each client it owns among `live`
    /// and holds instances of.
    pub fn confirmations(
        &self,
        clients: &[ClientSummary],
        live: &[NodeId],
    ) -> Vec<(String, u64, u64)> {
        clients
            .iter()
            .filter(|c| c.held && owner_of(&c.id, live) == self.me)
            .map(|c| {
                let last_beat = self.registry.client_last_beat(&c.id);
                (c.id.to_string(), c.revision, last_beat)
            })
            .collect()
    }

    /// Answers an owner's confirmations: copies at the owner's revision are confirmed
    /// and their beat clocks moved to the owner's last beat; clients this node lacks or
    /// has older are asked for (once its startup snapshot is loaded); where this node
    /// knows newer (a deletion the owner missed
    /// while it was cut off or frozen) its state is queued back to the owner.
    pub fn on_verify(&self, from: NodeId, message: VerifyMessage, now: u64) -> VerifyOutcome {
        let registry = &self.registry;
        let mut outcome = VerifyOutcome::default();
        for (id, revision, last_beat) in message.clients {
            if registry.clients().confirm(&id, revision, now) {
                registry.refresh_client_beat(&id, last_beat);
                outcome.confirmed += 1;
                continue;
            }
            match registry.clients().get(&id) {
                Some(r) if r.revision > revision => outcome.newer_here.push(Arc::from(id.as_str())),
                // While this node loads its startup snapshot, what it lacks is on its way
                // in that snapshot: asking for it too would have the owner send every
                // client twice.
                _ if !self.loaded() => {}
                _ => outcome.reply.need.push(id),
            }
        }
        if !outcome.newer_here.is_empty() {
            self.queue(from, outcome.newer_here.iter().cloned());
        }
        outcome
    }

    /// Queues the clients peer `from` asked for in its answer to this node's round.
    pub fn on_verify_reply(&self, from: NodeId, reply: VerifyReply) {
        if !reply.need.is_empty() {
            self.queue(from, reply.need.iter().map(|s| Arc::from(s.as_str())));
        }
    }

    /// Judges the copies of clients owned elsewhere by how long ago their owner last
    /// confirmed them (or they were written): after [`OFFER_AFTER_ROUNDS`] this node
    /// offers its copy to the owner (which takes it unless it knows newer, e.g. a
    /// deletion); after [`DROP_AFTER_ROUNDS`] *in which the owner could have confirmed
    /// it* it drops the copy, keeping its revision. The owner could not while this node
    /// did not see it live, or while this node itself was not running its rounds
    /// (frozen, cut off): a copy is never dropped before its owner has had four rounds
    /// in sight of this node. Deletions older than [`KEEP_DELETED_MS`] are forgotten.
    /// Alone, every client is this node's own: nothing is judged.
    pub fn drop_unconfirmed(&self, live: &[NodeId], now: u64) -> Unconfirmed {
        let in_sight = self.sight(live, now);
        let mut outcome = Unconfirmed::default();
        if live.iter().all(|id| *id == self.me) {
            return outcome;
        }
        let registry = &self.registry;
        for client in registry.clients().summaries() {
            let owner = owner_of(&client.id, live);
            if !client.held || owner == self.me {
                continue;
            }
            let unconfirmed = now.saturating_sub(client.confirmed_ms);
            // A connection's owner may be dead (not in sight at all): then from the
            // last confirmation alone.
            let since = in_sight.get(&owner).copied().unwrap_or(0);
            let unconfirmed_in_sight = now.saturating_sub(client.confirmed_ms.max(since));
            if unconfirmed_in_sight > DROP_AFTER_ROUNDS * self.round_ms {
                tracing::info!(client = %client.id, owner, "dropping a copy its owner does not confirm");
                registry.drop_client_copy(&client.id, now);
                outcome.dropped.push(client.id);
            } else if unconfirmed > OFFER_AFTER_ROUNDS * self.round_ms {
                outcome.offered.entry(owner).or_default().push(client.id);
            }
        }
        for (owner, ids) in &outcome.offered {
            self.queue(*owner, ids.iter().cloned());
        }
        registry.clients().forget_deleted(KEEP_DELETED_MS, now);
        outcome
    }

    /// Records which peers this round sees live, and returns since when each has been
    /// in sight without a break. A round that comes more than [`OFFER_AFTER_ROUNDS`]
    /// after the previous one means this node was not running (frozen, starved): what
    /// it saw before counts for nothing.
    fn sight(&self, live: &[NodeId], now: u64) -> BTreeMap<NodeId, u64> {
        let mut sight = self.sight.lock();
        let missed = sight
            .last_round
            .is_none_or(|last| now.saturating_sub(last) > OFFER_AFTER_ROUNDS * self.round_ms);
        if missed {
            sight.since.clear();
        }
        sight.last_round = Some(now);
        sight.since.retain(|id, _| live.contains(id));
        for id in live.iter().filter(|id| **id != self.me) {
            sight.since.entry(*id).or_insert(now);
        }
        sight.since.clone()
    }

    // ----- snapshot --------------------------------------------------------------------

    /// Whether the startup snapshot is loaded.
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Marks the startup snapshot loaded (or given up on).
    pub fn set_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    /// Every client this node has instances of, for a starting peer.
    pub fn snapshot(&self) -> SnapshotMessage<ClientShare> {
        self.snapshot_part(0, 1)
    }

    /// What a starting peer asked for: the plan (how many parts this node's snapshot
    /// takes, [`MESSAGE_INSTANCES`] instances to a part), or one part.
    pub fn answer_snapshot(&self, request: SnapshotRequest) -> SnapshotMessage<ClientShare> {
        if request.parts == 0 {
            let (_, instances, _) = self.registry.totals();
            return SnapshotMessage {
                loaded: self.loaded(),
                clients: Vec::new(),
                parts: instances.div_ceil(self.message_instances()).max(1) as u32,
            };
        }
        self.snapshot_part(request.part, request.parts)
    }

    /// The clients with instances whose id hashes to `part` of `parts`.
    fn snapshot_part(&self, part: u32, parts: u32) -> SnapshotMessage<ClientShare> {
        let registry = &self.registry;
        let parts = parts.max(1);
        let clients = registry
            .clients()
            .ids()
            .iter()
            .filter(|id| snapshot_part_of(id, parts) == part)
            .filter_map(|id| registry.client_share(id))
            .filter(|c| !c.instances.is_empty())
            .collect();
        SnapshotMessage {
            loaded: self.loaded(),
            clients,
            parts,
        }
    }

    /// Takes a snapshot from peer `from`, unless that peer had not loaded its own yet
    /// (then `None`: ask another). Returns how many clients it carried.
    pub fn load(&self, from: NodeId, snapshot: SnapshotMessage, now: u64) -> Option<usize> {
        if !snapshot.loaded {
            return None;
        }
        let count = snapshot.clients.len();
        self.on_sync(
            from,
            SyncMessage {
                clients: snapshot.clients,
            },
            now,
        );
        self.set_loaded();
        Some(count)
    }
}
