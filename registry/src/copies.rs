//! The registry's operations on whole clients, the unit Distro replicates
//! ([`super::client`]): the state of a client as a peer is sent it, a copy from its owner
//! applied or dropped, beat clocks refreshed from the owner's, and a connection client's
//! instances removed when the connection closes or trims its set. Each keeps the
//! client's record here listing exactly the instances the client holds on this node.

use std::sync::Arc;

use super::client::{self, ClientData, ClientShare};
use super::expiry::beat_deadline;
use super::instance::{self, BeatClock, Instance};
use super::service::{Changed, ServiceKey};
use super::{same_instance, Registry};

impl Registry {
    /// The instances client `id` holds here (service, instance).
    fn client_instances(&self, id: &str) -> Vec<(Arc<ServiceKey>, Arc<Instance>)> {
        match self.shared.clients.get(id) {
            Some(record) => self.instances_held(id, &record.entries),
            None => Vec::new(),
        }
    }

    /// The instances among `entries` (client `id`'s record here) that the client holds
    /// (service, instance), as the services' current state has them (read without
    /// publishing it: see [`super::service::Service::peek`]).
    fn instances_held(
        &self,
        id: &str,
        entries: &client::Entries,
    ) -> Vec<(Arc<ServiceKey>, Arc<Instance>)> {
        entries
            .iter()
            .filter_map(|(key, addr)| {
                let svc = self.service_by_key(key)?;
                let inst = svc.peek(|draft| draft.instances.get(addr).cloned())?;
                (inst.ephemeral && &*inst.client_id() == id).then(|| (key.clone(), inst))
            })
            .collect()
    }

    /// The whole state of client `id` as this node has it, as a peer receives it (the
    /// tests' view; Distro sends [`Registry::client_share`]).
    pub fn client_data(&self, id: &str) -> Option<ClientData> {
        self.client_share(id).map(|share| share.to_data())
    }

    /// The whole state of client `id` as this node sends it: its instances shared, not
    /// copied.
    pub fn client_share(&self, id: &str) -> Option<ClientShare> {
        // A copy of the record: no lock of the client table is held while the services
        // are read.
        let record = self.shared.clients.get(id)?;
        let instances = self.instances_held(id, &record.entries);
        let last_beat_ms = instances
            .iter()
            .filter_map(|(_, i)| i.clock().map(|c| c.last_beat_ms()))
            .max()
            .unwrap_or(0);
        Some(ClientShare {
            id: id.into(),
            revision: record.revision,
            last_beat_ms,
            instances,
        })
    }

    /// Runs `f` on the beat clock of every instance client `id` holds here, without
    /// collecting them: Distro's rounds call this once per client. A connection
    /// client's instances have no clock, so its instances are not even looked up: a
    /// round over a million of them looked up every one, on the owner and on each peer,
    /// every few seconds.
    fn for_each_client_clock(&self, id: &str, mut f: impl FnMut(&BeatClock)) {
        if client::is_connection(id) {
            return;
        }
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
    /// Returns whether it applied. A copy that gives up an address takes another
    /// client's shadowed copy that wanted it ([`Registry::retake_shadowed`]), in the same
    /// call: a client that moved from one connection to another is listed all along,
    /// whichever of the two copies came first.
    pub fn apply_client(&self, data: &ClientData, now_ms: u64) -> bool {
        let (applied, freed) = self.apply_copy(data, now_ms);
        if freed {
            self.retake_shadowed(now_ms);
        }
        applied
    }

    /// Takes again every shadowed copy (a copy that left an instance out because another
    /// client's instance held its address) that is still this node's copy of its
    /// client: called after a client's instance left an address, which may be the one
    /// a shadowed copy lacked. Costs one flag read when nothing is shadowed.
    fn retake_shadowed(&self, now_ms: u64) {
        let mut copies = self.shared.clients.shadowed_copies();
        // In id order: two copies that want one address find it taken the same way on
        // every node (and in the registry model).
        copies.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        for copy in copies {
            // Taking a copy again removes nothing (its record lists only what it holds,
            // all of it in the copy), so this does not recurse.
            self.apply_copy(&copy, now_ms);
        }
    }

    /// [`Registry::apply_client`] without taking shadowed copies again: whether it
    /// applied, and whether it removed an instance of the client's (freeing its
    /// address).
    fn apply_copy(&self, data: &ClientData, now_ms: u64) -> (bool, bool) {
        let id: Arc<str> = data.id.as_str().into();
        let old = self.shared.clients.get(&data.id);
        // The same revision again is taken only by a copy that lacks an instance another
        // client's copy held (see `Clients::shadowed`): that one may be free now.
        let shadowed = self.shared.clients.is_shadowed(&data.id);
        if old.as_ref().is_some_and(|r| {
            r.revision > data.revision || (r.revision == data.revision && !shadowed)
        }) {
            return (false, false);
        }
        let mut freed = false;
        if let Some(old) = &old {
            // Sorted, so that a large client's copy (a connection with 200 instances,
            // applied again with every push) is not compared entry by entry.
            let mut incoming: Vec<(&ServiceKey, &str)> = data
                .instances
                .iter()
                .map(|(k, i)| (k, &*i.address))
                .collect();
            incoming.sort_unstable();
            let gone = old
                .entries
                .iter()
                .filter(|(key, addr)| incoming.binary_search(&(&**key, &**addr)).is_err());
            for (key, addr) in gone {
                freed |= self.remove_client_instance(key, addr, &id, now_ms);
            }
        }
        // The entries as stored share the service's key and the view's address.
        let mut interned = Vec::with_capacity(data.instances.len());
        let mut shadowed = false;
        for (key, incoming) in &data.instances {
            let addr = incoming.addr();
            let (svc, _, (held, deadline)) = self.modify_service(key, now_ms, |view| {
                let existing = view.instances.get(&addr).cloned();
                if let Some(e) = existing
                    .as_ref()
                    .filter(|e| !e.ephemeral || e.client_id() != id)
                {
                    // Another client's ephemeral instance may go (its connection closed
                    // on a node that is shutting down): this copy is asked for again
                    // until it is whole.
                    shadowed |= e.ephemeral;
                    return (Changed::No, (None, None));
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
                if let Some(e) = existing.filter(|_| unchanged) {
                    return (Changed::No, (Some(e.addr()), None));
                }
                let deadline = beat_deadline(&instance, now_ms);
                view.instances.insert(Arc::new(instance));
                (Changed::Yes, (Some(addr.clone()), deadline))
            });
            // A new or changed beating instance: the sweep looks by its first deadline.
            if let Some(at) = deadline {
                svc.check_by(at);
            }
            // The address as the view holds it, so the entry shares its string.
            if let Some(held) = held {
                interned.push((svc.key.clone(), held));
            }
        }
        // An address client's id is its instance's address: the record shares the
        // view's string rather than holding a second copy per client (48 bytes).
        let id = interned
            .iter()
            .map(|(_, addr)| addr)
            .find(|addr| **addr == id)
            .cloned()
            .unwrap_or(id);
        self.shared
            .clients
            .replace(&id, data.revision, interned.into_iter().collect(), now_ms);
        if shadowed {
            let copy = Arc::new(data.clone());
            self.shared.clients.set_shadowed(&id, Some(copy));
        }
        (true, freed)
    }

    /// Drops this node's copy of client `id` (its owner stopped confirming it), keeping
    /// a revision just below its own: an older copy is not taken back, while the owner,
    /// if it still holds the client at that revision after all (its confirmations were
    /// lost, not its client), finds this node a revision behind at its next round and
    /// sends the copy again. At the copy's own revision the round would confirm an empty
    /// record, and this node would list nothing for the client until it changed.
    pub fn drop_client_copy(&self, id: &str, now_ms: u64) {
        let Some(record) = self.shared.clients.get(id) else {
            return;
        };
        let id: Arc<str> = id.into();
        let mut freed = false;
        for (key, addr) in &record.entries {
            freed |= self.remove_client_instance(key, addr, &id, now_ms);
        }
        self.shared.clients.replace(
            &id,
            record.revision.saturating_sub(1),
            client::Entries::default(),
            now_ms,
        );
        if freed {
            self.retake_shadowed(now_ms);
        }
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
        if !held.is_empty() {
            self.retake_shadowed(now_ms);
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
        // Only the client's entries in this service: a connection with instances in
        // 200 services registers in each, and looking all of them up every time made
        // registering a connection's instances quadratic.
        let entries: client::Entries = self
            .shared
            .clients
            .with_entries(&id, |entries| {
                entries.of_service(key).iter().cloned().collect()
            })
            .unwrap_or_default();
        let mut removed = 0;
        for (k, inst) in self.instances_held(&id, &entries) {
            let addr = inst.addr();
            if &*k == key
                && !keep.contains(&addr)
                && self.remove_client_instance(&k, &addr, &id, now_ms)
            {
                self.shared.clients.changed(&id, &k, &addr, false, now_ms);
                removed += 1;
            }
        }
        if removed > 0 {
            self.retake_shadowed(now_ms);
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
}
