//! The Raft-backed store of persistent data: [`command`] the replicated commands,
//! [`machine`] the state machine that routes each to the domain that applies it,
//! [`catalog`] the changes it applies to namespaces, users and sync tasks, [`tasks`]
//! the sync task table (a domain of its own: its writes and its apply), and [`Store`],
//! the handle each domain's writes module proposes through. A proposal on a follower
//! is forwarded to the leader.

pub mod catalog;
pub mod command;
pub mod machine;
pub mod tasks;

use std::collections::BTreeMap;
use std::time::Duration;

use roster_raft::{
    MembershipChange, NodeConfig, NodeId, RaftNode, RaftStatus, Rpc, StartError, WriteError,
};

use crate::error::Error;
use crate::services::channel::client::PeerClient;
use command::{Command, CommandV1, Rejection};
use machine::RegistryMachine;

/// Why a proposal did not take effect.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// Applied, and the state machine refused it.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// Raft could not commit it (no leader reachable, stopped, outcome unknown).
    #[error("{0}")]
    Unavailable(String),
}

impl From<WriteError> for ProposeError {
    fn from(e: WriteError) -> Self {
        ProposeError::Unavailable(e.to_string())
    }
}

/// Handle to this node's Raft store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    node: RaftNode<RegistryMachine, PeerClient>,
}

impl Store {
    /// Opens the Raft data under `config.dir`, restores `machine`'s state from it (the
    /// registry's persistent part, auth, sync tasks, configuration items), and starts
    /// Raft, reaching peers through `transport`.
    pub async fn open(
        config: &NodeConfig,
        machine: RegistryMachine,
        transport: PeerClient,
    ) -> Result<Self, StartError> {
        let node = RaftNode::start(config, machine, transport).await?;
        Ok(Self { node })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.node.id()
    }

    /// Whether this node already belongs to a cluster (its log holds a membership).
    pub async fn is_initialized(&self) -> Result<bool, StartError> {
        self.node.is_initialized().await
    }

    /// Forms a cluster of `members` (id → peer address), unless this node already
    /// belongs to one.
    pub async fn initialize(&self, members: &BTreeMap<NodeId, String>) -> Result<(), StartError> {
        self.node.initialize(members).await
    }

    /// All persistent state with the log position and membership it is at, read under
    /// one lock (a consistent cut). Serializes everything: run it on a blocking thread.
    pub fn export(&self) -> roster_raft::StateExport {
        self.node.export()
    }

    /// Waits for a leader, up to `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> bool {
        self.node.wait_for_leader(timeout).await
    }

    /// Proposes `command` and waits until it is committed and applied by the leader
    /// (on a follower, not necessarily here yet: read through `read_barrier` when the
    /// answer must show it).
    pub async fn propose(&self, command: CommandV1) -> Result<(), ProposeError> {
        Ok(self.node.write(&Command::V1(command)).await??)
    }

    /// Waits until this node has applied everything committed before the call: reads
    /// after it are linearizable.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        Ok(self.node.read_barrier().await?)
    }

    /// `check` on this node's state; if it refuses, `check` again after a read barrier.
    /// For the faces' checks before a proposal: a refusal is never decided on a view
    /// older than the leader's commit when called (a user, service or namespace created
    /// through another node a moment ago is here after the barrier), and the common
    /// case, a check that passes, costs no round trip.
    pub async fn recheck<T, E>(&self, check: impl Fn() -> Result<T, E>) -> Result<T, E>
    where
        E: From<ProposeError>,
    {
        if let Ok(found) = check() {
            return Ok(found);
        }
        self.read_barrier().await?;
        check()
    }

    /// Adds or removes a member, through the leader.
    pub async fn change_membership(&self, change: MembershipChange) -> Result<(), ProposeError> {
        Ok(self.node.change_membership(change).await?)
    }

    /// Answers a Raft RPC from a peer.
    pub async fn handle_rpc(
        &self,
        rpc: Rpc,
        body: &[u8],
    ) -> Result<Vec<u8>, rmp_serde::decode::Error> {
        self.node.handle(rpc, body).await
    }

    /// Whether this node is the Raft leader.
    pub fn is_leader(&self) -> bool {
        self.node.status().state == roster_raft::ServerState::Leader
    }

    /// The node's Raft position.
    pub fn status(&self) -> RaftStatus {
        self.node.status()
    }

    /// Stops starting elections, for good (a node removed from the cluster).
    pub fn stop_campaigning(&self) {
        self.node.stop_campaigning();
    }

    /// Stops Raft.
    pub async fn shutdown(&self) {
        self.node.shutdown().await;
    }
}

/// A proposal's outcome as a client sees it.
impl From<ProposeError> for Error {
    fn from(e: ProposeError) -> Self {
        match e {
            ProposeError::Rejected(Rejection::Registry(r)) => r.into(),
            ProposeError::Rejected(
                r @ (Rejection::UserExists(_)
                | Rejection::AlreadyBootstrapped
                | Rejection::SyncTaskExists(_)),
            ) => Self::conflict(r.to_string()),
            ProposeError::Rejected(
                r @ (Rejection::UserNotFound(_)
                | Rejection::SyncTaskNotFound(_)
                | Rejection::ApiTokenNotFound(_)),
            ) => Self::not_found(r.to_string()),
            ProposeError::Rejected(r @ Rejection::DeleteAdmin(_)) => {
                Self::bad_request(r.to_string())
            }
            ProposeError::Rejected(r @ Rejection::NotBootstrapped) => {
                Self::unavailable(r.to_string())
            }
            ProposeError::Rejected(Rejection::Config(c)) => Self::conflict(c.to_string()),
            ProposeError::Rejected(r @ Rejection::NamespaceHoldsConfigs { .. }) => {
                Self::conflict(r.to_string())
            }
            ProposeError::Unavailable(m) => Self::unavailable(m),
        }
    }
}

/// A refusal of the state machine as a client sees it.
impl From<Rejection> for Error {
    fn from(r: Rejection) -> Self {
        ProposeError::Rejected(r).into()
    }
}
