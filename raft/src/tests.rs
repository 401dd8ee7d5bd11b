//! Storage and cluster tests: openraft's conformance suite on the log store and
//! state-machine adapter, restarts from the same directory, and three-node clusters over
//! the in-memory transport (forwarding, failover, membership changes, snapshot install).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::log_store::LogStore;
use crate::machine::{MachineStore, StateMachine};
use crate::network::{Handler, MemTransport};
use crate::node::{MembershipChange, NodeConfig, RaftNode};
use crate::types::{StorageError, TypeConfig};

/// A key-value machine whose entries the test can read.
#[derive(Default, Clone)]
struct KvMachine {
    entries: Arc<Mutex<BTreeMap<String, String>>>,
}

impl KvMachine {
    fn get(&self, k: &str) -> Option<String> {
        self.entries.lock().unwrap().get(k).cloned()
    }

    fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

#[derive(Serialize, Deserialize)]
enum KvCommand {
    Set(String, String),
}

impl StateMachine for KvMachine {
    type Command = KvCommand;
    type Response = usize;

    fn apply(&mut self, command: KvCommand) -> usize {
        let mut entries = self.entries.lock().unwrap();
        match command {
            KvCommand::Set(k, v) => {
                entries.insert(k, v);
            }
        }
        entries.len()
    }

    fn snapshot(&self) -> Vec<u8> {
        rmp_serde::to_vec(&*self.entries.lock().unwrap()).expect("encode")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        *self.entries.lock().unwrap() =
            rmp_serde::from_slice(snapshot).map_err(|e| e.to_string())?;
        Ok(())
    }
}

struct Builder;

impl
    openraft::testing::StoreBuilder<
        TypeConfig,
        LogStore,
        MachineStore<KvMachine>,
        tempfile::TempDir,
    > for Builder
{
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, MachineStore<KvMachine>), StorageError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = LogStore::open(&dir.path().join("log.redb")).expect("open log");
        let machine = MachineStore::open(&dir.path().join("snapshot"), KvMachine::default())
            .expect("open sm");
        Ok((dir, log, machine))
    }
}

#[test]
fn openraft_storage_suite() {
    openraft::testing::Suite::test_all(Builder).expect("storage suite");
}

fn config(id: u64, dir: &std::path::Path) -> NodeConfig {
    let mut config = NodeConfig::new(id, format!("node-{id}"), dir);
    // Small values so the tests also exercise snapshots, log replay and fast elections.
    config.snapshot_every = 7;
    config.heartbeat_ms = 50;
    config.election_timeout_ms = (300, 600);
    config
}

type Node = RaftNode<KvMachine, MemTransport>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let transport = MemTransport::default();
    {
        let node = Node::start(
            &config(1, dir.path()),
            KvMachine::default(),
            transport.clone(),
        )
        .await
        .expect("start");
        node.initialize_single().await.expect("init");
        assert!(node.wait_for_leader(Duration::from_secs(5)).await);
        for i in 0..20 {
            let n = node
                .write(&KvCommand::Set(format!("k{i}"), format!("v{i}")))
                .await
                .expect("write");
            assert_eq!(n, i + 1);
        }
        node.shutdown().await;
    }
    let machine = KvMachine::default();
    let node = Node::start(&config(1, dir.path()), machine.clone(), transport)
        .await
        .expect("restart");
    node.initialize_single()
        .await
        .expect("init is a no-op on restart");
    assert!(node.wait_for_leader(Duration::from_secs(5)).await);
    // The next write sees every earlier one: the machine was rebuilt from snapshot + log.
    let n = node
        .write(&KvCommand::Set("last".into(), "x".into()))
        .await
        .expect("write after restart");
    assert_eq!(n, 21);
    assert_eq!(machine.get("k3").as_deref(), Some("v3"));
    assert!(node.status().snapshot_index > 0, "a snapshot was taken");
    node.shutdown().await;
}

/// A cluster of in-process nodes.
struct Cluster {
    transport: MemTransport,
    dirs: BTreeMap<u64, tempfile::TempDir>,
    nodes: BTreeMap<u64, (Node, KvMachine)>,
}

impl Cluster {
    async fn start(ids: &[u64]) -> Self {
        let mut cluster = Cluster {
            transport: MemTransport::default(),
            dirs: BTreeMap::new(),
            nodes: BTreeMap::new(),
        };
        for id in ids {
            cluster.dirs.insert(*id, tempfile::tempdir().unwrap());
            cluster.boot(*id).await;
        }
        let members = ids.iter().map(|id| (*id, format!("node-{id}"))).collect();
        cluster.nodes[&ids[0]]
            .0
            .initialize(&members)
            .await
            .expect("init");
        for (node, _) in cluster.nodes.values() {
            assert!(node.wait_for_leader(Duration::from_secs(10)).await);
        }
        cluster
    }

    async fn boot(&mut self, id: u64) {
        let machine = KvMachine::default();
        let node = Node::start(
            &config(id, self.dirs[&id].path()),
            machine.clone(),
            self.transport.clone(),
        )
        .await
        .expect("start");
        self.transport.connect(
            &format!("node-{id}"),
            Arc::new(node.clone()) as Arc<dyn Handler>,
        );
        self.nodes.insert(id, (node, machine));
    }

    async fn stop(&mut self, id: u64) {
        self.transport.disconnect(&format!("node-{id}"));
        let (node, _) = self.nodes.remove(&id).unwrap();
        node.shutdown().await;
    }

    fn leader(&self) -> u64 {
        self.nodes
            .values()
            .find_map(|(n, _)| n.status().leader)
            .expect("a leader")
    }

    fn follower(&self) -> u64 {
        let leader = self.leader();
        *self.nodes.keys().find(|id| **id != leader).unwrap()
    }

    async fn converged(&self, len: usize) {
        for (id, (node, machine)) in &self.nodes {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while machine.len() != len {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "node {id} has {} of {len}: {:?}",
                    machine.len(),
                    node.status()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_forward_writes_and_a_new_leader_takes_over() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    let follower = c.follower();
    for i in 0..10 {
        c.nodes[&follower]
            .0
            .write(&KvCommand::Set(format!("a{i}"), "x".into()))
            .await
            .expect("forwarded write");
    }
    c.converged(10).await;
    // A linearizable read on a follower sees everything committed before it.
    c.nodes[&follower]
        .0
        .read_barrier()
        .await
        .expect("read barrier");
    assert_eq!(c.nodes[&follower].1.len(), 10);

    let old_leader = c.leader();
    c.stop(old_leader).await;
    let survivor = *c.nodes.keys().next().unwrap();
    // Writes through a survivor wait out the election, then commit on the new majority.
    for i in 0..10 {
        c.nodes[&survivor]
            .0
            .write(&KvCommand::Set(format!("b{i}"), "y".into()))
            .await
            .expect("write after failover");
    }
    assert_ne!(c.leader(), old_leader);
    // The old leader comes back and catches up (the log was compacted meanwhile, so
    // possibly through a snapshot).
    c.boot(old_leader).await;
    c.converged(20).await;
    for (node, _) in c.nodes.values() {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_through_snapshots_and_leave() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    for i in 0..30 {
        c.nodes[&1]
            .0
            .write(&KvCommand::Set(format!("k{i}"), "v".into()))
            .await
            .expect("write");
    }
    // Node 4 starts empty; the leader's log was compacted, so it needs a snapshot.
    c.dirs.insert(4, tempfile::tempdir().unwrap());
    c.boot(4).await;
    let follower = c.follower();
    c.nodes[&follower]
        .0
        .change_membership(MembershipChange::Add {
            id: 4,
            addr: "node-4".into(),
        })
        .await
        .expect("add node 4");
    c.converged(30).await;
    assert!(c.nodes[&4].0.status().voters.contains(&4));
    assert!(
        c.nodes[&4].0.status().snapshot_index > 0,
        "caught up by snapshot"
    );
    c.nodes[&4]
        .0
        .change_membership(MembershipChange::Remove { id: 4 })
        .await
        .expect("remove node 4");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while c.nodes[&1].0.status().members.contains_key(&4) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "node 4 still a member"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.stop(4).await;
    c.nodes[&2]
        .0
        .write(&KvCommand::Set("after".into(), "v".into()))
        .await
        .expect("write without 4");
    for (node, _) in c.nodes.values() {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_cannot_commit() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    c.nodes[&1]
        .0
        .write(&KvCommand::Set("before".into(), "v".into()))
        .await
        .expect("write");
    let leader = c.leader();
    let others: Vec<u64> = c.nodes.keys().copied().filter(|id| *id != leader).collect();
    for id in &others {
        c.stop(*id).await;
    }
    let lonely = KvCommand::Set("lonely".into(), "v".into());
    let outcome =
        tokio::time::timeout(Duration::from_secs(3), c.nodes[&leader].0.write(&lonely)).await;
    // A leader without a quorum never acknowledges: the write times out or fails.
    assert!(
        !matches!(outcome, Ok(Ok(_))),
        "a lone node committed a write"
    );
    assert_eq!(
        c.nodes[&leader].1.get("lonely"),
        None,
        "and never applied it"
    );
    for (node, _) in c.nodes.values() {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_entries_and_each_gets_its_own_answer() {
    let mut c = Cluster::start(&[1, 2, 3]).await;
    let leader = c.leader();
    let follower = c.follower();
    let log_before = c.nodes[&leader].0.status().last_log_index;
    let writes: Vec<_> = (0..300)
        .map(|i| {
            let node = c.nodes[if i % 2 == 0 { &leader } else { &follower }]
                .0
                .clone();
            tokio::spawn(async move {
                node.write(&KvCommand::Set(format!("c{i}"), "v".into()))
                    .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for write in writes {
        answers.push(write.await.unwrap().expect("write"));
    }
    // Each write was answered with the machine's length right after it was applied:
    // 1..=300 once each, so no answer went to the wrong proposal or was lost.
    answers.sort_unstable();
    assert_eq!(answers, (1..=300).collect::<Vec<_>>());
    let entries = c.nodes[&leader].0.status().last_log_index - log_before;
    assert!(
        entries < 300,
        "300 writes took {entries} entries: none were batched"
    );
    c.converged(300).await;
    // A restarted follower rebuilds the same state from snapshot and batched entries.
    c.stop(follower).await;
    c.boot(follower).await;
    c.converged(300).await;
    for (node, _) in c.nodes.values() {
        node.shutdown().await;
    }
}

/// Three nodes lose two for good; the third is recovered offline into a cluster of one
/// that holds every write, takes new ones, and grows again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_node_holds_its_log_and_founds_a_new_cluster() {
    let mut cluster = Cluster::start(&[1, 2, 3]).await;
    let leader = cluster.leader();
    for i in 0..30 {
        cluster.nodes[&leader]
            .0
            .write(&KvCommand::Set(format!("k{i}"), format!("v{i}")))
            .await
            .expect("write");
    }
    cluster.converged(30).await;
    let survivor = cluster.follower();
    for id in [1, 2, 3] {
        cluster.stop(id).await;
    }
    let old = cluster.dirs[&survivor].path().to_path_buf();
    let fresh = tempfile::tempdir().unwrap();
    let report = crate::offline::recover(
        &old,
        Some(fresh.path()),
        survivor,
        None,
        KvMachine::default(),
    )
    .expect("recover");
    assert_eq!(report.peer_addr, format!("node-{survivor}"));
    assert_eq!(report.previous_members.len(), 3);
    assert!(report.last_applied.is_some());
    // Recovering again into the same directory is refused: it holds data now.
    let again = crate::offline::recover(
        &old,
        Some(fresh.path()),
        survivor,
        None,
        KvMachine::default(),
    );
    assert!(
        matches!(again, Err(crate::offline::OfflineError::NotEmpty(_))),
        "{again:?}"
    );

    let transport = MemTransport::default();
    let machine = KvMachine::default();
    let node = Node::start(
        &config(survivor, fresh.path()),
        machine.clone(),
        transport.clone(),
    )
    .await
    .expect("start recovered");
    transport.connect(
        &format!("node-{survivor}"),
        Arc::new(node.clone()) as Arc<dyn Handler>,
    );
    assert!(
        node.is_initialized().await.unwrap(),
        "never initialized again"
    );
    assert!(node.wait_for_leader(Duration::from_secs(10)).await);
    assert_eq!(machine.len(), 30);
    let n = node
        .write(&KvCommand::Set("after".into(), "x".into()))
        .await
        .expect("write after recovery");
    assert_eq!(n, 31);
    assert_eq!(node.status().voters.len(), 1);

    // A fresh node joins and catches up.
    let dir4 = tempfile::tempdir().unwrap();
    let machine4 = KvMachine::default();
    let node4 = Node::start(&config(4, dir4.path()), machine4.clone(), transport.clone())
        .await
        .expect("start 4");
    transport.connect("node-4", Arc::new(node4.clone()) as Arc<dyn Handler>);
    node.change_membership(MembershipChange::Add {
        id: 4,
        addr: "node-4".into(),
    })
    .await
    .expect("add 4");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while machine4.len() < 31 {
        assert!(std::time::Instant::now() < deadline, "node 4 caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(machine4.get("k7").as_deref(), Some("v7"));
    node4.shutdown().await;
    node.shutdown().await;
}

/// A state seeded into an empty directory starts as a cluster of one at its position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_directory_starts_a_cluster_of_one_with_the_state() {
    let source = KvMachine::default();
    source
        .entries
        .lock()
        .unwrap()
        .insert("seeded".into(), "yes".into());
    let at = crate::types::LogId::new(openraft::CommittedLeaderId::new(7, 0), 120);
    let dir = tempfile::tempdir().unwrap();
    crate::offline::seed(dir.path(), 2, "node-2", at, source.snapshot()).expect("seed");
    let refused = crate::offline::seed(dir.path(), 2, "node-2", at, source.snapshot());
    assert!(matches!(
        refused,
        Err(crate::offline::OfflineError::NotEmpty(_))
    ));
    let transport = MemTransport::default();
    let machine = KvMachine::default();
    let node = Node::start(&config(2, dir.path()), machine.clone(), transport.clone())
        .await
        .expect("start seeded");
    transport.connect("node-2", Arc::new(node.clone()) as Arc<dyn Handler>);
    assert!(node.wait_for_leader(Duration::from_secs(10)).await);
    assert_eq!(machine.get("seeded").as_deref(), Some("yes"));
    node.write(&KvCommand::Set("next".into(), "1".into()))
        .await
        .expect("write");
    let status = node.status();
    assert!(
        status.term > 7,
        "a later term than the seed's: {}",
        status.term
    );
    assert!(status.last_applied > 120);
    let export = node.export();
    assert_eq!(
        export.last_applied.map(|l| l.index),
        Some(status.last_applied)
    );
    node.shutdown().await;
}
