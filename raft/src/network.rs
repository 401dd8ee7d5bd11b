//! The peer transport seam: how one node's Raft reaches another's.
//!
//! [`NoPeers`] serves a one-member cluster, where Raft never sends an RPC; any attempt
//! fails as "unreachable". The peer-channel transport for multi-node clusters plugs in
//! through the same `RaftNetworkFactory` trait.

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

use crate::types::{NodeId, TypeConfig};

/// A transport for a single-node cluster: there is nobody to talk to.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPeers;

#[derive(Debug, thiserror::Error)]
#[error("node {0} is not reachable: this node runs without peers")]
struct NoPeerError(NodeId);

fn unreachable<E: std::error::Error>(target: NodeId) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&NoPeerError(target)))
}

/// The client half of [`NoPeers`], for one target node.
#[derive(Clone, Copy, Debug)]
pub struct NoPeerClient(NodeId);

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = NoPeerClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Self::Network {
        NoPeerClient(target)
    }
}

impl RaftNetwork<TypeConfig> for NoPeerClient {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(unreachable(self.0))
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        Err(unreachable(self.0))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        Err(unreachable(self.0))
    }
}
