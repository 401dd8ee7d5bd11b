//! The v3 API: core (see the table in `super`).

use axum::extract::Request;

use super::{answer_not_served, V3};
use crate::faces::http::endpoint::Answer;
use crate::state::AppState;

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    let _ = (op, req, state);
    answer_not_served("not yet")
}
