//! The Eureka API's handlers. Writes go through `Writes` as a Nacos v1 instance's do
//! (registration to the address's Distro owner, renewals as beats); reads are of the
//! registry, filtered to the services the caller may read.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::mapping::{self, Status};
use super::xml;
use super::{Call, Op};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::json_of;
use crate::faces::http::params::Params;
use crate::services::naming::writes::{BeatOutcome, Stated};
use crate::state::AppState;
use roster_registry::clock::now_ms;
use roster_registry::instance::{Instance, Metadata};
use roster_registry::service::ServiceKey;
use roster_registry::validate::{self, check_metadata, check_service_name, Origin};
use roster_registry::{InstancePatch, Registration};

/// How long a change is listed in `/apps/delta`, ms (Eureka keeps 3 minutes).
const DELTA_WINDOW_MS: u64 = 180_000;

impl Call {
    /// Its handler, called with the request (its parameters and caller in its
    /// extensions).
    pub fn serve(self, req: Request, state: AppState) -> Answer {
        match self.op {
            Op::Register => {
                let register = move |s: State<AppState>, body: Bytes| register(s, self, body);
                Handler::call(register, req, state)
            }
            Op::Renew => {
                let renew = move |s: State<AppState>, p: Params| renew(s, self, p);
                Handler::call(renew, req, state)
            }
            Op::Cancel => Handler::call(move |s: State<AppState>| cancel(s, self), req, state),
            Op::StatusOverride | Op::StatusClear | Op::Metadata => {
                let change = move |s: State<AppState>, p: Params| change(s, self, p);
                Handler::call(change, req, state)
            }
            Op::Apps
            | Op::Delta
            | Op::App
            | Op::Instance
            | Op::InstanceById
            | Op::Vip
            | Op::Svip => {
                let read = move |s: State<AppState>, c: Caller, h: HeaderMap| read(s, c, h, self);
                Handler::call(read, req, state)
            }
        }
    }
}

/// The service application `app` is held as.
fn key_of(state: &AppState, app: &str) -> Result<ServiceKey, Error> {
    let name = mapping::service_of(app);
    check_service_name(&name)?;
    let place = &state.eureka;
    Ok(ServiceKey::new(&place.namespace, &place.group, &name))
}

/// The instance of service `key` whose Eureka id is `id`, as this node holds it.
fn find(state: &AppState, key: &ServiceKey, id: &str) -> Option<Arc<Instance>> {
    let view = state.registry.service_by_key(key)?.view();
    let found = view.instances.values().find(|i| mapping::id_of(i) == id);
    found.cloned()
}

/// Eureka's 404 for an instance it does not hold (a renewing client registers again).
fn not_registered(call: &Call) -> Error {
    Error::not_found(format!(
        "instance {} of application {} is not registered",
        call.name, call.app
    ))
}

/// `POST /eureka/apps/{app}`: registers (or registers again) the instance in the body;
/// an operator's override and the first registration's time are kept over it. 204.
#[tracing::instrument(skip_all)]
async fn register(
    State(state): State<AppState>,
    call: Call,
    body: Bytes,
) -> Result<Response, Error> {
    let key = key_of(&state, &call.app)?;
    let mapping::Registered {
        id,
        registration: mut reg,
    } = mapping::registered(&call.app, &body)?;
    // What a Eureka client registered under this id before (not a Nacos instance whose
    // `ip:port` the id happens to spell).
    let held = find(&state, &key, &id).filter(|i| i.metadata.contains_key(mapping::INSTANCE_ID));
    let kept = |k: &str| {
        held.as_ref()
            .and_then(|i| i.metadata.get(k).map(str::to_string))
    };
    if let Some(status) = kept(mapping::OVERRIDDEN) {
        reg.metadata.insert(mapping::OVERRIDDEN.into(), status);
    }
    let since = kept(mapping::REGISTERED).unwrap_or_else(|| now_ms().to_string());
    reg.metadata.insert(mapping::REGISTERED.into(), since);
    reg.enabled = mapping::enabled_for(mapping::effective(&reg.metadata));
    validate::registration(&mut reg, Origin::Grpc, state.limits.max_metadata_bytes)?;
    let writes = state.writes();
    // The same id at another address: the instance moved, its old address goes.
    if let Some(old) = held.filter(|i| i.port != reg.port || i.ip() != reg.ip) {
        writes
            .deregister(key.clone(), old.ip(), old.port, Stated::Ephemeral)
            .await?;
    }
    writes.register(key, reg).await?;
    state.metrics.registrations.inc();
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `PUT /eureka/apps/{app}/{id}`: a renewal, taken as a beat. 404 when the instance is
/// not held, or when the client's `lastDirtyTimestamp` is newer than the one it
/// registered with: either way the client registers again.
async fn renew(
    State(state): State<AppState>,
    call: Call,
    params: Params,
) -> Result<Response, Error> {
    let key = key_of(&state, &call.app)?;
    let instance = find(&state, &key, &call.name).ok_or_else(|| not_registered(&call))?;
    let stamp = |t: Option<&str>| t.and_then(|t| t.trim().parse::<u64>().ok());
    if let Some(dirty) = stamp(params.optional("lastDirtyTimestamp")) {
        if dirty > stamp(instance.metadata.get(mapping::DIRTY)).unwrap_or(0) {
            return Err(not_registered(&call));
        }
    }
    state.metrics.beats.inc();
    let writes = state.writes();
    let (ip, port) = (instance.ip(), instance.port);
    if writes
        .beat_here(&key.namespace, &key.grouped(), ip, port)
        .is_some()
    {
        return Ok(StatusCode::OK.into_response());
    }
    match writes.beat(key.clone(), ip, port, None).await? {
        BeatOutcome::Known(_) => Ok(StatusCode::OK.into_response()),
        BeatOutcome::Unknown => Err(not_registered(&call)),
    }
}

/// `DELETE /eureka/apps/{app}/{id}`: cancels the lease (deregisters). 404 when unknown.
#[tracing::instrument(skip_all)]
async fn cancel(State(state): State<AppState>, call: Call) -> Result<Response, Error> {
    let key = key_of(&state, &call.app)?;
    let instance = find(&state, &key, &call.name).ok_or_else(|| not_registered(&call))?;
    state
        .writes()
        .deregister(key, instance.ip(), instance.port, Stated::Ephemeral)
        .await?;
    state.metrics.deregistrations.inc();
    Ok(StatusCode::OK.into_response())
}

/// `PUT|DELETE .../status` (an operator's override, set or removed) and `PUT
/// .../metadata?k=v` (keys added or replaced). An instance of an address client is
/// registered again with the change, so its client's next registration keeps the
/// override as Eureka does; any other (a gRPC client's, a persistent one) is updated as
/// an operator's update through Nacos would (its values pinned).
#[tracing::instrument(skip_all)]
async fn change(
    State(state): State<AppState>,
    call: Call,
    params: Params,
) -> Result<Response, Error> {
    let key = key_of(&state, &call.app)?;
    let instance = find(&state, &key, &call.name).ok_or_else(|| not_registered(&call))?;
    let mut metadata: Metadata = instance.metadata.to_map();
    match call.op {
        Op::StatusOverride => {
            let value = params
                .optional("value")
                .ok_or_else(|| Error::missing("value"))?;
            let status = Status::parse(value).ok_or_else(|| {
                Error::illegal("value", format!("'{value}' is no Eureka status."))
            })?;
            metadata.insert(mapping::OVERRIDDEN.into(), status.as_str().into());
        }
        Op::StatusClear => {
            metadata.remove(mapping::OVERRIDDEN);
        }
        _ => {
            for (k, v) in params.pairs() {
                if k.starts_with(mapping::PREFIX) || k.starts_with("preserved.") || k.is_empty() {
                    return Err(Error::illegal(k, "the key is reserved."));
                }
                metadata.insert(k.to_string(), v.to_string());
            }
        }
    }
    let enabled = if call.op == Op::Metadata {
        instance.enabled
    } else {
        mapping::enabled_for(mapping::effective(&metadata))
    };
    let max = state.limits.max_metadata_bytes;
    let writes = state.writes();
    if instance.ephemeral && instance.client().is_none() {
        let mut reg = Registration {
            ip: instance.ip().to_string(),
            port: instance.port,
            cluster: instance.cluster.to_string(),
            weight: instance.weight,
            healthy: true,
            enabled,
            ephemeral: true,
            metadata,
            instance_id: instance.instance_id().map(|id| id.to_string()),
            client: None,
            owner: None,
        };
        validate::registration(&mut reg, Origin::Grpc, max)?;
        writes.register(key, reg).await?;
    } else {
        check_metadata("metadata", &metadata, max)?;
        let patch = InstancePatch {
            weight: None,
            enabled: (call.op != Op::Metadata).then_some(enabled),
            metadata: Some(metadata),
        };
        writes
            .update(key, instance.ip(), instance.port, patch)
            .await?;
    }
    Ok(StatusCode::OK.into_response())
}

/// One instance as listed.
struct Listed {
    app: String,
    status: Status,
    changed_ms: u64,
    json: Value,
}

/// Every instance of the Eureka namespace and group the caller may read (of the
/// service `only`, when given) that `keep` keeps, as Eureka shows it.
fn listing(
    state: &AppState,
    caller: &Caller,
    only: Option<&str>,
    keep: impl Fn(&Instance, &str) -> bool,
) -> Vec<Listed> {
    let place = &state.eureka;
    let mut out = Vec::new();
    for svc in state.registry.services(&place.namespace) {
        let (group, name) = (&*svc.key.group, &*svc.key.name);
        if group != place.group
            || only.is_some_and(|o| o != name)
            || !caller.may_read(state, &place.namespace, group, name)
        {
            continue;
        }
        let view = svc.view();
        let app = mapping::app_of(name);
        for instance in view.instances.values().filter(|i| keep(i, name)) {
            let m = &instance.metadata;
            out.push(Listed {
                app: app.clone(),
                status: mapping::shown_status(m, instance.healthy, instance.enabled),
                changed_ms: view.modified_ms,
                json: mapping::instance_json(instance, &app, name, view.modified_ms, "ADDED"),
            });
        }
    }
    out
}

/// Eureka's `applications` document of `listed`, with `hash` as its reconcile hash and
/// `version` as its `versions__delta` (the latest change of the registry listed: a client
/// that finds both as it last saw them skips a delta).
fn applications(hash: String, version: u64, listed: Vec<Listed>) -> Value {
    let mut apps: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for l in listed {
        apps.entry(l.app).or_default().push(l.json);
    }
    let application: Vec<Value> = apps
        .into_iter()
        .map(|(name, instance)| json!({"name": name, "instance": instance}))
        .collect();
    json!({"applications": {
        "versions__delta": version.to_string(),
        "apps__hashcode": hash,
        "application": application,
    }})
}

fn hash_of(listed: &[Listed]) -> String {
    mapping::hashcode(listed.iter().map(|l| l.status.as_str()))
}

fn version_of(listed: &[Listed]) -> u64 {
    listed.iter().map(|l| l.changed_ms).max().unwrap_or(0)
}

/// The reads: the registry, a delta, an application, an instance, a VIP's instances;
/// in JSON when `Accept` asks for it, else in XML.
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    call: Call,
) -> Result<Response, Error> {
    let all = |_: &Instance, _: &str| true;
    let body = match call.op {
        Op::Apps => {
            let listed = listing(&state, &caller, None, all);
            applications(hash_of(&listed), version_of(&listed), listed)
        }
        // The instances of services changed within the window (as `MODIFIED`: a client
        // adds both kinds alike); removals are not listed, so the full registry's hash
        // differs from what a client holds after one and it fetches the whole registry.
        Op::Delta => {
            let listed = listing(&state, &caller, None, all);
            let (hash, version) = (hash_of(&listed), version_of(&listed));
            let since = now_ms().saturating_sub(DELTA_WINDOW_MS);
            let recent = listed
                .into_iter()
                .filter(|l| l.changed_ms >= since)
                .map(|mut l| {
                    l.json["actionType"] = "MODIFIED".into();
                    l
                })
                .collect();
            applications(hash, version, recent)
        }
        Op::App => {
            let key = key_of(&state, &call.app)?;
            let listed = listing(&state, &caller, Some(&key.name), all);
            if listed.is_empty() {
                return Err(Error::not_found(format!(
                    "application {} not found",
                    call.app
                )));
            }
            let instance: Vec<Value> = listed.into_iter().map(|l| l.json).collect();
            json!({"application": {"name": mapping::app_of(&key.name), "instance": instance}})
        }
        Op::Instance | Op::InstanceById => {
            let only = match call.op {
                Op::Instance => Some(key_of(&state, &call.app)?.name),
                _ => None,
            };
            let same = |i: &Instance, _: &str| mapping::id_of(i) == call.name;
            let listed = listing(&state, &caller, only.as_deref(), same);
            let Some(found) = listed.into_iter().next() else {
                return Err(not_registered(&call));
            };
            json!({"instance": found.json})
        }
        Op::Vip | Op::Svip => {
            let key = if call.op == Op::Vip {
                mapping::VIP
            } else {
                mapping::SVIP
            };
            let answers = |i: &Instance, service: &str| {
                mapping::vips(i, key, service).any(|v| v.eq_ignore_ascii_case(&call.name))
            };
            let listed = listing(&state, &caller, None, answers);
            applications(hash_of(&listed), version_of(&listed), listed)
        }
        Op::Register
        | Op::Renew
        | Op::Cancel
        | Op::StatusOverride
        | Op::StatusClear
        | Op::Metadata => {
            unreachable!("writes are served apart")
        }
    };
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if !xml::wanted(accept) {
        return Ok(json_of(&body));
    }
    let content_type = HeaderValue::from_static("application/xml");
    Ok(([(header::CONTENT_TYPE, content_type)], xml::document(&body)).into_response())
}
