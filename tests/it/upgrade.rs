//! Upgrades (issue 21, item 3): a data dir written by an earlier build starts a node of
//! this one, with every item in it. The fixture under `tests/fixtures/datadir-v1/` was
//! written by the build of its commit (a node with `--raft-snapshot-logs 5`, so that it
//! holds a Raft snapshot and log entries after it); a later build must read it as it is:
//! the redb log, the snapshot file, and the commands and state they encode (both
//! versioned enums, `Command::V1` and `SnapshotData::V1`). A new format gets a new
//! fixture beside the old ones, never a rewrite.
//!
//! And a cluster of mixed versions works: the node that founds it runs the build
//! `tests/previous-build` names (`scripts/build-previous` builds it), beside two nodes of
//! this one, through writes, reads and the loss of each kind of leader.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use roster_tests::{eventually, workspace_root, Cluster, Node, NodeOptions};

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

/// The earlier build's binary: `ROSTER_PREVIOUS_BIN`, else where `scripts/build-previous`
/// puts the commit `tests/previous-build` names.
fn previous_bin() -> PathBuf {
    let bin = std::env::var_os("ROSTER_PREVIOUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let named = std::fs::read_to_string(workspace_root().join("tests/previous-build"))
                .expect("tests/previous-build");
            let commit = named
                .lines()
                .find(|l| !l.starts_with('#') && !l.trim().is_empty())
                .expect("a commit in tests/previous-build")
                .trim()
                .to_string();
            workspace_root().join(format!("target/previous/roster-{commit}"))
        });
    assert!(
        bin.is_file(),
        "{} is missing: scripts/build-previous builds it (scripts/test runs it)",
        bin.display()
    );
    bin
}

/// Instances of `service` node `node` lists (all of them, healthy or not).
fn listed(node: &Node, service: &str) -> usize {
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false"),
        )
        .expect(200)
        .json();
    list["hosts"].as_array().map_or(0, Vec::len)
}

/// Waits until every running node lists `want` instances of `service`.
fn all_list(c: &Cluster, service: &str, want: usize) {
    for (i, node) in c.nodes.iter().enumerate() {
        if node.is_running() {
            eventually(Duration::from_secs(20), || match listed(node, service) {
                n if n == want => Ok(()),
                n => Err(format!("node {} lists {n} of {want} in {service}", i + 1)),
            });
        }
    }
}

/// Writes through every running node, `round` telling the instances apart: a
/// persistent instance, an ephemeral one (in the round's own service: with no beats they
/// go after 30 s, and an address client's owner is by hash, whichever node took it) and
/// a configuration item.
fn write_through_each(c: &Cluster, round: usize) {
    for (i, node) in c.nodes.iter().enumerate() {
        if !node.is_running() {
            continue;
        }
        let ip = format!("127.24.{round}.{}", i + 1);
        node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=mixed-per&ip={ip}&port=80&ephemeral=false"),
        )
        .expect(200);
        node.call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=mixed-eph-{round}&ip={ip}&port=80&ephemeral=true"
            ),
        )
        .expect(200);
        node.call_form(
            "POST",
            "/nacos/v1/cs/configs",
            &format!(
                "dataId=mixed-{round}-{i}&group=DEFAULT_GROUP&content=from+node+{}",
                i + 1
            ),
        )
        .expect(200);
    }
}

/// Reads every configuration item [`write_through_each`] wrote so far on every running
/// node.
fn configs_everywhere(c: &Cluster, written: &[(usize, usize)]) {
    for node in c.nodes.iter().filter(|n| n.is_running()) {
        for (round, i) in written {
            eventually(Duration::from_secs(10), || {
                let r = node.call(
                    "GET",
                    &format!("/nacos/v1/cs/configs?dataId=mixed-{round}-{i}&group=DEFAULT_GROUP"),
                );
                (r.status == 200 && r.body == format!("from node {}", i + 1))
                    .then_some(())
                    .ok_or(format!("{} {}", r.status, r.body))
            });
        }
    }
}

#[test]
fn a_cluster_with_a_node_of_the_previous_build_writes_reads_and_fails_over() {
    let previous = previous_bin();
    let version = Command::new(&previous).arg("--version").output().unwrap();
    assert!(version.status.success());
    // Node 1, which founds the cluster and leads it first, runs the earlier build.
    let mut c = Cluster::start_mixed(3, |i| (i == 0).then(|| previous.clone()));
    let mut written = Vec::new();
    let mut persistent = 0;

    for round in 0..3 {
        write_through_each(&c, round);
        let running: Vec<usize> = (0..3).filter(|i| c.nodes[*i].is_running()).collect();
        written.extend(running.iter().map(|i| (round, *i)));
        persistent += running.len();
        all_list(&c, "mixed-per", persistent);
        all_list(&c, &format!("mixed-eph-{round}"), running.len());
        configs_everywhere(&c, &written);
        match round {
            // The leader goes (most often the earlier build, which founded the cluster):
            // the others carry on.
            0 => {
                let leader = c.leader();
                eprintln!("round 0: node {} leads and goes", leader + 1);
                c.nodes[leader].kill();
                let _ = c.leader();
            }
            // It comes back and catches up; then the leader of the moment goes, and the
            // two left carry on.
            1 => {
                for node in c.nodes.iter_mut().filter(|n| !n.is_running()) {
                    node.start_again();
                    node.wait_ready();
                }
                all_list(&c, "mixed-per", persistent);
                configs_everywhere(&c, &written);
                let leader = c.leader();
                eprintln!("round 1: node {} leads and goes", leader + 1);
                c.nodes[leader].kill();
                let _ = c.leader();
            }
            _ => {}
        }
    }
    eprintln!(
        "previous build {}: {persistent} persistent instances, {} configuration items on every node",
        String::from_utf8_lossy(&version.stdout).trim(),
        written.len()
    );
}
