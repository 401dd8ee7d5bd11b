//! `/api/v1/sync/tasks`: create, list, get, pause, resume, apply (a dry run becomes a
//! real import) and delete sync tasks. Admin only (a task's source URL may carry credentials; answers show it redacted).
//!
//! Writes go through Raft; the answer is read back from this node's copy of the task
//! table after a read barrier, so a caller sees its own change.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};

use roster_sync::{Filter, SourceUrl, TaskSpec, TaskStatus};

use super::guard::Caller;
use crate::error::Error;
use crate::services::store::tasks::{redacted, StoredTask};
use crate::state::AppState;
use roster_registry::clock::now_ms;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::validate::check_group;

/// A task as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// The task, its source URL redacted.
    #[serde(flatten)]
    pub spec: TaskSpec,
    /// What its runner last reported.
    pub status: TaskStatus,
}

impl From<StoredTask> for TaskView {
    fn from(t: StoredTask) -> Self {
        let mut spec = t.spec;
        spec.source = redacted(&spec.source);
        Self {
            spec,
            status: t.status,
        }
    }
}

/// `GET /api/v1/sync/tasks` answer.
#[derive(Debug, Serialize)]
pub struct TaskList {
    /// Every task, by name.
    pub tasks: Vec<TaskView>,
}

pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<TaskList>, Error> {
    caller.require_admin()?;
    Ok(Json(TaskList {
        tasks: state.tasks.all().into_iter().map(TaskView::from).collect(),
    }))
}

pub(super) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<TaskView>, Error> {
    caller.require_admin()?;
    state
        .tasks
        .get(&name)
        .map(|t| Json(t.into()))
        .ok_or_else(|| Error::not_found(format!("sync task '{name}' not found")))
}

/// What `POST /api/v1/sync/tasks` takes.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateBody {
    name: String,
    source: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    services: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    reconcile_secs: Option<u64>,
    #[serde(default)]
    hold_share: Option<f64>,
    #[serde(default)]
    hold_min: Option<usize>,
    #[serde(default)]
    hold_secs: Option<u64>,
}

pub(super) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<(StatusCode, Json<TaskView>), Error> {
    caller.require_admin()?;
    let body: CreateBody = serde_json::from_slice(&body)
        .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))?;
    let spec = validate(&state, body)?;
    let name = spec.name.clone();
    state.task_writes().create(spec).await?;
    let view = read_back(&state, &name).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Checks every field and builds the task; the first problem is the answer.
fn validate(state: &AppState, body: CreateBody) -> Result<TaskSpec, Error> {
    let name = body.name.trim().to_string();
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(Error::illegal(
            "name",
            "use 1 to 64 letters, digits, '-', '_' or '.'",
        ));
    }
    let url: SourceUrl = body
        .source
        .parse()
        .map_err(|e: String| Error::illegal("source", e))?;
    let namespace = non_empty(body.namespace);
    if let Some(ns) = &namespace {
        if ns != PUBLIC_NAMESPACE
            && state
                .registry
                .namespace(ns)
                .and_then(|n| n.info())
                .is_none()
        {
            return Err(Error::illegal(
                "namespace",
                format!("namespace '{ns}' does not exist; create it first"),
            ));
        }
    }
    let group = non_empty(body.group);
    if let Some(g) = &group {
        check_group(g).map_err(|_| {
            Error::illegal(
                "group",
                "it should be up to 128 characters of letters, digits and '-_:.'.",
            )
        })?;
    }
    let services = non_empty(body.services);
    Filter::parse(services.as_deref()).map_err(|e| Error::illegal("services", e))?;
    let reconcile_secs = body
        .reconcile_secs
        .unwrap_or_else(roster_sync::default_reconcile_secs);
    if !(5..=86_400).contains(&reconcile_secs) {
        return Err(Error::illegal(
            "reconcileSecs",
            "it must be between 5 and 86400",
        ));
    }
    let hold_share = body
        .hold_share
        .unwrap_or_else(roster_sync::default_hold_share);
    if !(hold_share > 0.0 && hold_share <= 1.0) {
        return Err(Error::illegal(
            "holdShare",
            "it must be above 0 and at most 1",
        ));
    }
    let hold_min = body.hold_min.unwrap_or_else(roster_sync::default_hold_min);
    if hold_min == 0 {
        return Err(Error::illegal("holdMin", "it must be at least 1"));
    }
    let hold_secs = body
        .hold_secs
        .unwrap_or_else(roster_sync::default_hold_secs);
    if !(1..=604_800).contains(&hold_secs) {
        return Err(Error::illegal(
            "holdSecs",
            "it must be between 1 and 604800",
        ));
    }
    Ok(TaskSpec {
        name,
        source: url.to_string(),
        namespace,
        group,
        services,
        dry_run: body.dry_run,
        paused: body.paused,
        reconcile_secs,
        hold_share,
        hold_min,
        hold_secs,
        created_ms: now_ms(),
    })
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

pub(super) async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<TaskView>, Error> {
    set_paused(state, caller, name, true).await
}

pub(super) async fn resume(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<TaskView>, Error> {
    set_paused(state, caller, name, false).await
}

async fn set_paused(
    state: AppState,
    caller: Caller,
    name: String,
    paused: bool,
) -> Result<Json<TaskView>, Error> {
    caller.require_admin()?;
    state.task_writes().set_paused(&name, paused).await?;
    Ok(Json(read_back(&state, &name).await?))
}

/// `POST /api/v1/sync/tasks/{name}/apply`: turns a dry run into a real import, through
/// Raft so every node agrees; the leader's runner restarts and imports what the dry run
/// reported. 404 for an unknown task, 409 for one that is not a dry run.
pub(super) async fn apply(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<TaskView>, Error> {
    caller.require_admin()?;
    state.task_writes().apply(&name).await?;
    Ok(Json(read_back(&state, &name).await?))
}

/// `DELETE /api/v1/sync/tasks/{name}` answer.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Deleted {
    deleted: String,
    removed_instances: usize,
}

pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, Error> {
    caller.require_admin()?;
    let removed_instances = state.registry.owned_by(&name).len();
    state.task_writes().delete(&name).await?;
    Ok(Json(Deleted {
        deleted: name,
        removed_instances,
    }))
}

/// The task as this node holds it after the write: the read barrier waits until this
/// node has applied everything committed (a follower applies a moment after the leader).
async fn read_back(state: &AppState, name: &str) -> Result<TaskView, Error> {
    state.store.read_barrier().await?;
    state
        .tasks
        .get(name)
        .map(TaskView::from)
        .ok_or_else(|| Error::not_found(format!("sync task '{name}' not found")))
}
