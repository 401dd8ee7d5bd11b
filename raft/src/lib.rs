//! A generic replicated state machine on [openraft]: the application supplies a
//! [`StateMachine`] (apply / snapshot / restore) and gets a durable, fsynced Raft node.
//!
//! Modules: [`types`] the openraft type configuration, [`batch`] concurrent proposals
//! packed into one entry on the leader, [`log_store`] the durable redb log,
//! [`machine`] the state-machine adapter with on-disk snapshots, [`network`] the peer
//! transport seam, [`node`] the running node that ties them together, [`offline`] a
//! stopped node's directory seeded from a state or recovered into a cluster of one,
//! [`retry`] patience with storage errors that pass (out of descriptors, space or memory).

// openraft's trait methods return its (large) `StorageError`; our helpers return the
// same type rather than box and unbox it at every call.
#![allow(clippy::result_large_err)]

pub mod batch;
pub mod log_store;
pub mod machine;
pub mod network;
pub mod node;
pub mod offline;
pub mod retry;
pub mod types;

pub use machine::{StateExport, StateMachine};
pub use network::{MemTransport, Rpc, Transport, TransportError};
pub use node::{MembershipChange, NodeConfig, RaftNode, RaftStatus, StartError, WriteError};
pub use openraft::ServerState;
pub use types::{LogId, NodeId, Payload, TypeConfig};

#[cfg(test)]
mod tests;
