//! The peer side of the channel: the `--peer` listener's routes. Every message is
//! verified against the cluster secret before anything else looks at it.

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use roster_raft::Rpc;

use super::members::Hello;
use super::peer::{ClusterSecret, HEADER_AUTH, HEADER_NODE, HEADER_PROTOCOL};
use crate::clock::now_ms;
use crate::state::AppState;

/// Largest peer message (snapshot chunks are the biggest).
const MAX_PEER_BODY: usize = 64 * 1024 * 1024;

/// What peer handlers need.
#[derive(Clone)]
pub struct PeerState {
    /// The cluster secret; without one every message is refused.
    pub secret: Option<ClusterSecret>,
    /// The node.
    pub app: AppState,
}

/// The peer routes.
pub fn router(state: PeerState) -> Router {
    Router::new()
        .route("/peer/v1/{*path}", post(handle))
        .layer(DefaultBodyLimit::max(MAX_PEER_BODY))
        .with_state(state)
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Response {
    (status, why.into()).into_response()
}

async fn handle(
    State(state): State<PeerState>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(secret) = &state.secret else {
        return refuse(StatusCode::FORBIDDEN, "this node has no cluster secret");
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let sender = match secret.verify(
        header(HEADER_PROTOCOL),
        header(HEADER_NODE),
        header(HEADER_AUTH),
        &path,
        &body,
        now_ms(),
    ) {
        Ok(sender) => sender,
        Err(why) => {
            tracing::warn!(path, why, "refused a peer message");
            return refuse(StatusCode::FORBIDDEN, why);
        }
    };
    if path == "hello" {
        let Ok(hello) = rmp_serde::from_slice::<Hello>(&body) else {
            return refuse(StatusCode::BAD_REQUEST, "malformed hello");
        };
        if hello.node_id != sender {
            return refuse(
                StatusCode::BAD_REQUEST,
                "hello from another node id than signed",
            );
        }
        state.app.members.record(&hello);
        return rmp_serde::to_vec_named(state.app.members.me())
            .expect("hello serializes")
            .into_response();
    }
    if path == "view" {
        let view = super::view::view(&state.app);
        return rmp_serde::to_vec_named(&view)
            .expect("view serializes")
            .into_response();
    }
    if let Some(kind) = path.strip_prefix("distro/") {
        return distro(&state.app, sender, kind, &body);
    }
    if let Some(rpc) = path.strip_prefix("raft/").and_then(Rpc::from_name) {
        return match state.app.store.handle_rpc(rpc, &body).await {
            Ok(reply) => reply.into_response(),
            Err(e) => refuse(
                StatusCode::BAD_REQUEST,
                format!("malformed raft message: {e}"),
            ),
        };
    }
    refuse(StatusCode::NOT_FOUND, format!("no peer route {path}"))
}

/// Distro messages: pushed client states, verification, snapshot, forwarded ops; each
/// answered by `Distro::handle`.
fn distro(app: &AppState, sender: roster_raft::NodeId, kind: &str, body: &[u8]) -> Response {
    match app.distro.handle(sender, kind, body) {
        Ok(reply) => reply.into_response(),
        Err(refusal) => refuse(
            StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST),
            refusal.to_string(),
        ),
    }
}
