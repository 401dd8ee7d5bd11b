//! The in-memory registry every read is served from: namespaces → services → instances.
//!
//! Reads take no global lock: a namespace and a service are found through sharded maps
//! and the service's current [`ServiceView`] is loaded from an `ArcSwap`. Writers of one
//! service serialize on that service only. Ephemeral writes come straight from the API;
//! persistent writes come from the Raft state machine, with time taken from the command
//! so every node computes the same state.
//!
//! This file holds the core: the [`Registry`] handle, reads, and writes of instances
//! (beats included). The rest lives beside it, one concern a file;
//! [`catalog`], [`sweep`], [`copies`], [`imports`] and [`snapshot`] add further `impl Registry`
//! blocks:
//!
//! - [`instance`] instances and their beat clocks;
//! - [`meta`] instance metadata, compact and shared where it repeats;
//! - [`instances`] a service's instance collection, cheap to copy;
//! - [`service`] service keys, settings and the published views;
//! - [`namespace`] namespaces; [`catalog`] writes of services and namespaces;
//! - [`error`] why an operation was refused ([`RegistryError`]);
//! - [`expiry`] the beat-expiry rule: when an instance is silent, when expired;
//! - [`sweep`] the expiry sweep that applies it, under the eviction guard;
//! - [`client`] Distro's clients: their records and revisions;
//! - [`copies`] operations on whole clients: Distro copies, connections closing;
//! - [`imports`] instances owned by sync tasks;
//! - [`snapshot`] the Raft-held part, as stored in snapshots;
//! - [`select`] query selection and protection threshold;
//! - [`selector`] metadata label selectors;
//! - [`validate`] the naming rules every protocol face applies;
//! - [`balance`] picking one instance (random, round-robin, consistent hash);
//! - [`changes`] change notification for push;
//! - `tests` and `model` (test builds only) the core's unit tests and its model-based test.

pub mod balance;
pub mod catalog;
pub mod changes;
pub mod client;
pub mod clock;
pub mod copies;
pub mod error;
pub mod expiry;
pub mod guard;
pub mod hash;
pub mod imports;
pub mod instance;
pub mod instances;
pub mod meta;
pub mod namespace;
pub mod select;
pub mod selector;
pub mod service;
pub mod snapshot;
pub mod sweep;
pub mod validate;
pub mod wire;

#[cfg(test)]
mod model;

use std::sync::Arc;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};

use changes::{ChangeSet, Watchers};
use client::Clients;
use expiry::beat_deadline;
use instance::{addr_key, Addr, Heartbeat, Instance, Meta, Metadata};
use namespace::{Namespace, PUBLIC_NAMESPACE};
use service::{Changed, Service, ServiceKey, ServiceView};

pub use error::RegistryError;
pub use snapshot::PersistentData;
pub use sweep::{ExpiryReport, NOT_OWNED_RECHECK_MS};

/// An instance kind as errors name it.
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
            // The held map when it is the same (a re-registration), else a new one,
            // shared with an equal map made recently.
            let metadata = match existing.as_ref() {
                Some(e) if pinned.metadata || e.metadata.same_as(&reg.metadata) => {
                    e.metadata.clone()
                }
                _ => Meta::new(&reg.metadata),
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
                next.set_metadata(Meta::new(m));
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
    /// Takes no writer lock on the service unless the beat revives an unhealthy instance
    /// (loading the view publishes a waiting change first, under that lock).
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
