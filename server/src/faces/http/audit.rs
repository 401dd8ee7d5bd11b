//! `GET /api/v1/audit` (admins): the node's audit trail, newest first, and how an HTTP
//! request becomes an entry of it ([`Pending`], taken by `Front` around each request).
//!
//! What is audited over HTTP is the endpoint table's rule (`Endpoint::audit`): every
//! request other than a read — writes and admin actions, logins included, whatever
//! their answer (a refusal by the guard too) — except heartbeats (their volume: one per
//! instance every 5 s). Reads are audited only when answered 403: a caller asking for
//! what it may not read. The routes clients poll (instance lists, `/api/v1/instances`,
//! `/api/v1/pick`, the config long poll, a POST that reads) are never audited, refused
//! or not: a client left with an expired token would fill the trail.

use std::borrow::Cow;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::Response;

use super::endpoint::{Area, AuditRule as Rule, Endpoint};
use super::guard::{Admitted, Caller};
use super::nacos::json_of;
use super::params::Params;
use crate::error::Error;
use crate::services::audit::{clip, Addressed, Entry, Face, Query, DEFAULT_LIMIT, MAX_LIMIT};
use crate::services::auth::Identity;
use crate::state::AppState;
use roster_registry::clock::now_ms;
use roster_registry::validate::DEFAULT_GROUP;

/// `GET /api/v1/audit?user=&namespaceId=&since=&until=&limit=`: entries newest first,
/// `{"entries": [...], "truncated": bool}`.
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let millis = |key: &str| -> Result<Option<u64>, Error> {
        params
            .optional(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| Error::illegal(key, "it should be a Unix time in milliseconds."))
            })
            .transpose()
    };
    let limit = match params.optional("limit") {
        None => DEFAULT_LIMIT,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| Error::illegal("limit", format!("it should be 1 to {MAX_LIMIT}.")))?,
    };
    let query = Query {
        user: params.optional("user").map(str::to_string),
        namespace_id: params.optional("namespaceId").map(str::to_string),
        since: millis("since")?,
        until: millis("until")?,
        limit,
    };
    let page = state.audit.read(query).await.map_err(|e| {
        tracing::error!(error = %e, "cannot read the audit log");
        Error::new(
            crate::error::ErrorKind::Internal,
            "cannot read the audit log",
        )
    })?;
    Ok(json_of(&page))
}

/// A request that may be audited once it is answered: what the entry needs of it,
/// taken before the request goes to its handler (cheap: reference counts, and the
/// caller's name).
pub struct Pending {
    rule: Rule,
    user: Cow<'static, str>,
    params: Params,
    area: Area,
}

impl Pending {
    /// `None` when `admitted` is never audited (a heartbeat, a polled list).
    pub fn start(admitted: &Admitted) -> Option<Pending> {
        let rule = admitted.endpoint.audit();
        if rule == Rule::Never {
            return None;
        }
        let user = match &admitted.identity {
            Some(identity) => identity.username.clone(),
            // A login: the name it tries.
            None => match admitted.params.optional("username") {
                Some(name) => Cow::Owned(clip(name).to_string()),
                None => Cow::Borrowed(ANONYMOUS),
            },
        };
        Some(Pending {
            rule,
            user,
            params: admitted.params.clone(),
            area: admitted.endpoint.area(),
        })
    }

    /// Records the entry of the answered request (`route`: its route pattern).
    pub fn finish(
        self,
        state: &AppState,
        method: &Method,
        uri: &Uri,
        route: &str,
        peer: Option<SocketAddr>,
        status: u16,
    ) {
        if self.rule == Rule::IfForbidden && status != 403 {
            return;
        }
        let target = target(self.area, uri.path(), &self.params);
        state
            .audit
            .record(entry(self.user, target, method, uri, route, peer, status));
    }
}

/// Records a request the guard refused, unless it is never audited or is a read
/// refused with anything but 403. The user is the one the guard authenticated when
/// it refused for want of a permission ([`denied`]), else `anonymous`; the resource
/// comes from the query string (the body was the guard's).
pub fn refused(
    state: &AppState,
    endpoint: &Endpoint,
    method: &Method,
    uri: &Uri,
    peer: Option<SocketAddr>,
    refusal: &Response,
) {
    let status = refusal.status().as_u16();
    match endpoint.audit() {
        Rule::Never => return,
        Rule::IfForbidden if status != 403 => return,
        _ => {}
    }
    let user = match refusal.extensions().get::<DeniedUser>() {
        Some(DeniedUser(name)) => name.clone(),
        None => Cow::Borrowed(ANONYMOUS),
    };
    let params = Params::parse(uri.query(), None).unwrap_or_default();
    let target = target(endpoint.area(), uri.path(), &params);
    let route = uri.path();
    state
        .audit
        .record(entry(user, target, method, uri, route, peer, status));
}

/// The name of a caller the guard refused a permission, carried on the refusal.
#[derive(Clone, Debug)]
struct DeniedUser(Cow<'static, str>);

/// `refusal`, marked with who was refused (for the guard: a caller authenticated but
/// not allowed), so that its audit entry names them.
pub fn denied(mut refusal: Response, caller: &Identity) -> Response {
    refusal
        .extensions_mut()
        .insert(DeniedUser(caller.username.clone()));
    refusal
}

/// The user of an entry when no one was authenticated.
const ANONYMOUS: &str = "anonymous";

/// The entry of an answered request (`target`: its [`target`]).
fn entry(
    user: Cow<'static, str>,
    target: (Option<String>, Option<String>),
    method: &Method,
    uri: &Uri,
    route: &str,
    peer: Option<SocketAddr>,
    status: u16,
) -> Entry {
    let path = uri.path();
    let (namespace_id, resource) = target;
    Entry {
        time: now_ms(),
        user,
        address: peer.map(|p| p.ip()),
        face: Face::of_path(path),
        action: format!(
            "{} {}",
            crate::services::metrics::http_method_label(method),
            clip(route)
        ),
        namespace_id,
        resource,
        status,
    }
}

/// The namespace and the thing in it a request addresses, from its parameters (the
/// names handlers read them by): a service (`group@@name`), an instance (Nacos'
/// `ip#port#cluster#group@@name`), a configuration item (`config:group/dataId`), a
/// user, a role, a sync task (`area`: what the path's prefix says of it).
fn target(area: Area, path: &str, params: &Params) -> (Option<String>, Option<String>) {
    if area.is_config() {
        return config_target(params);
    }
    let namespace = params.optional_any(&["namespaceId", "customNamespaceId"]);
    if params.optional("serviceName").is_some() {
        let port = params.optional("port").and_then(|p| p.parse().ok());
        let addressed = Addressed {
            namespace,
            group: params.optional("groupName"),
            service: params.optional("serviceName"),
            instance: params
                .optional("ip")
                .zip(port)
                .map(|(ip, port)| (ip, port, params.optional("clusterName"))),
        };
        let (namespace, resource) = addressed.target();
        return (Some(namespace), Some(resource));
    }
    let task = path.strip_prefix("/api/v1/sync/tasks/");
    let resource = if area == Area::Eureka {
        // The application and instance as the path names them.
        let rest = super::eureka::strip(path).unwrap_or(path);
        Some(format!("eureka:{}", clip(rest)))
    } else if let (Area::SyncTask, Some(task)) = (area, task) {
        // The name as the path spells it (percent-encoded).
        let name = task.split('/').next().unwrap_or_default();
        Some(format!("task:{}", clip(name)))
    } else if area.is_users() {
        // Roles and permissions name a role; users a user.
        match (params.optional("role"), params.optional("username")) {
            (Some(role), _) => Some(format!("role:{}", clip(role))),
            (None, Some(user)) => Some(format!("user:{}", clip(user))),
            (None, None) => None,
        }
    } else {
        None
    };
    (namespace.map(|ns| clip(ns).to_string()), resource)
}

/// What a config request addresses: the namespace (`tenant` in v1, `namespaceId` in
/// v2; default `public`) and `config:group/dataId` (group default `DEFAULT_GROUP`),
/// when it names a `dataId`.
fn config_target(params: &Params) -> (Option<String>, Option<String>) {
    let tenant = params
        .optional_any(&["tenant", "namespaceId"])
        .unwrap_or("");
    let namespace = clip(crate::services::configs::namespace_of(tenant)).to_string();
    let resource = params.optional("dataId").map(|data_id| {
        let group = params
            .optional_any(&["group", "groupName"])
            .unwrap_or(DEFAULT_GROUP);
        clip(&format!("config:{}/{}", clip(group), clip(data_id))).to_string()
    });
    (Some(namespace), resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target_of(path_and_query: &str) -> (Option<String>, Option<String>) {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let area = Endpoint::parse(&Method::GET, path).area();
        target(area, path, &Params::parse(Some(query), None).unwrap())
    }

    #[test]
    fn the_target_is_read_from_the_parameters() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            target_of("/nacos/v1/ns/instance?serviceName=orders&ip=127.0.0.1&port=80"),
            (s("public"), s("127.0.0.1#80#DEFAULT#DEFAULT_GROUP@@orders"))
        );
        assert_eq!(
            target_of("/nacos/v2/ns/service?namespaceId=dev&groupName=g&serviceName=orders"),
            (s("dev"), s("g@@orders"))
        );
        assert_eq!(
            target_of("/nacos/v1/ns/service?serviceName=g2%40%40orders&groupName=g"),
            (s("public"), s("g2@@orders"))
        );
        assert_eq!(
            target_of("/nacos/v1/console/namespaces?customNamespaceId=dev&namespaceName=d"),
            (s("dev"), None)
        );
        assert_eq!(
            target_of("/nacos/v1/auth/users?username=alice&password=x"),
            (None, s("user:alice"))
        );
        assert_eq!(
            target_of("/nacos/v1/auth/login?username=alice&password=x"),
            (None, None)
        );
        assert_eq!(
            target_of("/api/v1/sync/tasks/from-consul/pause"),
            (None, s("task:from-consul"))
        );
        assert_eq!(
            target_of("/nacos/v1/cs/configs?dataId=app.yaml&tenant=dev&group=g"),
            (s("dev"), s("config:g/app.yaml"))
        );
        assert_eq!(
            target_of("/nacos/v2/cs/config?dataId=app.yaml&namespaceId=dev"),
            (s("dev"), s("config:DEFAULT_GROUP/app.yaml"))
        );
        assert_eq!(
            target_of("/nacos/v1/cs/history/configs"),
            (s("public"), None)
        );
        let long = format!("/nacos/v1/ns/service?serviceName={}", "x".repeat(5_000));
        assert!(target_of(&long).1.unwrap().len() <= crate::services::audit::FIELD_MAX);
    }
}
