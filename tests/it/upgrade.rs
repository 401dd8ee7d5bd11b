//! Upgrades (issue 21, item 3): a data dir written by an earlier build starts a node of
//! this one, with every item in it. The fixture under `tests/fixtures/datadir-v1/` was
//! written by the build of its commit (a node with `--raft-snapshot-logs 5`, so that it
//! holds a Raft snapshot and log entries after it); a later build must read it as it is:
//! the redb log, the snapshot file, and the commands and state they encode (both
//! versioned enums, `Command::V1` and `SnapshotData::V1`). A new format gets a new
//! fixture beside the old ones, never a rewrite.

use std::path::{Path, PathBuf};

use roster_tests::{workspace_root, Node, NodeOptions};

use crate::backup::{check_populated, populate};

/// The data dir fixture of format 1.
fn fixture() -> PathBuf {
    workspace_root().join("tests/fixtures/datadir-v1")
}

/// Copies the tree at `from` into `to` (created).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Writes the data dir fixture of the current build, once: run it by name (`--ignored`)
/// when a persistent format changes, under a new name, and commit it beside the older
/// ones. It refuses to overwrite one.
#[test]
#[ignore]
fn write_the_data_dir_fixture_of_the_current_build() {
    let dir = fixture();
    assert!(
        !dir.exists(),
        "{} exists: never rewrite a fixture",
        dir.display()
    );
    let mut node = Node::start_with(NodeOptions {
        args: vec!["--raft-snapshot-logs".into(), "5".into()],
        ..NodeOptions::default()
    });
    populate(&node);
    assert!(node.terminate().success());
    // The Raft state only: the audit trail and the generated password are not formats a
    // later build must read.
    copy_tree(&node.data_dir().join("raft"), &dir.join("raft"));
}

#[test]
fn a_node_starts_from_a_data_dir_an_earlier_build_wrote() {
    let mut node = Node::start();
    node.kill();
    std::fs::remove_dir_all(node.data_dir()).unwrap();
    copy_tree(&fixture().join("raft"), &node.data_dir().join("raft"));
    node.start_again();
    node.wait_ready();
    check_populated(&node);
    // It carries on: a write, a kill -9, and everything is still there.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=after-upgrade&ip=127.20.0.9&port=80&ephemeral=false",
    )
    .expect(200);
    node.restart();
    check_populated(&node);
    let list = node
        .call(
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=after-upgrade",
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"].as_array().map(Vec::len), Some(1), "{list}");
}
