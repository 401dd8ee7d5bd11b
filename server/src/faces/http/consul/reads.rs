//! The Consul API's reads: of the registry as this node holds it, filtered to the
//! services the caller may read, in Consul's shapes ([`mapping`]); the catalog, health
//! and agent listings block (`?index=&wait=`) until what they answer changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;

use super::filter::Filter;
use super::handlers::services;
use super::mapping::{self, Status};
use super::shapes;
use super::{Call, Op};
use crate::error::Error;
use crate::faces::http::guard::MaybeCaller;
use crate::faces::http::params::Params;
use crate::services::push::events::Change;
use crate::state::AppState;
use roster_registry::instance::Instance;
use roster_registry::service::{Service, ServiceKey, ServiceView};

/// A blocking query's wait when it names none (Consul's).
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The longest wait taken (Consul's).
const MAX_WAIT: Duration = Duration::from_secs(600);

/// What a read answers: its body and the index it is as of.
struct Read {
    body: Value,
    index: u64,
}

/// The index of a service's state: changes with every change of it (its revision
/// within a millisecond).
fn index_of(view: &ServiceView) -> u64 {
    (view.modified_ms << 4) | (view.revision & 15)
}

/// The index of the Consul face's whole catalog: its latest service change, plus its
/// number of services (a service that goes changes it too).
fn catalog_index(services: &[Arc<Service>]) -> u64 {
    let latest = services
        .iter()
        .map(|s| index_of(&s.view()))
        .max()
        .unwrap_or(0);
    latest + services.len() as u64
}

/// What the reads are asked: the filter, tags, `passing`.
struct Query {
    filter: Option<Filter>,
    tags: Vec<String>,
    passing: bool,
}

impl Query {
    fn of(params: &Params) -> Result<Query, Error> {
        let filter = match params.optional("filter") {
            None => None,
            Some(expr) => {
                Some(Filter::parse(expr).map_err(|e| Error::illegal("filter", format!("{e}.")))?)
            }
        };
        let tags = params
            .pairs()
            .filter(|(k, v)| *k == "tag" && !v.is_empty())
            .map(|(_, v)| v.to_string())
            .collect();
        let passing = match params.get("passing") {
            None => false,
            Some(v) => !matches!(v.trim(), "false" | "0"),
        };
        Ok(Query {
            filter,
            tags,
            passing,
        })
    }

    fn keeps(&self, entry: &Value) -> bool {
        self.filter.as_ref().is_none_or(|f| f.matches(entry))
    }

    fn has_tags(&self, instance: &Instance) -> bool {
        if self.tags.is_empty() {
            return true;
        }
        let tags = shapes::tags_of(instance);
        self.tags.iter().all(|t| tags.contains(t))
    }
}

/// The reads, blocking when asked to (`index` given): answered when their index
/// differs from it, or when the wait ends.
pub(super) async fn read(
    State(state): State<AppState>,
    caller: MaybeCaller,
    params: Params,
    call: Call,
) -> Result<Response, Error> {
    let datacenter = &state.consul.datacenter;
    if let Some(dc) = params.optional("dc") {
        if dc != datacenter {
            return Err(Error::illegal(
                "dc",
                format!("roster serves one datacenter, {datacenter:?}, not {dc:?}."),
            ));
        }
    }
    let query = Query::of(&params)?;
    let index = match params.optional("index") {
        None => None,
        Some(i) => Some(
            i.parse::<u64>()
                .map_err(|_| Error::illegal("index", format!("'{i}' is not an index.")))?,
        ),
    };
    let wait = match params.optional("wait") {
        None => DEFAULT_WAIT,
        Some(w) => Duration::from_millis(mapping::duration_ms(&Value::from(w), "wait")?),
    }
    .min(MAX_WAIT);
    if params.consistent()? || params.get("consistent").is_some() {
        state.store.read_barrier().await?;
    }
    let answer = || answer(&state, &caller, &query, &call);
    let Some(seen) = index.filter(|_| blocks(call.op)) else {
        return Ok(respond(answer()?));
    };
    // Subscribed before the first answer: no change between them is missed.
    let mut changes = state.events.subscribe();
    let first = answer()?;
    if first.index.max(1) != seen.max(1) {
        return Ok(respond(first));
    }
    let Ok(_permit) = state.consul.blocking.clone().try_acquire_owned() else {
        return Err(Error::too_many_requests(
            "too many blocking queries wait on this node; retry",
            1,
        ));
    };
    // Consul adds up to a sixteenth of the wait, so that clients spread out.
    let jitter = wait.as_millis() as u64 / 16;
    let jitter = Duration::from_millis(if jitter == 0 { 0 } else { rand_below(jitter) });
    let deadline = tokio::time::Instant::now() + wait + jitter;
    let mut closing = state.events.closing();
    let scope = scope_of(&call);
    loop {
        tokio::select! {
            received = changes.recv() => match received {
                Ok(change) if !touches(&state, &change, scope) => continue,
                Ok(_) | Err(RecvError::Lagged(_)) => {
                    let now = answer()?;
                    if now.index.max(1) != seen.max(1) {
                        return Ok(respond(now));
                    }
                }
                Err(RecvError::Closed) => return Ok(respond(answer()?)),
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(respond(answer()?)),
            _ = closing.wait_for(|c| *c) => return Ok(respond(answer()?)),
        }
    }
}

/// A number below `n` (> 0), from the clock: jitter needs no better randomness.
fn rand_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    nanos % n
}

/// Whether the read blocks when given an index.
fn blocks(op: Op) -> bool {
    matches!(
        op,
        Op::CatalogServices
            | Op::CatalogService
            | Op::CatalogNodes
            | Op::CatalogNode
            | Op::HealthService
            | Op::HealthChecks
            | Op::HealthNode
            | Op::HealthState
            | Op::AgentServices
            | Op::AgentChecks
    )
}

/// Which changes a blocking read waits for: of one service, or of any of the face's.
fn scope_of(call: &Call) -> Option<&str> {
    match call.op {
        Op::CatalogService | Op::HealthService | Op::HealthChecks => Some(&call.name),
        _ => None,
    }
}

/// Whether `change` may change a read of `scope`'s answer.
fn touches(state: &AppState, change: &Change, scope: Option<&str>) -> bool {
    match change {
        Change::Catalog(_) => true,
        Change::Service(key) => {
            let place = &state.consul;
            *key.namespace == *place.namespace
                && *key.group == *place.group
                && scope.is_none_or(|name| *key.name == *name)
        }
    }
}

/// A read's answer: JSON with Consul's headers.
fn respond(read: Read) -> Response {
    let mut response = crate::faces::http::nacos::json_of(&read.body);
    let headers = response.headers_mut();
    headers.insert("X-Consul-Index", HeaderValue::from(read.index.max(1)));
    headers.insert("X-Consul-KnownLeader", HeaderValue::from_static("true"));
    headers.insert("X-Consul-LastContact", HeaderValue::from_static("0"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The readable services of the face with instances, each with its view.
fn readable(
    state: &AppState,
    caller: &MaybeCaller,
    all: &[Arc<Service>],
    only: Option<&str>,
) -> Vec<(Arc<str>, Arc<ServiceView>)> {
    let place = &state.consul;
    all.iter()
        .filter(|s| only.is_none_or(|o| *s.key.name == *o))
        .filter(|s| caller.may_read(state, &place.namespace, &place.group, &s.key.name))
        .map(|s| (s.key.name.clone(), s.view()))
        .filter(|(_, v)| !v.instances.is_empty())
        .collect()
}

/// The answer to a read, as this node holds the registry now.
fn answer(
    state: &AppState,
    caller: &MaybeCaller,
    query: &Query,
    call: &Call,
) -> Result<Read, Error> {
    let place = &state.consul;
    let dc = place.datacenter.as_str();
    // The face's services are listed, and the catalog's index computed, only for the
    // reads that need them: a one-service read looks its service up by key.
    let listed = std::cell::OnceCell::new();
    let all = || listed.get_or_init(|| services(state));
    let indexed = std::cell::OnceCell::new();
    let catalog = || *indexed.get_or_init(|| catalog_index(all()));
    let held = |name: &str| {
        let key = ServiceKey::new(&place.namespace, &place.group, name);
        state.registry.service_by_key(&key)
    };
    // One service's reads are as of that service, or of the catalog when it is not held.
    let service_index = |name: &str| held(name).map_or_else(catalog, |s| index_of(&s.view()));
    // A service the caller may not read is empty to it, as Consul's ACLs answer.
    let one = |name: &str| match held(name) {
        Some(svc) => readable(state, caller, std::slice::from_ref(&svc), None),
        None => Vec::new(),
    };
    let (body, index) = match call.op {
        Op::AgentSelf => (agent_self(state), catalog()),
        Op::Leader | Op::Peers => (status(state, call.op), catalog()),
        Op::Datacenters => (json!([dc]), catalog()),
        Op::AgentServices => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, all(), None) {
                for i in view.instances.values() {
                    let entry = shapes::agent_service(i, &name, dc, index_of(&view));
                    if query.keeps(&entry) {
                        out.insert(shapes::id_of(i, &name), entry);
                    }
                }
            }
            (Value::Object(out), catalog())
        }
        Op::AgentService => {
            let found =
                readable(state, caller, all(), None)
                    .into_iter()
                    .find_map(|(name, view)| {
                        let i = view
                            .instances
                            .values()
                            .find(|i| shapes::id_of(i, &name) == call.name)?;
                        Some(shapes::agent_service(i, &name, dc, index_of(&view)))
                    });
            let found = found
                .ok_or_else(|| Error::not_found(format!("unknown service ID: {}", call.name)))?;
            (found, catalog())
        }
        Op::AgentChecks => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, all(), None) {
                for i in view.instances.values() {
                    for check in shapes::service_checks(i, &name, index_of(&view)) {
                        if query.keeps(&check) {
                            let id = check["CheckID"].as_str().unwrap_or_default().to_string();
                            out.insert(id, check);
                        }
                    }
                }
            }
            (Value::Object(out), catalog())
        }
        Op::CatalogServices => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, all(), None) {
                let tags: BTreeSet<String> = view
                    .instances
                    .values()
                    .flat_map(|i| shapes::tags_of(i))
                    .collect();
                out.insert(name.to_string(), json!(tags));
            }
            (Value::Object(out), catalog())
        }
        Op::CatalogService => {
            let mut out = Vec::new();
            for (name, view) in one(&call.name) {
                for i in view.instances.values().filter(|i| query.has_tags(i)) {
                    let entry = shapes::catalog_entry(i, &name, dc, index_of(&view));
                    if query.keeps(&entry) {
                        out.push(entry);
                    }
                }
            }
            (Value::Array(out), service_index(&call.name))
        }
        Op::HealthService => {
            let mut out = Vec::new();
            for (name, view) in one(&call.name) {
                for i in view.instances.values().filter(|i| query.has_tags(i)) {
                    let entry = shapes::health_entry(i, &name, dc, index_of(&view));
                    let checks = entry["Checks"].as_array().map_or(&[][..], Vec::as_slice);
                    if query.passing && shapes::aggregated(checks) != Status::Passing {
                        continue;
                    }
                    if query.keeps(&entry) {
                        out.push(entry);
                    }
                }
            }
            (Value::Array(out), service_index(&call.name))
        }
        Op::HealthChecks => {
            let mut out = Vec::new();
            for (name, view) in one(&call.name) {
                for i in view.instances.values() {
                    for check in shapes::service_checks(i, &name, index_of(&view)) {
                        if query.keeps(&check) {
                            out.push(check);
                        }
                    }
                }
            }
            (Value::Array(out), service_index(&call.name))
        }
        // A node's checks: `serfHealth` and its instances' (404-free: none is `[]`).
        Op::HealthNode | Op::HealthState => {
            let wanted = match call.op {
                Op::HealthState => match call.name.as_str() {
                    "any" => None,
                    s => Some(Status::parse(s).ok_or_else(|| {
                        Error::illegal(
                            "state",
                            format!("'{s}' is not any, passing, warning or critical."),
                        )
                    })?),
                },
                _ => None,
            };
            let on_node = |i: &Instance| call.op != Op::HealthNode || i.ip() == call.name;
            let mut out = Vec::new();
            let mut nodes = BTreeSet::new();
            for (name, view) in readable(state, caller, all(), None) {
                for i in view.instances.values().filter(|i| on_node(i)) {
                    nodes.insert(i.ip().to_string());
                    out.extend(shapes::service_checks(i, &name, index_of(&view)));
                }
            }
            // Every node passes its own check (a roster node answers for it).
            out.extend(nodes.iter().map(|n| shapes::serf_check(n, catalog())));
            out.retain(|c| wanted.is_none_or(|w| c["Status"] == w.as_str()) && query.keeps(c));
            (Value::Array(out), catalog())
        }
        Op::CatalogNodes => {
            let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
            for (_, view) in readable(state, caller, all(), None) {
                for i in view.instances.values() {
                    let ip = i.ip();
                    if !nodes.contains_key(ip) {
                        nodes.insert(ip.to_string(), shapes::node_json(ip, dc, catalog()));
                    }
                }
            }
            let out: Vec<Value> = nodes.into_values().filter(|n| query.keeps(n)).collect();
            (Value::Array(out), catalog())
        }
        Op::CatalogNode => {
            let mut services = Map::new();
            for (name, view) in readable(state, caller, all(), None) {
                for i in view.instances.values().filter(|i| i.ip() == call.name) {
                    let entry = shapes::agent_service(i, &name, dc, index_of(&view));
                    services.insert(shapes::id_of(i, &name), entry);
                }
            }
            let body = if services.is_empty() {
                Value::Null
            } else {
                json!({
                    "Node": shapes::node_json(&call.name, dc, catalog()),
                    "Services": services,
                })
            };
            (body, catalog())
        }
        Op::Register
        | Op::Deregister
        | Op::Maintenance
        | Op::Pass
        | Op::Warn
        | Op::Fail
        | Op::Update => unreachable!("writes are served apart"),
    };
    Ok(Read { body, index })
}

/// `/v1/agent/self`: what Consul's clients read of the agent (Prometheus its
/// datacenter).
fn agent_self(state: &AppState) -> Value {
    let view = state.cluster_view();
    let me = view.members.iter().find(|m| m.id == view.node_id);
    let addr = me.and_then(|m| m.http.clone()).unwrap_or_default();
    let (host, port) = addr.rsplit_once(':').unwrap_or((&addr, "0"));
    let name = format!("roster-{}", view.node_id);
    json!({
        "Config": {
            "Datacenter": state.consul.datacenter,
            "NodeName": name,
            "NodeID": "",
            "Server": true,
            "Version": env!("CARGO_PKG_VERSION"),
            "Revision": "roster",
        },
        "Member": {
            "Name": name,
            "Addr": host,
            "Port": port.parse::<u16>().unwrap_or(0),
            "Tags": {"dc": state.consul.datacenter, "role": "roster"},
            "Status": 1,
        },
        "Meta": {},
    })
}

/// `/v1/status/leader` (the Raft leader's HTTP address, `""` while there is none) and
/// `/v1/status/peers` (every member's).
fn status(state: &AppState, op: Op) -> Value {
    let view = state.cluster_view();
    let http = |id| {
        view.members
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.http.clone())
            .unwrap_or_default()
    };
    match op {
        Op::Leader => Value::from(view.leader.map(http).unwrap_or_default()),
        _ => view.members.iter().filter_map(|m| m.http.clone()).collect(),
    }
}
