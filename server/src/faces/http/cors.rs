//! Cross-origin requests from the consoles of the other members, so that a console whose
//! node died can carry on against another member's API from the browser.
//!
//! Allowed are exactly the origins of this cluster's members' HTTP addresses (this
//! node's own included), with the scheme this node serves (`https://` under
//! `--http-tls-*`, else `http://`): `http://10.0.0.2:8848` when a member advertises
//! `10.0.0.2:8848` (a default port, 80 or 443, may be left out of the origin, as
//! browsers do). A console opened under another name (a DNS name, a load balancer)
//! has another origin, and its calls to other members stay refused by the browser. A
//! member's HTTP address is learned from its hellos (`cluster::members`): one this node
//! has not heard from since it started is not allowed yet.
//!
//! From an allowed origin, a preflight (`OPTIONS` with `Access-Control-Request-Method`)
//! is answered here, before the guard: it carries no token, and is neither audited nor
//! counted in the request metrics. Every other request goes through the guard as
//! always, and its answer says `Access-Control-Allow-Origin` (so the event stream,
//! authenticated by its `accessToken` parameter, works cross-origin too). Credentials
//! are not allowed: the console sends a bearer token, never a cookie. Requests from any
//! other origin get no CORS header at all, and the browser refuses their answers; their
//! preflights meet the guard, which refuses them (401).
//!
//! Written into `faces::http::Front` rather than as tower-http's `CorsLayer`: the layer would
//! wrap every request's future and answer, while here a request without an `Origin`
//! header (every SDK's) costs one header lookup and no allocation.

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use axum::response::Response;

use crate::state::AppState;

/// The methods a preflight allows.
const METHODS: HeaderValue = HeaderValue::from_static("GET, POST, PUT, DELETE, PATCH");
/// The request headers a preflight allows: those the console sends that are not
/// CORS-safelisted (`Content-Type: application/json` is not), and Nacos' token header.
const HEADERS: HeaderValue = HeaderValue::from_static("Authorization, Content-Type, accessToken");
/// How long a browser may keep a preflight's answer, seconds.
const MAX_AGE: HeaderValue = HeaderValue::from_static("600");
/// The answer headers a cross-origin console may read beyond the safelisted ones (the
/// file name of an export).
const EXPOSED: HeaderValue = HeaderValue::from_static("Content-Disposition");

/// `Origin` of `req`, if it is one of the members' (a cheap clone of the header's
/// bytes). `None` for a request without one, without a lookup of the members.
pub fn allowed_origin<B>(state: &AppState, https: bool, req: &Request<B>) -> Option<HeaderValue> {
    let origin = req.headers().get(header::ORIGIN)?;
    let text = origin.to_str().ok()?;
    let members = &state.members;
    let allowed = names(text, https, &members.me().http_addr)
        || members.any_peer_http(|addr| names(text, https, addr));
    allowed.then(|| origin.clone())
}

/// The origins of the other members' consoles, which this node's console page may call
/// (its `connect-src`, `roster_console_ui::ConnectSources`): the same members this
/// module lets in.
pub fn member_origins(state: &AppState, https: bool) -> Vec<String> {
    let scheme = if https { "https://" } else { "http://" };
    state
        .members
        .peers()
        .values()
        .filter_map(|p| p.http_addr.as_deref())
        .map(|addr| format!("{scheme}{addr}"))
        .collect()
}

/// Whether `origin` is that of a console served at `addr` (`HOST:PORT`), over HTTPS or
/// not.
fn names(origin: &str, https: bool, addr: &str) -> bool {
    let (scheme, default_port) = if https {
        ("https://", ":443")
    } else {
        ("http://", ":80")
    };
    let Some(host) = origin.strip_prefix(scheme) else {
        return false;
    };
    host.eq_ignore_ascii_case(addr)
        || addr
            .strip_suffix(default_port)
            .is_some_and(|a| host.eq_ignore_ascii_case(a))
}

/// Whether `req` is a CORS preflight.
pub fn is_preflight<B>(req: &Request<B>) -> bool {
    req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The answer to a preflight from the allowed `origin`.
pub fn preflight(origin: HeaderValue) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, METHODS);
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HEADERS);
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// Marks `response` readable by the allowed `origin`.
pub fn allow(response: &mut Response, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn an_origin_names_a_member_with_the_scheme_served() {
        let addr = "10.0.0.2:8848";
        assert!(names("http://10.0.0.2:8848", false, addr));
        assert!(!names("https://10.0.0.2:8848", false, addr));
        assert!(names("https://10.0.0.2:8848", true, addr));
        assert!(!names("http://10.0.0.2:8848", true, addr));
        for other in [
            "http://10.0.0.2:8849",
            "http://10.0.0.2",
            "http://10.0.0.20:8848",
            "http://10.0.0.2:8848/",
            "http://x.10.0.0.2:8848",
            "null",
            "",
        ] {
            assert!(!names(other, false, addr), "{other}");
        }
        // Host names compare without case; a default port may be left out.
        assert!(names(
            "http://Node-A.example:8848",
            false,
            "node-a.example:8848"
        ));
        assert!(names("http://node-a.example", false, "node-a.example:80"));
        assert!(names("https://node-a.example", true, "node-a.example:443"));
        assert!(!names("https://node-a.example", true, "node-a.example:80"));
        assert!(names("http://[::1]:8848", false, "[::1]:8848"));
    }
}
