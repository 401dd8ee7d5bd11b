//! `GET /api/v1/overview`: the node's metric history for the console's Overview page
//! (what a sample holds and counts: `metrics::history`). Any authenticated caller, as
//! `GET /api/v1/cluster`; the eviction guard's namespaces are filtered the same way.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use super::guard::Caller;
use super::nacos::json_of;
use super::params::Params;
use crate::error::Error;
use crate::services::metrics::history::{RaftSample, Sample, INTERVAL, KEPT};
use crate::state::AppState;

/// The answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Overview {
    /// The answering node's id.
    node: roster_raft::NodeId,
    /// Time between samples, ms.
    interval_ms: u64,
    /// The time the samples kept span, ms.
    window_ms: u64,
    /// Oldest first.
    samples: Vec<Sample>,
    /// Raft as it is now, read for this answer: the console's summary shows it rather
    /// than the newest sample's, which is up to an interval old (at start-up, from
    /// before the node had a leader).
    raft: RaftSample,
}

/// `GET /api/v1/overview[?since=T]`: the samples kept, or those taken after `T` (Unix
/// ms, the `t` of the last sample the caller has).
pub(super) async fn overview(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    let since = params
        .optional("since")
        .map(|raw| {
            raw.parse::<u64>().map_err(|_| {
                Error::illegal(
                    "since",
                    format!("'{raw}' is not a time in Unix milliseconds."),
                )
            })
        })
        .transpose()?;
    let mut samples = state.metrics.history.since(since);
    if !caller.0.admin {
        for sample in &mut samples {
            sample
                .guard_engaged
                .retain(|ns| caller.may_read_namespace(&state, ns));
        }
    }
    let interval_ms = INTERVAL.as_millis() as u64;
    Ok(json_of(&Overview {
        node: state.members.me().node_id,
        interval_ms,
        window_ms: interval_ms * KEPT as u64,
        samples,
        raft: RaftSample::of(&state.store.status()),
    }))
}
