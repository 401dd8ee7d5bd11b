//! The seam between Distro's protocol and the network: what a node sees of the cluster
//! (the live members, the members) and how it posts a message to a peer. The real
//! [`PeerTransport`] reads [`Members`] (liveness from hellos, peer addresses) and posts
//! over the authenticated [`PeerClient`]; the in-memory twin (`distro/mem.rs`, test
//! builds) delivers to other Distro nodes in the same process and can drop, delay or cut
//! them off. Compare `raft/src/network.rs` (`Transport`, `MemTransport`).

use std::future::Future;
use std::time::Duration;

use roster_raft::{NodeId, TransportError};
use smallvec::SmallVec;

use crate::services::channel::client::PeerClient;
use crate::services::cluster::members::Members;

/// Live member ids, this node included, sorted; inline up to 8 members, since every
/// ephemeral write and beat asks for them.
pub type Live = SmallVec<[NodeId; 8]>;

/// What Distro needs of the cluster and the network.
pub trait Transport: Send + Sync + 'static {
    /// The live members as this node sees them, itself included, sorted.
    fn live(&self) -> Live;

    /// Every other member, live or not, in id order.
    fn peers(&self) -> Vec<NodeId>;

    /// Posts `body` to `route` (e.g. `distro/sync`) on member `peer`; returns the reply
    /// body. A peer without a known address is [`TransportError::Unreachable`].
    fn post(
        &self,
        peer: NodeId,
        route: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send;
}

/// The real transport: liveness and addresses from [`Members`], messages over the
/// sealed peer channel ([`PeerClient`]).
#[derive(Clone)]
pub struct PeerTransport {
    members: Members,
    client: PeerClient,
}

impl PeerTransport {
    /// A transport over `members` and `client`.
    pub fn new(members: Members, client: PeerClient) -> Self {
        Self { members, client }
    }
}

impl Transport for PeerTransport {
    fn live(&self) -> Live {
        self.members.live_ids()
    }

    fn peers(&self) -> Vec<NodeId> {
        self.members.peers().into_keys().collect()
    }

    async fn post(
        &self,
        peer: NodeId,
        route: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let Some(addr) = self.members.peer_addr(peer) else {
            return Err(TransportError::Unreachable(
                format!("node {peer}"),
                "not a member".into(),
            ));
        };
        self.client.post(&addr, route, body, timeout).await
    }
}
