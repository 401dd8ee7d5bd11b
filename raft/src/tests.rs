//! Storage tests: openraft's conformance suite on the log store and state-machine
//! adapter, and a restart test that reopens the same directory.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::log_store::LogStore;
use crate::machine::{MachineStore, StateMachine};
use crate::network::NoPeers;
use crate::node::{NodeConfig, RaftNode};
use crate::types::{StorageError, TypeConfig};

/// A key-value machine: enough state to tell whether commands were kept.
#[derive(Default)]
struct KvMachine {
    entries: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
enum KvCommand {
    Set(String, String),
}

impl StateMachine for KvMachine {
    type Command = KvCommand;
    type Response = usize;

    fn apply(&mut self, command: KvCommand) -> usize {
        match command {
            KvCommand::Set(k, v) => {
                self.entries.insert(k, v);
            }
        }
        self.entries.len()
    }

    fn snapshot(&self) -> Vec<u8> {
        rmp_serde::to_vec(&self.entries).expect("encode")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.entries = rmp_serde::from_slice(snapshot).map_err(|e| e.to_string())?;
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

fn config(dir: &std::path::Path) -> NodeConfig {
    let mut config = NodeConfig::new(1, "127.0.0.1:1", dir);
    // Small values so the test also exercises snapshot + log replay on restart.
    config.snapshot_every = 7;
    config.heartbeat_ms = 50;
    config.election_timeout_ms = (150, 300);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let node = RaftNode::start(&config(dir.path()), KvMachine::default(), NoPeers)
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
    let node = RaftNode::start(&config(dir.path()), KvMachine::default(), NoPeers)
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
    assert!(node.status().snapshot_index > 0, "a snapshot was taken");
    node.shutdown().await;
}
