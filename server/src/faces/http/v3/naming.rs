//! The v3 admin API for naming (`/nacos/v3/admin/ns/...`, see the table in `super`):
//! services, instances, clusters, health, switches and metrics, as Nacos 3's
//! `ServiceControllerV3`, `InstanceControllerV3`, `ClusterControllerV3`,
//! `HealthControllerV3` and `OperatorControllerV3` answer them and its maintainer
//! client reads them (`ServiceDetailInfo`, `ServiceView`, `SubscriberInfo`,
//! `Instance`, `InstanceMetadataBatchResult`, `MetricsInfo`, Nacos' `Page`).
//!
//! Writes are v1's (`nacos::instance`, `nacos::service`): one set of checks and one
//! route per kind, persistent instances and service settings through Raft. What is
//! v3's own here is the shape of answers and the batch metadata operations.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{answer_not_served, V3};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::service::checker_json;
use crate::faces::http::nacos::{instance, operator, service};
use crate::faces::http::nacos::{page_json, page_of};
use crate::faces::http::nacos_v2_envelope::{failure, success};
use crate::faces::http::params::Params;
use crate::services::push::SubscriberView;
use crate::state::AppState;
use roster_registry::client::is_connection;
use roster_registry::instance::{Addr, Instance, Metadata};
use roster_registry::select::protection_triggered;
use roster_registry::service::{HealthChecker, ServiceKey, ServiceView, METADATA_SELECTOR};
use roster_registry::validate::{check_ip, check_metadata, DEFAULT_CLUSTER};
use roster_registry::wire::{page, Host};
use roster_registry::InstancePatch;

/// Nacos 3's page size when none is given (`PageForm`).
const DEFAULT_PAGE_SIZE: usize = 100;

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::ServiceGet => Handler::call(service_get, req, state),
        V3::ServiceCreate => Handler::call(service_create, req, state),
        V3::ServiceUpdate => Handler::call(service_update, req, state),
        V3::ServiceDelete => Handler::call(service_delete, req, state),
        V3::ServiceList => Handler::call(service_list, req, state),
        V3::ServiceSubscribers => Handler::call(service_subscribers, req, state),
        V3::SelectorTypes => Handler::call(selector_types, req, state),
        V3::InstanceGet => Handler::call(instance_get, req, state),
        V3::InstanceRegister => Handler::call(instance_register, req, state),
        V3::InstanceUpdate => Handler::call(instance_update, req, state),
        V3::InstanceDeregister => Handler::call(instance_deregister, req, state),
        V3::InstanceList => Handler::call(instance_list, req, state),
        V3::InstancePartial => Handler::call(instance_update, req, state),
        V3::MetadataBatchUpdate => Handler::call(metadata_batch_update, req, state),
        V3::MetadataBatchDelete => Handler::call(metadata_batch_delete, req, state),
        V3::NamingCluster => Handler::call(cluster_update, req, state),
        V3::HealthInstance => Handler::call(health_update, req, state),
        V3::HealthCheckers => Handler::call(health_checkers, req, state),
        V3::Switches => Handler::call(switches, req, state),
        V3::SwitchesUpdate => answer_not_served(
            "roster's naming switches describe what it does and are fixed; none changes at run time",
        ),
        V3::NamingMetrics => Handler::call(metrics, req, state),
        V3::NamingLog => answer_not_served(
            "log levels are set at start with RUST_LOG (or --log); roster does not change them at run time",
        ),
        _ => answer_not_served("not the naming area's"),
    }
}

/// `data` on success, the v2 failure (Nacos' code, v1's status) otherwise.
pub(super) fn answer(result: Result<Value, Error>) -> Response {
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// A v1 write's `ok` as `data`, or its failure.
pub(super) fn done(result: Result<&'static str, Error>) -> Response {
    answer(result.map(Value::from))
}

/// Instances as a list of Nacos' `Instance`, each with the health to report.
pub(super) fn host_list<'a>(
    hosts: impl Iterator<Item = (&'a Instance, bool)>,
    grouped: &'a str,
) -> Value {
    let hosts: Vec<Host<'a>> = hosts.map(|(i, h)| Host::new(i, grouped, h)).collect();
    serde_json::to_value(hosts).expect("hosts serialize")
}

/// `pageNo` and `pageSize` (defaults 1 and 100).
fn paging(params: &Params) -> Result<(usize, usize), Error> {
    Ok((
        params.page("pageNo", Some(1))?,
        params.page("pageSize", Some(DEFAULT_PAGE_SIZE))?,
    ))
}

/// A read barrier first when the caller asked for `consistent=true`.
async fn consistent(state: &AppState, params: &Params) -> Result<(), Error> {
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    Ok(())
}

/// The view of service `key`, or 404 with code 21008.
fn service_view(state: &AppState, key: &ServiceKey) -> Result<Arc<ServiceView>, Error> {
    let service = state.registry.service_by_key(key).ok_or_else(|| {
        Error::service_not_found(format!(
            "service not found, namespace: {}, serviceName: {}",
            key.namespace,
            key.grouped()
        ))
    })?;
    Ok(service.view())
}

// ----- services ------------------------------------------------------------------------

/// Whether a service is of one kind: `Some` when it has instances and all are of that
/// kind (roster's services may hold both, Nacos' are one or the other).
fn kind_of(ephemeral: impl Iterator<Item = bool>) -> Option<bool> {
    let mut kind = None;
    for e in ephemeral {
        match kind {
            None => kind = Some(e),
            Some(k) if k != e => return None,
            Some(_) => {}
        }
    }
    kind
}

/// Nacos' `ServiceDetailInfo` of service `key`: its settings and its clusters (those
/// with instances and those with settings) by name, each with its instances when
/// `with_hosts` (disabled and unhealthy ones included, as an admin sees them).
fn service_detail(key: &ServiceKey, view: &ServiceView, with_hosts: bool) -> Value {
    let settings = view.settings_or_default();
    let grouped = key.grouped();
    let mut names: Vec<String> = view.cluster_names().iter().map(|c| c.to_string()).collect();
    names.extend(settings.clusters.keys().cloned());
    names.sort();
    names.dedup();
    let clusters: serde_json::Map<String, Value> = names
        .into_iter()
        .map(|name| {
            let c = settings.clusters.get(&name).cloned().unwrap_or_default();
            let mut cluster = json!({
                "clusterName": name,
                "healthChecker": checker_json(&c.health_checker),
                "healthyCheckPort": c.check_port,
                "useInstancePortForCheck": c.use_instance_port,
                "metadata": c.metadata,
            });
            if with_hosts {
                let hosts = view
                    .instances
                    .values()
                    .filter(|i| *i.cluster == *name)
                    .map(|i| (&**i, i.healthy));
                cluster["hosts"] = host_list(hosts, &grouped);
            }
            (name, cluster)
        })
        .collect();
    json!({
        "namespaceId": &*key.namespace,
        "groupName": &*key.group,
        "serviceName": &*key.name,
        "protectThreshold": settings.protect_threshold,
        "metadata": settings.metadata,
        "selector": {
            "type": settings.selector.kind,
            "expression": settings.selector.expression,
            "contextType": "NONE",
        },
        "ephemeral": kind_of(view.instances.values().map(|i| i.ephemeral)),
        "clusterMap": clusters,
    })
}

/// Nacos' `ServiceView`: counts of a service, for lists.
fn service_row(key: &ServiceKey, view: &ServiceView) -> Value {
    let ip_count = view.instances.len();
    let healthy = view.healthy_count();
    let threshold = view.settings_or_default().protect_threshold;
    json!({
        "name": &*key.name,
        "groupName": &*key.group,
        "clusterCount": view.cluster_names().len(),
        "ipCount": ip_count,
        "healthyInstanceCount": healthy,
        "triggerFlag": protection_triggered(healthy, ip_count, threshold).to_string(),
    })
}

/// `GET /nacos/v3/admin/ns/service`: the service's `ServiceDetailInfo`.
async fn service_get(State(state): State<AppState>, params: Params) -> Response {
    let result = async {
        let key = params.service_key()?;
        consistent(&state, &params).await?;
        let view = service_view(&state, &key)?;
        Ok(service_detail(&key, &view, false))
    };
    answer(result.await)
}

/// `POST /nacos/v3/admin/ns/service`: v1's creation (`ephemeral` is not a service's:
/// roster's services hold either kind).
#[tracing::instrument(skip_all)]
async fn service_create(state: State<AppState>, params: Params) -> Response {
    done(service::create(state, params).await)
}

/// `PUT /nacos/v3/admin/ns/service`: v1's update (the settings given change).
#[tracing::instrument(skip_all)]
async fn service_update(state: State<AppState>, params: Params) -> Response {
    done(service::update(state, params).await)
}

/// `DELETE /nacos/v3/admin/ns/service`: v1's deletion (of a service with no instances).
#[tracing::instrument(skip_all)]
async fn service_delete(state: State<AppState>, params: Params) -> Response {
    done(service::delete(state, params).await)
}

/// `GET /nacos/v3/admin/ns/service/list`: a page of the services of `namespaceId`
/// whose group and name contain `groupNameParam` and `serviceNameParam`, those the
/// caller may read, in key order; `ignoreEmptyService=true` leaves out services without
/// instances. Items are `ServiceView`s, or with `withInstances=true`
/// `ServiceDetailInfo`s with their instances.
async fn service_list(State(state): State<AppState>, caller: Caller, params: Params) -> Response {
    answer((|| {
        let ns = params.namespace()?;
        let (page_no, page_size) = paging(&params)?;
        let group_filter = params.optional("groupNameParam").unwrap_or("");
        let name_filter = params.optional("serviceNameParam").unwrap_or("");
        let with_instances = params.boolean("withInstances")?.unwrap_or(false);
        let ignore_empty = params.boolean("ignoreEmptyService")?.unwrap_or(false);
        let services: Vec<_> = state
            .registry
            .services(&ns)
            .into_iter()
            .filter(|s| s.key.group.contains(group_filter) && s.key.name.contains(name_filter))
            .filter(|s| caller.may_read(&state, &ns, &s.key.group, &s.key.name))
            .map(|s| (s.key.clone(), s.view()))
            .filter(|(_, view)| !ignore_empty || !view.instances.is_empty())
            .collect();
        let total = services.len();
        // Only the page's services are shaped (a detail carries every instance).
        let items: Vec<Value> = page(services, page_no, page_size)
            .iter()
            .map(|(key, view)| match with_instances {
                true => service_detail(key, view, true),
                false => service_row(key, view),
            })
            .collect();
        Ok(page_of(total, page_no, page_size, items))
    })())
}

/// Nacos' `SubscriberInfo` of a subscriber.
fn subscriber_info(s: &SubscriberView) -> Value {
    let (group, name) = s
        .service_name
        .split_once("@@")
        .unwrap_or(("", &s.service_name));
    json!({
        "namespaceId": s.namespace_id,
        "groupName": group,
        "serviceName": name,
        "ip": s.ip,
        "port": s.port,
        "agent": s.agent,
        "appName": s.app,
    })
}

/// `GET /nacos/v3/admin/ns/service/subscribers`: a page of the service's subscribers on
/// this node, UDP and gRPC (`aggregation` is not served: each node knows its own).
async fn service_subscribers(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let key = params.service_key()?;
        let (page_no, page_size) = paging(&params)?;
        let mut all = state.push.subscribers(&key);
        all.extend(state.grpc_subscribers.subscribers(&key));
        let rows: Vec<Value> = all.iter().map(subscriber_info).collect();
        Ok(page_json(rows, page_no, page_size))
    })())
}

/// `GET /nacos/v3/admin/ns/service/selector/types`: Nacos' `none` and `label`, and
/// roster's `metadata` (a label selector over instance metadata).
async fn selector_types() -> Response {
    success(json!(["none", "label", METADATA_SELECTOR]))
}

// ----- instances -----------------------------------------------------------------------

/// `GET /nacos/v3/admin/ns/instance`: the instance at `ip:port` as Nacos' `Instance`;
/// with `clusterName` given, it must be in that cluster.
async fn instance_get(State(state): State<AppState>, params: Params) -> Response {
    let result = async {
        let key = params.service_key()?;
        let ip = check_ip("ip", params.required("ip")?)?;
        let port = params.port("port")?;
        let cluster = params.optional("clusterName");
        consistent(&state, &params).await?;
        let view = service_view(&state, &key)?;
        let grouped = key.grouped();
        let instance = view
            .instances
            .get(&Addr::new(&ip, port))
            .filter(|i| cluster.is_none_or(|c| *i.cluster == *c))
            .ok_or_else(|| {
                Error::instance_not_found(format!(
                    "no instance {ip}:{port} in cluster {} of service {grouped}",
                    cluster.unwrap_or(DEFAULT_CLUSTER)
                ))
            })?;
        Ok(
            serde_json::to_value(Host::new(instance, &grouped, instance.healthy))
                .expect("host serializes"),
        )
    };
    answer(result.await)
}

/// `POST /nacos/v3/admin/ns/instance`: v1's registration (`ephemeral=false`: a
/// persistent instance, through Raft).
#[tracing::instrument(skip_all)]
async fn instance_register(state: State<AppState>, params: Params) -> Response {
    done(instance::register(state, params).await)
}

/// `PUT /nacos/v3/admin/ns/instance` and `PUT .../instance/partial`: v1's update —
/// `weight`, `enabled`, `metadata` (replacing the map), each only when given. Nacos'
/// full update resets what is absent to its default (weight 1, enabled, no metadata);
/// roster changes only what the caller gave, as its v1 update does.
#[tracing::instrument(skip_all)]
async fn instance_update(state: State<AppState>, params: Params) -> Response {
    done(instance::update(state, params).await)
}

/// `DELETE /nacos/v3/admin/ns/instance`: v1's deregistration.
#[tracing::instrument(skip_all)]
async fn instance_deregister(state: State<AppState>, params: Params) -> Response {
    done(instance::deregister(state, params).await)
}

/// `GET /nacos/v3/admin/ns/instance/list`: every instance of the service as an admin
/// sees them (disabled ones too), of the clusters in `clusterName` (comma-separated;
/// all when absent), healthy ones only with `healthyOnly=true`.
async fn instance_list(State(state): State<AppState>, params: Params) -> Response {
    let result = async {
        let key = params.service_key()?;
        let clusters =
            roster_registry::validate::parse_cluster_list(params.get("clusterName").unwrap_or(""))?;
        let healthy_only = params.boolean("healthyOnly")?.unwrap_or(false);
        consistent(&state, &params).await?;
        let view = service_view(&state, &key)?;
        let grouped = key.grouped();
        let hosts = view
            .instances
            .values()
            .filter(|i| clusters.is_empty() || clusters.contains(&&*i.cluster))
            .filter(|i| !healthy_only || i.healthy)
            .map(|i| (&**i, i.healthy));
        Ok(host_list(hosts, &grouped))
    };
    answer(result.await)
}

// ----- batch metadata ------------------------------------------------------------------

/// What a batch does to the metadata of each instance it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Batch {
    /// Adds the keys given, replacing their values.
    Update,
    /// Removes the keys given.
    Delete,
}

/// `current` after `op` with `given`.
fn merged(current: Metadata, given: &Metadata, op: Batch) -> Metadata {
    let mut metadata = current;
    match op {
        Batch::Update => metadata.extend(given.iter().map(|(k, v)| (k.clone(), v.clone()))),
        Batch::Delete => metadata.retain(|k, _| !given.contains_key(k)),
    }
    metadata
}

/// An instance a batch names (a Nacos `Instance` in JSON; other fields are ignored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    ip: String,
    port: u16,
    #[serde(default)]
    cluster_name: Option<String>,
}

/// An instance a batch names, checked: address as instances are kept, and cluster.
#[derive(Debug, PartialEq)]
struct Named {
    ip: String,
    port: u16,
    cluster: String,
}

/// The instances `instances` names (a JSON list; absent or blank: every instance of the
/// service; an empty list: none, where Nacos takes every one). Refused whole, naming
/// the field, when it is not such a list (Nacos ignores it and takes every instance).
fn targets(instances: Option<&str>) -> Result<Option<Vec<Named>>, Error> {
    let Some(raw) = instances else {
        return Ok(None);
    };
    let list: Vec<Target> = serde_json::from_str(raw).map_err(|e| {
        Error::illegal(
            "instances",
            format!("expected a JSON list of {{\"ip\", \"port\", \"clusterName\"}}: {e}."),
        )
    })?;
    list.into_iter()
        .map(|t| {
            Ok(Named {
                ip: check_ip("instances.ip", &t.ip)?.into_owned(),
                port: t.port,
                cluster: t
                    .cluster_name
                    .filter(|c| !c.trim().is_empty())
                    .unwrap_or_else(|| DEFAULT_CLUSTER.to_string()),
            })
        })
        .collect::<Result<Vec<_>, Error>>()
        .map(Some)
}

/// The kind `consistencyType` limits a batch to: `ephemeral`, `persist`, or any when
/// absent.
fn consistency(raw: Option<&str>) -> Result<Option<bool>, Error> {
    match raw {
        None => Ok(None),
        Some("ephemeral") => Ok(Some(true)),
        Some("persist") => Ok(Some(false)),
        Some(other) => Err(Error::illegal(
            "consistencyType",
            format!("'{other}' is neither 'ephemeral' nor 'persist'."),
        )),
    }
}

/// How Nacos names an instance a batch changed: `ip:port:site:cluster:kind`.
fn changed_label(ip: &str, port: u16, cluster: &str, ephemeral: bool) -> String {
    let kind = if ephemeral { "ephemeral" } else { "persist" };
    format!("{ip}:{port}:unknown:{cluster}:{kind}")
}

/// `PUT /nacos/v3/admin/ns/instance/metadata/batch`: adds the `metadata` keys to each
/// instance named.
#[tracing::instrument(skip_all)]
async fn metadata_batch_update(State(state): State<AppState>, params: Params) -> Response {
    answer(metadata_batch(&state, &params, Batch::Update).await)
}

/// `DELETE /nacos/v3/admin/ns/instance/metadata/batch`: removes the `metadata` keys
/// from each instance named.
#[tracing::instrument(skip_all)]
async fn metadata_batch_delete(State(state): State<AppState>, params: Params) -> Response {
    answer(metadata_batch(&state, &params, Batch::Delete).await)
}

/// A batch of metadata changes: the instances of the service named by `instances`
/// (every one when absent) that exist, of the kind `consistencyType` names; each
/// instance's new metadata is checked before any is written, then each is written as
/// an operator's update (pinned over re-registration). Answers Nacos'
/// `InstanceMetadataBatchResult`, `{updated: [...]}`. Each instance is one write: a
/// failure part way leaves the earlier ones done, as Nacos' loop does.
async fn metadata_batch(state: &AppState, params: &Params, op: Batch) -> Result<Value, Error> {
    let key = params.service_key()?;
    let max = state.limits.max_metadata_bytes;
    let given = params
        .metadata("metadata", max)?
        .ok_or_else(|| Error::missing("metadata"))?;
    let kind = consistency(params.optional("consistencyType"))?;
    let targets = targets(params.optional("instances"))?;
    // Persistent instances' metadata is Raft data: merged into as the leader has it,
    // not as this node may lag behind.
    if kind != Some(true) {
        state.store.read_barrier().await?;
    }
    let view = service_view(state, &key)?;
    let chosen: Vec<&Arc<Instance>> = match &targets {
        None => view.instances.values().collect(),
        Some(named) => named
            .iter()
            .filter_map(|n| {
                view.instances
                    .get(&Addr::new(&n.ip, n.port))
                    .filter(|i| *i.cluster == *n.cluster)
            })
            .collect(),
    };
    let mut writes = Vec::new();
    for instance in chosen
        .into_iter()
        .filter(|i| kind.is_none_or(|k| i.ephemeral == k))
    {
        let metadata = merged(instance.metadata.to_map(), &given, op);
        check_metadata("metadata", &metadata, max)?;
        writes.push((instance, metadata));
    }
    let mut updated = Vec::with_capacity(writes.len());
    for (instance, metadata) in writes {
        let patch = InstancePatch {
            weight: None,
            enabled: None,
            metadata: Some(metadata),
        };
        state
            .writes()
            .update(key.clone(), instance.ip(), instance.port, patch)
            .await?;
        updated.push(changed_label(
            instance.ip(),
            instance.port,
            &instance.cluster,
            instance.ephemeral,
        ));
    }
    Ok(json!({ "updated": updated }))
}

// ----- clusters, health ----------------------------------------------------------------

/// `PUT /nacos/v3/admin/ns/cluster`: v1's cluster settings (`checkPort`,
/// `useInstancePort4Check`, `healthChecker`, `metadata`).
#[tracing::instrument(skip_all)]
async fn cluster_update(state: State<AppState>, params: Params) -> Response {
    done(service::put_cluster(state, params).await)
}

/// `PUT /nacos/v3/admin/ns/health/instance`: v1's health of a persistent instance whose
/// cluster is not checked (`healthy`).
#[tracing::instrument(skip_all)]
async fn health_update(state: State<AppState>, params: Params) -> Response {
    done(instance::health(state, params).await)
}

/// The health checkers roster runs, by type, each with its defaults.
fn checkers() -> Value {
    let http = HealthChecker::Http {
        path: String::new(),
        headers: String::new(),
        expected_code: 200,
    };
    json!({
        "TCP": checker_json(&HealthChecker::Tcp),
        "HTTP": checker_json(&http),
        "NONE": checker_json(&HealthChecker::None),
    })
}

/// `GET /nacos/v3/admin/ns/health/checkers`: the checker types a cluster may use.
async fn health_checkers() -> Response {
    success(checkers())
}

// ----- operations ----------------------------------------------------------------------

/// The v1 switches under Nacos 3's `SwitchDomain` names: the push versions are
/// `pushVersionOf...`, and what 3's `SwitchDomain` no longer shows is left out.
fn nacos3_switches(v1: Value) -> Value {
    const RENAMED: [(&str, &str); 5] = [
        ("pushGoVersion", "pushVersionOfGo"),
        ("pushJavaVersion", "pushVersionOfJava"),
        ("pushPythonVersion", "pushVersionOfPython"),
        ("pushCVersion", "pushVersionOfC"),
        ("pushCSharpVersion", "pushVersionOfCsharp"),
    ];
    const DROPPED: [&str; 3] = ["adWeightMap", "limitedUrlMap", "defaultNamespace"];
    let Value::Object(mut fields) = v1 else {
        return v1;
    };
    for (old, new) in RENAMED {
        if let Some(value) = fields.remove(old) {
            fields.insert(new.to_string(), value);
        }
    }
    for name in DROPPED {
        fields.remove(name);
    }
    Value::Object(fields)
}

/// `GET /nacos/v3/admin/ns/ops/switches`: the switches (read-only in roster).
async fn switches(State(state): State<AppState>) -> Response {
    success(nacos3_switches(operator::switch_domain(&state)))
}

/// Client counts as Nacos' metrics report them.
#[derive(Debug, Default, PartialEq)]
struct ClientCounts {
    connections: usize,
    addresses: usize,
    responsible: usize,
}

/// Counts `ids` (clients holding instances): gRPC connections, beat addresses, and
/// those `owns` says this node is responsible for.
fn client_counts<'a>(
    ids: impl Iterator<Item = &'a str>,
    owns: impl Fn(&str) -> bool,
) -> ClientCounts {
    let mut counts = ClientCounts::default();
    for id in ids {
        if is_connection(id) {
            counts.connections += 1;
        } else {
            counts.addresses += 1;
        }
        if owns(id) {
            counts.responsible += 1;
        }
    }
    counts
}

/// `GET /nacos/v3/admin/ns/ops/metrics`: Nacos' `MetricsInfo`, `{status}` only unless
/// `onlyStatus=false`. roster keeps persistent instances in Raft, not as clients of
/// their own: `persistentIpPortClientCount` is 0.
async fn metrics(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        if params.boolean("onlyStatus")?.unwrap_or(true) {
            return Ok(json!({ "status": "UP" }));
        }
        let (services, instances, _) = state.registry.totals();
        let summaries = state.registry.clients().summaries();
        let held = summaries.iter().filter(|s| s.held).map(|s| &*s.id);
        let counts = client_counts(held, |id| state.distro.owns(id));
        Ok(json!({
            "status": "UP",
            "serviceCount": services,
            "instanceCount": instances,
            "subscribeCount": state.push.subscriber_count(),
            "clientCount": counts.connections + counts.addresses,
            "connectionBasedClientCount": counts.connections,
            "ephemeralIpPortClientCount": counts.addresses,
            "persistentIpPortClientCount": 0,
            "responsibleClientCount": counts.responsible,
        }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> Metadata {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_batch_adds_or_removes_only_the_keys_given() {
        let current = map(&[("a", "1"), ("b", "2")]);
        let given = map(&[("b", "20"), ("c", "3")]);
        assert_eq!(
            merged(current.clone(), &given, Batch::Update),
            map(&[("a", "1"), ("b", "20"), ("c", "3")])
        );
        assert_eq!(merged(current, &given, Batch::Delete), map(&[("a", "1")]));
    }

    #[test]
    fn batch_targets_are_checked_and_default_to_the_default_cluster() {
        assert_eq!(targets(None).unwrap(), None);
        let named = targets(Some(
            r#"[{"ip":"127.0.0.1","port":80},{"ip":"0:0:0:0:0:0:0:1","port":81,"clusterName":"C","weight":2}]"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            named,
            [
                Named {
                    ip: "127.0.0.1".into(),
                    port: 80,
                    cluster: DEFAULT_CLUSTER.into()
                },
                Named {
                    ip: "::1".into(),
                    port: 81,
                    cluster: "C".into()
                },
            ]
        );
        for bad in [
            r#"{"ip":"127.0.0.1"}"#,
            r#"[{"ip":"1.2.3","port":1}]"#,
            "[{\"port\":1}]",
            "x",
        ] {
            let e = targets(Some(bad)).unwrap_err();
            assert!(e.message.contains("'instances"), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn consistency_types_and_labels_are_nacos_words() {
        assert_eq!(consistency(None).unwrap(), None);
        assert_eq!(consistency(Some("ephemeral")).unwrap(), Some(true));
        assert_eq!(consistency(Some("persist")).unwrap(), Some(false));
        assert!(consistency(Some("raft"))
            .unwrap_err()
            .message
            .contains("consistencyType"));
        assert_eq!(
            changed_label("127.0.0.1", 80, "DEFAULT", false),
            "127.0.0.1:80:unknown:DEFAULT:persist"
        );
    }

    #[test]
    fn a_service_has_a_kind_only_when_its_instances_agree() {
        assert_eq!(kind_of([].into_iter()), None);
        assert_eq!(kind_of([true, true].into_iter()), Some(true));
        assert_eq!(kind_of([false].into_iter()), Some(false));
        assert_eq!(kind_of([true, false].into_iter()), None);
    }

    #[test]
    fn switches_take_nacos_3_names() {
        let v1 = json!({"pushGoVersion": "0.1.0", "pushCSharpVersion": "0.9.0", "adWeightMap": {}, "defaultNamespace": "public", "checkTimes": 3});
        assert_eq!(
            nacos3_switches(v1),
            json!({"pushVersionOfGo": "0.1.0", "pushVersionOfCsharp": "0.9.0", "checkTimes": 3})
        );
    }

    #[test]
    fn checkers_are_keyed_by_type() {
        let all = checkers();
        for kind in ["TCP", "HTTP", "NONE"] {
            assert_eq!(all[kind]["type"], kind);
        }
        assert_eq!(all["HTTP"]["expectedResponseCode"], 200);
    }

    #[test]
    fn clients_are_counted_by_kind_and_owner() {
        let ids = ["g:1:c1", "10.0.0.1:80", "10.0.0.2:80"];
        let counts = client_counts(ids.into_iter(), |id| id.starts_with("10.0.0.1"));
        assert_eq!(
            counts,
            ClientCounts {
                connections: 1,
                addresses: 2,
                responsible: 1
            }
        );
    }

    #[test]
    fn pages_are_nacos_pages() {
        let p = page_json(vec![1, 2, 3], 2, 2);
        assert_eq!(
            p,
            json!({"totalCount": 3, "pageNumber": 2, "pagesAvailable": 2, "pageItems": [3]})
        );
    }

    #[test]
    fn subscribers_split_their_grouped_name() {
        let s = SubscriberView {
            addr_str: "127.0.0.1:9".into(),
            agent: "a".into(),
            app: "app".into(),
            ip: "127.0.0.1".into(),
            port: 9,
            namespace_id: "public".into(),
            service_name: "G@@svc".into(),
            cluster: String::new(),
            protocol: "udp",
        };
        let v = subscriber_info(&s);
        assert_eq!(
            (v["groupName"].as_str(), v["serviceName"].as_str()),
            (Some("G"), Some("svc"))
        );
        assert_eq!(v["appName"], "app");
    }
}
