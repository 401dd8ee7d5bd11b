//! Distro's protocol in one process: several nodes, each with its own `Registry`,
//! sharing nothing but the in-memory transport (`mem.rs`), on one explicit clock. The
//! workers' steps (`propagate`, `verification_round`) are run by hand in the order a
//! case needs; the last case runs the real workers.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use roster_raft::NodeId;

use super::mem::{Fault, MemNet, MemTransport};
use super::responsibility::owner_of;
use super::*;
use roster_registry::client::ClientData;
use roster_registry::guard::EvictionGuard;
use roster_registry::instance::Metadata;
use roster_registry::service::ServiceKey;
use roster_registry::{InstancePatch, Registration};

mod connections;

/// The verification period in these tests, ms.
const ROUND: u64 = 1_000;
/// Where the clock starts, ms (revisions follow the clock, so not zero).
const T0: u64 = 1_700_000_000_000;

/// The service the tests register in.
pub(crate) fn key() -> ServiceKey {
    ServiceKey::new("public", "DEFAULT_GROUP", "svc")
}

/// An ephemeral registration of `ip:port` with the defaults.
pub(crate) fn reg(ip: &str, port: u16) -> Registration {
    Registration {
        ip: ip.into(),
        port,
        cluster: "DEFAULT".into(),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        metadata: Metadata::new(),
        instance_id: None,
        client: None,
        owner: None,
    }
}

/// An address client (`ip`, port 80) whose owner among each live set given is the node
/// given with it.
fn address_owned(wants: &[(&[NodeId], NodeId)]) -> String {
    (0..100_000u32)
        .map(|i| format!("10.9.{}.{}", i / 250, i % 250))
        .find(|ip| {
            let id = format!("{ip}:80");
            wants
                .iter()
                .all(|(live, owner)| owner_of(&id, live) == *owner)
        })
        .expect("some address hashes so")
}

struct Node {
    distro: Distro<MemTransport>,
    registry: Registry,
    /// This node's live gRPC connections.
    connections: Arc<Mutex<HashSet<String>>>,
}

/// Nodes 1..=n on one [`MemNet`] and one clock.
struct Cluster {
    net: MemNet,
    clock: Arc<AtomicU64>,
    nodes: Vec<Node>,
}

impl Cluster {
    fn start(n: NodeId) -> Self {
        let mut c = Self {
            net: MemNet::new(),
            clock: Arc::new(AtomicU64::new(T0)),
            nodes: Vec::new(),
        };
        for id in 1..=n {
            let node = c.make(id);
            node.distro.core().set_loaded();
            c.nodes.push(node);
        }
        c
    }

    fn make(&self, id: NodeId) -> Node {
        let registry = Registry::new();
        let connections: Arc<Mutex<HashSet<String>>> = Default::default();
        let held = connections.clone();
        let clock = self.clock.clone();
        let distro = Distro::with_transport(
            id,
            registry.clone(),
            self.net.transport(id),
            Duration::from_millis(ROUND),
            move |client| held.lock().contains(client),
            Arc::new(move || clock.load(Ordering::SeqCst)),
        );
        self.net.attach(&distro);
        Node {
            distro,
            registry,
            connections,
        }
    }

    /// Node `id` starts again with nothing (not loaded: the test loads it).
    fn restart(&mut self, id: NodeId) {
        let node = self.make(id);
        self.nodes[id as usize - 1] = node;
    }

    fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize - 1]
    }

    fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    fn advance(&self, ms: u64) -> u64 {
        self.clock.fetch_add(ms, Ordering::SeqCst) + ms
    }

    async fn register(&self, at: NodeId, ip: &str) {
        let op = EphemeralOp::Register {
            key: key(),
            registration: reg(ip, 80),
        };
        assert_eq!(self.node(at).distro.execute(op).await, Ok(OpReply::Done));
    }

    async fn deregister(&self, at: NodeId, ip: &str) {
        let op = EphemeralOp::Deregister {
            key: key(),
            ip: ip.into(),
            port: 80,
        };
        assert_eq!(self.node(at).distro.execute(op).await, Ok(OpReply::Done));
    }

    async fn propagate(&self, id: NodeId) {
        self.node(id).distro.propagate().await;
    }

    /// The clock moves one round; each of `ids` runs its verification round, then each
    /// pushes what the others' messages queued.
    async fn round(&self, ids: &[NodeId]) {
        self.advance(ROUND);
        for id in ids {
            self.node(*id).distro.verification_round().await;
        }
        for id in ids {
            self.propagate(*id).await;
        }
    }

    /// The addresses node `id` lists in the test service.
    fn addrs(&self, id: NodeId) -> BTreeSet<String> {
        self.node(id)
            .registry
            .service_by_key(&key())
            .map(|s| {
                s.view()
                    .instances
                    .values()
                    .map(|i| i.address.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn has(&self, id: NodeId, ip: &str) -> bool {
        self.addrs(id).contains(&format!("{ip}:80"))
    }

    fn revision(&self, id: NodeId, client: &str) -> Option<u64> {
        self.node(id)
            .registry
            .clients()
            .get(client)
            .map(|r| r.revision)
    }

    fn last_beat(&self, id: NodeId, ip: &str) -> u64 {
        let inst = self.node(id).registry.instance(&key(), ip, 80).unwrap();
        inst.clock().unwrap().last_beat_ms()
    }
}

#[tokio::test]
async fn changes_reach_live_peers_failed_pushes_retry_and_down_peers_catch_up_by_verification() {
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 1)]);
    c.register(1, &x).await;
    c.net.fault(1, 3, Some(Fault::Drop));
    c.propagate(1).await;
    assert!(c.has(2, &x));
    assert!(!c.has(3, &x), "the push to node 3 was lost");
    assert_eq!(
        c.node(1).distro.core().pending(3),
        [Arc::<str>::from(format!("{x}:80"))],
        "kept for a retry"
    );
    c.net.fault(1, 3, None);
    c.propagate(1).await;
    assert!(c.has(3, &x), "retried");
    assert!(c.node(1).distro.core().pending(3).is_empty());

    // Node 3 goes down: what changes meanwhile is not kept for it...
    c.net.cut_off(3);
    let y = address_owned(&[(&[1, 2, 3], 1), (&[1, 2], 1)]);
    c.register(1, &y).await;
    c.propagate(1).await;
    assert!(c.has(2, &y));
    assert!(c.node(1).distro.core().pending(3).is_empty());
    // ...and reaches it by verification once it is back: it asks for what it lacks.
    c.net.reconnect(3);
    c.advance(ROUND);
    c.node(1).distro.verification_round().await;
    assert!(c.has(3, &y));
}

#[tokio::test]
async fn ops_run_on_the_owner_and_here_when_the_owner_is_unreachable() {
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 2)]);
    c.register(1, &x).await;
    assert!(c.has(2, &x), "forwarded to the owner");
    assert!(!c.has(1, &x), "not applied by the node that took it");
    // The owner's error travels whole, kind included.
    let update = EphemeralOp::Update {
        key: key(),
        ip: "10.9.255.1".into(),
        port: 80,
        patch: InstancePatch::default(),
    };
    let owner = c.node(3).distro.owner_of("10.9.255.1:80");
    let other = if owner == 1 { 2 } else { 1 };
    let there = c.node(owner).distro.apply_local(update.clone(), c.now());
    let forwarded = c.node(other).distro.execute(update).await;
    assert_eq!(forwarded.unwrap_err().kind, there.unwrap_err().kind);
    // The owner unreachable: the node that took the op runs it.
    let z = address_owned(&[(&[1, 2, 3], 2), (&[1, 3], 3)]);
    c.net.fault(1, 2, Some(Fault::Drop));
    c.register(1, &z).await;
    assert!(c.has(1, &z) && !c.has(2, &z));
}

#[tokio::test]
async fn ops_for_a_busy_owner_go_together_and_each_gets_its_own_answer() {
    let c = Cluster::start(3);
    // Fifty clients node 2 owns, registered through node 1 at once, while each request
    // to node 2 takes 20 ms: the first goes alone, the rest queue and go in batches.
    let mut ips: Vec<String> = (0..100_000u32)
        .map(|i| format!("10.9.{}.{}", i / 250, i % 250))
        .filter(|ip| owner_of(&format!("{ip}:80"), &[1, 2, 3]) == 2)
        .take(51)
        .collect();
    let unknown = ips.pop().expect("51 addresses");
    c.register(2, &ips[0]).await;
    c.net
        .fault(1, 2, Some(Fault::Delay(Duration::from_millis(20))));
    let node = c.node(1).distro.clone();
    let mut calls = tokio::task::JoinSet::new();
    for ip in &ips {
        let (node, op) = (
            node.clone(),
            EphemeralOp::Register {
                key: key(),
                registration: reg(ip, 80),
            },
        );
        calls.spawn(async move { node.execute(op).await });
    }
    // One op the owner refuses (an update of an instance it does not have), among
    // them: its error is its own.
    let refused = node.execute(EphemeralOp::Update {
        key: key(),
        ip: unknown.clone(),
        port: 80,
        patch: InstancePatch::default(),
    });
    let (refused, answers) = tokio::join!(refused, calls.join_all());
    assert!(
        answers.iter().all(|a| *a == Ok(OpReply::Done)),
        "{answers:?}"
    );
    for ip in &ips {
        assert!(
            c.has(2, ip) && !c.has(1, ip),
            "{ip} registered by its owner"
        );
    }
    let singles = c.net.delivered(1, 2, forward::ROUTE).len();
    let batches = c.net.delivered(1, 2, forward::BATCH_ROUTE);
    assert!(!batches.is_empty(), "queued ops went in batches");
    assert!(
        singles + batches.len() < ips.len() / 2,
        "{singles} single requests and {} batches for {} ops",
        batches.len(),
        ips.len()
    );
    assert_eq!(
        refused.unwrap_err().kind,
        crate::error::ErrorKind::InstanceNotFound
    );
    assert!(!c.has(2, &unknown));
    // A batch larger than a sender makes is refused whole, and changes nothing.
    let op = EphemeralOp::Register {
        key: key(),
        registration: reg("10.7.0.1", 80),
    };
    let body = rmp_serde::to_vec_named(&vec![op; forward::MAX_BATCH + 1]).unwrap();
    assert!(matches!(
        c.node(2).distro.handle(1, forward::BATCH_ROUTE, &body),
        Err(Refusal::Malformed(_))
    ));
    assert!(!c.has(2, "10.7.0.1"));
}

#[tokio::test]
async fn an_owner_dying_mid_round_leaves_its_clients_with_the_new_owner_judged_from_its_last_beat()
{
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 1), (&[2, 3], 2)]);
    c.register(1, &x).await;
    c.propagate(1).await;
    // The owner hears a beat; beats do not replicate.
    let t1 = c.advance(1_500);
    let grouped = "DEFAULT_GROUP@@svc";
    assert!(c
        .node(1)
        .distro
        .beat_here("public", grouped, &x, 80, t1)
        .is_some());
    assert_eq!(c.last_beat(2, &x), T0);
    // Its round reaches both peers, then it dies before their replies come back.
    c.advance(500);
    c.net.fault(1, 2, Some(Fault::LoseReply));
    c.net.fault(1, 3, Some(Fault::LoseReply));
    c.node(1).distro.verification_round().await;
    c.net.cut_off(1);
    assert_eq!(
        c.last_beat(2, &x),
        t1,
        "the last beat the old owner reported"
    );
    assert_eq!(c.last_beat(3, &x), t1);
    assert!(c.node(2).distro.owns(&format!("{x}:80")));
    // The new owner keeps the client and judges it from that beat: healthy until
    // t1 + 15 s (default beat timeout), not from the registration, not from "now".
    let guard = EvictionGuard::default();
    for _ in 0..14 {
        c.round(&[2, 3]).await;
        let judge = c.node(2).distro.judgement();
        let report = c.node(2).registry.expire_due(c.now(), &judge, &guard);
        assert_eq!(report.unhealthy, 0, "at {}", c.now() - t1);
        assert!(c.has(2, &x) && c.has(3, &x), "dropped at {}", c.now() - t1);
    }
    assert!(
        c.now() > T0 + 15_000,
        "past a judgement from the registration"
    );
    c.clock.store(t1 + 15_001, Ordering::SeqCst);
    let judge = c.node(2).distro.judgement();
    let report = c.node(2).registry.expire_due(c.now(), &judge, &guard);
    assert_eq!(report.unhealthy, 1);
    // Node 3 is not the owner: it never judges.
    let judge = c.node(3).distro.judgement();
    assert!(!judge(&format!("{x}:80")));
}

#[tokio::test]
async fn an_older_copy_is_ignored_and_a_node_that_knows_newer_sends_it_to_the_owner() {
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 1), (&[2, 3], 2)]);
    let id = format!("{x}:80");
    c.register(1, &x).await;
    c.propagate(1).await;
    let old = c.revision(1, &id).unwrap();
    // A one-sided partition: node 2 believes node 1 dead, takes the client over and
    // deletes it, while node 1 still owns it.
    c.net.pin_view(2, Some(&[2, 3]));
    c.advance(10);
    c.deregister(2, &x).await;
    c.propagate(2).await;
    let new = c.revision(2, &id).unwrap();
    assert!(new > old);
    assert!(!c.has(2, &x) && !c.has(3, &x) && c.has(1, &x));
    // The owner's old push, delivered late, changes nothing.
    let late = c.net.delivered(1, 2, "sync");
    assert_eq!(late.len(), 1);
    c.net.redeliver(&late[0]).unwrap();
    assert!(!c.has(2, &x));
    assert_eq!(c.revision(2, &id), Some(new));
    // The owner confirms its older revision; both peers send the deletion back.
    c.net.pin_view(2, None);
    c.advance(ROUND);
    c.node(1).distro.verification_round().await;
    assert_eq!(c.node(2).distro.core().pending(1), [Arc::from(id.as_str())]);
    assert_eq!(c.node(3).distro.core().pending(1), [Arc::from(id.as_str())]);
    c.propagate(2).await;
    c.propagate(3).await;
    assert!(!c.has(1, &x), "the owner converged");
    assert_eq!(c.revision(1, &id), Some(new));
}

#[tokio::test]
async fn a_node_back_from_a_partition_gets_deletions_and_drops_stale_copies_only_after_four_rounds()
{
    let c = Cluster::start(3);
    let gone = address_owned(&[(&[1, 2, 3], 1), (&[1, 2], 1)]);
    let kept = address_owned(&[(&[1, 2, 3], 2), (&[1, 2], 2)]);
    c.register(1, &gone).await;
    c.register(2, &kept).await;
    c.propagate(1).await;
    c.propagate(2).await;
    assert!(c.has(3, &gone) && c.has(3, &kept));
    c.net.cut_off(3);
    c.deregister(1, &gone).await;
    c.propagate(1).await;
    assert!(c.node(1).distro.core().pending(3).is_empty());
    // Ten rounds apart. Alone, node 3 owns everything and judges nothing.
    for _ in 0..10 {
        c.round(&[1, 2, 3]).await;
    }
    assert!(c.has(3, &gone) && c.has(3, &kept));
    c.net.reconnect(3);
    // Node 3 runs its rounds first after it is back: the worst case for it.
    for n in 1..=6 {
        c.round(&[3, 1, 2]).await;
        assert!(
            c.has(3, &kept),
            "a copy its live owner confirms, dropped in round {n}"
        );
        if n <= 5 {
            assert!(
                c.has(3, &gone),
                "dropped before four rounds passed, in round {n}"
            );
        }
    }
    assert!(!c.has(3, &gone), "the deletion reached node 3");
    assert!(
        !c.has(1, &gone) && !c.has(2, &gone),
        "offers did not bring it back"
    );
}

/// A copy dropped while its owner still holds the client (the owner's confirmations did
/// not arrive for four rounds while it was in sight: a one-way cut, or its messages
/// timing out) is sent again at the owner's next round. It kept its revision, and the
/// owner's round confirmed that revision: the node listed nothing for the client until
/// the client changed, however long that took.
#[tokio::test]
async fn a_copy_dropped_while_its_owner_still_holds_it_comes_back_at_the_next_round() {
    let c = Cluster::start(2);
    let ip = address_owned(&[(&[1, 2], 1)]);
    c.register(1, &ip).await;
    c.propagate(1).await;
    assert!(c.has(2, &ip));
    let id = format!("{ip}:80");
    c.node(2).registry.drop_client_copy(&id, c.now());
    assert!(!c.has(2, &ip));
    c.round(&[1, 2]).await;
    assert!(c.has(2, &ip), "the owner's round brought the copy back");
    assert_eq!(c.revision(2, &id), c.revision(1, &id));
    // And it stays: the next rounds confirm it.
    for _ in 0..6 {
        c.round(&[1, 2]).await;
    }
    assert!(c.has(2, &ip));
}

#[tokio::test]
async fn a_frozen_node_that_never_saw_its_peers_go_drops_nothing_when_it_resumes() {
    let c = Cluster::start(3);
    let kept = address_owned(&[(&[1, 2, 3], 2)]);
    c.register(2, &kept).await;
    c.propagate(2).await;
    c.round(&[1, 2, 3]).await;
    // Node 3 freezes: the others stop seeing it, and it runs nothing, so its own view
    // of the members is the one it had.
    c.net.pin_view(3, Some(&[1, 2, 3]));
    c.net.cut_off(3);
    for _ in 0..8 {
        c.round(&[1, 2]).await;
    }
    c.net.reconnect(3);
    c.net.pin_view(3, None);
    // Its first round after the pause sees everyone live, as before it: the copy has
    // not been confirmed for nine rounds, but its owner had no round in sight of it.
    c.round(&[3, 1, 2]).await;
    assert!(c.has(3, &kept));
}

#[tokio::test]
async fn a_frozen_node_resuming_is_offered_what_it_now_owns_and_nothing_is_dropped() {
    let c = Cluster::start(3);
    let y = address_owned(&[(&[1, 2, 3], 1), (&[2, 3], 2)]);
    let id = format!("{y}:80");
    // Node 1 freezes (it runs nothing, and nothing reaches it); a client that it will
    // own when it is back registers meanwhile, with node 2.
    c.net.cut_off(1);
    c.register(3, &y).await;
    assert!(c.has(2, &y) && !c.has(3, &y));
    c.propagate(2).await;
    for _ in 0..6 {
        c.round(&[2, 3]).await;
    }
    c.net.reconnect(1);
    assert!(c
        .node(2)
        .distro
        .core()
        .registry()
        .clients()
        .get(&id)
        .is_some());
    for n in 1..=6 {
        c.round(&[1, 2, 3]).await;
        assert!(c.has(2, &y) && c.has(3, &y), "dropped in round {n}");
        if n >= 2 {
            assert!(c.has(1, &y), "the owner still lacks it in round {n}");
        }
    }
    // The owner confirms it now.
    let confirmed = c.node(3).registry.clients().get(&id).unwrap().confirmed_ms;
    assert_eq!(confirmed, c.now());
}

#[tokio::test]
async fn a_deletion_made_while_the_owner_was_frozen_reaches_it() {
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 1), (&[2, 3], 2)]);
    c.register(1, &x).await;
    c.propagate(1).await;
    c.net.cut_off(1);
    c.advance(10);
    c.deregister(3, &x).await;
    c.propagate(2).await;
    assert!(!c.has(2, &x) && !c.has(3, &x));
    for _ in 0..3 {
        c.round(&[2, 3]).await;
    }
    c.net.reconnect(1);
    assert!(c.has(1, &x), "the frozen owner still has it");
    for n in 1..=5 {
        c.round(&[1, 2, 3]).await;
        assert!(!c.has(2, &x) && !c.has(3, &x), "came back in round {n}");
        assert!(!c.has(1, &x), "the owner kept it in round {n}");
    }
}

#[tokio::test]
async fn duplicated_and_reordered_syncs_are_harmless() {
    let c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 1)]);
    let id = format!("{x}:80");
    c.net.fault(1, 3, Some(Fault::Drop));
    c.register(1, &x).await;
    c.propagate(1).await;
    c.advance(10);
    let heavier = EphemeralOp::Update {
        key: key(),
        ip: x.clone(),
        port: 80,
        patch: InstancePatch {
            weight: Some(7.0),
            ..Default::default()
        },
    };
    c.node(1).distro.execute(heavier).await.unwrap();
    c.propagate(1).await;
    c.advance(10);
    c.deregister(1, &x).await;
    c.propagate(1).await;
    let syncs = c.net.delivered(1, 2, "sync");
    assert_eq!(syncs.len(), 3);
    let last = c.revision(1, &id).unwrap();
    // Node 2 has the deletion; every older state again, newest first, twice: nothing.
    for sync in syncs.iter().rev().chain(syncs.iter()) {
        c.net.redeliver(sync).unwrap();
        assert!(!c.has(2, &x));
        assert_eq!(c.revision(2, &id), Some(last));
    }
    // Node 3 missed them all; they arrive out of order: the newest wins.
    let to_3 = |i: usize| super::mem::Delivered {
        to: 3,
        ..syncs[i].clone()
    };
    c.net.redeliver(&to_3(1)).unwrap();
    c.net.redeliver(&to_3(0)).unwrap();
    c.net.redeliver(&to_3(1)).unwrap();
    let inst = c.node(3).registry.instance(&key(), &x, 80).unwrap();
    assert_eq!(inst.weight, 7.0);
    c.net.redeliver(&to_3(2)).unwrap();
    c.net.redeliver(&to_3(0)).unwrap();
    assert!(!c.has(3, &x));
}

#[tokio::test]
async fn a_starting_node_loads_from_the_first_peer_that_has_loaded() {
    let mut c = Cluster::start(3);
    let x = address_owned(&[(&[1, 2, 3], 2)]);
    c.register(2, &x).await;
    c.restart(1);
    c.restart(3);
    // Node 1 is starting too: node 3 asks it first, then node 2.
    assert!(!c.node(3).distro.loaded());
    assert!(!c.node(3).distro.on_snapshot().loaded);
    c.node(3).distro.load_snapshot(Duration::ZERO).await;
    assert!(c.node(3).distro.loaded());
    assert!(c.has(3, &x));
    // Nobody reachable: it gives up after its patience and starts from nothing.
    c.restart(1);
    c.net.cut_off(1);
    c.node(1).distro.load_snapshot(Duration::ZERO).await;
    assert!(c.node(1).distro.loaded() && !c.has(1, &x));
    // The whole cluster restarted at once: every peer answers that it is starting too,
    // so nobody holds anything, and a node starts from nothing without waiting out its
    // patience.
    c.net.reconnect(1);
    for id in [1, 2, 3] {
        c.restart(id);
    }
    let load = c.node(1).distro.load_snapshot(Duration::from_secs(3600));
    tokio::time::timeout(Duration::from_secs(1), load)
        .await
        .expect("no wait when every peer is starting");
    assert!(c.node(1).distro.loaded() && !c.has(1, &x));
    // Alone in the cluster: nothing to wait for.
    let mut lone = Cluster::start(1);
    lone.restart(1);
    let load = lone.node(1).distro.load_snapshot(Duration::from_secs(3600));
    tokio::time::timeout(Duration::from_secs(1), load)
        .await
        .expect("no wait");
    assert!(lone.node(1).distro.loaded());
}

/// `n` address clients (`ip`, port 80) owned by `owner` among nodes 1..=3.
fn addresses_owned_by(owner: NodeId, n: usize) -> Vec<String> {
    (0..100_000u32)
        .map(|i| format!("10.9.{}.{}", i / 250, i % 250))
        .filter(|ip| owner_of(&format!("{ip}:80"), &[1, 2, 3]) == owner)
        .take(n)
        .collect()
}

#[tokio::test]
async fn a_snapshot_larger_than_a_message_arrives_whole_in_parts() {
    let mut c = Cluster::start(3);
    // Three instances to a message: ten clients make four parts.
    for id in [1, 2] {
        c.node(id).distro.core().set_message_instances(3);
    }
    let ips = addresses_owned_by(2, 10);
    for ip in &ips {
        c.register(2, ip).await;
    }
    // Pushed to the peers in four messages each.
    c.propagate(2).await;
    for ip in &ips {
        assert!(c.has(1, ip) && c.has(3, ip), "{ip} not pushed");
    }
    let plan = c
        .node(2)
        .distro
        .core()
        .answer_snapshot(SnapshotRequest::default());
    assert!(plan.loaded && plan.clients.is_empty());
    assert_eq!(plan.parts, 4);
    // The parts hold every client once.
    let mut seen: Vec<String> = (0..plan.parts)
        .flat_map(|part| {
            let request = SnapshotRequest {
                part,
                parts: plan.parts,
            };
            c.node(2).distro.core().answer_snapshot(request).clients
        })
        .map(|client| client.id.to_string())
        .collect();
    seen.sort();
    let mut want: Vec<String> = ips.iter().map(|ip| format!("{ip}:80")).collect();
    want.sort();
    assert_eq!(seen, want);
    // A restarted node takes them all, part by part (from node 1, the first peer).
    c.restart(3);
    c.node(3).distro.load_snapshot(Duration::ZERO).await;
    assert!(c.node(3).distro.loaded());
    for ip in &ips {
        assert!(c.has(3, ip), "{ip} missing after the parted snapshot");
    }
    // A requester of a build before parts sends an empty body: it gets everything.
    let whole: SnapshotMessage = rmp_serde::from_slice(
        &c.node(2)
            .distro
            .handle(3, messages::SNAPSHOT, &[])
            .expect("answered"),
    )
    .unwrap();
    assert_eq!(whole.clients.len(), 10);
}

#[tokio::test]
async fn pushes_are_split_so_that_no_message_holds_more_than_its_share() {
    let c = Cluster::start(3);
    c.node(1).distro.core().set_message_instances(3);
    let ips = addresses_owned_by(1, 10);
    for ip in &ips {
        c.register(1, ip).await;
    }
    let core = c.node(1).distro.core();
    core.queue_changes(&[1, 2, 3]);
    let pushes = core.take_pushes(c.now());
    for peer in [2, 3] {
        let to_peer: Vec<&core::Push> = pushes.iter().filter(|p| p.peer == peer).collect();
        assert_eq!(
            to_peer.len(),
            4,
            "ten one-instance clients, three to a message"
        );
        let mut sent = 0;
        for push in to_peer {
            let instances: usize = push
                .message
                .clients
                .iter()
                .map(|client| client.instances.len())
                .sum();
            assert!(instances <= 3, "{instances} instances in one push");
            assert_eq!(push.ids.len(), push.message.clients.len());
            sent += instances;
        }
        assert_eq!(sent, 10);
    }
}

#[tokio::test]
async fn a_large_client_that_keeps_changing_is_pushed_once_per_interval_and_never_lost() {
    let c = Cluster::start(3);
    let ip = addresses_owned_by(1, 1).remove(0);
    let register = |service: usize| EphemeralOp::Register {
        key: ServiceKey::new("public", "DEFAULT_GROUP", &format!("s{service}")),
        registration: reg(&ip, 80),
    };
    let core = c.node(1).distro.core();
    let instances_pushed = |pushes: &[core::Push]| -> Vec<usize> {
        pushes
            .iter()
            .map(|p| p.message.clients.iter().map(|c| c.instances.len()).sum())
            .collect()
    };
    // 40 instances: a large client. Its first push goes at once.
    for s in 0..40 {
        c.node(1).distro.execute(register(s)).await.unwrap();
    }
    core.queue_changes(&[1, 2, 3]);
    let t = c.now();
    assert_eq!(instances_pushed(&core.take_pushes(t)), [40, 40]);
    // Changed again at once: it waits (pending) for its interval, 200 ms at 41.
    c.node(1).distro.execute(register(40)).await.unwrap();
    core.queue_changes(&[1, 2, 3]);
    assert!(core.take_pushes(t + 100).is_empty());
    assert_eq!(core.pending(2).len(), 1, "kept for later");
    assert_eq!(instances_pushed(&core.take_pushes(t + 200)), [41, 41]);
    // A small client is never held back.
    let small = addresses_owned_by(1, 2).remove(1);
    c.register(1, &small).await;
    core.queue_changes(&[1, 2, 3]);
    assert_eq!(instances_pushed(&core.take_pushes(t + 210)), [1, 1]);
}

#[tokio::test]
async fn a_node_loading_its_snapshot_does_not_ask_for_what_the_snapshot_brings() {
    let mut c = Cluster::start(3);
    let ip = addresses_owned_by(1, 1).remove(0);
    c.register(1, &ip).await;
    let id = format!("{ip}:80");
    let revision = c.revision(1, &id).expect("the owner holds it");
    let now = c.now();
    let confirmation = || VerifyMessage {
        clients: vec![(id.clone(), revision, now)],
    };
    // Restarted and still loading: the owner's confirmation asks for nothing.
    c.restart(3);
    assert!(!c.node(3).distro.loaded());
    assert!(c
        .node(3)
        .distro
        .on_verify(1, confirmation())
        .need
        .is_empty());
    // Loaded (here from nobody, the others cut off), it asks for what it lacks.
    c.net.cut_off(3);
    c.node(3).distro.load_snapshot(Duration::ZERO).await;
    assert!(c.node(3).distro.loaded() && !c.has(3, &ip));
    assert_eq!(c.node(3).distro.on_verify(1, confirmation()).need, vec![id]);
}

/// Waits (on tokio's clock) until `check` holds, for at most 5 s.
async fn until(check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "not within 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_workers_replicate_and_verify_on_their_own() {
    // The real loops on tokio's paused clock, which jumps to the next timer whenever
    // every task waits: rounds of 100 ms, and the test clock follows tokio's.
    let mut c = Cluster::start(3);
    let start = tokio::time::Instant::now();
    let clock = c.clock.clone();
    let ticker = tokio::spawn(async move {
        loop {
            clock.store(T0 + start.elapsed().as_millis() as u64, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let fast: Vec<Distro<MemTransport>> = (1..=3)
        .map(|id| {
            let clock = c.clock.clone();
            let distro = Distro::with_transport(
                id,
                c.node(id).registry.clone(),
                c.net.transport(id),
                Duration::from_millis(100),
                |_| false,
                Arc::new(move || clock.load(Ordering::SeqCst)),
            );
            c.net.attach(&distro);
            distro
        })
        .collect();
    for (node, distro) in c.nodes.iter_mut().zip(fast) {
        node.distro = distro;
    }
    let (stop, stopping) = watch::channel(false);
    let mut workers = JoinSet::new();
    for node in &c.nodes {
        workers.spawn(node.distro.clone().run_propagation(stopping.clone()));
        workers.spawn(node.distro.clone().run_verification(stopping.clone()));
    }
    let x = address_owned(&[(&[1, 2, 3], 3)]);
    c.register(1, &x).await;
    until(|| (1..=3).all(|id| c.has(id, &x))).await;
    // Node 2 is cut off while the owner deletes the client: the push to it is not
    // kept. Back, its copy is no longer confirmed: offered, then dropped.
    c.net.cut_off(2);
    c.deregister(3, &x).await;
    until(|| !c.has(1, &x)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.has(2, &x));
    c.net.reconnect(2);
    until(|| !c.has(2, &x)).await;
    stop.send(true).unwrap();
    while workers.join_next().await.is_some() {}
    ticker.abort();
}
