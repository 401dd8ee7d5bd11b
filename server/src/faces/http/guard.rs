//! The guard every API request passes before its handler: buffers and parses parameters
//! (query plus urlencoded body), holds requests until the node is ready, authenticates,
//! and authorizes. Only the endpoints the table marks open are; no header grants a pass.
//!
//! What each endpoint needs of a caller who is not an admin is the endpoint table's
//! (`Endpoint::access`): read or write on the service or configuration item its
//! parameters name, read of a namespace, an admin, or only to be authenticated (the
//! handlers that list then leave out what the caller may not read; the config listener
//! checks each item it is asked to listen to). The check itself is `Auth::allowed`
//! (`auth::permissions::allowed`), on the auth data as it is now.
//!
//! The configuration API's bodies may be larger than `--max-body-bytes` ([`limit`]):
//! their content is percent-encoded in a form.

use std::borrow::Cow;

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::endpoint::{Access, Area, BodyLimit, Endpoint};
use super::nacos::config::{named_in, tenant_of};
use super::params::Params;
use crate::error::{Error, ErrorKind};
use crate::services::auth::permissions::{Action, Resource};
use crate::services::auth::{Credentials, Identity};
use crate::services::configs::{namespace_of, ConfigKey};
use crate::state::AppState;
use roster_registry::clock::now_secs;

/// Added to three times the largest config content for a config request's other
/// fields, bytes.
const CONFIG_BODY_SLACK: usize = 64 * 1024;

/// The largest body of an endpoint's class, in bytes: `--max-body-bytes`, for the
/// configuration API at least three times `--config-max-content-bytes` (a content
/// percent-encoded in full) plus 64 KiB, and for a configuration import (admins only)
/// at least the largest archive.
pub fn limit(state: &AppState, class: BodyLimit) -> usize {
    limit_of(
        class,
        state.limits.max_body_bytes,
        state.config_settings.max_content_bytes,
    )
}

/// [`limit`] from the two settings.
fn limit_of(class: BodyLimit, max_body: usize, max_content: usize) -> usize {
    let config = || {
        max_body.max(
            max_content
                .saturating_mul(3)
                .saturating_add(CONFIG_BODY_SLACK),
        )
    };
    match class {
        BodyLimit::Default => max_body,
        BodyLimit::Config => config(),
        BodyLimit::Archive => config().max(super::nacos::config_zip::MAX_ARCHIVE_BYTES),
    }
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// The credentials a request carries: `Authorization: Bearer`, else the `accessToken`
/// header (where Nacos 3's maintainer client puts it), else `X-Consul-Token` (where
/// Consul clients put their API token), else the `accessToken` parameter, else the
/// `token` parameter (Consul's), else `username` + `password` (on Eureka's routes, else
/// those of `Authorization: Basic`, see [`basic`]).
fn credentials<'a>(headers: &'a HeaderMap, params: &'a Params) -> Credentials<'a> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    Credentials {
        token: bearer
            .or_else(|| header("accessToken"))
            .or_else(|| header("x-consul-token"))
            .or_else(|| params.optional("accessToken"))
            .or_else(|| params.optional("token")),
        username: params.optional("username"),
        password: params.get("password"),
    }
}

/// A request the guard let through, with what it found: the request's endpoint (told
/// apart by its parameters), its parameters and, when the endpoint needs or accepts
/// one, the caller.
pub struct Admitted {
    /// What the request is.
    pub endpoint: Endpoint,
    /// The request (its urlencoded body, if any, buffered).
    pub req: Request,
    /// Query and form parameters.
    pub params: Params,
    /// The authenticated caller.
    pub identity: Option<Identity>,
}

impl Admitted {
    /// The request with its [`Params`] and [`Identity`] in its extensions, where the
    /// handlers' extractors find them, and its [`Endpoint`], which `Routes` serves it by.
    pub fn into_request(self) -> Request {
        let mut req = self.req;
        if let Some(identity) = self.identity {
            req.extensions_mut().insert(identity);
        }
        req.extensions_mut().insert(self.params);
        req.extensions_mut().insert(self.endpoint);
        req
    }
}

/// The guard: parses the parameters, holds requests until the node is ready and
/// authenticates. Returns the admitted request, or the refusal to answer instead.
pub async fn admit(
    state: &AppState,
    endpoint: &Endpoint,
    req: Request,
) -> Result<Admitted, Response> {
    let (parts, body) = req.into_parts();
    let query = parts.uri.query();
    let form = is_form(&parts.headers);
    let area = endpoint.area();
    // A form is read here, before authentication: the small limit (an archive is never
    // a form). Other bodies stream to the handler once the caller is known.
    let class = match endpoint.body_limit(query) {
        BodyLimit::Archive if form => BodyLimit::Config,
        class => class,
    };
    let limit = limit(state, class);
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
    let params = params.map_err(|e| refuse(area, e))?;
    let endpoint = endpoint.clone().with_params(&params);
    let mut identity = None;
    match endpoint.access() {
        Access::Public => {}
        access => {
            if let Some(why) = state
                .ready
                .refusal("server is starting, please try again later")
            {
                return Err(refuse(area, Error::unavailable(why)));
            }
            match access {
                Access::Open => {}
                Access::Soft => {
                    identity = authenticate(state, &endpoint, &parts.headers, &params)
                        .await
                        .ok();
                }
                // No credentials: anonymous; credentials given must hold.
                Access::Anonymous => {
                    let given = credentials(&parts.headers, &params);
                    let basic = endpoint.takes_basic() && basic(&parts.headers).is_some();
                    let given = given.token.is_some() || given.username.is_some() || basic;
                    // With auth off everyone is the built-in caller, as elsewhere.
                    if given || !state.auth.enabled() {
                        let caller = authenticate(state, &endpoint, &parts.headers, &params)
                            .await
                            .map_err(|e| refuse(area, e))?;
                        identity = Some(caller);
                    }
                }
                access => match authenticate(state, &endpoint, &parts.headers, &params).await {
                    Ok(caller) => {
                        authorize(state, &caller, access, &endpoint, &params)
                            .map_err(|e| super::audit::denied(refuse(area, e), &caller))?;
                        identity = Some(caller);
                    }
                    Err(e) => return Err(refuse(area, e)),
                },
            }
        }
    }
    Ok(Admitted {
        endpoint,
        req: Request::from_parts(parts, body),
        params,
        identity,
    })
}

/// A refusal in the shape the endpoint's API answers errors in (v2: the envelope;
/// Eureka's 401 asks for HTTP Basic, which its clients send).
fn refuse(area: Area, e: Error) -> Response {
    if area.is_enveloped() {
        return super::nacos_v2_envelope::failure(e);
    }
    let unauthenticated = e.kind == ErrorKind::Unauthenticated;
    // Consul's clients hold an API token: say where it goes.
    let e = if area == Area::Consul && e.message.starts_with("authentication required") {
        Error::unauthenticated(
            "authentication required: pass a roster API token as X-Consul-Token \
             (or ?token=, or Authorization: Bearer)",
        )
    } else {
        e
    };
    let mut response = e.into_response();
    if area == Area::Eureka && unauthenticated {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Basic realm=\"roster\""),
        );
    }
    response
}

/// 403 unless `caller` may do what the endpoint needs (`access`). Admins are not looked
/// at further; for anyone else the resource is read from the parameters the handler
/// will read it from (a malformed one is the handler's 400, answered here).
fn authorize(
    state: &AppState,
    caller: &Identity,
    access: Access,
    endpoint: &Endpoint,
    params: &Params,
) -> Result<(), Error> {
    if caller.admin {
        return Ok(());
    }
    let allowed = match access {
        // The guard does not authorize the first three (no caller is asked for).
        Access::Public | Access::Open | Access::Soft | Access::Anonymous | Access::Caller => true,
        Access::Admin => false,
        Access::Service(action) => {
            let name = params.service_name()?;
            let service = Resource::Service {
                namespace: name.namespace,
                group: name.group,
                name: name.name,
            };
            state.auth.allowed(caller, &service, action)
        }
        Access::Namespace => {
            let namespace = params.namespace()?;
            state
                .auth
                .allowed(caller, &Resource::Namespace(&namespace), Action::Read)
        }
        Access::NamespaceIfGiven => match params.optional("namespaceId") {
            Some(namespace) => {
                roster_registry::validate::check_namespace_id("namespaceId", namespace)?;
                state
                    .auth
                    .allowed(caller, &Resource::Namespace(namespace), Action::Read)
            }
            None => true,
        },
        Access::Config {
            action,
            tenant,
            group,
        } => {
            let key = named_in(params, tenant, group)?;
            state.auth.allowed(caller, &config_resource(&key), action)
        }
        Access::ConfigNamespace(field) => {
            let namespace = namespace_of(tenant_of(params, field)?);
            state
                .auth
                .allowed(caller, &Resource::Namespace(namespace), Action::Read)
        }
        Access::EurekaApp(action) => match endpoint {
            Endpoint::Eureka(call) => {
                let name = super::eureka::mapping::service_of(&call.app);
                let service = Resource::Service {
                    namespace: &state.eureka.namespace,
                    group: &state.eureka.group,
                    name: &name,
                };
                state.auth.allowed(caller, &service, action)
            }
            _ => false,
        },
        Access::EurekaNamespace => {
            let namespace = Resource::Namespace(&state.eureka.namespace);
            state.auth.allowed(caller, &namespace, Action::Read)
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

/// The user and password of `Authorization: Basic` (how Eureka clients send the
/// `user:password@` of their `defaultZone`); `None` without one, or when it does not
/// decode to `user:password`.
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The caller, from the request's credentials; where the endpoint's clients send HTTP
/// Basic ([`Endpoint::takes_basic`]) that counts too, checked as any password is
/// (`Auth::check_password`: cached, throttled).
async fn authenticate(
    state: &AppState,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    params: &Params,
) -> Result<Identity, Error> {
    if !state.auth.enabled() {
        return Ok(Identity {
            username: Cow::Borrowed("anonymous"),
            admin: true,
        });
    }
    let mut creds = credentials(headers, params);
    let basic = endpoint.takes_basic().then(|| basic(headers)).flatten();
    if let (Some((user, password)), None, None) = (&basic, creds.token, creds.username) {
        creds.username = Some(user);
        creds.password = Some(password);
    }
    Ok(state.auth.identify(&creds, now_secs()).await?)
}

/// The caller's identity, for handlers; authentication already happened in the guard.
pub struct Caller(pub Identity);

/// The caller of an endpoint that anyone may call without credentials
/// ([`Access::Anonymous`]): `None` for an anonymous one, who may read nothing a
/// permission guards.
pub struct MaybeCaller(pub Option<Caller>);

impl MaybeCaller {
    /// Whether the caller may read the service `namespace`/`group`/`name`.
    pub fn may_read(&self, state: &AppState, namespace: &str, group: &str, name: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|c| c.may_read(state, namespace, group, name))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for MaybeCaller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Self, std::convert::Infallible> {
        let identity = parts.extensions.get::<Identity>().cloned();
        Ok(MaybeCaller(identity.map(Caller)))
    }
}

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

    /// Whether the caller may write the service `namespace`/`group`/`name` (Consul's
    /// writes, which name it in their bodies or by an id).
    pub fn may_write(&self, state: &AppState, namespace: &str, group: &str, name: &str) -> bool {
        let service = Resource::Service {
            namespace,
            group,
            name,
        };
        state.auth.allowed(&self.0, &service, Action::Write)
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

    #[test]
    fn basic_credentials_decode_to_a_user_and_a_password() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            basic(&headers)
        };
        // `nacos:pa:ss` (a password may hold colons).
        assert_eq!(
            with("Basic bmFjb3M6cGE6c3M="),
            Some(("nacos".into(), "pa:ss".into()))
        );
        assert_eq!(
            with("basic bmFjb3M6cGE6c3M=").map(|c| c.0),
            Some("nacos".into())
        );
        assert_eq!(with("Bearer bmFjb3M6cGE6c3M="), None);
        assert_eq!(with("Basic !!"), None);
        // No colon: no password.
        assert_eq!(with("Basic bmFjb3M="), None);
        assert_eq!(basic(&HeaderMap::new()), None);
    }

    #[test]
    fn config_bodies_may_hold_a_percent_encoded_content() {
        let (mib, slack) = (1024 * 1024, 64 * 1024);
        let archive = super::super::nacos::config_zip::MAX_ARCHIVE_BYTES;
        assert_eq!(limit_of(BodyLimit::Config, mib, mib), 3 * mib + slack);
        assert_eq!(limit_of(BodyLimit::Config, 8 * mib, 1024), 8 * mib);
        assert_eq!(limit_of(BodyLimit::Default, mib, 4 * mib), mib);
        assert_eq!(
            limit_of(BodyLimit::Archive, mib, mib),
            (3 * mib + slack).max(archive)
        );
    }
}
