//! The Raft-held part of the registry (declared namespaces, service settings, persistent
//! instances) as a Raft snapshot stores it, and its restore. Ephemeral instances are
//! Distro's: they never enter a Raft snapshot, and a restore leaves them alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::instance::Instance;
use super::namespace::NamespaceInfo;
use super::service::{Changed, ServiceKey, ServiceSettings};
use super::Registry;

/// The Raft-held part of the registry, as stored in snapshots.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PersistentData {
    /// Declared namespaces (not `public`).
    pub namespaces: Vec<NamespaceInfo>,
    /// Stored service settings.
    pub services: Vec<(ServiceKey, ServiceSettings)>,
    /// Persistent instances.
    pub instances: Vec<(ServiceKey, Instance)>,
}

impl Registry {
    /// The Raft-held part of the registry.
    pub fn persistent_data(&self) -> PersistentData {
        let mut data = PersistentData::default();
        for ns in self.namespaces() {
            if let Some(info) = ns.info() {
                data.namespaces.push(NamespaceInfo::clone(&info));
            }
            for svc in self.services(&ns.id) {
                let view = svc.view();
                if let Some(settings) = &view.settings {
                    data.services.push((
                        ServiceKey::clone(&svc.key),
                        ServiceSettings::clone(settings),
                    ));
                }
                for inst in view.instances.values().filter(|i| !i.ephemeral) {
                    data.instances
                        .push((ServiceKey::clone(&svc.key), Instance::clone(inst)));
                }
            }
        }
        data
    }

    /// Replaces the Raft-held part of the registry with `data`; ephemeral instances stay.
    pub fn restore_persistent(&self, data: &PersistentData, now_ms: u64) {
        for ns in self.shared.namespaces.iter() {
            ns.set_info(None);
            for svc in ns.services.iter() {
                svc.update(now_ms, |view| {
                    view.settings = None;
                    view.instances.retain(|i| i.ephemeral);
                    (Changed::Yes, ())
                });
                self.shared.watchers.mark(&svc.key);
            }
        }
        for info in &data.namespaces {
            self.namespace_or_create(&info.id)
                .set_info(Some(info.clone()));
        }
        let mut by_service: BTreeMap<&ServiceKey, Vec<&Instance>> = BTreeMap::new();
        for (key, inst) in &data.instances {
            by_service.entry(key).or_default().push(inst);
        }
        for (key, settings) in &data.services {
            self.modify_service(key, now_ms, |view| {
                view.settings = Some(Arc::new(settings.clone()));
                (Changed::Yes, ())
            });
        }
        for (key, instances) in by_service {
            self.modify_service(key, now_ms, |view| {
                // Collected, not inserted one by one: chunks come out full and exact.
                view.instances = view
                    .instances
                    .values()
                    .cloned()
                    .chain(instances.iter().map(|i| Arc::new(Instance::clone(i))))
                    .collect();
                (Changed::Yes, ())
            });
        }
    }
}
