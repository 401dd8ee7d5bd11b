//! `/nacos/v1/ns/catalog/*`: the console's views of services and instances, with counts,
//! including disabled and unhealthy instances.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;

use super::json_of;
use super::service::checker_json;
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::services::naming::origin::Origin;
use crate::state::AppState;
use roster_registry::select::protection_triggered;
use roster_registry::service::{Service, ServiceKey};
use roster_registry::wire::{page, Host};

/// The service `key`, or the console's 404.
fn find(state: &AppState, key: &ServiceKey) -> Result<std::sync::Arc<Service>, Error> {
    state
        .registry
        .service_by_key(key)
        .ok_or_else(|| Error::service_not_found(format!("service {} is not found!", key.grouped())))
}

/// `GET /nacos/v1/ns/catalog/services`: services of a namespace with instance counts,
/// filtered by substrings of name and group, those the caller may read. roster's
/// `unhealthyOnly=true` keeps the services with fewer healthy instances than instances;
/// like `hasIpCount` it filters before paging, so `count` and the pages agree (a console
/// filtering one page on its own would show short pages and a wrong total).
pub async fn services(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    let ns = params.namespace()?;
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params.page("pageSize", Some(10))?;
    let name_filter = params.optional("serviceNameParam").unwrap_or("");
    let group_filter = params.optional("groupNameParam").unwrap_or("");
    let has_ip_count = params.boolean("hasIpCount")?.unwrap_or(false);
    let unhealthy_only = params.boolean("unhealthyOnly")?.unwrap_or(false);
    let rows: Vec<serde_json::Value> = state
        .registry
        .services(&ns)
        .into_iter()
        .filter(|s| s.key.name.contains(name_filter) && s.key.group.contains(group_filter))
        .filter(|s| caller.may_read(&state, &ns, &s.key.group, &s.key.name))
        .filter_map(|s| {
            let view = s.view();
            let ip_count = view.instances.len();
            if has_ip_count && ip_count == 0 {
                return None;
            }
            let healthy = view.healthy_count();
            if unhealthy_only && healthy >= ip_count {
                return None;
            }
            let threshold = view.settings_or_default().protect_threshold;
            let triggered = protection_triggered(healthy, ip_count, threshold);
            Some(json!({
                "name": &*s.key.name,
                "groupName": &*s.key.group,
                "clusterCount": view.cluster_names().len(),
                "ipCount": ip_count,
                "healthyInstanceCount": healthy,
                "protectThreshold": threshold,
                "triggerFlag": triggered.to_string(),
            }))
        })
        .collect();
    let count = rows.len();
    Ok(json_of(
        &json!({ "count": count, "serviceList": page(rows, page_no, page_size) }),
    ))
}

/// `GET /nacos/v1/ns/catalog/service`: one service with its cluster settings.
pub async fn service(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    let grouped = key.grouped();
    let svc = find(&state, &key)?;
    let view = svc.view();
    let settings = view.settings_or_default();
    let mut names: Vec<String> = view.cluster_names().iter().map(|c| c.to_string()).collect();
    names.extend(settings.clusters.keys().cloned());
    names.sort();
    names.dedup();
    let clusters: Vec<_> = names
        .iter()
        .map(|name| {
            let c = settings.clusters.get(name).cloned().unwrap_or_default();
            json!({
                "serviceName": grouped,
                "name": name,
                "healthChecker": checker_json(&c.health_checker),
                "defaultPort": 80,
                "defaultCheckPort": c.check_port,
                "useIPPort4Check": c.use_instance_port,
                "metadata": c.metadata,
            })
        })
        .collect();
    Ok(json_of(&json!({
        "service": {
            "name": &*key.name,
            "groupName": &*key.group,
            "protectThreshold": settings.protect_threshold,
            "selector": { "type": settings.selector.kind, "expression": settings.selector.expression },
            "metadata": settings.metadata,
        },
        "clusters": clusters,
    })))
}

/// One row of the console's instance table: the instance as lists show it, and the
/// face that registered it ([`Origin`]), which roster adds to Nacos' catalog row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    #[serde(flatten)]
    host: Host<'a>,
    /// `consul`, `eureka`, `sync`, `grpc` or `http`.
    registered_by: &'static str,
    /// The sync task that imported it, when `registered_by` is `sync`.
    #[serde(skip_serializing_if = "Option::is_none")]
    registered_by_task: Option<&'a str>,
}

/// `GET /nacos/v1/ns/catalog/instances`: one page of one cluster's instances, disabled
/// and unhealthy ones included. roster's `selector` (label-selector syntax, as on
/// `/instance/list`) keeps the instances whose metadata matches, before paging; unlike a
/// list query it neither drops disabled instances nor falls back to the service's stored
/// selector, so the console can filter and still bring offline instances back. Each row
/// also says which face registered the instance (`registeredBy`, `registeredByTask`).
pub async fn instances(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    let cluster = params.required("clusterName")?;
    let selector = params.selector()?;
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params.page("pageSize", Some(100))?;
    let grouped = key.grouped();
    let svc = find(&state, &key)?;
    let view = svc.view();
    let list: Vec<_> = view
        .instances
        .values()
        .filter(|i| &*i.cluster == cluster)
        .filter(|i| selector.as_ref().is_none_or(|s| s.matches(&i.metadata)))
        .map(|i| {
            let origin = Origin::of(i);
            Row {
                host: Host::new(i, &grouped, i.healthy),
                registered_by: origin.name(),
                registered_by_task: origin.task(),
            }
        })
        .collect();
    if list.is_empty() && !view.cluster_names().iter().any(|c| &**c == cluster) {
        return Err(Error::not_found(format!("cluster {cluster} is not found!")));
    }
    let count = list.len();
    Ok(json_of(
        &json!({ "count": count, "list": page(list, page_no, page_size) }),
    ))
}
