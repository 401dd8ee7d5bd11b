//! The guard every API request passes before routing: buffers and parses parameters (query
//! plus urlencoded body), holds requests until the node is ready, and authenticates.
//! Only an explicit list of paths is open; no header grants a pass.

use std::borrow::Cow;

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::params::Params;
use crate::auth::{Credentials, Identity};
use crate::clock::now_secs;
use crate::error::{Error, ErrorKind};
use crate::state::AppState;

/// Paths answered before the node is ready and without authentication.
const OPS_PATHS: [&str; 3] = ["/health/live", "/health/ready", "/metrics"];
/// Paths that need no authentication once the node is ready.
const OPEN_PATHS: [&str; 2] = ["/nacos/v1/auth/login", "/nacos/v1/auth/users/login"];
/// Paths where authentication is optional: clients probe this one for
/// `{"status":"UP"}`; its detailed form requires a caller and checks for one.
const SOFT_PATHS: [&str; 1] = ["/nacos/v1/ns/operator/metrics"];

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
    let limit = state.limits.max_body_bytes;
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
    let (params, body) = if is_form(&parts.headers) {
        match to_bytes(body, limit).await {
            Ok(bytes) => (Params::parse(query, Some(&bytes)), Body::from(bytes)),
            Err(_) => return Err(too_large()),
        }
    } else {
        (Params::parse(query, None), body)
    };
    let params = params.map_err(|e| refuse(parts.uri.path(), e))?;
    let path = parts.uri.path();
    let mut identity = None;
    if !OPS_PATHS.contains(&path) {
        if !state.ready.is_ready() {
            return Err(refuse(
                path,
                Error::unavailable("server is starting, please try again later"),
            ));
        }
        if SOFT_PATHS.contains(&path) {
            identity = authenticate(state, &parts.headers, &params).await.ok();
        } else if !OPEN_PATHS.contains(&path) {
            match authenticate(state, &parts.headers, &params).await {
                Ok(caller) => identity = Some(caller),
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
        super::nacos_v2::failure(e)
    } else {
        e.into_response()
    }
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
