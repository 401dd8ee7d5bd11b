//! `POST /api/v1/auth/rotate-key` (admins): replaces the cluster's token signing key
//! through Raft. Tokens signed by the replaced key keep working until they expire (the
//! key verifies only tokens that expire within one token lifetime of the rotation);
//! `dropPrevious=true` ends them at once, for a key that may have leaked.

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::guard::Caller;
use super::nacos::json_of;
use super::params::Params;
use crate::error::Error;
use crate::services::auth::token::key_id;
use crate::services::auth::writes::Rotated;
use crate::state::AppState;

/// Rotates the key; answers the new key's id and the window of the one it replaced:
/// `{"keyId", "previousKeyId", "previousValidUntil"}` (Unix seconds, `null` when
/// dropped).
pub(super) async fn rotate(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let drop_previous = params.boolean("dropPrevious")?.unwrap_or(false);
    let Rotated {
        key: signing_key,
        previous,
    } = state.auth_writes().rotate_key(drop_previous).await?;
    let data = state.auth.data();
    let retired = previous
        .as_deref()
        .and_then(|p| data.retired_keys.iter().find(|k| k.key == p));
    tracing::info!(
        key_id = %key_id(&signing_key),
        previous_key_id = %previous.as_deref().map(key_id).unwrap_or_default(),
        by = %caller.0.username,
        drop_previous,
        "token signing key rotated"
    );
    Ok(json_of(&json!({
        "keyId": key_id(&signing_key),
        "previousKeyId": previous.as_deref().map(key_id),
        "previousValidUntil": retired.map(|k| k.valid_until_secs),
    })))
}
