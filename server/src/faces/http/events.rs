//! `GET /api/v1/events`: a server-sent-events stream of changes, which the console
//! listens to so that what another admin, another browser or an API client changes
//! shows up without a reload.
//!
//! The changes come from the node's broadcast of them ([`crate::services::push::events`]: service
//! changes from the registry, namespaces, users and sync tasks from the Raft state
//! machine — on every node, so a change made through any node reaches the streams of
//! all of them). Each stream filters the broadcast by what it asked for and what its
//! caller may see, by the caller's permissions as they are when the event comes (a
//! grant or a revocation applies to open streams too). A stream ends when its caller's
//! tokens are revoked (a password or role change, the user's deletion). A
//! stream that falls behind the broadcast gets `resync` (refetch what you show) instead
//! of the events it missed. Streams end when the node starts shutting down, so they
//! never hold up a graceful shutdown.
//!
//! Query: `namespaceId` (optional; the caller must be able to read something of it)
//! limits `service` events to one namespace; `kinds`
//! (optional, comma-separated, default: every kind the caller may see) picks the kinds
//! below. `EventSource` cannot send headers: pass `accessToken` in the query.
//!
//! Events (`event:` name, then its `data:`), each saying only *what* changed — a reader
//! refetches it through the API, which checks its rights:
//! - `service` `{"namespaceId","groupName","serviceName"}`: a service, its settings or
//!   its instances changed (only services the caller may read).
//! - `namespace` `{"namespaceId"}`: a namespace was declared, renamed or deleted (not
//!   limited by `namespaceId`; only namespaces the caller may read something of; a
//!   namespace that only exists because services were registered in it comes and goes
//!   with `service` events).
//! - `user` `{}`: users were created, deleted or given a new password, or roles or
//!   permissions changed. Admins only.
//! - `task` `{"name"}`: a sync task was created, paused, resumed, applied or deleted,
//!   or its runner reported a new status (at most every few seconds per task, and
//!   every 30 s while it runs). Admins only.
//! - `resync` `{}`: anything may have changed (the stream fell behind, the node
//!   replaced its state from a snapshot, or — for a caller who is not an admin — roles
//!   or permissions changed, so what it may see did): refetch everything.
//!
//! Asking for `user` or `task` without being an admin is a 403, as the API that lists
//! them is. Comment lines every 15 s keep proxies from closing an idle stream.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;

use super::guard::Caller;
use super::params::Params;
use crate::error::Error;
use crate::services::auth::permissions::{Action, Resource};
use crate::services::auth::{Auth, Identity};
use crate::services::push::events::Change;
use crate::services::store::catalog::CatalogChange;
use crate::state::AppState;
use roster_registry::validate::check_namespace_id;

/// Keep-alive comment period.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The kinds of event a stream may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kinds {
    service: bool,
    namespace: bool,
    user: bool,
    task: bool,
}

impl Kinds {
    /// The kinds named in `kinds` (comma-separated), or every kind `admin` may see.
    fn parse(kinds: Option<&str>, admin: bool) -> Result<Self, Error> {
        let Some(list) = kinds else {
            return Ok(Self {
                service: true,
                namespace: true,
                user: admin,
                task: admin,
            });
        };
        let mut out = Self {
            service: false,
            namespace: false,
            user: false,
            task: false,
        };
        for kind in list.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            match kind {
                "service" => out.service = true,
                "namespace" => out.namespace = true,
                "user" => out.user = true,
                "task" => out.task = true,
                other => {
                    return Err(Error::illegal(
                        "kinds",
                        format!("unknown kind '{other}': use service, namespace, user, task"),
                    ))
                }
            }
        }
        if (out.user || out.task) && !admin {
            return Err(Error::forbidden(
                "authorization failed!: user and task events need an admin user",
            ));
        }
        Ok(out)
    }
}

/// What one stream receives.
struct Filter {
    kinds: Kinds,
    /// `service` events of this namespace only.
    namespace: Option<String>,
    /// Whose permissions filter the events, checked through `auth` at each event.
    caller: Identity,
    auth: Auth,
}

impl Filter {
    fn may_read(&self, resource: &Resource) -> bool {
        self.auth.allowed(&self.caller, resource, Action::Read)
    }

    /// The event `change` makes on this stream, if any.
    fn event(&self, change: &Change) -> Option<Event> {
        let (name, data) = match change {
            Change::Service(key) => {
                if !self.kinds.service
                    || self
                        .namespace
                        .as_deref()
                        .is_some_and(|ns| *key.namespace != *ns)
                    || !self.may_read(&Resource::Service {
                        namespace: &key.namespace,
                        group: &key.group,
                        name: &key.name,
                    })
                {
                    return None;
                }
                let data = json!({
                    "namespaceId": &*key.namespace,
                    "groupName": &*key.group,
                    "serviceName": &*key.name,
                });
                ("service", data)
            }
            Change::Catalog(change) => match &**change {
                CatalogChange::Namespace(id)
                    if self.kinds.namespace && self.may_read(&Resource::Namespace(id)) =>
                {
                    ("namespace", json!({ "namespaceId": id }))
                }
                // Which user is not said: nothing about users leaves the node but
                // "refetch the list" (which needs an admin anyway).
                CatalogChange::Users | CatalogChange::Access if self.kinds.user => {
                    ("user", json!({}))
                }
                // What this caller may see may have changed.
                CatalogChange::Access if !self.caller.admin => ("resync", json!({})),
                CatalogChange::Task(name) if self.kinds.task => ("task", json!({ "name": name })),
                CatalogChange::Everything => ("resync", json!({})),
                _ => return None,
            },
        };
        Some(Event::default().event(name).data(data.to_string()))
    }
}

pub(super) async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Error> {
    let namespace = match params.optional("namespaceId") {
        Some(ns) => {
            check_namespace_id("namespaceId", ns)?;
            Some(ns.to_string())
        }
        None => None,
    };
    let filter = Filter {
        kinds: Kinds::parse(params.optional("kinds"), caller.0.admin)?,
        namespace,
        caller: caller.0,
        auth: state.auth.clone(),
    };
    // Who the caller is now (`None` with auth off): their tokens ended, the stream ends.
    let reader = state.auth.reader(&filter.caller);
    let mut closing = state.events.closing();
    let mut changes = state.events.subscribe();
    let (tx, rx) = mpsc::channel(64);
    // One forwarding task per stream: it ends with the client, or when the node closes.
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                item = changes.recv() => item,
                _ = closing.wait_for(|c| *c) => return,
                () = tx.closed() => return,
            };
            if reader.as_ref().is_some_and(|r| !r.signed_in()) {
                // Revoked (or deleted) since the stream opened: it ends with them.
                return;
            }
            let event = match item {
                Ok(change) => match filter.event(&change) {
                    Some(event) => event,
                    None => continue,
                },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_default_to_what_the_caller_may_see() {
        let all = Kinds::parse(None, true).unwrap();
        assert!(all.service && all.namespace && all.user && all.task);
        let user = Kinds::parse(None, false).unwrap();
        assert!(user.service && user.namespace && !user.user && !user.task);
        let picked = Kinds::parse(Some("namespace, task"), true).unwrap();
        assert!(!picked.service && picked.namespace && !picked.user && picked.task);
        assert_eq!(
            Kinds::parse(Some("nope"), true).unwrap_err().http_status(),
            400
        );
        assert_eq!(
            Kinds::parse(Some("user"), false).unwrap_err().http_status(),
            403
        );
    }
}
