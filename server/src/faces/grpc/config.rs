//! The Nacos configuration API over gRPC: `ConfigQueryRequest`, `ConfigPublishRequest`
//! (compare-and-set with `casMd5`), `ConfigRemoveRequest` and `ConfigBatchListenRequest`
//! (listen and unlisten), and the push of `ConfigChangeNotifyRequest` to every connection
//! listening to a changed item, acknowledged and resent like naming pushes (the pending
//! pushes and the resends are the connection upkeep's, in the parent module).
//!
//! Every node applies every Raft entry, so every node's store marks every change: each
//! node pushes to its own connections, and a publish on any node reaches the listeners
//! on all of them.
//!
//! A failure answers the reply type with `resultCode` 500 and an `errorCode`, as Nacos
//! does: 400 for a bad parameter (the message names the field), 403 for a missing
//! permission, 300 for a configuration that does not exist, 500 for a compare-and-set
//! that found another md5. Clients read those codes from the reply type; an
//! `ErrorResponse` would be retried three times by nacos-sdk-python 3.x.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::connection::{Connection, Listening, Pushed};
use super::kind::RequestKind;
use super::proto::Payload;
use super::reply::respond;
use super::GrpcServer;
use crate::error::{Error, ErrorKind};
use crate::services::audit::Entry;
use crate::services::auth::permissions::{Action, Resource, DENIED};
use crate::services::auth::Identity;
use crate::services::configs::gray::{Client, Rule, BETA};
use crate::services::configs::validate::{
    check_beta_ips, check_config_group, check_content, check_data_id, check_gray_tag, check_tags,
    check_tenant, check_text, check_type, MAX_APP_NAME, MAX_DESC,
};
use crate::services::configs::writes::Draft;
use crate::services::configs::ConfigKey;
use roster_registry::validate::DEFAULT_GROUP;

/// Nacos' `errorCode` for a configuration that does not exist (`CONFIG_NOT_FOUND`);
/// clients read it as "no such configuration", not as a failure.
const CONFIG_NOT_FOUND: u16 = 300;
/// Nacos' message with it.
const NOT_FOUND_MESSAGE: &str = "config data not exist";
/// Nacos' `errorCode` for a failed publication (`ResponseCode.FAIL`): a compare-and-set
/// that found another md5.
const PUBLISH_FAILED: u16 = 500;

/// Adds to a failed `reply_type` body the fields its clients need to read it at all: the
/// Rust nacos-sdk parses `lastModified` and `beta` of a `ConfigQueryResponse` before it
/// looks at the code.
pub(super) fn complete_reply(reply_type: &str, body: &mut Value) {
    if reply_type == "ConfigQueryResponse" {
        body["lastModified"] = json!(0);
        body["beta"] = json!(false);
    }
}

/// A configuration request body, read leniently: every field optional, `null` accepted,
/// unknown keys ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ConfigRequest {
    data_id: Option<String>,
    group: Option<String>,
    tenant: Option<String>,
    /// A gray-release tag (query, remove).
    tag: Option<String>,
    content: Option<String>,
    cas_md5: Option<String>,
    /// `type`, `appName`, `desc`, `config_tags`, ... (publish).
    addition_map: HashMap<String, Option<String>>,
    listen: Option<bool>,
    config_listen_contexts: Vec<ListenContext>,
}

impl ConfigRequest {
    /// The value of `name` in `additionMap`, if given and not blank.
    fn addition(&self, name: &str) -> Option<&str> {
        let value = self.addition_map.get(name)?.as_deref()?;
        Some(value.trim()).filter(|v| !v.is_empty())
    }

    /// The gray-release tag, if given and not blank.
    fn tag(&self) -> Option<&str> {
        self.tag.as_deref().map(str::trim).filter(|t| !t.is_empty())
    }
}

/// One item of a `ConfigBatchListenRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ListenContext {
    data_id: Option<String>,
    group: Option<String>,
    tenant: Option<String>,
    /// The md5 the client holds (empty: none).
    md5: Option<String>,
}

/// The key of the item `data_id` in `group` (blank: `DEFAULT_GROUP`, as over HTTP) of
/// `tenant`, checked by the store's rules (`prefix` before each field's name in a
/// refusal).
fn item_key(
    prefix: &str,
    data_id: Option<&str>,
    group: Option<&str>,
    tenant: Option<&str>,
) -> Result<ConfigKey, Error> {
    let data_id = data_id.unwrap_or("");
    let group = group
        .filter(|g| !g.trim().is_empty())
        .unwrap_or(DEFAULT_GROUP);
    let tenant = tenant.unwrap_or("");
    check_data_id(&format!("{prefix}dataId"), data_id)?;
    check_config_group(&format!("{prefix}group"), group)?;
    check_tenant(&format!("{prefix}tenant"), tenant)?;
    Ok(ConfigKey::new(tenant, group, data_id))
}

/// The key a request names.
fn request_key(request: &ConfigRequest) -> Result<ConfigKey, Error> {
    let (data_id, group) = (request.data_id.as_deref(), request.group.as_deref());
    item_key("", data_id, group, request.tenant.as_deref())
}

/// Reads a publication: the content and the `additionMap` roster keeps, checked; blank
/// values count as absent (the stored ones are kept). What roster cannot keep is refused
/// rather than dropped: content encrypted with a key it would not store
/// (`encryptedDataKey`). A gray publication (`betaIps`, `tag`) is read by [`gray_rule`].
fn draft(request: &ConfigRequest, max_content_bytes: usize) -> Result<Draft, Error> {
    let content = request.content.as_deref().unwrap_or("");
    check_content("content", content, max_content_bytes)?;
    if request.addition("encryptedDataKey").is_some() {
        let problem = "encrypted configurations are not supported; leave it empty.";
        return Err(Error::illegal("encryptedDataKey", problem));
    }
    let r#type = request.addition("type");
    if let Some(t) = r#type {
        check_type("type", t)?;
    }
    let app_name = request.addition("appName");
    if let Some(a) = app_name {
        check_text("appName", a, MAX_APP_NAME)?;
    }
    let desc = request.addition("desc");
    if let Some(d) = desc {
        check_text("desc", d, MAX_DESC)?;
    }
    let tags = match request.addition("config_tags") {
        Some(t) => Some(check_tags("config_tags", t)?),
        None => None,
    };
    Ok(Draft {
        content: content.to_string(),
        r#type: r#type.map(str::to_string),
        app_name: app_name.map(str::to_string),
        desc: desc.map(str::to_string),
        tags,
        cas_md5: request.cas_md5.clone(),
    })
}

/// The gray rule a publication names: a beta to the addresses in `additionMap.betaIps`,
/// else the tag in `additionMap.tag` or the request's `tag`; `None`: the formal content.
fn gray_rule(request: &ConfigRequest) -> Result<Option<Rule>, Error> {
    if let Some(ips) = request.addition("betaIps") {
        return Ok(Some(check_beta_ips("betaIps", ips)?));
    }
    match request.addition("tag").or_else(|| request.tag()) {
        Some(tag) => Ok(Some(check_gray_tag("tag", tag)?)),
        None => Ok(None),
    }
}

/// The tag a connection carries to the gray rules: its `Vipserver-Tag` label, else
/// Nacos 3's gray label (`nacos.config.gray.label`, sent as `app_nacos.config.gray.label`).
/// Read once per request, with the connection's set-up lock held only for it.
fn gray_label(conn: &Connection) -> Option<String> {
    let setup = conn.setup.lock();
    [
        "Vipserver-Tag",
        "app_nacos.config.gray.label",
        "nacos.config.gray.label",
    ]
    .iter()
    .find_map(|k| setup.labels.get(*k))
    .map(|v| v.trim())
    .filter(|v| !v.is_empty())
    .map(str::to_string)
}

/// A failed `reply_type` with `code` and `message`.
fn failure(reply_type: &str, code: u16, message: &str) -> Payload {
    let mut body =
        json!({ "resultCode": 500, "errorCode": code, "message": message, "success": false });
    complete_reply(reply_type, &mut body);
    Payload::new(reply_type, &body)
}

/// The audit entry of configuration request `kind` when it is a write (a publish or a
/// removal), from its fields as sent; who sent it and the outcome come with
/// [`Entry::answered`].
fn audit_entry(kind: RequestKind, request: &ConfigRequest) -> Option<Entry> {
    kind.audited().then(|| {
        Entry::grpc_config(
            kind.name(),
            request.tenant.as_deref(),
            request.group.as_deref(),
            request.data_id.as_deref(),
        )
    })
}

/// The audit entry of configuration request `kind` refused before it was read (its
/// caller not authenticated), when it is a write: from `body` as far as it reads.
pub(super) fn refused_entry(kind: RequestKind, body: &[u8]) -> Option<Entry> {
    audit_entry(kind, &serde_json::from_slice(body).unwrap_or_default())
}

/// The `errorCode` of `e` as Nacos' configuration handlers answer it.
fn error_code(e: &Error) -> u16 {
    match e.kind {
        ErrorKind::Conflict => PUBLISH_FAILED,
        ErrorKind::NotFound => CONFIG_NOT_FOUND,
        _ => e.grpc_code(),
    }
}

impl GrpcServer {
    /// Answers configuration request `kind` (body `body`) from `identity` on `conn`, as
    /// `reply_type`; records the writes in the audit trail.
    pub(super) async fn config(
        &self,
        remote: SocketAddr,
        conn: &Arc<Connection>,
        identity: &Identity,
        kind: RequestKind,
        reply_type: &'static str,
        body: &[u8],
    ) -> Payload {
        let request: ConfigRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                let kind = kind.name();
                let message = format!("Invalid request: the body is not a {kind}: {e}");
                return failure(reply_type, 400, &message);
            }
        };
        let by = &identity.username;
        let from = remote.ip().to_string();
        let answer = match kind {
            RequestKind::ConfigQuery => self.query_config(conn, identity, &request),
            RequestKind::ConfigPublish => self.publish_config(identity, &request, by, &from).await,
            RequestKind::ConfigRemove => self.remove_config(identity, &request, by, &from).await,
            _ => self.listen_configs(conn, identity, &request),
        };
        let code = answer.as_ref().map_or_else(error_code, |_| 200);
        if let Some(entry) = audit_entry(kind, &request) {
            let entry = entry.answered(identity.username.clone(), remote.ip(), code);
            self.app.audit.record(entry);
        }
        match answer {
            Ok(fields) => respond(reply_type, fields),
            Err(e) => failure(reply_type, code, &e.message),
        }
    }

    /// Refuses `action` on `key` unless `identity` holds it (403, Nacos' message).
    fn permit(&self, identity: &Identity, key: &ConfigKey, action: Action) -> Result<(), Error> {
        let resource = Resource::Config {
            namespace: &key.namespace,
            group: &key.group,
            data_id: &key.data_id,
        };
        if self.app.auth.allowed(identity, &resource, action) {
            Ok(())
        } else {
            Err(Error::forbidden(DENIED))
        }
    }

    /// The item a `ConfigQueryRequest` names, as `conn`'s client reads it: the gray
    /// version it matches (by its address, the request's `tag` or its labels), else
    /// the formal content.
    fn query_config(
        &self,
        conn: &Connection,
        identity: &Identity,
        request: &ConfigRequest,
    ) -> Result<Value, Error> {
        let key = request_key(request)?;
        self.permit(identity, &key, Action::Read)?;
        // The request's tag, else the connection's.
        let ip = conn.remote.ip().to_string();
        let label = match request.tag() {
            Some(_) => None,
            None => gray_label(conn),
        };
        let client = Client {
            ip: &ip,
            tag: request.tag().or(label.as_deref()),
        };
        let served = self.app.configs.read_for(&key, &client);
        let served = served.ok_or_else(|| Error::not_found(NOT_FOUND_MESSAGE))?;
        let tag = served
            .gray
            .as_deref()
            .and_then(|g| g.strip_prefix("tag_"))
            .map(str::to_string);
        let mut answer = json!({
            "content": &*served.content,
            "md5": served.md5,
            "contentType": served.r#type,
            "lastModified": served.modified_ms,
            "encryptedDataKey": "",
            "beta": served.gray.as_deref() == Some(BETA),
        });
        // Nacos leaves out what is null (its Jackson `NON_NULL`); SDKs read `tag` as text.
        if let Some(tag) = tag {
            answer["tag"] = Value::String(tag);
        }
        Ok(answer)
    }

    /// Publishes what a `ConfigPublishRequest` carries, through Raft, as `by` from `from`.
    async fn publish_config(
        &self,
        identity: &Identity,
        request: &ConfigRequest,
        by: &str,
        from: &str,
    ) -> Result<Value, Error> {
        let key = request_key(request)?;
        self.permit(identity, &key, Action::Write)?;
        let draft = draft(request, self.app.config_settings.max_content_bytes)?;
        let writes = self.app.config_writes();
        match gray_rule(request)? {
            Some(rule) => {
                let (content, cas) = (draft.content, draft.cas_md5);
                writes
                    .publish_gray(key, rule, content, cas, by, from)
                    .await?;
            }
            None => writes.publish(key, draft, by, from).await?,
        }
        Ok(json!({}))
    }

    /// Removes the item a `ConfigRemoveRequest` names, or with a `tag` that tag's gray
    /// version only (the item left be).
    async fn remove_config(
        &self,
        identity: &Identity,
        request: &ConfigRequest,
        by: &str,
        from: &str,
    ) -> Result<Value, Error> {
        let key = request_key(request)?;
        self.permit(identity, &key, Action::Write)?;
        let writes = self.app.config_writes();
        match request.tag() {
            Some(tag) => {
                let name = check_gray_tag("tag", tag)?.name();
                writes.remove_gray(key, name, by, from).await?
            }
            None => writes.remove(key, by, from).await?,
        }
        Ok(json!({}))
    }

    /// Listens to (or stops listening to) the items of a `ConfigBatchListenRequest` on
    /// `conn`; answers, when listening, those whose md5 differs from what the client
    /// holds, named as it named them. All or nothing: one item the caller may not read,
    /// or a listen set grown past `--config-max-listeners`, refuses the whole request.
    /// The listens last while the caller may read their items (see `run_config_push`).
    fn listen_configs(
        &self,
        conn: &Arc<Connection>,
        identity: &Identity,
        request: &ConfigRequest,
    ) -> Result<Value, Error> {
        let contexts = &request.config_listen_contexts;
        let max = self.app.config_settings.max_listeners;
        let too_many = |n: usize| {
            let problem = format!(
                "this connection would listen to {n} configurations; \
                 at most {max} are allowed (--config-max-listeners)."
            );
            Error::illegal("configListenContexts", problem)
        };
        if contexts.len() > max {
            return Err(too_many(contexts.len()));
        }
        let prefix = "configListenContexts.";
        let keys = contexts
            .iter()
            .map(|c| {
                item_key(
                    prefix,
                    c.data_id.as_deref(),
                    c.group.as_deref(),
                    c.tenant.as_deref(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        for key in &keys {
            self.permit(identity, key, Action::Read)?;
        }
        if !request.listen.unwrap_or(true) {
            conn.unlisten(&keys);
            return Ok(json!({ "changedConfigs": [] }));
        }
        // One reader for the whole batch.
        let reader = self.app.auth.reader(identity).map(Arc::new);
        let listening = |c: &ListenContext| Listening {
            tenant: c.tenant.clone().unwrap_or_default(),
            md5: c.md5.clone().unwrap_or_default(),
            reader: reader.clone(),
        };
        let items = keys
            .iter()
            .cloned()
            .zip(contexts.iter().map(listening))
            .collect();
        // Listening first, then comparing: a change either lands after the listen (and
        // is pushed) or before the comparison (and is answered).
        conn.listen(items, max).map_err(too_many)?;
        let configs = &self.app.configs;
        let ip = conn.remote.ip().to_string();
        let label = gray_label(conn);
        let client = Client {
            ip: &ip,
            tag: label.as_deref(),
        };
        let changed: Vec<Value> = keys
            .iter()
            .zip(contexts)
            .filter(|(key, c)| configs.is_changed_for(key, c.md5.as_deref().unwrap_or(""), &client))
            .map(|(key, c)| {
                json!({ "dataId": key.data_id, "group": key.group, "tenant": c.tenant.clone().unwrap_or_default() })
            })
            .collect();
        Ok(json!({ "changedConfigs": changed }))
    }

    /// Tells `conn` that `key` changed, if it listens to it, naming the item as the
    /// client did; the push is pending until acknowledged. Returns whether it listens.
    pub(super) fn push_config(
        &self,
        conn: &Arc<Connection>,
        key: &ConfigKey,
        attempt: u32,
    ) -> bool {
        let Some(tenant) = conn.listens_to(key) else {
            return false;
        };
        let request_id = self.connections.next_request_id();
        let body = json!({
            "headers": {},
            "requestId": request_id,
            "module": "config",
            "dataId": key.data_id,
            "group": key.group,
            "tenant": tenant,
        });
        conn.track(&request_id, Pushed::Config(key.clone()), attempt);
        if conn.send(Payload::new("ConfigChangeNotifyRequest", &body)) {
            self.app.metrics.grpc_push("sent");
        } else {
            conn.acknowledge(&request_id);
            self.app.metrics.grpc_push("failed");
        }
        true
    }

    /// Pushes configuration changes to the connections listening to them (and tells
    /// fuzzy watchers of items come and gone), until
    /// `stopping`. The store's change feed has this one consumer. Drops the listens of
    /// those who may no longer read their items as soon as the auth data changes, and
    /// before pushing any change applied after it.
    pub async fn run_config_push(self: Arc<Self>, mut stopping: watch::Receiver<bool>) {
        let configs = self.app.configs.clone();
        let mut access = self.app.auth.changes();
        loop {
            tokio::select! {
                _ = configs.changed() => {}
                Ok(()) = access.changed() => {
                    self.connections.drop_unreadable_listens();
                    continue;
                }
                _ = stopping.changed() => return,
            }
            // Raft applies in commit order: a revocation not swept yet may have been
            // applied before these changes, and its listens must not hear of them.
            if super::push::access_changed(&mut access) {
                self.connections.drop_unreadable_listens();
            }
            let keys = configs.drain_changes();
            if keys.is_empty() {
                continue;
            }
            for conn in self.connections.all() {
                for key in conn.listening(&keys) {
                    self.push_config(&conn, key, 1);
                }
            }
            // Items published first or removed, for the fuzzy watchers.
            self.fuzzy_configs_changed(&keys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> ConfigRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn items_are_named_by_the_store_rules_with_the_field_in_the_refusal() {
        let key = request_key(&request(
            json!({"dataId": "a.yaml", "group": "", "tenant": ""}),
        ))
        .unwrap();
        let named = (
            key.namespace.as_str(),
            key.group.as_str(),
            key.data_id.as_str(),
        );
        assert_eq!(named, ("public", DEFAULT_GROUP, "a.yaml"));
        let e = request_key(&request(json!({"dataId": "a b"}))).unwrap_err();
        assert!(e.message.contains("'dataId'"), "{e}");
        let e = item_key("configListenContexts.", Some("a"), Some("g@"), None).unwrap_err();
        assert!(e.message.contains("'configListenContexts.group'"), "{e}");
    }

    #[test]
    fn a_draft_keeps_what_is_given_and_refuses_what_roster_cannot_keep() {
        let body = |addition: Value| json!({"dataId": "a", "content": "k=1", "casMd5": "", "additionMap": addition});
        let d = draft(
            &request(body(json!({"type": "yaml", "appName": "", "tag": null}))),
            16,
        )
        .unwrap();
        assert_eq!(
            (d.r#type.as_deref(), d.app_name.as_deref()),
            (Some("yaml"), None)
        );
        let d = draft(&request(body(json!({"config_tags": " a, b"}))), 16).unwrap();
        assert_eq!(d.tags.as_deref(), Some("a,b"));
        for (field, value) in [("encryptedDataKey", "k"), ("type", "ya ml")] {
            let e = draft(&request(body(json!({ field: value }))), 16).unwrap_err();
            assert!(e.message.contains(&format!("'{field}'")), "{e}");
        }
        // A gray publication: a beta to addresses, or a tag; each checked.
        let rule = |addition: Value| gray_rule(&request(body(addition)));
        assert_eq!(rule(json!({})).unwrap(), None);
        assert_eq!(
            rule(json!({"betaIps": "127.0.0.2, 127.0.0.1"})).unwrap(),
            Some(Rule::Beta {
                ips: vec!["127.0.0.1".into(), "127.0.0.2".into()]
            })
        );
        assert_eq!(
            rule(json!({"tag": "canary"})).unwrap(),
            Some(Rule::Tag {
                tag: "canary".into()
            })
        );
        for (field, value) in [("betaIps", "127.0.0.1,here"), ("tag", "can ary")] {
            let e = rule(json!({ field: value })).unwrap_err();
            assert!(e.message.contains(&format!("'{field}'")), "{e}");
        }
        let e = draft(&request(json!({"content": "x".repeat(17)})), 16).unwrap_err();
        assert!(e.message.contains("'content'"), "{e}");
    }

    #[test]
    fn failures_answer_nacos_codes_in_a_reply_clients_can_read() {
        assert_eq!(error_code(&Error::conflict("cas")), 500);
        assert_eq!(error_code(&Error::not_found(NOT_FOUND_MESSAGE)), 300);
        assert_eq!(error_code(&Error::forbidden(DENIED)), 403);
        assert_eq!(error_code(&Error::missing("dataId")), 400);
        let reply = failure("ConfigQueryResponse", 300, NOT_FOUND_MESSAGE);
        let body: Value = serde_json::from_slice(reply.body_bytes()).unwrap();
        assert_eq!(
            (body["lastModified"].clone(), body["beta"].clone()),
            (json!(0), json!(false))
        );
    }
}
