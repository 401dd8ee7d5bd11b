//! Server push over gRPC: a service's instances pushed to its subscribers when they
//! change (sent again until acknowledged), and the connections' upkeep (idle probes,
//! late acknowledgements, resets on the way out).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tonic::Status;

use super::connection::{Connection, Pushed};
use super::proto::Payload;
use super::GrpcServer;
use roster_registry::changes::ChangeSet;
use roster_registry::clock::now_ms;
use roster_registry::service::ServiceKey;
use roster_registry::validate::parse_cluster_list;
use roster_registry::wire::{grpc_service_info, GrpcInfoRequest};

/// A connection silent this long is probed with `ClientDetectionRequest` (Nacos: 20 s).
const IDLE_PROBE_MS: u64 = 20_000;
/// ... and closed when the probe is unanswered this long (Nacos: 5 s).
const PROBE_TIMEOUT_MS: u64 = 5_000;
/// An unacknowledged push is sent again after this long, up to [`PUSH_ATTEMPTS`] times.
const PUSH_ACK_TIMEOUT_MS: u64 = 5_000;
const PUSH_ATTEMPTS: u32 = 3;

impl GrpcServer {
    /// `ServiceInfo` as gRPC clients expect it, serialized: the plain name, the group,
    /// the clusters string as given, and a `lastRefTime` newer than any before.
    pub(super) fn service_info(
        &self,
        key: &ServiceKey,
        clusters_raw: &str,
        healthy_only: bool,
    ) -> Vec<u8> {
        let clusters = parse_cluster_list(clusters_raw).unwrap_or_default();
        let view = self.app.registry.service_by_key(key).map(|s| s.view());
        let grouped = key.grouped();
        grpc_service_info(
            view.as_deref(),
            &GrpcInfoRequest {
                name: &key.name,
                group: &key.group,
                grouped: &grouped,
                clusters_raw,
                clusters: &clusters,
                healthy_only,
                now_ms: self.next_ref_time(),
            },
        )
    }

    /// Pushes the current state of `key` to one subscriber.
    pub(super) fn push(
        &self,
        conn: &Arc<Connection>,
        key: &ServiceKey,
        clusters: &str,
        attempt: u32,
    ) {
        let info = self.service_info(key, clusters, false);
        self.push_info(conn, key, &info, attempt);
    }

    /// Pushes `info`, the serialized state of `key`, to one subscriber.
    pub(super) fn push_info(
        &self,
        conn: &Arc<Connection>,
        key: &ServiceKey,
        info: &[u8],
        attempt: u32,
    ) {
        let request_id = self.connections.next_request_id();
        let mut body = Vec::with_capacity(info.len() + 96);
        body.extend_from_slice(br#"{"headers":{},"requestId":"#);
        serde_json::to_writer(&mut body, &request_id).expect("strings serialize");
        body.extend_from_slice(br#","module":"naming","serviceInfo":"#);
        body.extend_from_slice(info);
        body.push(b'}');
        conn.track(&request_id, Pushed::Service(key.clone()), attempt);
        if conn.send(Payload::from_json("NotifySubscriberRequest", body)) {
            self.app.metrics.grpc_push("sent");
        } else {
            conn.acknowledge(&request_id);
            self.app.metrics.grpc_push("failed");
        }
    }

    /// Pushes changes to subscribers (and tells fuzzy watchers of services come and
    /// gone) until `stopping`; drops the subscriptions of those who may no longer read
    /// them as soon as the auth data changes.
    pub async fn run_push(
        self: Arc<Self>,
        changes: Arc<ChangeSet>,
        mut stopping: watch::Receiver<bool>,
    ) {
        let mut access = self.app.auth.changes();
        loop {
            tokio::select! {
                _ = changes.changed() => {}
                Ok(()) = access.changed() => {
                    self.connections.drop_unreadable();
                    continue;
                }
                _ = stopping.changed() => return,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Raft applies in commit order: a revocation not swept yet may have been
            // applied before these changes, and its subscribers must not hear of them.
            if access_changed(&mut access) {
                self.connections.drop_unreadable();
            }
            let keys = changes.drain();
            // One serialization per service and clusters string, whatever the number
            // of subscribers that want it.
            let mut infos: HashMap<(ServiceKey, String), Vec<u8>> = HashMap::new();
            for conn in self.connections.all() {
                let wanted: Vec<(ServiceKey, String)> = {
                    let subs = conn.subscriptions.lock();
                    keys.iter()
                        .filter_map(|k| subs.get(k).map(|s| (k.clone(), s.clusters.clone())))
                        .collect()
                };
                for (key, clusters) in wanted {
                    let info = infos.entry((key.clone(), clusters)).or_insert_with_key(
                        |(key, clusters)| self.service_info(key, clusters, false),
                    );
                    self.push_info(&conn, &key, info, 1);
                }
            }
            // Services come or gone, for the fuzzy watchers (whatever node made them),
            // after the subscribers: a new pattern's scan may hold their lock a while.
            self.fuzzy_services_changed(&keys);
        }
    }

    /// Re-sends unacknowledged pushes and probes, then drops, silent connections, until
    /// `stopping`; then tells every client to reconnect elsewhere.
    pub async fn run_upkeep(self: Arc<Self>, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => {
                    self.reset_all();
                    return;
                }
            }
            let now = now_ms();
            for conn in self.connections.all() {
                // Sent again while the client still wants it, up to PUSH_ATTEMPTS.
                for p in conn.take_late(now, PUSH_ACK_TIMEOUT_MS) {
                    let attempt = p.attempts + 1;
                    let resent = p.attempts < PUSH_ATTEMPTS
                        && match &p.what {
                            Pushed::Service(key) => {
                                let clusters = conn.subscriptions.lock().get(key).cloned();
                                clusters
                                    .map(|s| self.push(&conn, key, &s.clusters, attempt))
                                    .is_some()
                            }
                            Pushed::Config(key) => self.push_config(&conn, key, attempt),
                            Pushed::Fuzzy => false,
                        };
                    if !resent {
                        self.app.metrics.grpc_push("failed");
                    }
                }
                let probe = conn.detection_sent();
                if probe == 0 && conn.idle_ms(now) >= IDLE_PROBE_MS {
                    let body = json!({ "headers": {}, "requestId": self.connections.next_request_id(), "module": "internal" });
                    conn.send(Payload::new("ClientDetectionRequest", &body));
                    conn.mark_detection(now);
                } else if probe > 0 && now.saturating_sub(probe) > PROBE_TIMEOUT_MS {
                    tracing::info!(connection = %conn.id, "grpc client did not answer the detection probe; closing");
                    conn.close(Status::unavailable(
                        "no answer to the client detection probe",
                    ));
                    self.disconnect(&conn);
                }
            }
        }
    }

    /// Asks every client to reconnect to another node, then ends the streams (clients
    /// that cannot parse `ConnectResetRequest` reconnect when their stream ends).
    pub(super) fn reset_all(&self) {
        for conn in self.connections.all() {
            let body = json!({
                "headers": {},
                "requestId": self.connections.next_request_id(),
                "serverIp": "",
                "serverPort": "",
                "connectionId": conn.id,
                "module": "internal",
            });
            conn.send(Payload::new("ConnectResetRequest", &body));
            conn.close(Status::unavailable(
                "this node is shutting down; connect to another",
            ));
        }
    }
}

/// Whether the auth data changed since `access` last saw it (now marked seen): the push
/// loops then sweep what may no longer be read before they push.
pub(super) fn access_changed(access: &mut watch::Receiver<u64>) -> bool {
    let changed = access.has_changed().unwrap_or(false);
    if changed {
        access.borrow_and_update();
    }
    changed
}
