//! Nacos wire shapes shared by queries and push: the `ServiceInfo` object that
//! `/instance/list` answers and UDP push carries, with its host entries.

use std::borrow::Cow;

use serde::Serialize;

use crate::registry::instance::{Instance, Metadata, ID_GENERATOR_KEY};
use crate::registry::select::{select, Query, Selection};
use crate::registry::service::ServiceView;

/// How long clients may cache a list, in ms (Nacos 2.x: always 10000; clients poll at
/// this interval).
pub const CACHE_MILLIS: u64 = 10_000;

/// One host of a `ServiceInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Host<'a> {
    instance_id: Cow<'a, str>,
    ip: &'a str,
    port: u16,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    cluster_name: &'a str,
    service_name: &'a str,
    metadata: &'a Metadata,
    instance_heart_beat_interval: u64,
    instance_heart_beat_time_out: u64,
    ip_delete_timeout: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance_id_generator: Option<&'a str>,
}

impl<'a> Host<'a> {
    /// The wire form of `instance` of service `grouped`, reported with `healthy`.
    pub fn new(instance: &'a Instance, grouped: &'a str, healthy: bool) -> Self {
        // Nacos: "simple" when metadata is empty, the stored value if present, and
        // omitted when metadata has other keys only.
        let generator = if instance.metadata.is_empty() {
            Some("simple")
        } else {
            instance.metadata.get(ID_GENERATOR_KEY).map(String::as_str)
        };
        Self {
            instance_id: instance.id(grouped),
            ip: instance.ip(),
            port: instance.port,
            weight: instance.weight,
            healthy,
            enabled: instance.enabled,
            ephemeral: instance.ephemeral,
            cluster_name: &instance.cluster,
            service_name: grouped,
            metadata: &instance.metadata,
            instance_heart_beat_interval: instance.heartbeat().interval_ms,
            instance_heart_beat_time_out: instance.heartbeat().timeout_ms,
            ip_delete_timeout: instance.heartbeat().delete_ms,
            instance_id_generator: generator,
        }
    }
}

/// The `ServiceInfo` object.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceInfo<'a> {
    /// Grouped name; 1.x clients read `dom`.
    dom: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    group_name: Option<&'a str>,
    clusters: &'a str,
    cache_millis: u64,
    hosts: Vec<Host<'a>>,
    last_ref_time: u64,
    checksum: &'a str,
    #[serde(rename = "allIPs")]
    all_ips: bool,
    reach_protection_threshold: bool,
    valid: bool,
    /// With `lanes`: the lane that served (absent: the base lane).
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<String>,
}

/// What a list query asks for.
pub struct ListRequest<'a> {
    /// Grouped service name.
    pub grouped: &'a str,
    /// The group, echoed as `groupName` (push omits it).
    pub group: Option<&'a str>,
    /// The `clusters` parameter, echoed byte for byte (clients key caches on it).
    pub clusters_raw: &'a str,
    /// Which instances.
    pub query: Query<'a>,
    /// `lastRefTime`.
    pub now_ms: u64,
}

/// Serializes the `ServiceInfo` for `req` over `view` (`None`: unknown service).
pub fn service_info(view: Option<&ServiceView>, req: &ListRequest<'_>) -> Vec<u8> {
    let selection = match view {
        Some(v) => select(v, &req.query),
        None => Selection {
            hosts: Vec::new(),
            protected: false,
            lane: None,
        },
    };
    let hosts = selection
        .hosts
        .iter()
        .map(|h| Host::new(h, req.grouped, selection.reported_healthy(h)))
        .collect();
    let info = ServiceInfo {
        dom: req.grouped,
        name: req.grouped,
        group_name: req.group,
        clusters: req.clusters_raw,
        cache_millis: CACHE_MILLIS,
        hosts,
        last_ref_time: req.now_ms,
        checksum: "",
        all_ips: false,
        reach_protection_threshold: selection.protected,
        valid: true,
        lane: selection.lane.clone(),
    };
    serde_json::to_vec(&info).expect("ServiceInfo serializes")
}
