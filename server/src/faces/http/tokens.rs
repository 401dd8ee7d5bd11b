//! `/api/v1/tokens`: long-lived API tokens (`services::auth::api_tokens`), an admin's
//! to create for a user, list and revoke. A token is answered once, at its creation;
//! afterwards only its id, user, description and creation time are shown.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::state::AppState;

/// The longest description kept.
const MAX_DESCRIPTION: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    user: String,
    #[serde(default)]
    description: String,
}

/// `POST /api/v1/tokens` with `{"user", "description"}`: `201 {"id", "token"}`.
pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let body: CreateBody = serde_json::from_slice(&body)
        .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))?;
    let user = body.user.trim();
    if user.is_empty() {
        return Err(Error::illegal("user", "a user name is required."));
    }
    if body.description.chars().count() > MAX_DESCRIPTION {
        return Err(Error::illegal(
            "description",
            format!("it is longer than {MAX_DESCRIPTION} characters."),
        ));
    }
    let (id, token) = state
        .auth_writes()
        .create_api_token(user, &body.description)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": id, "token": token })),
    )
        .into_response())
}

/// `GET /api/v1/tokens[?user=]`: every token (never its secret), oldest first.
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let user = params.optional("user");
    let data = state.auth.data();
    let mut tokens: Vec<_> = data
        .api_tokens
        .iter()
        .filter(|(_, t)| user.is_none_or(|u| t.user == u))
        .map(|(id, t)| {
            json!({
                "id": id,
                "user": t.user,
                "description": t.description,
                "createdMs": t.created_ms,
            })
        })
        .collect();
    tokens.sort_by_key(|t| {
        (
            t["createdMs"].as_u64(),
            t["id"].as_str().map(str::to_string),
        )
    });
    Ok(Json(json!({ "tokens": tokens })).into_response())
}

/// `DELETE /api/v1/tokens?id=`: revokes it on every node.
pub(super) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = params.required("id")?;
    state.auth_writes().revoke_api_token(id).await?;
    Ok(Json(json!({ "revoked": id })).into_response())
}
