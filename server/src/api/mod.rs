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

use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;

use crate::app::AppState;
use crate::metrics::{RouteLabels, StatusLabels};

/// The whole HTTP service: the console's static files, then the API. The guard wraps the
/// API router, so it runs before routing: no API route, known or unknown, is reached
/// without passing it.
///
/// The guard, metrics and body limit wrap the router as a whole rather than through
/// `Router::layer`, which wraps every route in another boxed service that is cloned on
/// every request (measured: a third of the allocator's time on a registration).
pub fn service(state: AppState, console_dir: Option<std::path::PathBuf>) -> Router {
    let routes = Router::new()
        .merge(nacos::routes())
        .merge(nacos_v2::routes())
        .merge(ops::routes())
        .merge(cluster::routes())
        .merge(pick::routes())
        .merge(sync::routes())
        .merge(events::routes())
        .fallback(nacos::no_such_api)
        .with_state(state.clone());
    let api = ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            record_metrics,
        ))
        .layer(RequestBodyLimitLayer::new(state.limits.max_body_bytes))
        .service(routes);
    // The console's files are public (its login page among them); everything else
    // passes the guard.
    roster_console_ui::router(console_dir).fallback_service(api)
}

/// Marks a response of the fallback: the request matched no route.
#[derive(Clone, Copy, Debug)]
pub struct Unmatched;

/// The route a path is counted under: the path itself for the static routes, the
/// pattern for the sync task routes (the only ones with a parameter).
fn route_label(path: &str) -> String {
    sync::route_pattern(path).map_or_else(|| path.to_string(), str::to_string)
}

/// Counts requests and observes latency per route.
async fn record_metrics(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let route = route_label(req.uri().path());
    let method = req.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(req).await;
    let route = if response.extensions().get::<Unmatched>().is_some() {
        "unmatched".to_string()
    } else {
        route
    };
    let labels = RouteLabels { route, method };
    state
        .metrics
        .latency
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    state
        .metrics
        .requests
        .get_or_create(&StatusLabels {
            route: labels.route,
            method: labels.method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}
