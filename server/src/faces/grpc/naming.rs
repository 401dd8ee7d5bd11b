//! The naming requests over gRPC: the request body as clients send it, the instance it
//! registers (read by the rules every face registers by), who may make it, and its
//! handlers (queries, subscriptions, service lists, instance changes).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::connection::Connection;
use super::kind::{Access, RequestKind};
use super::proto::Payload;
use super::reply::{failure, Answer};
use super::GrpcServer;
use crate::error::Error;
use crate::services::auth::permissions::{Action, Resource};
use crate::services::auth::Identity;
use roster_registry::instance::Metadata;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::service::ServiceKey;
use roster_registry::validate::{
    check_group, check_namespace_id, check_port, check_service_name, parse_cluster_list, Origin,
    DEFAULT_CLUSTER, DEFAULT_GROUP,
};
use roster_registry::wire::page;
use roster_registry::Registration;

/// How long after a subscription its first push goes out (Nacos: 500 ms).
const SUBSCRIBE_PUSH_DELAY: Duration = Duration::from_millis(500);

/// A naming request body, read leniently: every field optional, `null` accepted, unknown
/// keys ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct NamingRequest {
    pub(super) namespace: Option<String>,
    pub(super) service_name: Option<String>,
    pub(super) group_name: Option<String>,
    pub(super) r#type: Option<String>,
    pub(super) instance: Option<WireInstance>,
    pub(super) instances: Option<Vec<WireInstance>>,
    pub(super) cluster: Option<String>,
    pub(super) clusters: Option<String>,
    pub(super) healthy_only: Option<bool>,
    /// The Python client's spelling of `healthyOnly`.
    pub(super) health_only: Option<bool>,
    pub(super) subscribe: Option<bool>,
    pub(super) page_no: Option<u64>,
    pub(super) page_size: Option<u64>,
}

/// An instance as clients send it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct WireInstance {
    pub(super) instance_id: Option<String>,
    pub(super) ip: Option<String>,
    pub(super) port: Option<i64>,
    pub(super) weight: Option<f64>,
    pub(super) healthy: Option<bool>,
    pub(super) enabled: Option<bool>,
    pub(super) ephemeral: Option<bool>,
    pub(super) cluster_name: Option<String>,
    pub(super) metadata: Option<HashMap<String, Value>>,
}

/// Reads a naming request's JSON body; a body that is not one answers `ErrorResponse`
/// 400 with the reason (bytes that are not UTF-8 JSON included).
pub(super) fn parse_request(kind: RequestKind, body: &[u8]) -> Result<NamingRequest, Box<Payload>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new(failure(
            "ErrorResponse",
            400,
            &format!("Invalid request: the body is not a {}: {e}", kind.name()),
        ))
    })
}

/// Reads an instance a client sent (`client`: the connection registering it, if
/// ephemeral) by the rules every face registers by; the address is kept in normal form.
pub(super) fn registration(
    wire: &WireInstance,
    client: Option<&Arc<str>>,
    max_metadata_bytes: usize,
) -> Result<Registration, Error> {
    let ip = wire
        .ip
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| Error::missing("instance.ip"))?;
    let port = wire.port.ok_or_else(|| Error::missing("instance.port"))?;
    let port = check_port("instance.port", port)?;
    let cluster = wire
        .cluster_name
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or(DEFAULT_CLUSTER);
    let metadata: Metadata = wire
        .metadata
        .iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect();
    let mut reg = Registration {
        ip: ip.to_string(),
        port,
        cluster: cluster.to_string(),
        weight: wire.weight.unwrap_or(1.0),
        healthy: wire.healthy.unwrap_or(true),
        enabled: wire.enabled.unwrap_or(true),
        ephemeral: wire.ephemeral.unwrap_or(true),
        metadata,
        instance_id: wire.instance_id.clone().filter(|i| !i.trim().is_empty()),
        client: client.map(|c| c.to_string()),
        owner: None,
    };
    roster_registry::validate::registration(&mut reg, Origin::Grpc, max_metadata_bytes)?;
    Ok(reg)
}

impl GrpcServer {
    /// Whether `identity` may make this naming request, by its permissions as they are
    /// now and what its kind needs ([`RequestKind::access`]). A request that names no
    /// valid service is refused as `naming` would refuse it.
    pub(super) fn authorize(
        &self,
        identity: &Identity,
        kind: RequestKind,
        request: &NamingRequest,
    ) -> Result<bool, Error> {
        if identity.admin {
            return Ok(true);
        }
        let auth = &self.app.auth;
        let action = match kind.access() {
            Access::Namespace => {
                let (namespace, _) = Self::scope(request)?;
                return Ok(auth.allowed(identity, &Resource::Namespace(&namespace), Action::Read));
            }
            Access::Service(action) => action,
            // Not naming requests: never asked here.
            Access::Public | Access::Config(_) | Access::Watch => Action::Write,
        };
        let key = Self::service_key(request)?;
        let service = Resource::Service {
            namespace: &key.namespace,
            group: &key.group,
            name: &key.name,
        };
        Ok(auth.allowed(identity, &service, action))
    }

    /// The namespace and group a request addresses (defaults: public, DEFAULT_GROUP).
    pub(super) fn scope(request: &NamingRequest) -> Result<(String, String), Error> {
        let namespace = request
            .namespace
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(PUBLIC_NAMESPACE);
        check_namespace_id("namespace", namespace)?;
        let group = request
            .group_name
            .as_deref()
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .unwrap_or(DEFAULT_GROUP);
        check_group(group)?;
        Ok((namespace.to_string(), group.to_string()))
    }

    pub(super) fn service_key(request: &NamingRequest) -> Result<ServiceKey, Error> {
        let (namespace, group) = Self::scope(request)?;
        let raw = request
            .service_name
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Error::missing("serviceName"))?;
        // A grouped name (`group@@name`) overrides groupName.
        let (group, name) = match raw.split_once("@@") {
            Some((g, n)) => (g.to_string(), n.to_string()),
            None => (group, raw.to_string()),
        };
        check_group(&group)?;
        check_service_name(&name)?;
        Ok(ServiceKey::new(&namespace, &group, &name))
    }

    pub(super) async fn naming(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        request: NamingRequest,
    ) -> Result<Answer, Error> {
        match kind {
            RequestKind::ServiceQuery | RequestKind::SubscribeService => {
                let key = Self::service_key(&request)?;
                self.read(kind, conn, identity, key, request)
            }
            _ => self
                .change(kind, conn, identity, request)
                .await
                .map(Answer::Fields),
        }
    }

    /// A query or a subscription.
    fn read(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        key: ServiceKey,
        request: NamingRequest,
    ) -> Result<Answer, Error> {
        if kind == RequestKind::ServiceQuery {
            let clusters = request.cluster.clone().unwrap_or_default();
            parse_cluster_list(&clusters)?;
            let healthy_only = request
                .healthy_only
                .or(request.health_only)
                .unwrap_or(false);
            let info = self.service_info(&key, &clusters, healthy_only);
            return Ok(Answer::ServiceInfo {
                subscribed: false,
                info,
            });
        }
        let clusters = request.clusters.clone().unwrap_or_default();
        parse_cluster_list(&clusters)?;
        let info = self.service_info(&key, &clusters, false);
        if request.subscribe.unwrap_or(true) {
            // Kept while its subscriber may read the service (see `run_push`).
            let reader = self.app.auth.reader(identity);
            conn.subscribe(key.clone(), clusters.clone(), reader);
            // Also push it, as Nacos does, a moment later: a push that overtook the
            // reply would make the client discard the reply as stale.
            if let Some(me) = self.me.upgrade() {
                let (conn, key) = (conn.clone(), key.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(SUBSCRIBE_PUSH_DELAY).await;
                    if conn.subscriptions.lock().contains_key(&key) {
                        me.push(&conn, &key, &clusters, 1);
                    }
                });
            }
        } else {
            conn.subscriptions.lock().remove(&key);
        }
        Ok(Answer::ServiceInfo {
            subscribed: true,
            info,
        })
    }

    /// A service list, or a change to instances.
    async fn change(
        &self,
        kind: RequestKind,
        conn: &Arc<Connection>,
        identity: &Identity,
        request: NamingRequest,
    ) -> Result<Value, Error> {
        let registry = &self.app.registry;
        let max_metadata = self.app.limits.max_metadata_bytes;
        if kind == RequestKind::ServiceList {
            // Lists a group; it names no service. Only what the caller may read.
            let (namespace, group) = Self::scope(&request)?;
            let page_no = request.page_no.unwrap_or(1).max(1) as usize;
            let page_size = request.page_size.unwrap_or(10).clamp(1, 10_000) as usize;
            let mut names = registry.service_names(&namespace, &group);
            names.retain(|name| {
                let service = Resource::Service {
                    namespace: &namespace,
                    group: &group,
                    name,
                };
                self.app.auth.allowed(identity, &service, Action::Read)
            });
            let count = names.len();
            let page: Vec<String> = page(names, page_no, page_size);
            return Ok(json!({ "count": count, "serviceNames": page }));
        }
        let key = Self::service_key(&request)?;
        match kind {
            RequestKind::Instance | RequestKind::PersistentInstance => {
                let op = request.r#type.clone().unwrap_or_default();
                let wire = request
                    .instance
                    .as_ref()
                    .ok_or_else(|| Error::missing("instance"))?;
                let persistent =
                    kind == RequestKind::PersistentInstance || wire.ephemeral == Some(false);
                let writes = self.app.writes();
                match (op.as_str(), persistent) {
                    ("registerInstance", false) => {
                        // One instance per service per connection, as in Nacos 2.x.
                        let reg = registration(wire, Some(&conn.client), max_metadata)?;
                        tracing::debug!(connection = %conn.id, service = %key.grouped(), ip = %reg.ip, port = reg.port, "grpc client registers");
                        writes.replace_connection_instances(&conn.client, &key, &[reg])?;
                    }
                    ("deregisterInstance", false) => {
                        tracing::debug!(connection = %conn.id, service = %key.grouped(), "grpc client deregisters");
                        writes.replace_connection_instances(&conn.client, &key, &[])?;
                    }
                    ("registerInstance", true) => {
                        let mut reg = registration(wire, None, max_metadata)?;
                        reg.ephemeral = false;
                        writes.register(key, reg).await?;
                    }
                    ("deregisterInstance", true) => {
                        let reg = registration(wire, None, max_metadata)?;
                        writes.deregister_persistent(key, &reg.ip, reg.port).await?;
                    }
                    _ => return Err(Error::bad_request(format!("Unsupported request type {op}"))),
                }
                self.app.metrics.instance_write(&op);
                Ok(json!({ "type": op }))
            }
            RequestKind::BatchInstance => {
                let op = request.r#type.clone().unwrap_or_default();
                if op != "batchRegisterInstance" {
                    return Err(Error::bad_request(format!("Unsupported request type {op}")));
                }
                let wires = request.instances.as_deref().unwrap_or_default();
                let regs = wires
                    .iter()
                    .map(|w| registration(w, Some(&conn.client), max_metadata))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(r) = regs.iter().find(|r| !r.ephemeral) {
                    return Err(Error::illegal(
                        "instances",
                        format!(
                            "batch registration is for ephemeral instances only ({}:{} is not).",
                            r.ip, r.port
                        ),
                    ));
                }
                // The batch replaces the connection's instances of the service.
                self.app
                    .writes()
                    .replace_connection_instances(&conn.client, &key, &regs)?;
                self.app.metrics.registrations.inc_by(regs.len() as u64);
                Ok(json!({ "type": op }))
            }
            _ => Err(Error::bad_request(format!(
                "Unsupported request {}",
                kind.name()
            ))),
        }
    }
}
