//! Writes of services and namespaces, a further `impl Registry` block: services
//! created, updated (settings, one cluster), checked and deleted, the sweep of idle empty
//! services, and namespaces created, updated, checked and deleted.

use std::sync::Arc;

use crate::namespace::{Namespace, NamespaceInfo, PUBLIC_NAMESPACE};
use crate::service::{Changed, ClusterSettings, Service, ServiceKey, ServiceSettings, ServiceView};
use crate::{Registry, RegistryError};

impl Registry {
    // ----- service writes --------------------------------------------------------------

    /// Stores settings for a new service; refused if settings are already stored.
    pub fn create_service(
        &self,
        key: &ServiceKey,
        settings: &ServiceSettings,
        now_ms: u64,
    ) -> Result<(), RegistryError> {
        self.modify_service(key, now_ms, |view| {
            if view.settings.is_some() {
                return (
                    Changed::No,
                    Err(RegistryError::ServiceExists(key.grouped())),
                );
            }
            view.settings = Some(Arc::new(settings.clone()));
            (Changed::Yes, Ok(()))
        })
        .2
    }

    /// Stores a service's settings, keeping its cluster settings; creates the service if
    /// needed. (The API checks that the service exists before proposing: existence can
    /// hang on ephemeral instances, which the state machine must not consult.)
    pub fn update_service(&self, key: &ServiceKey, settings: &ServiceSettings, now_ms: u64) {
        self.modify_service(key, now_ms, |view| {
            let mut next = settings.clone();
            if let Some(old) = &view.settings {
                next.clusters = old.clusters.clone();
            }
            view.settings = Some(Arc::new(next));
            (Changed::Yes, ())
        });
    }

    /// Stores the settings of one cluster of a service.
    pub fn put_cluster(
        &self,
        key: &ServiceKey,
        cluster: &str,
        settings: &ClusterSettings,
        now_ms: u64,
    ) {
        self.modify_service(key, now_ms, |view| {
            let mut next = ServiceSettings::clone(&view.settings_or_default());
            next.clusters.insert(cluster.to_string(), settings.clone());
            view.settings = Some(Arc::new(next));
            (Changed::Yes, ())
        });
    }

    /// Whether service `key` may be deleted: it exists and holds no instances.
    pub fn check_deletable(&self, key: &ServiceKey) -> Result<(), RegistryError> {
        let svc = self
            .service_by_key(key)
            .ok_or_else(|| RegistryError::ServiceNotFound(key.grouped()))?;
        if !svc.view().instances.is_empty() {
            return Err(RegistryError::ServiceNotEmpty(key.grouped()));
        }
        Ok(())
    }

    /// Drops a service's stored settings, and the service itself if it is empty. (An
    /// instance that registered after the API's check keeps the service alive.)
    pub fn delete_service(&self, key: &ServiceKey, now_ms: u64) {
        let grouped = key.grouped();
        let Some(ns) = self.namespace(&key.namespace) else {
            return;
        };
        let Some(svc) = ns.services.get(grouped.as_str()).map(|s| s.clone()) else {
            return;
        };
        svc.update(now_ms, |view| {
            let changed = if view.settings.take().is_some() {
                Changed::Yes
            } else {
                Changed::No
            };
            (changed, ())
        });
        if svc.retire(|view| view.instances.is_empty()) {
            ns.services
                .remove_if(grouped.as_str(), |_, s| Arc::ptr_eq(s, &svc));
        }
        self.shared.watchers.mark(&svc.key);
    }

    /// Removes services that have no instances and no stored settings and have not
    /// changed for `ttl_ms`. Returns their keys.
    pub fn sweep_empty(&self, ttl_ms: u64, now_ms: u64) -> Vec<ServiceKey> {
        let mut removed = Vec::new();
        for ns in self.shared.namespaces.iter() {
            let idle: Vec<Arc<Service>> = ns
                .services
                .iter()
                .filter(|s| {
                    let v = s.view();
                    v.instances.is_empty()
                        && v.settings.is_none()
                        && v.modified_ms + ttl_ms <= now_ms
                })
                .map(|s| s.clone())
                .collect();
            for svc in idle {
                let still_idle = |v: &ServiceView| {
                    v.instances.is_empty()
                        && v.settings.is_none()
                        && v.modified_ms + ttl_ms <= now_ms
                };
                if svc.retire(still_idle) {
                    ns.services
                        .remove_if(&*svc.grouped, |_, s| Arc::ptr_eq(s, &svc));
                    removed.push(ServiceKey::clone(&svc.key));
                }
            }
        }
        removed
    }

    // ----- namespaces ------------------------------------------------------------------

    /// Declares a new namespace.
    pub fn create_namespace(&self, info: &NamespaceInfo) -> Result<(), RegistryError> {
        if info.id == PUBLIC_NAMESPACE {
            return Err(RegistryError::NamespaceExists(info.id.clone()));
        }
        let ns = self.namespace_or_create(&info.id);
        if ns.info().is_some() {
            return Err(RegistryError::NamespaceExists(info.id.clone()));
        }
        ns.set_info(Some(info.clone()));
        Ok(())
    }

    /// The declared namespace `id`, other than `public`.
    fn declared_namespace(&self, id: &str) -> Result<Arc<Namespace>, RegistryError> {
        if id == PUBLIC_NAMESPACE {
            return Err(RegistryError::PublicNamespace);
        }
        self.namespace(id)
            .filter(|n| n.info().is_some())
            .ok_or_else(|| RegistryError::NamespaceNotFound(id.to_string()))
    }

    /// Changes a declared namespace's name and description.
    pub fn update_namespace(&self, info: &NamespaceInfo) -> Result<(), RegistryError> {
        self.declared_namespace(&info.id)?
            .set_info(Some(info.clone()));
        Ok(())
    }

    /// Whether namespace `id` may be deleted: declared, not `public`, and holding no
    /// services.
    pub fn check_namespace_deletable(&self, id: &str) -> Result<(), RegistryError> {
        let ns = self.declared_namespace(id)?;
        let services = ns.services.len();
        if services > 0 {
            return Err(RegistryError::NamespaceNotEmpty {
                id: id.to_string(),
                services,
            });
        }
        Ok(())
    }

    /// Drops a namespace's declaration, and the namespace if it holds no services.
    pub fn delete_namespace(&self, id: &str) -> Result<(), RegistryError> {
        self.declared_namespace(id)?.set_info(None);
        self.shared
            .namespaces
            .remove_if(id, |_, n| n.info().is_none() && n.services.is_empty());
        Ok(())
    }
}
