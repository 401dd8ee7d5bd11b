//! `/nacos/v1/cs/history*`: the versions a configuration item went through, newest
//! first, one version's detail, the version before one, and the items of a namespace
//! that have versions (deleted ones among them). A version is restored by publishing
//! its content again.
//!
//! Shapes follow Nacos' `ConfigHistoryInfo`, with these decisions: ids are JSON
//! strings (as Nacos serializes them); `lastId` is always -1; `opType` is the bare
//! letter `I`, `U` or `D` (Nacos pads it to its column's width); `createdTime` and
//! `lastModifiedTime` are both the version's time as an ISO-8601 string in UTC
//! (`2024-01-01T00:00:00.000+00:00`, the shape Spring's Jackson gives Nacos'
//! timestamps); `content` is left out of listings (Nacos' listing query does not read
//! it either; a listing of 500 versions of 1 MiB would be 500 MiB) and given with each
//! detail; `type` is added.

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value};

use super::config::{iso_time, named, page_of, paging, tenant_of};
use super::json_of;
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::services::configs::{namespace_of, ConfigKey, Version};
use crate::state::AppState;
use roster_registry::wire::page;

/// Nacos' answer for a version that is not there.
const NO_VERSION: &str = "config history not exist";

/// A version as Nacos shows it; `content` only in a detail.
fn version(key: &ConfigKey, v: &Version, with_content: bool) -> Value {
    let time = iso_time(v.at_ms);
    let mut out = json!({
        "id": v.id.to_string(),
        "lastId": -1,
        "dataId": key.data_id,
        "group": key.group,
        "tenant": key.tenant(),
        "appName": v.app_name,
        "type": v.r#type,
        "md5": v.md5,
        "srcIp": v.src_ip,
        "srcUser": v.by,
        "opType": v.op.as_str(),
        // Nacos 2.3+: a gray version's publication is `gray`, named by `grayName`.
        "publishType": if v.gray.is_some() { "gray" } else { "formal" },
        "grayName": v.gray.as_deref().unwrap_or(""),
        "createdTime": time,
        "lastModifiedTime": time,
        "encryptedDataKey": "",
    });
    if with_content {
        out["content"] = Value::from(&*v.content);
    }
    out
}

/// A version id from `field`.
fn id_of(params: &Params, field: &str) -> Result<u64, Error> {
    let raw = params.required(field)?;
    raw.parse()
        .map_err(|_| Error::illegal(field, format!("'{raw}' is not a version id.")))
}

/// `GET /nacos/v1/cs/history?dataId&group&tenant&pageNo&pageSize` (`search=accurate`,
/// as Nacos' console sends, changes nothing): a page of the item's versions, newest
/// first. With `nid`: that version's detail (404 if the item has no such version).
pub async fn get(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = named(&params, "tenant")?;
    if params.optional("nid").is_some() {
        let id = id_of(&params, "nid")?;
        let v = state
            .configs
            .version(&key, id)
            .ok_or_else(|| Error::not_found(NO_VERSION))?;
        return Ok(json_of(&version(&key, &v, true)));
    }
    let (page_no, page_size) = paging(&params)?;
    let versions = state.configs.history(&key);
    let total = versions.len();
    let rows = page(versions, page_no, page_size)
        .iter()
        .map(|v| version(&key, v, false))
        .collect();
    Ok(json_of(&page_of(total, page_no, page_size, rows)))
}

/// `GET /nacos/v1/cs/history/previous?id&dataId&group&tenant`: the version before
/// version `id`, in detail (404 when there is none).
pub async fn previous(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = named(&params, "tenant")?;
    let id = id_of(&params, "id")?;
    let v = state
        .configs
        .previous(&key, id)
        .ok_or_else(|| Error::not_found(NO_VERSION))?;
    Ok(json_of(&version(&key, &v, true)))
}

/// `GET /nacos/v1/cs/history/configs?tenant=`: `[{dataId, group, tenant}]` of the items
/// of the namespace that have versions, those the caller may read.
pub async fn configs(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    let tenant = tenant_of(&params, "tenant")?;
    let rows: Vec<Value> = state
        .configs
        .keys_with_history(namespace_of(tenant))
        .iter()
        .filter(|key| caller.may_read_config(&state, key))
        .map(|key| json!({ "dataId": key.data_id, "group": key.group, "tenant": key.tenant() }))
        .collect();
    Ok(json_of(&rows))
}
