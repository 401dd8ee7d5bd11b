//! The peer face: what other members ask of this node over the peer channel. The
//! channel itself (its sealed format, replay memory, the sending client) is the
//! channel's (`services::channel`); this face accepts its connections ([`listener`]),
//! checks each message ([`server`]) and routes it ([`route`]) to the one part it is for:
//! hellos to the members, `balance` to connection balancing, `view` to the cluster view, `distro/*` to Distro, `raft/*` to
//! the store.

pub mod listener;
pub mod server;

use std::sync::Arc;

use hyper::StatusCode;
use roster_raft::{NodeId, Rpc};
use tokio::net::TcpListener;

use crate::services::channel::client::ClusterSecret;
use crate::services::channel::tls::PeerTls;
use crate::services::cluster::members::{self, Hello, Members};
use crate::services::cluster::view::ClusterView;
use crate::services::distro::Distro;
use crate::services::push::balance::{BalanceRequest, Balancer};
use crate::services::store::Store;
use crate::services::workers::Workers;
use listener::PeerLimits;
use server::PeerState;

/// What the peer routes reach: cheap handles, cloned once per listener.
#[derive(Clone)]
pub struct PeerRoutes {
    /// Distro's peer routes: pushed client states, verification, snapshots, forwards.
    pub distro: Distro,
    /// Raft's messages.
    pub store: Store,
    /// Hellos record liveness and addresses.
    pub members: Members,
    /// `balance` asks for a round of connection balancing now.
    pub balance: Balancer,
    /// The cluster as this node sees it, for `view` (the state's `cluster_view`).
    pub view: Arc<dyn Fn() -> ClusterView + Send + Sync>,
}

/// Starts the peer face among `workers`: accepts on `listener` (over mutual TLS with
/// `tls`, whose certificate is reloaded when its files change), messages sealed with
/// `secret`.
pub fn spawn_workers(
    listener: TcpListener,
    tls: Option<PeerTls>,
    limits: PeerLimits,
    secret: Option<ClusterSecret>,
    routes: PeerRoutes,
    workers: &mut Workers,
) {
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        tls = tls.is_some(),
        max_connections = limits.max_connections,
        "serving the peer channel"
    );
    if let Some(tls) = &tls {
        workers.spawn(tls.certificate.clone().watch(
            "peer",
            crate::services::net::tls::RELOAD_EVERY,
            workers.stopping(),
        ));
    }
    let state = PeerState::new(secret, routes, limits.header_timeout);
    workers.spawn(listener::serve(
        listener,
        tls.map(|tls| tls.acceptor),
        limits,
        state,
        workers.stopping(),
    ));
}

/// Runs an authenticated message.
pub(super) async fn route(
    app: &PeerRoutes,
    sender: NodeId,
    path: &str,
    body: &[u8],
) -> (StatusCode, Vec<u8>) {
    let bad = |why: String| (StatusCode::BAD_REQUEST, why.into_bytes());
    if path == "session" {
        // A handshake that already knew the incarnation: nothing to do.
        return (StatusCode::OK, Vec::new());
    }
    if path == "hello" {
        let Ok(hello) = rmp_serde::from_slice::<Hello>(body) else {
            return bad("malformed hello".into());
        };
        if hello.node_id != sender {
            return bad("hello from another node id than signed".into());
        }
        app.members.record(&hello);
        // The answer carries this node's applied membership: a node that was removed
        // without receiving the change learns it from here.
        let me = Hello {
            membership: members::applied_membership(&app.store.status()),
            ..app.members.hello()
        };
        let me = rmp_serde::to_vec_named(&me).expect("hello serializes");
        return (StatusCode::OK, me);
    }
    if path == "balance" {
        let Ok(request) = rmp_serde::from_slice::<BalanceRequest>(body) else {
            return bad("malformed balance request".into());
        };
        app.balance.request(request.tolerance);
        return (StatusCode::OK, Vec::new());
    }
    if path == "view" {
        let view = (app.view)();
        return (
            StatusCode::OK,
            rmp_serde::to_vec_named(&view).expect("view serializes"),
        );
    }
    if let Some(kind) = path.strip_prefix("distro/") {
        // Pushed client states, verification, snapshot, forwarded ops.
        return match app.distro.handle(sender, kind, body) {
            Ok(reply) => (StatusCode::OK, reply),
            Err(refusal) => (
                StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST),
                refusal.to_string().into_bytes(),
            ),
        };
    }
    if let Some(rpc) = path.strip_prefix("raft/").and_then(Rpc::from_name) {
        return match app.store.handle_rpc(rpc, body).await {
            Ok(reply) => (StatusCode::OK, reply),
            Err(e) => bad(format!("malformed raft message: {e}")),
        };
    }
    (
        StatusCode::NOT_FOUND,
        format!("no peer route {path}").into_bytes(),
    )
}
