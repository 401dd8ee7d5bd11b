//! What the model test's sequences are made of: the small domain they draw from
//! (services, addresses, connections, tasks, metadata sets, selectors, lanes, time steps,
//! eviction-guard policies), the operations ([`Op`]) and per-step queries ([`QuerySpec`]),
//! and the proptest strategies that generate them. The domain is small, so the operations
//! of one sequence often meet on the same service and address.

use proptest::prelude::*;

use crate::guard::GuardPolicy;
use crate::instance::{Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY};
use crate::service::ServiceKey;

/// (namespace, group, name): two namespaces, so the eviction guard judges each alone.
pub(super) const SERVICES: [(&str, &str, &str); 3] = [
    ("public", "DEFAULT_GROUP", "a"),
    ("public", "DEFAULT_GROUP", "b"),
    ("ns1", "G", "c"),
];
/// Instance addresses; an address is also its HTTP-beat client's id.
pub(super) const ADDRS: [(&str, u16); 5] = [
    ("127.0.0.1", 1),
    ("127.0.0.1", 2),
    ("127.0.0.2", 1),
    ("127.0.0.2", 2),
    ("127.0.0.3", 1),
];
/// gRPC connections of this node.
pub(super) const LOCAL_CONNS: [&str; 2] = ["g:1:a", "g:1:b"];
/// A gRPC connection of another node, known here through Distro copies.
pub(super) const REMOTE_CONN: &str = "g:2:z";
pub(super) const TASKS: [&str; 2] = ["t1", "t2"];
pub(super) const CLUSTERS: [&str; 2] = ["DEFAULT", "c2"];
pub(super) const WEIGHTS: [f64; 4] = [0.0, 1.0, 2.5, 10_000.0];
pub(super) const THRESHOLDS: [f64; 5] = [0.0, -1.0, 0.5, 1.0, 0.0001];
/// Selector expressions; 0 is none.
pub(super) const SELECTORS: [&str; 4] = ["", "env=prod", "!lane", "env in (prod,dev)"];
/// Lane lists of queries; `None` ignores lanes.
pub(super) const LANES: [Option<&[&str]>; 5] = [
    None,
    Some(&[]),
    Some(&["x"]),
    Some(&["y", "x"]),
    Some(&["prod"]),
];
pub(super) const CLUSTER_FILTERS: [&[&str]; 4] = [&[], &["DEFAULT"], &["c2"], &["DEFAULT", "c2"]];
/// Time steps, in ms: around the short timeouts below and Nacos' defaults (15 s, 30 s).
const ADVANCES: [u64; 10] = [
    1, 250, 999, 1_000, 1_001, 2_000, 3_001, 6_000, 16_000, 31_000,
];
/// Eviction-guard policies; a sequence runs under one.
pub(super) const POLICIES: [GuardPolicy; 4] = [
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
pub(super) const START_MS: u64 = 1_000_000;

/// Metadata sets: lanes and selector keys, and `preserved.*` timings (one with the
/// delete timeout below the beat timeout, one with a bad value).
pub(super) fn metadata(i: usize) -> Metadata {
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
pub(super) fn model_matches(i: usize, m: &Metadata) -> bool {
    match i {
        0 => true,
        1 => m.get("env").map(String::as_str) == Some("prod"),
        2 => !m.contains_key("lane"),
        _ => matches!(m.get("env").map(String::as_str), Some("prod" | "dev")),
    }
}

pub(super) fn key(svc: usize) -> ServiceKey {
    let (ns, group, name) = SERVICES[svc];
    ServiceKey::new(ns, group, name)
}

pub(super) fn addr_id(addr: usize) -> String {
    let (ip, port) = ADDRS[addr];
    format!("{ip}:{port}")
}

// ----- operations ---------------------------------------------------------------------

/// Whose copy a Distro message carries.
#[derive(Clone, Copy, Debug)]
pub(super) enum CopyOf {
    /// An HTTP-beat client (an address).
    Addr(usize),
    /// The other node's gRPC connection.
    Remote,
}

impl CopyOf {
    pub(super) fn id(self) -> String {
        match self {
            CopyOf::Addr(a) => addr_id(a),
            CopyOf::Remote => REMOTE_CONN.to_string(),
        }
    }
}

/// A copy's revision against the one this node has.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rev {
    Newer,
    Same,
    Older,
}

/// One instance of a Distro copy (an address client's copy uses its own address).
#[derive(Clone, Debug)]
pub(super) struct CopyInstance {
    pub(super) svc: usize,
    pub(super) addr: usize,
    pub(super) cluster: usize,
    pub(super) weight: usize,
    pub(super) healthy: bool,
    pub(super) enabled: bool,
    pub(super) meta: usize,
}

#[derive(Clone, Debug)]
pub(super) enum Op {
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
pub(super) struct QuerySpec {
    pub(super) clusters: usize,
    pub(super) healthy_only: bool,
    pub(super) selector: usize,
    pub(super) lanes: usize,
}

#[derive(Clone)]
pub(super) struct Step {
    pub(super) op: Op,
    pub(super) queries: [QuerySpec; 2],
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

pub(super) fn step_strategy() -> impl Strategy<Value = Step> {
    (op_strategy(), query_strategy(), query_strategy()).prop_map(|(op, a, b)| Step {
        op,
        queries: [a, b],
    })
}
