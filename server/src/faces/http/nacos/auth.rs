//! `/nacos/v1/auth/*`: login, and user management (admins; users may change their own
//! password).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{envelope, json_of};
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::state::AppState;
use roster_registry::clock::now_secs;

/// Shortest password accepted for new users and password changes.
pub const MIN_PASSWORD_LEN: usize = 8;

/// `POST /nacos/v1/auth/login` (and `/users/login`): a token for `username`/`password`.
pub async fn login(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let username = params.required("username")?;
    let password = params
        .get("password")
        .ok_or_else(|| Error::missing("password"))?;
    let issued = state.auth.login(username, password, now_secs()).await?;
    let body = json!({
        "accessToken": issued.token,
        "tokenTtl": issued.ttl_secs,
        "globalAdmin": issued.admin,
        "username": username,
    });
    Ok((
        [(header::AUTHORIZATION, format!("Bearer {}", issued.token))],
        json_of(&body),
    )
        .into_response())
}

fn check_username(username: &str) -> Result<(), Error> {
    let ok = !username.is_empty()
        && username.len() <= 64
        && username
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'));
    if ok {
        Ok(())
    } else {
        Err(Error::illegal(
            "username",
            "it should be 1 to 64 characters of letters, digits and '_-.@'.",
        ))
    }
}

fn check_password(key: &str, password: &str) -> Result<(), Error> {
    if password.chars().count() < MIN_PASSWORD_LEN || password.len() > 256 {
        return Err(Error::illegal(
            key,
            format!("it should be {MIN_PASSWORD_LEN} to 256 characters long."),
        ));
    }
    Ok(())
}

/// `GET /nacos/v1/auth/users`: one page of users (hashes are never shown).
pub async fn list_users(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params.page("pageSize", Some(100))?;
    let filter = params.optional("username").unwrap_or("");
    let exact = params.optional("search") == Some("accurate");
    let data = state.auth.data();
    let users: Vec<_> = data
        .users
        .iter()
        .filter(|(name, _)| {
            if exact {
                filter.is_empty() || *name == filter
            } else {
                name.contains(filter)
            }
        })
        .map(|(name, user)| json!({ "username": name, "admin": user.admin }))
        .collect();
    Ok(json_of(&super::page_json(users, page_no, page_size)))
}

/// `POST /nacos/v1/auth/users`: create a (non-admin) user.
pub async fn create_user(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let username = params.required("username")?;
    check_username(username)?;
    let password = params
        .get("password")
        .ok_or_else(|| Error::missing("password"))?;
    check_password("password", password)?;
    state.auth_writes().create_user(username, password).await?;
    Ok(envelope("create user ok!"))
}

/// `PUT /nacos/v1/auth/users`: change a password (admins: anyone's, as in Nacos; a
/// user who is not an admin: their own, giving the current one as `oldPassword`). The
/// user's tokens end, on every node.
pub async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    let username = params.required("username")?;
    if username != caller.0.username {
        caller.require_admin()?;
    }
    let password = params
        .get("newPassword")
        .ok_or_else(|| Error::missing("newPassword"))?;
    check_password("newPassword", password)?;
    if !caller.0.admin {
        // A stolen token alone must not be enough to take the account over.
        let old = params
            .get("oldPassword")
            .ok_or_else(|| Error::missing("oldPassword"))?;
        match state.auth.check_password(username, old).await {
            Ok(_) => {}
            Err(crate::services::auth::AuthError::BadCredentials) => {
                return Err(Error::forbidden(
                    "authorization failed!: oldPassword is not the current password",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
    state.auth_writes().set_password(username, password).await?;
    Ok(envelope("update user ok!"))
}

/// `DELETE /nacos/v1/auth/users`: delete a user (not an admin).
pub async fn delete_user(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let username = params.required("username")?;
    state.auth_writes().delete_user(username).await?;
    Ok(envelope("delete user ok!"))
}
