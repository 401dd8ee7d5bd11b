//! The naive model: plain ordered maps of services and instances, every read recomputed
//! from them on demand, and each operation written out as the registry's documented
//! behaviour in the most direct way, with no cache, index or schedule to get wrong.

use std::collections::{BTreeMap, BTreeSet};

use super::ops::{
    addr_id, model_matches, QuerySpec, Rev, ADDRS, CLUSTER_FILTERS, LANES, SERVICES, START_MS,
};
use crate::guard::{GuardPolicy, HELD_RECHECK_MS};
use crate::instance::{Metadata, Pinned, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY};
use crate::service::{ServiceSettings, METADATA_SELECTOR};
use crate::InstancePatch;

/// An instance as the model keeps it: every field spelled out.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct MInstance {
    pub(super) address: String,
    pub(super) ip: String,
    pub(super) port: u16,
    pub(super) cluster: String,
    pub(super) weight: f64,
    pub(super) healthy: bool,
    pub(super) enabled: bool,
    pub(super) ephemeral: bool,
    pub(super) metadata: Metadata,
    pub(super) pinned: Pinned,
    /// The gRPC connection that holds it, if one does.
    pub(super) conn: Option<String>,
    /// The sync task that imported it, if one did.
    pub(super) task: Option<String>,
    pub(super) instance_id: Option<String>,
    /// Last beat, ms; meaningful for [`MInstance::beats`] instances.
    pub(super) last_beat: u64,
    /// The eviction guard held its removal (cleared by any new version).
    pub(super) held: bool,
}

impl MInstance {
    /// Lives by HTTP beats: ephemeral, of an address client.
    pub(super) fn beats(&self) -> bool {
        self.ephemeral && self.conn.is_none()
    }

    fn client_id(&self) -> String {
        self.conn.clone().unwrap_or_else(|| self.address.clone())
    }

    /// (beat timeout, delete timeout) from the `preserved.*` keys: positive integers
    /// count, anything else leaves the default.
    pub(super) fn timeouts(&self) -> (u64, u64) {
        let read = |k: &str, default: u64| match self.metadata.get(k) {
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => default,
            },
            None => default,
        };
        (
            read(BEAT_TIMEOUT_KEY, 15_000),
            read(DELETE_TIMEOUT_KEY, 30_000),
        )
    }

    pub(super) fn interval(&self) -> u64 {
        match self
            .metadata
            .get(BEAT_INTERVAL_KEY)
            .map(|v| v.trim().parse::<u64>())
        {
            Some(Ok(n)) if n > 0 => n,
            _ => 5_000,
        }
    }

    /// What a consumer can see of it (beat clocks, pins and guard notes aside).
    pub(super) fn visible(&self) -> String {
        format!(
            "{} {} {} {} {} {} {:?} {:?} {:?} {:?}",
            self.address,
            self.cluster,
            self.weight,
            self.healthy,
            self.enabled,
            self.ephemeral,
            self.metadata,
            self.conn,
            self.task,
            self.instance_id
        )
    }
}

#[derive(Clone, Debug, Default)]
pub(super) struct MService {
    pub(super) settings: Option<ServiceSettings>,
    pub(super) instances: BTreeMap<String, MInstance>,
}

impl MService {
    pub(super) fn visible(&self) -> String {
        let settings = self.settings.as_ref().map(|s| {
            (
                s.protect_threshold,
                s.selector.kind.clone(),
                s.selector.expression.clone(),
                s.lane_key.clone(),
            )
        });
        let instances: Vec<String> = self.instances.values().map(MInstance::visible).collect();
        format!("{settings:?} {instances:?}")
    }

    /// The kind of the first instance no task imported, in address order.
    fn native_kind(&self) -> Option<bool> {
        self.instances
            .values()
            .find(|i| i.task.is_none())
            .map(|i| i.ephemeral)
    }
}

/// What a registration says, model side.
pub(super) struct MReg {
    pub(super) svc: usize,
    pub(super) addr: usize,
    pub(super) cluster: String,
    pub(super) weight: f64,
    pub(super) healthy: bool,
    pub(super) enabled: bool,
    pub(super) ephemeral: bool,
    pub(super) metadata: Metadata,
    pub(super) instance_id: Option<String>,
    pub(super) conn: Option<String>,
    pub(super) task: Option<String>,
}

/// A query's answer: (address, reported healthy) in address order, protected, lane.
pub(super) type Answer = (Vec<(String, bool)>, bool, Option<String>);

/// A shadowed copy as it came: last beat, instances, and their services.
type ShadowCopy = (u64, Vec<MInstance>, Vec<usize>);

pub(super) struct Model {
    pub(super) now: u64,
    policy: GuardPolicy,
    pub(super) services: BTreeMap<usize, MService>,
    /// Address clients another node owns.
    pub(super) foreign: BTreeSet<String>,
    /// Clients this node has a record of.
    pub(super) known: BTreeSet<String>,
    /// Clients whose last copy left out an instance because another client's ephemeral
    /// instance held its address: the same revision is taken again, and the copy itself
    /// (`None` once a local change made it stale) is taken again whenever a client's
    /// instance leaves an address.
    shadowed: BTreeMap<String, Option<ShadowCopy>>,
    /// Per namespace, the last sweep at which the guard held removals.
    last_hold: BTreeMap<String, u64>,
    /// Clients changed here in the current step (Distro must take them).
    pub(super) changed_here: BTreeSet<String>,
    /// Held instances the guard let go whose removal may still wait (see the module
    /// doc): (service, address).
    pub(super) may_linger: Vec<(usize, String)>,
}

impl Model {
    pub(super) fn new(policy: GuardPolicy) -> Self {
        Self {
            now: START_MS,
            policy,
            services: BTreeMap::new(),
            foreign: BTreeSet::new(),
            known: BTreeSet::new(),
            shadowed: BTreeMap::new(),
            last_hold: BTreeMap::new(),
            changed_here: BTreeSet::new(),
            may_linger: Vec::new(),
        }
    }

    fn local_change(&mut self, client: String) {
        // A shadowed copy is no longer this node's copy of the client.
        if let Some(copy) = self.shadowed.get_mut(&client) {
            *copy = None;
        }
        self.known.insert(client.clone());
        self.changed_here.insert(client);
    }

    /// The API's check before a persistent registration is proposed.
    pub(super) fn persistent_conflict(&self, svc: usize) -> bool {
        self.services
            .get(&svc)
            .and_then(MService::native_kind)
            .is_some_and(|ephemeral| ephemeral)
    }

    pub(super) fn register(&mut self, reg: MReg) -> Result<(), ()> {
        let now = self.now;
        let address = addr_id(reg.addr);
        let s = self.services.entry(reg.svc).or_default();
        let existing = s.instances.get(&address).cloned();
        // An import never takes an address from someone else.
        if reg.task.is_some() && existing.as_ref().is_some_and(|e| e.task != reg.task) {
            return Ok(());
        }
        if reg.ephemeral && reg.task.is_none() && s.native_kind() == Some(false) {
            return Err(());
        }
        let prior = existing.filter(|e| e.task == reg.task);
        let pinned = prior.as_ref().map(|p| p.pinned).unwrap_or_default();
        let keep = |flag: bool| prior.as_ref().filter(|_| flag);
        let metadata = keep(pinned.metadata).map_or(reg.metadata.clone(), |p| p.metadata.clone());
        let last_beat = match prior.as_ref().filter(|p| p.beats()) {
            Some(p) => p.last_beat.max(now),
            None => now,
        };
        let (ip, port) = ADDRS[reg.addr];
        let next = MInstance {
            address: address.clone(),
            ip: ip.to_string(),
            port,
            cluster: reg.cluster,
            weight: keep(pinned.weight).map_or(reg.weight, |p| p.weight),
            healthy: reg.ephemeral || reg.healthy,
            enabled: keep(pinned.enabled).map_or(reg.enabled, |p| p.enabled),
            ephemeral: reg.ephemeral,
            metadata,
            pinned,
            conn: reg.conn,
            task: reg.task,
            instance_id: reg.instance_id,
            last_beat,
            held: false,
        };
        // The client that held the address as an ephemeral instance loses it to another
        // client, or to a persistent registration.
        let displaced = prior
            .as_ref()
            .filter(|p| p.ephemeral && (!next.ephemeral || p.client_id() != next.client_id()))
            .map(MInstance::client_id);
        if let Some(p) = prior.as_ref().filter(|p| p.visible() == next.visible()) {
            // Unchanged, but a registration is a beat.
            let p = s.instances.get_mut(&p.address).expect("prior is there");
            p.last_beat = last_beat;
            return Ok(());
        }
        let client = next.client_id();
        s.instances.insert(address, next);
        if let Some(old) = displaced {
            self.local_change(old);
        }
        if reg.ephemeral {
            self.local_change(client);
        }
        Ok(())
    }

    pub(super) fn deregister(&mut self, svc: usize, addr: usize, ephemeral: Option<bool>) -> bool {
        let address = addr_id(addr);
        let Some(s) = self.services.get_mut(&svc) else {
            return false;
        };
        match s.instances.get(&address) {
            Some(i) if ephemeral.is_none_or(|e| e == i.ephemeral) && i.task.is_none() => {
                let i = s.instances.remove(&address).expect("just seen");
                if i.ephemeral {
                    self.local_change(i.client_id());
                }
                true
            }
            _ => false,
        }
    }

    pub(super) fn update(
        &mut self,
        svc: usize,
        addr: usize,
        ephemeral: bool,
        patch: &InstancePatch,
    ) -> Result<(), &'static str> {
        let Some(s) = self.services.get_mut(&svc) else {
            return Err("service");
        };
        let Some(i) = s
            .instances
            .get_mut(&addr_id(addr))
            .filter(|i| i.ephemeral == ephemeral)
        else {
            return Err("instance");
        };
        let mut next = i.clone();
        if let Some(w) = patch.weight {
            next.weight = w;
            next.pinned.weight = true;
        }
        if let Some(e) = patch.enabled {
            next.enabled = e;
            next.pinned.enabled = true;
        }
        if let Some(m) = &patch.metadata {
            next.metadata = m.clone();
            next.pinned.metadata = true;
        }
        if next.visible() == i.visible() && next.pinned == i.pinned {
            return Ok(());
        }
        next.held = false;
        let client = next.client_id();
        *i = next;
        if ephemeral {
            self.local_change(client);
        }
        Ok(())
    }

    /// Sets the health of the instance of the given kind; false if there is none.
    pub(super) fn set_health(
        &mut self,
        svc: usize,
        address: &str,
        ephemeral: bool,
        healthy: bool,
    ) -> bool {
        let Some(i) = self
            .services
            .get_mut(&svc)
            .and_then(|s| s.instances.get_mut(address))
            .filter(|i| i.ephemeral == ephemeral)
        else {
            return false;
        };
        if i.healthy != healthy {
            i.healthy = healthy;
            i.held = false;
            let client = i.client_id();
            if ephemeral {
                self.local_change(client);
            }
        }
        true
    }

    /// A beat: its interval, or `None` when no instance lives by beats there.
    pub(super) fn beat(&mut self, svc: usize, addr: usize) -> Option<u64> {
        let now = self.now;
        let address = addr_id(addr);
        let i = self
            .services
            .get_mut(&svc)?
            .instances
            .get_mut(&address)
            .filter(|i| i.beats())?;
        i.last_beat = i.last_beat.max(now);
        let (revive, interval) = (!i.healthy, i.interval());
        if revive {
            self.set_health(svc, &address, true, true);
        }
        Some(interval)
    }

    /// One expiry pass: mark every silent owned instance unhealthy, then per namespace
    /// let the guard hold or remove the expired ones.
    pub(super) fn sweep(&mut self) {
        let now = self.now;
        let mut expired: BTreeMap<&str, Vec<(usize, String)>> = BTreeMap::new();
        let mut marked = Vec::new();
        for (&svc, s) in &mut self.services {
            for i in s.instances.values_mut() {
                if !i.beats() || self.foreign.contains(&i.address) {
                    continue;
                }
                let silence = now.saturating_sub(i.last_beat);
                let (timeout, delete) = i.timeouts();
                if silence > timeout.min(delete) && i.healthy {
                    i.healthy = false;
                    i.held = false;
                    marked.push(i.client_id());
                }
                if silence > delete {
                    expired
                        .entry(SERVICES[svc].0)
                        .or_default()
                        .push((svc, i.address.clone()));
                }
            }
        }
        for client in marked {
            self.local_change(client);
        }
        for (ns, gone) in expired {
            let (mut silent, mut total) = (0, 0);
            for (svc, s) in &self.services {
                if SERVICES[*svc].0 != ns {
                    continue;
                }
                for i in s.instances.values().filter(|i| i.ephemeral) {
                    total += 1;
                    silent += usize::from(!i.healthy);
                }
            }
            let p = self.policy;
            let holds =
                p.share < 1.0 && silent >= p.min_count && silent as f64 > p.share * total as f64;
            if holds {
                self.last_hold.insert(ns.to_string(), now);
                for (svc, address) in gone {
                    let i = self
                        .services
                        .get_mut(&svc)
                        .unwrap()
                        .instances
                        .get_mut(&address);
                    i.expect("expired instance").held = true;
                }
                continue;
            }
            let settled = self
                .last_hold
                .get(ns)
                .is_none_or(|at| now >= at + HELD_RECHECK_MS);
            for (svc, address) in gone {
                let held = self.services[&svc].instances[&address].held;
                if held && !settled {
                    self.may_linger.push((svc, address));
                    continue;
                }
                self.remove(svc, &address);
            }
        }
    }

    /// Removes an instance as a local change of its client.
    pub(super) fn remove(&mut self, svc: usize, address: &str) {
        if let Some(i) = self
            .services
            .get_mut(&svc)
            .and_then(|s| s.instances.remove(address))
        {
            if i.ephemeral {
                self.local_change(i.client_id());
            }
        }
    }

    /// The instances of `client` here: (service, address).
    pub(super) fn client_instances(&self, client: &str) -> BTreeSet<(usize, String)> {
        let mut held = BTreeSet::new();
        for (&svc, s) in &self.services {
            for i in s.instances.values() {
                if i.ephemeral && i.client_id() == client {
                    held.insert((svc, i.address.clone()));
                }
            }
        }
        held
    }

    pub(super) fn copy_applies(&self, client: &str, revision: Rev) -> bool {
        !self.known.contains(client)
            || matches!(revision, Rev::Newer)
            || (matches!(revision, Rev::Same) && self.shadowed.contains_key(client))
    }

    /// A copy from the owner: the client's instances become exactly these, where no
    /// persistent instance or other client holds the address. If the client gave an
    /// address up, shadowed copies are taken again.
    pub(super) fn apply_copy(
        &mut self,
        client: &str,
        last_beat: u64,
        incoming: &[MInstance],
        svcs: &[usize],
    ) {
        if self.take_copy(client, last_beat, incoming, svcs) {
            self.retake_shadowed();
        }
    }

    /// Takes every shadowed copy again, in client order.
    fn retake_shadowed(&mut self) {
        let copies: Vec<(String, ShadowCopy)> = self
            .shadowed
            .iter()
            .filter_map(|(client, copy)| Some((client.clone(), copy.clone()?)))
            .collect();
        for (client, (last_beat, incoming, svcs)) in copies {
            self.take_copy(&client, last_beat, &incoming, &svcs);
        }
    }

    /// [`Model::apply_copy`] without taking shadowed copies again; whether an instance
    /// of the client's went.
    fn take_copy(
        &mut self,
        client: &str,
        last_beat: u64,
        incoming: &[MInstance],
        svcs: &[usize],
    ) -> bool {
        let mut freed = false;
        for (svc, address) in self.client_instances(client) {
            let still = incoming
                .iter()
                .zip(svcs)
                .any(|(i, s)| *s == svc && i.address == address);
            if !still {
                self.services
                    .get_mut(&svc)
                    .expect("held")
                    .instances
                    .remove(&address);
                freed = true;
            }
        }
        let mut shadowed = false;
        for (inst, &svc) in incoming.iter().zip(svcs) {
            let s = self.services.entry(svc).or_default();
            let existing = s.instances.get(&inst.address);
            if let Some(e) = existing.filter(|e| !e.ephemeral || e.client_id() != client) {
                shadowed |= e.ephemeral;
                continue;
            }
            let mut next = inst.clone();
            next.last_beat = match existing.filter(|e| e.beats()) {
                Some(e) => e.last_beat.max(last_beat),
                None => last_beat,
            };
            match s.instances.get_mut(&inst.address) {
                Some(e) if e.visible() == next.visible() && e.pinned == next.pinned => {
                    e.last_beat = next.last_beat;
                }
                _ => {
                    s.instances.insert(next.address.clone(), next);
                }
            }
        }
        self.known.insert(client.to_string());
        if shadowed {
            let copy = (last_beat, incoming.to_vec(), svcs.to_vec());
            self.shadowed.insert(client.to_string(), Some(copy));
        } else {
            self.shadowed.remove(client);
        }
        freed
    }

    pub(super) fn drop_copy(&mut self, client: &str) {
        if !self.known.contains(client) {
            return;
        }
        self.shadowed.remove(client);
        let held = self.client_instances(client);
        for (svc, address) in &held {
            self.services
                .get_mut(svc)
                .expect("held")
                .instances
                .remove(address);
        }
        if !held.is_empty() {
            self.retake_shadowed();
        }
    }

    pub(super) fn refresh(&mut self, client: &str, last_beat: u64) {
        for s in self.services.values_mut() {
            for i in s.instances.values_mut() {
                if i.beats() && i.client_id() == client {
                    i.last_beat = i.last_beat.max(last_beat);
                }
            }
        }
    }

    /// Removes `conn`'s instances (in `only`, if given) not at an address in `keep`.
    pub(super) fn drop_conn(&mut self, conn: &str, only: Option<usize>, keep: &[String]) -> usize {
        let gone: Vec<(usize, String)> = self
            .client_instances(conn)
            .into_iter()
            .filter(|(svc, a)| only.is_none_or(|o| o == *svc) && !keep.contains(a))
            .collect();
        for (svc, address) in &gone {
            self.remove(*svc, address);
        }
        if !gone.is_empty() {
            self.retake_shadowed();
        }
        gone.len()
    }

    pub(super) fn remove_import(&mut self, task: &str, svc: usize, address: &str) {
        if let Some(s) = self.services.get_mut(&svc) {
            if s.instances.get(address).and_then(|i| i.task.as_deref()) == Some(task) {
                s.instances.remove(address);
            }
        }
    }

    /// What a query returns, recomputed from scratch.
    pub(super) fn query(&self, svc: usize, q: &QuerySpec) -> Answer {
        let s = &self.services[&svc];
        let settings = s.settings.clone().unwrap_or_default();
        let selector = match q.selector {
            0 if settings.selector.kind == METADATA_SELECTOR => 1,
            i => i,
        };
        let clusters = CLUSTER_FILTERS[q.clusters];
        let mut candidates: Vec<&MInstance> = s
            .instances
            .values()
            .filter(|i| i.enabled)
            .filter(|i| clusters.is_empty() || clusters.contains(&i.cluster.as_str()))
            .filter(|i| model_matches(selector, &i.metadata))
            .collect();
        let mut lane = None;
        if let Some(lanes) = LANES[q.lanes] {
            let key = settings.lane_key.as_deref().unwrap_or("lane");
            let lane_of = |i: &MInstance| i.metadata.get(key).cloned();
            lane = lanes
                .iter()
                .find(|l| {
                    candidates
                        .iter()
                        .any(|i| i.healthy && lane_of(i).as_deref() == Some(**l))
                })
                .map(|l| l.to_string());
            candidates.retain(|i| lane_of(i) == lane);
        }
        let healthy = candidates.iter().filter(|i| i.healthy).count();
        let total = candidates.len();
        let t = settings.protect_threshold;
        let protected = total > 0 && t > 0.0 && healthy as f64 / total as f64 <= t;
        let hosts = candidates
            .into_iter()
            .filter(|i| !q.healthy_only || protected || i.healthy)
            .map(|i| (i.address.clone(), protected || i.healthy))
            .collect();
        (hosts, protected, lane)
    }
}
