//! A source's own copy of what it read, indexed by where each instance comes from (an
//! etcd key, a znode path), so that one changed key yields the complete instance lists of
//! the services it touches. Used by the sources whose change feed is per key: [`crate::etcd`]
//! and [`crate::zk`]. Also the two readings of foreign values they share: `host:port`
//! and weights.

use std::collections::{BTreeMap, BTreeSet};

use crate::{ServiceName, Services, SourceInstance};

/// What one key at the source contributes: instances, each in a service.
pub(crate) type Entries = Vec<(ServiceName, SourceInstance)>;

/// Instances by source key, with an index from service to keys.
#[derive(Debug, Default)]
pub(crate) struct Keyed {
    /// What each key contributes (possibly nothing: an unreadable value).
    by_key: BTreeMap<String, Entries>,
    /// Keys contributing to each service; never holds an empty set.
    by_service: BTreeMap<ServiceName, BTreeSet<String>>,
    /// Services known to exist even without instances (a Curator service node).
    declared: BTreeSet<ServiceName>,
}

impl Keyed {
    /// Replaces what `key` contributes. Returns the services whose instances changed.
    pub(crate) fn put(&mut self, key: &str, entries: Entries) -> BTreeSet<ServiceName> {
        if self.by_key.get(key) == Some(&entries) {
            return BTreeSet::new();
        }
        let mut touched = self.remove(key);
        for (service, _) in &entries {
            self.by_service
                .entry(service.clone())
                .or_default()
                .insert(key.to_string());
            touched.insert(service.clone());
        }
        self.by_key.insert(key.to_string(), entries);
        touched
    }

    /// Forgets `key`. Returns the services whose instances changed.
    pub(crate) fn remove(&mut self, key: &str) -> BTreeSet<ServiceName> {
        let mut touched = BTreeSet::new();
        for (service, _) in self.by_key.remove(key).unwrap_or_default() {
            if let Some(keys) = self.by_service.get_mut(&service) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_service.remove(&service);
                }
            }
            touched.insert(service);
        }
        touched
    }

    /// Records that `service` exists, with or without instances. Returns whether it was new.
    pub(crate) fn declare(&mut self, service: ServiceName) -> bool {
        self.declared.insert(service)
    }

    /// Forgets that `service` exists without instances. Returns whether it was declared.
    pub(crate) fn undeclare(&mut self, service: &ServiceName) -> bool {
        self.declared.remove(service)
    }

    /// The complete current instance list of each of `services` (empty: none left).
    pub(crate) fn services(&self, services: impl IntoIterator<Item = ServiceName>) -> Services {
        services
            .into_iter()
            .map(|service| {
                let instances = self.instances(&service);
                (service, instances)
            })
            .collect()
    }

    /// Every service with its instances, declared ones included.
    pub(crate) fn snapshot(&self) -> Services {
        let names = self.by_service.keys().chain(&self.declared).cloned();
        self.services(names.collect::<BTreeSet<_>>())
    }

    /// The instances of `service`, ordered by key.
    fn instances(&self, service: &ServiceName) -> Vec<SourceInstance> {
        let Some(keys) = self.by_service.get(service) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|key| self.by_key.get(key))
            .flatten()
            .filter(|(s, _)| s == service)
            .map(|(_, instance)| instance.clone())
            .collect()
    }
}

/// Splits `host:port` or `[v6]:port` (brackets dropped). `None`: no valid port, or an
/// IPv6 address without brackets.
pub(crate) fn host_port(address: &str) -> Option<(String, u16)> {
    let (host, port) = match address.strip_prefix('[') {
        Some(rest) => rest.split_once("]:")?,
        None => {
            let (host, port) = address.rsplit_once(':')?;
            if host.contains(':') {
                return None;
            }
            (host, port)
        }
    };
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// A weight from a foreign value: a number clamped to roster's 0..=10000, else `default`.
pub(crate) fn weight(value: Option<&str>, default: f64) -> f64 {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite())
        .map_or(default, |w| w.clamp(0.0, 10_000.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metadata;

    fn instance(ip: &str, port: u16) -> SourceInstance {
        SourceInstance {
            cluster: "DEFAULT".into(),
            ip: ip.into(),
            port,
            weight: 1.0,
            healthy: true,
            enabled: true,
            metadata: Metadata::new(),
            source_id: format!("{ip}:{port}"),
        }
    }

    #[test]
    fn put_and_remove_report_touched_services() {
        let (a, b) = (ServiceName::plain("a"), ServiceName::plain("b"));
        let mut keyed = Keyed::default();
        let touched = keyed.put("k1", vec![(a.clone(), instance("10.0.0.1", 1))]);
        assert_eq!(touched, BTreeSet::from([a.clone()]));
        keyed.put("k2", vec![(a.clone(), instance("10.0.0.2", 1))]);
        // Same value again: nothing changed.
        assert!(keyed
            .put("k2", vec![(a.clone(), instance("10.0.0.2", 1))])
            .is_empty());
        // A key moving to another service touches both.
        let touched = keyed.put("k2", vec![(b.clone(), instance("10.0.0.2", 1))]);
        assert_eq!(touched, BTreeSet::from([a.clone(), b.clone()]));
        assert_eq!(
            keyed.services([a.clone()])[&a],
            vec![instance("10.0.0.1", 1)]
        );
        assert_eq!(keyed.remove("k1"), BTreeSet::from([a.clone()]));
        assert_eq!(keyed.services([a.clone()])[&a], Vec::new());
        assert_eq!(keyed.snapshot().keys().collect::<Vec<_>>(), vec![&b]);
        assert!(keyed.remove("missing").is_empty());
    }

    #[test]
    fn reads_addresses_and_weights() {
        let hp = |s: &str| host_port(s).map(|(h, p)| format!("{h} {p}"));
        assert_eq!(hp("10.0.0.1:80").as_deref(), Some("10.0.0.1 80"));
        assert_eq!(hp("[::1]:8080").as_deref(), Some("::1 8080"));
        assert_eq!(hp("svc.local:1").as_deref(), Some("svc.local 1"));
        for bad in [
            "10.0.0.1", "::1:80", "[::1]", ":80", "h:0", "h:99999", "h:x",
        ] {
            assert_eq!(hp(bad), None, "{bad}");
        }
        assert_eq!(weight(Some("200"), 100.0), 200.0);
        assert_eq!(weight(Some(" 0.5 "), 1.0), 0.5);
        assert_eq!(weight(Some("1e9"), 1.0), 10_000.0);
        assert_eq!(weight(Some("-3"), 1.0), 0.0);
        assert_eq!(weight(Some("NaN"), 1.0), 1.0);
        assert_eq!(weight(Some("heavy"), 100.0), 100.0);
        assert_eq!(weight(None, 100.0), 100.0);
    }

    #[test]
    fn declared_services_appear_empty() {
        let a = ServiceName::plain("a");
        let mut keyed = Keyed::default();
        assert!(keyed.declare(a.clone()));
        assert_eq!(keyed.snapshot()[&a], Vec::new());
        keyed.put("k", vec![(a.clone(), instance("10.0.0.1", 1))]);
        keyed.remove("k");
        assert!(keyed.snapshot().contains_key(&a));
        assert!(keyed.undeclare(&a));
        assert!(keyed.snapshot().is_empty());
    }
}
