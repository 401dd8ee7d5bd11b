//! Who the members are and which are alive. Every node says hello to every other member
//! once a second over the peer channel; the hello carries its HTTP address and version,
//! so nodes learn each other's `--http`. A member is live while it answered within the
//! last [`LIVE_WINDOW`]. Before Raft has a membership, the members are `--members`;
//! afterwards they are Raft's (so nodes added or removed at run time count). Hellos
//! also carry each node's gRPC address and [`Load`] (its connection count and
//! readiness), which connection balancing (`services::push::balance`) reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use roster_raft::{NodeId, RaftStatus};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::services::channel::client::PeerClient;
use crate::services::store::Store;
use crate::services::workers::Workers;

/// How often hellos go out.
pub const HELLO_EVERY: Duration = Duration::from_secs(1);
/// A member that has not answered for this long is not live.
pub const LIVE_WINDOW: Duration = Duration::from_secs(3);

/// What nodes tell each other about themselves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Node id.
    pub node_id: NodeId,
    /// Peer address (as the members list names it).
    pub peer_addr: String,
    /// HTTP API address.
    pub http_addr: String,
    /// roster version.
    pub version: String,
    /// In answers: the membership the answering node has applied, as its log index and
    /// member ids. Absent in the hellos sent, and in answers from older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membership: Option<(u64, Vec<NodeId>)>,
    /// The gRPC address clients reach it at (absent from older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_addr: Option<String>,
    /// Its load when it spoke (absent from older versions, and until it has counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
}

/// What a node tells the others of its gRPC clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Load {
    /// Its gRPC connections.
    pub grpc_clients: u32,
    /// Whether it serves clients (a starting node takes none).
    pub ready: bool,
}

/// The membership `status` has applied (committed), for [`Hello::membership`].
pub fn applied_membership(status: &RaftStatus) -> Option<(u64, Vec<NodeId>)> {
    let index = status.membership_index?;
    (status.last_applied >= index).then(|| (index, status.members.keys().copied().collect()))
}

/// What this node knows of another member.
#[derive(Clone, Debug, Default)]
pub struct Peer {
    /// Peer address.
    pub peer_addr: String,
    /// HTTP address, once learned.
    pub http_addr: Option<String>,
    /// Its version, once learned.
    pub version: Option<String>,
    /// When it last answered or said hello.
    pub last_seen: Option<Instant>,
    /// Its gRPC address, once learned.
    pub grpc_addr: Option<String>,
    /// Its load as it last told it.
    pub load: Option<Load>,
}

impl Peer {
    /// Whether it answered or said hello within [`LIVE_WINDOW`] of `now`.
    fn is_live(&self, now: Instant) -> bool {
        self.last_seen
            .is_some_and(|t| now.duration_since(t) < LIVE_WINDOW)
    }
}

/// Membership and liveness. Cheap to clone.
#[derive(Clone)]
pub struct Members {
    shared: Arc<Shared>,
}

struct Shared {
    me: Hello,
    /// This node's load, as the balancer last counted it; guarded for short reads.
    load: parking_lot::Mutex<Option<Load>>,
    /// Other members; guarded for short reads and updates, never across an await.
    peers: RwLock<BTreeMap<NodeId, Peer>>,
    /// The highest log index of a membership without this node that a member answered
    /// with (see [`Members::left_out_at`]); guarded for short reads and updates.
    left_out_at: parking_lot::Mutex<Option<u64>>,
}

impl Members {
    /// This node, and the members it starts with (itself included or not).
    pub fn new(me: Hello, seeds: &BTreeMap<NodeId, String>) -> Self {
        let peers = seeds
            .iter()
            .filter(|(id, _)| **id != me.node_id)
            .map(|(id, addr)| {
                (
                    *id,
                    Peer {
                        peer_addr: addr.clone(),
                        ..Default::default()
                    },
                )
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                me,
                load: parking_lot::Mutex::new(None),
                peers: RwLock::new(peers),
                left_out_at: parking_lot::Mutex::new(None),
            }),
        }
    }

    /// This node.
    pub fn me(&self) -> &Hello {
        &self.shared.me
    }

    /// This node's hello as it goes out now: [`Members::me`] with its current load.
    pub fn hello(&self) -> Hello {
        Hello {
            load: *self.shared.load.lock(),
            ..self.shared.me.clone()
        }
    }

    /// Sets the load the next hellos (and answers to hellos) tell.
    pub fn set_load(&self, load: Load) {
        *self.shared.load.lock() = Some(load);
    }

    /// The gRPC clients of each live member that is ready and told its load, this node
    /// included (when it is ready), by id.
    pub fn ready_loads(&self) -> Vec<(NodeId, u32)> {
        let now = Instant::now();
        let mut loads: Vec<(NodeId, u32)> = self
            .shared
            .peers
            .read()
            .iter()
            .filter(|(_, p)| p.is_live(now))
            .filter_map(|(id, p)| p.load.filter(|l| l.ready).map(|l| (*id, l.grpc_clients)))
            .collect();
        if let Some(mine) = self.shared.load.lock().filter(|l| l.ready) {
            loads.push((self.shared.me.node_id, mine.grpc_clients));
        }
        loads.sort_unstable();
        loads
    }

    /// The gRPC address of member `id` as it told it (this node's own included).
    pub fn grpc_addr(&self, id: NodeId) -> Option<String> {
        if id == self.shared.me.node_id {
            return self.shared.me.grpc_addr.clone();
        }
        self.shared.peers.read().get(&id)?.grpc_addr.clone()
    }

    /// The other members.
    pub fn peers(&self) -> BTreeMap<NodeId, Peer> {
        self.shared.peers.read().clone()
    }

    /// The HTTP addresses learned of the other members, read under the lock without
    /// copying the members (a console's request asks on every call, `faces::http::cors`).
    pub fn any_peer_http(&self, mut matches: impl FnMut(&str) -> bool) -> bool {
        self.shared
            .peers
            .read()
            .values()
            .any(|p| p.http_addr.as_deref().is_some_and(&mut matches))
    }

    /// Ids of live members, this node included, sorted.
    pub fn live(&self) -> Vec<NodeId> {
        self.live_ids().into_vec()
    }

    /// [`Members::live`] without an allocation for clusters of up to 8 members (the
    /// ownership check of every ephemeral write asks it).
    pub fn live_ids(&self) -> SmallVec<[NodeId; 8]> {
        let now = Instant::now();
        let mut ids: SmallVec<[NodeId; 8]> = self
            .shared
            .peers
            .read()
            .iter()
            .filter(|(_, p)| p.is_live(now))
            .map(|(id, _)| *id)
            .collect();
        ids.push(self.shared.me.node_id);
        ids.sort_unstable();
        ids
    }

    /// Whether `id` is live.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.live().contains(&id)
    }

    /// The peer address of member `id`.
    pub fn peer_addr(&self, id: NodeId) -> Option<String> {
        if id == self.shared.me.node_id {
            return Some(self.shared.me.peer_addr.clone());
        }
        self.shared
            .peers
            .read()
            .get(&id)
            .map(|p| p.peer_addr.clone())
    }

    /// Records a hello (received, or answered to ours) from a known member; hellos of
    /// nodes that are not (or no longer) members are ignored.
    pub fn record(&self, hello: &Hello) {
        let mut peers = self.shared.peers.write();
        let Some(peer) = peers.get_mut(&hello.node_id) else {
            return;
        };
        peer.http_addr = Some(hello.http_addr.clone());
        peer.version = Some(hello.version.clone());
        peer.last_seen = Some(Instant::now());
        peer.grpc_addr.clone_from(&hello.grpc_addr);
        peer.load = hello.load;
    }

    /// The log index of the latest membership a member has applied that leaves this
    /// node out, if one answered a hello with such. Later than the membership this node
    /// has applied, it means this node was removed without hearing of it.
    pub fn left_out_at(&self) -> Option<u64> {
        *self.shared.left_out_at.lock()
    }

    /// Notes the membership a member answered with, if it leaves this node out.
    fn note_membership(&self, membership: &Option<(u64, Vec<NodeId>)>) {
        let Some((index, ids)) = membership else {
            return;
        };
        if !ids.contains(&self.shared.me.node_id) {
            let mut left_out_at = self.shared.left_out_at.lock();
            *left_out_at = (*left_out_at).max(Some(*index));
        }
    }

    /// Makes the member list Raft's: adds new members, drops removed ones.
    pub fn follow(&self, raft_members: &BTreeMap<NodeId, String>) {
        if raft_members.is_empty() {
            return;
        }
        let mut peers = self.shared.peers.write();
        peers.retain(|id, _| raft_members.contains_key(id));
        for (id, addr) in raft_members {
            if *id == self.shared.me.node_id {
                continue;
            }
            let peer = peers.entry(*id).or_default();
            peer.peer_addr = addr.clone();
        }
    }

    /// Starts the hellos among `workers`: sent with `client`, each carrying the
    /// membership `store` applied.
    pub fn spawn_workers(&self, client: PeerClient, store: Store, workers: &mut Workers) {
        workers.spawn(self.clone().run(client, store, workers.stopping()));
    }

    /// Says hello to every member once a second until `stopping`.
    pub async fn run(self, client: PeerClient, store: Store, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(HELLO_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut was_live = self.live();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => return,
            }
            self.follow(&store.status().members);
            let body = rmp_serde::to_vec_named(&self.hello()).expect("hello serializes");
            let mut calls = JoinSet::new();
            for (id, peer) in self.peers() {
                let client = client.clone();
                let body = body.clone();
                calls.spawn(async move {
                    let reply = client
                        .post(&peer.peer_addr, "hello", body, Duration::from_millis(800))
                        .await;
                    (id, reply)
                });
            }
            while let Some(done) = calls.join_next().await {
                let Ok((id, reply)) = done else { continue };
                match reply.map(|bytes| rmp_serde::from_slice::<Hello>(&bytes)) {
                    Ok(Ok(hello)) => {
                        self.note_membership(&hello.membership);
                        self.record(&hello);
                    }
                    Ok(Err(e)) => tracing::debug!(peer = id, error = %e, "bad hello reply"),
                    Err(e) => tracing::debug!(peer = id, error = %e, "hello failed"),
                }
            }
            let live = self.live();
            for id in live.iter().filter(|id| !was_live.contains(id)) {
                tracing::info!(peer = id, "peer is up");
            }
            let peers = self.shared.peers.read().keys().copied().collect::<Vec<_>>();
            for id in was_live.iter().filter(|id| !live.contains(id)) {
                if peers.contains(id) {
                    tracing::warn!(peer = id, "peer is down (no answer for {LIVE_WINDOW:?})");
                } else {
                    // Removed from the membership: not a failure.
                    tracing::info!(peer = id, "peer left the cluster");
                }
            }
            was_live = live;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(id: NodeId) -> Hello {
        Hello {
            node_id: id,
            peer_addr: format!("n{id}:7848"),
            http_addr: format!("n{id}:8848"),
            version: "x".into(),
            membership: None,
            grpc_addr: Some(format!("n{id}:9848")),
            load: None,
        }
    }

    #[test]
    fn liveness_follows_hellos_and_raft_membership() {
        let seeds = BTreeMap::from([
            (1, "n1:7848".to_string()),
            (2, "n2:7848".into()),
            (3, "n3:7848".into()),
        ]);
        let m = Members::new(hello(1), &seeds);
        assert_eq!(m.live(), [1]);
        m.record(&hello(3));
        assert_eq!(m.live(), [1, 3]);
        assert_eq!(m.peers()[&3].http_addr.as_deref(), Some("n3:8848"));
        // Raft membership without node 3 drops it, and adds node 4.
        m.follow(&BTreeMap::from([
            (1, "n1:7848".to_string()),
            (2, "n2:7848".into()),
            (4, "n4:7848".into()),
        ]));
        assert_eq!(m.live(), [1]);
        assert_eq!(m.peer_addr(4).as_deref(), Some("n4:7848"));
        assert!(m.peer_addr(3).is_none());
    }

    #[test]
    fn ready_loads_are_of_live_ready_members_that_told_theirs() {
        let seeds = BTreeMap::from([
            (1, "n1:7848".to_string()),
            (2, "n2:7848".into()),
            (3, "n3:7848".into()),
            (4, "n4:7848".into()),
        ]);
        let m = Members::new(hello(1), &seeds);
        assert!(m.ready_loads().is_empty(), "nothing counted yet");
        m.set_load(Load {
            grpc_clients: 7,
            ready: true,
        });
        let told = |id, grpc_clients, ready| Hello {
            load: Some(Load {
                grpc_clients,
                ready,
            }),
            ..hello(id)
        };
        m.record(&told(2, 40, true));
        m.record(&told(3, 0, false));
        m.record(&hello(4));
        assert_eq!(m.ready_loads(), [(1, 7), (2, 40)]);
        assert_eq!(m.grpc_addr(2).as_deref(), Some("n2:9848"));
        assert_eq!(m.hello().load.map(|l| l.grpc_clients), Some(7));
        // An older node's hello (no load, no gRPC address) decodes.
        let old = rmp_serde::to_vec_named(&OldHello {
            node_id: 2,
            peer_addr: "n2:7848".into(),
            http_addr: "n2:8848".into(),
            version: "0.9".into(),
        })
        .unwrap();
        let decoded: Hello = rmp_serde::from_slice(&old).unwrap();
        assert_eq!((decoded.load, decoded.grpc_addr), (None, None));
    }

    /// A hello as versions before connection balancing sent it.
    #[derive(Serialize)]
    struct OldHello {
        node_id: NodeId,
        peer_addr: String,
        http_addr: String,
        version: String,
    }
}
