//! The v3 API's configuration operations (`/nacos/v3/admin/cs/...`, see the table in
//! `super`), in Nacos 3's shapes: `ConfigDetailInfo`, `ConfigBasicInfo`,
//! `ConfigHistoryBasicInfo`, `ConfigHistoryDetailInfo`, `ConfigListenerInfo`, Nacos'
//! `Page`. They are v1's operations underneath (`nacos::config`, `config_zip`): one
//! store, whichever face writes.
//!
//! Wire decisions where Nacos 3 is loose or roster differs:
//! - An item is named by `dataId`, `groupName` (blank: `DEFAULT_GROUP`) and
//!   `namespaceId` (blank or `public`: the public namespace, answered as `public`).
//!   Ids are JSON strings, times epoch ms, as Nacos serializes them.
//! - A publication with `betaIps` (header or parameter) publishes the item's beta, one
//!   with `tag` that tag's gray version (`configs::gray`); `/config/beta` shows (404,
//!   code 20004, when there is none) and stops the beta.
//! - The publisher recorded is the authenticated caller; `srcUser` is not taken.
//! - Listeners are this node's (`aggregation` is not followed to other nodes);
//!   `listenersStatus` of an item is keyed by the client's IP, that of an IP by
//!   Nacos' group key (`dataId+group+namespaceId`, `+` and `%` escaped).
//! - Import and clone with `ABORT` place nothing when any item exists already (409,
//!   naming them); Nacos places those before the first.
//! - The history's namespace listing holds the items that have versions, deleted ones
//!   among them, as v1's does.

mod history;
mod moves;

use history::{history_configs, history_get, history_list, history_previous};
use moves::{clone_items, export, import};

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::{answer_not_served, V3};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::config::{self, named_in, page_of, paging, tenant_of, Source};
use crate::faces::http::nacos::config_zip::{self, Policy};
use crate::faces::http::nacos_v2_envelope::{failure, success};
use crate::faces::http::params::Params;
use crate::services::configs::archive::ArchivedItem;
use crate::services::configs::gray::{Gray, BETA};
use crate::services::configs::listeners::ListenerList;
use crate::services::configs::validate::{
    check_config_group, check_data_id, check_tags, check_tenant, check_text, MAX_DESC,
};
use crate::services::configs::writes::Draft;
use crate::services::configs::{namespace_of, ConfigItem, ConfigKey, Op, Search, Version};
use crate::state::AppState;
use roster_registry::wire::page;

/// The parameter naming the namespace.
const NAMESPACE: &str = "namespaceId";
/// The parameter naming the group.
const GROUP: &str = "groupName";
/// Nacos 3's answer for an item that is not there.
const NO_CONFIG: &str = "Config not exist, please publish Config first.";
/// Nacos 3's answer for an item without a beta.
const NO_BETA: &str = "Config is not in beta.";
/// The largest clone order read, bytes (an entry is about 100).
const MAX_CLONE_BODY: usize = 1024 * 1024;

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::ConfigGet => Handler::call(get, req, state),
        V3::ConfigPublish => Handler::call(publish, req, state),
        V3::ConfigDelete => Handler::call(delete, req, state),
        V3::ConfigMetadata => Handler::call(metadata, req, state),
        V3::ConfigBatchDelete => Handler::call(delete_by_ids, req, state),
        V3::ConfigList => Handler::call(list, req, state),
        V3::ConfigListeners => Handler::call(listeners, req, state),
        V3::BetaGet => Handler::call(beta, req, state),
        V3::BetaStop => Handler::call(stop_beta, req, state),
        V3::ConfigImport => Handler::call(import, req, state),
        V3::ConfigExport => Handler::call(export, req, state),
        V3::ConfigClone => Handler::call(clone_items, req, state),
        V3::HistoryList => Handler::call(history_list, req, state),
        V3::HistoryGet => Handler::call(history_get, req, state),
        V3::HistoryPrevious => Handler::call(history_previous, req, state),
        V3::HistoryConfigs => Handler::call(history_configs, req, state),
        V3::ListenerByIp => Handler::call(listened_by_ip, req, state),
        V3::ConfigLocalCache => Handler::call(local_cache, req, state),
        V3::ConfigLog => answer_not_served(
            "log levels are set at start, with RUST_LOG or --log-level; \
             roster does not change them at run time",
        ),
        _ => answer_not_served("not this area's"),
    }
}

/// `data` on success, the envelope's failure otherwise.
fn answer(result: Result<Value, Error>) -> Response {
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// The item `params` name, checked (400 naming the field).
fn item_of(params: &Params) -> Result<ConfigKey, Error> {
    named_in(params, NAMESPACE, GROUP)
}

/// `more`'s fields added to the object `to`.
fn extend(to: &mut Value, more: Value) {
    if let (Value::Object(to), Value::Object(more)) = (to, more) {
        to.extend(more);
    }
}

/// An item as Nacos 3's `ConfigBasicInfo`.
fn basic(key: &ConfigKey, item: &ConfigItem) -> Value {
    json!({
        "id": item.id.to_string(),
        "namespaceId": key.namespace,
        "groupName": key.group,
        "dataId": key.data_id,
        "md5": item.md5,
        "type": item.r#type,
        "appName": item.app_name,
        "createTime": item.created_ms,
        "modifyTime": item.modified_ms,
    })
}

/// An item as Nacos 3's `ConfigDetailInfo` (roster keeps where the last change came
/// from: that is `createIp`).
fn detail(key: &ConfigKey, item: &ConfigItem) -> Value {
    let mut out = basic(key, item);
    extend(
        &mut out,
        json!({
            "content": &*item.content,
            "desc": item.desc,
            "encryptedDataKey": "",
            "createUser": item.created_by,
            "createIp": item.src_ip,
            "configTags": item.tags,
        }),
    );
    out
}

/// A version as Nacos 3's `ConfigHistoryBasicInfo`, or with its content as
/// `ConfigHistoryDetailInfo`.
fn version(key: &ConfigKey, v: &Version, with_content: bool) -> Value {
    let mut out = json!({
        "id": v.id.to_string(),
        "namespaceId": key.namespace,
        "groupName": key.group,
        "dataId": key.data_id,
        "md5": v.md5,
        "type": v.r#type,
        "appName": v.app_name,
        "createTime": v.at_ms,
        "modifyTime": v.at_ms,
        "srcIp": v.src_ip,
        "srcUser": v.by,
        "opType": v.op.as_str(),
        "publishType": if v.gray.is_some() { "gray" } else { "formal" },
        "grayName": v.gray.as_deref().unwrap_or(""),
    });
    if with_content {
        extend(
            &mut out,
            json!({ "content": &*v.content, "encryptedDataKey": "" }),
        );
    }
    out
}

/// A removed item as `ConfigBasicInfo`, from its versions (newest first): its id is
/// that of the version that created it, while that version is kept.
fn removed(key: &ConfigKey, versions: &[Version]) -> Option<Value> {
    let newest = versions.first()?;
    let created = versions.iter().find(|v| v.op == Op::Insert);
    let oldest = versions.last()?;
    Some(json!({
        "id": created.map(|v| v.id.to_string()),
        "namespaceId": key.namespace,
        "groupName": key.group,
        "dataId": key.data_id,
        "md5": newest.md5,
        "type": newest.r#type,
        "appName": newest.app_name,
        "createTime": created.unwrap_or(oldest).at_ms,
        "modifyTime": newest.at_ms,
    }))
}

/// A number from `field` (required): an item or version id.
fn id_of(params: &Params, field: &str) -> Result<u64, Error> {
    let raw = params.required(field)?;
    raw.parse()
        .map_err(|_| Error::illegal(field, format!("'{raw}' is not an id.")))
}

/// The ids in `field`, comma-separated (required, at least one).
fn ids_of(params: &Params, field: &str) -> Result<Vec<u64>, Error> {
    let raw = params.required(field)?;
    let ids = raw
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            id.parse()
                .map_err(|_| Error::illegal(field, format!("'{id}' is not an id.")))
        })
        .collect::<Result<Vec<u64>, Error>>()?;
    if ids.is_empty() {
        return Err(Error::missing(field));
    }
    Ok(ids)
}

/// Whether a content matches `pattern`: it holds each `*`-separated part, in order.
fn content_matches(pattern: &str, content: &str) -> bool {
    let mut rest = content;
    for part in pattern.split('*').filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The IP of a listener's address (`ip:port` for gRPC, the IP for a long poll).
fn ip_of(address: &str) -> String {
    match address.parse::<std::net::SocketAddr>() {
        Ok(addr) => addr.ip().to_string(),
        Err(_) => address.to_string(),
    }
}

/// Nacos' group key of an item: `dataId+group+namespace`, each `+` and `%` in them
/// escaped (`%2B`, `%25`).
fn group_key(key: &ConfigKey) -> String {
    let escape = |s: &str| s.replace('%', "%25").replace('+', "%2B");
    format!(
        "{}+{}+{}",
        escape(&key.data_id),
        escape(&key.group),
        escape(&key.namespace)
    )
}

/// Whether a listen shows in the listing of an IP: every one with `all`, else those
/// of the public namespace and of `namespace` when one is asked for (Nacos' rule).
fn shown(key: &ConfigKey, all: bool, namespace: Option<&str>) -> bool {
    all || key.namespace == namespace_of("") || namespace == Some(key.namespace.as_str())
}

/// `GET /nacos/v3/admin/cs/config`: the item, `ConfigDetailInfo` (404, code 20004,
/// when it is not there).
async fn get(State(state): State<AppState>, params: Params) -> Response {
    answer(item_of(&params).and_then(|key| {
        state
            .configs
            .with(&key, |item| detail(&key, item))
            .ok_or_else(|| Error::not_found(NO_CONFIG))
    }))
}

/// `POST`: publishes (`content`, `type`, `appName`, `desc`, `configTags`, `casMd5` as a
/// parameter or header); `true`. With `betaIps` (a header, where Nacos' maintainer client
/// puts it, or a parameter) the item's beta, with `tag` that tag's gray version.
#[tracing::instrument(skip_all)]
async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let published = async {
        let key = item_of(&params)?;
        let draft = config::draft(&params, &headers, state.config_settings.max_content_bytes)?;
        let writes = state.config_writes();
        let by = &caller.0.username;
        match config::gray_rule(&params, &headers)? {
            Some(rule) => {
                let (content, cas) = (draft.content, draft.cas_md5);
                writes
                    .publish_gray(key, rule, content, cas, by, &source.0)
                    .await
            }
            None => writes.publish(key, draft, by, &source.0).await,
        }
    };
    answer(published.await.map(|()| Value::Bool(true)))
}

/// `PUT /config/metadata`: the item's description (`desc`) and tags (`configTags`), its
/// content left as it is (a version in its history, as every write); `true`. 404 (code
/// 20004) when there is no such item; 409 when its content changes meanwhile.
#[tracing::instrument(skip_all)]
async fn metadata(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Response {
    let updated = async {
        let key = item_of(&params)?;
        let desc = params.get("desc");
        if let Some(d) = desc {
            check_text("desc", d, MAX_DESC)?;
        }
        let tags = params
            .get("configTags")
            .map(|raw| check_tags("configTags", raw))
            .transpose()?;
        let (content, md5) = state
            .configs
            .with(&key, |item| (item.content.to_string(), item.md5.clone()))
            .ok_or_else(|| Error::not_found(NO_CONFIG))?;
        let draft = Draft {
            content,
            desc: desc.map(str::to_string),
            tags,
            // Only over the content read here: a publication meanwhile is not undone.
            cas_md5: Some(md5),
            ..Draft::default()
        };
        state
            .config_writes()
            .publish(key, draft, &caller.0.username, &source.0)
            .await
    };
    answer(updated.await.map(|()| Value::Bool(true)))
}

/// `DELETE`: removes (what is not there too); `true`.
#[tracing::instrument(skip_all)]
async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Response {
    let removed = async {
        let key = item_of(&params)?;
        state
            .config_writes()
            .remove(key, &caller.0.username, &source.0)
            .await
    };
    answer(removed.await.map(|()| Value::Bool(true)))
}

/// `DELETE /config/batch?ids=`: removes the items of those ids (the `id` listings
/// show), wherever they are; ids of no item are passed over; `true`. For admins.
#[tracing::instrument(skip_all)]
async fn delete_by_ids(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Response {
    let removed = async {
        let ids = ids_of(&params, "ids")?;
        // Ids as the leader's commit has them when the call came.
        state.store.read_barrier().await?;
        let all = Search::default();
        let found = state
            .configs
            .search(&all, |_, item| ids.contains(&item.id), 1, usize::MAX);
        for (key, _) in found.items {
            state
                .config_writes()
                .remove(key, &caller.0.username, &source.0)
                .await?;
        }
        Ok(Value::Bool(true))
    };
    answer(removed.await)
}

/// `GET /config/list`: a page of the items of `namespaceId` that the caller may read,
/// `search=blur` (default: `dataId` and `groupName` as patterns) or `accurate`,
/// narrowed by `appName`, `configTags` (all of them), `type` (any of a comma-separated
/// list) and `configDetail` (the content holds it; `*` any run); `Page<ConfigBasicInfo>`.
async fn list(State(state): State<AppState>, caller: Caller, params: Params) -> Response {
    answer(search(&state, &caller, &params))
}

/// [`list`]'s page.
fn search(state: &AppState, caller: &Caller, params: &Params) -> Result<Value, Error> {
    let blur = match params.optional("search").unwrap_or("blur") {
        "accurate" => false,
        "blur" => true,
        _ => return Err(Error::illegal("search", "it should be accurate or blur.")),
    };
    let (page_no, page_size) = paging(params)?;
    let tenant = tenant_of(params, NAMESPACE)?;
    let listed = |field: &str| -> Vec<&str> {
        params
            .optional(field)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect()
    };
    let types = listed("type");
    let content = params.optional("configDetail");
    let search = Search {
        namespace: Some(namespace_of(tenant)),
        data_id: params.optional("dataId"),
        group: params.optional(GROUP),
        app_name: params.optional("appName"),
        tags: listed("configTags"),
        blur,
    };
    // Paged after leaving out what the caller may not read.
    let page = state.configs.search(
        &search,
        |key, item| {
            (types.is_empty() || types.contains(&item.r#type.as_str()))
                && content.is_none_or(|c| content_matches(c, &item.content))
                && caller.may_read_config(state, key)
        },
        page_no,
        page_size,
    );
    let rows = page.items.iter().map(|(k, item)| basic(k, item)).collect();
    Ok(page_of(page.total, page_no, page_size, rows))
}

/// `GET /config/listener`: who listens to the item on this node, `ConfigListenerInfo`
/// (`listenersStatus`: client IP → md5 it holds).
async fn listeners(State(state): State<AppState>, params: Params) -> Response {
    answer(item_of(&params).map(|key| {
        let mut all = state.long_polls.listeners(&key);
        all.extend(state.grpc_listeners.listeners(&key));
        let status: Map<String, Value> = all
            .into_iter()
            .map(|l| (ip_of(&l.address), Value::String(l.md5)))
            .collect();
        json!({ "queryType": "config", "listenersStatus": status })
    }))
}

/// `GET /config/beta`: the item's beta as Nacos 3's `ConfigGrayInfo` (the item's
/// detail with the beta's content, `grayName` and `grayRule`); 404, code 20004, when
/// there is none.
async fn beta(State(state): State<AppState>, params: Params) -> Response {
    answer(item_of(&params).and_then(|key| {
        let gray = state
            .configs
            .gray(&key, BETA)
            .ok_or_else(|| Error::not_found(NO_BETA))?;
        Ok(gray_info(&state, &key, &gray))
    }))
}

/// A gray version as Nacos 3's `ConfigGrayInfo`.
fn gray_info(state: &AppState, key: &ConfigKey, gray: &Gray) -> Value {
    let item = state.configs.get(key);
    let rule = json!({
        "type": gray.rule.kind(),
        "version": "1.0.0",
        "expr": gray.rule.expr(),
        "priority": gray.rule.priority(),
    });
    json!({
        "id": item.as_ref().map(|i| i.id.to_string()),
        "namespaceId": key.namespace,
        "groupName": key.group,
        "dataId": key.data_id,
        "md5": gray.md5,
        "type": item.as_ref().map_or("text", |i| i.r#type.as_str()),
        "appName": item.as_ref().map_or("", |i| i.app_name.as_str()),
        "createTime": gray.created_ms,
        "modifyTime": gray.modified_ms,
        "content": &*gray.content,
        "desc": item.as_ref().map_or("", |i| i.desc.as_str()),
        "encryptedDataKey": "",
        "createUser": gray.by,
        "createIp": gray.src_ip,
        "configTags": item.as_ref().map_or("", |i| i.tags.as_str()),
        "grayName": gray.name(),
        "grayRule": rule.to_string(),
    })
}

/// `DELETE /config/beta`: stops the item's beta (its clients read the formal content
/// again); `true`, whether there was one or not, as Nacos answers.
#[tracing::instrument(skip_all)]
async fn stop_beta(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Response {
    let stopped = async {
        let key = item_of(&params)?;
        let writes = state.config_writes();
        writes
            .remove_gray(key, BETA.to_string(), &caller.0.username, &source.0)
            .await
    };
    answer(stopped.await.map(|()| Value::Bool(true)))
}

/// `GET /nacos/v3/admin/cs/listener?ip=&all=&namespaceId=`: what the clients at `ip`
/// listen to on this node, `ConfigListenerInfo` (`listenersStatus`: group key → md5);
/// the public namespace's and `namespaceId`'s, or with `all=true` every one. For admins.
async fn listened_by_ip(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let ip = params.required("ip")?;
        let all = params.boolean("all")?.unwrap_or(false);
        let namespace = match params.optional(NAMESPACE) {
            Some(tenant) => {
                check_tenant(NAMESPACE, tenant)?;
                Some(namespace_of(tenant))
            }
            None => None,
        };
        let mut listened = state.long_polls.listened_by(ip);
        listened.extend(state.grpc_listeners.listened_by(ip));
        let status: Map<String, Value> = listened
            .into_iter()
            .filter(|(key, _)| shown(key, all, namespace))
            .map(|(key, md5)| (group_key(&key), Value::String(md5)))
            .collect();
        Ok(json!({ "queryType": "ip", "listenersStatus": status }))
    })())
}

/// `POST /nacos/v3/admin/cs/ops/localCache`: roster reads from its replicated store;
/// there is no cache to reload. Success, saying so.
async fn local_cache() -> Response {
    success(Value::from(
        "Nothing to reload: roster serves configuration from its replicated store, \
         which is its only copy.",
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn params(query: &str) -> Params {
        Params::parse(Some(query), None).unwrap()
    }

    fn item() -> ConfigItem {
        ConfigItem {
            id: 7,
            content: Arc::from("a: 1\n"),
            md5: "m".into(),
            r#type: "yaml".into(),
            app_name: "shop".into(),
            desc: "d".into(),
            tags: "x,y".into(),
            created_ms: 1,
            modified_ms: 2,
            created_by: "ann".into(),
            modified_by: "bob".into(),
            src_ip: "10.0.0.1".into(),
            owner: None,
        }
    }

    #[test]
    fn items_are_named_by_group_name_and_namespace_id() {
        let key = item_of(&params("dataId=a&groupName=G&namespaceId=public")).unwrap();
        assert_eq!(key, ConfigKey::new("", "G", "a"));
        let key = item_of(&params("dataId=a&namespaceId=dev")).unwrap();
        assert_eq!(key, ConfigKey::new("dev", "DEFAULT_GROUP", "a"));
        for (query, field) in [
            ("groupName=G", "dataId"),
            ("dataId=a&groupName=g%2Fh", "groupName"),
            ("dataId=a&namespaceId=..%2Fx", "namespaceId"),
        ] {
            let e = item_of(&params(query)).unwrap_err();
            assert!(e.message.contains(&format!("'{field}'")), "{query}: {e}");
        }
    }

    #[test]
    fn an_item_has_nacos_3_s_field_names_and_public_spelled_out() {
        let key = ConfigKey::new("", "G", "a.yaml");
        let basic = basic(&key, &item());
        assert_eq!(
            basic,
            json!({
                "id": "7", "namespaceId": "public", "groupName": "G", "dataId": "a.yaml",
                "md5": "m", "type": "yaml", "appName": "shop", "createTime": 1, "modifyTime": 2,
            })
        );
        let detail = detail(&key, &item());
        for (field, want) in [
            ("content", json!("a: 1\n")),
            ("desc", json!("d")),
            ("configTags", json!("x,y")),
            ("createUser", json!("ann")),
            ("createIp", json!("10.0.0.1")),
            ("encryptedDataKey", json!("")),
            ("groupName", json!("G")),
        ] {
            assert_eq!(detail[field], want, "{field}");
        }
    }

    #[test]
    fn versions_and_removed_items_read_as_nacos_3_s_history() {
        let key = ConfigKey::new("dev", "G", "a");
        let at = |id, op, at_ms| Version {
            gray: None,
            id,
            op,
            content: Arc::from("c"),
            md5: format!("m{id}"),
            r#type: "text".into(),
            app_name: String::new(),
            by: "ann".into(),
            src_ip: "10.0.0.1".into(),
            at_ms,
        };
        let v = version(&key, &at(3, Op::Update, 30), false);
        assert_eq!(
            (&v["id"], &v["opType"], &v["publishType"], &v["namespaceId"]),
            (&json!("3"), &json!("U"), &json!("formal"), &json!("dev"))
        );
        assert_eq!(
            (&v["createTime"], &v["srcUser"]),
            (&json!(30), &json!("ann"))
        );
        assert!(v.get("content").is_none());
        assert_eq!(version(&key, &at(3, Op::Update, 30), true)["content"], "c");
        // Newest first: deleted at 50, created at 10 with id 1.
        let versions = [
            at(5, Op::Delete, 50),
            at(3, Op::Update, 30),
            at(1, Op::Insert, 10),
        ];
        let row = removed(&key, &versions).unwrap();
        assert_eq!(
            (
                &row["id"],
                &row["createTime"],
                &row["modifyTime"],
                &row["md5"]
            ),
            (&json!("1"), &json!(10), &json!(50), &json!("m5"))
        );
        // Its creation pruned: no id.
        assert_eq!(removed(&key, &versions[..2]).unwrap()["id"], Value::Null);
        assert_eq!(removed(&key, &[]), None);
    }

    #[test]
    fn ids_are_numbers_and_at_least_one() {
        assert_eq!(ids_of(&params("ids=1,%202,,3"), "ids").unwrap(), [1, 2, 3]);
        for query in ["ids=", "ids=,", "other=1"] {
            let e = ids_of(&params(query), "ids").unwrap_err();
            assert_eq!(e.message, "Param 'ids' is required.", "{query}");
        }
        let e = ids_of(&params("ids=1,x"), "ids").unwrap_err();
        assert!(
            e.message.contains("'ids'") && e.message.contains("'x'"),
            "{e}"
        );
        assert_eq!(id_of(&params("nid=12"), "nid").unwrap(), 12);
        assert!(id_of(&params("nid=-1"), "nid").is_err());
    }

    #[test]
    fn content_patterns_match_parts_in_order() {
        assert!(content_matches("port", "server:\n  port: 80"));
        assert!(content_matches("server*80", "server:\n  port: 80"));
        assert!(content_matches("*", "anything"));
        assert!(!content_matches("80*server", "server:\n  port: 80"));
        assert!(!content_matches("host", "server:\n  port: 80"));
    }

    #[test]
    fn listeners_are_keyed_by_ip_and_group_key() {
        assert_eq!(ip_of("10.0.0.1:5000"), "10.0.0.1");
        assert_eq!(ip_of("[::1]:5000"), "::1");
        assert_eq!(ip_of("10.0.0.1"), "10.0.0.1");
        assert_eq!(ip_of("::1"), "::1");
        let key = ConfigKey::new("", "G+1", "a%b");
        assert_eq!(group_key(&key), "a%25b+G%2B1+public");
        let (public, dev) = (
            ConfigKey::new("", "G", "a"),
            ConfigKey::new("dev", "G", "a"),
        );
        assert!(shown(&public, false, None));
        assert!(!shown(&dev, false, None));
        assert!(shown(&dev, false, Some("dev")));
        assert!(!shown(&dev, false, Some("test")));
        assert!(shown(&dev, true, None));
    }

    #[test]
    fn a_gray_rule_comes_from_beta_ips_as_a_header_or_a_parameter_or_from_a_tag() {
        use crate::services::configs::gray::Rule;
        let rule = |headers: &HeaderMap, query: &str| config::gray_rule(&params(query), headers);
        let mut headers = HeaderMap::new();
        assert_eq!(rule(&headers, "dataId=a").unwrap(), None);
        let beta = |ip: &str| {
            Some(Rule::Beta {
                ips: vec![ip.to_string()],
            })
        };
        assert_eq!(
            rule(&headers, "betaIps=127.0.0.1").unwrap(),
            beta("127.0.0.1")
        );
        assert_eq!(
            rule(&headers, "tag=canary").unwrap(),
            Some(Rule::Tag {
                tag: "canary".into()
            })
        );
        headers.insert("betaips", "127.0.0.2".parse().unwrap());
        assert_eq!(rule(&headers, "").unwrap(), beta("127.0.0.2"));
        headers.insert("betaips", "not-an-ip".parse().unwrap());
        let e = rule(&headers, "").unwrap_err();
        assert!(e.message.contains("'betaIps'"), "{e}");
    }
}
