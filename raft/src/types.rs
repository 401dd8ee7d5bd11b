//! The openraft type configuration shared by every roster node.
//!
//! Commands and responses cross the Raft boundary as opaque bytes ([`Payload`]): the
//! application encodes its own versioned command enum with rmp-serde, so this crate stays
//! generic and the log format does not depend on openraft's generics.

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// Raft node id: a small integer chosen by the operator (`--node-id`).
pub type NodeId = u64;

/// An encoded application command or response, stored as a MessagePack `bin`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// roster's Raft types: byte payloads, u64 node ids, peer address per node.
    pub TypeConfig:
        D = Payload,
        R = Payload,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log id of this configuration.
pub type LogId = openraft::LogId<NodeId>;
/// An error raised by storage, as openraft expects it.
pub type StorageError = openraft::StorageError<NodeId>;
/// A stored membership of this configuration.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
/// An entry of the log.
pub type Entry = openraft::Entry<TypeConfig>;

/// The log id of entry `index` written in `term`.
pub fn log_id(term: u64, index: u64) -> LogId {
    // The node part of a committed leader id is not kept (openraft's standard mode).
    openraft::LogId::new(openraft::CommittedLeaderId::new(term, 0), index)
}
