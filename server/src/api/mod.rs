//! The HTTP API: one route table per API ([`nacos`] for Nacos v1, [`ops`] for health and
//! metrics), the [`guard`] that authenticates every request before it is routed, and the
//! shared [`error`] and [`params`] types.

pub mod cluster;
pub mod error;
pub mod events;
pub mod guard;
pub mod nacos;
pub mod nacos_v2;
pub mod ops;
pub mod params;
pub mod pick;
pub mod sync;

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use http_body_util::Limited;
use tower::Service;

use crate::app::AppState;

/// The whole HTTP service: the console's static files, and the API behind the guard.
/// No API route, known or unknown, is reached without passing the guard.
///
/// The guard, the metrics and the body limit are one hand-written service around the
/// API router rather than axum middleware: each `middleware::from_fn` layer boxes a
/// clone of the service it wraps and its future on every request (measured: a third of
/// a list request's 40 allocations, and the allocator was 8.5 % of the node's CPU).
pub fn service(state: AppState, console_dir: Option<std::path::PathBuf>) -> Front {
    let api = Router::new()
        .merge(nacos::routes())
        .merge(nacos_v2::routes())
        .merge(ops::routes())
        .merge(cluster::routes())
        .merge(pick::routes())
        .merge(sync::routes())
        .merge(events::routes())
        .fallback(nacos::no_such_api)
        .with_state(state.clone());
    Front(Arc::new(Parts {
        state,
        api,
        console: roster_console_ui::router(console_dir),
    }))
}

/// The HTTP service [`service`] builds. Cheap to clone (one reference count).
#[derive(Clone)]
pub struct Front(Arc<Parts>);

struct Parts {
    state: AppState,
    api: Router,
    /// The console's files: public (its login page among them).
    console: Router,
}

/// Whether the console router serves `path` (see `roster_console_ui::router`); every
/// other path is the API's.
fn is_console(path: &str) -> bool {
    matches!(
        path,
        "/" | "/index.html" | "/favicon.svg" | "/nacos" | "/nacos/"
    ) || path.starts_with("/assets/")
}

impl Service<Request> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let front = self.0.clone();
        if is_console(req.uri().path()) {
            return Box::pin(async move { front.console.clone().call(req).await });
        }
        Box::pin(async move { Ok(front.serve_api(req).await) })
    }
}

/// `axum::serve` asks for a service per connection: the same one.
impl<L: Listener> Service<IncomingStream<'_, L>> for Front {
    type Response = Front;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Front, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _stream: IncomingStream<'_, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}

impl Parts {
    /// An API request: the guard, then the route with a limited body, counted and timed
    /// (requests the guard refuses are not counted: their paths are anyone's choice).
    async fn serve_api(&self, req: Request) -> Response {
        let req = match guard::admit(&self.state, req).await {
            Ok(req) => req,
            Err(refusal) => return refusal,
        };
        // The path outlives the request this way: a clone of the `Uri` shares its bytes.
        let uri = req.uri().clone();
        let method = method_label(req.method());
        let started = Instant::now();
        let limit = self.state.limits.max_body_bytes;
        // A body the guard buffered is within the limit already, and an empty one needs
        // no wrapper; any other is cut at the limit as it is read (413).
        let req = req.map(|body| {
            if body.size_hint().exact() == Some(0) {
                body
            } else {
                Body::new(Limited::new(body, limit))
            }
        });
        let Ok(response) = self.api.clone().call(req).await;
        self.record(route_label(uri.path()), method, started, &response);
        response
    }

    fn record(
        &self,
        route: &str,
        method: Cow<'static, str>,
        started: Instant,
        response: &Response,
    ) {
        let route = if response.extensions().get::<Unmatched>().is_some() {
            "unmatched"
        } else {
            route
        };
        self.state.metrics.http_request(
            route,
            method,
            response.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
}

/// Marks a response of the fallback: the request matched no route.
#[derive(Clone, Copy, Debug)]
pub struct Unmatched;

/// The route a path is counted under: the path itself for the static routes, the
/// pattern for the sync task routes (the only ones with a parameter).
fn route_label(path: &str) -> &str {
    sync::route_pattern(path).unwrap_or(path)
}

/// The method label: borrowed for the standard methods.
fn method_label(method: &Method) -> Cow<'static, str> {
    const STANDARD: [&str; 9] = [
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE",
    ];
    let name = method.as_str();
    match STANDARD.iter().find(|m| **m == name) {
        Some(m) => Cow::Borrowed(m),
        None => Cow::Owned(name.to_string()),
    }
}
