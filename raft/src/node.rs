//! A running Raft node: log store, state machine and transport wired into openraft, with
//! what followers need on top of it: proposals and membership changes forwarded to the
//! leader, and linearizable reads through the leader's commit index.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{
    ChangeMembershipError, CheckIsLeaderError, ClientWriteError, InitializeError, RaftError,
};
use openraft::{BasicNode, ChangeMembers, Raft, ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};

use crate::batch::{self, Batcher, Forwarder, Redirect, FORWARD_TIMEOUT};
use crate::log_store::LogStore;
use crate::machine::{MachineStore, StateExport, StateMachine};
use crate::network::{decode, encode, Handler, Network, Rpc, Transport};
use crate::types::{NodeId, Payload, TypeConfig};

/// The log database's file in a node's directory.
pub(crate) const LOG_FILE: &str = "log.redb";
/// The directory of the state machine's snapshot in a node's directory.
pub(crate) const SNAPSHOT_DIR: &str = "snapshot";

/// How long a write waits for a leader to exist before giving up.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// How long the leader waits for a proposal to commit before answering "unknown".
const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Why a write (or a read barrier, or a membership change) did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum WriteError {
    /// No leader could be reached in time.
    #[error("no raft leader is reachable ({0}); retry shortly")]
    NoLeader(String),
    /// The request reached the leader but its outcome is unknown (timeout); retrying a
    /// non-idempotent request may apply it twice.
    #[error("the raft leader did not answer in time; the outcome is unknown")]
    Unknown,
    /// Raft cannot take writes now (stopped, or a membership change in flight).
    #[error("raft unavailable: {0}")]
    Unavailable(String),
    /// The command or its response could not be encoded or decoded.
    #[error("raft codec: {0}")]
    Codec(String),
}

/// A change of the cluster's membership.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MembershipChange {
    /// Add a node: first as a learner that catches up, then as a voter.
    Add {
        /// Its id.
        id: NodeId,
        /// Its peer address.
        addr: String,
    },
    /// Remove a node (voter or learner).
    Remove {
        /// Its id.
        id: NodeId,
    },
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
    /// Index of the last entry applied to the state machine (committed, at least).
    pub last_applied: u64,
    /// Index covered by the latest snapshot.
    pub snapshot_index: u64,
    /// Voters of the current configuration.
    pub voters: BTreeSet<NodeId>,
    /// Members (voters and learners) with their peer addresses.
    pub members: BTreeMap<NodeId, String>,
    /// Index of the log entry that set [`RaftStatus::members`] (`None`: none yet; a new
    /// cluster's first membership is at index 0). The membership is the last one
    /// appended, committed once `last_applied` reaches it.
    pub membership_index: Option<u64>,
    /// On the leader: each follower's last replicated index.
    pub replication: BTreeMap<NodeId, u64>,
    /// Milliseconds since the leader last heard from a quorum (leader only).
    pub millis_since_quorum_ack: Option<u64>,
    /// `None` while running; the fatal error once Raft stopped.
    pub fatal: Option<String>,
}

/// A running Raft node over state machine `S`, reaching peers through `T`. Cheap to
/// clone.
pub struct RaftNode<S, T> {
    raft: Raft<TypeConfig>,
    /// The state machine Raft applies to, shared with it: read for exports.
    machine: MachineStore<S>,
    batcher: Batcher,
    forwarder: Forwarder,
    node_id: NodeId,
    peer_addr: String,
    transport: T,
    _machine: PhantomData<fn(S)>,
}

impl<S, T: Clone> Clone for RaftNode<S, T> {
    fn clone(&self) -> Self {
        Self {
            raft: self.raft.clone(),
            machine: self.machine.clone(),
            batcher: self.batcher.clone(),
            forwarder: self.forwarder.clone(),
            node_id: self.node_id,
            peer_addr: self.peer_addr.clone(),
            transport: self.transport.clone(),
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

impl<S: StateMachine, T: Transport> RaftNode<S, T> {
    /// Opens the storage in `config.dir`, restores `machine` from the latest snapshot and
    /// starts Raft. The log after the snapshot is re-applied once it is known committed.
    pub async fn start(config: &NodeConfig, machine: S, transport: T) -> Result<Self, StartError> {
        let dir = &config.dir;
        std::fs::create_dir_all(dir).map_err(|e| storage_err(dir, e))?;
        let log = LogStore::open(&dir.join(LOG_FILE)).map_err(|e| storage_err(dir, e))?;
        let machine = MachineStore::open(&dir.join(SNAPSHOT_DIR), machine)
            .map_err(|e| storage_err(dir, e))?;
        let raft_config = openraft::Config {
            cluster_name: "roster".into(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: config.election_timeout_ms.0,
            election_timeout_max: config.election_timeout_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_every),
            max_in_snapshot_log_to_keep: config.snapshot_every.min(1000),
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Config(e.to_string()))?;
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            Network::new(transport.clone()),
            log,
            machine.clone(),
        )
        .await
        .map_err(|e| StartError::Stopped(e.to_string()))?;
        Ok(Self {
            machine,
            batcher: Batcher::start(raft.clone()),
            forwarder: Forwarder::start(transport.clone()),
            raft,
            node_id: config.node_id,
            peer_addr: config.peer_addr.clone(),
            transport,
            _machine: PhantomData,
        })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.node_id
    }

    /// The state machine's whole state with the log position and membership it is at,
    /// read together (see [`MachineStore::export`]). Serializes the state: call it off
    /// the async threads when the state is large.
    pub fn export(&self) -> StateExport {
        self.machine.export()
    }

    /// Whether this node's log already holds a membership (it joined a cluster before).
    pub async fn is_initialized(&self) -> Result<bool, StartError> {
        self.raft
            .is_initialized()
            .await
            .map_err(|e| StartError::Stopped(e.to_string()))
    }

    /// Makes this node the sole member of a new cluster, unless it already belongs to
    /// one (a restart never re-initializes).
    pub async fn initialize_single(&self) -> Result<(), StartError> {
        let members = BTreeMap::from([(self.node_id, self.peer_addr.clone())]);
        self.initialize(&members).await
    }

    /// Initializes a cluster of `members` (id → peer address), unless this node's log
    /// already holds one.
    pub async fn initialize(&self, members: &BTreeMap<NodeId, String>) -> Result<(), StartError> {
        if self.is_initialized().await? {
            return Ok(());
        }
        let members: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(StartError::Stopped(e.to_string())),
        }
    }

    /// Proposes `command` and returns the state machine's response once it is committed
    /// (fsynced on a quorum) and applied. On a follower the command is forwarded to the
    /// leader; while there is no leader it waits a few seconds for one.
    pub async fn write(&self, command: &S::Command) -> Result<S::Response, WriteError> {
        let bytes =
            rmp_serde::to_vec_named(command).map_err(|e| WriteError::Codec(e.to_string()))?;
        let reply = self.propose_bytes(bytes).await?;
        rmp_serde::from_slice(&reply.0).map_err(|e| WriteError::Codec(e.to_string()))
    }

    /// Refuses at once on a leader that has not heard from a quorum for longer than an
    /// election timeout: it is probably on the minority side of a partition.
    fn check_quorum(&self) -> Result<(), WriteError> {
        let m = self.raft.metrics().borrow().clone();
        if m.state == ServerState::Leader
            && m.millis_since_quorum_ack
                .is_some_and(|ms| ms > self.raft.config().election_timeout_max)
        {
            return Err(WriteError::NoLeader(
                "this leader cannot reach a quorum".into(),
            ));
        }
        Ok(())
    }

    /// Proposes on this node if it leads (bounded by [`COMMIT_TIMEOUT`]), batched with
    /// whatever else is being proposed (see [`crate::batch`]); otherwise says where to go.
    async fn propose_here(&self, bytes: Vec<u8>) -> Result<Result<Payload, Redirect>, WriteError> {
        self.check_quorum()?;
        let deadline = tokio::time::Instant::now() + COMMIT_TIMEOUT;
        batch::outcome(self.batcher.submit(bytes), deadline).await
    }

    async fn propose_bytes(&self, bytes: Vec<u8>) -> Result<Payload, WriteError> {
        let started = Instant::now();
        loop {
            // A follower that knows the leader forwards at once, rather than asking its
            // own Raft core first only to be told to forward.
            let known = self.leader().filter(|(id, _)| *id != self.id());
            let outcome = match known {
                Some((id, addr)) => Ok(Err(Redirect::Leader(id, addr))),
                None => self.propose_here(bytes.clone()).await,
            };
            let redirect = match outcome {
                Ok(Ok(reply)) => return Ok(reply),
                Ok(Err(redirect)) => redirect,
                Err(WriteError::NoLeader(why)) if started.elapsed() < LEADER_WAIT => {
                    tracing::debug!(why, "write waits for a leader with a quorum");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let last_error = match redirect {
                Redirect::Leader(id, addr) => {
                    match self.forwarder.forward(id, &addr, bytes.clone()).await {
                        Ok(reply) => return Ok(reply),
                        Err(WriteError::NoLeader(why)) => why,
                        Err(other) => return Err(other),
                    }
                }
                Redirect::Nobody => "no leader elected".to_string(),
            };
            if started.elapsed() > LEADER_WAIT {
                return Err(WriteError::NoLeader(last_error));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends `body` as `rpc` to the leader and decodes its `Result<R, WriteError>`.
    async fn forward<R: serde::de::DeserializeOwned>(
        &self,
        leader: NodeId,
        addr: &str,
        rpc: Rpc,
        body: Vec<u8>,
    ) -> Result<R, WriteError> {
        batch::call(&self.transport, leader, addr, rpc, body).await
    }

    /// Waits until this node has applied everything the leader had committed when the
    /// call started: a read after it is linearizable.
    pub async fn read_barrier(&self) -> Result<(), WriteError> {
        let started = Instant::now();
        loop {
            let attempt = match self.read_index().await {
                Ok(index) => Ok(index),
                Err(_) => match self.leader() {
                    Some((id, addr)) if id != self.node_id => {
                        self.forward::<u64>(id, &addr, Rpc::ReadIndex, Vec::new())
                            .await
                    }
                    _ => Err(WriteError::NoLeader("no leader elected".into())),
                },
            };
            match attempt {
                Ok(index) => {
                    return if self.wait_for_applied(index, FORWARD_TIMEOUT).await {
                        Ok(())
                    } else {
                        Err(WriteError::Unavailable(format!(
                            "index {index} not applied in time"
                        )))
                    };
                }
                Err(WriteError::NoLeader(why)) if started.elapsed() < LEADER_WAIT => {
                    tracing::debug!(why, "read barrier waits for a leader");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// On the leader: the log index a linearizable read must see applied, once a quorum
    /// has confirmed the leadership. That is openraft's read log id, but never below
    /// the leader's last log index: openraft takes a leader's vote up again when the
    /// node restarts and leads at once in the same term, knowing the commit index only
    /// from its saved hint, which can be behind what it acknowledged before it stopped
    /// (roster saves the hint without an fsync of its own: it rides with the next
    /// append, and the last writes before a crash have none after them). Every acknowledged
    /// write is in the leader's log, so waiting for all of it misses none; it costs, at
    /// most, the wait for entries being committed now.
    async fn read_index(
        &self,
    ) -> Result<u64, RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>> {
        let (read, _) = self.raft.get_read_log_id().await?;
        let last = self.raft.metrics().borrow().last_log_index.unwrap_or(0);
        Ok(read.map(|l| l.index).unwrap_or(0).max(last))
    }

    /// Adds or removes a member, through the leader.
    pub async fn change_membership(&self, change: MembershipChange) -> Result<(), WriteError> {
        let started = Instant::now();
        loop {
            let attempt = if self.raft.current_leader().await == Some(self.node_id) {
                self.apply_membership(&change).await
            } else {
                match self.leader() {
                    Some((id, addr)) => {
                        self.forward::<()>(id, &addr, Rpc::ChangeMembership, encode(&change))
                            .await
                    }
                    None => Err(WriteError::NoLeader("no leader elected".into())),
                }
            };
            match attempt {
                Err(WriteError::NoLeader(_)) if started.elapsed() < LEADER_WAIT => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    /// Carries out a membership change on the leader.
    async fn apply_membership(&self, change: &MembershipChange) -> Result<(), WriteError> {
        let map_err = |e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>| match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => {
                WriteError::NoLeader("leadership moved".into())
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            )) => WriteError::Unavailable("another membership change is in progress; retry".into()),
            other => WriteError::Unavailable(other.to_string()),
        };
        match change {
            MembershipChange::Add { id, addr } => {
                // A learner first, so that it catches up before it counts in quorums.
                self.raft
                    .add_learner(*id, BasicNode::new(addr), true)
                    .await
                    .map_err(map_err)?;
                self.raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([*id])), false)
                    .await
                    .map_err(map_err)?;
            }
            MembershipChange::Remove { id } => {
                let status = self.status();
                if status.voters.contains(id) {
                    self.raft
                        .change_membership(
                            ChangeMembers::RemoveVoters(BTreeSet::from([*id])),
                            false,
                        )
                        .await
                        .map_err(map_err)?;
                } else if status.members.contains_key(id) {
                    self.raft
                        .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([*id])), false)
                        .await
                        .map_err(map_err)?;
                }
            }
        }
        Ok(())
    }

    /// The leader this node knows of, with its peer address.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        let m = self.raft.metrics().borrow().clone();
        let id = m.current_leader?;
        let addr = m
            .membership_config
            .nodes()
            .find(|(n, _)| **n == id)?
            .1
            .addr
            .clone();
        Some((id, addr))
    }

    /// Answers an RPC from a peer (the server side of [`Transport`]).
    pub async fn handle(&self, rpc: Rpc, body: &[u8]) -> Result<Vec<u8>, rmp_serde::decode::Error> {
        Ok(match rpc {
            Rpc::AppendEntries => encode(&self.raft.append_entries(decode(body)?).await),
            Rpc::Vote => encode(&self.raft.vote(decode(body)?).await),
            Rpc::InstallSnapshot => encode(&self.raft.install_snapshot(decode(body)?).await),
            Rpc::Propose => {
                // Only the leader commits; a follower that got this (leadership moved)
                // says so and the sender retries.
                let result = match self.propose_here(body.to_vec()).await {
                    Ok(Ok(reply)) => Ok(reply),
                    Ok(Err(_)) => Err(WriteError::NoLeader("leadership moved".into())),
                    Err(e) => Err(e),
                };
                encode(&result)
            }
            Rpc::ProposeMany => {
                let commands: Vec<serde_bytes::ByteBuf> = decode(body)?;
                let answers: Vec<Result<Payload, WriteError>> = match self.check_quorum() {
                    Err(e) => vec![Err(e); commands.len()],
                    Ok(()) => {
                        let deadline = tokio::time::Instant::now() + COMMIT_TIMEOUT;
                        // Queue them all before waiting, so that they share entries.
                        let pending: Vec<_> = commands
                            .into_iter()
                            .map(|c| self.batcher.submit(c.into_vec()))
                            .collect();
                        let mut answers = Vec::with_capacity(pending.len());
                        for rx in pending {
                            answers.push(match batch::outcome(rx, deadline).await {
                                Ok(Ok(reply)) => Ok(reply),
                                Ok(Err(_)) => Err(WriteError::NoLeader("leadership moved".into())),
                                Err(e) => Err(e),
                            });
                        }
                        answers
                    }
                };
                encode(&Ok::<_, WriteError>(answers))
            }
            Rpc::ReadIndex => {
                let result = match self.read_index().await {
                    Ok(index) => Ok(index),
                    Err(_) => Err(WriteError::NoLeader("not the leader".into())),
                };
                encode(&result)
            }
            Rpc::ChangeMembership => {
                let change: MembershipChange = decode(body)?;
                let result = if self.raft.current_leader().await == Some(self.node_id) {
                    self.apply_membership(&change).await
                } else {
                    Err(WriteError::NoLeader("not the leader".into()))
                };
                encode(&result)
            }
        })
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
            voters: m.membership_config.membership().voter_ids().collect(),
            members: m
                .membership_config
                .nodes()
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect(),
            membership_index: m.membership_config.log_id().map(|l| l.index),
            replication: m
                .replication
                .as_ref()
                .map(|r| {
                    r.iter()
                        .map(|(id, log)| (*id, log.map(|l| l.index).unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default(),
            millis_since_quorum_ack: m.millis_since_quorum_ack,
            fatal: m.running_state.err().map(|e| e.to_string()),
        }
    }

    /// A watch that changes whenever the node's Raft metrics do.
    pub fn changes(
        &self,
    ) -> tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>> {
        self.raft.metrics()
    }

    /// Stops this node from starting elections (and from sending heartbeats): for a node
    /// removed from the cluster that may never receive the membership without it, and
    /// would otherwise keep campaigning as a voter of the joint one.
    pub fn stop_campaigning(&self) {
        let runtime = self.raft.runtime_config();
        runtime.elect(false);
        runtime.heartbeat(false);
    }

    /// Stops Raft and waits for its tasks to finish.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

impl<S: StateMachine, T: Transport> Handler for RaftNode<S, T> {
    fn handle(
        &self,
        rpc: Rpc,
        body: Vec<u8>,
    ) -> Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send + '_>> {
        Box::pin(async move {
            RaftNode::handle(self, rpc, &body)
                .await
                .unwrap_or_else(|e| encode(&Err::<(), _>(WriteError::Codec(e.to_string()))))
        })
    }
}
