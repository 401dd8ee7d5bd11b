//! The Consul API's handlers: each call's dispatch, and the writes. Writes go through
//! `Writes` (a TTL-checked service as an ephemeral address client, any other as a
//! persistent instance through Raft) and answer once this node reads what they wrote.
//! The reads are [`super::reads`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::handler::Handler;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::mapping::{self, Kind, Status};
use super::{Call, Op};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::{forbidden, Caller, MaybeCaller};
use crate::faces::http::params::Params;
use crate::services::naming::writes::{BeatOutcome, Stated};
use crate::state::AppState;
use roster_registry::instance::{Instance, Metadata};
use roster_registry::service::{Service, ServiceKey, ServiceView};
use roster_registry::validate::{self, check_metadata, Origin};
use roster_registry::{InstancePatch, Registration};

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
                let read = move |s: State<AppState>, c: MaybeCaller, p: Params| {
                    super::reads::read(s, c, p, self)
                };
                Handler::call(read, req, state)
            }
        }
    }
}

/// The Consul face's services: those of its namespace and group, in name order.
pub(super) fn services(state: &AppState) -> Vec<Arc<Service>> {
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
