//! Nacos wire shapes shared by queries and push: the `ServiceInfo` object that
//! `/instance/list` answers and UDP push carries, with its host entries.

use std::borrow::Cow;

use serde::Serialize;

use crate::instance::{Instance, Meta, ID_GENERATOR_KEY};
use crate::select::{select, Query, Selection};
use crate::service::{ListParts, ServiceView};

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
    metadata: &'a Meta,
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
            instance.metadata.get(ID_GENERATOR_KEY)
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

/// The `ServiceInfo` object: HTTP lists and UDP pushes carry `dom` and the grouped
/// name, gRPC answers and pushes the plain name and no `dom`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceInfo<'a> {
    /// Grouped name; 1.x clients read `dom`.
    #[serde(skip_serializing_if = "Option::is_none")]
    dom: Option<&'a str>,
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
    serialize(
        view,
        &req.query,
        Named {
            dom: Some(req.grouped),
            name: req.grouped,
            group: req.group,
            grouped: req.grouped,
            clusters_raw: req.clusters_raw,
        },
        req.now_ms,
    )
}

/// How a `ServiceInfo` names its service.
struct Named<'a> {
    dom: Option<&'a str>,
    name: &'a str,
    group: Option<&'a str>,
    /// What hosts carry as `serviceName`.
    grouped: &'a str,
    clusters_raw: &'a str,
}

/// The `ServiceInfo` of what `query` selects of `view`, named as `named` says.
fn serialize(
    view: Option<&ServiceView>,
    query: &Query<'_>,
    named: Named<'_>,
    now_ms: u64,
) -> Vec<u8> {
    let selection = match view {
        Some(v) => select(v, query),
        None => Selection {
            hosts: Vec::new(),
            protected: false,
            lane: None,
        },
    };
    let hosts = selection
        .hosts
        .iter()
        .map(|h| Host::new(h, named.grouped, selection.reported_healthy(h)))
        .collect();
    let info = ServiceInfo {
        dom: named.dom,
        name: named.name,
        group_name: named.group,
        clusters: named.clusters_raw,
        cache_millis: CACHE_MILLIS,
        hosts,
        last_ref_time: now_ms,
        checksum: "",
        all_ips: false,
        reach_protection_threshold: selection.protected,
        valid: true,
        lane: selection.lane,
    };
    serde_json::to_vec(&info).expect("ServiceInfo serializes")
}

/// The plain list answer (no clusters, selector, lanes or `healthyOnly`) of one service
/// version, split around `lastRefTime`: serialized by the first reader of the version
/// and kept in its [`ListCache`](crate::service::ListCache) while the node's
/// budget of cached bodies allows; a new version starts empty. The registry's model
/// test reads it after every change.
pub fn plain_list_parts(view: &ServiceView, grouped: &str, group: &str) -> ListParts {
    view.list_cache.get_or_make(|| {
        split_at_ref_time(service_info(
            Some(view),
            &ListRequest {
                grouped,
                group: Some(group),
                clusters_raw: "",
                query: Query::default(),
                now_ms: 0,
            },
        ))
    })
}

/// Splits a `ServiceInfo` serialized with `lastRefTime` 0 around that value. The
/// top-level key comes after `hosts`, so its last occurrence is the one (a metadata
/// value is a string and would read `"lastRefTime":"0"`). `"hosts":` is found once
/// here: a key cannot occur inside a string value before it (quotes there are
/// escaped), so its first occurrence is the key.
fn split_at_ref_time(body: Vec<u8>) -> ListParts {
    const KEY: &[u8] = b",\"lastRefTime\":";
    const HOSTS: &[u8] = b"\"hosts\":";
    let at = body
        .windows(KEY.len() + 1)
        .rposition(|w| w.starts_with(KEY) && w[KEY.len()] == b'0')
        .expect("ServiceInfo has lastRefTime");
    let hosts_at = body
        .windows(HOSTS.len())
        .position(|w| w == HOSTS)
        .expect("ServiceInfo has hosts");
    let body = bytes::Bytes::from(body);
    ListParts {
        head: body.slice(..at + KEY.len()),
        tail: body.slice(at + KEY.len() + 1..),
        hosts_at,
    }
}

/// The items of page `page_no` (from 1) of `page_size`.
pub fn page<T>(items: Vec<T>, page_no: usize, page_size: usize) -> Vec<T> {
    items
        .into_iter()
        .skip((page_no - 1).saturating_mul(page_size))
        .take(page_size)
        .collect()
}

/// What a gRPC query or push describes.
pub struct GrpcInfoRequest<'a> {
    /// The plain service name.
    pub name: &'a str,
    /// The group.
    pub group: &'a str,
    /// The grouped name (hosts carry it as `serviceName`).
    pub grouped: &'a str,
    /// The clusters string as the client gave it (echoed; clients key caches on it).
    pub clusters_raw: &'a str,
    /// The clusters it names (all when empty).
    pub clusters: &'a [&'a str],
    /// Only healthy instances (unless protection triggers).
    pub healthy_only: bool,
    /// `lastRefTime`.
    pub now_ms: u64,
}

/// Serializes the gRPC `serviceInfo` for `req` over `view` (`None`: unknown service).
/// The plain query of a known service (every cluster, healthy or not) reuses the hosts
/// of the cached plain list ([`plain_list_parts`]): the same hosts, serialized alike,
/// so a query or a push to many subscribers copies bytes instead of serializing every
/// instance again.
pub fn grpc_service_info(view: Option<&ServiceView>, req: &GrpcInfoRequest<'_>) -> Vec<u8> {
    if let Some(view) = view.filter(|_| req.clusters.is_empty() && !req.healthy_only) {
        // The head ends with `"hosts":[...],"lastRefTime":`, and the tail
        // (`,"checksum":...,"valid":true}`) is gRPC's too.
        let ListParts {
            head,
            tail,
            hosts_at: at,
        } = plain_list_parts(view, req.grouped, req.group);
        let mut out = Vec::with_capacity(head.len() - at + tail.len() + 160);
        out.extend_from_slice(b"{\"name\":");
        serde_json::to_writer(&mut out, req.name).expect("strings serialize");
        out.extend_from_slice(b",\"groupName\":");
        serde_json::to_writer(&mut out, req.group).expect("strings serialize");
        out.extend_from_slice(b",\"clusters\":");
        serde_json::to_writer(&mut out, req.clusters_raw).expect("strings serialize");
        out.extend_from_slice(format!(",\"cacheMillis\":{CACHE_MILLIS},").as_bytes());
        out.extend_from_slice(&head[at..]);
        out.extend_from_slice(req.now_ms.to_string().as_bytes());
        out.extend_from_slice(&tail);
        return out;
    }
    grpc_service_info_made(view, req)
}

/// [`grpc_service_info`] serialized from the instances, without the cached list (the
/// registry's model test holds the two equal byte for byte).
pub(crate) fn grpc_service_info_made(
    view: Option<&ServiceView>,
    req: &GrpcInfoRequest<'_>,
) -> Vec<u8> {
    let query = Query {
        clusters: req.clusters,
        healthy_only: req.healthy_only,
        ..Default::default()
    };
    let named = Named {
        dom: None,
        name: req.name,
        group: Some(req.group),
        grouped: req.grouped,
        clusters_raw: req.clusters_raw,
    };
    serialize(view, &query, named, req.now_ms)
}
