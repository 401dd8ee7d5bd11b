//! The v3 API: auth (`/nacos/v3/auth/...`), as Nacos 3's default auth plugin serves it:
//! login, users, roles and permissions. Each is the v1 operation
//! (`nacos::auth`, `nacos::permissions`) with its answer in the v3 envelope
//! ([`from_v1`]); the login answers v1's bare JSON, as Nacos 3 does. Users who are not
//! admins change their own password only, and (as in v1) give the current one as
//! `oldPassword`: a stolen token alone must not take an account over.

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{answer_not_served, V3};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::page_json;
use crate::faces::http::nacos::{auth, permissions};
use crate::faces::http::nacos_v2_envelope::{failure, success};
use crate::faces::http::params::Params;
use crate::state::AppState;

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::Login => Handler::call(auth::login, req, state),
        V3::UserCreate => Handler::call(user_create, req, state),
        V3::UserPassword => Handler::call(user_password, req, state),
        V3::UserDelete => Handler::call(user_delete, req, state),
        V3::UserAdmin => Handler::call(user_admin, req, state),
        V3::UserList => Handler::call(user_list, req, state),
        V3::UserSearch => Handler::call(user_search, req, state),
        V3::RoleCreate => Handler::call(role_create, req, state),
        V3::RoleDelete => Handler::call(role_delete, req, state),
        V3::RoleList => Handler::call(role_list, req, state),
        V3::RoleSearch => Handler::call(role_search, req, state),
        V3::PermissionExists => Handler::call(permission_exists, req, state),
        V3::PermissionCreate => Handler::call(permission_create, req, state),
        V3::PermissionDelete => Handler::call(permission_delete, req, state),
        V3::PermissionList => Handler::call(permission_list, req, state),
        _ => answer_not_served("not this area's"),
    }
}

/// A v1 answer in the v3 envelope. v1 answers a JSON body, bare or in an envelope
/// (`{code, message, data}`: the console's code 200, or v2's 0), whose `data` becomes
/// v3's; an error becomes v3's failure with the same status.
pub(super) async fn from_v1(result: Result<Response, Error>) -> Response {
    let response = match result {
        Ok(response) => response,
        Err(e) => return failure(e),
    };
    // v1's answers here are small: a page of users or roles at most.
    let body = to_bytes(response.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let value = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    success(unwrap_envelope(value))
}

/// The `data` of `{code, message, data}`; any other value as it is.
fn unwrap_envelope(value: Value) -> Value {
    match value {
        Value::Object(mut map)
            if map.len() == 3 && map.contains_key("code") && map.contains_key("message") =>
        {
            map.remove("data").unwrap_or(Value::Null)
        }
        other => other,
    }
}

async fn user_create(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(auth::create_user(state, caller, params).await).await
}

async fn user_password(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(auth::change_password(state, caller, params).await).await
}

async fn user_delete(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(auth::delete_user(state, caller, params).await).await
}

/// `POST /nacos/v3/auth/user/admin`: Nacos creates the first admin here; roster creates
/// it when the cluster is bootstrapped, so this answers as Nacos does once one exists:
/// 409.
async fn user_admin(State(state): State<AppState>) -> Response {
    let has_admin = state.auth.data().users.values().any(|u| u.admin);
    if !has_admin {
        return super::not_served(
            "roster creates its admin when the cluster is bootstrapped (--admin-password)",
        );
    }
    (
        StatusCode::CONFLICT,
        Json(json!({ "code": 409, "message": "have admin user cannot use it.", "data": null })),
    )
        .into_response()
}

/// `GET /nacos/v3/auth/user/list`: a page of users (`{username, admin}`; hashes are
/// never shown), `username` matched exactly (`search=accurate`, the default) or as a
/// part (`search=blur`).
async fn user_list(State(state): State<AppState>, caller: Caller, params: Params) -> Response {
    let listed = (|| {
        caller.require_admin()?;
        let page_no = params.page("pageNo", Some(1))?;
        let page_size = params.page("pageSize", Some(100))?;
        let filter = params.optional("username").unwrap_or("");
        let blur = blur(&params)?;
        let data = state.auth.data();
        let users: Vec<Value> = data
            .users
            .iter()
            .filter(|(name, _)| filter.is_empty() || matches(name, filter, blur))
            .map(|(name, user)| json!({ "username": name, "admin": user.admin }))
            .collect();
        Ok::<_, Error>(page_json(users, page_no, page_size))
    })();
    match listed {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// `search`: `accurate` (the default) or `blur`.
fn blur(params: &Params) -> Result<bool, Error> {
    match params.optional("search") {
        None => Ok(false),
        Some(s) if s.eq_ignore_ascii_case("accurate") => Ok(false),
        Some(s) if s.eq_ignore_ascii_case("blur") => Ok(true),
        Some(s) => Err(Error::illegal(
            "search",
            format!("'{s}' is not one of accurate, blur."),
        )),
    }
}

fn matches(candidate: &str, filter: &str, blur: bool) -> bool {
    if blur {
        candidate.contains(filter)
    } else {
        candidate == filter
    }
}

/// `GET /nacos/v3/auth/user/search?username=`: the user names containing `username`.
async fn user_search(state: State<AppState>, caller: Caller, params: Params) -> Response {
    if params.get("username").is_none() {
        return failure(Error::missing("username"));
    }
    from_v1(permissions::search_users(state, caller, params).await).await
}

async fn role_create(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(permissions::add_role(state, caller, params).await).await
}

async fn role_delete(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(permissions::delete_role(state, caller, params).await).await
}

/// `GET /nacos/v3/auth/role/list`: a page of `{role, username}`, filtered by `username`
/// and `role` (exactly, or as parts with `search=blur`).
async fn role_list(state: State<AppState>, caller: Caller, params: Params) -> Response {
    if let Err(e) = blur(&params) {
        return failure(e);
    }
    from_v1(permissions::list_roles(state, caller, params).await).await
}

/// `GET /nacos/v3/auth/role/search?role=`: the role names containing `role`.
async fn role_search(state: State<AppState>, caller: Caller, params: Params) -> Response {
    if params.get("role").is_none() {
        return failure(Error::missing("role"));
    }
    from_v1(permissions::search_roles(state, caller, params).await).await
}

/// `GET /nacos/v3/auth/permission` (`role`, `resource`, `action`): whether that
/// permission exists.
async fn permission_exists(state: State<AppState>, caller: Caller, params: Params) -> Response {
    for key in ["role", "resource", "action"] {
        if params.optional(key).is_none() {
            return failure(Error::missing(key));
        }
    }
    from_v1(permissions::list_permissions(state, caller, params).await).await
}

async fn permission_create(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(permissions::add_permission(state, caller, params).await).await
}

async fn permission_delete(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(permissions::delete_permission(state, caller, params).await).await
}

/// `GET /nacos/v3/auth/permission/list`: a page of `{role, resource, action}`, filtered
/// by `role` (exactly, or as a part with `search=blur`).
async fn permission_list(state: State<AppState>, caller: Caller, params: Params) -> Response {
    if let Err(e) = blur(&params) {
        return failure(e);
    }
    // v1 answers whether one permission exists when both of these are given.
    if params.optional("resource").is_some() && params.optional("action").is_some() {
        return failure(Error::bad_request(
            "Param 'resource' and 'action' are not filters of the list; GET /nacos/v3/auth/permission checks one permission",
        ));
    }
    from_v1(permissions::list_permissions(state, caller, params).await).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_envelope_gives_its_data_and_other_bodies_stay_whole() {
        let console = json!({ "code": 200, "message": null, "data": "create user ok!" });
        assert_eq!(unwrap_envelope(console), json!("create user ok!"));
        let v2 = json!({ "code": 0, "message": "success", "data": true });
        assert_eq!(unwrap_envelope(v2), json!(true));
        let page =
            json!({ "totalCount": 0, "pageNumber": 1, "pagesAvailable": 0, "pageItems": [] });
        assert_eq!(unwrap_envelope(page.clone()), page);
        let names = json!(["nacos"]);
        assert_eq!(unwrap_envelope(names.clone()), names);
    }

    #[test]
    fn search_is_accurate_unless_blur_and_nothing_else() {
        let of = |q: &str| Params::parse(Some(q), None).unwrap();
        assert!(!blur(&of("")).unwrap());
        assert!(!blur(&of("search=accurate")).unwrap());
        assert!(blur(&of("search=BLUR")).unwrap());
        let e = blur(&of("search=fuzzy")).unwrap_err();
        assert!(e.message.contains("'search'"), "{}", e.message);
        assert!(matches("nacos", "nacos", false) && !matches("nacos", "aco", false));
        assert!(matches("nacos", "aco", true));
    }
}
