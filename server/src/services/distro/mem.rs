//! The in-memory twin of [`super::transport::PeerTransport`], for unit tests: Distro
//! nodes in one process, each with its own `Registry`, sharing nothing but a [`MemNet`].
//! A post is delivered straight to the receiving node's [`Distro::handle`], encoded as
//! on the wire, so the messages, routes and refusals are the real ones.
//!
//! Faults: a node can be cut off (it sees only itself, the others do not see it, and
//! nothing reaches it or leaves it), a directed link can lose its requests, lose its
//! replies after the receiver processed the request, or delay its requests; a node's
//! view of the live members can be pinned. A frozen node is modelled as a cut-off node
//! whose rounds the test does not run. A node can play a build from before some routes:
//! it refuses them with 404, as an old node does, so a test can mix versions. Every
//! delivered request is logged, so a test can deliver one again, late or twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::http::StatusCode;
use parking_lot::Mutex;
use roster_raft::{NodeId, TransportError};

use super::transport::{Live, Transport};
use super::{Distro, Refusal, Shared};

/// What happens to requests on one directed link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Requests are lost before the receiver sees them.
    Drop,
    /// The receiver processes requests, but the replies are lost.
    LoseReply,
    /// Requests arrive this much later (in tokio time).
    Delay(Duration),
}

/// A request as it was delivered.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// Sender.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// Route, without `distro/`.
    pub route: String,
    /// Body as sent.
    pub body: Vec<u8>,
}

type Handler = Weak<Shared<MemTransport>>;

#[derive(Default)]
struct Net {
    nodes: BTreeMap<NodeId, Handler>,
    cut: BTreeSet<NodeId>,
    faults: BTreeMap<(NodeId, NodeId), Fault>,
    views: BTreeMap<NodeId, Vec<NodeId>>,
    /// Per node, the routes (without `distro/`) its build does not know.
    unknown: BTreeMap<NodeId, BTreeSet<String>>,
    log: Vec<Delivered>,
}

/// The network the nodes of one test share. Cheap to clone.
#[derive(Clone, Default)]
pub struct MemNet {
    net: Arc<Mutex<Net>>,
}

impl MemNet {
    /// A network without nodes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transport of node `me`; `attach` makes the node reachable.
    pub fn transport(&self, me: NodeId) -> MemTransport {
        MemTransport {
            me,
            net: self.clone(),
        }
    }

    /// Makes `distro` reachable as its node id (held weakly: a dropped node is gone).
    pub fn attach(&self, distro: &Distro<MemTransport>) {
        let id = distro.core().me();
        self.net
            .lock()
            .nodes
            .insert(id, Arc::downgrade(&distro.shared));
    }

    /// Cuts node `id` off: it sees only itself; nothing reaches it or leaves it.
    pub fn cut_off(&self, id: NodeId) {
        self.net.lock().cut.insert(id);
    }

    /// Connects a cut-off node again.
    pub fn reconnect(&self, id: NodeId) {
        self.net.lock().cut.remove(&id);
    }

    /// Sets (or with `None` clears) the fault on the link `from` → `to`.
    pub fn fault(&self, from: NodeId, to: NodeId, fault: Option<Fault>) {
        let mut net = self.net.lock();
        match fault {
            Some(f) => net.faults.insert((from, to), f),
            None => net.faults.remove(&(from, to)),
        };
    }

    /// Pins node `id`'s view of the live members (or with `None` lets it follow the
    /// network again).
    pub fn pin_view(&self, id: NodeId, live: Option<&[NodeId]>) {
        let mut net = self.net.lock();
        match live {
            Some(live) => {
                let mut live = live.to_vec();
                live.sort_unstable();
                net.views.insert(id, live)
            }
            None => net.views.remove(&id),
        };
    }

    /// Makes node `id` a build from before `routes` (without `distro/`): it refuses them
    /// as unknown ([`Refusal::UnknownRoute`], a 404) and serves the rest.
    pub fn old_build(&self, id: NodeId, routes: &[&str]) {
        let routes = routes.iter().map(|r| r.to_string()).collect();
        self.net.lock().unknown.insert(id, routes);
    }

    /// The requests delivered so far on `route` from `from` to `to`, oldest first.
    pub fn delivered(&self, from: NodeId, to: NodeId, route: &str) -> Vec<Delivered> {
        self.net
            .lock()
            .log
            .iter()
            .filter(|d| d.from == from && d.to == to && d.route == route)
            .cloned()
            .collect()
    }

    /// Delivers `request` again, as its sender sent it; returns the reply.
    pub fn redeliver(&self, request: &Delivered) -> Result<Vec<u8>, Refusal> {
        let node = self
            .net
            .lock()
            .nodes
            .get(&request.to)
            .and_then(Weak::upgrade);
        let node = Distro {
            shared: node.expect("the receiver is attached"),
        };
        node.handle(request.from, &request.route, &request.body)
    }

    /// Whether node `id`'s build knows `route` (see [`MemNet::old_build`]).
    fn knows(&self, id: NodeId, route: &str) -> bool {
        let net = self.net.lock();
        !net.unknown.get(&id).is_some_and(|r| r.contains(route))
    }

    fn live_for(&self, me: NodeId) -> Live {
        let net = self.net.lock();
        if let Some(view) = net.views.get(&me) {
            return view.iter().copied().collect();
        }
        if net.cut.contains(&me) {
            return [me].into_iter().collect();
        }
        net.nodes
            .keys()
            .copied()
            .filter(|id| !net.cut.contains(id))
            .collect()
    }
}

/// One node's side of a [`MemNet`].
#[derive(Clone)]
pub struct MemTransport {
    me: NodeId,
    net: MemNet,
}

impl MemTransport {
    /// The receiver of a request from this node to `to`, or why there is none.
    fn route_to(
        &self,
        to: NodeId,
    ) -> Result<(Distro<MemTransport>, Option<Fault>), TransportError> {
        let net = self.net.net.lock();
        let addr = format!("node {to}");
        if net.cut.contains(&self.me) || net.cut.contains(&to) {
            return Err(TransportError::Unreachable(addr, "cut off".into()));
        }
        let fault = net.faults.get(&(self.me, to)).copied();
        if fault == Some(Fault::Drop) {
            return Err(TransportError::Unreachable(addr, "dropped".into()));
        }
        let shared = net.nodes.get(&to).and_then(Weak::upgrade);
        let shared =
            shared.ok_or_else(|| TransportError::Unreachable(addr, "no such node".into()))?;
        Ok((Distro { shared }, fault))
    }
}

impl Transport for MemTransport {
    fn live(&self) -> Live {
        self.net.live_for(self.me)
    }

    fn peers(&self) -> Vec<NodeId> {
        let net = self.net.net.lock();
        net.nodes
            .keys()
            .copied()
            .filter(|id| *id != self.me)
            .collect()
    }

    async fn post(
        &self,
        peer: NodeId,
        route: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let addr = format!("node {peer}");
        let (_, fault) = self.route_to(peer)?;
        if let Some(Fault::Delay(delay)) = fault {
            if delay >= timeout {
                tokio::time::sleep(timeout).await;
                return Err(TransportError::NoReply(addr, "timed out".into()));
            }
            tokio::time::sleep(delay).await;
        }
        // Looked up again after a delay: the network may have changed meanwhile.
        let (node, fault) = self.route_to(peer)?;
        let route = route.strip_prefix("distro/").unwrap_or(route).to_string();
        let reply = if self.net.knows(peer, &route) {
            node.handle(self.me, &route, &body)
        } else {
            Err(Refusal::UnknownRoute(route.clone()))
        };
        self.net.net.lock().log.push(Delivered {
            from: self.me,
            to: peer,
            route,
            body,
        });
        if fault == Some(Fault::LoseReply) {
            return Err(TransportError::NoReply(addr, "reply lost".into()));
        }
        reply.map_err(|refusal| {
            let status = StatusCode::from_u16(refusal.status()).expect("a valid status");
            TransportError::Refused(addr, format!("{status}: {refusal}"))
        })
    }
}
