//! One entry of Consul's `/v1/health/service/<name>` (node, service, checks) and how it
//! maps onto a [`SourceInstance`]: address, port, weight by check status, health and
//! maintenance from the aggregated checks, metadata from `Meta`, `k=v` tags and
//! `consul.*` keys.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::rest::json_text;
use crate::{Metadata, SourceInstance};

/// Cluster of every imported instance.
const DEFAULT_CLUSTER: &str = "DEFAULT";

/// One entry of `/v1/health/service/<name>`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct HealthEntry {
    #[serde(default)]
    node: Option<NodeInfo>,
    #[serde(default)]
    service: Option<ServiceInfo>,
    #[serde(default)]
    checks: Option<Vec<Check>>,
}

/// `Node` of a health entry (the fields used).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct NodeInfo {
    node: Option<String>,
    address: Option<String>,
    datacenter: Option<String>,
}

/// `Service` of a health entry (the fields used).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct ServiceInfo {
    #[serde(rename = "ID")]
    id: Option<String>,
    service: Option<String>,
    tags: Option<Vec<String>>,
    address: Option<String>,
    meta: Option<BTreeMap<String, Value>>,
    port: Option<i64>,
    weights: Option<Weights>,
    kind: Option<String>,
}

/// `Service.Weights`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct Weights {
    passing: Option<f64>,
    warning: Option<f64>,
}

/// One of `Checks`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct Check {
    #[serde(rename = "CheckID")]
    check_id: Option<String>,
    status: Option<String>,
}

/// A health answer, mapped.
#[derive(Debug, PartialEq)]
pub(super) struct Mapped {
    /// The importable instances, ordered by source id.
    pub(super) instances: Vec<SourceInstance>,
    /// Every entry was of another kind (`connect-proxy`, gateways): not a service to import.
    pub(super) proxy_only: bool,
}

/// Maps the entries of one health answer, skipping those that cannot be imported.
pub(super) fn map_entries(entries: &[HealthEntry]) -> Mapped {
    let mut instances = Vec::new();
    let mut others = 0;
    for entry in entries {
        let Some(service) = &entry.service else {
            continue;
        };
        if service.kind.as_deref().is_some_and(|k| !k.is_empty()) {
            others += 1;
            continue;
        }
        match map_entry(entry, service) {
            Some(instance) => instances.push(instance),
            None => tracing::debug!(
                service = ?service.service,
                id = ?service.id,
                "consul entry without address or valid port skipped"
            ),
        }
    }
    instances.sort_by(|a, b| a.source_id.cmp(&b.source_id));
    Mapped {
        instances,
        proxy_only: others > 0 && others == entries.len(),
    }
}

/// A check's status, worst last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Passing,
    Warning,
    Critical,
}

/// The checks of one entry, aggregated like Consul's `AggregatedStatus`, except that
/// maintenance is kept apart so health stays known under it.
#[derive(Debug, PartialEq)]
struct Health {
    /// Worst status of the checks other than maintenance.
    worst: Status,
    /// A node or service maintenance check is present.
    maintenance: bool,
}

fn health(checks: &[Check]) -> Health {
    let mut health = Health {
        worst: Status::Passing,
        maintenance: false,
    };
    for check in checks {
        let id = check.check_id.as_deref().unwrap_or("");
        if id == "_node_maintenance" || id.starts_with("_service_maintenance:") {
            health.maintenance = true;
            continue;
        }
        let status = match check.status.as_deref() {
            Some("passing") => Status::Passing,
            Some("warning") => Status::Warning,
            // `critical`, and anything unknown: do not call it healthy.
            _ => Status::Critical,
        };
        health.worst = health.worst.max(status);
    }
    health
}

fn map_entry(entry: &HealthEntry, service: &ServiceInfo) -> Option<SourceInstance> {
    let node = entry.node.as_ref();
    let ip = non_empty(service.address.as_deref())
        .or_else(|| non_empty(node.and_then(|n| n.address.as_deref())))?;
    let port = service
        .port
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)?;
    let health = health(entry.checks.as_deref().unwrap_or(&[]));
    let weights = service.weights.as_ref();
    let weight = match health.worst {
        Status::Warning => weights.and_then(|w| w.warning),
        _ => weights.and_then(|w| w.passing),
    }
    .unwrap_or(1.0);
    let node_name = node.and_then(|n| n.node.as_deref()).unwrap_or("");
    let id = non_empty(service.id.as_deref())
        .or_else(|| non_empty(service.service.as_deref()))
        .unwrap_or("");
    Some(SourceInstance {
        cluster: DEFAULT_CLUSTER.to_string(),
        ip: ip.to_string(),
        port,
        weight,
        healthy: health.worst != Status::Critical,
        enabled: !health.maintenance,
        metadata: metadata(service, node, node_name, id),
        source_id: format!("{node_name}/{id}"),
    })
}

/// `Service.Meta`, then `k=v` tags for keys Meta lacks (older Spring Cloud Consul), then
/// `consul.node`, `consul.datacenter`, `consul.serviceId`, `consul.tags`.
fn metadata(service: &ServiceInfo, node: Option<&NodeInfo>, node_name: &str, id: &str) -> Metadata {
    let mut m: Metadata = service
        .meta
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), json_text(v)))
        .collect();
    let tags = service.tags.as_deref().unwrap_or(&[]);
    for tag in tags {
        if let Some((k, v)) = tag.split_once('=') {
            if !k.is_empty() {
                m.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
    }
    m.insert("consul.node".into(), node_name.to_string());
    if let Some(dc) = non_empty(node.and_then(|n| n.datacenter.as_deref())) {
        m.insert("consul.datacenter".into(), dc.to_string());
    }
    m.insert("consul.serviceId".into(), id.to_string());
    if !tags.is_empty() {
        m.insert("consul.tags".into(), tags.join(","));
    }
    m
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The health example of the reference (§2.2).
    const HEALTH: &str = r#"[
      {
        "Node": {
          "ID": "40e4a748-2192-161a-0510-9bf59fe950b5",
          "Node": "node-a",
          "Address": "10.1.10.12",
          "Datacenter": "dc1",
          "TaggedAddresses": {"lan": "10.1.10.12", "wan": "10.1.10.12"},
          "Meta": {"consul-network-segment": ""},
          "CreateIndex": 13, "ModifyIndex": 14
        },
        "Service": {
          "ID": "order-service-8080",
          "Service": "order-service",
          "Tags": ["secure=false", "v1"],
          "Address": "10.1.10.12",
          "TaggedAddresses": {
            "lan_ipv4": {"Address": "10.1.10.12", "Port": 8080},
            "wan_ipv4": {"Address": "10.1.10.12", "Port": 8080}
          },
          "Meta": {"secure": "false", "zone": "az1", "version": "1.4.2"},
          "Port": 8080,
          "Weights": {"Passing": 10, "Warning": 1},
          "EnableTagOverride": false,
          "Kind": "",
          "Namespace": "default",
          "CreateIndex": 4690, "ModifyIndex": 4690
        },
        "Checks": [
          {"Node": "node-a", "CheckID": "serfHealth", "Name": "Serf Health Status",
           "Status": "passing", "Notes": "", "Output": "Agent alive and reachable",
           "ServiceID": "", "ServiceName": "", "ServiceTags": []},
          {"Node": "node-a", "CheckID": "service:order-service-8080",
           "Name": "Service 'order-service' check", "Status": "warning",
           "Notes": "", "Output": "HTTP GET http://10.1.10.12:8080/actuator/health: 429",
           "ServiceID": "order-service-8080", "ServiceName": "order-service",
           "ServiceTags": ["secure=false", "v1"]}
        ]
      }
    ]"#;

    fn check(id: &str, status: &str) -> Check {
        Check {
            check_id: Some(id.into()),
            status: Some(status.into()),
        }
    }

    #[test]
    fn health_example_maps_per_reference() {
        let entries: Vec<HealthEntry> = serde_json::from_str(HEALTH).unwrap();
        let mapped = map_entries(&entries);
        assert!(!mapped.proxy_only);
        let [i] = mapped.instances.as_slice() else {
            panic!("one instance expected: {mapped:?}")
        };
        assert_eq!(i.ip, "10.1.10.12");
        assert_eq!(i.port, 8080);
        assert_eq!(i.cluster, "DEFAULT");
        // The service check warns: the Warning weight applies, and it stays healthy.
        assert_eq!(i.weight, 1.0);
        assert!(i.healthy);
        assert!(i.enabled);
        assert_eq!(i.source_id, "node-a/order-service-8080");
        let m = &i.metadata;
        assert_eq!(m["zone"], "az1");
        assert_eq!(m["version"], "1.4.2");
        assert_eq!(m["secure"], "false");
        assert_eq!(m["consul.node"], "node-a");
        assert_eq!(m["consul.datacenter"], "dc1");
        assert_eq!(m["consul.serviceId"], "order-service-8080");
        assert_eq!(m["consul.tags"], "secure=false,v1");
    }

    #[test]
    fn address_falls_back_to_node_and_tags_fill_meta() {
        let json = r#"[{"Node": {"Node": "n1", "Address": "10.0.0.9"},
            "Service": {"ID": "a-1", "Service": "a", "Address": "", "Port": 81,
                        "Tags": ["zone=z9", "plain", "=x"], "Meta": null, "Weights": null},
            "Checks": null}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let i = &map_entries(&entries).instances[0];
        assert_eq!(i.ip, "10.0.0.9");
        assert_eq!(i.weight, 1.0, "default weight");
        assert_eq!(i.metadata["zone"], "z9");
        assert!(!i.metadata.contains_key(""));
        assert!(!i.metadata.contains_key("consul.datacenter"));
    }

    #[test]
    fn proxies_and_portless_entries_are_skipped() {
        let json = r#"[
            {"Node": {"Node": "n1", "Address": "10.0.0.9"},
             "Service": {"ID": "web-proxy", "Service": "web-sidecar-proxy", "Port": 21000,
                         "Kind": "connect-proxy"}, "Checks": []}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let mapped = map_entries(&entries);
        assert!(mapped.proxy_only && mapped.instances.is_empty());

        let json = r#"[{"Node": {"Node": "n1", "Address": "10.0.0.9"},
            "Service": {"ID": "dns", "Service": "dns", "Port": 0}, "Checks": []}]"#;
        let entries: Vec<HealthEntry> = serde_json::from_str(json).unwrap();
        let mapped = map_entries(&entries);
        assert!(!mapped.proxy_only && mapped.instances.is_empty());
        assert!(!map_entries(&[]).proxy_only);
    }

    #[test]
    fn checks_aggregate() {
        let h = |checks: &[Check]| health(checks);
        assert_eq!(h(&[]).worst, Status::Passing);
        let warn = h(&[
            check("serfHealth", "passing"),
            check("service:a", "warning"),
        ]);
        assert_eq!(warn.worst, Status::Warning);
        let crit = h(&[
            check("serfHealth", "critical"),
            check("service:a", "warning"),
        ]);
        assert_eq!(crit.worst, Status::Critical);
        let maint = h(&[
            check("_service_maintenance:a", "critical"),
            check("service:a", "passing"),
        ]);
        assert!(maint.maintenance);
        assert_eq!(
            maint.worst,
            Status::Passing,
            "maintenance does not count as critical"
        );
        assert!(h(&[check("_node_maintenance", "critical")]).maintenance);
        assert_eq!(h(&[check("x", "bogus")]).worst, Status::Critical);
    }

    #[test]
    fn critical_and_maintenance_map_to_health_and_enabled() {
        let entry = |checks: Vec<Check>| HealthEntry {
            node: Some(NodeInfo {
                node: Some("n".into()),
                address: Some("10.0.0.1".into()),
                datacenter: None,
            }),
            service: Some(ServiceInfo {
                id: Some("s-1".into()),
                service: Some("s".into()),
                port: Some(80),
                weights: Some(Weights {
                    passing: Some(7.0),
                    warning: Some(2.0),
                }),
                ..ServiceInfo::default()
            }),
            checks: Some(checks),
        };
        let map = |e: HealthEntry| map_entries(&[e]).instances.remove(0);
        let critical = map(entry(vec![check("service:s-1", "critical")]));
        assert!(!critical.healthy && critical.enabled);
        assert_eq!(critical.weight, 7.0);
        let maint = map(entry(vec![check("_service_maintenance:s-1", "critical")]));
        assert!(maint.healthy && !maint.enabled);
        let warning = map(entry(vec![check("service:s-1", "warning")]));
        assert_eq!(warning.weight, 2.0);
    }
}
