//! `GET /api/v1/events`: a server-sent-events stream of service changes, which the
//! console listens to so that registrations show up without a reload.
//!
//! One worker drains a registry [`ChangeSet`] (changes to a service coalesce for
//! [`COALESCE`]) and broadcasts the changed services; each stream filters them by its
//! namespace. A stream that falls behind the broadcast gets `resync` (refetch what you
//! show) instead of the events it missed. Streams end when the node starts shutting
//! down, so they never hold up a graceful shutdown.
//!
//! Events: `event: service` with `{"namespaceId","groupName","serviceName"}`, and
//! `event: resync` with `{}`. Comment lines every 15 s keep proxies from closing an idle
//! stream. `EventSource` cannot send headers: pass `accessToken` in the query.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;

use super::error::ApiError;
use super::params::{check_namespace_id, Params};
use crate::app::AppState;
use crate::registry::changes::ChangeSet;
use crate::registry::service::ServiceKey;

/// How long changes gather before they are sent.
const COALESCE: Duration = Duration::from_millis(100);
/// Events a slow stream may fall behind by before it is told to resync.
const BACKLOG: usize = 1024;
/// Keep-alive comment period.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The broadcast of changed services, and the signal that ends every stream.
#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Arc<ServiceKey>>,
    closing: watch::Receiver<bool>,
}

impl Events {
    /// Streams end when `closing` turns true.
    pub fn new(closing: watch::Receiver<bool>) -> Self {
        let (tx, _) = broadcast::channel(BACKLOG);
        Self { tx, closing }
    }

    /// The worker: broadcasts every change `changes` sees until `stopping`.
    pub async fn run(self, changes: Arc<ChangeSet>, mut stopping: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = changes.changed() => {}
                _ = stopping.changed() => return,
            }
            tokio::time::sleep(COALESCE).await;
            for key in changes.drain() {
                if self.tx.receiver_count() == 0 {
                    continue;
                }
                // A stream that closed meanwhile is fine.
                let _ = self.tx.send(Arc::new(key));
            }
        }
    }
}

/// The route.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/v1/events", get(stream))
}

async fn stream(
    State(state): State<AppState>,
    params: Params,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let namespace = match params.optional("namespaceId") {
        Some(ns) => {
            check_namespace_id("namespaceId", ns)?;
            Some(ns.to_string())
        }
        None => None,
    };
    let mut closing = state.events.closing.clone();
    let mut changes = state.events.tx.subscribe();
    let (tx, rx) = mpsc::channel(64);
    // One forwarding task per stream: it ends with the client, or when the node closes.
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                item = changes.recv() => item,
                _ = closing.wait_for(|c| *c) => return,
                () = tx.closed() => return,
            };
            let event = match item {
                Ok(key) => {
                    if namespace.as_deref().is_some_and(|ns| *key.namespace != *ns) {
                        continue;
                    }
                    let data = json!({
                        "namespaceId": &*key.namespace,
                        "groupName": &*key.group,
                        "serviceName": &*key.name,
                    });
                    Event::default().event("service").data(data.to_string())
                }
                Err(RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
                Err(RecvError::Closed) => return,
            };
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    let stream = ReceiverStream::new(rx);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
