//! The registry core against a naive model, on random operation sequences.
//!
//! The model is deliberately simple: plain ordered maps of services and instances, and
//! every read recomputed from them on demand — no published views, list caches, chunked
//! instance sequences, client indexes, sweep schedules or beat-clock sharing. The real
//! [`Registry`] and the model take the same operations (proptest generates them and, on
//! a failure, shrinks the sequence to a minimal one and prints it); after every step
//! every read the core offers must agree:
//!
//! - each service's existence, settings and instances, field by field, beat clocks too;
//! - [`select`] for the plain and healthy-only queries and two random ones per step
//!   (clusters, selectors, lanes, protection threshold), and the candidate sets of the
//!   three pick strategies;
//! - the cached plain list body a reader gets ([`plain_list_parts`]), parsed;
//! - counts ([`Registry::totals`], healthy counts, cluster names, service lists, what a
//!   sync task owns);
//! - change notifications (every service whose visible state changed is marked for
//!   push) and service revisions (they grow with every visible change);
//! - Distro's view of clients: which records exist, their entries, the state a peer
//!   would be sent ([`Registry::client_data`]), and that every client changed here is
//!   handed to Distro with a higher revision.
//!
//! Operations: registrations, updates, deregistrations and beats of address clients
//! and gRPC-connection clients, ephemeral and persistent (with the API's kind check);
//! health checks' verdicts; service settings; time passing and expiry sweeps under an
//! eviction-guard policy chosen per sequence; ownership moving between nodes; Distro
//! copies arriving (newer, same, older), dropped and refreshed; connections closing or
//! trimming their set; sync imports and task removal; service deletion.
//!
//! One freedom is allowed the real registry: a removal the eviction guard held is judged
//! again only every [`HELD_RECHECK_MS`], so once the guard lets go, such an instance may
//! linger up to that long after the namespace's last hold; past it, it must be gone.
//!
//! `ROSTER_MODEL_CASES=N` sets the number of sequences (default [`DEFAULT_CASES`]), for
//! a long campaign: `ROSTER_MODEL_CASES=200000 cargo test -p roster-server --lib model`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::balance::{consistent_hash, weighted_random, RoundRobin};
use super::changes::ChangeSet;
use super::client::ClientData;
use super::instance::{
    shared_metadata, BeatClock, ClusterName, Instance, Keeper, Metadata, Pinned, Rare,
};
use super::instance::{BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY};
use super::select::{select, Query};
use super::selector::LabelSelector;
use super::service::{Selector, ServiceKey, ServiceSettings, METADATA_SELECTOR};
use super::{InstancePatch, Registration, Registry, RegistryError, HELD_RECHECK_MS};
use crate::api::nacos::instance::plain_list_parts;
use crate::health::guard::{EvictionGuard, GuardPolicy};

/// Sequences per run when `ROSTER_MODEL_CASES` is not set.
const DEFAULT_CASES: u32 = 3_000;
/// Longest sequence.
const MAX_STEPS: usize = 40;

// ----- the domain the sequences draw from ----------------------------------------------

/// (namespace, group, name): two namespaces, so the eviction guard judges each alone.
const SERVICES: [(&str, &str, &str); 3] = [
    ("public", "DEFAULT_GROUP", "a"),
    ("public", "DEFAULT_GROUP", "b"),
    ("ns1", "G", "c"),
];
/// Instance addresses; an address is also its HTTP-beat client's id.
const ADDRS: [(&str, u16); 5] = [
    ("127.0.0.1", 1),
    ("127.0.0.1", 2),
    ("127.0.0.2", 1),
    ("127.0.0.2", 2),
    ("127.0.0.3", 1),
];
/// gRPC connections of this node.
const LOCAL_CONNS: [&str; 2] = ["g:1:a", "g:1:b"];
/// A gRPC connection of another node, known here through Distro copies.
const REMOTE_CONN: &str = "g:2:z";
const TASKS: [&str; 2] = ["t1", "t2"];
const CLUSTERS: [&str; 2] = ["DEFAULT", "c2"];
const WEIGHTS: [f64; 4] = [0.0, 1.0, 2.5, 10_000.0];
const THRESHOLDS: [f64; 5] = [0.0, -1.0, 0.5, 1.0, 0.0001];
/// Selector expressions; 0 is none.
const SELECTORS: [&str; 4] = ["", "env=prod", "!lane", "env in (prod,dev)"];
/// Lane lists of queries; `None` ignores lanes.
const LANES: [Option<&[&str]>; 5] = [
    None,
    Some(&[]),
    Some(&["x"]),
    Some(&["y", "x"]),
    Some(&["prod"]),
];
const CLUSTER_FILTERS: [&[&str]; 4] = [&[], &["DEFAULT"], &["c2"], &["DEFAULT", "c2"]];
/// Time steps, in ms: around the short timeouts below and Nacos' defaults (15 s, 30 s).
const ADVANCES: [u64; 10] = [
    1, 250, 999, 1_000, 1_001, 2_000, 3_001, 6_000, 16_000, 31_000,
];
/// Eviction-guard policies; a sequence runs under one.
const POLICIES: [GuardPolicy; 4] = [
    GuardPolicy {
        share: 0.5,
        min_count: 1,
    },
    GuardPolicy {
        share: 0.5,
        min_count: 2,
    },
    GuardPolicy {
        share: 0.3,
        min_count: 3,
    },
    GuardPolicy {
        share: 1.0,
        min_count: 1,
    },
];
/// The time sequences start at.
const START_MS: u64 = 1_000_000;

/// Metadata sets: lanes and selector keys, and `preserved.*` timings (one with the
/// delete timeout below the beat timeout, one with a bad value).
fn metadata(i: usize) -> Metadata {
    let pairs: &[(&str, &str)] = match i {
        0 => &[],
        1 => &[("lane", "x")],
        2 => &[("lane", "y"), ("env", "prod")],
        3 => &[("env", "dev")],
        4 => &[(BEAT_TIMEOUT_KEY, "1000"), (DELETE_TIMEOUT_KEY, "3000")],
        5 => &[
            ("lane", "x"),
            (BEAT_TIMEOUT_KEY, "3000"),
            (DELETE_TIMEOUT_KEY, "2000"),
        ],
        6 => &[("env", "prod"), (DELETE_TIMEOUT_KEY, "6000")],
        _ => &[(BEAT_INTERVAL_KEY, "x"), (BEAT_TIMEOUT_KEY, "-5")],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
const METADATA_SETS: usize = 8;

/// Whether metadata matches selector `i`, decided by hand rather than by the parser.
fn model_matches(i: usize, m: &Metadata) -> bool {
    match i {
        0 => true,
        1 => m.get("env").map(String::as_str) == Some("prod"),
        2 => !m.contains_key("lane"),
        _ => matches!(m.get("env").map(String::as_str), Some("prod" | "dev")),
    }
}

fn key(svc: usize) -> ServiceKey {
    let (ns, group, name) = SERVICES[svc];
    ServiceKey::new(ns, group, name)
}

fn addr_id(addr: usize) -> String {
    let (ip, port) = ADDRS[addr];
    format!("{ip}:{port}")
}

// ----- operations ---------------------------------------------------------------------

/// Whose copy a Distro message carries.
#[derive(Clone, Copy, Debug)]
enum CopyOf {
    /// An HTTP-beat client (an address).
    Addr(usize),
    /// The other node's gRPC connection.
    Remote,
}

impl CopyOf {
    fn id(self) -> String {
        match self {
            CopyOf::Addr(a) => addr_id(a),
            CopyOf::Remote => REMOTE_CONN.to_string(),
        }
    }
}

/// A copy's revision against the one this node has.
#[derive(Clone, Copy, Debug)]
enum Rev {
    Newer,
    Same,
    Older,
}

/// One instance of a Distro copy (an address client's copy uses its own address).
#[derive(Clone, Debug)]
struct CopyInstance {
    svc: usize,
    addr: usize,
    cluster: usize,
    weight: usize,
    healthy: bool,
    enabled: bool,
    meta: usize,
}

#[derive(Clone, Debug)]
enum Op {
    /// A client registers (`conn`: through a gRPC connection of this node).
    Register {
        svc: usize,
        addr: usize,
        conn: Option<usize>,
        ephemeral: bool,
        cluster: usize,
        weight: usize,
        enabled: bool,
        healthy: bool,
        meta: usize,
        with_id: bool,
    },
    Deregister {
        svc: usize,
        addr: usize,
        ephemeral: Option<bool>,
    },
    /// An operator's update.
    Update {
        svc: usize,
        addr: usize,
        ephemeral: bool,
        weight: Option<usize>,
        enabled: Option<bool>,
        meta: Option<usize>,
    },
    Beat {
        svc: usize,
        addr: usize,
    },
    /// A health check's verdict, or the health API.
    SetHealth {
        svc: usize,
        addr: usize,
        ephemeral: bool,
        healthy: bool,
    },
    Settings {
        svc: usize,
        threshold: usize,
        selector: usize,
        lane_key: bool,
    },
    /// Time passes (no sweep).
    Advance {
        ms: u64,
    },
    /// The expiry worker's pass.
    Sweep,
    /// Members change: the client at `addr` is owned elsewhere, or here again.
    Ownership {
        addr: usize,
        foreign: bool,
    },
    /// A gRPC connection of this node closes.
    Disconnect {
        conn: usize,
    },
    /// A gRPC connection replaces its set of instances in a service.
    Retain {
        conn: usize,
        svc: usize,
        keep: Vec<usize>,
    },
    /// A Distro copy arrives from the client's owner.
    Copy {
        of: CopyOf,
        revision: Rev,
        beat_ago: u64,
        instances: Vec<CopyInstance>,
    },
    /// The owner stopped confirming the copy.
    DropCopy {
        of: CopyOf,
    },
    /// The owner's verification round reports the client's last beat.
    Refresh {
        of: CopyOf,
        beat_ago: u64,
    },
    /// A sync task imports an instance, or removes its import.
    Import {
        task: usize,
        svc: usize,
        addr: usize,
        weight: usize,
        healthy: bool,
        meta: usize,
        remove: bool,
    },
    /// A sync task is deleted with its imports.
    RemoveTask {
        task: usize,
    },
    /// `DELETE /service`: refused unless the service is empty.
    DeleteService {
        svc: usize,
    },
}

/// What one step asks beyond the operation: two queries to compare.
#[derive(Clone, Copy)]
struct QuerySpec {
    clusters: usize,
    healthy_only: bool,
    selector: usize,
    lanes: usize,
}

#[derive(Clone)]
struct Step {
    op: Op,
    queries: [QuerySpec; 2],
}

// One line each, whatever the formatter's `#` asks: a shrunk sequence prints as one
// step per line.
impl std::fmt::Debug for QuerySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "query(clusters {:?}, healthy_only {}, selector {:?}, lanes {:?})",
            CLUSTER_FILTERS[self.clusters],
            self.healthy_only,
            SELECTORS[self.selector],
            LANES[self.lanes]
        )
    }
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n    {:?}", self.op)
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let svc = 0..SERVICES.len();
    let addr = 0..ADDRS.len();
    let copy_of = prop_oneof![
        3 => (0..ADDRS.len()).prop_map(CopyOf::Addr),
        1 => Just(CopyOf::Remote),
    ];
    let rev = prop_oneof![3 => Just(Rev::Newer), 1 => Just(Rev::Same), 1 => Just(Rev::Older)];
    let copy_instance = (
        0..SERVICES.len(),
        0..ADDRS.len(),
        0..CLUSTERS.len(),
        0..WEIGHTS.len(),
        any::<bool>(),
        any::<bool>(),
        0..METADATA_SETS,
    )
        .prop_map(
            |(svc, addr, cluster, weight, healthy, enabled, meta)| CopyInstance {
                svc,
                addr,
                cluster,
                weight,
                healthy,
                enabled,
                meta,
            },
        );
    prop_oneof![
        24 => (
            svc.clone(),
            addr.clone(),
            prop_oneof![4 => Just(None), 1 => (0..LOCAL_CONNS.len()).prop_map(Some)],
            prop_oneof![4 => Just(true), 1 => Just(false)],
            0..CLUSTERS.len(),
            0..WEIGHTS.len(),
            prop_oneof![5 => Just(true), 1 => Just(false)],
            any::<bool>(),
            0..METADATA_SETS,
            prop_oneof![5 => Just(false), 1 => Just(true)],
        )
            .prop_map(
                |(svc, addr, conn, ephemeral, cluster, weight, enabled, healthy, meta, with_id)| {
                    Op::Register {
                        svc,
                        addr,
                        conn,
                        ephemeral,
                        cluster,
                        weight,
                        enabled,
                        healthy,
                        meta,
                        with_id,
                    }
                }
            ),
        6 => (svc.clone(), addr.clone(), proptest::option::of(any::<bool>()))
            .prop_map(|(svc, addr, ephemeral)| Op::Deregister { svc, addr, ephemeral }),
        6 => (
            svc.clone(),
            addr.clone(),
            prop_oneof![3 => Just(true), 1 => Just(false)],
            proptest::option::of(0..WEIGHTS.len()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(0..METADATA_SETS),
        )
            .prop_map(|(svc, addr, ephemeral, weight, enabled, meta)| Op::Update {
                svc,
                addr,
                ephemeral,
                weight,
                enabled,
                meta,
            }),
        18 => (svc.clone(), addr.clone()).prop_map(|(svc, addr)| Op::Beat { svc, addr }),
        5 => (svc.clone(), addr.clone(), any::<bool>(), any::<bool>()).prop_map(
            |(svc, addr, ephemeral, healthy)| Op::SetHealth {
                svc,
                addr,
                ephemeral,
                healthy,
            }
        ),
        4 => (svc.clone(), 0..THRESHOLDS.len(), 0..3usize, any::<bool>()).prop_map(
            |(svc, threshold, selector, lane_key)| Op::Settings {
                svc,
                threshold,
                selector,
                lane_key,
            }
        ),
        12 => (0..ADVANCES.len()).prop_map(|i| Op::Advance { ms: ADVANCES[i] }),
        14 => Just(Op::Sweep),
        3 => (addr.clone(), any::<bool>())
            .prop_map(|(addr, foreign)| Op::Ownership { addr, foreign }),
        2 => (0..LOCAL_CONNS.len()).prop_map(|conn| Op::Disconnect { conn }),
        2 => (
            0..LOCAL_CONNS.len(),
            svc.clone(),
            proptest::collection::vec(addr.clone(), 0..3)
        )
            .prop_map(|(conn, svc, keep)| Op::Retain { conn, svc, keep }),
        5 => (
            copy_of.clone(),
            rev,
            (0..ADVANCES.len()).prop_map(|i| ADVANCES[i]),
            proptest::collection::vec(copy_instance, 0..3),
        )
            .prop_map(|(of, revision, beat_ago, instances)| Op::Copy {
                of,
                revision,
                beat_ago,
                instances,
            }),
        1 => copy_of.clone().prop_map(|of| Op::DropCopy { of }),
        2 => (copy_of, (0..ADVANCES.len()).prop_map(|i| ADVANCES[i]))
            .prop_map(|(of, beat_ago)| Op::Refresh { of, beat_ago }),
        4 => (
            0..TASKS.len(),
            svc.clone(),
            addr.clone(),
            0..WEIGHTS.len(),
            any::<bool>(),
            0..METADATA_SETS,
            prop_oneof![3 => Just(false), 1 => Just(true)],
        )
            .prop_map(|(task, svc, addr, weight, healthy, meta, remove)| Op::Import {
                task,
                svc,
                addr,
                weight,
                healthy,
                meta,
                remove,
            }),
        1 => (0..TASKS.len()).prop_map(|task| Op::RemoveTask { task }),
        1 => svc.prop_map(|svc| Op::DeleteService { svc }),
    ]
}

fn query_strategy() -> impl Strategy<Value = QuerySpec> {
    (
        0..CLUSTER_FILTERS.len(),
        any::<bool>(),
        0..SELECTORS.len(),
        0..LANES.len(),
    )
        .prop_map(|(clusters, healthy_only, selector, lanes)| QuerySpec {
            clusters,
            healthy_only,
            selector,
            lanes,
        })
}

fn step_strategy() -> impl Strategy<Value = Step> {
    (op_strategy(), query_strategy(), query_strategy()).prop_map(|(op, a, b)| Step {
        op,
        queries: [a, b],
    })
}

// ----- the model ----------------------------------------------------------------------

/// An instance as the model keeps it: every field spelled out.
#[derive(Clone, Debug, PartialEq)]
struct MInstance {
    address: String,
    ip: String,
    port: u16,
    cluster: String,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: Metadata,
    pinned: Pinned,
    /// The gRPC connection that holds it, if one does.
    conn: Option<String>,
    /// The sync task that imported it, if one did.
    task: Option<String>,
    instance_id: Option<String>,
    /// Last beat, ms; meaningful for [`MInstance::beats`] instances.
    last_beat: u64,
    /// The eviction guard held its removal (cleared by any new version).
    held: bool,
}

impl MInstance {
    /// Lives by HTTP beats: ephemeral, of an address client.
    fn beats(&self) -> bool {
        self.ephemeral && self.conn.is_none()
    }

    fn client_id(&self) -> String {
        self.conn.clone().unwrap_or_else(|| self.address.clone())
    }

    /// (beat timeout, delete timeout) from the `preserved.*` keys: positive integers
    /// count, anything else leaves the default.
    fn timeouts(&self) -> (u64, u64) {
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

    fn interval(&self) -> u64 {
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
    fn visible(&self) -> String {
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
struct MService {
    settings: Option<ServiceSettings>,
    instances: BTreeMap<String, MInstance>,
}

impl MService {
    fn visible(&self) -> String {
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
struct MReg {
    svc: usize,
    addr: usize,
    cluster: String,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    metadata: Metadata,
    instance_id: Option<String>,
    conn: Option<String>,
    task: Option<String>,
}

/// A query's answer: (address, reported healthy) in address order, protected, lane.
type Answer = (Vec<(String, bool)>, bool, Option<String>);

struct Model {
    now: u64,
    policy: GuardPolicy,
    services: BTreeMap<usize, MService>,
    /// Address clients another node owns.
    foreign: BTreeSet<String>,
    /// Clients this node has a record of.
    known: BTreeSet<String>,
    /// Per namespace, the last sweep at which the guard held removals.
    last_hold: BTreeMap<String, u64>,
    /// Clients changed here in the current step (Distro must take them).
    changed_here: BTreeSet<String>,
    /// Held instances the guard let go whose removal may still wait (see the module
    /// doc): (service, address).
    may_linger: Vec<(usize, String)>,
}

impl Model {
    fn new(policy: GuardPolicy) -> Self {
        Self {
            now: START_MS,
            policy,
            services: BTreeMap::new(),
            foreign: BTreeSet::new(),
            known: BTreeSet::new(),
            last_hold: BTreeMap::new(),
            changed_here: BTreeSet::new(),
            may_linger: Vec::new(),
        }
    }

    fn local_change(&mut self, client: String) {
        self.known.insert(client.clone());
        self.changed_here.insert(client);
    }

    /// The API's check before a persistent registration is proposed.
    fn persistent_conflict(&self, svc: usize) -> bool {
        self.services
            .get(&svc)
            .and_then(MService::native_kind)
            .is_some_and(|ephemeral| ephemeral)
    }

    fn register(&mut self, reg: MReg) -> Result<(), ()> {
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

    fn deregister(&mut self, svc: usize, addr: usize, ephemeral: Option<bool>) -> bool {
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

    fn update(
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
    fn set_health(&mut self, svc: usize, address: &str, ephemeral: bool, healthy: bool) -> bool {
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
    fn beat(&mut self, svc: usize, addr: usize) -> Option<u64> {
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
    fn sweep(&mut self) {
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
    fn remove(&mut self, svc: usize, address: &str) {
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
    fn client_instances(&self, client: &str) -> BTreeSet<(usize, String)> {
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

    fn copy_applies(&self, client: &str, revision: Rev) -> bool {
        !self.known.contains(client) || matches!(revision, Rev::Newer)
    }

    /// A copy from the owner: the client's instances become exactly these, where no
    /// persistent instance or other client holds the address.
    fn apply_copy(&mut self, client: &str, last_beat: u64, incoming: &[MInstance], svcs: &[usize]) {
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
            }
        }
        for (inst, &svc) in incoming.iter().zip(svcs) {
            let s = self.services.entry(svc).or_default();
            let existing = s.instances.get(&inst.address);
            if existing.is_some_and(|e| !e.ephemeral || e.client_id() != client) {
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
    }

    fn drop_copy(&mut self, client: &str) {
        if !self.known.contains(client) {
            return;
        }
        for (svc, address) in self.client_instances(client) {
            self.services
                .get_mut(&svc)
                .expect("held")
                .instances
                .remove(&address);
        }
    }

    fn refresh(&mut self, client: &str, last_beat: u64) {
        for s in self.services.values_mut() {
            for i in s.instances.values_mut() {
                if i.beats() && i.client_id() == client {
                    i.last_beat = i.last_beat.max(last_beat);
                }
            }
        }
    }

    /// Removes `conn`'s instances (in `only`, if given) not at an address in `keep`.
    fn drop_conn(&mut self, conn: &str, only: Option<usize>, keep: &[String]) -> usize {
        let gone: Vec<(usize, String)> = self
            .client_instances(conn)
            .into_iter()
            .filter(|(svc, a)| only.is_none_or(|o| o == *svc) && !keep.contains(a))
            .collect();
        for (svc, address) in &gone {
            self.remove(*svc, address);
        }
        gone.len()
    }

    fn remove_import(&mut self, task: &str, svc: usize, address: &str) {
        if let Some(s) = self.services.get_mut(&svc) {
            if s.instances.get(address).and_then(|i| i.task.as_deref()) == Some(task) {
                s.instances.remove(address);
            }
        }
    }

    /// What a query returns, recomputed from scratch.
    fn query(&self, svc: usize, q: &QuerySpec) -> Answer {
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

// ----- the real side ------------------------------------------------------------------

/// An instance as compared: every field a reader can get at, as text.
fn seen_real(i: &Instance) -> String {
    let rare = i.rare.as_deref().cloned().unwrap_or_default();
    format!(
        "{} {} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?} hb={}/{}/{} beat={:?}",
        i.address,
        i.ip(),
        i.port,
        &*i.cluster,
        i.weight,
        i.healthy,
        i.enabled,
        i.ephemeral,
        i.metadata,
        i.pinned,
        i.client().map(|c| c.to_string()),
        (
            rare.owner.map(|o| o.to_string()),
            rare.instance_id.map(|o| o.to_string())
        ),
        rare.heartbeat.interval_ms,
        rare.heartbeat.timeout_ms,
        rare.heartbeat.delete_ms,
        i.clock().map(|c| c.last_beat_ms()),
    )
}

fn seen_model(i: &MInstance) -> String {
    let (timeout, delete) = i.timeouts();
    format!(
        "{} {} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?} hb={}/{}/{} beat={:?}",
        i.address,
        i.ip,
        i.port,
        i.cluster,
        i.weight,
        i.healthy,
        i.enabled,
        i.ephemeral,
        i.metadata,
        i.pinned,
        i.conn,
        (i.task.clone(), i.instance_id.clone()),
        i.interval(),
        timeout,
        delete,
        i.beats().then_some(i.last_beat),
    )
}

/// The real registry with what the test keeps beside it.
struct Real {
    registry: Registry,
    guard: EvictionGuard,
    changes: Arc<ChangeSet>,
    /// Address clients owned elsewhere, for the sweep's `owns`.
    foreign: Mutex<BTreeSet<String>>,
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if cond {
        Ok(())
    } else {
        Err(TestCaseError::fail(what()))
    }
}

fn eq<T: PartialEq + std::fmt::Debug>(real: T, model: T, what: &str) -> Result<(), TestCaseError> {
    check(real == model, || {
        format!("{what}:\n  real:  {real:?}\n  model: {model:?}")
    })
}

fn registration(reg: &MReg) -> Registration {
    let (ip, port) = ADDRS[reg.addr];
    Registration {
        ip: ip.into(),
        port,
        cluster: reg.cluster.clone(),
        weight: reg.weight,
        healthy: reg.healthy,
        enabled: reg.enabled,
        ephemeral: reg.ephemeral,
        metadata: reg.metadata.clone(),
        instance_id: reg.instance_id.clone(),
        client: reg.conn.clone(),
        owner: reg.task.clone(),
    }
}

/// Runs one operation on both sides; compares what each returns.
fn apply(real: &Real, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let r = &real.registry;
    let now = model.now;
    match op {
        Op::Register {
            svc,
            addr,
            conn,
            ephemeral,
            cluster,
            weight,
            enabled,
            healthy,
            meta,
            with_id,
        } => {
            let reg = MReg {
                svc: *svc,
                addr: *addr,
                cluster: CLUSTERS[*cluster].into(),
                weight: WEIGHTS[*weight],
                healthy: *healthy,
                enabled: *enabled,
                ephemeral: *ephemeral,
                metadata: metadata(*meta),
                instance_id: with_id.then(|| format!("id-{addr}")),
                conn: conn.map(|c| LOCAL_CONNS[c].to_string()),
                task: None,
            };
            let wire = registration(&reg);
            // The API refuses a persistent registration into an ephemeral service before
            // proposing it; the registry checks an ephemeral one itself.
            let real_ok = if !ephemeral && r.kind_conflict(&key(*svc), false).is_some() {
                false
            } else {
                match r.register(&key(*svc), &wire, now) {
                    Ok(()) => true,
                    Err(RegistryError::KindConflict { .. }) => false,
                    Err(e) => return Err(TestCaseError::fail(format!("register: {e}"))),
                }
            };
            let model_ok = if !ephemeral && model.persistent_conflict(*svc) {
                false
            } else {
                model.register(reg).is_ok()
            };
            eq(real_ok, model_ok, "registration accepted")
        }
        Op::Deregister {
            svc,
            addr,
            ephemeral,
        } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.deregister(&key(*svc), ip, port, *ephemeral, now);
            eq(
                got,
                model.deregister(*svc, *addr, *ephemeral),
                "deregistered",
            )
        }
        Op::Update {
            svc,
            addr,
            ephemeral,
            weight,
            enabled,
            meta,
        } => {
            let patch = InstancePatch {
                weight: weight.map(|w| WEIGHTS[w]),
                enabled: *enabled,
                metadata: meta.map(metadata),
            };
            let (ip, port) = ADDRS[*addr];
            let got = match r.update_instance(&key(*svc), ip, port, *ephemeral, &patch, now) {
                Ok(()) => Ok(()),
                Err(RegistryError::ServiceNotFound(_)) => Err("service"),
                Err(RegistryError::InstanceNotFound { .. }) => Err("instance"),
                Err(e) => return Err(TestCaseError::fail(format!("update: {e}"))),
            };
            eq(got, model.update(*svc, *addr, *ephemeral, &patch), "update")
        }
        Op::Beat { svc, addr } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.beat(&key(*svc), ip, port, now).map(|h| h.interval_ms);
            eq(got, model.beat(*svc, *addr), "beat answer")
        }
        Op::SetHealth {
            svc,
            addr,
            ephemeral,
            healthy,
        } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.set_health(&key(*svc), ip, port, *ephemeral, *healthy, now);
            let want = model.set_health(*svc, &addr_id(*addr), *ephemeral, *healthy);
            eq(got, want, "health set")
        }
        Op::Settings {
            svc,
            threshold,
            selector,
            lane_key,
        } => {
            let settings = ServiceSettings {
                protect_threshold: THRESHOLDS[*threshold],
                selector: match selector {
                    0 => Selector {
                        kind: "none".into(),
                        expression: String::new(),
                    },
                    1 => Selector {
                        kind: METADATA_SELECTOR.into(),
                        expression: SELECTORS[1].into(),
                    },
                    _ => Selector {
                        kind: "label".into(),
                        expression: "CONSUMER.label.x = PROVIDER.label.x".into(),
                    },
                },
                lane_key: lane_key.then(|| "env".to_string()),
                ..Default::default()
            };
            r.update_service(&key(*svc), &settings, now);
            model.services.entry(*svc).or_default().settings = Some(settings);
            Ok(())
        }
        Op::Advance { ms } => {
            model.now += ms;
            Ok(())
        }
        Op::Sweep => {
            let owns = |client: &str| !real.foreign.lock().unwrap().contains(client);
            r.expire_due(now, &owns, &real.guard);
            real.guard.release_idle(now);
            model.sweep();
            // Removals the model leaves open follow the real registry.
            for (svc, address) in std::mem::take(&mut model.may_linger) {
                let gone = r
                    .service_by_key(&key(svc))
                    .is_none_or(|s| s.view().instances.get(&address).is_none());
                if gone {
                    model.remove(svc, &address);
                }
            }
            Ok(())
        }
        Op::Ownership { addr, foreign } => {
            let id = addr_id(*addr);
            let mut set = real.foreign.lock().unwrap();
            if *foreign {
                set.insert(id.clone());
                model.foreign.insert(id);
            } else {
                set.remove(&id);
                model.foreign.remove(&id);
            }
            // What the expiry worker does when the live members change.
            r.recheck_all();
            Ok(())
        }
        Op::Disconnect { conn } => {
            let id = LOCAL_CONNS[*conn];
            let got = r.remove_client(id, now);
            eq(
                got,
                model.drop_conn(id, None, &[]),
                "instances of the closed connection",
            )
        }
        Op::Retain { conn, svc, keep } => {
            let id = LOCAL_CONNS[*conn];
            let keep: Vec<String> = keep.iter().map(|a| addr_id(*a)).collect();
            let keep_arcs: Vec<Arc<str>> = keep.iter().map(|a| Arc::from(a.as_str())).collect();
            let got = r.retain_client_instances(id, &key(*svc), &keep_arcs, now);
            eq(
                got,
                model.drop_conn(id, Some(*svc), &keep),
                "instances trimmed",
            )
        }
        Op::Copy {
            of,
            revision,
            beat_ago,
            instances,
        } => {
            let id = of.id();
            let base = r.clients().get(&id).map_or(0, |c| c.revision);
            let rev = match revision {
                Rev::Newer => base + 1,
                Rev::Same => base,
                Rev::Older => base.saturating_sub(1),
            };
            let last_beat = now.saturating_sub(*beat_ago);
            // One instance per service: an address client holds one there, and a
            // connection one per address.
            let mut chosen: BTreeMap<(usize, String), &CopyInstance> = BTreeMap::new();
            for c in instances {
                let address = match of {
                    CopyOf::Addr(a) => addr_id(*a),
                    CopyOf::Remote => addr_id(c.addr),
                };
                let slot = if matches!(of, CopyOf::Addr(_)) {
                    (c.svc, String::new())
                } else {
                    (c.svc, address)
                };
                chosen.entry(slot).or_insert(c);
            }
            let mut wire = Vec::new();
            let mut modelled = Vec::new();
            let mut svcs = Vec::new();
            for c in chosen.values() {
                let addr = match of {
                    CopyOf::Addr(a) => *a,
                    CopyOf::Remote => c.addr,
                };
                let (ip, port) = ADDRS[addr];
                let conn = matches!(of, CopyOf::Remote).then(|| REMOTE_CONN.to_string());
                let m = MInstance {
                    address: addr_id(addr),
                    ip: ip.into(),
                    port,
                    cluster: CLUSTERS[c.cluster].into(),
                    weight: WEIGHTS[c.weight],
                    healthy: c.healthy,
                    enabled: c.enabled,
                    ephemeral: true,
                    metadata: metadata(c.meta),
                    pinned: Pinned::default(),
                    conn: conn.clone(),
                    task: None,
                    instance_id: None,
                    last_beat,
                    held: false,
                };
                let inst = Instance {
                    address: super::instance::addr_key(ip, port),
                    port,
                    cluster: ClusterName::new(&m.cluster),
                    weight: m.weight,
                    healthy: m.healthy,
                    enabled: m.enabled,
                    ephemeral: true,
                    metadata: shared_metadata(&m.metadata),
                    pinned: Pinned::default(),
                    keeper: match conn {
                        Some(c) => Keeper::Connection(Arc::from(c.as_str())),
                        None => Keeper::Beats(BeatClock::new(0)),
                    },
                    rare: Rare::boxed(
                        None,
                        None,
                        super::instance::Heartbeat::from_metadata(&m.metadata),
                    ),
                };
                wire.push((key(c.svc), inst));
                modelled.push(m);
                svcs.push(c.svc);
            }
            let data = ClientData {
                id: id.clone(),
                revision: rev,
                last_beat_ms: last_beat,
                instances: wire,
            };
            let got = r.apply_client(&data, now);
            let want = model.copy_applies(&id, *revision);
            if want {
                model.apply_copy(&id, last_beat, &modelled, &svcs);
            }
            eq(got, want, "copy applied")
        }
        Op::DropCopy { of } => {
            let id = of.id();
            r.drop_client_copy(&id, now);
            model.drop_copy(&id);
            Ok(())
        }
        Op::Refresh { of, beat_ago } => {
            let id = of.id();
            let at = now.saturating_sub(*beat_ago);
            r.refresh_client_beat(&id, at);
            model.refresh(&id, at);
            Ok(())
        }
        Op::Import {
            task,
            svc,
            addr,
            weight,
            healthy,
            meta,
            remove,
        } => {
            let task = TASKS[*task];
            let (ip, port) = ADDRS[*addr];
            if *remove {
                r.apply_import(task, &[], &[(key(*svc), ip.to_string(), port)], now);
                model.remove_import(task, *svc, &addr_id(*addr));
            } else {
                let reg = MReg {
                    svc: *svc,
                    addr: *addr,
                    cluster: "DEFAULT".into(),
                    weight: WEIGHTS[*weight],
                    healthy: *healthy,
                    enabled: true,
                    ephemeral: false,
                    metadata: metadata(*meta),
                    instance_id: None,
                    conn: None,
                    task: Some(task.to_string()),
                };
                r.apply_import(task, &[(key(*svc), registration(&reg))], &[], now);
                let _ = model.register(reg);
            }
            Ok(())
        }
        Op::RemoveTask { task } => {
            let task = TASKS[*task];
            let got = r.remove_all_owned(task, now);
            let mut owned = Vec::new();
            for (svc, s) in &model.services {
                for i in s.instances.values() {
                    if i.task.as_deref() == Some(task) {
                        owned.push((*svc, i.address.clone()));
                    }
                }
            }
            for (svc, address) in &owned {
                model.remove_import(task, *svc, address);
            }
            eq(got, owned.len(), "imports removed")
        }
        Op::DeleteService { svc } => {
            let deletable = r.check_deletable(&key(*svc)).is_ok();
            if deletable {
                r.delete_service(&key(*svc), now);
            }
            let want = model
                .services
                .get(svc)
                .is_some_and(|s| s.instances.is_empty());
            if want {
                model.services.remove(svc);
            }
            eq(deletable, want, "service deletable")
        }
    }
}

/// What the test remembers of the real side between steps.
#[derive(Default)]
struct Before {
    /// Per service: its `Service` (by address) and view revision.
    revisions: BTreeMap<usize, (usize, u64)>,
    /// Per client: its record's revision.
    client_revisions: BTreeMap<String, u64>,
    /// Per service: what the model showed.
    visible: BTreeMap<usize, String>,
}

fn all_clients() -> Vec<String> {
    let mut ids: Vec<String> = (0..ADDRS.len()).map(addr_id).collect();
    ids.extend(LOCAL_CONNS.iter().map(|c| c.to_string()));
    ids.push(REMOTE_CONN.to_string());
    ids
}

fn real_query(view: &super::service::ServiceView, q: &QuerySpec) -> (Answer, Vec<Arc<Instance>>) {
    let selector = (q.selector > 0).then(|| LabelSelector::parse(SELECTORS[q.selector]).unwrap());
    let selection = select(
        view,
        &Query {
            clusters: CLUSTER_FILTERS[q.clusters],
            healthy_only: q.healthy_only,
            selector: selector.as_ref(),
            lanes: LANES[q.lanes],
        },
    );
    let hosts = selection
        .hosts
        .iter()
        .map(|h| (h.address.to_string(), selection.reported_healthy(h)))
        .collect();
    let answer = (hosts, selection.protected, selection.lane.clone());
    (answer, selection.hosts)
}

/// Compares every read after a step.
fn compare(
    real: &Real,
    model: &Model,
    step: &Step,
    before: &mut Before,
) -> Result<(), TestCaseError> {
    let r = &real.registry;
    let marked: BTreeSet<ServiceKey> = real.changes.drain().into_iter().collect();
    let plain = QuerySpec {
        clusters: 0,
        healthy_only: false,
        selector: 0,
        lanes: 0,
    };
    let healthy_only = QuerySpec {
        healthy_only: true,
        ..plain
    };
    let mut totals = (0, 0, 0);
    for svc in 0..SERVICES.len() {
        let k = key(svc);
        let found = r.service_by_key(&k);
        let m = model.services.get(&svc);
        eq(
            found.is_some(),
            m.is_some(),
            &format!("service {svc} exists"),
        )?;
        let visible = m.map(MService::visible).unwrap_or_default();
        let changed = before.visible.get(&svc).cloned().unwrap_or_default() != visible;
        if changed {
            check(marked.contains(&k), || {
                format!("service {svc} changed but was not marked for push; marked {marked:?}")
            })?;
        }
        before.visible.insert(svc, visible);
        let (Some(service), Some(m)) = (found, m) else {
            before.revisions.remove(&svc);
            continue;
        };
        let view = service.view();
        // Revisions grow with every visible change of the same service.
        let id = Arc::as_ptr(&service) as usize;
        if let Some((was_id, was_rev)) = before.revisions.get(&svc) {
            if *was_id == id {
                check(view.revision >= *was_rev, || {
                    format!("service {svc}: revision went back")
                })?;
                check(!changed || view.revision > *was_rev, || {
                    format!("service {svc} changed but its revision stayed {was_rev}")
                })?;
            }
        }
        before.revisions.insert(svc, (id, view.revision));
        // Instances, field by field.
        let real_seen: Vec<String> = view.instances.values().map(|i| seen_real(i)).collect();
        let model_seen: Vec<String> = m.instances.values().map(seen_model).collect();
        eq(
            real_seen,
            model_seen,
            &format!("instances of service {svc}"),
        )?;
        let settings = |s: Option<&ServiceSettings>| {
            s.map(|s| (s.protect_threshold, s.selector.clone(), s.lane_key.clone()))
        };
        eq(
            settings(view.settings.as_deref()),
            settings(m.settings.as_ref()),
            &format!("settings of service {svc}"),
        )?;
        let healthy = m.instances.values().filter(|i| i.healthy).count();
        eq(view.healthy_count(), healthy, "healthy count")?;
        let clusters: BTreeSet<&str> = m.instances.values().map(|i| i.cluster.as_str()).collect();
        let real_clusters: Vec<String> =
            view.cluster_names().iter().map(|c| c.to_string()).collect();
        eq(
            real_clusters,
            clusters.iter().map(|c| c.to_string()).collect(),
            "cluster names",
        )?;
        totals.0 += 1;
        totals.1 += m.instances.len();
        totals.2 += healthy;
        // Queries, and the candidates of each pick strategy.
        for q in [plain, healthy_only, step.queries[0], step.queries[1]] {
            let (answer, hosts) = real_query(&view, &q);
            let want = model.query(svc, &q);
            eq(&answer, &want, &format!("service {svc}, query {q:?}"))?;
            let picks = QuerySpec {
                healthy_only: true,
                ..q
            };
            let (_, candidates) = real_query(&view, &picks);
            let allowed: BTreeSet<String> = model
                .query(svc, &picks)
                .0
                .into_iter()
                .filter(|(a, _)| m.instances[a].weight > 0.0)
                .map(|(a, _)| a)
                .collect();
            let mut rr = RoundRobin::default();
            let got = [
                weighted_random(&candidates, 0.0),
                weighted_random(&candidates, 0.61),
                weighted_random(&candidates, 0.999_999),
                consistent_hash(&candidates, "user-1"),
                consistent_hash(&candidates, "user-2"),
                rr.next(&candidates),
                rr.next(&candidates),
            ];
            for pick in got {
                match pick {
                    Some(p) => check(allowed.contains(&*p.address), || {
                        format!(
                            "service {svc}, {q:?}: picked {} outside {allowed:?}",
                            p.address
                        )
                    })?,
                    None => check(allowed.is_empty(), || {
                        format!("service {svc}, {q:?}: no pick from {allowed:?}")
                    })?,
                }
            }
            drop(hosts);
        }
        // The cached plain list body, as a reader gets it.
        let (head, tail) = plain_list_parts(&view, &service.grouped, &k.group);
        let body = [&head[..], b"0", &tail[..]].concat();
        let json: serde_json::Value = serde_json::from_slice(&body).expect("list body is JSON");
        let listed: Vec<(String, bool)> = json["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .map(|h| {
                (
                    format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]),
                    h["healthy"].as_bool().unwrap(),
                )
            })
            .collect();
        let (want_hosts, want_protected, _) = model.query(svc, &plain);
        eq(
            listed,
            want_hosts,
            &format!("cached list body of service {svc}"),
        )?;
        eq(
            json["reachProtectionThreshold"].as_bool(),
            Some(want_protected),
            "cached list body's reachProtectionThreshold",
        )?;
    }
    eq(r.totals(), totals, "totals (services, instances, healthy)")?;
    for ns in ["public", "ns1"] {
        let real_keys: Vec<String> = r.services(ns).iter().map(|s| s.key.to_string()).collect();
        let model_keys: Vec<String> = model
            .services
            .keys()
            .filter(|svc| SERVICES[**svc].0 == ns)
            .map(|svc| key(*svc).to_string())
            .collect();
        eq(
            real_keys,
            model_keys,
            &format!("services of namespace {ns}"),
        )?;
    }
    for task in TASKS {
        let mut real_owned: Vec<String> = r
            .owned_by(task)
            .iter()
            .map(|(k, i)| format!("{k} {}", i.address))
            .collect();
        real_owned.sort();
        let mut model_owned: Vec<String> = Vec::new();
        for (svc, s) in &model.services {
            for i in s
                .instances
                .values()
                .filter(|i| i.task.as_deref() == Some(task))
            {
                model_owned.push(format!("{} {}", key(*svc), i.address));
            }
        }
        model_owned.sort();
        eq(
            real_owned,
            model_owned,
            &format!("instances task {task} owns"),
        )?;
    }
    // Distro's view of clients.
    let drained: BTreeSet<String> = r
        .clients()
        .drain_changed()
        .iter()
        .map(|c| c.to_string())
        .collect();
    for id in all_clients() {
        let record = r.clients().get(&id);
        eq(
            record.is_some(),
            model.known.contains(&id),
            &format!("client {id} has a record"),
        )?;
        let held = model.client_instances(&id);
        let entries: BTreeSet<(usize, String)> = record
            .iter()
            .flat_map(|rec| rec.entries.iter())
            .map(|(k, a)| {
                let svc = (0..SERVICES.len())
                    .find(|s| key(*s) == **k)
                    .expect("a known service");
                (svc, a.to_string())
            })
            .collect();
        eq(&entries, &held, &format!("entries of client {id}'s record"))?;
        if let Some(data) = r.client_data(&id) {
            let mut sent: Vec<String> = data
                .instances
                .iter()
                .map(|(k, i)| format!("{k} {}", seen_real(i)))
                .collect();
            sent.sort();
            let mut want: Vec<String> = held
                .iter()
                .map(|(svc, a)| {
                    format!(
                        "{} {}",
                        key(*svc),
                        seen_model(&model.services[svc].instances[a])
                    )
                })
                .collect();
            want.sort();
            eq(sent, want, &format!("client {id} as Distro sends it"))?;
            let last = held
                .iter()
                .map(|(svc, a)| &model.services[svc].instances[a])
                .filter(|i| i.beats())
                .map(|i| i.last_beat)
                .max()
                .unwrap_or(0);
            eq(
                data.last_beat_ms,
                last,
                &format!("client {id}'s last beat as sent"),
            )?;
        }
        let revision = record.as_ref().map_or(0, |rec| rec.revision);
        if model.changed_here.contains(&id) {
            check(drained.contains(&id), || {
                format!("client {id} changed here but Distro was not told; told {drained:?}")
            })?;
            let was = before.client_revisions.get(&id).copied().unwrap_or(0);
            check(revision > was, || {
                format!("client {id} changed here but its revision stayed {was}")
            })?;
        }
        before.client_revisions.insert(id, revision);
    }
    Ok(())
}

/// Runs one sequence; the error names the step that disagreed.
fn run(policy: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let registry = Registry::new();
    let real = Real {
        changes: registry.watch(),
        registry,
        guard: EvictionGuard::new(POLICIES[policy]),
        foreign: Mutex::new(BTreeSet::new()),
    };
    let mut model = Model::new(POLICIES[policy]);
    let mut before = Before::default();
    for (n, step) in steps.iter().enumerate() {
        model.changed_here.clear();
        let outcome = apply(&real, &mut model, &step.op)
            .and_then(|()| compare(&real, &model, step, &mut before));
        if let Err(e) = outcome {
            return Err(TestCaseError::fail(format!(
                "step {n} ({:?}) at t+{} ms: {e}",
                step.op,
                model.now - START_MS
            )));
        }
    }
    Ok(())
}

#[test]
fn the_registry_agrees_with_a_naive_model() {
    let cases = std::env::var("ROSTER_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let config = Config {
        cases,
        // No regression files in the tree: a failure prints its shrunk sequence.
        failure_persistence: None,
        max_shrink_iters: 20_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (
        0..POLICIES.len(),
        proptest::collection::vec(step_strategy(), 1..=MAX_STEPS),
    );
    if let Err(e) = runner.run(&strategy, |(policy, steps)| run(policy, &steps)) {
        panic!("the registry and its model disagree: {e}");
    }
}
