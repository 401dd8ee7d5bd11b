//! Instances imported by sync tasks (migration from other registries): each carries its
//! task as owner. A task's batch writes and removes only its own instances and never
//! takes an address from a client or another task; a deregistration leaves an imported
//! instance alone, and the API refuses it with the task's name ([`Registry::imported`]).

use std::sync::Arc;

use super::instance::{addr_key, Instance};
use super::service::{Changed, ServiceKey};
use super::{Registration, Registry, RegistryError};

impl Registry {
    /// The sync task that owns the instance at `ip:port`, if one does.
    pub fn owner_of(&self, key: &ServiceKey, ip: &str, port: u16) -> Option<Arc<str>> {
        self.instance(key, ip, port)?.owner().cloned()
    }

    /// The error deregistering the instance at `ip:port` meets if a sync task owns it.
    pub fn imported(&self, key: &ServiceKey, ip: &str, port: u16) -> Result<(), RegistryError> {
        match self.owner_of(key, ip, port) {
            Some(task) => Err(RegistryError::Imported {
                service: key.grouped(),
                addr: format!("{ip}:{port}"),
                task: task.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Every instance sync task `task` owns.
    pub fn owned_by(&self, task: &str) -> Vec<(ServiceKey, Arc<Instance>)> {
        let mut out = Vec::new();
        for ns in self.shared.namespaces.iter() {
            for svc in ns.services.iter() {
                let view = svc.view();
                out.extend(
                    view.instances
                        .values()
                        .filter(|i| i.owner().map(|o| &**o) == Some(task))
                        .map(|i| (ServiceKey::clone(&svc.key), i.clone())),
                );
            }
        }
        out
    }

    /// Applies a sync task's batch: registrations (each carrying the task as owner;
    /// addresses held by others are left alone) and removals of its own instances.
    pub fn apply_import(
        &self,
        task: &str,
        upserts: &[(ServiceKey, Registration)],
        removals: &[(ServiceKey, String, u16)],
        now_ms: u64,
    ) {
        for (key, reg) in upserts {
            let reg = Registration {
                owner: Some(task.to_string()),
                ephemeral: false,
                client: None,
                ..reg.clone()
            };
            // Registrations of imports are never refused: they mix with either kind.
            let _ = self.register(key, &reg, now_ms);
        }
        for (key, ip, port) in removals {
            self.remove_owned(key, ip, *port, task, now_ms);
        }
    }

    /// Removes every instance `task` owns; returns how many.
    pub fn remove_all_owned(&self, task: &str, now_ms: u64) -> usize {
        let owned = self.owned_by(task);
        for (key, inst) in &owned {
            self.remove_owned(key, inst.ip(), inst.port, task, now_ms);
        }
        owned.len()
    }

    fn remove_owned(&self, key: &ServiceKey, ip: &str, port: u16, task: &str, now_ms: u64) {
        let addr = addr_key(ip, port);
        self.update_existing(key, now_ms, |view| match view.instances.get(&addr) {
            Some(i) if i.owner().map(|o| &**o) == Some(task) => {
                view.instances.remove(&addr);
                (Changed::Yes, ())
            }
            _ => (Changed::No, ()),
        });
    }
}
