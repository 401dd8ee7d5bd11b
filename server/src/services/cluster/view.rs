//! The cluster as one node sees it ([`ClusterView`]): members with their addresses,
//! Raft roles and positions, replication lag, liveness, Distro ownership and the
//! eviction guard. The cluster API and `roster cluster status` show it; a follower asks
//! the leader for the replication figures over the peer channel (`view`).

use std::collections::BTreeMap;

use roster_raft::{NodeId, ServerState};
use serde::{Deserialize, Serialize};

use roster_registry::guard::EvictionGuard;

use super::members::Members;
use super::readiness::Readiness;
use crate::services::channel::client::PeerClient;
use crate::services::store::Store;

/// One member as the cluster API shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    /// Node id.
    pub id: NodeId,
    /// Peer address.
    pub peer: String,
    /// HTTP address, once learned.
    pub http: Option<String>,
    /// `leader`, `follower`, `learner` (or `unknown` for a node not in the Raft config).
    pub role: String,
    /// Whether it votes.
    pub voter: bool,
    /// Whether it answered hellos lately (always true for the answering node).
    pub live: bool,
    /// Its version, once learned.
    pub version: Option<String>,
    /// Last log index the leader has replicated to it (known when the leader answers).
    pub match_index: Option<u64>,
    /// Entries it is behind the leader's log (known when the leader answers).
    pub lag: Option<u64>,
    /// Its gRPC connections, as it last told (absent from older versions' answers).
    #[serde(default)]
    pub grpc_clients: Option<u32>,
}

/// The cluster as one node sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    /// The answering node.
    pub node_id: NodeId,
    /// Its Raft state.
    pub state: String,
    /// Current term.
    pub term: u64,
    /// The leader, if known.
    pub leader: Option<NodeId>,
    /// Last log index on the answering node.
    pub last_log_index: u64,
    /// Last applied index on the answering node.
    pub applied_index: u64,
    /// Commit index (the leader's applied index, when the answering node leads).
    pub commit_index: Option<u64>,
    /// Index covered by the latest snapshot here.
    pub snapshot_index: u64,
    /// Whether the answering node is ready.
    pub ready: bool,
    /// Every member.
    pub members: Vec<MemberView>,
    /// Ephemeral clients owned by each live member, as the answering node sees them.
    pub distro_owned: BTreeMap<NodeId, usize>,
    /// Namespaces where the eviction guard holds removals, on the answering node.
    pub eviction_guard_engaged: Vec<String>,
}

/// A Raft state as the API names it (also the overview's `raft.state`).
pub fn role_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

/// What the view of the cluster is read from: this node's parts, and Distro's ownership
/// counts (read by the caller: Distro sits above the cluster).
pub struct Sources<'a> {
    /// Raft's status.
    pub store: &'a Store,
    /// Members and their liveness.
    pub members: &'a Members,
    /// Whether this node serves clients.
    pub ready: &'a Readiness,
    /// The eviction guard's engaged namespaces.
    pub guard: &'a EvictionGuard,
    /// Ephemeral clients owned by each live member.
    pub distro_owned: BTreeMap<NodeId, usize>,
}

/// The cluster as this node sees it.
pub fn view(sources: Sources<'_>) -> ClusterView {
    let raft = sources.store.status();
    let peers = sources.members.peers();
    let me = sources.members.me();
    let leader_view = raft.state == ServerState::Leader;
    // Raft's membership is the truth once there is one; before, the configured members.
    let mut ids: Vec<NodeId> = if raft.members.is_empty() {
        peers.keys().copied().collect()
    } else {
        raft.members.keys().copied().collect()
    };
    ids.push(me.node_id);
    ids.sort_unstable();
    ids.dedup();
    let live = sources.members.live();
    let members = ids
        .into_iter()
        .map(|id| {
            let peer = peers.get(&id);
            let is_me = id == me.node_id;
            let voter = raft.voters.contains(&id);
            let role = if raft.leader == Some(id) {
                "leader"
            } else if !raft.members.contains_key(&id) {
                "unknown"
            } else if voter {
                "follower"
            } else {
                "learner"
            };
            let match_index = if !leader_view {
                None
            } else if is_me {
                Some(raft.last_log_index)
            } else {
                raft.replication.get(&id).copied()
            };
            MemberView {
                id,
                peer: raft
                    .members
                    .get(&id)
                    .cloned()
                    .or_else(|| peer.map(|p| p.peer_addr.clone()))
                    .unwrap_or_default(),
                http: if is_me {
                    Some(me.http_addr.clone())
                } else {
                    peer.and_then(|p| p.http_addr.clone())
                },
                role: role.into(),
                voter,
                live: live.contains(&id),
                version: if is_me {
                    Some(me.version.clone())
                } else {
                    peer.and_then(|p| p.version.clone())
                },
                match_index,
                lag: match_index.map(|m| raft.last_log_index.saturating_sub(m)),
                grpc_clients: if is_me {
                    sources.members.hello().load
                } else {
                    peer.and_then(|p| p.load)
                }
                .map(|l| l.grpc_clients),
            }
        })
        .collect();
    ClusterView {
        node_id: raft.node_id,
        state: role_name(raft.state).into(),
        term: raft.term,
        leader: raft.leader,
        last_log_index: raft.last_log_index,
        applied_index: raft.last_applied,
        commit_index: leader_view.then_some(raft.last_applied),
        snapshot_index: raft.snapshot_index,
        ready: sources.ready.is_ready(),
        members,
        distro_owned: sources.distro_owned,
        eviction_guard_engaged: sources
            .guard
            .engaged()
            .iter()
            .map(|n| n.to_string())
            .collect(),
    }
}

/// The `local` cluster view, with replication figures from the leader when this node is
/// a follower (only the leader tracks them).
pub async fn with_leader(
    mut local: ClusterView,
    members: &Members,
    peers: &PeerClient,
) -> ClusterView {
    let Some(leader) = local.leader.filter(|l| *l != local.node_id) else {
        return local;
    };
    let Some(addr) = members.peer_addr(leader) else {
        return local;
    };
    let reply = peers
        .post(&addr, "view", Vec::new(), std::time::Duration::from_secs(1))
        .await;
    if let Some(remote) = reply
        .ok()
        .and_then(|b| rmp_serde::from_slice::<ClusterView>(&b).ok())
    {
        local.commit_index = remote.commit_index;
        for m in &mut local.members {
            if let Some(r) = remote.members.iter().find(|r| r.id == m.id) {
                m.match_index = r.match_index;
                m.lag = r.lag;
            }
        }
    }
    local
}
