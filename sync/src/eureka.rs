//! Eureka as a source, through its REST API with JSON.
//!
//! `list` reads `{base}/apps` and keeps the whole registry (every instance, admitted or
//! not: the server's reconcile hash covers them all). `watch` polls `{base}/apps/delta`,
//! applies its `ADDED`/`MODIFIED`/`DELETED` entries to that copy (idempotently: Eureka
//! delivers a change in every delta for minutes), recomputes the reconcile hash
//! (`<STATUS>_<count>_`, statuses sorted) and compares it with `apps__hashcode`. A
//! mismatch, or a server with deltas disabled (403), asks for a resync.
//!
//! Parsing is tolerant of the codecs in the wild: `application`/`instance` as an object
//! or an array, `$` as a number or a string, `@enabled` as a string or a boolean,
//! `overriddenStatus` or `overriddenstatus`, and the `@class` key of empty metadata.
//!
//! Mapping: service = lower-cased `vipAddress`, else lower-cased `app`; ip `ipAddr`; port
//! `port.$` when enabled, else `securePort.$`; weight `metadata.weight` when numeric, else
//! 1; healthy when `UP`; disabled when `OUT_OF_SERVICE`; cluster `metadata.zone`, else
//! `DEFAULT`; metadata plus `eureka.*` keys; source id `instanceId`.
//!
//! URL: `eureka://[user:password@]host:8761/eureka` (the server's base path is required).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use tokio::time::{sleep_until, Instant};

use crate::rest::{json_text, Reply, Rest};
use crate::{
    Filter, Metadata, ServiceName, Services, Snapshot, Source, SourceError, SourceInstance,
    SourceUrl, Update,
};

/// Time between two delta polls (Eureka's own clients wait 30 s; its server caches
/// answers for up to 30 s, so polling faster only finds changes sooner after that).
const POLL: Duration = Duration::from_secs(5);
/// How long `watch` polls without finding a change before answering "nothing changed".
const IDLE: Duration = Duration::from_secs(30);
/// Timeout of one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Cluster of instances without a usable `metadata.zone`.
const DEFAULT_CLUSTER: &str = "DEFAULT";
/// Metadata key Jackson writes into an empty map.
const CLASS_KEY: &str = "@class";

/// Reads a Eureka server.
pub struct EurekaSource {
    rest: Rest,
    filter: Filter,
    /// Every instance as of the last list plus the deltas since; `None` before the
    /// first list and after a mismatch.
    registry: Option<Registry>,
    /// When the next delta poll is due.
    next_poll: Instant,
}

impl EurekaSource {
    /// A source for `url` (its path is the server's base, e.g. `/eureka`; `username` and
    /// `password` are sent as HTTP basic credentials), reading the services `filter`
    /// admits.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        let basic = url.param("username").map(|user| {
            (
                user.to_string(),
                url.param("password").unwrap_or_default().to_string(),
            )
        });
        // Without a JSON Accept header Eureka answers XML.
        let headers = [("accept", "application/json".to_string())];
        Ok(Self {
            rest: Rest::new(url, &url.path, &headers, basic)?,
            filter: filter.clone(),
            registry: None,
            next_poll: Instant::now(),
        })
    }

    /// `GET {base}/apps/delta`; `None` when the server will not give deltas.
    async fn delta(&self) -> Result<Option<Apps>, SourceError> {
        let reply = self.rest.get("/apps/delta", CALL_TIMEOUT).await?;
        // 403: deltas disabled on the server; 404: a server without them.
        if matches!(reply.status, 403 | 404) {
            tracing::debug!(status = reply.status, "eureka gives no delta; listing");
            return Ok(None);
        }
        parse(&reply.success()?).map(Some)
    }
}

#[async_trait::async_trait]
impl Source for EurekaSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        self.registry = None;
        let reply = self.rest.get("/apps", CALL_TIMEOUT).await?.success()?;
        let apps = parse(&reply)?;
        let mut registry = Registry::default();
        registry.apply(&apps.instances, true);
        let snapshot = Snapshot {
            services: registry.services(&self.filter),
            partial: false,
            configs: None,
        };
        self.registry = Some(registry);
        self.next_poll = Instant::now() + POLL;
        Ok(snapshot)
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        let deadline = Instant::now() + IDLE;
        loop {
            if self.registry.is_none() {
                return Ok(Update::Resync);
            }
            sleep_until(self.next_poll).await;
            self.next_poll = Instant::now() + POLL;
            let Some(delta) = self.delta().await? else {
                self.registry = None;
                return Ok(Update::Resync);
            };
            // No await from here on: a cancelled watch leaves the copy consistent.
            let Some(registry) = self.registry.as_mut() else {
                return Ok(Update::Resync);
            };
            let changes = registry.apply_delta(&delta.instances, &self.filter);
            let ours = registry.hashcode();
            if ours != delta.hashcode {
                tracing::info!(ours = %ours, theirs = %delta.hashcode, "eureka hash mismatch; listing");
                self.registry = None;
                return Ok(Update::Resync);
            }
            if !changes.is_empty() || Instant::now() >= deadline {
                return Ok(Update::Services(changes));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The cached registry

/// Every instance of the server, by application and instance id.
#[derive(Debug, Default)]
struct Registry {
    instances: BTreeMap<(String, String), Instance>,
}

impl Registry {
    /// Applies instances of a full list (`full`: all upserts) or a delta.
    fn apply(&mut self, instances: &[Instance], full: bool) {
        for instance in instances {
            let key = (instance.app.clone(), instance.id.clone());
            if !full && instance.action.as_deref() == Some("DELETED") {
                self.instances.remove(&key);
            } else {
                // ADDED, MODIFIED and anything unknown: the entry is the instance's state.
                self.instances.insert(key, instance.clone());
            }
        }
    }

    /// Applies a delta; returns the complete lists of the admitted services whose
    /// instances changed (a delta delivered again changes nothing).
    fn apply_delta(&mut self, delta: &[Instance], filter: &Filter) -> Services {
        let mut touched = BTreeSet::new();
        for instance in delta {
            let key = (instance.app.clone(), instance.id.clone());
            if let Some(old) = self.instances.get(&key) {
                touched.insert(service_name(old));
            }
            touched.insert(service_name(instance));
        }
        touched.retain(|s| filter.admits(s));
        let before: Vec<Vec<SourceInstance>> = touched.iter().map(|s| self.service(s)).collect();
        self.apply(delta, false);
        touched
            .into_iter()
            .zip(before)
            .filter_map(|(name, before)| {
                let after = self.service(&name);
                (after != before).then(|| (ServiceName::plain(name), after))
            })
            .collect()
    }

    /// Eureka's reconcile hash: `<STATUS>_<count>_` per status, statuses sorted.
    fn hashcode(&self) -> String {
        hashcode(self.instances.values().map(|i| i.status.as_str()))
    }

    /// The admitted services with their instances.
    fn services(&self, filter: &Filter) -> Services {
        let mut out = Services::new();
        for instance in self.instances.values() {
            let name = service_name(instance);
            if !filter.admits(&name) {
                continue;
            }
            let list = out.entry(ServiceName::plain(name)).or_default();
            list.extend(to_source(instance));
        }
        out
    }

    /// The instances of the service `name` (empty when it has none).
    fn service(&self, name: &str) -> Vec<SourceInstance> {
        self.instances
            .values()
            .filter(|i| service_name(i) == name)
            .filter_map(to_source)
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

/// An `applications` document: the full registry or a delta.
#[derive(Debug, Default)]
struct Apps {
    /// `apps__hashcode` (empty when absent: an empty registry).
    hashcode: String,
    instances: Vec<Instance>,
}

/// One instance, as read.
#[derive(Clone, Debug, PartialEq)]
struct Instance {
    /// Application name, upper-cased as Eureka does.
    app: String,
    /// `instanceId`, else `hostName:app:port`.
    id: String,
    host_name: String,
    ip: String,
    status: String,
    overridden_status: Option<String>,
    port: Option<u16>,
    port_enabled: bool,
    secure_port: Option<u16>,
    secure_port_enabled: bool,
    vip_address: Option<String>,
    metadata: Metadata,
    home_page_url: Option<String>,
    health_check_url: Option<String>,
    /// `actionType` of a delta entry.
    action: Option<String>,
}

fn parse(reply: &Reply) -> Result<Apps, SourceError> {
    let document: Value = reply.json()?;
    parse_apps(&document).map_err(|e| SourceError::Invalid(format!("{}: {e}", reply.what)))
}

/// Reads `{"applications": {...}}`.
fn parse_apps(document: &Value) -> Result<Apps, String> {
    let apps = document
        .get("applications")
        .filter(|a| a.is_object())
        .ok_or("no \"applications\" object (is the Accept header honoured?)")?;
    let mut out = Apps {
        hashcode: apps
            .get("apps__hashcode")
            .map(json_text)
            .unwrap_or_default(),
        instances: Vec::new(),
    };
    for app in one_or_many(apps.get("application")) {
        let name = app.get("name").map(json_text).unwrap_or_default();
        for instance in one_or_many(app.get("instance")) {
            match parse_instance(&name, instance) {
                Some(i) => out.instances.push(i),
                None => tracing::debug!(app = %name, "eureka instance without app name skipped"),
            }
        }
    }
    Ok(out)
}

/// A value that codecs write as one object or as an array of them.
fn one_or_many(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => Vec::new(),
    }
}

fn parse_instance(app_name: &str, v: &Value) -> Option<Instance> {
    let text = |key: &str| v.get(key).map(json_text).filter(|s| !s.trim().is_empty());
    let app = non_blank(app_name.to_string())
        .or_else(|| text("app"))?
        .to_uppercase();
    let host_name = text("hostName").unwrap_or_default();
    // Kept even without an address (then not imported): the server's hash counts it.
    let ip = text("ipAddr")
        .or_else(|| non_blank(host_name.clone()))
        .unwrap_or_default();
    let (port, port_enabled) = parse_port(v.get("port"), true);
    let (secure_port, secure_port_enabled) = parse_port(v.get("securePort"), false);
    let id = text("instanceId")
        .unwrap_or_else(|| format!("{host_name}:{app}:{}", port.unwrap_or_default()));
    Some(Instance {
        app,
        id,
        host_name,
        ip,
        status: text("status")
            .unwrap_or_else(|| "UNKNOWN".into())
            .to_uppercase(),
        overridden_status: text("overriddenStatus")
            .or_else(|| text("overriddenstatus"))
            .map(|s| s.to_uppercase()),
        port,
        port_enabled,
        secure_port,
        secure_port_enabled,
        vip_address: text("vipAddress"),
        metadata: instance_metadata(v.get("metadata")),
        home_page_url: text("homePageUrl"),
        health_check_url: text("healthCheckUrl"),
        action: text("actionType").map(|s| s.to_uppercase()),
    })
}

/// `{"$": 8080, "@enabled": "true"}` as (port, enabled); `enabled_default` when
/// `@enabled` is missing. A bare number is accepted too.
fn parse_port(value: Option<&Value>, enabled_default: bool) -> (Option<u16>, bool) {
    let Some(value) = value else {
        return (None, false);
    };
    let number = value.get("$").unwrap_or(value);
    let port = match number {
        Value::Number(n) => n.as_u64().and_then(|p| u16::try_from(p).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|p| *p > 0);
    let enabled = match value.get("@enabled") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.trim().eq_ignore_ascii_case("true"),
        _ => enabled_default,
    };
    (port, enabled)
}

/// The `metadata` map, without Jackson's `@class`, values as text.
fn instance_metadata(value: Option<&Value>) -> Metadata {
    let Some(Value::Object(map)) = value else {
        return Metadata::new();
    };
    map.iter()
        .filter(|(k, _)| k.as_str() != CLASS_KEY)
        .map(|(k, v)| (k.clone(), json_text(v)))
        .collect()
}

fn non_blank(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

// ---------------------------------------------------------------------------------------
// Mapping

/// Lower-cased `vipAddress` (its first entry, when it lists several), else lower-cased app.
fn service_name(instance: &Instance) -> String {
    instance
        .vip_address
        .as_deref()
        .and_then(|v| v.split(',').map(str::trim).find(|v| !v.is_empty()))
        .unwrap_or(&instance.app)
        .to_lowercase()
}

/// The instance in roster's terms; `None` when it has no address or port.
fn to_source(instance: &Instance) -> Option<SourceInstance> {
    if instance.ip.is_empty() {
        return None;
    }
    let port = if instance.port_enabled {
        instance.port.or(instance.secure_port)
    } else {
        instance.secure_port.or(instance.port)
    }?;
    let out_of_service = instance.status == "OUT_OF_SERVICE"
        || instance.overridden_status.as_deref() == Some("OUT_OF_SERVICE");
    let weight = instance
        .metadata
        .get("weight")
        .and_then(|w| w.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite() && *w >= 0.0)
        .unwrap_or(1.0);
    Some(SourceInstance {
        cluster: cluster(instance),
        ip: instance.ip.clone(),
        port,
        weight,
        healthy: instance.status == "UP",
        enabled: !out_of_service,
        metadata: metadata(instance),
        source_id: instance.id.clone(),
    })
}

/// `metadata.zone` when it is a valid cluster name (letters, digits, `-`), else `DEFAULT`.
fn cluster(instance: &Instance) -> String {
    instance
        .metadata
        .get("zone")
        .filter(|z| !z.is_empty() && z.len() <= 64)
        .filter(|z| z.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .cloned()
        .unwrap_or_else(|| DEFAULT_CLUSTER.to_string())
}

/// The instance's metadata plus `eureka.*` keys, `secure`, `homePageUrl` and
/// `healthCheckUrl` (those three only where the instance's metadata lacks them).
fn metadata(instance: &Instance) -> Metadata {
    let mut m = instance.metadata.clone();
    m.insert("eureka.instanceId".into(), instance.id.clone());
    m.insert("eureka.app".into(), instance.app.clone());
    m.insert("eureka.hostName".into(), instance.host_name.clone());
    m.insert("eureka.status".into(), instance.status.clone());
    if let Some(vip) = &instance.vip_address {
        m.insert("eureka.vipAddress".into(), vip.clone());
    }
    m.entry("secure".into())
        .or_insert_with(|| instance.secure_port_enabled.to_string());
    if let Some(url) = &instance.home_page_url {
        m.entry("homePageUrl".into()).or_insert_with(|| url.clone());
    }
    if let Some(url) = &instance.health_check_url {
        m.entry("healthCheckUrl".into())
            .or_insert_with(|| url.clone());
    }
    m
}

/// Eureka's reconcile hash of a set of instance statuses: `<STATUS>_<count>_` per
/// status, in status order (`DOWN_1_UP_2_`). The client's check of a delta, and the
/// server's answer (roster's Eureka face).
pub fn hashcode<'a>(statuses: impl IntoIterator<Item = &'a str>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in statuses {
        *counts.entry(s).or_default() += 1;
    }
    counts
        .iter()
        .map(|(status, n)| format!("{status}_{n}_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `/eureka/apps` example of the reference (§3.4).
    const APPS: &str = r#"{
      "applications": {
        "versions__delta": "1",
        "apps__hashcode": "DOWN_1_UP_2_",
        "application": [
          {
            "name": "ORDER-SERVICE",
            "instance": [
              {
                "instanceId": "10.0.0.12:order-service:8080",
                "hostName": "10.0.0.12",
                "app": "ORDER-SERVICE",
                "ipAddr": "10.0.0.12",
                "status": "UP",
                "overriddenStatus": "UNKNOWN",
                "port": {"$": 8080, "@enabled": "true"},
                "securePort": {"$": 443, "@enabled": "false"},
                "countryId": 1,
                "dataCenterInfo": {
                  "@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
                  "name": "MyOwn"
                },
                "leaseInfo": {
                  "renewalIntervalInSecs": 30, "durationInSecs": 90,
                  "registrationTimestamp": 1700000000000, "lastRenewalTimestamp": 1700000270000,
                  "evictionTimestamp": 0, "serviceUpTimestamp": 1700000000000
                },
                "metadata": {"management.port": "8080", "zone": "az1", "weight": "5"},
                "homePageUrl": "http://10.0.0.12:8080/",
                "statusPageUrl": "http://10.0.0.12:8080/actuator/info",
                "healthCheckUrl": "http://10.0.0.12:8080/actuator/health",
                "vipAddress": "order-service",
                "secureVipAddress": "order-service",
                "isCoordinatingDiscoveryServer": "false",
                "lastUpdatedTimestamp": "1700000000000",
                "lastDirtyTimestamp": "1699999999000",
                "actionType": "ADDED"
              },
              {
                "instanceId": "10.0.0.13:order-service:8080",
                "hostName": "10.0.0.13", "app": "ORDER-SERVICE", "ipAddr": "10.0.0.13",
                "status": "DOWN", "overriddenStatus": "UNKNOWN",
                "port": {"$": 8080, "@enabled": "true"},
                "securePort": {"$": 443, "@enabled": "false"},
                "countryId": 1,
                "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
                "leaseInfo": {"renewalIntervalInSecs": 30, "durationInSecs": 90,
                  "registrationTimestamp": 1700000000000, "lastRenewalTimestamp": 1700000270000,
                  "evictionTimestamp": 0, "serviceUpTimestamp": 0},
                "metadata": {"@class": "java.util.Collections$EmptyMap"},
                "homePageUrl": "http://10.0.0.13:8080/",
                "statusPageUrl": "http://10.0.0.13:8080/actuator/info",
                "healthCheckUrl": "http://10.0.0.13:8080/actuator/health",
                "vipAddress": "order-service", "secureVipAddress": "order-service",
                "isCoordinatingDiscoveryServer": "false",
                "lastUpdatedTimestamp": "1700000100000", "lastDirtyTimestamp": "1700000099000",
                "actionType": "MODIFIED"
              }
            ]
          },
          {
            "name": "PAYMENT-SERVICE",
            "instance": [
              {"instanceId": "pay-1", "hostName": "pay-1.internal", "app": "PAYMENT-SERVICE",
               "ipAddr": "10.0.1.7", "status": "UP", "overriddenStatus": "UNKNOWN",
               "port": {"$": 9000, "@enabled": "true"}, "securePort": {"$": 9443, "@enabled": "true"},
               "countryId": 1,
               "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
               "leaseInfo": {"renewalIntervalInSecs": 30, "durationInSecs": 90,
                 "registrationTimestamp": 1700000000000, "lastRenewalTimestamp": 1700000270000,
                 "evictionTimestamp": 0, "serviceUpTimestamp": 1700000000000},
               "metadata": {"@class": "java.util.Collections$EmptyMap"},
               "vipAddress": "payment-service", "secureVipAddress": "payment-service",
               "isCoordinatingDiscoveryServer": "false",
               "lastUpdatedTimestamp": "1700000000000", "lastDirtyTimestamp": "1700000000000",
               "actionType": "ADDED"}
            ]
          }
        ]
      }
    }"#;

    /// The `/eureka/apps/delta` example of the reference (§3.4): 10.0.0.13 cancelled.
    const DELTA: &str = r#"{
      "applications": {
        "versions__delta": "7",
        "apps__hashcode": "UP_2_",
        "application": [
          {"name": "ORDER-SERVICE",
           "instance": [
             {"instanceId": "10.0.0.13:order-service:8080", "hostName": "10.0.0.13",
              "app": "ORDER-SERVICE", "ipAddr": "10.0.0.13", "status": "DOWN",
              "overriddenStatus": "UNKNOWN",
              "port": {"$": 8080, "@enabled": "true"}, "securePort": {"$": 443, "@enabled": "false"},
              "countryId": 1,
              "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
              "leaseInfo": {"renewalIntervalInSecs": 30, "durationInSecs": 90,
                "registrationTimestamp": 1700000000000, "lastRenewalTimestamp": 1700000270000,
                "evictionTimestamp": 1700000400000, "serviceUpTimestamp": 0},
              "metadata": {"@class": "java.util.Collections$EmptyMap"},
              "vipAddress": "order-service", "secureVipAddress": "order-service",
              "isCoordinatingDiscoveryServer": "false",
              "lastUpdatedTimestamp": "1700000400000", "lastDirtyTimestamp": "1700000099000",
              "actionType": "DELETED"}
           ]}
        ]
      }
    }"#;

    const EMPTY_DELTA: &str =
        r#"{"applications":{"versions__delta":"8","apps__hashcode":"UP_2_","application":[]}}"#;

    fn apps(json: &str) -> Apps {
        parse_apps(&serde_json::from_str(json).unwrap()).unwrap()
    }

    fn registry() -> Registry {
        let mut r = Registry::default();
        r.apply(&apps(APPS).instances, true);
        r
    }

    #[test]
    fn apps_example_maps_per_reference() {
        let parsed = apps(APPS);
        assert_eq!(parsed.hashcode, "DOWN_1_UP_2_");
        assert_eq!(parsed.instances.len(), 3);
        let r = registry();
        assert_eq!(
            r.hashcode(),
            "DOWN_1_UP_2_",
            "our hash matches the server's"
        );
        let services = r.services(&Filter::all());
        let names: Vec<&str> = services.keys().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["order-service", "payment-service"]);

        let order = &services[&ServiceName::plain("order-service")];
        let up = order.iter().find(|i| i.ip == "10.0.0.12").unwrap();
        assert_eq!(up.port, 8080);
        assert_eq!(up.weight, 5.0);
        assert!(up.healthy && up.enabled);
        assert_eq!(up.cluster, "az1");
        assert_eq!(up.source_id, "10.0.0.12:order-service:8080");
        assert_eq!(up.metadata["management.port"], "8080");
        assert_eq!(up.metadata["eureka.app"], "ORDER-SERVICE");
        assert_eq!(up.metadata["eureka.status"], "UP");
        assert_eq!(up.metadata["eureka.vipAddress"], "order-service");
        assert_eq!(up.metadata["secure"], "false");
        assert_eq!(
            up.metadata["healthCheckUrl"],
            "http://10.0.0.12:8080/actuator/health"
        );

        let down = order.iter().find(|i| i.ip == "10.0.0.13").unwrap();
        assert!(!down.healthy && down.enabled, "DOWN: enabled but unhealthy");
        assert_eq!(down.cluster, "DEFAULT");
        assert_eq!(down.weight, 1.0);
        assert!(!down.metadata.contains_key("@class"));

        let pay = &services[&ServiceName::plain("payment-service")][0];
        assert_eq!((pay.ip.as_str(), pay.port), ("10.0.1.7", 9000));
        assert_eq!(pay.metadata["secure"], "true");
        assert_eq!(pay.metadata["eureka.hostName"], "pay-1.internal");
    }

    #[test]
    fn delta_example_deletes_and_hash_matches() {
        let mut r = registry();
        let changes = r.apply_delta(&apps(DELTA).instances, &Filter::all());
        assert_eq!(r.hashcode(), "UP_2_");
        let order = &changes[&ServiceName::plain("order-service")];
        assert_eq!(order.len(), 1);
        assert_eq!(order[0].ip, "10.0.0.12");
        assert_eq!(changes.len(), 1, "payment-service untouched");
        // The same delta again changes nothing.
        assert!(r
            .apply_delta(&apps(DELTA).instances, &Filter::all())
            .is_empty());
        assert!(r
            .apply_delta(&apps(EMPTY_DELTA).instances, &Filter::all())
            .is_empty());
        assert_eq!(apps(EMPTY_DELTA).hashcode, "UP_2_");
    }

    #[test]
    fn modified_instance_moves_between_services() {
        let mut r = registry();
        let mut moved = apps(APPS).instances[0].clone();
        moved.vip_address = Some("Order-V2".into());
        moved.action = Some("MODIFIED".into());
        let changes = r.apply_delta(&[moved], &Filter::all());
        assert_eq!(changes[&ServiceName::plain("order-service")].len(), 1);
        assert_eq!(changes[&ServiceName::plain("order-v2")].len(), 1);
        // Excluded services are not reported.
        let mut r = registry();
        let mut down = apps(APPS).instances[2].clone();
        down.status = "DOWN".into();
        assert!(r
            .apply_delta(&[down], &Filter::parse(Some("order-*")).unwrap())
            .is_empty());
        assert_eq!(r.hashcode(), "DOWN_2_UP_1_", "the hash still counts it");
    }

    #[test]
    fn tolerant_parsing() {
        // Old codecs: single objects instead of arrays, `$` as a string, `@enabled` as
        // a boolean, `overriddenstatus`, no vipAddress, non-string metadata.
        let json = r#"{"applications": {"application": {"name": "LEGACY",
            "instance": {"hostName": "h1", "app": "LEGACY", "ipAddr": "10.9.9.9",
              "status": "UP", "overriddenstatus": "OUT_OF_SERVICE",
              "port": {"$": "7001", "@enabled": false}, "securePort": {"$": 7443, "@enabled": true},
              "metadata": {"weight": 3, "flag": true, "zone": "bad zone!"}}}}}"#;
        let parsed = apps(json);
        assert_eq!(parsed.hashcode, "");
        let i = &parsed.instances[0];
        assert_eq!(i.id, "h1:LEGACY:7001", "id falls back to hostName:app:port");
        assert_eq!(i.overridden_status.as_deref(), Some("OUT_OF_SERVICE"));
        let s = to_source(i).unwrap();
        assert_eq!(s.port, 7443, "port disabled: the secure port is used");
        assert!(s.healthy && !s.enabled, "OUT_OF_SERVICE override disables");
        assert_eq!(s.weight, 3.0);
        assert_eq!(s.metadata["flag"], "true");
        assert_eq!(s.cluster, "DEFAULT", "an unusable zone is not a cluster");
        assert_eq!(service_name(i), "legacy");

        assert!(parse_apps(&serde_json::json!({"x": 1})).is_err());
        let no_apps = apps(r#"{"applications": {"apps__hashcode": ""}}"#);
        assert!(no_apps.instances.is_empty());
    }

    #[test]
    fn starting_and_unknown_are_enabled_but_unhealthy() {
        let mut i = apps(APPS).instances[0].clone();
        for status in ["STARTING", "UNKNOWN", "DOWN"] {
            i.status = status.into();
            let s = to_source(&i).unwrap();
            assert!(!s.healthy && s.enabled, "{status}");
        }
        i.status = "OUT_OF_SERVICE".into();
        assert!(!to_source(&i).unwrap().enabled);
        i.port = None;
        i.secure_port = None;
        assert!(to_source(&i).is_none());
    }

    #[test]
    fn unimportable_instances_still_count_in_the_hash() {
        let json = r#"{"applications": {"apps__hashcode": "UP_2_", "application": [
            {"name": "A", "instance": [
              {"instanceId": "a-1", "app": "A", "ipAddr": "10.0.0.1", "status": "UP",
               "port": {"$": 80, "@enabled": "true"}},
              {"instanceId": "a-2", "app": "A", "status": "UP"}]}]}}"#;
        let mut r = Registry::default();
        r.apply(&apps(json).instances, true);
        assert_eq!(r.hashcode(), "UP_2_");
        assert_eq!(
            r.services(&Filter::all())[&ServiceName::plain("a")].len(),
            1
        );
    }
}
