//! The Raft-backed store of persistent data: [`command`] the replicated commands,
//! [`machine`] the state machine that applies them, and [`Store`], the handle API
//! handlers propose through.

pub mod command;
pub mod machine;

use std::time::Duration;

use roster_raft::network::NoPeers;
use roster_raft::{NodeConfig, RaftNode, RaftStatus, StartError, WriteError};

use crate::auth::Auth;
use crate::registry::Registry;
use command::{Command, CommandV1, Rejection};
use machine::RegistryMachine;

/// Why a proposal did not take effect.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// Applied, and the state machine refused it.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// Raft could not commit it (no leader, stopped).
    #[error("{0}")]
    Unavailable(String),
}

/// Handle to this node's Raft store. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    node: RaftNode<RegistryMachine>,
}

impl Store {
    /// Opens the Raft data under `config.dir`, restores the registry's persistent part and
    /// the auth state from it, and starts Raft.
    pub async fn open(
        config: &NodeConfig,
        registry: Registry,
        auth: Auth,
    ) -> Result<Self, StartError> {
        let machine = RegistryMachine::new(registry, auth);
        let node = RaftNode::start(config, machine, NoPeers).await?;
        Ok(Self { node })
    }

    /// Makes this node a one-member cluster unless it already belongs to one.
    pub async fn initialize_single(&self) -> Result<(), StartError> {
        self.node.initialize_single().await
    }

    /// Waits for a leader, up to `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> bool {
        self.node.wait_for_leader(timeout).await
    }

    /// Waits until everything in the local log at start is applied.
    pub async fn wait_caught_up(&self, timeout: Duration) -> bool {
        let target = self.node.status().last_log_index;
        self.node.wait_for_applied(target, timeout).await
    }

    /// Proposes `command` and waits until it is committed and applied here.
    pub async fn propose(&self, command: CommandV1) -> Result<(), ProposeError> {
        match self.node.write(&Command::V1(command)).await {
            Ok(outcome) => Ok(outcome?),
            Err(WriteError::NotLeader { leader_id, .. }) => {
                Err(ProposeError::Unavailable(match leader_id {
                    Some(id) => format!("not the raft leader (node {id} leads); retry shortly"),
                    None => "no raft leader yet; retry shortly".into(),
                }))
            }
            Err(e) => Err(ProposeError::Unavailable(e.to_string())),
        }
    }

    /// Whether this node is the Raft leader.
    pub fn is_leader(&self) -> bool {
        self.node.status().state == roster_raft::ServerState::Leader
    }

    /// The node's Raft position.
    pub fn status(&self) -> RaftStatus {
        self.node.status()
    }

    /// Stops Raft.
    pub async fn shutdown(&self) {
        self.node.shutdown().await;
    }
}
