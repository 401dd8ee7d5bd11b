//! Export and import of configuration items in Nacos' zip format
//! (`configs::archive`), so that a team moves its items from Nacos in one step:
//!
//! - `GET /nacos/v1/cs/configs?exportV2=true&tenant=` (or `export=true`) — the items of a
//!   namespace, narrowed by `dataId`, `group`, `appName` (`*` patterns) or `ids`
//!   (comma-separated item ids), that the caller may read; Nacos 2.x's format either way.
//! - `POST /nacos/v1/cs/configs?import=true&namespace=&policy=ABORT|SKIP|OVERWRITE` — the
//!   archive as the multipart field `file` (Nacos' console, `curl -F file=@x.zip`) or as
//!   the whole body (`Content-Type: application/zip`). For admins (Nacos asks for write
//!   on the namespace; an import writes many items at once). Every item is checked as a
//!   publication is, and a refusal names the item; nothing is written unless all pass.
//!   `ABORT` (the default) imports nothing when an item exists already and says which
//!   (Nacos imports up to the first one); `SKIP` leaves existing items alone;
//!   `OVERWRITE` replaces them. Answered in Nacos' shape: `{"code":200,"data":
//!   {"succCount","skipCount","failData","skipData"}}`.

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::config::Source;
use super::json_of;
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::services::configs::archive::{self, ArchivedItem};
use crate::services::configs::validate::{
    check_config_group, check_content, check_data_id, check_text, check_type, MAX_APP_NAME,
    MAX_DESC,
};
use crate::services::configs::writes::Draft;
use crate::services::configs::{namespace_of, ConfigKey, Search};
use crate::state::AppState;

/// Largest archive accepted, bytes.
pub const MAX_ARCHIVE_BYTES: usize = 64 * 1024 * 1024;

/// Whether `params` ask for an export.
pub fn is_export(params: &Params) -> bool {
    ["export", "exportV2"]
        .iter()
        .any(|k| params.optional(k) == Some("true"))
}

/// Whether `params` ask for an import.
pub fn is_import(params: &Params) -> bool {
    params.optional("import") == Some("true")
}

/// The export of the items `params` select that `caller` may read.
pub fn export(state: &AppState, caller: &Caller, params: &Params) -> Result<Response, Error> {
    export_in(state, caller, params, "tenant", "group")
}

/// [`export`], the namespace in `tenant_field` and the group in `group_field` (v3:
/// `namespaceId` and `groupName`).
pub(crate) fn export_in(
    state: &AppState,
    caller: &Caller,
    params: &Params,
    tenant_field: &str,
    group_field: &str,
) -> Result<Response, Error> {
    let tenant = params.optional(tenant_field).unwrap_or("");
    crate::services::configs::validate::check_tenant(tenant_field, tenant)?;
    let ids: Option<Vec<&str>> = params.optional("ids").map(|ids| {
        ids.split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .collect()
    });
    let search = Search {
        namespace: Some(namespace_of(tenant)),
        data_id: params.optional("dataId"),
        group: params.optional(group_field),
        app_name: params.optional("appName"),
        tags: Vec::new(),
        blur: true,
    };
    let wanted = |key: &ConfigKey, item: &crate::services::configs::ConfigItem| {
        ids.as_ref()
            .is_none_or(|ids| ids.contains(&item.id.to_string().as_str()))
            && caller.may_read_config(state, key)
    };
    let items = state.configs.search(&search, wanted, 1, usize::MAX).items;
    let bytes = archive::write(&items);
    let name = format!("config_export_{}.zip", roster_registry::clock::now_ms());
    let mut response = Body::from(bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment;filename={name}")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(response)
}

/// What to do with an item that exists already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Place nothing when any exists.
    Abort,
    /// Leave existing items alone.
    Skip,
    /// Replace them.
    Overwrite,
}

impl Policy {
    /// The policy in `policy` (any case; absent: `ABORT`).
    pub(crate) fn of(params: &Params) -> Result<Policy, Error> {
        match params.optional("policy").unwrap_or("ABORT") {
            p if p.eq_ignore_ascii_case("abort") => Ok(Policy::Abort),
            p if p.eq_ignore_ascii_case("skip") => Ok(Policy::Skip),
            p if p.eq_ignore_ascii_case("overwrite") => Ok(Policy::Overwrite),
            _ => Err(Error::illegal(
                "policy",
                "it should be ABORT, SKIP or OVERWRITE.",
            )),
        }
    }
}

/// The archive in the request: the multipart field `file`, or the whole body.
fn archive_of<'a>(headers: &HeaderMap, body: &'a [u8]) -> Result<&'a [u8], Error> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("multipart/form-data") {
        return Ok(body);
    }
    let boundary = content_type
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("boundary="))
        .next()
        .map(|b| b.trim_matches('"'))
        .filter(|b| !b.is_empty())
        .ok_or_else(|| Error::illegal("Content-Type", "multipart without a boundary."))?;
    multipart_file(body, boundary.as_bytes()).ok_or_else(|| Error::missing("file"))
}

/// The content of the part named `file` of a multipart body.
fn multipart_file<'a>(body: &'a [u8], boundary: &[u8]) -> Option<&'a [u8]> {
    let delimiter = [b"--".as_slice(), boundary].concat();
    let mut parts = split(body, &delimiter).into_iter().skip(1);
    parts.find_map(|part| {
        let part = part.strip_prefix(b"\r\n")?;
        let end = find(part, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&part[..end]).to_ascii_lowercase();
        let named_file = head
            .lines()
            .any(|l| l.starts_with("content-disposition") && l.contains("name=\"file\""));
        let content = &part[end + 4..];
        named_file.then(|| content.strip_suffix(b"\r\n").unwrap_or(content))
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn split<'a>(mut hay: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    while let Some(at) = find(hay, delimiter) {
        out.push(&hay[..at]);
        hay = &hay[at + delimiter.len()..];
    }
    out.push(hay);
    out
}

/// Why `item` could not be published, if it could not.
fn refusal(item: &ArchivedItem, max_content: usize) -> Option<String> {
    check_data_id("dataId", &item.data_id)
        .and_then(|_| check_config_group("group", &item.group))
        .and_then(|_| check_content("content", &item.content, max_content))
        .and_then(|_| check_type("type", &item.r#type))
        .and_then(|_| check_text("appName", &item.app_name, MAX_APP_NAME))
        .and_then(|_| check_text("desc", &item.desc, MAX_DESC))
        .err()
        .map(|e| e.message)
}

/// Imports an archive into the namespace `params` name.
pub async fn import(
    state: &AppState,
    caller: &Caller,
    source: &Source,
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let tenant = params.optional_any(&["namespace", "tenant"]).unwrap_or("");
    crate::services::configs::validate::check_tenant("namespace", tenant)?;
    let policy = Policy::of(params)?;
    let data = import_into(state, caller, source, tenant, policy, headers, body).await?;
    Ok(json_of(&json!({
        "code": 200,
        "message": "import succeeded",
        "data": data,
    })))
}

/// Imports the archive in `body` into `tenant` (checked already) as `policy` says;
/// what was placed, as [`place`] answers it.
pub(crate) async fn import_into(
    state: &AppState,
    caller: &Caller,
    source: &Source,
    tenant: &str,
    policy: Policy,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Error> {
    let bytes = to_bytes(body, MAX_ARCHIVE_BYTES).await.map_err(|_| {
        Error::new(
            crate::error::ErrorKind::TooLarge,
            format!("the archive exceeds {MAX_ARCHIVE_BYTES} bytes"),
        )
    })?;
    let max_content = state.config_settings.max_content_bytes;
    let items = archive::read(archive_of(headers, &bytes)?, max_content)
        .map_err(|e| Error::illegal("file", e))?;
    if items.is_empty() {
        return Err(Error::illegal(
            "file",
            "the archive holds no configuration items.",
        ));
    }
    place(state, caller, source, tenant, &items, policy, "file").await
}

/// Publishes `items` into `tenant` as `policy` says, on behalf of `caller`: every item
/// is checked first (a refusal is a 400 on `field` naming the item) and nothing is
/// written unless all pass. Answers Nacos' `{succCount, skipCount, failData,
/// skipData}`.
pub(crate) async fn place(
    state: &AppState,
    caller: &Caller,
    source: &Source,
    tenant: &str,
    items: &[ArchivedItem],
    policy: Policy,
    field: &str,
) -> Result<Value, Error> {
    let max_content = state.config_settings.max_content_bytes;
    let problems: Vec<String> = items
        .iter()
        .filter_map(|i| refusal(i, max_content).map(|p| format!("{}/{}: {p}", i.group, i.data_id)))
        .collect();
    if !problems.is_empty() {
        return Err(Error::illegal(field, problems.join("; ")));
    }
    let key_of = |i: &ArchivedItem| ConfigKey::new(tenant, &i.group, &i.data_id);
    // Which items exist decides the policy: as of the leader's commit when the import
    // came, not as this node holds them (an item published through another node a
    // moment ago is skipped, or aborts the import, rather than being overwritten).
    state.store.read_barrier().await?;
    let existing: Vec<&ArchivedItem> = items
        .iter()
        .filter(|i| state.configs.get(&key_of(i)).is_some())
        .collect();
    let named = |i: &&ArchivedItem| json!({ "dataId": i.data_id, "group": i.group });
    if policy == Policy::Abort && !existing.is_empty() {
        let names: Vec<String> = existing
            .iter()
            .map(|i| format!("{}/{}", i.group, i.data_id))
            .collect();
        return Err(Error::conflict(format!(
            "{} item(s) exist already: {}; nothing was imported (policy=SKIP or OVERWRITE to go on)",
            existing.len(),
            names.join(", ")
        )));
    }
    let mut imported = 0;
    let mut skipped: Vec<Value> = Vec::new();
    for item in items {
        if policy == Policy::Skip && existing.iter().any(|e| std::ptr::eq(*e, item)) {
            skipped.push(named(&item));
            continue;
        }
        let draft = Draft {
            content: item.content.clone(),
            r#type: Some(item.r#type.clone()),
            app_name: Some(item.app_name.clone()),
            desc: Some(item.desc.clone()),
            tags: None,
            cas_md5: None,
        };
        state
            .config_writes()
            .publish(key_of(item), draft, &caller.0.username, &source.0)
            .await?;
        imported += 1;
    }
    Ok(json!({
        "succCount": imported,
        "skipCount": skipped.len(),
        "failData": [],
        "skipData": skipped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_part_of_a_multipart_body_is_found() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\nSKIP\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.zip\"\r\n\
Content-Type: application/zip\r\n\r\nPK\x03\x04zip\r\nbytes\r\n--XyZ--\r\n";
        assert_eq!(
            multipart_file(body, b"XyZ"),
            Some(b"PK\x03\x04zip\r\nbytes".as_slice())
        );
        assert_eq!(multipart_file(body, b"other"), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=XyZ"),
        );
        assert!(archive_of(&headers, body).is_ok());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data"),
        );
        assert!(archive_of(&headers, body).is_err());
    }
}
