//! A running Raft node: log store, state machine and transport wired into openraft.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::network::RaftNetworkFactory;
use openraft::{BasicNode, Raft, ServerState, SnapshotPolicy};

use crate::log_store::LogStore;
use crate::machine::{MachineStore, StateMachine};
use crate::types::{NodeId, Payload, TypeConfig};

/// How to run one node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id, unique in the cluster.
    pub node_id: NodeId,
    /// The address peers reach this node's Raft at.
    pub peer_addr: String,
    /// Where the log and snapshots live (created if missing).
    pub dir: PathBuf,
    /// Leader heartbeat period, in milliseconds.
    pub heartbeat_ms: u64,
    /// Election timeout range, in milliseconds; a follower that hears no leader for a
    /// random time in this range starts an election.
    pub election_timeout_ms: (u64, u64),
    /// Build a snapshot (and compact the log) after this many applied entries.
    pub snapshot_every: u64,
}

impl NodeConfig {
    /// Defaults suited to a LAN: 250 ms heartbeats, 1-2 s elections, snapshot every 5000.
    pub fn new(node_id: NodeId, peer_addr: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        Self {
            node_id,
            peer_addr: peer_addr.into(),
            dir: dir.into(),
            heartbeat_ms: 250,
            election_timeout_ms: (1000, 2000),
            snapshot_every: 5000,
        }
    }
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data dir could not be read or written.
    #[error("raft storage in {dir}: {source}")]
    Storage {
        /// The directory in question.
        dir: PathBuf,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The configuration was rejected by openraft.
    #[error("raft config: {0}")]
    Config(String),
    /// Raft stopped while starting.
    #[error("raft stopped: {0}")]
    Stopped(String),
}

/// Why a write was not applied.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// This node is not the leader; the write must go to `leader` (if one is known).
    #[error("not the raft leader (leader: {leader_id:?})")]
    NotLeader {
        /// The current leader's id, if known.
        leader_id: Option<NodeId>,
        /// The current leader's peer address, if known.
        leader_addr: Option<String>,
    },
    /// Raft cannot take writes now (stopped, or membership in flux).
    #[error("raft unavailable: {0}")]
    Unavailable(String),
    /// The command or its response could not be encoded or decoded.
    #[error("raft codec: {0}")]
    Codec(String),
}

/// A snapshot of a node's Raft position, for health checks and metrics.
#[derive(Clone, Debug)]
pub struct RaftStatus {
    /// This node's id.
    pub node_id: NodeId,
    /// Leader, follower, candidate, learner or shutdown.
    pub state: ServerState,
    /// The current term.
    pub term: u64,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// Index of the last entry in the log.
    pub last_log_index: u64,
    /// Index of the last entry applied to the state machine.
    pub last_applied: u64,
    /// Index covered by the latest snapshot.
    pub snapshot_index: u64,
    /// Members of the current configuration (voters and learners) with their addresses.
    pub members: BTreeMap<NodeId, String>,
    /// `None` while running; the fatal error once Raft stopped.
    pub fatal: Option<String>,
}

/// A running Raft node over state machine `S`. Cheap to clone.
pub struct RaftNode<S> {
    raft: Raft<TypeConfig>,
    node_id: NodeId,
    peer_addr: String,
    _machine: PhantomData<fn(S)>,
}

impl<S> Clone for RaftNode<S> {
    fn clone(&self) -> Self {
        Self {
            raft: self.raft.clone(),
            node_id: self.node_id,
            peer_addr: self.peer_addr.clone(),
            _machine: PhantomData,
        }
    }
}

fn storage_err(
    dir: &std::path::Path,
    e: impl std::error::Error + Send + Sync + 'static,
) -> StartError {
    StartError::Storage {
        dir: dir.to_path_buf(),
        source: Box::new(e),
    }
}

impl<S: StateMachine> RaftNode<S> {
    /// Opens the storage in `config.dir`, restores `machine` from the latest snapshot and
    /// starts Raft. The log after the snapshot is re-applied once it is known committed.
    pub async fn start<N>(config: &NodeConfig, machine: S, network: N) -> Result<Self, StartError>
    where
        N: RaftNetworkFactory<TypeConfig>,
    {
        let dir = &config.dir;
        std::fs::create_dir_all(dir).map_err(|e| storage_err(dir, e))?;
        let log = LogStore::open(&dir.join("log.redb")).map_err(|e| storage_err(dir, e))?;
        let machine =
            MachineStore::open(&dir.join("snapshot"), machine).map_err(|e| storage_err(dir, e))?;
        let raft_config = openraft::Config {
            cluster_name: "roster".into(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: config.election_timeout_ms.0,
            election_timeout_max: config.election_timeout_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every),
            max_in_snapshot_log_to_keep: 1000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Config(e.to_string()))?;
        let raft = Raft::new(config.node_id, Arc::new(raft_config), network, log, machine)
            .await
            .map_err(|e| StartError::Stopped(e.to_string()))?;
        Ok(Self {
            raft,
            node_id: config.node_id,
            peer_addr: config.peer_addr.clone(),
            _machine: PhantomData,
        })
    }

    /// Makes this node the sole member of a new cluster, unless it already belongs to
    /// one (a restart never re-initializes).
    pub async fn initialize_single(&self) -> Result<(), StartError> {
        let members = BTreeMap::from([(self.node_id, BasicNode::new(&self.peer_addr))]);
        self.initialize(members).await
    }

    /// Initializes a cluster of `members`, unless this node's log already holds one.
    pub async fn initialize(&self, members: BTreeMap<NodeId, BasicNode>) -> Result<(), StartError> {
        if self
            .raft
            .is_initialized()
            .await
            .map_err(|e| StartError::Stopped(e.to_string()))?
        {
            return Ok(());
        }
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(StartError::Stopped(e.to_string())),
        }
    }

    /// Proposes `command`; returns the state machine's response once it is committed
    /// (fsynced on a quorum) and applied on this node.
    pub async fn write(&self, command: &S::Command) -> Result<S::Response, WriteError> {
        let bytes =
            rmp_serde::to_vec_named(command).map_err(|e| WriteError::Codec(e.to_string()))?;
        match self.raft.client_write(Payload(bytes)).await {
            Ok(reply) => {
                rmp_serde::from_slice(&reply.data.0).map_err(|e| WriteError::Codec(e.to_string()))
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(WriteError::NotLeader {
                    leader_id: f.leader_id,
                    leader_addr: f.leader_node.map(|n| n.addr),
                })
            }
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                Err(WriteError::Unavailable(e.to_string()))
            }
            Err(RaftError::Fatal(e)) => Err(WriteError::Unavailable(e.to_string())),
        }
    }

    /// Waits until some node is known to lead, up to `timeout`. Returns whether one is.
    pub async fn wait_for_leader(&self, timeout: Duration) -> bool {
        self.raft
            .wait(Some(timeout))
            .metrics(|m| m.current_leader.is_some(), "leader known")
            .await
            .is_ok()
    }

    /// Waits until the state machine has applied at least up to `index`.
    pub async fn wait_for_applied(&self, index: u64, timeout: Duration) -> bool {
        self.raft
            .wait(Some(timeout))
            .metrics(
                |m| m.last_applied.map(|l| l.index).unwrap_or(0) >= index,
                "applied",
            )
            .await
            .is_ok()
    }

    /// The node's current Raft position.
    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        RaftStatus {
            node_id: self.node_id,
            state: m.state,
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index.unwrap_or(0),
            last_applied: m.last_applied.map(|l| l.index).unwrap_or(0),
            snapshot_index: m.snapshot.map(|l| l.index).unwrap_or(0),
            members: m
                .membership_config
                .nodes()
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect(),
            fatal: m.running_state.err().map(|e| e.to_string()),
        }
    }

    /// A watch that changes whenever the node's Raft metrics do.
    pub fn changes(
        &self,
    ) -> tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>> {
        self.raft.metrics()
    }

    /// The underlying openraft handle, for the peer transport's server side.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// Stops Raft and waits for its tasks to finish.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}
