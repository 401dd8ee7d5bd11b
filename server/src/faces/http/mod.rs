//! The HTTP API: one [`endpoint`] table, which parses each request once into what it is
//! (its handler, the permission it needs, its audit rule, its metric label, its body
//! limit), the handlers by API ([`nacos`] for Nacos v1, [`nacos_v2`], [`ops`] for health
//! and metrics, roster's own), the [`guard`] that authenticates every request before it
//! is served, the [`audit`] trail of what was answered, and the shared [`error`] and
//! [`params`] types.
//!
//! What comes from tower-http and what is written here: the security headers
//! ([`Secured`], [`Framed`]) and the request tracing of the routed API ([`Traced`]) are
//! tower-http's layers; the guard, the metrics, the audit and the body limit are one
//! hand-written service ([`Front`]), for the reasons and measurements given there, and
//! so are the [`cors`] answers to the other members' consoles.

pub mod audit;
pub mod clients;
pub mod cluster;
pub mod consul;
pub mod cors;
pub mod endpoint;
pub mod error;
pub mod eureka;
pub mod events;
pub mod guard;
pub mod nacos;
pub mod nacos_v2;
pub mod nacos_v2_config;
pub mod nacos_v2_envelope;
pub mod ops;
pub mod overview;
pub mod params;
pub mod pick;
pub mod prometheus;
pub mod signing_key;
pub mod snapshot;
pub mod sync;
pub mod tokens;
pub mod v3;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use endpoint::Endpoint;
use http_body_util::Limited;
use tower::{Layer, Service};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::set_header::{SetResponseHeader, SetResponseHeaderLayer};
use tower_http::trace::{Trace, TraceLayer};
use tracing::Span;

use crate::state::AppState;
use guard::Admitted;

/// The whole HTTP service: the console's static files, and the API behind the guard,
/// under the security headers. No API route, known or unknown, is reached without
/// passing the guard.
///
/// The guard, the metrics and the body limit are one hand-written service around the
/// API's handlers rather than axum middleware: each `middleware::from_fn` layer boxes a
/// clone of the service it wraps and its future on every request (measured: a third of
/// a list request's 40 allocations, and the allocator was 8.5 % of the node's CPU).
/// tower-http's header layers are not middleware of that kind: plain structs around
/// `Front`'s future, no box, no clone of a service per request.
///
/// `https`: whether the port serves HTTPS, which makes the members' origins `https://`
/// ([`cors`]).
pub fn service(state: AppState, console_dir: Option<std::path::PathBuf>, https: bool) -> Secured {
    let api = Routes(state.clone());
    let members = state.clone();
    let connect: roster_console_ui::ConnectSources =
        Arc::new(move || cors::member_origins(&members, https));
    let front = Front(
        Arc::new(Parts {
            state,
            https,
            api: traced(framed(api)),
            console: framed(roster_console_ui::router(console_dir, connect)),
        }),
        None,
    );
    SetResponseHeaderLayer::if_not_present(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    )
    .layer(front)
}

/// [`Front`] under tower-http's `X-Content-Type-Options: nosniff`, on every answer that
/// has not set its own (console files, API answers, the guard's refusals, the hot
/// routes alike): a JSON answer is never taken for a script or a page.
pub type Secured = SetResponseHeader<Front, HeaderValue>;

/// The console and the routed API also say `X-Frame-Options: DENY` (the console uses no
/// frames; its page also says `frame-ancestors 'none'`) and `Referrer-Policy:
/// no-referrer`; the console's page adds its Content-Security-Policy
/// (`roster_console_ui`). The hot routes and the guard's refusals, JSON that no browser
/// frames or follows links from, carry `nosniff` only: the two more headers would cost
/// every list request another ~1,350 instructions, 2.4 % of it (callgrind, 10 instances:
/// 57,100 without headers, 57,900 with `nosniff`, 59,200 with all three).
type Framed<S> = SetResponseHeader<SetResponseHeader<S, HeaderValue>, HeaderValue>;

fn framed<S>(inner: S) -> Framed<S> {
    tower::ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .service(inner)
}

/// Each connection's copy keeps the headers, around a [`Front`] told its peer.
impl<S: crate::services::net::ForPeer + Clone, M: Clone> crate::services::net::ForPeer
    for SetResponseHeader<S, M>
{
    fn for_peer(&self, peer: SocketAddr) -> Self {
        let mut copy = self.clone();
        *copy.get_mut() = self.get_ref().for_peer(peer);
        copy
    }
}

/// The routed API (the endpoints' handlers) under tower-http's request tracing: at debug level for `roster::faces::http`
/// (`--log-level roster=debug,info`), a span per request with its method and path, and
/// an event with the status and the latency once the answer's head is ready. The hot
/// routes (see [`Hot`]) and the guard's refusals never reach [`Routes`] and are not
/// traced (the metrics and the audit count them).
type Traced = Trace<
    Framed<Routes>,
    SharedClassifier<ServerErrorsAsFailures>,
    fn(&Request) -> Span,
    (),
    fn(&Response, Duration, &Span),
    (),
    (),
    (),
>;

fn traced(api: Framed<Routes>) -> Traced {
    // No event when a request starts (the answer's event has all), at a body's end or
    // for a 5xx (the answer's event has its status; 503s are routine in a cluster and
    // must not log at error).
    TraceLayer::new_for_http()
        .make_span_with(request_span as fn(&Request) -> Span)
        .on_request(())
        .on_response(answered as fn(&Response, Duration, &Span))
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
        .layer(api)
}

fn request_span(req: &Request) -> Span {
    tracing::debug_span!("http", method = %req.method(), path = %req.uri().path())
}

fn answered(response: &Response, latency: Duration, _span: &Span) {
    tracing::debug!(
        status = response.status().as_u16(),
        latency_us = latency.as_micros() as u64,
        "answered"
    );
}

/// The HTTP service [`service`] builds. Cheap to clone (one reference count). Each
/// connection gets a copy with its peer address, which UDP push subscriptions go to:
/// handed to the hot routes as an argument, to routed handlers as `ConnectInfo`.
#[derive(Clone)]
pub struct Front(Arc<Parts>, Option<SocketAddr>);

struct Parts {
    state: AppState,
    /// Whether the port serves HTTPS (the scheme of the origins [`cors`] allows).
    https: bool,
    /// The API's routes, under the tracing layer (taken only at debug level).
    api: Traced,
    /// The console's files: public (its login page among them).
    console: Framed<Router>,
}

impl Service<Request> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let (front, peer) = (self.0.clone(), self.1);
        let endpoint = Endpoint::parse(req.method(), req.uri().path());
        if endpoint == Endpoint::Console {
            return Box::pin(async move { front.console.clone().call(req).await });
        }
        let origin = cors::allowed_origin(&front.state, front.https, &req);
        if let Some(origin) = &origin {
            if cors::is_preflight(&req) {
                return Box::pin(std::future::ready(Ok(cors::preflight(origin.clone()))));
            }
        }
        // Password checks made for the request are throttled per source address.
        let source = peer.map(|p| p.ip());
        Box::pin(async move {
            let serving = front.serve_api(endpoint, req, peer);
            let mut response = crate::services::auth::throttle::with_source(source, serving).await;
            if let Some(origin) = origin {
                cors::allow(&mut response, origin);
            }
            Ok(response)
        })
    }
}

/// `services::net::serve_http` serves each connection with a copy that knows its peer.
impl crate::services::net::ForPeer for Front {
    fn for_peer(&self, peer: SocketAddr) -> Front {
        Front(self.0.clone(), Some(peer))
    }
}

/// `axum::serve` asks for a service per connection: the same one, with the peer's address.
impl<L: Listener<Addr = SocketAddr>> Service<IncomingStream<'_, L>> for Front {
    type Response = Front;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Front, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, L>) -> Self::Future {
        std::future::ready(Ok(Front(self.0.clone(), Some(*stream.remote_addr()))))
    }
}

impl Parts {
    /// An API request: the guard, then the endpoint's handler with a limited body,
    /// counted and timed (requests the guard refuses are not counted: their paths are
    /// anyone's choice), and audited (`audit`: writes, admin actions, refused reads; a
    /// channel send).
    async fn serve_api(
        &self,
        endpoint: Endpoint,
        req: Request,
        peer: Option<SocketAddr>,
    ) -> Response {
        // The path and method outlive the request this way: a clone of the `Uri` shares
        // its bytes, a standard method is a tag.
        let uri = req.uri().clone();
        let method = req.method().clone();
        let admitted = match guard::admit(&self.state, &endpoint, req).await {
            Ok(admitted) => admitted,
            Err(refusal) => {
                audit::refused(&self.state, &endpoint, &method, &uri, peer, &refusal);
                return refusal;
            }
        };
        let audited = audit::Pending::start(&admitted);
        let method_label = crate::services::metrics::http_method_label(&method);
        let label = admitted.endpoint.label();
        let started = Instant::now();
        let response = match Hot::of(&admitted.endpoint, &method) {
            Some(hot) => self.serve_hot(hot, admitted, peer).await,
            None => self.serve_routed(admitted, &uri, peer).await,
        };
        // A path of no route is counted as `unmatched`: anyone can invent paths.
        let counted = label.unwrap_or("unmatched");
        self.state.metrics.http_request(
            counted,
            method_label,
            response.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
        if let Some(pending) = audited {
            let status = response.status().as_u16();
            let route = label.unwrap_or(uri.path());
            pending.finish(&self.state, &method, &uri, route, peer, status);
        }
        response
    }

    /// Any other endpoint: its handler, with the body limited.
    ///
    /// The limit is `http_body_util::Limited`, which tower-http's `RequestBodyLimitLayer`
    /// wraps bodies in too; the layer's other half, refusing an announced length over the
    /// limit, is the guard's, which answers in the API's error format with the limit of
    /// the endpoint (the layer has one fixed limit and a plain-text 413). The layer would
    /// also wrap empty bodies and box every answer's body once more.
    async fn serve_routed(
        &self,
        admitted: Admitted,
        uri: &Uri,
        peer: Option<SocketAddr>,
    ) -> Response {
        let limit = guard::limit(&self.state, admitted.endpoint.body_limit(uri.query()));
        // A body the guard buffered is within the limit already, and an empty one
        // needs no wrapper; any other is cut at the limit as it is read (413).
        let mut req = admitted.into_request();
        if let Some(peer) = peer {
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
        }
        let req = req.map(|body| {
            if body.size_hint().exact() == Some(0) {
                body
            } else {
                Body::new(Limited::new(body, limit))
            }
        });
        // Tracing wraps the answer's body (one more box): only when it would log.
        if tracing::enabled!(tracing::Level::DEBUG) {
            let Ok(response) = self.api.clone().call(req).await;
            response.map(Body::new)
        } else {
            let Ok(response) = self.api.get_ref().clone().call(req).await;
            response
        }
    }

    /// A hot route: its handler called directly, with the parameters the guard parsed.
    async fn serve_hot(&self, hot: Hot, admitted: Admitted, peer: Option<SocketAddr>) -> Response {
        use nacos::instance;
        let state = axum::extract::State(self.state.clone());
        match hot {
            Hot::List => {
                let requester =
                    instance::Requester::new(admitted.req.headers(), peer, admitted.identity);
                instance::list(state, requester, admitted.params)
                    .await
                    .into_response()
            }
            Hot::Register => instance::register(state, admitted.params)
                .await
                .into_response(),
            Hot::Beat => instance::beat(state, admitted.params).await.into_response(),
            Hot::Config => match admitted.identity {
                Some(identity) => {
                    let source =
                        nacos::config::Source(peer.map(|p| p.ip().to_string()).unwrap_or_default());
                    let headers = admitted.req.into_parts().0.headers;
                    nacos::config::get(
                        state,
                        guard::Caller(identity),
                        source,
                        headers,
                        admitted.params,
                    )
                    .await
                    .into_response()
                }
                // The guard authenticates every caller of this path.
                None => {
                    crate::error::Error::unauthenticated("authentication required").into_response()
                }
            },
        }
    }
}

/// The endpoints' handlers as the one service the tracing layer wraps: each request
/// carries its [`Endpoint`] (the guard's, in its extensions), which calls its handler
/// and answers as axum's router did ([`endpoint::finish`]).
#[derive(Clone)]
pub struct Routes(AppState);

impl Service<Request> for Routes {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let head = req.method() == Method::HEAD;
        // `Admitted::into_request` put it there; a request without one is no route's.
        let endpoint = req
            .extensions_mut()
            .remove::<Endpoint>()
            .unwrap_or(Endpoint::NotFound {
                area: endpoint::Area::Other,
                reads: false,
            });
        let answer = endpoint.serve(req, self.0.clone());
        Box::pin(async move { Ok(endpoint::finish(answer.await, head)) })
    }
}

/// The routes that carry nearly all of a registry's traffic (clients poll lists, beat and
/// re-register), served by calling their handlers directly rather than through
/// [`Routes`]. Going through it costs the tracing and header layers, two boxed futures
/// and an extension map per request (heaptrack, when it was axum's router: a list
/// request went from 20 allocations to 11). The other methods on these paths (HEAD, the
/// 405s) go through [`Routes`]; the handlers take the same arguments either way, and
/// none of them reads the body; the config read takes the caller's identity the guard
/// found (as its extractor would).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hot {
    /// `GET /nacos/v1/ns/instance/list`.
    List,
    /// `POST /nacos/v1/ns/instance`.
    Register,
    /// `PUT /nacos/v1/ns/instance/beat`.
    Beat,
    /// `GET /nacos/v1/cs/configs` (clients read their configs at start and after every
    /// change notice).
    Config,
}

impl Hot {
    /// The hot route of `endpoint`, reached with `method` (not `HEAD`: its answer has
    /// no body, which [`Routes`] leaves out).
    fn of(endpoint: &Endpoint, method: &Method) -> Option<Hot> {
        let get = *method == Method::GET;
        match endpoint {
            Endpoint::InstanceList if get => Some(Hot::List),
            Endpoint::InstanceRegister => Some(Hot::Register),
            Endpoint::InstanceBeat => Some(Hot::Beat),
            Endpoint::ConfigGet | Endpoint::ConfigSearch | Endpoint::ConfigExport if get => {
                Some(Hot::Config)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot(method: Method, path: &str) -> Option<Hot> {
        Hot::of(&Endpoint::parse(&method, path), &method)
    }

    #[test]
    fn only_the_exact_method_and_path_take_a_hot_route() {
        let list = "/nacos/v1/ns/instance/list";
        assert_eq!(hot(Method::GET, list), Some(Hot::List));
        assert_eq!(
            hot(Method::POST, "/nacos/v1/ns/instance"),
            Some(Hot::Register)
        );
        assert_eq!(
            hot(Method::PUT, "/nacos/v1/ns/instance/beat"),
            Some(Hot::Beat)
        );
        // Everything else goes through the routes: other methods on the same paths
        // (HEAD answers without a body there), other spellings, other routes.
        assert_eq!(hot(Method::HEAD, list), None);
        assert_eq!(hot(Method::POST, list), None);
        assert_eq!(hot(Method::GET, "/nacos/v1/ns/instance/list/"), None);
        assert_eq!(hot(Method::DELETE, "/nacos/v1/ns/instance"), None);
        assert_eq!(hot(Method::GET, "/nacos/v1/ns/instance"), None);
        assert_eq!(hot(Method::PUT, "/nacos/v2/ns/instance/beat"), None);
        assert_eq!(hot(Method::GET, "/nacos/v1/cs/configs"), Some(Hot::Config));
        assert_eq!(hot(Method::POST, "/nacos/v1/cs/configs"), None);
    }
}
