//! Which instances a query returns: cluster filter, enabled filter, health filter and the
//! protection threshold (Nacos 1.x semantics).

use std::sync::Arc;

use super::instance::Instance;
use super::service::ServiceView;

/// The instances a query returns.
#[derive(Debug)]
pub struct Selection {
    /// Selected instances, in address order.
    pub hosts: Vec<Arc<Instance>>,
    /// True when too few instances are healthy and every instance was returned, each
    /// reported healthy so that clients keep spreading load.
    pub protected: bool,
}

impl Selection {
    /// Whether `host` should be reported healthy.
    pub fn reported_healthy(&self, host: &Instance) -> bool {
        self.protected || host.healthy
    }
}

/// Whether `healthy` of `total` instances reach the protection threshold (Nacos 1.x:
/// healthy/total <= threshold; a negative threshold is off; no instances, no protection).
pub fn protection_triggered(healthy: usize, total: usize, threshold: f64) -> bool {
    total > 0 && threshold >= 0.0 && (healthy as f64 / total as f64) <= threshold
}

/// Selects the enabled instances of `clusters` (all clusters when empty).
///
/// Protection threshold, Nacos 1.x semantics: when healthy/total <= threshold over those
/// instances, every one of them is returned (even with `healthy_only`) and the selection
/// says so. A negative threshold turns protection off.
pub fn select(view: &ServiceView, clusters: &[&str], healthy_only: bool) -> Selection {
    let candidates: Vec<Arc<Instance>> = view
        .instances
        .values()
        .filter(|i| i.enabled)
        .filter(|i| clusters.is_empty() || clusters.contains(&&*i.cluster))
        .cloned()
        .collect();
    let total = candidates.len();
    let healthy = candidates.iter().filter(|i| i.healthy).count();
    let threshold = view
        .settings
        .as_ref()
        .map(|s| s.protect_threshold)
        .unwrap_or(0.0);
    let protected = protection_triggered(healthy, total, threshold);
    let hosts = if healthy_only && !protected {
        candidates.into_iter().filter(|i| i.healthy).collect()
    } else {
        candidates
    };
    Selection { hosts, protected }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::registry::instance::{Heartbeat, Pinned};
    use crate::registry::service::ServiceSettings;

    fn instance(port: u16, cluster: &str, healthy: bool, enabled: bool) -> Arc<Instance> {
        Arc::new(Instance {
            instance_id: format!("{port}").into(),
            ip: "10.0.0.1".into(),
            port,
            cluster: cluster.into(),
            weight: 1.0,
            healthy,
            enabled,
            ephemeral: true,
            metadata: Arc::new(BTreeMap::new()),
            heartbeat: Heartbeat::default(),
            pinned: Pinned::default(),
            beat: None,
        })
    }

    fn view(threshold: Option<f64>, instances: &[Arc<Instance>]) -> ServiceView {
        ServiceView {
            settings: threshold.map(|t| {
                Arc::new(ServiceSettings {
                    protect_threshold: t,
                    ..Default::default()
                })
            }),
            instances: instances.iter().map(|i| (i.addr(), i.clone())).collect(),
            revision: 1,
            modified_ms: 0,
        }
    }

    #[test]
    fn filters_clusters_disabled_and_unhealthy() {
        let v = view(
            Some(0.0),
            &[
                instance(1, "a", true, true),
                instance(2, "a", false, true),
                instance(3, "b", true, true),
                instance(4, "a", true, false),
            ],
        );
        let s = select(&v, &["a"], false);
        assert_eq!(s.hosts.iter().map(|h| h.port).collect::<Vec<_>>(), [1, 2]);
        assert!(!s.protected);
        let s = select(&v, &["a"], true);
        assert_eq!(s.hosts.iter().map(|h| h.port).collect::<Vec<_>>(), [1]);
        let s = select(&v, &[], false);
        assert_eq!(s.hosts.len(), 3);
    }

    #[test]
    fn protection_returns_everything_even_healthy_only() {
        let v = view(
            Some(0.5),
            &[
                instance(1, "a", true, true),
                instance(2, "a", false, true),
                instance(3, "a", false, true),
            ],
        );
        let s = select(&v, &[], true);
        assert!(s.protected);
        assert_eq!(s.hosts.len(), 3);
        assert!(s.hosts.iter().all(|h| s.reported_healthy(h)));
    }

    #[test]
    fn default_threshold_protects_only_when_none_is_healthy() {
        let none_healthy = view(None, &[instance(1, "a", false, true)]);
        assert!(select(&none_healthy, &[], false).protected);
        let one_healthy = view(
            None,
            &[instance(1, "a", false, true), instance(2, "a", true, true)],
        );
        assert!(!select(&one_healthy, &[], false).protected);
        let off = view(Some(-1.0), &[instance(1, "a", false, true)]);
        let s = select(&off, &[], true);
        assert!(!s.protected);
        assert!(s.hosts.is_empty());
        assert!(!select(&view(None, &[]), &[], false).protected);
    }
}
