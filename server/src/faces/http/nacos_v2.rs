//! Nacos Open API v2 for naming (`/nacos/v2/ns/...`): the v1 operations behind the
//! `{code, message, data}` envelope (`nacos_v2_envelope`) and v2's error codes.
//! `serviceName` is not grouped in v2 (a grouped one still works), list queries take
//! `clusterName`, and the beat answers the bare v1 shape, as in Nacos.

use axum::body::to_bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::guard::Caller;
use super::nacos::{instance, json, operator, service};
use super::nacos_v2_envelope::{failure, success};
use super::params::Params;
use crate::error::Error;
use crate::state::AppState;
use roster_registry::validate::{check_group, DEFAULT_GROUP};
use roster_registry::wire::page;

/// Wraps a v1 answer: `ok` and JSON bodies become `data`.
async fn wrap(result: Result<Response, Error>) -> Response {
    match result {
        Ok(response) => {
            let body = to_bytes(response.into_body(), 64 * 1024 * 1024)
                .await
                .unwrap_or_default();
            let data = serde_json::from_slice::<Value>(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            success(data)
        }
        Err(e) => failure(e),
    }
}

fn ok(result: Result<&'static str, Error>) -> Result<Response, Error> {
    result.map(|s| s.into_response())
}

pub(super) async fn register(state: State<AppState>, params: Params) -> Response {
    wrap(ok(instance::register(state, params).await)).await
}

pub(super) async fn deregister(state: State<AppState>, params: Params) -> Response {
    wrap(ok(instance::deregister(state, params).await)).await
}

pub(super) async fn update(state: State<AppState>, params: Params) -> Response {
    wrap(ok(instance::update(state, params).await)).await
}

pub(super) async fn instance_detail(state: State<AppState>, params: Params) -> Response {
    wrap(instance::detail(state, params).await).await
}

pub(super) async fn health(state: State<AppState>, params: Params) -> Response {
    wrap(ok(instance::health(state, params).await)).await
}

/// `GET /nacos/v2/ns/instance/list`: the v1 `ServiceInfo` as `data`; the cluster filter
/// is `clusterName`.
pub(super) async fn list(State(state): State<AppState>, params: Params) -> Response {
    let result = instance::query(&state, &params, "clusterName")
        .await
        .map(|listed| json(listed.body));
    wrap(result).await
}

pub(super) async fn create_service(state: State<AppState>, params: Params) -> Response {
    wrap(ok(service::create(state, params).await)).await
}

pub(super) async fn delete_service(state: State<AppState>, params: Params) -> Response {
    wrap(ok(service::delete(state, params).await)).await
}

pub(super) async fn update_service(state: State<AppState>, params: Params) -> Response {
    wrap(ok(service::update(state, params).await)).await
}

pub(super) async fn service_detail(state: State<AppState>, params: Params) -> Response {
    wrap(service::detail(state, params).await).await
}

/// `GET /nacos/v2/ns/service/list`: `{count, services}` of one group, those the caller
/// may read; pages default to 1 and 20, at most 500 per page.
pub(super) async fn service_list(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Response {
    let result = (|| {
        let page_no = params.page("pageNo", Some(1))?;
        let page_size = params.page("pageSize", Some(20))?.min(500);
        let ns = params.namespace()?;
        let group = params.optional("groupName").unwrap_or(DEFAULT_GROUP);
        check_group(group)?;
        let mut names = state.registry.service_names(&ns, group);
        names.retain(|name| caller.may_read(&state, &ns, group, name));
        let count = names.len();
        Ok(json!({ "count": count, "services": page(names, page_no, page_size) }))
    })();
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

pub(super) async fn metrics(
    state: State<AppState>,
    params: Params,
    req: axum::extract::Request,
) -> Response {
    wrap(operator::metrics(state, params, req).await).await
}

pub(super) async fn switches(state: State<AppState>) -> Response {
    wrap(Ok(operator::switches(state).await)).await
}
