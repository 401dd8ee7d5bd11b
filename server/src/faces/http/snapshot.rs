//! `GET /api/v1/snapshot` (admins): a backup snapshot file of all persistent state
//! (`crate::services::backup::format`), consistent at one applied log index. By default the node first
//! catches up with everything the cluster committed before the request (a read
//! barrier through the leader), so the file holds every write acknowledged before it
//! was asked for; `stale=true` skips that, for a node that has lost its leader.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::guard::Caller;
use super::params::Params;
use crate::error::{Error, ErrorKind};
use crate::services::backup::{encode_export, schedule, BackupError};
use crate::state::AppState;
use roster_registry::clock::now_ms;

/// Answers the snapshot file as `application/octet-stream`, named for its time and node.
pub(super) async fn download(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    if !params.boolean("stale")?.unwrap_or(false) {
        state.store.read_barrier().await?;
    }
    let store = state.store.clone();
    let node_id = store.id();
    let now = now_ms();
    // Serializing every item takes a while on a large registry: off the async threads.
    let bytes = tokio::task::spawn_blocking(move || encode_export(&store.export(), node_id, now))
        .await
        .map_err(|e| Error::new(ErrorKind::Internal, format!("snapshot task failed: {e}")))?
        .map_err(|e| match e {
            BackupError::Empty => Error::unavailable(e.to_string()),
            other => {
                tracing::error!(error = %other, "snapshot failed");
                Error::new(ErrorKind::Internal, "the snapshot could not be taken")
            }
        })?;
    tracing::info!(by = %caller.0.username, bytes = bytes.len(), "backup snapshot taken");
    let name = schedule::file_name(now, node_id);
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}
