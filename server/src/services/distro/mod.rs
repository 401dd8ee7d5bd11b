//! Distro: AP replication of ephemeral instances (docs/architecture.md, "Distro"), in three steps.
//!
//! 1. **Responsibility** ([`responsibility`]): each client (an instance address) has one
//!    owner among the live members. Writes and beats for a client are forwarded to its
//!    owner over the peer channel ([`forward`]); if the owner cannot be reached, the
//!    receiving node handles them itself. Only the owner judges beat expiry.
//! 2. **Propagation**: clients changed on a node are gathered for ~100 ms and pushed to
//!    every live peer as whole client states; a receiver takes a state only if its
//!    revision is newer, so duplicates and reordering are harmless.
//! 3. **Verification**: every few seconds each node tells every peer the revision and
//!    last beat of each client it owns; a peer whose copy differs asks for it. A copy
//!    that no owner confirms is offered back to it after two rounds and dropped after
//!    four rounds in which the owner was in sight (time this node spent cut off or
//!    frozen does not count). A starting node loads every client from a peer before it
//!    reports ready.
//!
//! When a member dies, its clients hash to survivors, which keep the instances and
//! judge them from the last beat the dead owner reported, not from zero or "now".
//!
//! The protocol's decisions are in [`core`] (synchronous, explicit `now` and live
//! members); this file is the shell around it: the [`Distro`] handle, its peer handlers
//! and its workers, which read the clock and the members, ask the core and do the I/O
//! through a [`Transport`] ([`transport`]: the peer channel, or the in-memory twin in
//! `mem.rs` for tests). The wire shapes are in [`messages`].

pub mod core;
pub mod forward;
#[cfg(test)]
pub mod mem;
pub mod messages;
pub mod responsibility;
pub mod transport;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use roster_raft::NodeId;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::Error;
use crate::services::channel::client::PeerClient;
use crate::services::cluster::members::Members;
use crate::services::workers::Workers;
use responsibility::owner_of;
use roster_registry::client::ClientShare;
use roster_registry::clock::now_ms;
use roster_registry::instance::Heartbeat;
use roster_registry::Registry;

pub use self::core::Core;
pub use messages::{
    EphemeralOp, OpReply, SnapshotMessage, SnapshotRequest, SyncMessage, VerifyMessage, VerifyReply,
};
pub use transport::{PeerTransport, Transport};

/// How long changes are gathered before they are pushed.
const BATCH: Duration = Duration::from_millis(100);
/// How often failed pushes are retried.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Timeout of one forwarded operation.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(3);
/// Timeout of one push or verification message.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of one snapshot request (the largest message: every client).
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(30);
/// Snapshot parts a starting node has asked for and not yet applied: while it applies
/// one, its peer builds the next two.
const PARTS_AHEAD: u32 = 2;
/// Pause between passes over the peers while no one has given a snapshot.
const SNAPSHOT_RETRY: Duration = Duration::from_millis(250);
/// A verification round yields to the runtime after this many clients, so that a round
/// over many clients does not hold a worker thread for its whole length.
const VERIFY_SLICE: usize = 1024;
/// Most clients confirmed in one verification message (~45 bytes each on the wire).
const VERIFY_MESSAGE_CLIENTS: usize = 100_000;

/// Reads wall-clock ms: [`now_ms`] in a node, a test's own clock in unit tests.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Why a peer's Distro message was refused; the peer listener answers it with
/// [`Refusal::status`].
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The body does not decode as the route's message.
    #[error("malformed distro message: {0}")]
    Malformed(String),
    /// No such route (a newer node's route; the sender falls back, see [`forward`]).
    #[error("no distro route {0}")]
    UnknownRoute(String),
}

impl Refusal {
    /// The HTTP status the peer listener answers with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) => 400,
            Refusal::UnknownRoute(_) => 404,
        }
    }
}

/// Distro handle. Cheap to clone.
pub struct Distro<T: Transport = PeerTransport> {
    shared: Arc<Shared<T>>,
}

impl<T: Transport> Clone for Distro<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<T> {
    core: Core,
    transport: T,
    /// Ops waiting for their owners while a batch to them is in flight.
    forwards: forward::Queues,
    verify_every: Duration,
    clock: Clock,
}

impl Distro<PeerTransport> {
    /// Distro for node `me`, over the peer channel, on the wall clock.
    pub fn new(
        me: NodeId,
        registry: Registry,
        members: Members,
        peers: PeerClient,
        verify_every: Duration,
        holds_connection: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::with_transport(
            me,
            registry,
            PeerTransport::new(members, peers),
            verify_every,
            holds_connection,
            Arc::new(now_ms),
        )
    }
}

impl<T: Transport> Distro<T> {
    /// Distro for node `me` over any transport and clock.
    pub fn with_transport(
        me: NodeId,
        registry: Registry,
        transport: T,
        verify_every: Duration,
        holds_connection: impl Fn(&str) -> bool + Send + Sync + 'static,
        clock: Clock,
    ) -> Self {
        let round_ms = verify_every.as_millis() as u64;
        let started_ms = clock();
        Self {
            shared: Arc::new(Shared {
                core: Core::new(me, registry, round_ms, holds_connection, started_ms),
                transport,
                forwards: forward::Queues::default(),
                verify_every,
                clock,
            }),
        }
    }

    /// The protocol core.
    pub fn core(&self) -> &Core {
        &self.shared.core
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.shared.transport
    }

    fn me(&self) -> NodeId {
        self.shared.core.me()
    }

    fn now(&self) -> u64 {
        (self.shared.clock)()
    }

    /// The owner of `client` among the live members.
    pub fn owner_of(&self, client: &str) -> NodeId {
        owner_of(client, &self.shared.transport.live())
    }

    fn address_owner(&self, ip: &str, port: u16) -> NodeId {
        self.shared
            .core
            .address_owner(ip, port, &self.shared.transport.live())
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
        if self.address_owner(ip, port) != self.me() {
            return None;
        }
        self.shared
            .core
            .registry()
            .beat_in(ns, grouped, ip, port, now)
    }

    /// Whether this node owns `client`.
    pub fn owns(&self, client: &str) -> bool {
        self.owner_of(client) == self.me()
    }

    /// Whether this node may judge beat expiry for a client ([`Core::judgement`]), for
    /// the live members as they are now. One reading answers for many clients.
    pub fn judgement(&self) -> impl Fn(&str) -> bool + Send + 'static {
        let transport = &self.shared.transport;
        let members = transport.peers().len() + 1;
        self.shared
            .core
            .judgement(transport.live().into_vec(), members)
    }

    /// Clients owned by each live member, as this node sees them.
    pub fn ownership_counts(&self) -> BTreeMap<NodeId, usize> {
        self.shared
            .core
            .ownership_counts(&self.shared.transport.live())
    }

    /// Whether the startup snapshot is loaded.
    pub fn loaded(&self) -> bool {
        self.shared.core.loaded()
    }

    /// Runs `op` on the client's owner: here, or forwarded over the peer channel (with
    /// the other ops queued for that owner meanwhile, see [`forward`]). When the owner
    /// cannot be reached, this node handles it.
    pub async fn execute(&self, op: EphemeralOp) -> Result<OpReply, Error> {
        let (ip, port) = op.address();
        let owner = self.address_owner(ip, port);
        if owner == self.me() {
            return self.apply_local(op, self.now());
        }
        let (outcome, start) = self.shared.forwards.enqueue(owner, op);
        if start {
            let distro = self.clone();
            tokio::spawn(async move {
                let shared = &distro.shared;
                forward::send_queued(&shared.forwards, &shared.transport, owner, FORWARD_TIMEOUT)
                    .await;
            });
        }
        match outcome.await {
            Ok(forward::Outcome::Answered(reply)) => reply,
            Ok(forward::Outcome::Unreachable(op, e)) => {
                let (ip, port) = op.address();
                tracing::debug!(owner, client = %format_args!("{ip}:{port}"), error = %e, "owner unreachable; handling here");
                self.apply_local(*op, self.now())
            }
            // The sender ends only after answering every op it took.
            Err(_) => Err(Error::unavailable(
                "forwarding to the owner failed; try again",
            )),
        }
    }

    /// Runs `op` here (this node owns the client, the owner is unreachable, or the op
    /// was forwarded here).
    pub fn apply_local(&self, op: EphemeralOp, now: u64) -> Result<OpReply, Error> {
        self.shared.core.apply_op(op, now)
    }

    // ----- the peer side ---------------------------------------------------------------

    /// Answers a Distro message from peer `from` on `route` (the part after `distro/`):
    /// the reply body, or why it was refused. Forwarded ops run here, never forwarded
    /// again; their answer's format depends on the route ([`forward`]).
    pub fn handle(&self, from: NodeId, route: &str, body: &[u8]) -> Result<Vec<u8>, Refusal> {
        fn decode<M: serde::de::DeserializeOwned>(body: &[u8]) -> Result<M, Refusal> {
            rmp_serde::from_slice(body).map_err(|e| Refusal::Malformed(e.to_string()))
        }
        fn encode<M: serde::Serialize>(value: &M) -> Vec<u8> {
            rmp_serde::to_vec_named(value).expect("distro replies serialize")
        }
        match route {
            messages::SYNC => {
                self.on_sync(from, decode(body)?);
                Ok(encode(&()))
            }
            messages::VERIFY => Ok(encode(&self.on_verify(from, decode(body)?))),
            messages::SNAPSHOT if body.is_empty() => Ok(encode(&self.on_snapshot())),
            messages::SNAPSHOT => Ok(encode(&self.shared.core.answer_snapshot(decode::<
                SnapshotRequest,
            >(
                body
            )?))),
            route @ (forward::ROUTE | forward::LEGACY_ROUTE) => {
                let answer = self.apply_local(decode(body)?, self.now());
                Ok(forward::encode_reply(route, &answer))
            }
            forward::BATCH_ROUTE => {
                let ops: Vec<EphemeralOp> = decode(body)?;
                if ops.len() > forward::MAX_BATCH {
                    return Err(Refusal::Malformed(format!(
                        "{} ops in one batch (at most {})",
                        ops.len(),
                        forward::MAX_BATCH
                    )));
                }
                let now = self.now();
                let answers: Vec<Result<OpReply, Error>> = ops
                    .into_iter()
                    .map(|op| self.apply_local(op, now))
                    .collect();
                Ok(encode(&answers))
            }
            other => Err(Refusal::UnknownRoute(other.to_string())),
        }
    }

    /// Applies client states pushed by peer `from` ([`Core::on_sync`]); a tombstone for
    /// a refused copy of this node's own dead connection goes back with the next push.
    pub fn on_sync(&self, from: NodeId, message: SyncMessage) {
        let outcome = self.shared.core.on_sync(from, message, self.now());
        if !outcome.refused.is_empty() {
            tracing::debug!(
                from,
                clients = outcome.refused.len(),
                "refused copies of connections this node no longer has"
            );
        }
    }

    /// Confirms the copies an owner vouches for; returns those this node lacks or has
    /// older ([`Core::on_verify`]).
    pub fn on_verify(&self, from: NodeId, message: VerifyMessage) -> VerifyReply {
        self.shared.core.on_verify(from, message, self.now()).reply
    }

    /// Every client this node has instances of.
    pub fn on_snapshot(&self) -> SnapshotMessage<ClientShare> {
        self.shared.core.snapshot()
    }

    // ----- workers ---------------------------------------------------------------------

    /// Loads every client from a live peer, part by part ([`SnapshotRequest`]). Gives up
    /// (and reports loaded) when no peer answers within `patience`: then this node
    /// starts the cluster's ephemeral state. When every peer answers that it is starting
    /// too — the whole cluster restarted at once — nobody holds any ephemeral state, and
    /// this node starts from none at once rather than after `patience`: its clients,
    /// which back off while no node is ready, find one sooner.
    pub async fn load_snapshot(&self, patience: Duration) {
        let (core, transport) = (&self.shared.core, &self.shared.transport);
        if transport.peers().is_empty() {
            // A cluster of one: there is nobody to load from.
            core.set_loaded();
            return;
        }
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let peers = transport.peers();
            let mut starting = 0;
            for &id in &peers {
                if !transport.live().contains(&id) {
                    continue;
                }
                match self.load_from(id).await {
                    Ok(Some(clients)) => {
                        core.set_loaded();
                        tracing::info!(
                            from = id,
                            clients,
                            "loaded ephemeral instances from a peer"
                        );
                        return;
                    }
                    // A peer that is starting too has nothing yet: ask another.
                    Ok(None) => starting += 1,
                    Err(e) => tracing::warn!(peer = id, error = %e, "distro snapshot failed"),
                }
            }
            if starting == peers.len() {
                // Every peer answered, and none holds anything: a peer that is down or
                // cut off might, so this needs all of them.
                tracing::info!("every peer is starting too; starting from no ephemeral instances");
                core.set_loaded();
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::info!("no peer answered with ephemeral instances; starting from none");
                core.set_loaded();
                return;
            }
            tokio::time::sleep(SNAPSHOT_RETRY).await;
        }
    }

    /// Takes peer `id`'s snapshot: its plan, then each part (a peer of a build before
    /// parts answers the plan request with everything). The clients taken, or `None`
    /// when the peer has not loaded its own state yet.
    async fn load_from(&self, id: NodeId) -> Result<Option<usize>, String> {
        let plan = self.fetch_snapshot(id, SnapshotRequest::default()).await?;
        if !plan.loaded {
            return Ok(None);
        }
        let now = self.now();
        if plan.parts == 0 {
            let count = plan.clients.len();
            self.shared.core.on_sync(
                id,
                SyncMessage {
                    clients: plan.clients,
                },
                now,
            );
            return Ok(Some(count));
        }
        // The next parts are asked for (and decoded) while this one is applied: the
        // peer serializes while this node writes, on a core of its own where it has
        // one.
        let fetch = |part: u32| {
            let this = self.clone();
            let request = SnapshotRequest {
                part,
                parts: plan.parts,
            };
            tokio::spawn(async move { this.fetch_snapshot(id, request).await })
        };
        let mut count = 0;
        let mut ahead: std::collections::VecDeque<_> =
            (0..plan.parts.min(PARTS_AHEAD)).map(fetch).collect();
        for part in 0..plan.parts {
            let next = ahead.pop_front().expect("a part is asked for ahead");
            let answer = next.await.map_err(|e| e.to_string())??;
            if part + PARTS_AHEAD < plan.parts {
                ahead.push_back(fetch(part + PARTS_AHEAD));
            }
            count += answer.clients.len();
            let message = SyncMessage {
                clients: answer.clients,
            };
            self.shared.core.on_sync(id, message, self.now());
        }
        Ok(Some(count))
    }

    async fn fetch_snapshot(
        &self,
        id: NodeId,
        request: SnapshotRequest,
    ) -> Result<SnapshotMessage, String> {
        let route = format!("distro/{}", messages::SNAPSHOT);
        let body = rmp_serde::to_vec_named(&request).expect("snapshot requests serialize");
        let bytes = self
            .shared
            .transport
            .post(id, &route, body, SNAPSHOT_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        rmp_serde::from_slice(&bytes).map_err(|e| format!("bad snapshot: {e}"))
    }

    /// Starts Distro's workers among `workers`: propagation of clients changed here, and
    /// verification with the peers.
    pub fn spawn_workers(&self, workers: &mut Workers) {
        workers.spawn(self.clone().run_propagation(workers.stopping()));
        workers.spawn(self.clone().run_verification(workers.stopping()));
    }

    /// Pushes clients changed here to every live peer until `stopping`: [`BATCH`] after
    /// a change, and every [`RETRY_EVERY`] for pushes that failed or were queued by the
    /// peer handlers and verification.
    pub async fn run_propagation(self, mut stopping: watch::Receiver<bool>) {
        let clients = self.shared.core.registry().clients();
        loop {
            tokio::select! {
                _ = clients.changed_here() => tokio::time::sleep(BATCH).await,
                _ = tokio::time::sleep(RETRY_EVERY) => {}
                _ = stopping.changed() => return,
            }
            self.propagate().await;
        }
    }

    /// One propagation step: queue the clients changed here for the live peers, then
    /// push everything pending.
    async fn propagate(&self) {
        self.shared
            .core
            .queue_changes(&self.shared.transport.live());
        self.push_pending().await;
    }

    /// Pushes every pending set to its peer at once; failed pushes go back to pending.
    async fn push_pending(&self) {
        let mut sends = JoinSet::new();
        for push in self.shared.core.take_pushes(self.now()) {
            let body = rmp_serde::to_vec_named(&push.message).expect("sync serializes");
            let this = self.clone();
            sends.spawn(async move {
                let route = format!("distro/{}", messages::SYNC);
                let result = this
                    .shared
                    .transport
                    .post(push.peer, &route, body, PEER_TIMEOUT)
                    .await;
                (push.peer, push.ids, result)
            });
        }
        while let Some(done) = sends.join_next().await {
            let Ok((peer, ids, result)) = done else {
                continue;
            };
            if let Err(e) = result {
                tracing::debug!(peer, error = %e, "distro push failed; will retry");
                self.shared.core.push_failed(peer, ids);
            }
        }
    }

    /// Every `verify_every`, judges unconfirmed copies and confirms owned clients to
    /// each live peer (sending those it lacks), until `stopping`.
    pub async fn run_verification(self, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.shared.verify_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => return,
            }
            self.verification_round().await;
        }
    }

    /// One verification round: copies nobody confirmed are offered or dropped
    /// ([`Core::drop_unconfirmed`]), then this node confirms what it owns.
    async fn verification_round(&self) {
        let live = self.shared.transport.live();
        self.shared.core.drop_unconfirmed(&live, self.now());
        self.verify_round().await;
    }

    /// Sends each live peer the clients this node owns; queues and pushes the ones a
    /// peer asks for (and the ones the peers' handlers queued meanwhile).
    async fn verify_round(&self) {
        let core = &self.shared.core;
        let live = self.shared.transport.live();
        let targets = core.verify_targets(&live);
        // Alone, there is nobody to confirm anything to.
        if targets.is_empty() {
            return;
        }
        let summaries = core.registry().clients().summaries();
        let mut owned = Vec::new();
        for slice in summaries.chunks(VERIFY_SLICE) {
            owned.extend(core.confirmations(slice, &live));
            tokio::task::yield_now().await;
        }
        // In messages of at most VERIFY_MESSAGE_CLIENTS each (a million address
        // clients would otherwise make one of ~45 MB); a peer judges each on its own.
        let bodies: Vec<Vec<u8>> = owned
            .chunks(VERIFY_MESSAGE_CLIENTS)
            .map(|chunk| {
                rmp_serde::to_vec_named(&VerifyMessage {
                    clients: chunk.to_vec(),
                })
                .expect("verify serializes")
            })
            .collect();
        let mut calls = JoinSet::new();
        for (peer, body) in targets
            .iter()
            .flat_map(|peer| bodies.iter().map(move |body| (*peer, body.clone())))
        {
            let this = self.clone();
            calls.spawn(async move {
                let route = format!("distro/{}", messages::VERIFY);
                let reply = this
                    .shared
                    .transport
                    .post(peer, &route, body, PEER_TIMEOUT)
                    .await;
                (peer, reply)
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
            }
            core.on_verify_reply(peer, reply);
        }
        self.push_pending().await;
    }
}
