//! The in-memory registry every read is served from: namespaces → services → instances.
//!
//! Reads take no global lock: a namespace and a service are found through sharded maps
//! and the service's current [`ServiceView`] is loaded from an `ArcSwap`. Writers of one
//! service serialize on that service only. Ephemeral writes come straight from the API;
//! persistent writes come from the Raft state machine, with time taken from the command
//! so every node computes the same state.
//!
//! Modules: [`instance`] instances and beat clocks, [`service`] keys, settings and views,
//! [`namespace`] namespaces, [`select`] query selection and protection threshold,
//! [`changes`] change notification for push.

pub mod balance;
pub mod changes;
pub mod client;
pub mod instance;
pub mod instances;
pub mod namespace;
pub mod select;
pub mod selector;
pub mod service;

#[cfg(test)]
mod model;

use std::collections::BTreeMap;
use std::sync::Arc;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};

use crate::health::expiry::{judge, Verdict};
use crate::health::guard::EvictionGuard;
use changes::{ChangeSet, Watchers};
use client::{ClientData, Clients};
use instance::{addr_key, Addr, BeatClock, Heartbeat, Instance, Metadata};
use namespace::{Namespace, NamespaceInfo, PUBLIC_NAMESPACE};
use service::{Changed, ClusterSettings, Service, ServiceKey, ServiceSettings, ServiceView};

/// Why a registry operation was refused. Every variant is the caller's mistake or a
/// conflict with current state; none is an internal failure.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum RegistryError {
    /// The service does not exist.
    #[error("service {0} not found")]
    ServiceNotFound(String),
    /// The service already has stored settings.
    #[error("service {0} already exists")]
    ServiceExists(String),
    /// The service still has instances.
    #[error("service {0} is not empty; deregister its instances first")]
    ServiceNotEmpty(String),
    /// The instance does not exist.
    #[error("instance {addr} not found in service {service}")]
    InstanceNotFound {
        /// The service.
        service: String,
        /// `ip:port`.
        addr: String,
    },
    /// The service holds the other kind of instance.
    #[error("service {service} holds {held} instances; a {wanted} instance cannot join it (deregister them first, or use another service)")]
    KindConflict {
        /// The service.
        service: String,
        /// What it holds.
        held: String,
        /// What was offered.
        wanted: String,
    },
    /// The namespace does not exist.
    #[error("namespace {0} not found")]
    NamespaceNotFound(String),
    /// A namespace with this id exists.
    #[error("namespace {0} already exists")]
    NamespaceExists(String),
    /// The namespace still holds services.
    #[error("namespace {id} still holds {services} service(s); delete them first")]
    NamespaceNotEmpty {
        /// The namespace.
        id: String,
        /// How many services it holds.
        services: usize,
    },
    /// The public namespace cannot be changed this way.
    #[error("the public namespace cannot be deleted")]
    PublicNamespace,
    /// The instance belongs to a sync task.
    #[error("instance {addr} in service {service} is imported by sync task '{task}'; pause or delete the task, or exclude the service from it")]
    Imported {
        /// The service.
        service: String,
        /// `ip:port`.
        addr: String,
        /// The task.
        task: String,
    },
}

fn kind_name(ephemeral: bool) -> &'static str {
    if ephemeral {
        "ephemeral"
    } else {
        "persistent"
    }
}

/// What a client registers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Registration {
    /// IP or host.
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Cluster name.
    pub cluster: String,
    /// Weight, 0 to 10000.
    pub weight: f64,
    /// Initial health (persistent instances; ephemeral ones start healthy).
    pub healthy: bool,
    /// Enabled flag.
    pub enabled: bool,
    /// Ephemeral or persistent.
    pub ephemeral: bool,
    /// Metadata.
    pub metadata: Metadata,
    /// An explicit instance id, if the client gave one.
    pub instance_id: Option<String>,
    /// The gRPC connection client that registers it (`None`: an address client, kept
    /// alive by beats).
    #[serde(default)]
    pub client: Option<String>,
    /// The sync task importing it (persistent, written by the task only).
    #[serde(default)]
    pub owner: Option<String>,
}

/// An operator's update of an instance; `None` fields are left alone.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InstancePatch {
    /// New weight.
    pub weight: Option<f64>,
    /// New enabled flag.
    pub enabled: Option<bool>,
    /// New metadata (replaces the map).
    pub metadata: Option<Metadata>,
}

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

/// How long a removal the eviction guard held waits before it is judged again.
pub const HELD_RECHECK_MS: u64 = 2_000;

/// How soon the sweep looks again at a silent instance whose client another node owns
/// (its owner judges it; when ownership moves here, [`Registry::recheck_all`] brings the
/// look forward). Only silent copies cost a look.
pub const NOT_OWNED_RECHECK_MS: u64 = 5_000;

/// What one pass of the expiry check did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// Instances turned unhealthy.
    pub unhealthy: usize,
    /// Instances removed.
    pub removed: usize,
    /// Removals the eviction guard held back.
    pub held: usize,
    /// Namespaces where the guard engaged in this pass.
    pub engaged: Vec<Arc<str>>,
    /// Namespaces where it released.
    pub released: Vec<Arc<str>>,
}

/// A sweep's expired instances of one service: the service's place in the pass's list
/// and the instances as they stood when judged.
type ExpiredIn = (usize, Vec<Arc<Instance>>);

/// The registry. Cheap to clone: clones share state.
#[derive(Clone, Default)]
pub struct Registry {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Namespaces by id; a namespace appears when declared or first used.
    namespaces: DashMap<Arc<str>, Arc<Namespace>>,
    /// Consumers of change notifications (push).
    watchers: Watchers,
    /// Ephemeral clients, for Distro.
    clients: Clients,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes to service changes: every change marks the service in the returned set.
    pub fn watch(&self) -> Arc<ChangeSet> {
        self.shared.watchers.add()
    }

    /// The ephemeral clients and their revisions.
    pub fn clients(&self) -> &Clients {
        &self.shared.clients
    }

    // ----- reads -----------------------------------------------------------------------

    /// The namespace `id`, if it is declared or holds services.
    pub fn namespace(&self, id: &str) -> Option<Arc<Namespace>> {
        self.shared.namespaces.get(id).map(|n| n.clone())
    }

    /// Every namespace that is declared or holds services, `public` first, then by id.
    pub fn namespaces(&self) -> Vec<Arc<Namespace>> {
        let mut all: Vec<Arc<Namespace>> =
            self.shared.namespaces.iter().map(|n| n.clone()).collect();
        if !all.iter().any(|n| &*n.id == PUBLIC_NAMESPACE) {
            all.push(self.namespace_or_create(PUBLIC_NAMESPACE));
        }
        all.sort_by(|a, b| {
            (&*a.id != PUBLIC_NAMESPACE, &a.id).cmp(&(&*b.id != PUBLIC_NAMESPACE, &b.id))
        });
        all
    }

    /// The service `group@@name` in namespace `ns`.
    pub fn service(&self, ns: &str, grouped: &str) -> Option<Arc<Service>> {
        self.shared
            .namespaces
            .get(ns)
            .and_then(|n| n.services.get(grouped).map(|s| s.clone()))
    }

    /// The service named by `key`.
    pub fn service_by_key(&self, key: &ServiceKey) -> Option<Arc<Service>> {
        with_grouped(&key.group, &key.name, |grouped| {
            self.service(&key.namespace, grouped)
        })
    }

    /// Every service of namespace `ns`, ordered by group and name.
    pub fn services(&self, ns: &str) -> Vec<Arc<Service>> {
        let mut all: Vec<Arc<Service>> = match self.shared.namespaces.get(ns) {
            Some(n) => n.services.iter().map(|s| s.clone()).collect(),
            None => Vec::new(),
        };
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// The names (without group) of the services of `group` in namespace `ns`, sorted.
    pub fn service_names(&self, ns: &str, group: &str) -> Vec<String> {
        let Some(n) = self.shared.namespaces.get(ns) else {
            return Vec::new();
        };
        let mut names: Vec<String> = n
            .services
            .iter()
            .filter(|s| &*s.key.group == group)
            .map(|s| s.key.name.to_string())
            .collect();
        names.sort();
        names
    }

    /// Totals over every namespace: (services, instances, healthy instances).
    pub fn totals(&self) -> (usize, usize, usize) {
        let mut totals = (0, 0, 0);
        for ns in self.shared.namespaces.iter() {
            for svc in ns.services.iter() {
                let view = svc.view();
                totals.0 += 1;
                totals.1 += view.instances.len();
                totals.2 += view.healthy_count();
            }
        }
        totals
    }

    // ----- internals -------------------------------------------------------------------

    fn namespace_or_create(&self, id: &str) -> Arc<Namespace> {
        if let Some(ns) = self.shared.namespaces.get(id) {
            return ns.clone();
        }
        self.shared
            .namespaces
            .entry(Arc::from(id))
            .or_insert_with(|| Arc::new(Namespace::new(id)))
            .clone()
    }

    fn service_or_create(&self, key: &ServiceKey, now_ms: u64) -> Arc<Service> {
        let ns = self.namespace_or_create(&key.namespace);
        if let Some(svc) = with_grouped(&key.group, &key.name, |grouped| {
            ns.services.get(grouped).map(|s| s.clone())
        }) {
            return svc;
        }
        let svc = ns
            .services
            .entry(Arc::from(key.grouped()))
            .or_insert_with(|| Arc::new(Service::new(key.clone(), now_ms)))
            .clone();
        svc
    }

    /// Runs `f` against the service `key` (created if missing), retrying if the service
    /// was removed concurrently; notifies watchers if the view changed.
    fn modify_service<R>(
        &self,
        key: &ServiceKey,
        now_ms: u64,
        mut f: impl FnMut(&mut ServiceView) -> (Changed, R),
    ) -> (Arc<Service>, Changed, R) {
        loop {
            let svc = self.service_or_create(key, now_ms);
            if let Some((changed, result)) = svc.update(now_ms, &mut f) {
                if changed == Changed::Yes {
                    self.shared.watchers.mark(&svc.key);
                }
                return (svc, changed, result);
            }
        }
    }

    /// Runs `f` against the existing service `key`; `None` if it does not exist.
    fn update_existing<R>(
        &self,
        key: &ServiceKey,
        now_ms: u64,
        f: impl FnOnce(&mut ServiceView) -> (Changed, R),
    ) -> Option<(Arc<Service>, Changed, R)> {
        let svc = self.service_by_key(key)?;
        let (changed, result) = svc.update(now_ms, f)?;
        if changed == Changed::Yes {
            self.shared.watchers.mark(&svc.key);
        }
        Some((svc, changed, result))
    }

    // ----- instance writes -------------------------------------------------------------

    /// Registers (or re-registers) an instance. Fields an operator pinned through
    /// [`Registry::update_instance`] keep their values.
    pub fn register(
        &self,
        key: &ServiceKey,
        reg: &Registration,
        now_ms: u64,
    ) -> Result<(), RegistryError> {
        let addr = addr_key(&reg.ip, reg.port);
        let client: Option<Arc<str>> = reg.client.as_deref().map(Arc::from);
        let client_id = client.clone().unwrap_or_else(|| addr.clone());
        let owner: Option<Arc<str>> = reg.owner.as_deref().map(Arc::from);
        let (svc, changed, outcome) = self.modify_service(key, now_ms, |view| {
            let (existing, slot) = view.instances.find(&addr);
            let existing = existing.cloned();
            // An import never takes an address from a client's instance or another
            // task's; a client's registration takes the address from an import.
            if owner.is_some()
                && existing
                    .as_ref()
                    .is_some_and(|e| e.owner() != owner.as_ref())
            {
                return (Changed::No, Ok((None, None)));
            }
            // Only an ephemeral registration is checked here: whether a persistent one
            // conflicts depends on ephemeral (node-local) state, which the Raft state
            // machine must not consult; the API checks it before proposing. Imports
            // mix with either kind.
            // Natives never mix, so the first native instance tells the service's kind
            // (scanning them all made a registration O(instances in the service)).
            let other_kind = reg.ephemeral
                && owner.is_none()
                && view
                    .instances
                    .values()
                    .find(|i| i.owner().is_none())
                    .is_some_and(|i| !i.ephemeral);
            if other_kind {
                return (
                    Changed::No,
                    Err(RegistryError::KindConflict {
                        service: key.grouped(),
                        held: kind_name(!reg.ephemeral).into(),
                        wanted: kind_name(reg.ephemeral).into(),
                    }),
                );
            }
            // A client taking an address over from an import starts unpinned.
            let existing = existing.filter(|e| e.owner() == owner.as_ref());
            let pinned = existing.as_ref().map(|e| e.pinned).unwrap_or_default();
            let keep = |flag: bool| existing.as_ref().filter(|_| flag);
            let metadata = match keep(pinned.metadata) {
                Some(e) => e.metadata.clone(),
                None => instance::shared_metadata(&reg.metadata),
            };
            let heartbeat = Heartbeat::from_metadata(&metadata);
            // A registration is a beat. (A new instance, or new timeouts, is a change:
            // the expiry sweep looks at the service again.)
            let mut last_beat_ms = now_ms;
            if let Some(c) = existing.as_ref().and_then(|e| e.clock()) {
                c.beat(now_ms);
                last_beat_ms = c.last_beat_ms();
            }
            let instance = Instance {
                address: addr.clone(),
                port: reg.port,
                cluster: instance::ClusterName::new(&reg.cluster),
                weight: keep(pinned.weight).map(|e| e.weight).unwrap_or(reg.weight),
                // A registration is proof of life for an ephemeral instance.
                healthy: if reg.ephemeral { true } else { reg.healthy },
                enabled: keep(pinned.enabled)
                    .map(|e| e.enabled)
                    .unwrap_or(reg.enabled),
                ephemeral: reg.ephemeral,
                metadata,
                pinned,
                keeper: instance::Keeper::new(client.clone(), last_beat_ms),
                rare: instance::Rare::boxed(
                    reg.instance_id.as_deref().map(Arc::from),
                    owner.clone(),
                    heartbeat,
                ),
            };
            // Another client held this address here, or this one as an ephemeral
            // instance that a persistent registration replaces: it loses the instance.
            let displaced = existing
                .as_ref()
                .filter(|e| e.ephemeral && (!reg.ephemeral || e.client_id() != client_id))
                .map(|e| e.client_id());
            let unchanged = existing
                .as_ref()
                .is_some_and(|e| same_instance(e, &instance));
            if unchanged {
                return (Changed::No, Ok((displaced, None)));
            }
            // A new or changed beating instance: the sweep looks by its first deadline.
            let deadline = beat_deadline(&instance, now_ms);
            view.instances.put(slot, Arc::new(instance));
            (Changed::Yes, Ok((displaced, deadline)))
        });
        let (displaced, deadline) = outcome?;
        if let Some(at) = deadline {
            svc.check_by(at);
        }
        if changed == Changed::Yes {
            // The service's own key, not the request's: client entries then share its
            // strings instead of holding three more allocations per instance.
            if let Some(old) = displaced {
                self.shared
                    .clients
                    .changed(&old, &svc.key, &addr, false, now_ms);
            }
            if reg.ephemeral {
                self.shared
                    .clients
                    .changed(&client_id, &svc.key, &addr, true, now_ms);
            }
        }
        Ok(())
    }

    /// The error a registration of `ephemeral` kind would meet in service `key`, if its
    /// instances are of the other kind.
    pub fn kind_conflict(&self, key: &ServiceKey, ephemeral: bool) -> Option<RegistryError> {
        let view = self.service_by_key(key)?.view();
        let held = view
            .instances
            .values()
            .find(|i| i.owner().is_none())
            .map(|i| i.ephemeral)?;
        (held != ephemeral).then(|| RegistryError::KindConflict {
            service: key.grouped(),
            held: kind_name(held).into(),
            wanted: kind_name(ephemeral).into(),
        })
    }

    /// Removes the instance at `ip:port`. With `ephemeral` given, only an instance of that
    /// kind is removed. Returns whether one was removed; a missing one is not an error.
    pub fn deregister(
        &self,
        key: &ServiceKey,
        ip: &str,
        port: u16,
        ephemeral: Option<bool>,
        now_ms: u64,
    ) -> bool {
        let addr = addr_key(ip, port);
        let removed = self.update_existing(key, now_ms, |view| match view.instances.get(&addr) {
            Some(i) if ephemeral.is_none_or(|e| e == i.ephemeral) && i.owner().is_none() => {
                let client = i.ephemeral.then(|| i.client_id());
                view.instances.remove(&addr);
                (Changed::Yes, Some(client))
            }
            _ => (Changed::No, None),
        });
        match removed {
            Some((svc, _, Some(client))) => {
                if let Some(client) = client {
                    self.shared
                        .clients
                        .changed(&client, &svc.key, &addr, false, now_ms);
                }
                true
            }
            _ => false,
        }
    }

    /// The instance at `ip:port` in service `key`.
    pub fn instance(&self, key: &ServiceKey, ip: &str, port: u16) -> Option<Arc<Instance>> {
        let view = self.service_by_key(key)?.view();
        view.instances.get(&Addr::new(ip, port)).cloned()
    }

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

    /// Applies an operator's update to the instance of the given kind at `ip:port` and
    /// pins the fields it sets.
    pub fn update_instance(
        &self,
        key: &ServiceKey,
        ip: &str,
        port: u16,
        ephemeral: bool,
        patch: &InstancePatch,
        now_ms: u64,
    ) -> Result<(), RegistryError> {
        let addr = addr_key(ip, port);
        let not_found = || RegistryError::InstanceNotFound {
            service: key.grouped(),
            addr: addr.to_string(),
        };
        let result = self.update_existing(key, now_ms, |view| {
            let Some(existing) = view
                .instances
                .get(&addr)
                .filter(|i| i.ephemeral == ephemeral)
            else {
                return (Changed::No, Err(not_found()));
            };
            let mut next = Instance::clone(existing);
            if let Some(w) = patch.weight {
                next.weight = w;
                next.pinned.weight = true;
            }
            if let Some(e) = patch.enabled {
                next.enabled = e;
                next.pinned.enabled = true;
            }
            if let Some(m) = &patch.metadata {
                next.set_metadata(Arc::new(m.clone()));
                next.pinned.metadata = true;
            }
            let client = next.client_id();
            if same_instance(existing, &next) && existing.pinned == next.pinned {
                return (Changed::No, Ok((client, None)));
            }
            // New metadata may bring new beat timeouts.
            let deadline = beat_deadline(&next, now_ms);
            view.instances.insert(Arc::new(next));
            (Changed::Yes, Ok((client, deadline)))
        });
        match result {
            Some((svc, changed, outcome)) => {
                let (client, deadline) = outcome?;
                if let Some(at) = deadline {
                    svc.check_by(at);
                }
                if changed == Changed::Yes && ephemeral {
                    self.shared
                        .clients
                        .changed(&client, &svc.key, &addr, true, now_ms);
                }
                Ok(())
            }
            None => Err(RegistryError::ServiceNotFound(key.grouped())),
        }
    }

    /// Sets the health of the instance of the given kind at `ip:port`. Returns false if
    /// there is none.
    pub fn set_health(
        &self,
        key: &ServiceKey,
        ip: &str,
        port: u16,
        ephemeral: bool,
        healthy: bool,
        now_ms: u64,
    ) -> bool {
        let addr = addr_key(ip, port);
        let found = |i: &&Arc<Instance>| i.ephemeral == ephemeral;
        let outcome = self.update_existing(key, now_ms, |view| {
            match view.instances.get(&addr).filter(found) {
                Some(i) if i.healthy != healthy => {
                    let next = Instance {
                        healthy,
                        ..Instance::clone(i)
                    };
                    let client = next.client_id();
                    // A revived instance is judged afresh: its next deadline may come
                    // before the one the sweep set when it fell silent (which was its
                    // removal).
                    let deadline = beat_deadline(&next, now_ms);
                    view.instances.insert(Arc::new(next));
                    (Changed::Yes, Some((client, deadline)))
                }
                Some(i) => (Changed::No, Some((i.client_id(), None))),
                None => (Changed::No, None),
            }
        });
        match outcome {
            Some((svc, changed, Some((client, deadline)))) => {
                if let Some(at) = deadline {
                    svc.check_by(at);
                }
                if changed == Changed::Yes && ephemeral {
                    self.shared
                        .clients
                        .changed(&client, &svc.key, &addr, true, now_ms);
                }
                true
            }
            _ => false,
        }
    }

    /// Records a beat from the ephemeral instance at `ip:port` of service `key`, and
    /// marks its client's record confirmed here (this node served the client itself).
    /// Returns its heartbeat settings, or `None` if no such ephemeral instance exists.
    /// Takes no lock on the service unless the beat revives an unhealthy instance.
    pub fn beat(&self, key: &ServiceKey, ip: &str, port: u16, now_ms: u64) -> Option<Heartbeat> {
        self.beat_at(&self.service_by_key(key)?, ip, port, now_ms)
    }

    /// [`Registry::beat`] for the service `grouped` of namespace `ns`.
    pub fn beat_in(
        &self,
        ns: &str,
        grouped: &str,
        ip: &str,
        port: u16,
        now_ms: u64,
    ) -> Option<Heartbeat> {
        self.beat_at(&self.service(ns, grouped)?, ip, port, now_ms)
    }

    fn beat_at(&self, svc: &Arc<Service>, ip: &str, port: u16, now_ms: u64) -> Option<Heartbeat> {
        let addr = Addr::new(ip, port);
        let mut view = svc.view();
        // If a writer changed the service after this beat read the view, the beat may
        // have landed in a replaced instance after its clock was carried over: the second
        // `view()` publishes the change, and the beat stores again into the current
        // version. Each retry needs another change in between; the bound only stops a
        // pathological stream of writes.
        let mut tries = 0;
        let instance = loop {
            let instance = view.instances.get(&addr)?.clone();
            instance.clock()?.beat(now_ms);
            let current = svc.view();
            tries += 1;
            if Arc::ptr_eq(&current, &view) || tries == 8 {
                break instance;
            }
            view = current;
        };
        self.shared.clients.confirm_here(&addr, now_ms);
        if !instance.healthy {
            self.set_health(&svc.key, ip, port, true, true, now_ms);
        }
        Some(instance.heartbeat())
    }

    /// Judges the ephemeral instances of every service whose earliest deadline passed:
    /// marks silent ones unhealthy, removes expired ones. Only clients `owns` approves
    /// are judged (Distro: the owner decides); the others are looked at again later.
    ///
    /// Two phases, so that the outcome does not depend on the order services are
    /// visited in: first every silent instance is marked unhealthy (an expired one too:
    /// it is silent before it is gone), then each namespace with expired instances is
    /// judged once by the eviction `guard`, over its counts after the marking. A mass
    /// silence that jumps straight past the delete timeout (a node frozen or cut off for
    /// longer than it) is thus seen as the mass silence it is, and held.
    ///
    /// A sweep rather than a queue of deadlines: a service that is not due costs one
    /// atomic load, and an instance costs nothing beyond its beat clock (a queue entry
    /// per instance was a tenth of the registry's memory).
    pub fn expire_due(
        &self,
        now_ms: u64,
        owns: &dyn Fn(&str) -> bool,
        guard: &EvictionGuard,
    ) -> ExpiryReport {
        let mut report = ExpiryReport::default();
        let due: Vec<Arc<Service>> = self
            .shared
            .namespaces
            .iter()
            .flat_map(|ns| {
                ns.services
                    .iter()
                    .filter(|s| s.expiry_due(now_ms))
                    .map(|s| s.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        // Phase 1: mark the silent, gather the expired (as marked) by namespace.
        let mut swept: Vec<(Arc<Service>, u64)> = Vec::with_capacity(due.len());
        let mut expired: BTreeMap<Arc<str>, Vec<ExpiredIn>> = BTreeMap::new();
        for svc in due {
            let (next, gone) = self.mark_silent(&svc, now_ms, owns, &mut report);
            if !gone.is_empty() {
                expired
                    .entry(svc.key.namespace.clone())
                    .or_default()
                    .push((swept.len(), gone));
            }
            swept.push((svc, next));
        }
        // Phase 2: one verdict of the guard per namespace.
        for (ns, services) in expired {
            let (silent, total) = self.ephemeral_counts(&ns);
            if guard.policy.holds(silent, total) {
                if guard.hold(&ns, now_ms) {
                    report.engaged.push(ns.clone());
                }
                for (at, gone) in services {
                    report.held += gone.len();
                    // Look again later: an instance whose beats come back is alive
                    // whatever the guard says; only the dead wait for the release.
                    let next = &mut swept[at].1;
                    *next = (*next).min(now_ms + HELD_RECHECK_MS);
                }
                continue;
            }
            if guard.release(&ns) {
                report.released.push(ns.clone());
            }
            for (at, gone) in services {
                report.removed += self.remove_expired(&swept[at].0, &gone, now_ms);
            }
        }
        for (svc, next) in swept {
            svc.swept(next);
        }
        report
    }

    /// Phase 1 of the sweep for one service: judges its owned ephemeral instances, marks
    /// the silent (and expired) ones unhealthy, and returns when the service is next due
    /// and the expired instances, each as it now stands.
    fn mark_silent(
        &self,
        svc: &Arc<Service>,
        now_ms: u64,
        owns: &dyn Fn(&str) -> bool,
        report: &mut ExpiryReport,
    ) -> (u64, Vec<Arc<Instance>>) {
        let view = svc.view();
        let mut next = u64::MAX;
        // Instances to mark unhealthy and to remove, each the version judged: one that
        // changed meanwhile (re-registered, revived) is left to the next sweep, which
        // the change brings forward.
        let mut silent: Vec<Arc<Instance>> = Vec::new();
        let mut expired: Vec<Arc<Instance>> = Vec::new();
        for inst in view.instances.values() {
            let Some(clock) = inst.clock() else {
                continue;
            };
            let heartbeat = inst.heartbeat();
            let verdict = judge(clock.last_beat_ms(), &heartbeat, now_ms);
            // Ownership is asked only of instances that would be acted on (it hashes the
            // client id against the members).
            if !matches!(verdict, Verdict::Alive { .. }) && !owns(&inst.address) {
                // Another node owns this client; its copy here is judged by the owner.
                // When the owner dies the client moves here, and the expiry worker then
                // brings every service forward ([`Registry::recheck_all`]).
                next = next.min(now_ms + NOT_OWNED_RECHECK_MS);
                continue;
            }
            match verdict {
                Verdict::Expired => {
                    // Removed in phase 2, or held, or changed meanwhile: a look later
                    // settles the last two.
                    expired.push(inst.clone());
                    next = next.min(now_ms + HELD_RECHECK_MS);
                }
                Verdict::Silent { recheck_at } => {
                    if inst.healthy {
                        silent.push(inst.clone());
                    }
                    next = next.min(recheck_at);
                }
                Verdict::Alive { recheck_at } => next = next.min(recheck_at),
            }
        }
        if silent.is_empty() && expired.iter().all(|i| !i.healthy) {
            return (next, expired);
        }
        let applied = svc.update(now_ms, |view| {
            let mut marked = Vec::new();
            for inst in silent.iter().chain(&expired) {
                match view.instances.get(&inst.address) {
                    Some(cur) if Arc::ptr_eq(cur, inst) && cur.healthy => {
                        let next = Instance {
                            healthy: false,
                            ..Instance::clone(cur)
                        };
                        view.instances.insert(Arc::new(next));
                        marked.push(inst.address.clone());
                    }
                    _ => {}
                }
            }
            // The expired, as they stand after the marking (gone or replaced: left to
            // the next sweep).
            let expired: Vec<Arc<Instance>> = expired
                .iter()
                .filter_map(|inst| {
                    let cur = view.instances.get(&inst.address)?;
                    let same =
                        Arc::ptr_eq(cur, inst) || (marked.contains(&inst.address) && !cur.healthy);
                    same.then(|| cur.clone())
                })
                .collect();
            let changed = if marked.is_empty() {
                Changed::No
            } else {
                Changed::Yes
            };
            (changed, (marked, expired))
        });
        let Some((changed, (marked, expired))) = applied else {
            return (next, Vec::new());
        };
        if changed == Changed::Yes {
            self.shared.watchers.mark(&svc.key);
        }
        // Only address clients have beat clocks: the client is the address.
        for addr in &marked {
            self.shared
                .clients
                .changed(addr, &svc.key, addr, true, now_ms);
        }
        report.unhealthy += marked.len();
        (next, expired)
    }

    /// Phase 2 of the sweep for one service: removes the expired instances the guard let
    /// go, unless they changed since they were judged. Returns how many went.
    fn remove_expired(&self, svc: &Arc<Service>, expired: &[Arc<Instance>], now_ms: u64) -> usize {
        let applied = svc.update(now_ms, |view| {
            let mut removed = Vec::new();
            for inst in expired {
                if view
                    .instances
                    .get(&inst.address)
                    .is_some_and(|cur| Arc::ptr_eq(cur, inst))
                {
                    view.instances.remove(&inst.address);
                    removed.push(inst.address.clone());
                }
            }
            let changed = if removed.is_empty() {
                Changed::No
            } else {
                Changed::Yes
            };
            (changed, removed)
        });
        let Some((changed, removed)) = applied else {
            return 0;
        };
        if changed == Changed::Yes {
            self.shared.watchers.mark(&svc.key);
        }
        for addr in &removed {
            self.shared
                .clients
                .changed(addr, &svc.key, addr, false, now_ms);
        }
        removed.len()
    }

    /// Brings every service's next expiry check forward to now. The expiry worker calls
    /// it when the live members change: ownership of clients (and whether this node may
    /// judge at all) changed, and an inherited silent instance must be judged on time.
    pub fn recheck_all(&self) {
        for ns in self.shared.namespaces.iter() {
            for svc in ns.services.iter() {
                svc.check_by(0);
            }
        }
    }

    /// Counts (unhealthy, all) ephemeral instances of namespace `ns`.
    fn ephemeral_counts(&self, ns: &str) -> (usize, usize) {
        let mut counts = (0, 0);
        let Some(ns) = self.namespace(ns) else {
            return counts;
        };
        for svc in ns.services.iter() {
            for inst in svc.view().instances.values().filter(|i| i.ephemeral) {
                counts.1 += 1;
                if !inst.healthy {
                    counts.0 += 1;
                }
            }
        }
        counts
    }

    // ----- clients (Distro) ------------------------------------------------------------

    /// The instances client `id` holds here (service, instance).
    fn client_instances(&self, id: &str) -> Vec<(Arc<ServiceKey>, Arc<Instance>)> {
        let Some(record) = self.shared.clients.get(id) else {
            return Vec::new();
        };
        record
            .entries
            .iter()
            .filter_map(|(key, addr)| {
                let svc = self.service_by_key(key)?;
                let inst = svc.view().instances.get(addr).cloned()?;
                (inst.ephemeral && &*inst.client_id() == id).then(|| (key.clone(), inst))
            })
            .collect()
    }

    /// The whole state of client `id` as this node has it.
    pub fn client_data(&self, id: &str) -> Option<ClientData> {
        let record = self.shared.clients.get(id)?;
        let held = self.client_instances(id);
        let last_beat_ms = held
            .iter()
            .filter_map(|(_, i)| i.clock().map(|c| c.last_beat_ms()))
            .max()
            .unwrap_or(0);
        Some(ClientData {
            id: id.to_string(),
            revision: record.revision,
            last_beat_ms,
            instances: held
                .into_iter()
                .map(|(k, i)| (ServiceKey::clone(&k), Instance::clone(&i)))
                .collect(),
        })
    }

    /// Runs `f` on the beat clock of every instance client `id` holds here, without
    /// collecting them: Distro's rounds call this once per client.
    fn for_each_client_clock(&self, id: &str, mut f: impl FnMut(&BeatClock)) {
        self.shared.clients.with_entries(id, |entries| {
            for (key, addr) in entries {
                let Some(svc) = self.service_by_key(key) else {
                    continue;
                };
                let view = svc.view();
                let Some(inst) = view.instances.get(addr) else {
                    continue;
                };
                // The client's own: a connection client by id, an address client by address.
                let own = match inst.client() {
                    Some(client) => &**client == id,
                    None => &**addr == id,
                };
                if let Some(clock) = inst.clock().filter(|_| own) {
                    f(clock);
                }
            }
        });
    }

    /// The newest beat of client `id` this node saw (or was told of).
    pub fn client_last_beat(&self, id: &str) -> u64 {
        let mut last = 0;
        self.for_each_client_clock(id, |clock| last = last.max(clock.last_beat_ms()));
        last
    }

    /// Moves the beat clocks of client `id` forward to `last_beat_ms` (its owner saw it).
    pub fn refresh_client_beat(&self, id: &str, last_beat_ms: u64) {
        self.for_each_client_clock(id, |clock| clock.beat(last_beat_ms));
    }

    /// Applies a copy of a client from its owner if it is newer than this node's: the
    /// client's ephemeral instances become exactly `data.instances`. A persistent
    /// instance, or another client's, at the same address is left alone (two clients
    /// publishing one address would otherwise displace each other's copies on every
    /// exchange), and the client's record here lists only the instances it holds here.
    /// Returns whether it applied.
    pub fn apply_client(&self, data: &ClientData, now_ms: u64) -> bool {
        let id: Arc<str> = data.id.as_str().into();
        let old = self.shared.clients.get(&data.id);
        if old.as_ref().is_some_and(|r| r.revision >= data.revision) {
            return false;
        }
        if let Some(old) = &old {
            let gone = old.entries.iter().filter(|(key, addr)| {
                !data
                    .instances
                    .iter()
                    .any(|(k, i)| k == &**key && i.address == *addr)
            });
            for (key, addr) in gone {
                self.remove_client_instance(key, addr, &id, now_ms);
            }
        }
        // The entries as stored share the service's key and the view's address.
        let mut interned = Vec::with_capacity(data.instances.len());
        for (key, incoming) in &data.instances {
            let addr = incoming.addr();
            let (svc, _, (held, deadline)) = self.modify_service(key, now_ms, |view| {
                let existing = view.instances.get(&addr).cloned();
                if existing
                    .as_ref()
                    .is_some_and(|e| !e.ephemeral || e.client_id() != id)
                {
                    return (Changed::No, (false, None));
                }
                let mut instance = incoming.clone();
                // Address clients carry a beat clock, restarted from the owner's last beat
                // so that a takeover judges them from there (or from this node's own copy
                // of the same client's, if later).
                let mut last_beat_ms = data.last_beat_ms;
                let same_owner = existing.as_ref().filter(|e| e.client_id() == id);
                if let Some(c) = same_owner.and_then(|e| e.clock()) {
                    c.beat(data.last_beat_ms);
                    last_beat_ms = c.last_beat_ms();
                }
                if let instance::Keeper::Beats(clock) = &mut instance.keeper {
                    *clock = BeatClock::new(last_beat_ms);
                }
                let unchanged = existing
                    .as_ref()
                    .is_some_and(|e| same_instance(e, &instance) && e.pinned == instance.pinned);
                if unchanged {
                    return (Changed::No, (true, None));
                }
                let deadline = beat_deadline(&instance, now_ms);
                view.instances.insert(Arc::new(instance));
                (Changed::Yes, (true, deadline))
            });
            // A new or changed beating instance: the sweep looks by its first deadline.
            if let Some(at) = deadline {
                svc.check_by(at);
            }
            if held {
                interned.push((svc.key.clone(), addr.clone()));
            }
        }
        self.shared
            .clients
            .replace(&id, data.revision, interned.into_iter().collect(), now_ms);
        true
    }

    /// Drops this node's copy of client `id` (its owner stopped confirming it), keeping
    /// its revision so that an older copy is not taken back.
    pub fn drop_client_copy(&self, id: &str, now_ms: u64) {
        let Some(record) = self.shared.clients.get(id) else {
            return;
        };
        let id: Arc<str> = id.into();
        for (key, addr) in &record.entries {
            self.remove_client_instance(key, addr, &id, now_ms);
        }
        self.shared
            .clients
            .replace(&id, record.revision, client::Entries::default(), now_ms);
    }

    /// Removes every instance of client `id` here as a local change (a gRPC connection
    /// closed): replicated to peers like any change.
    pub fn remove_client(&self, id: &str, now_ms: u64) -> usize {
        let id: Arc<str> = id.into();
        let held = self.client_instances(&id);
        for (key, inst) in &held {
            let addr = inst.addr();
            if self.remove_client_instance(key, &addr, &id, now_ms) {
                self.shared.clients.changed(&id, key, &addr, false, now_ms);
            }
        }
        held.len()
    }

    /// Removes client `id`'s instances in service `key` whose address is not in `keep`
    /// (a gRPC client replacing its set); returns how many went.
    pub fn retain_client_instances(
        &self,
        id: &str,
        key: &ServiceKey,
        keep: &[Arc<str>],
        now_ms: u64,
    ) -> usize {
        let id: Arc<str> = id.into();
        let mut removed = 0;
        for (k, inst) in self.client_instances(&id) {
            let addr = inst.addr();
            if &*k == key
                && !keep.contains(&addr)
                && self.remove_client_instance(&k, &addr, &id, now_ms)
            {
                self.shared.clients.changed(&id, &k, &addr, false, now_ms);
                removed += 1;
            }
        }
        removed
    }

    /// Removes the ephemeral instance at `addr` if client `id` owns it.
    fn remove_client_instance(
        &self,
        key: &ServiceKey,
        addr: &Arc<str>,
        id: &Arc<str>,
        now_ms: u64,
    ) -> bool {
        self.update_existing(key, now_ms, |view| match view.instances.get(addr) {
            Some(i) if i.ephemeral && i.client_id() == *id => {
                view.instances.remove(addr);
                (Changed::Yes, true)
            }
            _ => (Changed::No, false),
        })
        .is_some_and(|(_, _, removed)| removed)
    }

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

    // ----- snapshot --------------------------------------------------------------------

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

/// Runs `f` on `group@@name`, written into a per-thread buffer rather than allocated
/// (every write and beat looks its service up by key).
fn with_grouped<R>(group: &str, name: &str, f: impl FnOnce(&str) -> R) -> R {
    thread_local! {
        static GROUPED: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    }
    GROUPED.with_borrow_mut(|grouped| {
        grouped.clear();
        service::write_grouped(grouped, group, name);
        f(grouped)
    })
}

/// When the expiry sweep must next judge `instance`, if it beats: now, if it is already
/// silent but still marked healthy (a Distro copy can arrive so, carrying its owner's
/// last beat) or expired.
fn beat_deadline(instance: &Instance, now_ms: u64) -> Option<u64> {
    let clock = instance.clock()?;
    Some(
        match judge(clock.last_beat_ms(), &instance.heartbeat(), now_ms) {
            Verdict::Silent { .. } if instance.healthy => now_ms,
            Verdict::Alive { recheck_at } | Verdict::Silent { recheck_at } => recheck_at,
            Verdict::Expired => now_ms,
        },
    )
}

/// Whether two versions of an instance look the same to a consumer.
fn same_instance(a: &Instance, b: &Instance) -> bool {
    a.rare == b.rare
        && a.cluster == b.cluster
        && a.weight == b.weight
        && a.healthy == b.healthy
        && a.enabled == b.enabled
        && a.ephemeral == b.ephemeral
        && a.metadata == b.metadata
        && a.client() == b.client()
}

#[cfg(test)]
mod tests;
