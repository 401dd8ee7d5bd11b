//! `/nacos/v1/cs/configs` and its long-polling listener: Nacos v1's configuration API
//! (reads served from this node's copy of the store, writes through Raft by
//! `configs::writes`). The history routes are in [`super::config_history`]; v2's
//! `/nacos/v2/cs/config` (`faces::http::nacos_v2_config`) shares [`named`], [`publish`] and
//! [`remove`].
//!
//! Wire decisions where Nacos is loose or roster differs:
//! - Item and version ids are JSON strings (Nacos serializes its `long` ids with
//!   `ToStringSerializer`); `createTime`/`modifyTime` of the detail are epoch ms numbers,
//!   as Nacos' `ConfigAllInfo` has them.
//! - `show=all` for an item that does not exist is a 404 (Nacos answers 200 and no body).
//! - A listing's `pageSize` above 500 is taken as 500 (the Python SDK asks for 1000).
//! - `appName`, `desc` and the tags, when given (even empty), replace the stored ones;
//!   when absent they are kept, as is the type when `type` is blank.
//! - The long poll holds `min(Long-Pulling-Timeout, 30 s) - 500 ms` (Nacos holds at least
//!   10 s; roster honours shorter timeouts) and ends early, answering nothing changed,
//!   when the node starts shutting down. Without the header it answers at once.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::config_gray::{beta_answer, grays_answer};
pub use super::config_gray::{gray_rule, gray_tag_of};
use super::json_of;
pub use super::page_of;
use crate::error::Error;
use crate::faces::http::guard::{forbidden, Caller};
use crate::faces::http::params::Params;
use crate::services::configs::gray::{Client, BETA};
use crate::services::configs::listen::{self, Listened};
use crate::services::configs::listeners::ListenerList;
use crate::services::configs::validate::{
    check_config_group, check_content, check_data_id, check_gray_tag, check_tags, check_tenant,
    check_text, check_type, MAX_APP_NAME, MAX_DESC,
};
use crate::services::configs::writes::Draft;
use crate::services::configs::{namespace_of, ConfigItem, ConfigKey, Search};
use crate::state::AppState;
use roster_registry::validate::DEFAULT_GROUP;

/// The form field of the long poll.
const LISTENING: &str = "Listening-Configs";
/// The long poll's timeout header, in ms.
const POLL_TIMEOUT: &str = "Long-Pulling-Timeout";
/// Answer the long poll at once (`true`).
const NO_HANGUP: &str = "Long-Pulling-Timeout-No-Hangup";
/// The longest long poll honoured, ms.
const MAX_HOLD_MS: u64 = 30_000;
/// Answered this long before the client's timeout, so that it never gives up first, ms.
const HOLD_MARGIN_MS: u64 = 500;
/// Page size of listings when none is given.
const DEFAULT_PAGE_SIZE: usize = 100;
/// The largest page size taken; larger ones are taken as this.
const MAX_PAGE_SIZE: usize = 500;
/// Nacos' answer for an item that is not there.
pub const NOT_FOUND: &str = "config data not exist";

/// The item `params` name: `dataId`, `group` (blank: `DEFAULT_GROUP`) and the
/// namespace in `tenant_field` (`tenant` in v1, `namespaceId` in v2; blank or `public`:
/// the public namespace), each checked (400 naming it).
pub fn named(params: &Params, tenant_field: &str) -> Result<ConfigKey, Error> {
    named_in(params, tenant_field, "group")
}

/// [`named`], the group in `group_field` (v3: `groupName`).
pub fn named_in(
    params: &Params,
    tenant_field: &str,
    group_field: &str,
) -> Result<ConfigKey, Error> {
    let data_id = params.get("dataId").unwrap_or_default();
    check_data_id("dataId", data_id)?;
    let group = match params.get(group_field) {
        Some(g) if !g.trim().is_empty() => g,
        _ => DEFAULT_GROUP,
    };
    check_config_group(group_field, group)?;
    let tenant = tenant_of(params, tenant_field)?;
    Ok(ConfigKey::new(tenant, group, data_id))
}

/// The tenant in `field`, checked (blank: the public namespace's empty one).
pub fn tenant_of<'p>(params: &'p Params, field: &str) -> Result<&'p str, Error> {
    let tenant = params.optional(field).unwrap_or_default();
    check_tenant(field, tenant)?;
    Ok(tenant)
}

/// The address a request came from, as the history records it (empty when unknown).
pub struct Source(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Source {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string());
        Ok(Source(ip.unwrap_or_default()))
    }
}

/// `GET /nacos/v1/cs/configs`: an item's content (`dataId`, `group`, `tenant`) as the
/// caller's client reads it (a gray version it matches by its address, its `tag`
/// parameter or its `Vipserver-Tag` header, with `isBeta: true` for the beta; else the
/// formal content), its detail (`show=all`), its beta (`beta=true`), every gray version
/// (`grays=true`, roster's), or a listing
/// (`search=accurate|blur`). With `consistent=true` the read waits for a read barrier
/// first: it sees every write acknowledged before it was sent, through any node (a
/// client that reads, then compares and sets, needs that).
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Source(address): Source,
    headers: HeaderMap,
    params: Params,
) -> Result<Response, Error> {
    if let Some(mode) = params.optional("search") {
        return search(&state, &caller, &params, mode);
    }
    if super::config_zip::is_export(&params) {
        return super::config_zip::export(&state, &caller, &params);
    }
    let key = named(&params, "tenant")?;
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    if params.optional("beta") == Some("true") {
        return Ok(beta_answer(&state, &key));
    }
    if params.optional("grays") == Some("true") {
        return Ok(grays_answer(&state, &key));
    }
    if params.optional("show") == Some("all") {
        let detail = state
            .configs
            .with(&key, |item| json_of(&detail(&key, item)));
        return detail.ok_or_else(|| Error::not_found(NOT_FOUND));
    }
    let tag = gray_tag_of(&params, &headers)?;
    let client = Client {
        ip: &address,
        tag: tag.as_deref(),
    };
    let served = state
        .configs
        .read_for(&key, &client)
        .ok_or_else(|| Error::not_found(NOT_FOUND))?;
    let beta = served.gray.as_deref() == Some(BETA);
    Ok(content(
        served.content,
        &served.r#type,
        &served.md5,
        served.modified_ms,
        beta,
    ))
}

/// An item's content as a body, sharing the stored text rather than copying it.
struct Shared(std::sync::Arc<str>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The content as text, with the type, md5 and time of the last change in headers
/// (and `isBeta: true` for a beta).
fn content(
    text: std::sync::Arc<str>,
    r#type: &str,
    md5: &str,
    modified_ms: u64,
    beta: bool,
) -> Response {
    let body = axum::body::Body::from(bytes::Bytes::from_owner(Shared(text)));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    set("config-type", r#type);
    set("content-md5", md5);
    set("last-modified", &http_date(modified_ms));
    if beta {
        set("isbeta", "true");
    }
    no_cache(headers);
    response
}

/// Nacos' headers against caching config answers.
fn no_cache(headers: &mut HeaderMap) {
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    headers.insert(header::EXPIRES, HeaderValue::from_static("0"));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache,no-store"),
    );
}

/// An item as `show=all` answers it (Nacos' `ConfigAllInfo`).
fn detail(key: &ConfigKey, item: &ConfigItem) -> Value {
    json!({
        "id": item.id.to_string(),
        "dataId": key.data_id,
        "group": key.group,
        "content": &*item.content,
        "md5": item.md5,
        "encryptedDataKey": "",
        "tenant": key.tenant(),
        "appName": item.app_name,
        "type": item.r#type,
        "desc": item.desc,
        "configTags": item.tags,
        "createTime": item.created_ms,
        "modifyTime": item.modified_ms,
        "createUser": item.created_by,
        "modifyUser": item.modified_by,
        "createIp": item.src_ip,
        "use": "",
        "effect": "",
        "schema": "",
    })
}

/// A listing row (Nacos' `ConfigInfo`, plus roster's `modifyTime` and `modifyUser`,
/// which the console shows and Nacos clients ignore).
fn row(key: &ConfigKey, item: &ConfigItem) -> Value {
    json!({
        "id": item.id.to_string(),
        "dataId": key.data_id,
        "group": key.group,
        "content": &*item.content,
        "md5": item.md5,
        "encryptedDataKey": "",
        "tenant": key.tenant(),
        "appName": item.app_name,
        "type": item.r#type,
        "modifyTime": item.modified_ms,
        "modifyUser": item.modified_by,
    })
}

/// Page number and size from `pageNo` and `pageSize` (defaults 1 and 100; sizes above
/// 500 taken as 500).
pub fn paging(params: &Params) -> Result<(usize, usize), Error> {
    let page_no = params.page("pageNo", Some(1))?;
    let page_size = params
        .page("pageSize", Some(DEFAULT_PAGE_SIZE))?
        .min(MAX_PAGE_SIZE);
    Ok((page_no, page_size))
}

/// `search=accurate|blur`: the items of `tenant` matching `dataId`, `group` (blank:
/// any), `appName` and `config_tags`, those the caller may read, a page of them.
fn search(
    state: &AppState,
    caller: &Caller,
    params: &Params,
    mode: &str,
) -> Result<Response, Error> {
    let blur = match mode {
        "accurate" => false,
        "blur" => true,
        _ => return Err(Error::illegal("search", "it should be accurate or blur.")),
    };
    let (page_no, page_size) = paging(params)?;
    let tenant = tenant_of(params, "tenant")?;
    let tags = params
        .optional_any(&["config_tags", "configTags"])
        .unwrap_or_default();
    let search = Search {
        namespace: Some(namespace_of(tenant)),
        data_id: params.optional("dataId"),
        group: params.optional("group"),
        app_name: params.optional("appName"),
        tags: tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect(),
        blur,
    };
    // Paged after leaving out what the caller may not read.
    let page = state.configs.search(
        &search,
        |key, _| caller.may_read_config(state, key),
        page_no,
        page_size,
    );
    let rows = page.items.iter().map(|(k, item)| row(k, item)).collect();
    Ok(json_of(&page_of(page.total, page_no, page_size, rows)))
}

/// What `params` say to publish (the item aside), checked: `content` (required, at most
/// `max_content` bytes), `type`, `appName`, `desc`, `config_tags` (or `configTags`), and
/// `casMd5` as a parameter or a header.
pub(crate) fn draft(
    params: &Params,
    headers: &HeaderMap,
    max_content: usize,
) -> Result<Draft, Error> {
    let content = params.get("content").unwrap_or_default();
    check_content("content", content, max_content)?;
    let r#type = params.optional("type");
    if let Some(t) = r#type {
        check_type("type", t)?;
    }
    let text = |field: &str, max: usize| -> Result<Option<String>, Error> {
        let value = params.get(field);
        if let Some(v) = value {
            check_text(field, v, max)?;
        }
        Ok(value.map(str::to_string))
    };
    let tags = ["config_tags", "configTags"]
        .into_iter()
        .find_map(|field| Some((field, params.get(field)?)))
        .map(|(field, raw)| check_tags(field, raw))
        .transpose()?;
    let cas_md5 = params.optional("casMd5").or_else(|| {
        headers
            .get("casmd5")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    });
    Ok(Draft {
        content: content.to_string(),
        r#type: r#type.map(str::to_string),
        app_name: text("appName", MAX_APP_NAME)?,
        desc: text("desc", MAX_DESC)?,
        tags,
        cas_md5: cas_md5.map(str::to_string),
    })
}

/// Publishes what `params` say to the item they name (the namespace in `tenant_field`),
/// on behalf of `caller` from `source`: its formal content, or a gray version
/// ([`gray_rule`]: a beta by `betaIps`, a tag by `tag`). Nothing is proposed unless
/// every field passes.
pub async fn publish(
    state: &AppState,
    caller: &Caller,
    source: &Source,
    params: &Params,
    headers: &HeaderMap,
    tenant_field: &str,
) -> Result<(), Error> {
    let key = named(params, tenant_field)?;
    let draft = draft(params, headers, state.config_settings.max_content_bytes)?;
    let writes = state.config_writes();
    let by = &caller.0.username;
    match gray_rule(params, headers)? {
        Some(rule) => {
            let (content, cas) = (draft.content, draft.cas_md5);
            writes
                .publish_gray(key, rule, content, cas, by, &source.0)
                .await
        }
        None => writes.publish(key, draft, by, &source.0).await,
    }
}

/// Removes the item `params` name (the namespace in `tenant_field`) with its gray
/// versions, or only its beta (`beta=true`, Nacos' stop-beta) or one tag's version
/// (`tag`); removing what is not there is no error, as in Nacos.
pub async fn remove(
    state: &AppState,
    caller: &Caller,
    source: &Source,
    params: &Params,
    tenant_field: &str,
) -> Result<(), Error> {
    let key = named(params, tenant_field)?;
    let writes = state.config_writes();
    let by = &caller.0.username;
    if params.optional("beta") == Some("true") {
        return writes
            .remove_gray(key, BETA.to_string(), by, &source.0)
            .await;
    }
    match params.optional("tag") {
        Some(tag) => {
            let name = check_gray_tag("tag", tag)?.name();
            writes.remove_gray(key, name, by, &source.0).await
        }
        None => writes.remove(key, by, &source.0).await,
    }
}

/// `POST /nacos/v1/cs/configs`: publishes; `true`. A `casMd5` the stored md5 is not is
/// a 409. With `import=true`, imports an archive ([`super::config_zip`]).
#[tracing::instrument(skip_all)]
pub async fn post(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    headers: HeaderMap,
    params: Params,
    request: axum::extract::Request,
) -> Result<Response, Error> {
    if super::config_zip::is_import(&params) {
        let body = request.into_body();
        return super::config_zip::import(&state, &caller, &source, &params, &headers, body).await;
    }
    publish(&state, &caller, &source, &params, &headers, "tenant").await?;
    Ok("true".into_response())
}

/// `DELETE /nacos/v1/cs/configs`: removes; `true`.
#[tracing::instrument(skip_all)]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Result<&'static str, Error> {
    remove(&state, &caller, &source, &params, "tenant").await?;
    Ok("true")
}

/// How long a long poll may be held: `Long-Pulling-Timeout` (ms) up to 30 s, less a
/// margin; zero without the header (a short poll) or with
/// `Long-Pulling-Timeout-No-Hangup: true`.
fn hold_of(headers: &HeaderMap) -> Result<Duration, Error> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if text(NO_HANGUP).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(Duration::ZERO);
    }
    let Some(raw) = text(POLL_TIMEOUT) else {
        return Ok(Duration::ZERO);
    };
    let ms: u64 = raw
        .parse()
        .map_err(|_| Error::illegal(POLL_TIMEOUT, "it should be a number of milliseconds."))?;
    Ok(Duration::from_millis(
        ms.min(MAX_HOLD_MS).saturating_sub(HOLD_MARGIN_MS),
    ))
}

/// `POST /nacos/v1/cs/configs/listener`: answers the listened items whose md5 is not the
/// one the listener holds — at once when there are any, else as soon as a change makes
/// one differ, else empty when the hold ([`hold_of`]) runs out. Every listened item must
/// be readable by the caller (403 otherwise).
#[tracing::instrument(skip_all)]
pub async fn listener(
    State(state): State<AppState>,
    caller: Caller,
    Source(address): Source,
    headers: HeaderMap,
    params: Params,
) -> Result<Response, Error> {
    let raw = params
        .get(LISTENING)
        .filter(|raw| !raw.is_empty())
        .ok_or_else(|| Error::missing(LISTENING))?;
    let listened = listen::parse(LISTENING, raw, state.config_settings.max_listeners)?;
    let hold = hold_of(&headers)?;
    let tag = gray_tag_of(&params, &headers)?;
    // Keys made once: each change is checked without allocating.
    let keys: Vec<ConfigKey> = listened.iter().map(Listened::key).collect();
    if !keys.iter().all(|key| caller.may_read_config(&state, key)) {
        return Err(forbidden());
    }
    // Listed while held, for the listener query (and the console).
    let _held = (!hold.is_zero()).then(|| {
        let client = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .chars()
            .take(128)
            .collect();
        let items = keys
            .iter()
            .cloned()
            .zip(listened.iter().map(|l| l.md5.clone()))
            .collect();
        state.long_polls.hold(address.clone(), client, items)
    });
    // Compared with what this client reads: a gray version it matches, or the formal.
    let client = Client {
        ip: &address,
        tag: tag.as_deref(),
    };
    // Subscribed before the first look, so that no change falls between the two.
    let mut changes = state.configs.watch();
    let mut closing = state.events.closing();
    let mut deadline = std::pin::pin!(tokio::time::sleep(hold));
    loop {
        let changed: Vec<&Listened> = listened
            .iter()
            .zip(&keys)
            .filter(|(l, key)| state.configs.is_changed_for(key, &l.md5, &client))
            .map(|(l, _)| l)
            .collect();
        if !changed.is_empty() || hold.is_zero() {
            return Ok(poll_answer(listen::answer(&changed)));
        }
        tokio::select! {
            // (A store or node that went away disables its branch.)
            Ok(()) = changes.changed() => {}
            () = &mut deadline => break,
            Ok(_) = closing.wait_for(|c| *c) => break,
        }
    }
    Ok(poll_answer(String::new()))
}

/// `GET /nacos/v1/cs/configs/listener?dataId&group&tenant`: who listens to the item on
/// this node — the HTTP long polls held now and the gRPC connections that listen — in
/// Nacos' shape (`lisentersGroupkeyStatus`: address → md5 held, Nacos' spelling) and as
/// roster's `listeners` list (address, protocol, client, md5, whether it is current).
/// Per node: a client listens on the node it is connected to.
pub async fn listeners(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = named(&params, "tenant")?;
    let current = state.configs.md5(&key).unwrap_or_default();
    let mut all = state.long_polls.listeners(&key);
    all.extend(state.grpc_listeners.listeners(&key));
    let by_address: serde_json::Map<String, Value> = all
        .iter()
        .map(|l| (l.address.clone(), Value::String(l.md5.clone())))
        .collect();
    let list: Vec<Value> = all
        .iter()
        .map(|l| {
            json!({
                "address": l.address,
                "protocol": l.protocol,
                "client": l.client,
                "md5": l.md5,
                "current": l.md5 == current,
            })
        })
        .collect();
    Ok(json_of(&json!({
        "collectStatus": 200,
        "queryType": "config",
        "lisentersGroupkeyStatus": by_address,
        "listeners": list,
    })))
}

/// A long poll's answer: the changed items, URL-encoded (empty: none), not cached.
fn poll_answer(body: String) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    no_cache(headers);
    response
}

/// `ms` since the epoch as an HTTP date (`Mon, 01 Jan 2024 00:00:00 GMT`).
pub fn http_date(ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, secs) = (ms / 86_400_000, ms / 1000 % 86_400);
    let (year, month, day) = roster_registry::clock::civil(days);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// `ms` since the epoch as Nacos' JSON timestamps read, in UTC
/// (`2024-01-01T00:00:00.000+00:00`).
pub fn iso_time(ms: u64) -> String {
    let (days, secs) = (ms / 86_400_000, ms / 1000 % 86_400);
    let (year, month, day) = roster_registry::clock::civil(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> Params {
        Params::parse(Some(query), None).unwrap()
    }

    #[test]
    fn times_read_as_http_dates_and_iso_strings() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            http_date(1_704_067_200_000),
            "Mon, 01 Jan 2024 00:00:00 GMT"
        );
        assert_eq!(
            http_date(1_709_210_096_789),
            "Thu, 29 Feb 2024 12:34:56 GMT"
        );
        assert_eq!(iso_time(1_709_210_096_789), "2024-02-29T12:34:56.789+00:00");
        assert_eq!(iso_time(951_782_400_000), "2000-02-29T00:00:00.000+00:00");
    }

    #[test]
    fn items_are_named_by_data_id_group_and_tenant() {
        let key = named(&params("dataId=a.yaml"), "tenant").unwrap();
        assert_eq!(
            (
                key.namespace.as_str(),
                key.group.as_str(),
                key.data_id.as_str()
            ),
            ("public", DEFAULT_GROUP, "a.yaml")
        );
        let key = named(&params("dataId=a&group=g&namespaceId=dev"), "namespaceId").unwrap();
        assert_eq!((key.namespace.as_str(), key.group.as_str()), ("dev", "g"));
        for (query, field) in [
            ("dataId=a%20b", "dataId"),
            ("group=g", "dataId"),
            ("dataId=a&group=g%2Fh", "group"),
            ("dataId=a&tenant=..%2Fx", "tenant"),
        ] {
            let e = named(&params(query), "tenant").unwrap_err();
            assert!(e.message.contains(&format!("'{field}'")), "{query}: {e}");
        }
    }

    #[test]
    fn the_hold_is_capped_and_short_polls_answer_at_once() {
        let hold = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (k, v) in pairs {
                headers.insert(*k, HeaderValue::from_static(v));
            }
            hold_of(&headers)
        };
        assert_eq!(hold(&[]).unwrap(), Duration::ZERO);
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            hold(&[("long-pulling-timeout", "30000")]).unwrap(),
            ms(29_500)
        );
        assert_eq!(
            hold(&[("long-pulling-timeout", "90000")]).unwrap(),
            ms(29_500)
        );
        assert_eq!(hold(&[("long-pulling-timeout", "1500")]).unwrap(), ms(1000));
        assert_eq!(hold(&[("long-pulling-timeout", "100")]).unwrap(), ms(0));
        let no_hangup = [
            ("long-pulling-timeout", "30000"),
            ("long-pulling-timeout-no-hangup", "true"),
        ];
        assert_eq!(hold(&no_hangup).unwrap(), Duration::ZERO);
        hold(&[("long-pulling-timeout", "soon")]).unwrap_err();
    }

    #[test]
    fn a_draft_checks_every_field() {
        let headers = HeaderMap::new();
        let d = draft(
            &params("content=a%3D1&type=yaml&configTags=x,%20y"),
            &headers,
            64,
        )
        .unwrap();
        assert_eq!(
            (d.content.as_str(), d.r#type.as_deref(), d.tags.as_deref()),
            ("a=1", Some("yaml"), Some("x,y"))
        );
        assert_eq!((d.app_name, d.desc, d.cas_md5), (None, None, None));
        let mut headers = HeaderMap::new();
        headers.insert("casmd5", HeaderValue::from_static("abc"));
        let d = draft(&params("content=x&desc="), &headers, 64).unwrap();
        assert_eq!(
            (d.cas_md5.as_deref(), d.desc.as_deref()),
            (Some("abc"), Some(""))
        );
        for (query, field) in [
            ("content=%20", "content"),
            ("content=xxxxxxxxx", "content"),
            ("content=x&type=a%20b", "type"),
            ("content=x&config_tags=1,2,3,4,5,6", "config_tags"),
            ("content=x&appName=a%07", "appName"),
        ] {
            let e = draft(&params(query), &HeaderMap::new(), 8).unwrap_err();
            assert!(e.message.contains(&format!("'{field}'")), "{query}: {e}");
        }
    }
}
