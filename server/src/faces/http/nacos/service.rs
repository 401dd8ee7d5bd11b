//! `/nacos/v1/ns/service*` and `/nacos/v1/ns/cluster`: service settings (Raft data),
//! service lists and subscribers.

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::json_of;
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::services::naming::writes::service_not_found as not_found;
use crate::state::AppState;
use roster_registry::selector::LabelSelector;
use roster_registry::service::{
    ClusterSettings, HealthChecker, Selector, ServiceSettings, METADATA_SELECTOR,
};
use roster_registry::validate::{
    check_group, check_health_checker, parse_bool, parse_port, DEFAULT_GROUP,
};
use roster_registry::wire::page;

/// Parses `protectThreshold`: a number up to 1; negative turns protection off.
fn protect_threshold(params: &Params, required: bool) -> Result<f64, Error> {
    let raw = match params.optional("protectThreshold") {
        Some(raw) => raw,
        None if required => return Err(Error::missing("protectThreshold")),
        None => return Ok(0.0),
    };
    let value: f64 = raw
        .parse()
        .map_err(|_| Error::illegal("protectThreshold", format!("'{raw}' is not a number.")))?;
    if !value.is_finite() || value > 1.0 {
        return Err(Error::illegal(
            "protectThreshold",
            "the value should be between 0 and 1 (negative turns protection off).",
        ));
    }
    Ok(value)
}

/// Parses `selector`: `{"type":"none"}`, `{"type":"label","expression":"..."}` (Nacos'
/// CMDB selector, stored but not applied) or `{"type":"metadata","expression":"..."}`
/// (a label selector over instance metadata, applied to queries that give none).
fn selector(params: &Params) -> Result<Selector, Error> {
    let Some(raw) = params.optional("selector") else {
        return Ok(ServiceSettings::default().selector);
    };
    let value: serde_json::Value = serde_json::from_str(raw)
        .map_err(|e| Error::illegal("selector", format!("it is not valid JSON: {e}.")))?;
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("");
    match kind {
        "none" => Ok(ServiceSettings::default().selector),
        "label" | METADATA_SELECTOR => {
            let expression = value
                .get("expression")
                .and_then(|e| e.as_str())
                .unwrap_or("")
                .to_string();
            if kind == METADATA_SELECTOR {
                LabelSelector::parse(&expression)
                    .map_err(|e| Error::illegal("selector", format!("expression {e}.")))?;
            }
            Ok(Selector {
                kind: kind.into(),
                expression,
            })
        }
        _ => Err(Error::bad_request("not match any type of selector!")),
    }
}

fn settings(
    params: &Params,
    state: &AppState,
    threshold_required: bool,
) -> Result<ServiceSettings, Error> {
    Ok(ServiceSettings {
        protect_threshold: protect_threshold(params, threshold_required)?,
        metadata: params
            .metadata("metadata", state.limits.max_metadata_bytes)?
            .unwrap_or_default(),
        selector: selector(params)?,
        clusters: Default::default(),
        lane_key: lane_key(params)?,
    })
}

/// `laneKey`: the metadata key naming an instance's lane (roster extension).
fn lane_key(params: &Params) -> Result<Option<String>, Error> {
    match params.optional("laneKey") {
        None => Ok(None),
        Some(k) if k.len() <= 128 && !k.contains(|c: char| c.is_whitespace() || c == ',') => {
            Ok(Some(k.to_string()))
        }
        Some(k) => Err(Error::illegal(
            "laneKey",
            format!("'{k}' is not a metadata key."),
        )),
    }
}

/// `POST /nacos/v1/ns/service`: store settings for a new service. Unlike Nacos 2.x this
/// does not fix the service's kind: ephemeral and persistent instances may register.
pub async fn create(State(state): State<AppState>, params: Params) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let settings = settings(&params, &state, false)?;
    state.writes().create_service(key, settings).await?;
    Ok("ok")
}

/// `DELETE /nacos/v1/ns/service`: delete a service that has no instances.
pub async fn delete(State(state): State<AppState>, params: Params) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    state.writes().delete_service(key).await?;
    Ok("ok")
}

/// `PUT /nacos/v1/ns/service`: change a service's settings. Only the parameters given
/// change (Nacos resets metadata and selector when they are left out); cluster settings
/// are kept. The settings changed are those the leader had committed when the call
/// came (read barrier), not this node's possibly older copy.
pub async fn update(State(state): State<AppState>, params: Params) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    state
        .writes()
        .update_service(key, |settings| {
            const FIELDS: [&str; 4] = ["protectThreshold", "metadata", "selector", "laneKey"];
            if FIELDS.iter().all(|f| params.optional(f).is_none()) {
                return Err(Error::bad_request(
                    "nothing to change: give protectThreshold, metadata, selector or laneKey.",
                ));
            }
            if params.optional("protectThreshold").is_some() {
                settings.protect_threshold = protect_threshold(&params, true)?;
            }
            if let Some(metadata) = params.metadata("metadata", state.limits.max_metadata_bytes)? {
                settings.metadata = metadata;
            }
            if params.optional("selector").is_some() {
                settings.selector = selector(&params)?;
            }
            if let Some(lane_key) = lane_key(&params)? {
                settings.lane_key = Some(lane_key);
            }
            Ok(())
        })
        .await?;
    Ok("ok")
}

/// `GET /nacos/v1/ns/service/selector/types`: the selector types a service may store —
/// Nacos' `none` and `label`, and roster's `metadata` (a label-selector expression over
/// instance metadata, applied to queries).
pub async fn selector_types() -> Response {
    super::envelope(["none", "label", METADATA_SELECTOR])
}

/// The JSON of a health checker.
pub fn checker_json(checker: &HealthChecker) -> serde_json::Value {
    serde_json::to_value(checker).expect("checker serializes")
}

/// `GET /nacos/v1/ns/service`: a service's settings and its clusters.
pub async fn detail(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    let svc = state
        .registry
        .service_by_key(&key)
        .ok_or_else(|| not_found(&key))?;
    let view = svc.view();
    let settings = view.settings_or_default();
    let clusters: Vec<_> = view
        .cluster_names()
        .iter()
        .map(|name| {
            let c = settings.clusters.get(&**name).cloned().unwrap_or_default();
            json!({ "name": &**name, "healthChecker": checker_json(&c.health_checker), "metadata": c.metadata })
        })
        .collect();
    Ok(json_of(&json!({
        "namespaceId": &*key.namespace,
        "groupName": &*key.group,
        "name": &*key.name,
        "protectThreshold": settings.protect_threshold,
        "metadata": settings.metadata,
        "selector": { "type": settings.selector.kind, "expression": settings.selector.expression, "contextType": "NONE" },
        "laneKey": settings.lane_key.as_deref().unwrap_or(roster_registry::select::DEFAULT_LANE_KEY),
        "clusters": clusters,
    })))
}

/// `GET /nacos/v1/ns/service/list`: one page of service names (without group) of one
/// group, those the caller may read.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    let page_no = params.page("pageNo", None)?;
    let page_size = params.page("pageSize", None)?;
    let ns = params.namespace()?;
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    let group = params.optional("groupName").unwrap_or(DEFAULT_GROUP);
    check_group(group)?;
    let mut names = state.registry.service_names(&ns, group);
    names.retain(|name| caller.may_read(&state, &ns, group, name));
    let count = names.len();
    Ok(json_of(
        &json!({ "count": count, "doms": page(names, page_no, page_size) }),
    ))
}

/// `GET /nacos/v1/ns/service/subscribers`: the subscribers of a service on this node,
/// UDP (v1 clients) and gRPC (2.x clients) alike.
pub async fn subscribers(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params.page("pageSize", Some(1000))?;
    let mut all = state.push.subscribers(&key);
    all.extend(state.grpc_subscribers.subscribers(&key));
    let count = all.len();
    Ok(json_of(
        &json!({ "subscribers": page(all, page_no, page_size), "count": count }),
    ))
}

/// `PUT /nacos/v1/ns/cluster`: health-check settings of one cluster of a service. An
/// HTTP checker's path and headers are checked here (`check_health_checker`), before
/// anything is stored.
pub async fn put_cluster(
    State(state): State<AppState>,
    params: Params,
) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let cluster = params.required("clusterName")?.to_string();
    roster_registry::validate::check_cluster_name(&cluster)?;
    let check_port = parse_port("checkPort", params.required("checkPort")?)?;
    let use_instance_port = parse_bool(
        "useInstancePort4Check",
        params.required("useInstancePort4Check")?,
    )?;
    let checker: HealthChecker =
        serde_json::from_str(params.required("healthChecker")?).map_err(|e| {
            Error::illegal(
                "healthChecker",
                format!("expected {{\"type\":\"TCP\"|\"HTTP\"|\"NONE\", ...}}: {e}."),
            )
        })?;
    // An HTTP checker's path and headers go into the request the leader writes: no
    // control characters, so no injected header lines or second request.
    check_health_checker(&checker)?;
    let metadata = params
        .metadata("metadata", state.limits.max_metadata_bytes)?
        .unwrap_or_default();
    let settings = ClusterSettings {
        health_checker: checker,
        check_port,
        use_instance_port,
        metadata,
    };
    state.writes().put_cluster(key, cluster, settings).await?;
    Ok("ok")
}
