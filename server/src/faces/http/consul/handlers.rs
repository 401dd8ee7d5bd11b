//! The Consul API's handlers. Writes go through `Writes` (a TTL-checked service as an
//! ephemeral address client, any other as a persistent instance through Raft) and
//! answer once this node reads what they wrote; reads are of the registry, filtered
//! to the services the caller may read, and block (`?index=&wait=`) until what they
//! answer changes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;

use super::filter::Filter;
use super::mapping::{self, Kind, Status};
use super::{Call, Op};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::{forbidden, Caller};
use crate::faces::http::params::Params;
use crate::services::naming::writes::{BeatOutcome, Stated};
use crate::services::push::events::Change;
use crate::state::AppState;
use roster_registry::instance::{Instance, Metadata};
use roster_registry::service::{Service, ServiceKey, ServiceView};
use roster_registry::validate::{self, check_metadata, Origin};
use roster_registry::{InstancePatch, Registration};

/// A blocking query's wait when it names none (Consul's).
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The longest wait taken (Consul's).
const MAX_WAIT: Duration = Duration::from_secs(600);
/// How long a write waits to read itself here (a forwarded ephemeral write is
/// replicated back): past it, the write is done all the same and answered.
const SETTLE: Duration = Duration::from_secs(2);

impl Call {
    /// Its handler, called with the request (its parameters and caller in its
    /// extensions).
    pub fn serve(self, req: Request, state: AppState) -> Answer {
        let peer = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        match self.op {
            Op::Register => {
                let register =
                    move |s: State<AppState>, c: Caller, body: Bytes| register(s, c, peer, body);
                Handler::call(register, req, state)
            }
            Op::Deregister => Handler::call(
                move |s: State<AppState>, c: Caller| deregister(s, c, self),
                req,
                state,
            ),
            Op::Maintenance => {
                let maintain =
                    move |s: State<AppState>, c: Caller, p: Params| maintenance(s, c, p, self);
                Handler::call(maintain, req, state)
            }
            Op::Pass | Op::Warn | Op::Fail | Op::Update => {
                let report = move |s: State<AppState>, c: Caller, p: Params, body: Bytes| {
                    report(s, c, p, body, self)
                };
                Handler::call(report, req, state)
            }
            _ => {
                let read = move |s: State<AppState>, c: Caller, p: Params| read(s, c, p, self);
                Handler::call(read, req, state)
            }
        }
    }
}

/// The Consul face's services: those of its namespace and group, in name order.
fn services(state: &AppState) -> Vec<Arc<Service>> {
    let place = &state.consul;
    let mut all = state.registry.services(&place.namespace);
    all.retain(|s| *s.key.group == *place.group);
    all
}

/// The instance a Consul client registered with id `id`, and its service.
fn registered_as(state: &AppState, id: &str) -> Option<(ServiceKey, Arc<Instance>)> {
    services(state).into_iter().find_map(|svc| {
        let view = svc.view();
        let found = view
            .instances
            .values()
            .find(|i| i.metadata.get(mapping::ID) == Some(id))
            .cloned();
        found.map(|i| (ServiceKey::clone(&svc.key), i))
    })
}

/// The instance a Consul client registered whose check is `check`.
fn checked_by(state: &AppState, check: &str) -> Option<(ServiceKey, Arc<Instance>)> {
    // A check's default id names its service's: looked up by it first.
    if let Some(found) = check
        .strip_prefix("service:")
        .and_then(|id| registered_as(state, id.rsplit_once(':').map_or(id, |(id, _)| id)))
        .filter(|(_, i)| i.metadata.get(mapping::CHECK_ID) == Some(check))
    {
        return Some(found);
    }
    services(state).into_iter().find_map(|svc| {
        let view = svc.view();
        let found = view
            .instances
            .values()
            .find(|i| {
                i.metadata.contains_key(mapping::ID)
                    && i.metadata.get(mapping::CHECK_ID) == Some(check)
            })
            .cloned();
        found.map(|i| (ServiceKey::clone(&svc.key), i))
    })
}

/// 403 unless the caller may write the service `key`.
fn may_write(state: &AppState, caller: &Caller, key: &ServiceKey) -> Result<(), Error> {
    if caller.may_write(state, &key.namespace, &key.group, &key.name) {
        Ok(())
    } else {
        Err(forbidden())
    }
}

fn stated(ephemeral: bool) -> Stated {
    if ephemeral {
        Stated::Ephemeral
    } else {
        Stated::Persistent
    }
}

/// Waits (at most [`SETTLE`]) until this node's copy of service `key` passes `done`
/// (given `None` while the service is not held): a client that reads after its write,
/// through the same node, reads it.
async fn settle(state: &AppState, key: &ServiceKey, done: impl Fn(Option<&ServiceView>) -> bool) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let view = state.registry.service_by_key(key).map(|s| s.view());
        if done(view.as_deref()) || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether `view` holds an instance at `ip:port` with exactly `metadata`.
fn holds(view: Option<&ServiceView>, ip: &str, port: u16, metadata: &Metadata) -> bool {
    view.is_some_and(|v| {
        v.instances
            .values()
            .any(|i| i.ip() == ip && i.port == port && same_metadata(i, metadata))
    })
}

/// 200 with an empty body, Consul's answer to a write.
fn ok() -> Response {
    StatusCode::OK.into_response()
}

/// `PUT /v1/agent/service/register`: registers (or registers again) the service in the
/// body; its id held at another address, in another service or of another kind goes
/// first.
#[tracing::instrument(skip_all)]
async fn register(
    State(state): State<AppState>,
    caller: Caller,
    peer: Option<IpAddr>,
    body: Bytes,
) -> Result<Response, Error> {
    let peer = peer.map(|ip| ip.to_string());
    let mapping::Registered {
        name,
        id,
        registration: mut reg,
        ..
    } = mapping::registered(&body, peer.as_deref())?;
    let place = &state.consul;
    let key = ServiceKey::new(&place.namespace, &place.group, &name);
    may_write(&state, &caller, &key)?;
    validate::registration(&mut reg, Origin::Http, state.limits.max_metadata_bytes)?;
    let writes = state.writes();
    if let Some((old_key, old)) = registered_as(&state, &id) {
        let moved = old_key != key
            || old.ip() != reg.ip
            || old.port != reg.port
            || old.ephemeral != reg.ephemeral;
        if moved {
            may_write(&state, &caller, &old_key)?;
            writes
                .deregister(old_key, old.ip(), old.port, stated(old.ephemeral))
                .await?;
        }
    }
    let (ip, port, want) = (reg.ip.clone(), reg.port, reg.metadata.clone());
    writes.register(key.clone(), reg).await?;
    state.metrics.registrations.inc();
    settle(&state, &key, |v| holds(v, &ip, port, &want)).await;
    Ok(ok())
}

/// Whether `instance` holds exactly `want`.
fn same_metadata(instance: &Instance, want: &Metadata) -> bool {
    instance.metadata.len() == want.len()
        && want
            .iter()
            .all(|(k, v)| instance.metadata.get(k) == Some(v.as_str()))
}

/// `PUT /v1/agent/service/deregister/{id}`: 404 for an id no Consul client registered.
#[tracing::instrument(skip_all)]
async fn deregister(
    State(state): State<AppState>,
    caller: Caller,
    call: Call,
) -> Result<Response, Error> {
    let (key, instance) = registered_as(&state, &call.name)
        .ok_or_else(|| Error::not_found(format!("Unknown service ID {:?}", call.name)))?;
    may_write(&state, &caller, &key)?;
    let (ip, port) = (instance.ip().to_string(), instance.port);
    state
        .writes()
        .deregister(key.clone(), &ip, port, stated(instance.ephemeral))
        .await?;
    state.metrics.deregistrations.inc();
    let gone = |v: Option<&ServiceView>| {
        v.is_none_or(|v| {
            !v.instances
                .values()
                .any(|i| i.metadata.get(mapping::ID) == Some(call.name.as_str()))
        })
    };
    settle(&state, &key, gone).await;
    Ok(ok())
}

/// Rewrites the Consul-registered `instance` of `key` with `metadata`: an ephemeral
/// one is registered again (its beats go on), a persistent one updated through Raft.
/// `enabled` follows the metadata (maintenance, a critical TTL check).
async fn rewrite(
    state: &AppState,
    key: ServiceKey,
    instance: &Instance,
    metadata: Metadata,
) -> Result<(), Error> {
    let enabled = mapping::enabled_for(&metadata);
    let writes = state.writes();
    let max = state.limits.max_metadata_bytes;
    if instance.ephemeral {
        let mut reg = Registration {
            ip: instance.ip().to_string(),
            port: instance.port,
            cluster: instance.cluster.to_string(),
            weight: instance.weight,
            healthy: true,
            enabled,
            ephemeral: true,
            metadata: metadata.clone(),
            instance_id: instance.instance_id().map(|id| id.to_string()),
            client: None,
            owner: None,
        };
        validate::registration(&mut reg, Origin::Http, max)?;
        writes.register(key.clone(), reg).await?;
    } else {
        check_metadata("metadata", &metadata, max)?;
        let patch = InstancePatch {
            weight: None,
            enabled: Some(enabled),
            metadata: Some(metadata.clone()),
        };
        writes
            .update(key.clone(), instance.ip(), instance.port, patch)
            .await?;
    }
    let (ip, port) = (instance.ip().to_string(), instance.port);
    settle(state, &key, |v| holds(v, &ip, port, &metadata)).await;
    Ok(())
}

/// `PUT /v1/agent/service/maintenance/{id}?enable=&reason=`: a service in maintenance
/// is disabled (out of consumers' lists) and shown with a critical maintenance check.
#[tracing::instrument(skip_all)]
async fn maintenance(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
    call: Call,
) -> Result<Response, Error> {
    let enable = params
        .boolean("enable")?
        .ok_or_else(|| Error::missing("enable"))?;
    let (key, instance) = registered_as(&state, &call.name)
        .ok_or_else(|| Error::not_found(format!("Unknown service ID {:?}", call.name)))?;
    may_write(&state, &caller, &key)?;
    let mut metadata = instance.metadata.to_map();
    if enable {
        let reason = params.get("reason").unwrap_or("").chars().take(512);
        metadata.insert(mapping::MAINTENANCE.into(), reason.collect());
    } else {
        metadata.remove(mapping::MAINTENANCE);
    }
    rewrite(&state, key, &instance, metadata).await?;
    Ok(ok())
}

/// `PUT /v1/agent/check/{pass,warn,fail}/{check}?note=` and `PUT
/// /v1/agent/check/update/{check}` (`{"Status","Output"}`): a TTL check's report. A
/// pass that changes nothing is a beat; any other report is written.
async fn report(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
    body: Bytes,
    call: Call,
) -> Result<Response, Error> {
    let (status, output) = match call.op {
        Op::Update => {
            let document: Value = serde_json::from_slice(&body)
                .map_err(|e| Error::illegal("body", format!("Request decode failed: {e}.")))?;
            let Value::Object(document) = document else {
                return Err(Error::illegal("body", "it should be a JSON object."));
            };
            let status = match mapping::field(&document, "Status").and_then(Value::as_str) {
                None => Status::Passing,
                Some(s) => Status::parse(s).ok_or_else(|| {
                    Error::illegal(
                        "Status",
                        format!("'{s}' is not passing, warning or critical."),
                    )
                })?,
            };
            let output = mapping::field(&document, "Output")
                .and_then(Value::as_str)
                .unwrap_or("");
            (status, output.to_string())
        }
        op => {
            let status = match op {
                Op::Pass => Status::Passing,
                Op::Warn => Status::Warning,
                _ => Status::Critical,
            };
            (status, params.get("note").unwrap_or("").to_string())
        }
    };
    let output: String = output.chars().take(4096).collect();
    let (key, instance) = checked_by(&state, &call.name)
        .ok_or_else(|| Error::not_found(format!("Unknown check ID {:?}", call.name)))?;
    may_write(&state, &caller, &key)?;
    if mapping::Kind::of(&instance.metadata) != Some(Kind::Ttl) {
        return Err(Error::illegal(
            "check",
            format!("{:?} is not a TTL check: roster runs it.", call.name),
        ));
    }
    state.metrics.beats.inc();
    let held = instance
        .metadata
        .get(mapping::STATUS)
        .and_then(Status::parse);
    let held_output = instance.metadata.get(mapping::OUTPUT).unwrap_or("");
    if held == Some(status) && held_output == output {
        // The common case: the check passes as it did. A beat, at the owner.
        let (ip, port) = (instance.ip(), instance.port);
        let writes = state.writes();
        if writes
            .beat_here(&key.namespace, &key.grouped(), ip, port)
            .is_some()
        {
            return Ok(ok());
        }
        return match writes.beat(key.clone(), ip, port, None).await? {
            BeatOutcome::Known(_) => Ok(ok()),
            BeatOutcome::Unknown => Err(Error::not_found(format!(
                "Unknown check ID {:?}",
                call.name
            ))),
        };
    }
    let mut metadata = instance.metadata.to_map();
    metadata.insert(mapping::STATUS.into(), status.as_str().into());
    if output.is_empty() {
        metadata.remove(mapping::OUTPUT);
    } else {
        metadata.insert(mapping::OUTPUT.into(), output);
    }
    rewrite(&state, key, &instance, metadata).await?;
    Ok(ok())
}

// ----- reads --------------------------------------------------------------------------

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
        let tags = mapping::tags_of(instance);
        self.tags.iter().all(|t| tags.contains(t))
    }
}

/// The reads, blocking when asked to (`index` given): answered when their index
/// differs from it, or when the wait ends.
async fn read(
    State(state): State<AppState>,
    caller: Caller,
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
    caller: &Caller,
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
fn answer(state: &AppState, caller: &Caller, query: &Query, call: &Call) -> Result<Read, Error> {
    let place = &state.consul;
    let dc = place.datacenter.as_str();
    let all = services(state);
    let catalog = catalog_index(&all);
    // One service's reads are as of that service, or of the catalog when it is not held.
    let service_index = |name: &str| {
        all.iter()
            .find(|s| *s.key.name == *name)
            .map_or(catalog, |s| index_of(&s.view()))
    };
    // A service the caller may not read is empty to it, as Consul's ACLs answer.
    let one = |name: &str| readable(state, caller, &all, Some(name));
    let (body, index) = match call.op {
        Op::AgentSelf => (agent_self(state), catalog),
        Op::Leader | Op::Peers => (status(state, call.op), catalog),
        Op::Datacenters => (json!([dc]), catalog),
        Op::AgentServices => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, &all, None) {
                for i in view.instances.values() {
                    let entry = mapping::agent_service(i, &name, dc, index_of(&view));
                    if query.keeps(&entry) {
                        out.insert(mapping::id_of(i, &name), entry);
                    }
                }
            }
            (Value::Object(out), catalog)
        }
        Op::AgentService => {
            let found = readable(state, caller, &all, None)
                .into_iter()
                .find_map(|(name, view)| {
                    let i = view
                        .instances
                        .values()
                        .find(|i| mapping::id_of(i, &name) == call.name)?;
                    Some(mapping::agent_service(i, &name, dc, index_of(&view)))
                });
            let found = found
                .ok_or_else(|| Error::not_found(format!("unknown service ID: {}", call.name)))?;
            (found, catalog)
        }
        Op::AgentChecks => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, &all, None) {
                for i in view.instances.values() {
                    for check in mapping::service_checks(i, &name, index_of(&view)) {
                        if query.keeps(&check) {
                            let id = check["CheckID"].as_str().unwrap_or_default().to_string();
                            out.insert(id, check);
                        }
                    }
                }
            }
            (Value::Object(out), catalog)
        }
        Op::CatalogServices => {
            let mut out = Map::new();
            for (name, view) in readable(state, caller, &all, None) {
                let tags: BTreeSet<String> = view
                    .instances
                    .values()
                    .flat_map(|i| mapping::tags_of(i))
                    .collect();
                out.insert(name.to_string(), json!(tags));
            }
            (Value::Object(out), catalog)
        }
        Op::CatalogService => {
            let mut out = Vec::new();
            for (name, view) in one(&call.name) {
                for i in view.instances.values().filter(|i| query.has_tags(i)) {
                    let entry = mapping::catalog_entry(i, &name, dc, index_of(&view));
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
                    let entry = mapping::health_entry(i, &name, dc, index_of(&view));
                    let checks = entry["Checks"].as_array().map_or(&[][..], Vec::as_slice);
                    if query.passing && mapping::aggregated(checks) != Status::Passing {
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
                    for check in mapping::service_checks(i, &name, index_of(&view)) {
                        if query.keeps(&check) {
                            out.push(check);
                        }
                    }
                }
            }
            (Value::Array(out), service_index(&call.name))
        }
        Op::CatalogNodes => {
            let mut nodes: BTreeMap<String, Value> = BTreeMap::new();
            for (_, view) in readable(state, caller, &all, None) {
                for i in view.instances.values() {
                    let ip = i.ip();
                    if !nodes.contains_key(ip) {
                        nodes.insert(ip.to_string(), mapping::node_json(ip, dc, catalog));
                    }
                }
            }
            let out: Vec<Value> = nodes.into_values().filter(|n| query.keeps(n)).collect();
            (Value::Array(out), catalog)
        }
        Op::CatalogNode => {
            let mut services = Map::new();
            for (name, view) in readable(state, caller, &all, None) {
                for i in view.instances.values().filter(|i| i.ip() == call.name) {
                    let entry = mapping::agent_service(i, &name, dc, index_of(&view));
                    services.insert(mapping::id_of(i, &name), entry);
                }
            }
            let body = if services.is_empty() {
                Value::Null
            } else {
                json!({
                    "Node": mapping::node_json(&call.name, dc, catalog),
                    "Services": services,
                })
            };
            (body, catalog)
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
