//! `/nacos/v1/auth/roles` and `/nacos/v1/auth/permissions`, as Nacos' default auth
//! plugin serves them (admins only, like every route here: the guard checks, and each
//! handler again): roles
//! bound to users, and the permissions granted to roles (see `auth::permissions` for
//! what they mean). Also `/nacos/v1/auth/users/search`, which the console's role dialog
//! completes user names with.
//!
//! Each change goes through `auth::writes`, which reads the state through the leader
//! first (`read_barrier`), so that what it checks — a binding that exists, a role that
//! holds no permission yet — is current whichever node takes it, and returns once this
//! node applied it.

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::{envelope, json_of};
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::services::auth::permissions::{resource_problem, valid_role, Granted};
use crate::state::AppState;

/// `search=accurate` (the default) matches a filter exactly, `blur` as a substring; an
/// absent or empty filter matches everything.
struct Filter<'p> {
    blur: bool,
    value: Option<&'p str>,
}

impl<'p> Filter<'p> {
    fn new(params: &'p Params, key: &str) -> Self {
        Self {
            blur: params.optional("search") == Some("blur"),
            value: params.optional(key),
        }
    }

    fn keeps(&self, candidate: &str) -> bool {
        match self.value {
            None => true,
            Some(v) if self.blur => candidate.contains(v),
            Some(v) => candidate == v,
        }
    }
}

/// Nacos' page: `{totalCount, pageNumber, pagesAvailable, pageItems}`.
fn page_of(params: &Params, rows: Vec<serde_json::Value>) -> Result<Response, Error> {
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params.page("pageSize", Some(100))?;
    Ok(json_of(&super::page_json(rows, page_no, page_size)))
}

fn role_param(params: &Params) -> Result<&str, Error> {
    let role = params.required("role")?;
    if !valid_role(role) {
        return Err(Error::illegal(
            "role",
            "it should be 1 to 64 characters of letters, digits and '_-.@'.",
        ));
    }
    Ok(role)
}

fn action_param(params: &Params) -> Result<Granted, Error> {
    let raw = params.required("action")?;
    Granted::parse(raw)
        .ok_or_else(|| Error::illegal("action", format!("'{raw}' is not one of r, w, rw.")))
}

fn resource_param(params: &Params) -> Result<&str, Error> {
    let resource = params.required("resource")?;
    match resource_problem(resource) {
        None => Ok(resource),
        Some(problem) => Err(Error::illegal("resource", problem)),
    }
}

/// `GET /nacos/v1/auth/roles`: one page of `{role, username}` bindings (admins appear
/// with `ROLE_ADMIN`), filtered by `username` and `role`.
pub async fn list_roles(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let (users, roles) = (
        Filter::new(&params, "username"),
        Filter::new(&params, "role"),
    );
    let data = state.auth.data();
    let rows = data
        .role_bindings()
        .into_iter()
        .filter(|(role, user)| roles.keeps(role) && users.keeps(user))
        .map(|(role, username)| json!({ "role": role, "username": username }))
        .collect();
    page_of(&params, rows)
}

/// `GET /nacos/v1/auth/roles/search?role=`: the names of the roles containing `role`.
pub async fn search_roles(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let part = params.optional("role").unwrap_or("");
    let data = state.auth.data();
    let mut names: Vec<&str> = data
        .role_bindings()
        .into_iter()
        .map(|(role, _)| role)
        .filter(|role| role.contains(part))
        .collect();
    names.dedup();
    Ok(json_of(&names))
}

/// `POST /nacos/v1/auth/roles` (`role`, `username`): binds a role to a user, ending
/// the user's tokens. `ROLE_ADMIN` makes the user an admin.
pub async fn add_role(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let role = role_param(&params)?;
    let username = params.required("username")?;
    state.auth_writes().add_role(role, username).await?;
    Ok(envelope("add role ok!"))
}

/// `DELETE /nacos/v1/auth/roles` (`role`, optional `username`): unbinds a role from a
/// user, or from every user holding it, ending their tokens. The last admin keeps
/// `ROLE_ADMIN`.
pub async fn delete_role(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let role = role_param(&params)?;
    let username = params.optional("username");
    state.auth_writes().delete_role(role, username).await?;
    Ok(envelope(match username {
        Some(user) => format!("delete role of user {user} ok!"),
        None => "delete role ok!".to_string(),
    }))
}

/// `GET /nacos/v1/auth/permissions`: one page of `{role, resource, action}`, filtered by
/// `role`. With `resource` and `action` given: whether that exact permission exists
/// (Nacos' duplicate check, in the `{code: 0, message, data}` envelope).
pub async fn list_permissions(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let data = state.auth.data();
    if params.optional("action").is_some() && params.optional("resource").is_some() {
        let role = role_param(&params)?;
        let (resource, action) = (resource_param(&params)?, action_param(&params)?);
        let exists = data
            .permissions_of(role)
            .any(|g| g.resource == resource && g.action == action);
        return Ok(json_of(
            &json!({ "code": 0, "message": "success", "data": exists }),
        ));
    }
    let roles = Filter::new(&params, "role");
    let rows = data
        .permissions
        .iter()
        .filter(|(role, _)| roles.keeps(role))
        .flat_map(|(role, grants)| {
            grants.iter().map(move |g| {
                json!({ "role": role, "resource": g.resource, "action": g.action.as_str() })
            })
        })
        .collect();
    page_of(&params, rows)
}

/// `POST /nacos/v1/auth/permissions` (`role`, `resource`, `action`): grants a
/// permission to a role that some user holds. Takes effect on the next request of
/// every holder, on every node.
pub async fn add_permission(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let role = role_param(&params)?;
    let (resource, action) = (resource_param(&params)?, action_param(&params)?);
    state
        .auth_writes()
        .add_permission(role, resource, action)
        .await?;
    Ok(envelope("add permission ok!"))
}

/// `DELETE /nacos/v1/auth/permissions` (`role`, `resource`, `action`): takes back a
/// permission exactly as it was granted.
pub async fn delete_permission(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let role = role_param(&params)?;
    let resource = params.required("resource")?;
    let action = action_param(&params)?;
    state
        .auth_writes()
        .delete_permission(role, resource, action)
        .await?;
    Ok(envelope("delete permission ok!"))
}

/// `GET /nacos/v1/auth/users/search?username=`: the user names containing `username`.
pub async fn search_users(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let part = params.optional("username").unwrap_or("");
    let data = state.auth.data();
    let names: Vec<&str> = data
        .users
        .keys()
        .map(String::as_str)
        .filter(|name| name.contains(part))
        .collect();
    Ok(json_of(&names))
}
