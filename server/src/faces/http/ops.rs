//! Operations endpoints: liveness, readiness and Prometheus metrics. Open without
//! authentication (they reveal counts, never data) so probes and scrapers need no token.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// 200 while the process serves HTTP.
pub(super) async fn live() -> &'static str {
    "ok"
}

/// 200 once the node has a Raft leader and has loaded its state; 503 before, and for
/// good once the node learns it was removed from the cluster (with the reason).
pub(super) async fn ready(State(state): State<AppState>) -> Response {
    match state.ready.refusal("starting") {
        None => (StatusCode::OK, "ready").into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// Prometheus text exposition.
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let body = state.metrics.render(&state.figures());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
