//! Gray versions over Nacos v1 (and v2, v3, which share it): which gray rule a
//! publication names ([`gray_rule`]: `betaIps`, `tag`), which tag a reader carries
//! ([`gray_tag_of`]: `tag`, `Vipserver-Tag`), the beta as Nacos 2 answers it and every
//! gray version (roster's `grays=true`). The store's side is `services::configs::gray`.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{json, Value};

use super::json_of;
use crate::error::Error;
use crate::faces::http::params::Params;
use crate::services::configs::gray::{Gray, Rule, BETA};
use crate::services::configs::validate::{check_beta_ips, check_gray_tag};
use crate::services::configs::ConfigKey;
use crate::state::AppState;

/// The tag a client reads gray versions by: its `tag` parameter, else its
/// `Vipserver-Tag` header (checked when given).
pub fn gray_tag_of(params: &Params, headers: &HeaderMap) -> Result<Option<String>, Error> {
    let header = || {
        headers
            .get("vipserver-tag")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    match params.optional("tag") {
        Some(tag) => {
            check_gray_tag("tag", tag)?;
            Ok(Some(tag.to_string()))
        }
        None => Ok(header().map(str::to_string)),
    }
}

/// `GET ...?beta=true`: the item's beta as Nacos 2 answers it (`ConfigInfo4Beta` in
/// `{code, message, data}`; `data` null when there is none).
pub(super) fn beta_answer(state: &AppState, key: &ConfigKey) -> Response {
    let data = state
        .configs
        .gray(key, BETA)
        .map(|gray| beta_info(state, key, &gray));
    json_of(&json!({ "code": 200, "message": "query beta ok", "data": data }))
}

/// `GET ...?grays=true` (roster's): every gray version of the item, in the order they
/// are matched, in the beta answer's envelope: `grayName`, `type` (`beta`, `tag`), `expr`
/// (the addresses, or the tag), `priority`, `content`, `md5`, `createTime`,
/// `modifyTime`, `modifyUser`, `modifyIp`.
pub(super) fn grays_answer(state: &AppState, key: &ConfigKey) -> Response {
    let grays: Vec<Value> = state
        .configs
        .grays(key)
        .iter()
        .map(|g| {
            json!({
                "grayName": g.name(),
                "type": g.rule.kind(),
                "expr": g.rule.expr(),
                "priority": g.rule.priority(),
                "content": &*g.content,
                "md5": g.md5,
                "createTime": g.created_ms,
                "modifyTime": g.modified_ms,
                "modifyUser": g.by,
                "modifyIp": g.src_ip,
            })
        })
        .collect();
    json_of(&json!({ "code": 200, "message": "query grays ok", "data": grays }))
}

/// A beta as Nacos shows it (`ConfigInfo4Beta`).
pub fn beta_info(state: &AppState, key: &ConfigKey, gray: &Gray) -> Value {
    let item = state.configs.get(key);
    json!({
        "id": item.as_ref().map(|i| i.id.to_string()),
        "dataId": key.data_id,
        "group": key.group,
        "tenant": key.tenant(),
        "content": &*gray.content,
        "md5": gray.md5,
        "encryptedDataKey": "",
        "appName": item.as_ref().map(|i| i.app_name.clone()).unwrap_or_default(),
        "type": item.as_ref().map(|i| i.r#type.clone()).unwrap_or_else(|| "text".into()),
        "betaIps": gray.rule.expr(),
        "lastModified": gray.modified_ms,
        "createUser": gray.by,
        "modifyTime": gray.modified_ms,
    })
}

/// The gray rule a publication names: a beta to the addresses of the `betaIps` header
/// (or parameter), else a tag (`tag`); `None`: the formal content.
pub fn gray_rule(params: &Params, headers: &HeaderMap) -> Result<Option<Rule>, Error> {
    let beta = headers
        .get("betaips")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .or_else(|| params.optional("betaIps"));
    if let Some(ips) = beta {
        return Ok(Some(check_beta_ips("betaIps", ips)?));
    }
    match params.optional("tag") {
        Some(tag) => Ok(Some(check_gray_tag("tag", tag)?)),
        None => Ok(None),
    }
}
