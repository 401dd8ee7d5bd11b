//! The peer transport seam: how one node's Raft reaches another's.
//!
//! A [`Transport`] delivers one encoded RPC to a peer address and returns the encoded
//! reply; [`Network`] turns openraft's calls into such RPCs (rmp-serde on the wire), and
//! [`crate::RaftNode::handle`] answers them on the other side. The server provides the
//! real transport (its authenticated peer channel); [`MemTransport`] connects nodes in
//! one process, for tests.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::types::{NodeId, TypeConfig};

/// The RPCs nodes send each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rpc {
    /// Log replication and heartbeats.
    AppendEntries,
    /// Leader election.
    Vote,
    /// One chunk of a snapshot.
    InstallSnapshot,
    /// A command proposed on a follower, for the leader to commit.
    Propose,
    /// Several commands proposed on a follower at once (see [`crate::batch`]).
    ProposeMany,
    /// The leader's commit index for a linearizable read.
    ReadIndex,
    /// A membership change, for the leader to carry out.
    ChangeMembership,
}

impl Rpc {
    /// A short name, usable in a URL path.
    pub fn name(self) -> &'static str {
        match self {
            Rpc::AppendEntries => "append",
            Rpc::Vote => "vote",
            Rpc::InstallSnapshot => "snapshot",
            Rpc::Propose => "propose",
            Rpc::ProposeMany => "propose-many",
            Rpc::ReadIndex => "read-index",
            Rpc::ChangeMembership => "membership",
        }
    }

    /// The RPC named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Rpc::AppendEntries,
            Rpc::Vote,
            Rpc::InstallSnapshot,
            Rpc::Propose,
            Rpc::ProposeMany,
            Rpc::ReadIndex,
            Rpc::ChangeMembership,
        ]
        .into_iter()
        .find(|r| r.name() == name)
    }
}

/// Why an RPC got no reply.
#[derive(Clone, Debug, thiserror::Error)]
pub enum TransportError {
    /// The request was not delivered (connection refused, no route): safe to retry.
    #[error("peer {0} unreachable: {1}")]
    Unreachable(String, String),
    /// Sent, but no reply came in time: it may or may not have been processed.
    #[error("peer {0} did not answer: {1}")]
    NoReply(String, String),
    /// The peer refused it (bad cluster secret, protocol version, malformed).
    #[error("peer {0} refused the message: {1}")]
    Refused(String, String),
}

/// Delivers RPCs to peers.
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends `body` as `rpc` to node `target` at `addr`; returns the reply body.
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send;
}

/// Encodes a message for the wire.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(value).expect("raft messages serialize")
}

/// Decodes a message from the wire.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, rmp_serde::decode::Error> {
    rmp_serde::from_slice(bytes)
}

/// openraft's network over a [`Transport`].
#[derive(Clone)]
pub struct Network<T> {
    transport: T,
}

impl<T> Network<T> {
    /// A network sending through `transport`.
    pub fn new(transport: T) -> Self {
        Self { transport }
    }
}

/// The client half of [`Network`], for one target node.
pub struct PeerClient<T> {
    transport: T,
    target: NodeId,
    addr: String,
}

impl<T: Transport> RaftNetworkFactory<TypeConfig> for Network<T> {
    type Network = PeerClient<T>;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        PeerClient {
            transport: self.transport.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

impl<T: Transport> PeerClient<T> {
    async fn rpc<Req, Resp, E>(
        &self,
        rpc: Rpc,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let reply = self
            .transport
            .call(
                self.target,
                &self.addr,
                rpc,
                encode(request),
                option.hard_ttl(),
            )
            .await
            .map_err(|e| match e {
                TransportError::Unreachable(..) => RPCError::Unreachable(Unreachable::new(&e)),
                _ => RPCError::Network(NetworkError::new(&e)),
            })?;
        let result: Result<Resp, RaftError<NodeId, E>> =
            decode(&reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl<T: Transport> RaftNetwork<TypeConfig> for PeerClient<T> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.rpc(Rpc::AppendEntries, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.rpc(Rpc::InstallSnapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.rpc(Rpc::Vote, &rpc, &option).await
    }
}

/// Something that answers RPCs: a node, seen by [`MemTransport`].
pub trait Handler: Send + Sync + 'static {
    /// Answers one RPC.
    fn handle(
        &self,
        rpc: Rpc,
        body: Vec<u8>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>>;
}

/// Connects nodes inside one process, by address. A node that is not registered (or
/// was disconnected) is unreachable.
#[derive(Clone, Default)]
pub struct MemTransport {
    nodes: Arc<Mutex<HashMap<String, Arc<dyn Handler>>>>,
}

impl MemTransport {
    /// Makes `handler` reachable at `addr`.
    pub fn connect(&self, addr: &str, handler: Arc<dyn Handler>) {
        self.nodes
            .lock()
            .expect("lock")
            .insert(addr.to_string(), handler);
    }

    /// Makes `addr` unreachable.
    pub fn disconnect(&self, addr: &str) {
        self.nodes.lock().expect("lock").remove(addr);
    }
}

impl Transport for MemTransport {
    async fn call(
        &self,
        _target: NodeId,
        addr: &str,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let handler = self.nodes.lock().expect("lock").get(addr).cloned();
        let handler = handler
            .ok_or_else(|| TransportError::Unreachable(addr.into(), "not connected".into()))?;
        tokio::time::timeout(timeout, handler.handle(rpc, body))
            .await
            .map_err(|_| TransportError::NoReply(addr.into(), "timed out".into()))
    }
}
