//! Nacos 3's fuzzy watch over gRPC, for services (`NamingFuzzyWatchRequest`) and
//! configuration items (`ConfigFuzzyWatchRequest`): a connection watches a pattern
//! ([`pattern`]); it is told at once what the pattern matches that it lacks
//! (`…FuzzyWatchSyncRequest`, in batches, then `FINISH_FUZZY_WATCH_INIT_NOTIFY` for a
//! first watch), and later each item that comes or goes (`…FuzzyWatchChangeNotifyRequest`).
//! A service is there while it has instances (Nacos: `ADD_SERVICE` at its first
//! publisher, `DELETE_SERVICE` when its last one goes); an item while it is stored.
//!
//! Watches are this node's ([`watches`]: per pattern, bounded as Nacos bounds them), but
//! changes are seen where they are applied: the naming push loop hands over the
//! services its change set marks — registrations here, Distro copies from peers, Raft
//! applies alike — and the config push loop the store's changed keys. Each watcher is
//! told only of what it may read; a pattern's namespace must be readable to watch it.

pub mod pattern;
pub mod watches;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};

use super::connection::{Connection, Pushed};
use super::kind::RequestKind;
use super::proto::Payload;
use super::reply::{failure, refusal, respond};
use super::GrpcServer;
use crate::error::Error;
use crate::services::auth::permissions::{Action, Resource, DENIED};
use crate::services::auth::{Identity, Reader};
use crate::services::configs::ConfigKey;
use pattern::{Item, Pattern};
use roster_registry::service::ServiceKey;
use watches::{diff, MatchChange, PatternsFull, Watched, Watches};

pub use watches::Bounds;

/// Nacos' bounds, for services and items alike: 20 patterns on a node
/// (`nacos.naming.fuzzy.watch.max.pattern.count`), 500 matches each
/// (`...max.pattern.match.service.count`, `...match.config.count`).
pub const DEFAULT_BOUNDS: Bounds = Bounds {
    max_patterns: 20,
    max_matches: 500,
};

/// Nacos' `errorCode` when the node watches as many patterns as it may.
const PATTERN_OVER_LIMIT: u16 = 50310;
/// ... and when a pattern matches more than it keeps (the watch is made all the same).
const MATCH_COUNT_OVER_LIMIT: u16 = 50311;

/// The sync types of a `…FuzzyWatchSyncRequest`: a first watch's matches, the end of
/// them, and a re-watch's differences; and the one of a change.
const INIT: &str = "FUZZY_WATCH_INIT_NOTIFY";
const FINISH_INIT: &str = "FINISH_FUZZY_WATCH_INIT_NOTIFY";
const DIFF: &str = "FUZZY_WATCH_DIFF_SYNC_NOTIFY";
const CHANGED: &str = "FUZZY_WATCH_RESOURCE_CHANGED";

/// The bounds of this node's fuzzy watches (`--naming-fuzzy-watch-*`,
/// `--config-fuzzy-watch-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuzzyLimits {
    /// Services.
    pub naming: Bounds,
    /// Configuration items.
    pub config: Bounds,
}

impl Default for FuzzyLimits {
    fn default() -> Self {
        Self {
            naming: DEFAULT_BOUNDS,
            config: DEFAULT_BOUNDS,
        }
    }
}

/// What is watched: services or configuration items. Each has its own messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Domain {
    Naming,
    Config,
}

impl Domain {
    /// The key a client is told, as it parses it.
    fn key(self, item: &Item) -> String {
        match self {
            Domain::Naming => item.service_key(),
            Domain::Config => item.group_key(),
        }
    }

    /// The resource a watcher must read to be told of `item`.
    fn resource(self, item: &Item) -> Resource<'_> {
        match self {
            Domain::Naming => Resource::Service {
                namespace: &item.namespace,
                group: &item.group,
                name: &item.name,
            },
            Domain::Config => Resource::Config {
                namespace: &item.namespace,
                group: &item.group,
                data_id: &item.name,
            },
        }
    }

    fn module(self) -> &'static str {
        match self {
            Domain::Naming => "naming",
            Domain::Config => "config",
        }
    }

    fn sync_type(self) -> &'static str {
        match self {
            Domain::Naming => "NamingFuzzyWatchSyncRequest",
            Domain::Config => "ConfigFuzzyWatchSyncRequest",
        }
    }

    fn notify_type(self) -> &'static str {
        match self {
            Domain::Naming => "NamingFuzzyWatchChangeNotifyRequest",
            Domain::Config => "ConfigFuzzyWatchChangeNotifyRequest",
        }
    }

    /// Keys per sync message (Nacos: 10 services; `nacos.config.push.batchSize`, 20).
    fn batch(self) -> usize {
        match self {
            Domain::Naming => 10,
            Domain::Config => 20,
        }
    }

    /// The field naming a key in a sync context and a change.
    fn key_field(self) -> &'static str {
        match self {
            Domain::Naming => "serviceKey",
            Domain::Config => "groupKey",
        }
    }

    /// The change type of an item come (`true`) or gone in a sync context.
    fn change(self, came: bool) -> &'static str {
        match (self, came) {
            (Domain::Naming, true) => "ADD_SERVICE",
            (Domain::Naming, false) => "DELETE_SERVICE",
            (Domain::Config, true) => "ADD_CONFIG",
            (Domain::Config, false) => "DELETE_CONFIG",
        }
    }

    /// The fields of a change message (beyond headers, id and module). As Nacos: a
    /// configuration item that comes is `CONFIG_CHANGED` (clients take it as added),
    /// and its type field is `changeType`.
    fn notify_fields(self, key: String, came: bool) -> Value {
        match self {
            Domain::Naming => json!({
                "serviceKey": key,
                "changedType": self.change(came),
                "syncType": CHANGED,
            }),
            Domain::Config => json!({
                "groupKey": key,
                "changeType": if came { "CONFIG_CHANGED" } else { "DELETE_CONFIG" },
            }),
        }
    }
}

/// A connection watching a pattern.
pub struct Watcher {
    /// The connection (gone with it: [`FuzzyWatches::forget`] is called then).
    conn: Weak<Connection>,
    /// Who watches (`None` with auth off): told only of what they may read now.
    reader: Option<Arc<Reader>>,
}

impl Watcher {
    fn may_read(&self, domain: Domain, item: &Item) -> bool {
        self.reader
            .as_ref()
            .is_none_or(|r| r.still_reads(&domain.resource(item)))
    }
}

/// This node's fuzzy watches, services' and configuration items'. Each domain's under
/// its own lock, held while its messages are queued, so that a watcher is told of a
/// change after the sync that preceded it, never before.
pub struct FuzzyWatches {
    naming: Mutex<Watches<Watcher>>,
    config: Mutex<Watches<Watcher>>,
}

impl FuzzyWatches {
    /// No watches, within `limits`.
    pub fn new(limits: FuzzyLimits) -> Self {
        Self {
            naming: Mutex::new(Watches::new(limits.naming)),
            config: Mutex::new(Watches::new(limits.config)),
        }
    }

    fn of(&self, domain: Domain) -> &Mutex<Watches<Watcher>> {
        match domain {
            Domain::Naming => &self.naming,
            Domain::Config => &self.config,
        }
    }

    /// Ends every watch of connection client `client` (its stream ended).
    pub fn forget(&self, client: &str) {
        self.naming.lock().forget(client);
        self.config.lock().forget(client);
    }
}

/// A fuzzy watch request, read leniently (every field optional, unknown keys ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct WatchRequest {
    group_key_pattern: Option<String>,
    received_group_keys: Option<Vec<String>>,
    watch_type: Option<String>,
    /// Jackson's name for `isInitializing()`; `isInitializing` accepted too.
    initializing: Option<bool>,
    is_initializing: Option<bool>,
}

impl GrpcServer {
    /// Answers fuzzy watch request `kind` (body `body`) from `identity` on `conn`, as
    /// `reply_type`: a watch (made, with its sync queued) or its end.
    pub(super) fn fuzzy_watch(
        &self,
        conn: &Arc<Connection>,
        identity: &Identity,
        kind: RequestKind,
        reply_type: &'static str,
        body: &[u8],
    ) -> Payload {
        let domain = match kind {
            RequestKind::ConfigFuzzyWatch => Domain::Config,
            _ => Domain::Naming,
        };
        let request: WatchRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("Invalid request: the body is not a {}: {e}", kind.name());
                return failure("ErrorResponse", 400, &message);
            }
        };
        let pattern = match read_pattern(&request) {
            Ok(p) => p,
            Err(e) => return failure("ErrorResponse", e.grpc_code(), &e.message),
        };
        // As a service list: something of the namespace must be readable; what is
        // told is then what the caller may read.
        let namespace = Resource::Namespace(&pattern.namespace);
        if !self.app.auth.allowed(identity, &namespace, Action::Read) {
            return refusal(reply_type, DENIED);
        }
        match request.watch_type.as_deref() {
            Some("WATCH") => {}
            Some("CANCEL_WATCH") => {
                self.fuzzy
                    .of(domain)
                    .lock()
                    .cancel(&pattern.raw, &conn.client);
                return respond(reply_type, json!({}));
            }
            Some(other) => {
                let e = Error::illegal(
                    "watchType",
                    format!("'{other}' is neither WATCH nor CANCEL_WATCH"),
                );
                return failure("ErrorResponse", e.grpc_code(), &e.message);
            }
            None => {
                let e = Error::missing("watchType");
                return failure("ErrorResponse", e.grpc_code(), &e.message);
            }
        }
        let initializing = request
            .initializing
            .or(request.is_initializing)
            .unwrap_or(false);
        let received: HashSet<String> = request
            .received_group_keys
            .unwrap_or_default()
            .into_iter()
            .collect();
        let watcher = Watcher {
            conn: Arc::downgrade(conn),
            reader: self.app.auth.reader(identity).map(Arc::new),
        };
        let mut watches = self.fuzzy.of(domain).lock();
        let raw = pattern.raw.clone();
        let scan = |p: &Pattern, visit: &mut dyn FnMut(Item) -> bool| self.scan(domain, p, visit);
        if let Err(PatternsFull) = watches.watch(pattern, conn.client.clone(), watcher, scan) {
            tracing::info!(connection = %conn.id, pattern = %raw, "fuzzy watch refused: the node watches as many patterns as it may");
            return failure(
                reply_type,
                PATTERN_OVER_LIMIT,
                "fuzzy watch pattern over limit",
            );
        }
        let watched = watches.get(&raw).expect("watched above");
        let full = watches.is_full(watched);
        let watcher = &watched.watchers[&conn.client];
        let keys: BTreeSet<String> = watched
            .matched
            .iter()
            .filter(|item| watcher.may_read(domain, item))
            .map(|item| domain.key(item))
            .collect();
        let told = diff(&keys, &received, full);
        // Queued under the lock: any change of this pattern is told after it.
        self.send_sync(conn, domain, &raw, initializing, &told);
        drop(watches);
        if full {
            let message = "fuzzy watch pattern matched count over limit";
            return failure(reply_type, MATCH_COUNT_OVER_LIMIT, message);
        }
        respond(reply_type, json!({}))
    }

    /// Tells `conn` what it lacks and holds wrongly of pattern `raw` (`told`), in
    /// batches; a first watch (`initializing`) then hears that this was all.
    fn send_sync(
        &self,
        conn: &Connection,
        domain: Domain,
        raw: &str,
        initializing: bool,
        told: &[(String, bool)],
    ) {
        let sync_type = if initializing { INIT } else { DIFF };
        let batches: Vec<&[(String, bool)]> = told.chunks(domain.batch()).collect();
        for (i, batch) in batches.iter().enumerate() {
            let contexts: Vec<Value> = batch
                .iter()
                .map(|(key, came)| json!({ domain.key_field(): key, "changedType": domain.change(*came) }))
                .collect();
            let fields = json!({
                "syncType": sync_type,
                "groupKeyPattern": raw,
                "contexts": contexts,
                "totalBatch": batches.len(),
                "currentBatch": i + 1,
            });
            self.send_fuzzy(conn, domain, domain.sync_type(), fields);
        }
        if initializing {
            let fields = json!({
                "syncType": FINISH_INIT,
                "groupKeyPattern": raw,
                "contexts": [],
                "totalBatch": 0,
                "currentBatch": 0,
            });
            self.send_fuzzy(conn, domain, domain.sync_type(), fields);
        }
    }

    /// Queues server request `kind` with `fields` to `conn`, pending until
    /// acknowledged. Never sent again: a client that missed one learns it at its next
    /// re-watch (Nacos clients re-watch every 3 minutes, with the keys they hold).
    fn send_fuzzy(&self, conn: &Connection, domain: Domain, kind: &str, mut fields: Value) {
        let request_id = self.connections.next_request_id();
        fields["headers"] = json!({});
        fields["requestId"] = json!(request_id);
        fields["module"] = json!(domain.module());
        conn.track(&request_id, Pushed::Fuzzy, 1);
        if conn.send(Payload::new(kind, &fields)) {
            self.app.metrics.grpc_push("sent");
        } else {
            conn.acknowledge(&request_id);
            self.app.metrics.grpc_push("failed");
        }
    }

    /// Visits the present items of `domain` that `pattern` matches until `visit` says
    /// stop: the services with instances, or the stored items, of its namespace.
    fn scan(&self, domain: Domain, pattern: &Pattern, visit: &mut dyn FnMut(Item) -> bool) {
        match domain {
            Domain::Naming => {
                for svc in self.app.registry.services(&pattern.namespace) {
                    let key = &svc.key;
                    if pattern.matches(&key.namespace, &key.group, &key.name)
                        && !svc.view().instances.is_empty()
                        && !visit(Item::of_service(key))
                    {
                        return;
                    }
                }
            }
            Domain::Config => {
                for key in self.app.configs.keys_in(&pattern.namespace) {
                    if pattern.matches(&key.namespace, &key.group, &key.data_id)
                        && !visit(Item::of_config(&key))
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Tells the fuzzy watchers of the services among `keys` (changed, here or on a
    /// peer) that came (their first instance) or went (their last one, or themselves).
    pub(super) fn fuzzy_services_changed(&self, keys: &[ServiceKey]) {
        self.fuzzy_changed(
            Domain::Naming,
            keys.iter().map(|key| {
                let present = |key: &ServiceKey| {
                    self.app
                        .registry
                        .service_by_key(key)
                        .is_some_and(|s| !s.view().instances.is_empty())
                };
                (Item::of_service(key), present(key))
            }),
        );
    }

    /// Tells the fuzzy watchers of the configuration items among `keys` (changed by
    /// an apply) that came (first published) or went (removed).
    pub(super) fn fuzzy_configs_changed(&self, keys: &[ConfigKey]) {
        let configs = &self.app.configs;
        self.fuzzy_changed(
            Domain::Config,
            keys.iter()
                .map(|key| (Item::of_config(key), configs.with(key, |_| ()).is_some())),
        );
    }

    /// Records each changed item and whether it is present now; tells the watchers of
    /// the patterns whose matches changed. Costs nothing while nothing is watched.
    fn fuzzy_changed(&self, domain: Domain, changed: impl Iterator<Item = (Item, bool)>) {
        let mut watches = self.fuzzy.of(domain).lock();
        if watches.is_empty() {
            return;
        }
        for (item, present) in changed {
            let scan =
                |p: &Pattern, visit: &mut dyn FnMut(Item) -> bool| self.scan(domain, p, visit);
            for (raw, changes) in watches.changed(&item, present, scan) {
                if let Some(watched) = watches.get(&raw) {
                    self.notify(domain, watched, &changes);
                }
            }
        }
    }

    /// Tells every watcher of `watched` of `changes`, each what it may read.
    fn notify(&self, domain: Domain, watched: &Watched<Watcher>, changes: &[MatchChange]) {
        for watcher in watched.watchers.values() {
            let Some(conn) = watcher.conn.upgrade() else {
                continue;
            };
            for (item, came) in changes {
                if watcher.may_read(domain, item) {
                    let fields = domain.notify_fields(domain.key(item), *came);
                    self.send_fuzzy(&conn, domain, domain.notify_type(), fields);
                }
            }
        }
    }
}

/// The pattern a request watches, read.
fn read_pattern(request: &WatchRequest) -> Result<Pattern, Error> {
    let raw = request
        .group_key_pattern
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| Error::missing("groupKeyPattern"))?;
    Pattern::parse("groupKeyPattern", raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_as_java_clients_write_it() {
        let body = json!({
            "headers": {}, "requestId": "1", "module": "naming", "namespace": "public",
            "groupKeyPattern": "public>>DEFAULT_GROUP>>*", "receivedGroupKeys": ["public@@DEFAULT_GROUP@@a"],
            "watchType": "WATCH", "initializing": true,
        });
        let request: WatchRequest = serde_json::from_value(body).unwrap();
        assert_eq!(read_pattern(&request).unwrap().namespace, "public");
        assert_eq!(request.initializing, Some(true));
        assert_eq!(request.received_group_keys.unwrap().len(), 1);
        let e = read_pattern(&WatchRequest::default()).unwrap_err();
        assert!(e.message.contains("groupKeyPattern"), "{e}");
    }

    #[test]
    fn changes_are_told_in_each_domain_s_words() {
        let added = Domain::Naming.notify_fields("public@@G@@a".into(), true);
        assert_eq!(added["changedType"], "ADD_SERVICE");
        assert_eq!(added["syncType"], CHANGED);
        let removed = Domain::Config.notify_fields("a+G+public".into(), false);
        assert_eq!(removed["changeType"], "DELETE_CONFIG");
        let added = Domain::Config.notify_fields("a+G+public".into(), true);
        assert_eq!(added["changeType"], "CONFIG_CHANGED");
        assert_eq!(Domain::Config.change(true), "ADD_CONFIG");
    }
}
