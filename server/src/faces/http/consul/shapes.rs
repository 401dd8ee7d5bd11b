//! How any instance of the Consul face's namespace and group is shown in Consul's
//! shapes — an agent's service, a catalog entry, a health entry with its checks, a node
//! — whichever face registered it: pure functions over an instance, no I/O. A Consul
//! node is an address: an instance's node is named by its IP.

use serde_json::{json, Map, Value};

use super::mapping::{
    enabled_for, Kind, Status, CHECK_ID, CHECK_NAME, CHECK_TARGET, ID, MAINTENANCE, OUTPUT, PREFIX,
    STATUS, TAGS,
};
use roster_registry::instance::Instance;

/// The Consul id of an instance: its registration's, a Eureka client's instance id,
/// else `service-ip-port`.
pub fn id_of(instance: &Instance, service: &str) -> String {
    let m = &instance.metadata;
    if let Some(id) = m.get(ID).or_else(|| m.get("eureka.instanceId")) {
        return id.to_string();
    }
    format!("{service}-{}-{}", instance.ip(), instance.port)
}

/// An instance's tags (none for an instance another face registered).
pub fn tags_of(instance: &Instance) -> Vec<String> {
    instance
        .metadata
        .get(TAGS)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// The metadata shown as `Meta`: without the keys faces keep for themselves.
pub fn meta_of(instance: &Instance) -> Map<String, Value> {
    instance
        .metadata
        .iter()
        .filter(|(k, _)| {
            !k.starts_with(PREFIX) && !k.starts_with("preserved.") && !k.starts_with("eureka.")
        })
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect()
}

/// An instance's service check as shown: its id, name, status, output and type; `None`
/// for a Consul service registered without a check.
pub struct ServiceCheck {
    /// `CheckID`.
    pub id: String,
    /// `Name`.
    pub name: String,
    /// `Status`.
    pub status: Status,
    /// `Output`.
    pub output: String,
    /// `Type`.
    pub kind: &'static str,
}

/// The service check of `instance` (of service `service`, id `id`).
pub fn service_check(instance: &Instance, service: &str, id: &str) -> Option<ServiceCheck> {
    let m = &instance.metadata;
    let kind = Kind::of(m);
    if kind == Some(Kind::None) {
        return None;
    }
    let status = match kind {
        Some(Kind::Ttl) if instance.healthy => m
            .get(STATUS)
            .and_then(Status::parse)
            .unwrap_or(Status::Passing),
        _ if instance.healthy => Status::Passing,
        _ => Status::Critical,
    };
    let output = match kind {
        Some(Kind::Ttl) if !instance.healthy => "TTL expired".to_string(),
        Some(Kind::Ttl) => m.get(OUTPUT).unwrap_or_default().to_string(),
        Some(Kind::Http | Kind::Tcp) => format!(
            "{} check of {}: {}",
            kind.map_or("", Kind::as_str).to_uppercase(),
            m.get(CHECK_TARGET).unwrap_or_default(),
            status.as_str()
        ),
        _ if instance.ephemeral => "kept by heartbeats".to_string(),
        _ => "checked by roster".to_string(),
    };
    Some(ServiceCheck {
        id: m
            .get(CHECK_ID)
            .map_or_else(|| format!("service:{id}"), str::to_string),
        name: m
            .get(CHECK_NAME)
            .map_or_else(|| format!("Service '{service}' check"), str::to_string),
        status,
        output,
        kind: match kind {
            Some(Kind::Ttl) => "ttl",
            Some(Kind::Http) => "http",
            Some(Kind::Tcp) => "tcp",
            _ => "",
        },
    })
}

/// A check object as Consul shows it.
#[allow(clippy::too_many_arguments)]
fn check_json(
    node: &str,
    id: &str,
    name: &str,
    status: &str,
    notes: &str,
    output: &str,
    kind: &str,
    service: (&str, &str, &[String]),
    index: u64,
) -> Value {
    let (service_id, service_name, tags) = service;
    json!({
        "Node": node,
        "CheckID": id,
        "Name": name,
        "Status": status,
        "Notes": notes,
        "Output": output,
        "ServiceID": service_id,
        "ServiceName": service_name,
        "ServiceTags": tags,
        "Type": kind,
        "Definition": {},
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

/// The node-level check every node passes (a roster node answers for it).
pub fn serf_check(node: &str, index: u64) -> Value {
    check_json(
        node,
        "serfHealth",
        "Serf Health Status",
        "passing",
        "",
        "Agent alive and reachable",
        "",
        ("", "", &[]),
        index,
    )
}

/// The service-level checks of `instance`: its check, and a critical maintenance check
/// while it is disabled.
pub fn service_checks(instance: &Instance, service: &str, index: u64) -> Vec<Value> {
    let id = id_of(instance, service);
    let tags = tags_of(instance);
    let node = instance.ip();
    let mut out = Vec::new();
    if let Some(c) = service_check(instance, service, &id) {
        let s = (id.as_str(), service, tags.as_slice());
        out.push(check_json(
            node,
            &c.id,
            &c.name,
            c.status.as_str(),
            "",
            &c.output,
            c.kind,
            s,
            index,
        ));
    }
    // Disabled by maintenance, or by anyone but its own critical TTL check (an
    // operator through another face): shown as maintenance.
    let maintained = instance.metadata.get(MAINTENANCE).is_some();
    if !instance.enabled && (maintained || enabled_for(&instance.metadata)) {
        let reason = instance.metadata.get(MAINTENANCE).unwrap_or_default();
        let notes = if reason.is_empty() {
            "Maintenance mode is enabled for this service, but no reason was provided."
        } else {
            reason
        };
        let why = if maintained {
            "Service is in maintenance mode"
        } else {
            "The instance is disabled in roster"
        };
        out.push(check_json(
            node,
            &format!("_service_maintenance:{id}"),
            "Service Maintenance Mode",
            "critical",
            notes,
            why,
            "maintenance",
            (id.as_str(), service, tags.as_slice()),
            index,
        ));
    }
    out
}

/// The aggregated status of checks: critical over warning over passing.
pub fn aggregated(checks: &[Value]) -> Status {
    let has = |s: &str| checks.iter().any(|c| c["Status"] == s);
    if has("critical") {
        Status::Critical
    } else if has("warning") {
        Status::Warning
    } else {
        Status::Passing
    }
}

/// A node (an instance address) as Consul shows it.
pub fn node_json(ip: &str, datacenter: &str, index: u64) -> Value {
    json!({
        "ID": "",
        "Node": ip,
        "Address": ip,
        "Datacenter": datacenter,
        "TaggedAddresses": {"lan": ip, "lan_ipv4": ip, "wan": ip, "wan_ipv4": ip},
        "Meta": {"roster": "address"},
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

/// An instance's weight as Consul's (an integer, at least 1).
fn passing_weight(instance: &Instance) -> u64 {
    (instance.weight.round() as u64).max(1)
}

/// An instance as an agent's service (`/v1/agent/services`, `Service` of a health
/// entry).
pub fn agent_service(instance: &Instance, service: &str, datacenter: &str, index: u64) -> Value {
    let ip = instance.ip();
    json!({
        "ID": id_of(instance, service),
        "Service": service,
        "Tags": tags_of(instance),
        "Meta": meta_of(instance),
        "Port": instance.port,
        "Address": ip,
        "TaggedAddresses": {
            "lan_ipv4": {"Address": ip, "Port": instance.port},
            "wan_ipv4": {"Address": ip, "Port": instance.port},
        },
        "Weights": {"Passing": passing_weight(instance), "Warning": 1},
        "EnableTagOverride": false,
        "Kind": "",
        "Datacenter": datacenter,
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

/// An instance as a catalog entry (`/v1/catalog/service/{name}`).
pub fn catalog_entry(instance: &Instance, service: &str, datacenter: &str, index: u64) -> Value {
    let ip = instance.ip();
    json!({
        "ID": "",
        "Node": ip,
        "Address": ip,
        "Datacenter": datacenter,
        "TaggedAddresses": {"lan": ip, "wan": ip},
        "NodeMeta": {"roster": "address"},
        "ServiceID": id_of(instance, service),
        "ServiceName": service,
        "ServiceTags": tags_of(instance),
        "ServiceAddress": ip,
        "ServiceTaggedAddresses": {
            "lan_ipv4": {"Address": ip, "Port": instance.port},
            "wan_ipv4": {"Address": ip, "Port": instance.port},
        },
        "ServiceMeta": meta_of(instance),
        "ServicePort": instance.port,
        "ServiceWeights": {"Passing": passing_weight(instance), "Warning": 1},
        "ServiceEnableTagOverride": false,
        "ServiceKind": "",
        "ServiceProxy": {},
        "ServiceConnect": {},
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

/// An instance as a health entry (`/v1/health/service/{name}`).
pub fn health_entry(instance: &Instance, service: &str, datacenter: &str, index: u64) -> Value {
    let mut checks = vec![serf_check(instance.ip(), index)];
    checks.extend(service_checks(instance, service, index));
    json!({
        "Node": node_json(instance.ip(), datacenter, index),
        "Service": agent_service(instance, service, datacenter, index),
        "Checks": checks,
    })
}
