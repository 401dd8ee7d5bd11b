//! The guard every API request passes before routing: buffers and parses parameters (query
//! plus urlencoded body), holds requests until the node is ready, authenticates, and
//! authorizes. Only an explicit list of paths is open; no header grants a pass.
//!
//! Authorization is one table, [`need`]: what each route needs of a caller who is not
//! an admin — read or write on the service or configuration item its parameters name,
//! read of a namespace, an admin, or only to be authenticated (the handlers that list
//! then leave out what the caller may not read; the config listener checks each item it
//! is asked to listen to). A route not in the table is for admins. The check itself is
//! `Auth::allowed` (`auth::permissions::allowed`), on the auth data as it is now.
//!
//! The configuration API's bodies may be larger than `--max-body-bytes` ([`body_limit`]):
//! their content is percent-encoded in a form.

use std::borrow::Cow;

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::response::{IntoResponse, Response};

use super::nacos::config::{named, tenant_of};
use super::params::Params;
use crate::error::{Error, ErrorKind};
use crate::services::auth::permissions::{Action, Resource};
use crate::services::auth::{Credentials, Identity};
use crate::services::configs::{namespace_of, ConfigKey};
use crate::state::AppState;
use roster_registry::clock::now_secs;

/// Paths answered before the node is ready and without authentication.
const OPS_PATHS: [&str; 3] = ["/health/live", "/health/ready", "/metrics"];
/// Paths that need no authentication once the node is ready.
const OPEN_PATHS: [&str; 2] = ["/nacos/v1/auth/login", "/nacos/v1/auth/users/login"];
/// Paths where authentication is optional: clients probe this one for
/// `{"status":"UP"}`; its detailed form requires a caller and checks for one.
const SOFT_PATHS: [&str; 1] = ["/nacos/v1/ns/operator/metrics"];

/// Added to three times the largest config content for a config request's other
/// fields, bytes.
const CONFIG_BODY_SLACK: usize = 64 * 1024;

/// The largest body a request to `path` may have: `--max-body-bytes`, and for the
/// configuration API at least three times `--config-max-content-bytes` (a content
/// percent-encoded in full) plus 64 KiB.
pub fn body_limit(state: &AppState, path: &str) -> usize {
    limit_of(
        path,
        state.limits.max_body_bytes,
        state.config_settings.max_content_bytes,
    )
}

/// The largest body a request to `path` with `query` may stream to its handler (a body
/// that is not a form, which the guard does not read): [`body_limit`], and for a
/// configuration import (`POST /nacos/v1/cs/configs?import=true`, admins only) the
/// largest archive.
pub fn streamed_limit(state: &AppState, path: &str, query: Option<&str>) -> usize {
    let import = path == "/nacos/v1/cs/configs"
        && query.is_some_and(|q| q.split('&').any(|p| p == "import=true"));
    let limit = body_limit(state, path);
    if import {
        limit.max(super::nacos::config_zip::MAX_ARCHIVE_BYTES)
    } else {
        limit
    }
}

/// [`body_limit`] from the two settings.
fn limit_of(path: &str, max_body: usize, max_content: usize) -> usize {
    if path.starts_with("/nacos/v1/cs/") || path.starts_with("/nacos/v2/cs/") {
        max_body.max(
            max_content
                .saturating_mul(3)
                .saturating_add(CONFIG_BODY_SLACK),
        )
    } else {
        max_body
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// The credentials a request carries: `Authorization: Bearer`, else `accessToken`, else
/// `username` + `password`.
fn credentials<'a>(headers: &'a HeaderMap, params: &'a Params) -> Credentials<'a> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    Credentials {
        token: bearer.or_else(|| params.optional("accessToken")),
        username: params.optional("username"),
        password: params.get("password"),
    }
}

/// A request the guard let through, with what it found: the request's parameters and,
/// when the path needs or accepts one, the caller.
pub struct Admitted {
    /// The request (its urlencoded body, if any, buffered).
    pub req: Request,
    /// Query and form parameters.
    pub params: Params,
    /// The authenticated caller.
    pub identity: Option<Identity>,
}

impl Admitted {
    /// The request with its [`Params`] and [`Identity`] in its extensions, where the
    /// routed handlers' extractors find them.
    pub fn into_request(self) -> Request {
        let mut req = self.req;
        if let Some(identity) = self.identity {
            req.extensions_mut().insert(identity);
        }
        req.extensions_mut().insert(self.params);
        req
    }
}

/// The guard: parses the parameters, holds requests until the node is ready and
/// authenticates. Returns the admitted request, or the refusal to answer instead.
pub async fn admit(state: &AppState, req: Request) -> Result<Admitted, Response> {
    let (parts, body) = req.into_parts();
    let query = parts.uri.query();
    let form = is_form(&parts.headers);
    // A form is read here, before authentication: the small limit. Other bodies stream
    // to the handler once the caller is known.
    let limit = if form {
        body_limit(state, parts.uri.path())
    } else {
        streamed_limit(state, parts.uri.path(), query)
    };
    let too_large = || {
        Error::new(
            ErrorKind::TooLarge,
            format!("request body exceeds {limit} bytes"),
        )
        .into_response()
    };
    // Refuse an announced oversized body before reading any of it.
    let announced = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let (params, body) = if form {
        match to_bytes(body, limit).await {
            Ok(bytes) => (Params::parse(query, Some(&bytes)), Body::from(bytes)),
            // The client stopped sending it (`--http-body-timeout-secs`).
            Err(e) if crate::services::net::is_body_timeout(&e) => {
                return Err(crate::services::net::body_timeout_answer())
            }
            Err(_) => return Err(too_large()),
        }
    } else {
        (Params::parse(query, None), body)
    };
    let params = params.map_err(|e| refuse(parts.uri.path(), e))?;
    let path = parts.uri.path();
    let mut identity = None;
    if !OPS_PATHS.contains(&path) {
        if let Some(why) = state
            .ready
            .refusal("server is starting, please try again later")
        {
            return Err(refuse(path, Error::unavailable(why)));
        }
        if SOFT_PATHS.contains(&path) {
            identity = authenticate(state, &parts.headers, &params).await.ok();
        } else if !OPEN_PATHS.contains(&path) {
            match authenticate(state, &parts.headers, &params).await {
                Ok(caller) => {
                    authorize(state, &caller, &parts.method, path, &params)
                        .map_err(|e| super::audit::denied(refuse(path, e), &caller))?;
                    identity = Some(caller);
                }
                Err(e) => return Err(refuse(path, e)),
            }
        }
    }
    Ok(Admitted {
        req: Request::from_parts(parts, body),
        params,
        identity,
    })
}

/// A refusal in the shape the path's API answers errors in (v2: the envelope).
fn refuse(path: &str, e: Error) -> Response {
    if path.starts_with("/nacos/v2/") {
        super::nacos_v2_envelope::failure(e)
    } else {
        e.into_response()
    }
}

/// What a route needs of a caller beyond being authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Nothing more (lists leave out what the caller may not read).
    Caller,
    /// An admin.
    Admin,
    /// This action on the service named by `namespaceId`, `groupName`, `serviceName`.
    Service(Action),
    /// Reading something of the namespace `namespaceId` (default `public`).
    Namespace,
    /// Reading something of `namespaceId` when given (the event stream).
    NamespaceIfGiven,
    /// This action on the configuration item named by `dataId`, `group` and the
    /// namespace in the parameter `tenant` names (v1: `tenant`, v2: `namespaceId`).
    Config {
        /// Read or write.
        action: Action,
        /// The parameter naming the namespace.
        tenant: &'static str,
    },
    /// Reading something of the namespace `tenant` (default `public`): config listings.
    ConfigNamespace,
}

/// The authorization table: what `method` on `path` needs of a caller who is not an
/// admin. Reads (GET, HEAD) of a service need `r` on it, everything else done to it `w`.
fn need(method: &Method, path: &str, params: &Params) -> Need {
    let reading = *method == Method::GET || *method == Method::HEAD;
    let by_method = if reading { Action::Read } else { Action::Write };
    match path {
        "/nacos/v1/ns/instance"
        | "/nacos/v2/ns/instance"
        | "/nacos/v1/ns/service"
        | "/nacos/v2/ns/service" => Need::Service(by_method),
        "/nacos/v1/ns/instance/list"
        | "/nacos/v2/ns/instance/list"
        | "/nacos/v1/ns/catalog/service"
        | "/nacos/v1/ns/catalog/instances"
        | "/nacos/v1/ns/service/subscribers"
        | "/api/v1/instances"
        | "/api/v1/pick" => Need::Service(Action::Read),
        "/nacos/v1/ns/instance/beat"
        | "/nacos/v2/ns/instance/beat"
        | "/nacos/v1/ns/health/instance"
        | "/nacos/v1/ns/health"
        | "/nacos/v2/ns/health/instance"
        | "/nacos/v1/ns/cluster" => Need::Service(Action::Write),
        // Filtered to the services the caller may read.
        "/nacos/v1/ns/service/list"
        | "/nacos/v2/ns/service/list"
        | "/nacos/v1/ns/catalog/services" => Need::Namespace,
        "/nacos/v1/console/namespaces" if reading => {
            if params.optional("checkNamespaceIdExist").is_some() {
                // Part of creating one, which is for admins.
                Need::Admin
            } else if params.optional("show").is_some() {
                Need::Namespace
            } else {
                // Filtered to the namespaces the caller may read.
                Need::Caller
            }
        }
        // A listing (`search`), filtered to the items the caller may read; else one item.
        "/nacos/v1/cs/configs" if reading && params.optional("search").is_some() => {
            Need::ConfigNamespace
        }
        // An export: filtered to the items the caller may read.
        "/nacos/v1/cs/configs"
            if reading
                && ["export", "exportV2"]
                    .iter()
                    .any(|k| params.optional(k) == Some("true")) =>
        {
            Need::ConfigNamespace
        }
        // An import writes many items at once, from a large body: admins.
        "/nacos/v1/cs/configs"
            if *method == Method::POST && params.optional("import") == Some("true") =>
        {
            Need::Admin
        }
        "/nacos/v1/cs/configs" => Need::Config {
            action: by_method,
            tenant: "tenant",
        },
        "/nacos/v2/cs/config" => Need::Config {
            action: by_method,
            tenant: "namespaceId",
        },
        "/nacos/v1/cs/history" | "/nacos/v1/cs/history/previous" if reading => Need::Config {
            action: Action::Read,
            tenant: "tenant",
        },
        // Filtered to the items the caller may read.
        "/nacos/v1/cs/history/configs" if reading => Need::ConfigNamespace,
        // Who listens to an item: reading it.
        "/nacos/v1/cs/configs/listener" if reading => Need::Config {
            action: Action::Read,
            tenant: "tenant",
        },
        // The handler checks every item listened to (it parses the list anyway).
        "/nacos/v1/cs/configs/listener" => Need::Caller,
        // The handler lets users change their own password (with the old one).
        "/nacos/v1/auth/users" if *method == Method::PUT => Need::Caller,
        // `service` and `namespace` events are filtered per event.
        "/api/v1/events" => Need::NamespaceIfGiven,
        // What clients probe, and the cluster's shape: nothing of any namespace.
        "/nacos/v1/ns/service/selector/types"
        | "/nacos/v1/ns/operator/metrics"
        | "/nacos/v2/ns/operator/metrics"
        | "/nacos/v1/ns/operator/switches"
        | "/nacos/v2/ns/operator/switches"
        | "/api/v1/cluster"
        | "/api/v1/cluster/owner"
        | "/api/v1/overview"
        | "/nacos/v1/core/cluster/nodes" => Need::Caller,
        // Users, roles, permissions, namespace changes, cluster members, sync tasks,
        // key rotation — and any route not named above.
        _ => Need::Admin,
    }
}

/// 403 unless `caller` may do what the route needs. Admins are not looked at further;
/// for anyone else the resource is read from the parameters the handler will read it
/// from (a malformed one is the handler's 400, answered here).
fn authorize(
    state: &AppState,
    caller: &Identity,
    method: &Method,
    path: &str,
    params: &Params,
) -> Result<(), Error> {
    if caller.admin {
        return Ok(());
    }
    let allowed = match need(method, path, params) {
        Need::Caller => true,
        Need::Admin => false,
        Need::Service(action) => {
            let name = params.service_name()?;
            let service = Resource::Service {
                namespace: name.namespace,
                group: name.group,
                name: name.name,
            };
            state.auth.allowed(caller, &service, action)
        }
        Need::Namespace => {
            let namespace = params.namespace()?;
            state
                .auth
                .allowed(caller, &Resource::Namespace(&namespace), Action::Read)
        }
        Need::NamespaceIfGiven => match params.optional("namespaceId") {
            Some(namespace) => {
                roster_registry::validate::check_namespace_id("namespaceId", namespace)?;
                state
                    .auth
                    .allowed(caller, &Resource::Namespace(namespace), Action::Read)
            }
            None => true,
        },
        Need::Config { action, tenant } => {
            let key = named(params, tenant)?;
            state.auth.allowed(caller, &config_resource(&key), action)
        }
        Need::ConfigNamespace => {
            let namespace = namespace_of(tenant_of(params, "tenant")?);
            state
                .auth
                .allowed(caller, &Resource::Namespace(namespace), Action::Read)
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(forbidden())
    }
}

/// The resource a configuration item is to permissions.
fn config_resource(key: &ConfigKey) -> Resource<'_> {
    Resource::Config {
        namespace: &key.namespace,
        group: &key.group,
        data_id: &key.data_id,
    }
}

/// Nacos' answer to a caller without the permission.
pub fn forbidden() -> Error {
    Error::forbidden(crate::services::auth::permissions::DENIED)
}

async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    params: &Params,
) -> Result<Identity, Error> {
    if !state.auth.enabled() {
        return Ok(Identity {
            username: Cow::Borrowed("anonymous"),
            admin: true,
        });
    }
    Ok(state
        .auth
        .identify(&credentials(headers, params), now_secs())
        .await?)
}

/// The caller's identity, for handlers; authentication already happened in the guard.
pub struct Caller(pub Identity);

impl Caller {
    /// Whether the caller may read the service `namespace`/`group`/`name` (the lists
    /// leave out the others).
    pub fn may_read(&self, state: &AppState, namespace: &str, group: &str, name: &str) -> bool {
        let service = Resource::Service {
            namespace,
            group,
            name,
        };
        state.auth.allowed(&self.0, &service, Action::Read)
    }

    /// Whether the caller may read the configuration item `key` (listings leave out the
    /// others; a listener may listen only to those).
    pub fn may_read_config(&self, state: &AppState, key: &ConfigKey) -> bool {
        state
            .auth
            .allowed(&self.0, &config_resource(key), Action::Read)
    }

    /// Whether the caller may read something of the namespace `namespace`.
    pub fn may_read_namespace(&self, state: &AppState, namespace: &str) -> bool {
        state
            .auth
            .allowed(&self.0, &Resource::Namespace(namespace), Action::Read)
    }

    /// 403 unless the caller is an admin.
    pub fn require_admin(&self) -> Result<(), Error> {
        if self.0.admin {
            Ok(())
        } else {
            Err(Error::forbidden(
                "authorization failed!: this needs an admin user",
            ))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Error> {
        parts
            .extensions
            .get::<Identity>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| Error::unauthenticated("authentication required"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need_of(method: Method, path_and_query: &str) -> Need {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        need(&method, path, &Params::parse(Some(query), None).unwrap())
    }

    #[test]
    fn naming_routes_need_read_or_write_on_their_service() {
        let read = Need::Service(Action::Read);
        let write = Need::Service(Action::Write);
        for path in [
            "/nacos/v1/ns/instance/list",
            "/nacos/v2/ns/instance/list",
            "/nacos/v1/ns/instance",
            "/nacos/v2/ns/instance",
            "/nacos/v1/ns/service",
            "/nacos/v1/ns/catalog/instances",
            "/nacos/v1/ns/service/subscribers",
            "/api/v1/instances",
            "/api/v1/pick",
        ] {
            assert_eq!(need_of(Method::GET, path), read, "{path}");
        }
        for (method, path) in [
            (Method::POST, "/nacos/v1/ns/instance"),
            (Method::DELETE, "/nacos/v1/ns/instance"),
            (Method::PUT, "/nacos/v1/ns/instance"),
            (Method::PATCH, "/nacos/v2/ns/instance"),
            (Method::PUT, "/nacos/v1/ns/instance/beat"),
            (Method::PUT, "/nacos/v2/ns/instance/beat"),
            (Method::PUT, "/nacos/v1/ns/health/instance"),
            (Method::POST, "/nacos/v1/ns/service"),
            (Method::DELETE, "/nacos/v2/ns/service"),
            (Method::PUT, "/nacos/v1/ns/cluster"),
        ] {
            assert_eq!(need_of(method.clone(), path), write, "{method} {path}");
        }
        // A list of services needs the namespace; the handler filters the rest.
        for path in [
            "/nacos/v1/ns/service/list",
            "/nacos/v2/ns/service/list",
            "/nacos/v1/ns/catalog/services",
        ] {
            assert_eq!(need_of(Method::GET, path), Need::Namespace, "{path}");
        }
    }

    #[test]
    fn config_routes_need_read_or_write_on_their_item() {
        let v1 = |action| Need::Config {
            action,
            tenant: "tenant",
        };
        let q = "?dataId=a&group=g&tenant=dev";
        for path in [
            "/nacos/v1/cs/configs",
            "/nacos/v1/cs/history",
            "/nacos/v1/cs/history/previous",
        ] {
            let path = format!("{path}{q}");
            assert_eq!(need_of(Method::GET, &path), v1(Action::Read), "{path}");
        }
        assert_eq!(
            need_of(Method::GET, &format!("/nacos/v1/cs/history{q}&nid=3")),
            v1(Action::Read)
        );
        for method in [Method::POST, Method::DELETE, Method::PUT] {
            let path = format!("/nacos/v1/cs/configs{q}");
            assert_eq!(
                need_of(method.clone(), &path),
                v1(Action::Write),
                "{method}"
            );
        }
        let v2 = |action| Need::Config {
            action,
            tenant: "namespaceId",
        };
        assert_eq!(
            need_of(Method::GET, "/nacos/v2/cs/config"),
            v2(Action::Read)
        );
        assert_eq!(
            need_of(Method::POST, "/nacos/v2/cs/config"),
            v2(Action::Write)
        );
        assert_eq!(
            need_of(Method::DELETE, "/nacos/v2/cs/config"),
            v2(Action::Write)
        );
        // Listings need the namespace and are filtered; the listener checks each item.
        for path in [
            "/nacos/v1/cs/configs?search=blur&dataId=a*",
            "/nacos/v1/cs/configs?search=accurate&tenant=dev",
            "/nacos/v1/cs/history/configs?tenant=dev",
        ] {
            assert_eq!(need_of(Method::GET, path), Need::ConfigNamespace, "{path}");
        }
        assert_eq!(
            need_of(Method::POST, "/nacos/v1/cs/configs/listener"),
            Need::Caller
        );
        // Writes to the history are no route: for admins (who get a 405).
        assert_eq!(need_of(Method::POST, "/nacos/v1/cs/history"), Need::Admin);
        assert_eq!(
            need_of(Method::DELETE, "/nacos/v1/cs/history/configs"),
            Need::Admin
        );
    }

    #[test]
    fn config_bodies_may_hold_a_percent_encoded_content() {
        let (mib, slack) = (1024 * 1024, 64 * 1024);
        assert_eq!(limit_of("/nacos/v1/cs/configs", mib, mib), 3 * mib + slack);
        assert_eq!(limit_of("/nacos/v2/cs/config", mib, mib), 3 * mib + slack);
        assert_eq!(limit_of("/nacos/v1/cs/configs", 8 * mib, 1024), 8 * mib);
        assert_eq!(limit_of("/nacos/v1/ns/instance", mib, 4 * mib), mib);
        assert_eq!(limit_of("/nacos/v1/csx", mib, 4 * mib), mib);
    }

    #[test]
    fn management_is_for_admins_and_unknown_routes_too() {
        for (method, path) in [
            (Method::GET, "/nacos/v1/auth/users"),
            (Method::POST, "/nacos/v1/auth/users"),
            (Method::DELETE, "/nacos/v1/auth/users"),
            (Method::GET, "/nacos/v1/auth/users/search"),
            (Method::GET, "/nacos/v1/auth/roles"),
            (Method::POST, "/nacos/v1/auth/roles"),
            (Method::GET, "/nacos/v1/auth/roles/search"),
            (Method::GET, "/nacos/v1/auth/permissions"),
            (Method::DELETE, "/nacos/v1/auth/permissions"),
            (Method::POST, "/nacos/v1/console/namespaces"),
            (Method::PUT, "/nacos/v1/console/namespaces"),
            (Method::DELETE, "/nacos/v1/console/namespaces"),
            (
                Method::GET,
                "/nacos/v1/console/namespaces?checkNamespaceIdExist=true",
            ),
            (Method::POST, "/api/v1/cluster/members"),
            (Method::DELETE, "/api/v1/cluster/members"),
            (Method::GET, "/api/v1/sync/tasks"),
            (Method::POST, "/api/v1/sync/tasks/t/pause"),
            (Method::POST, "/api/v1/auth/rotate-key"),
            (Method::GET, "/api/v1/snapshot"),
            (Method::GET, "/nacos/v1/ns/instance/list/"),
            (Method::GET, "/whatever"),
        ] {
            assert_eq!(
                need_of(method.clone(), path),
                Need::Admin,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn the_rest_needs_a_caller_or_a_namespace() {
        assert_eq!(
            need_of(Method::GET, "/nacos/v1/console/namespaces"),
            Need::Caller
        );
        assert_eq!(
            need_of(
                Method::GET,
                "/nacos/v1/console/namespaces?show=all&namespaceId=x"
            ),
            Need::Namespace
        );
        assert_eq!(need_of(Method::PUT, "/nacos/v1/auth/users"), Need::Caller);
        assert_eq!(
            need_of(Method::GET, "/api/v1/events"),
            Need::NamespaceIfGiven
        );
        for path in [
            "/nacos/v1/ns/operator/metrics",
            "/nacos/v2/ns/operator/switches",
            "/nacos/v1/ns/service/selector/types",
            "/api/v1/cluster",
            "/api/v1/cluster/owner",
            "/api/v1/overview",
            "/nacos/v1/core/cluster/nodes",
        ] {
            assert_eq!(need_of(Method::GET, path), Need::Caller, "{path}");
        }
    }
}
