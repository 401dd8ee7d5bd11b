//! Which instances a query returns: cluster filter, enabled filter, metadata selector,
//! priority lanes, health filter and the protection threshold (Nacos' comparison; 0 is
//! off).

use std::sync::Arc;

use super::instance::Instance;
use super::selector::LabelSelector;
use super::service::{ServiceView, METADATA_SELECTOR};

/// The metadata key that names an instance's lane unless the service says otherwise.
pub const DEFAULT_LANE_KEY: &str = "lane";

/// What a query asks for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Query<'a> {
    /// Clusters to include (all when empty).
    pub clusters: &'a [&'a str],
    /// Only healthy instances (unless protection triggers).
    pub healthy_only: bool,
    /// A metadata selector; `None` applies the service's stored one, if any.
    pub selector: Option<&'a LabelSelector>,
    /// Lanes in order of preference: the first with a healthy instance wins, else the
    /// base lane (instances without a lane). `Some(&[])` means the base lane only;
    /// `None` ignores lanes.
    pub lanes: Option<&'a [&'a str]>,
}

/// The instances a query returns.
#[derive(Debug)]
pub struct Selection {
    /// Selected instances, in address order.
    pub hosts: Vec<Arc<Instance>>,
    /// True when too few instances are healthy and every instance was returned, each
    /// reported healthy so that clients keep spreading load.
    pub protected: bool,
    /// With lanes: the lane that served (`None`: the base lane).
    pub lane: Option<String>,
}

impl Selection {
    /// Whether `host` should be reported healthy.
    pub fn reported_healthy(&self, host: &Instance) -> bool {
        self.protected || host.healthy
    }
}

/// Whether `healthy` of `total` instances reach the protection threshold: healthy/total
/// <= threshold, as Nacos compares, for a positive threshold. A threshold of 0 (the
/// default) or below is off, unlike Nacos, where 0 still triggers once no instance is
/// healthy: a service whose instances all fell silent then reports them healthy to
/// every consumer until they are removed, and a lone dead instance (the commonest
/// service of all) is never seen unhealthy. No instances, no protection.
pub fn protection_triggered(healthy: usize, total: usize, threshold: f64) -> bool {
    total > 0 && threshold > 0.0 && (healthy as f64 / total as f64) <= threshold
}

/// Selects instances for `query`: enabled, in the clusters, matching the selector, in the
/// chosen lane; then the protection threshold over those (when healthy/total <=
/// threshold every one of them is returned, even with `healthy_only`), else the health
/// filter.
pub fn select(view: &ServiceView, query: &Query<'_>) -> Selection {
    let settings = view.settings.as_deref();
    // The service's stored selector applies when the query gives none (it was checked
    // when stored).
    let stored = match (query.selector, settings.map(|s| &s.selector)) {
        (None, Some(s)) if s.kind == METADATA_SELECTOR => LabelSelector::parse(&s.expression).ok(),
        _ => None,
    };
    let selector = query.selector.or(stored.as_ref());
    let mut candidates: Vec<Arc<Instance>> = view
        .instances
        .values()
        .filter(|i| i.enabled)
        .filter(|i| query.clusters.is_empty() || query.clusters.contains(&&*i.cluster))
        .filter(|i| selector.is_none_or(|s| s.matches(&i.metadata)))
        .cloned()
        .collect();
    let mut lane = None;
    if let Some(lanes) = query.lanes {
        let key = settings
            .and_then(|s| s.lane_key.as_deref())
            .unwrap_or(DEFAULT_LANE_KEY);
        let chosen = lanes.iter().find(|l| {
            candidates
                .iter()
                .any(|i| i.healthy && i.metadata.get(key) == Some(**l))
        });
        candidates.retain(|i| i.metadata.get(key) == chosen.copied());
        lane = chosen.map(|l| l.to_string());
    }
    let total = candidates.len();
    let healthy = candidates.iter().filter(|i| i.healthy).count();
    let threshold = settings.map(|s| s.protect_threshold).unwrap_or(0.0);
    let protected = protection_triggered(healthy, total, threshold);
    let hosts = if query.healthy_only && !protected {
        candidates.into_iter().filter(|i| i.healthy).collect()
    } else {
        candidates
    };
    Selection {
        hosts,
        protected,
        lane,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::instance::{sample, ClusterName, Meta};
    use crate::service::{Selector, ServiceSettings};

    fn instance(port: u16, cluster: &str, healthy: bool, enabled: bool) -> Arc<Instance> {
        with_meta(port, cluster, healthy, enabled, &[])
    }

    fn with_meta(
        port: u16,
        cluster: &str,
        healthy: bool,
        enabled: bool,
        meta: &[(&str, &str)],
    ) -> Arc<Instance> {
        Arc::new(Instance {
            cluster: ClusterName::new(cluster),
            healthy,
            enabled,
            metadata: Meta::new(
                &meta
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..sample(port)
        })
    }

    fn view(settings: Option<ServiceSettings>, instances: &[Arc<Instance>]) -> ServiceView {
        ServiceView {
            list_cache: Default::default(),
            settings: settings.map(Arc::new),
            instances: instances.iter().cloned().collect(),
            revision: 1,
            modified_ms: 0,
        }
    }

    fn threshold(t: f64) -> Option<ServiceSettings> {
        Some(ServiceSettings {
            protect_threshold: t,
            ..Default::default()
        })
    }

    fn ports(s: &Selection) -> Vec<u16> {
        s.hosts.iter().map(|h| h.port).collect()
    }

    #[test]
    fn filters_clusters_disabled_and_unhealthy() {
        let v = view(
            threshold(0.0),
            &[
                instance(1, "a", true, true),
                instance(2, "a", false, true),
                instance(3, "b", true, true),
                instance(4, "a", true, false),
            ],
        );
        let a = ["a"];
        let s = select(
            &v,
            &Query {
                clusters: &a,
                ..Default::default()
            },
        );
        assert_eq!(ports(&s), [1, 2]);
        assert!(!s.protected);
        let s = select(
            &v,
            &Query {
                clusters: &a,
                healthy_only: true,
                ..Default::default()
            },
        );
        assert_eq!(ports(&s), [1]);
        assert_eq!(select(&v, &Query::default()).hosts.len(), 3);
    }

    #[test]
    fn protection_returns_everything_even_healthy_only() {
        let v = view(
            threshold(0.5),
            &[
                instance(1, "a", true, true),
                instance(2, "a", false, true),
                instance(3, "a", false, true),
            ],
        );
        let s = select(
            &v,
            &Query {
                healthy_only: true,
                ..Default::default()
            },
        );
        assert!(s.protected);
        assert_eq!(s.hosts.len(), 3);
        assert!(s.hosts.iter().all(|h| s.reported_healthy(h)));
    }

    #[test]
    fn the_default_threshold_never_protects() {
        // A lone silent instance is reported unhealthy, and a healthy-only query gets
        // nothing: consumers must not be sent to it.
        let none_healthy = view(None, &[instance(1, "a", false, true)]);
        let s = select(&none_healthy, &Query::default());
        assert!(!s.protected);
        assert!(!s.reported_healthy(&s.hosts[0]));
        let healthy_only = Query {
            healthy_only: true,
            ..Default::default()
        };
        assert!(select(&none_healthy, &healthy_only).hosts.is_empty());
        let zero = view(threshold(0.0), &[instance(1, "a", false, true)]);
        assert!(!select(&zero, &healthy_only).protected);
        let off = view(threshold(-1.0), &[instance(1, "a", false, true)]);
        let s = select(&off, &healthy_only);
        assert!(!s.protected);
        assert!(s.hosts.is_empty());
        assert!(!select(&view(None, &[]), &Query::default()).protected);
        // Any positive threshold keeps Nacos' comparison: healthy/total <= threshold.
        let tiny = view(threshold(0.001), &[instance(1, "a", false, true)]);
        assert!(select(&tiny, &healthy_only).protected);
        let half = view(
            threshold(0.5),
            &[instance(1, "a", false, true), instance(2, "a", true, true)],
        );
        assert!(select(&half, &healthy_only).protected, "1/2 <= 0.5");
    }

    #[test]
    fn selectors_from_the_query_or_the_service() {
        let instances = [
            with_meta(1, "a", true, true, &[("env", "prod")]),
            with_meta(2, "a", true, true, &[("env", "dev")]),
            with_meta(3, "a", true, true, &[]),
        ];
        let stored = Some(ServiceSettings {
            selector: Selector {
                kind: METADATA_SELECTOR.into(),
                expression: "env=prod".into(),
            },
            ..Default::default()
        });
        let v = view(stored, &instances);
        assert_eq!(
            ports(&select(&v, &Query::default())),
            [1],
            "the stored selector applies"
        );
        let dev = LabelSelector::parse("env in (dev)").unwrap();
        assert_eq!(
            ports(&select(
                &v,
                &Query {
                    selector: Some(&dev),
                    ..Default::default()
                }
            )),
            [2],
            "the query's wins"
        );
        let all = LabelSelector::parse("").unwrap();
        assert_eq!(
            select(
                &v,
                &Query {
                    selector: Some(&all),
                    ..Default::default()
                }
            )
            .hosts
            .len(),
            3
        );
    }

    #[test]
    fn lanes_pick_the_first_lane_with_a_healthy_instance() {
        let instances = [
            with_meta(1, "a", true, true, &[]),
            with_meta(2, "a", true, true, &[("lane", "v2.0")]),
            with_meta(3, "a", false, true, &[("lane", "v1.2")]),
            with_meta(4, "a", true, true, &[("lane", "v1.2")]),
            with_meta(5, "a", false, true, &[("lane", "v3")]),
        ];
        let v = view(None, &instances);
        // (lanes, expected ports, serving lane)
        let table: &[(&[&str], &[u16], Option<&str>)] = &[
            (&["v2.0", "v1.2"], &[2], Some("v2.0")),
            (&["v1.2", "v2.0"], &[3, 4], Some("v1.2")),
            (&["v3", "v1.2"], &[3, 4], Some("v1.2")),
            (&["v3"], &[1], None),
            (&["nope"], &[1], None),
            (&[], &[1], None),
        ];
        for (lanes, want, lane) in table {
            let s = select(
                &v,
                &Query {
                    lanes: Some(lanes),
                    ..Default::default()
                },
            );
            assert_eq!(ports(&s), *want, "{lanes:?}");
            assert_eq!(s.lane.as_deref(), *lane, "{lanes:?}");
        }
        assert_eq!(
            select(&v, &Query::default()).hosts.len(),
            5,
            "no lanes: every instance"
        );
        // A service can name another key.
        let keyed = view(
            Some(ServiceSettings {
                lane_key: Some("branch".into()),
                ..Default::default()
            }),
            &[
                with_meta(1, "a", true, true, &[("branch", "x")]),
                with_meta(2, "a", true, true, &[("lane", "x")]),
            ],
        );
        assert_eq!(
            ports(&select(
                &keyed,
                &Query {
                    lanes: Some(&["x"]),
                    ..Default::default()
                }
            )),
            [1]
        );
    }
}
