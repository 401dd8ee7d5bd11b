//! Nacos (or another roster) as a source, through the Nacos Open API v1.
//!
//! With a `username`, the source logs in (`POST /nacos/v1/auth/login`), sends the
//! `accessToken` on every call, logs in again before the token's TTL runs out and once
//! more when a call is refused with 401/403. Namespaces come from the `namespace`
//! parameter (comma-separated ids) or `/nacos/v1/console/namespaces`; the services of a
//! namespace from `/nacos/v1/ns/catalog/services` (every group), or, on a server without
//! it, from `/nacos/v1/ns/service/list` for each group of the `group` parameter
//! (default `DEFAULT_GROUP`); pages of 100. Instances come from
//! `/nacos/v1/ns/instance/list?healthyOnly=false`. Dubbo consumer registrations
//! (`consumers:*`) are skipped.
//!
//! Nacos v1 has no change feed for a syncer, so `watch` polls: every few seconds it reads
//! the source again and reports the services whose instance lists differ from the last
//! ones reported (and services gone, as empty).
//!
//! Services keep their source namespace and group; the public namespace, `""` on Nacos
//! 1.x/2.x, is reported (and queried) as `public`. Instances copy 1:1: cluster, ip, port,
//! weight, healthy, enabled, metadata; source id `instanceId`.
//!
//! With `configs=true` the source also reads every configuration item of those
//! namespaces (`/nacos/v1/cs/configs?search=accurate`, content included, pages of 100)
//! when it lists, and every [`CONFIG_POLL`] while it watches, reporting the whole set
//! when it differs from the last one reported. The group filter does not apply to
//! configuration items (their groups are not service groups).
//!
//! URL: `nacos://[user:password@]host:8848[,host:8848]?namespace=a,b&group=G&configs=true`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::{sleep_until, Instant};

use crate::rest::{fetch_all, json_text, query, Reply, Rest};
use crate::{
    Filter, ServiceName, Services, Snapshot, Source, SourceConfig, SourceError, SourceInstance,
    SourceUrl, Update,
};

/// Time between two polls.
const POLL: Duration = Duration::from_millis(2500);
/// Time between two reads of the configuration items while watching.
pub const CONFIG_POLL: Duration = Duration::from_secs(10);
/// How long `watch` polls without finding a change before answering "nothing changed".
const IDLE: Duration = Duration::from_secs(30);
/// Timeout of one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Services per page.
const PAGE_SIZE: usize = 100;
/// Pages read at most per listing (a million services): a guard against a server that
/// never stops answering.
const MAX_PAGES: usize = 10_000;
/// Instance lists read at once.
const CONCURRENCY: usize = 8;
/// Token TTL assumed when the login answer has none (Nacos' default, seconds).
const DEFAULT_TOKEN_TTL: u64 = 18_000;
/// Namespace id of the public namespace (roster and Nacos 3; Nacos 1.x/2.x list it as
/// `""` and accept `public` too).
const PUBLIC_NAMESPACE: &str = "public";
/// Group used when the `group` parameter is absent and services are listed per group.
const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// Cluster of instances that name none.
const DEFAULT_CLUSTER: &str = "DEFAULT";
/// Prefix of Dubbo consumer registrations, never imported.
const CONSUMERS_PREFIX: &str = "consumers:";

/// Reads a Nacos cluster (or a roster cluster through its Nacos API).
pub struct NacosSource {
    api: Api,
    filter: Filter,
    /// `namespace` parameter: read only these namespace ids.
    namespaces: Option<Vec<String>>,
    /// `group` parameter: read only these groups.
    groups: Option<Vec<String>>,
    /// What was last reported, per service; `None` before the first list.
    known: Option<Services>,
    /// When the next poll is due.
    next_poll: Instant,
    /// `configs=true`: the configuration items are read too.
    configs: bool,
    /// The configuration items last reported.
    known_configs: Option<Vec<SourceConfig>>,
    /// When the configuration items are read next while watching.
    next_config_poll: Instant,
}

impl NacosSource {
    /// A source for `url` (`namespace`, `group`, `username`, `password` parameters),
    /// reading the services `filter` admits. Connects on the first `list`.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        let credentials = url.param("username").map(|user| {
            (
                user.to_string(),
                url.param("password").unwrap_or_default().to_string(),
            )
        });
        let namespaces = url.param("namespace").map(|list| {
            split_list(list)
                .into_iter()
                .map(|ns| namespace_id(&ns))
                .collect()
        });
        let configs = match url.param("configs") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(SourceError::Config(format!(
                    "configs={other}: use configs=true or configs=false"
                )))
            }
        };
        Ok(Self {
            api: Api::new(url, credentials)?,
            filter: filter.clone(),
            namespaces,
            groups: url.param("group").map(split_list),
            known: None,
            next_poll: Instant::now(),
            configs,
            known_configs: None,
            next_config_poll: Instant::now(),
        })
    }

    /// The namespaces to read: the `namespace` parameter's, or every one.
    async fn namespace_ids(&self) -> Result<Vec<String>, SourceError> {
        match &self.namespaces {
            Some(list) => Ok(list.clone()),
            None => self.api.namespaces().await,
        }
    }

    /// Every configuration item of the namespaces read, sorted.
    async fn read_configs(&self) -> Result<Vec<SourceConfig>, SourceError> {
        let mut all = Vec::new();
        for ns in self.namespace_ids().await? {
            all.extend(self.api.configs(&ns).await?);
        }
        all.sort_by(|a, b| {
            (&a.namespace, &a.group, &a.data_id).cmp(&(&b.namespace, &b.group, &b.data_id))
        });
        Ok(all)
    }

    /// Every admitted service of the source with its instances.
    async fn read(&self) -> Result<Services, SourceError> {
        let namespaces = self.namespace_ids().await?;
        let mut names = Vec::new();
        for ns in namespaces {
            for (group, name) in self.api.services(&ns, self.groups.as_deref()).await? {
                if !name.starts_with(CONSUMERS_PREFIX) && self.filter.admits(&name) {
                    names.push(ServiceName {
                        namespace: Some(ns.clone()),
                        group: Some(group),
                        name,
                    });
                }
            }
        }
        let api = self.api.clone();
        let lists = fetch_all(names, CONCURRENCY, move |service| {
            let api = api.clone();
            async move { api.instances(&service).await }
        })
        .await?;
        Ok(lists.into_iter().collect())
    }
}

#[async_trait::async_trait]
impl Source for NacosSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        self.known = None;
        self.known_configs = None;
        let services = self.read().await?;
        let configs = if self.configs {
            Some(self.read_configs().await?)
        } else {
            None
        };
        self.known = Some(services.clone());
        self.known_configs = configs.clone();
        self.next_poll = Instant::now() + POLL;
        self.next_config_poll = Instant::now() + CONFIG_POLL;
        Ok(Snapshot {
            services,
            partial: false,
            configs,
        })
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        let deadline = Instant::now() + IDLE;
        loop {
            if self.known.is_none() {
                return Ok(Update::Resync);
            }
            sleep_until(self.next_poll).await;
            self.next_poll = Instant::now() + POLL;
            // Configuration items first when due, so that services changing at every
            // poll cannot starve them.
            if self.configs && Instant::now() >= self.next_config_poll {
                self.next_config_poll = Instant::now() + CONFIG_POLL;
                let current = self.read_configs().await?;
                if self.known_configs.as_ref() != Some(&current) {
                    self.known_configs = Some(current.clone());
                    return Ok(Update::Configs(current));
                }
            }
            let current = self.read().await?;
            let Some(known) = self.known.as_mut() else {
                return Ok(Update::Resync);
            };
            let changes = diff(known, &current);
            *known = current;
            if !changes.is_empty() || Instant::now() >= deadline {
                return Ok(Update::Services(changes));
            }
        }
    }
}

/// The services of `new` whose lists differ from `old`'s, and those of `old` that are
/// gone (as empty lists).
fn diff(old: &Services, new: &Services) -> Services {
    let mut changes: Services = new
        .iter()
        .filter(|(name, list)| old.get(*name) != Some(*list))
        .map(|(name, list)| (name.clone(), list.clone()))
        .collect();
    for name in old.keys() {
        if !new.contains_key(name) {
            changes.insert(name.clone(), Vec::new());
        }
    }
    changes
}

/// `a, b,,c` as `["a", "b", "c"]`.
fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A namespace id as roster and every Nacos version accept it: `""` is `public`.
fn namespace_id(id: &str) -> String {
    if id.trim().is_empty() {
        PUBLIC_NAMESPACE.to_string()
    } else {
        id.trim().to_string()
    }
}

// ---------------------------------------------------------------------------------------
// HTTP calls

/// The calls this source makes. Cheap to clone; clones share the token.
#[derive(Clone)]
struct Api {
    rest: Rest,
    /// `username`, `password`: log in when present.
    credentials: Option<(String, String)>,
    /// The current access token. Held across the login call so that concurrent reads
    /// log in once.
    token: Arc<Mutex<Option<Token>>>,
}

/// A service as listed: (group, name).
type Row = (String, String);
/// One page of a service listing: the total count, and the page's rows.
type Page = (usize, Vec<Row>);

/// An access token and when to replace it.
#[derive(Clone, Debug)]
struct Token {
    value: String,
    refresh_at: Instant,
}

impl Api {
    fn new(url: &SourceUrl, credentials: Option<(String, String)>) -> Result<Self, SourceError> {
        Ok(Self {
            rest: Rest::new(url, "", &[], None)?,
            credentials,
            token: Arc::new(Mutex::new(None)),
        })
    }

    /// `GET path` with `pairs` and the access token. A 401/403 is retried once with a
    /// fresh token. Answers of any status below 500 are returned.
    async fn get(&self, path: &str, pairs: &[(&str, &str)]) -> Result<Reply, SourceError> {
        let token = self.token(None).await?;
        let reply = self.get_with(path, pairs, token.as_deref()).await?;
        if !matches!(reply.status, 401 | 403) || token.is_none() {
            return Ok(reply);
        }
        tracing::debug!(path, "nacos refused the token; logging in again");
        let fresh = self.token(token.as_deref()).await?;
        self.get_with(path, pairs, fresh.as_deref()).await
    }

    async fn get_with(
        &self,
        path: &str,
        pairs: &[(&str, &str)],
        token: Option<&str>,
    ) -> Result<Reply, SourceError> {
        let mut all = pairs.to_vec();
        if let Some(token) = token {
            all.push(("accessToken", token));
        }
        self.rest
            .get(&format!("{path}{}", query(&all)), CALL_TIMEOUT)
            .await
    }

    /// The token to use; `None` without credentials. Logs in when there is none, when
    /// it is due for refresh, or when it is `refused` (unless another caller replaced
    /// it already).
    async fn token(&self, refused: Option<&str>) -> Result<Option<String>, SourceError> {
        let Some((user, password)) = &self.credentials else {
            return Ok(None);
        };
        let mut current = self.token.lock().await;
        if let Some(t) = current.as_ref() {
            let still_good = Instant::now() < t.refresh_at && refused != Some(t.value.as_str());
            if still_good {
                return Ok(Some(t.value.clone()));
            }
        }
        let fresh = self.login(user, password).await?;
        let value = fresh.value.clone();
        *current = Some(fresh);
        Ok(Some(value))
    }

    /// `POST /nacos/v1/auth/login`.
    async fn login(&self, user: &str, password: &str) -> Result<Token, SourceError> {
        let form = query(&[("username", user), ("password", password)]);
        let form = form.trim_start_matches('?').to_string();
        let reply = self
            .rest
            .post_form("/nacos/v1/auth/login", form, CALL_TIMEOUT)
            .await?;
        if !reply.is_success() {
            return Err(SourceError::Refused(format!(
                "login as '{user}' failed: {}",
                reply.describe()
            )));
        }
        let login: Login = reply.json()?;
        let value = login
            .access_token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| SourceError::Invalid(format!("{}: no accessToken", reply.what)))?;
        let ttl = login
            .token_ttl
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_TOKEN_TTL);
        // Replace it at four fifths of its life, well before it expires.
        let refresh_in = Duration::from_secs(ttl) * 4 / 5;
        Ok(Token {
            value,
            refresh_at: Instant::now() + refresh_in,
        })
    }

    /// Every namespace id (`/nacos/v1/console/namespaces`).
    async fn namespaces(&self) -> Result<Vec<String>, SourceError> {
        let reply = self.get("/nacos/v1/console/namespaces", &[]).await?;
        let reply = reply.success().map_err(|e| {
            SourceError::Refused(format!(
                "{e} (name the namespaces with ?namespace=a,b to skip this call)"
            ))
        })?;
        parse_namespaces(&reply.json()?)
            .ok_or_else(|| SourceError::Invalid(format!("{}: no namespace list", reply.what)))
    }

    /// `(group, name)` of every service of `ns` (of `groups` only, when given).
    async fn services(&self, ns: &str, groups: Option<&[String]>) -> Result<Vec<Row>, SourceError> {
        let catalog = self
            .pages(
                "/nacos/v1/ns/catalog/services",
                &[("withInstances", "false"), ("namespaceId", ns)],
                parse_catalog_page,
            )
            .await?;
        if let Some(rows) = catalog {
            let wanted = |g: &String| groups.is_none_or(|list| list.contains(g));
            return Ok(rows.into_iter().filter(|(g, _)| wanted(g)).collect());
        }
        // No catalog API: list group by group.
        let default = [DEFAULT_GROUP.to_string()];
        let mut rows = Vec::new();
        for group in groups.unwrap_or(&default) {
            let page = self
                .pages(
                    "/nacos/v1/ns/service/list",
                    &[("groupName", group), ("namespaceId", ns)],
                    parse_service_list_page,
                )
                .await?
                .ok_or_else(|| {
                    SourceError::Refused(
                        "the server has neither /nacos/v1/ns/catalog/services nor /nacos/v1/ns/service/list"
                            .into(),
                    )
                })?;
            rows.extend(page.into_iter().map(|(_, name)| (group.clone(), name)));
        }
        Ok(rows)
    }

    /// Every page of `path`; `None` when the server does not have it (404, 405, 501).
    async fn pages(
        &self,
        path: &str,
        pairs: &[(&str, &str)],
        read: fn(&Value) -> Option<Page>,
    ) -> Result<Option<Vec<Row>>, SourceError> {
        let size = PAGE_SIZE.to_string();
        let mut rows = Vec::new();
        for page_no in 1..=MAX_PAGES {
            let page_text = page_no.to_string();
            let mut all = pairs.to_vec();
            all.extend([("pageNo", page_text.as_str()), ("pageSize", size.as_str())]);
            let reply = match self.get(path, &all).await {
                Ok(r) if page_no == 1 && matches!(r.status, 404 | 405) => return Ok(None),
                Err(SourceError::Unreachable(e)) if page_no == 1 && e.contains("HTTP 501") => {
                    return Ok(None)
                }
                other => other?.success()?,
            };
            let (count, page) = read(&reply.json()?).ok_or_else(|| {
                SourceError::Invalid(format!("{}: not a service page", reply.what))
            })?;
            let last = page.len() < PAGE_SIZE;
            rows.extend(page);
            if last || rows.len() >= count {
                return Ok(Some(rows));
            }
        }
        Err(SourceError::Invalid(format!(
            "{path}: more than {MAX_PAGES} pages of services"
        )))
    }

    /// Every configuration item of namespace `ns`, content included.
    async fn configs(&self, ns: &str) -> Result<Vec<SourceConfig>, SourceError> {
        // Nacos 1.x and 2.x hold the public namespace's items under the empty tenant.
        let tenant = if ns == PUBLIC_NAMESPACE { "" } else { ns };
        let size = PAGE_SIZE.to_string();
        let mut out = Vec::new();
        for page_no in 1..=MAX_PAGES {
            let page_text = page_no.to_string();
            let reply = self
                .get(
                    "/nacos/v1/cs/configs",
                    &[
                        ("search", "accurate"),
                        ("dataId", ""),
                        ("group", ""),
                        ("tenant", tenant),
                        ("pageNo", &page_text),
                        ("pageSize", &size),
                    ],
                )
                .await?
                .success()?;
            let doc: Value = reply.json()?;
            let items = doc
                .get("pageItems")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    SourceError::Invalid(format!("{}: not a configuration page", reply.what))
                })?;
            let total = doc
                .get("totalCount")
                .and_then(|c| c.as_u64().or_else(|| json_text(c).parse().ok()))
                .map_or(usize::MAX, |c| c as usize);
            let last = items.len() < PAGE_SIZE;
            out.extend(items.iter().filter_map(|item| map_config(item, ns)));
            if last || out.len() >= total {
                return Ok(out);
            }
        }
        Err(SourceError::Invalid(format!(
            "/nacos/v1/cs/configs: more than {MAX_PAGES} pages of configuration items"
        )))
    }

    /// The instances of `service`, sorted by cluster, ip and port.
    async fn instances(&self, service: &ServiceName) -> Result<Vec<SourceInstance>, SourceError> {
        let ns = service.namespace.as_deref().unwrap_or(PUBLIC_NAMESPACE);
        let group = service.group.as_deref().unwrap_or(DEFAULT_GROUP);
        let reply = self
            .get(
                "/nacos/v1/ns/instance/list",
                &[
                    ("serviceName", &service.name),
                    ("groupName", group),
                    ("namespaceId", ns),
                    ("healthyOnly", "false"),
                ],
            )
            .await?;
        // Gone between listing and reading: no instances.
        if reply.status == 404 {
            return Ok(Vec::new());
        }
        let list: InstanceList = reply.success()?.json()?;
        let grouped = format!("{group}@@{}", service.name);
        let mut out: Vec<SourceInstance> = list
            .hosts
            .unwrap_or_default()
            .iter()
            .filter_map(|h| map_host(h, &grouped))
            .collect();
        out.sort_by(|a, b| (&a.cluster, &a.ip, a.port).cmp(&(&b.cluster, &b.ip, b.port)));
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// Parsing and mapping

/// The login answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Login {
    access_token: Option<String>,
    /// Seconds.
    token_ttl: Option<u64>,
}

/// `{"code":200,"data":[{"namespace":"",...}]}` (or a bare array) as namespace ids.
fn parse_namespaces(doc: &Value) -> Option<Vec<String>> {
    let rows = doc.get("data").unwrap_or(doc).as_array()?;
    let mut ids: Vec<String> = rows
        .iter()
        .filter_map(|row| row.get("namespace"))
        .map(|id| namespace_id(&json_text(id)))
        .collect();
    ids.dedup();
    Some(ids)
}

/// A catalog page: `{"count":N,"serviceList":[{"name","groupName",...}]}`.
fn parse_catalog_page(doc: &Value) -> Option<Page> {
    let rows = doc.get("serviceList")?.as_array()?;
    let services = rows
        .iter()
        .filter_map(|row| {
            let name = json_text(row.get("name")?);
            let group = row.get("groupName").map(json_text).unwrap_or_default();
            Some(split_grouped(&name, &group))
        })
        .filter(|(_, name)| !name.is_empty())
        .collect();
    Some((count(doc), services))
}

/// A service-list page: `{"count":N,"doms":["a","b"]}` (group filled in by the caller).
fn parse_service_list_page(doc: &Value) -> Option<Page> {
    let names = doc.get("doms")?.as_array()?;
    let services = names
        .iter()
        .map(json_text)
        .filter(|n| !n.is_empty())
        .map(|n| split_grouped(&n, ""))
        .collect();
    Some((count(doc), services))
}

fn count(doc: &Value) -> usize {
    doc.get("count")
        .and_then(|c| c.as_u64().or_else(|| json_text(c).parse().ok()))
        .map_or(usize::MAX, |c| c as usize)
}

/// `group@@name` as (group, name); a plain name keeps `group` (or `DEFAULT_GROUP`).
fn split_grouped(name: &str, group: &str) -> (String, String) {
    match name.split_once("@@") {
        Some((g, n)) => (g.to_string(), n.to_string()),
        None if group.is_empty() => (DEFAULT_GROUP.to_string(), name.to_string()),
        None => (group.to_string(), name.to_string()),
    }
}

/// A configuration item of a search page, in namespace `ns`; `None` without a dataId.
fn map_config(item: &Value, ns: &str) -> Option<SourceConfig> {
    let text = |key: &str| item.get(key).map(json_text).unwrap_or_default();
    let data_id = text("dataId");
    if data_id.is_empty() {
        return None;
    }
    let group = Some(text("group"))
        .filter(|g| !g.is_empty())
        .unwrap_or_else(|| DEFAULT_GROUP.to_string());
    Some(SourceConfig {
        namespace: ns.to_string(),
        group,
        data_id,
        content: text("content"),
        r#type: text("type"),
        app_name: text("appName"),
    })
}

/// The `instance/list` answer (the part used).
#[derive(Debug, Deserialize)]
struct InstanceList {
    #[serde(default)]
    hosts: Option<Vec<Host>>,
}

/// One of `hosts`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Host {
    instance_id: Option<String>,
    ip: Option<String>,
    port: Option<i64>,
    weight: Option<f64>,
    healthy: Option<bool>,
    /// Nacos 1.x's name for `healthy`.
    valid: Option<bool>,
    enabled: Option<bool>,
    cluster_name: Option<String>,
    metadata: Option<BTreeMap<String, Value>>,
}

/// A host in roster's terms; `None` without ip or valid port. `grouped` is the
/// service's `group@@name`, for the fallback source id.
fn map_host(host: &Host, grouped: &str) -> Option<SourceInstance> {
    let ip = host
        .ip
        .as_deref()
        .map(str::trim)
        .filter(|ip| !ip.is_empty())?;
    let port = host
        .port
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)?;
    let cluster = host
        .cluster_name
        .as_deref()
        .filter(|c| !c.is_empty())
        .unwrap_or(DEFAULT_CLUSTER);
    let source_id = host
        .instance_id
        .clone()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("{ip}#{port}#{cluster}#{grouped}"));
    Some(SourceInstance {
        cluster: cluster.to_string(),
        ip: ip.to_string(),
        port,
        weight: host.weight.unwrap_or(1.0),
        healthy: host.healthy.or(host.valid).unwrap_or(true),
        enabled: host.enabled.unwrap_or(true),
        metadata: host
            .metadata
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), json_text(v)))
            .collect(),
        source_id,
    })
}

#[cfg(test)]
mod tests;
