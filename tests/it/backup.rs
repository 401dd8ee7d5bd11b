//! Backup, restore and recovery as an operator runs them: `roster snapshot save`,
//! `inspect` and `restore` against real nodes and files, scheduled snapshots, the
//! committed version-1 fixture, and `roster recover` after a cluster lost two of three
//! nodes for good.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use roster_tests::{
    enc, eventually, free_port, json, roster_bin, workspace_root, Cluster, Node, NodeOptions,
    Value, ADMIN_PASSWORD, CLUSTER_SECRET,
};

/// Runs `roster ARGS` (no node implied) with `password` as `ROSTER_PASSWORD`.
fn roster(args: &[&str], password: Option<&str>) -> Output {
    let mut cmd = Command::new(roster_bin());
    cmd.args(args)
        .env_remove("ROSTER_PASSWORD")
        .env_remove("ROSTER_PASSWORD_FILE")
        .env_remove("ROSTER_DATA_DIR")
        .env_remove("ROSTER_NODE_ID")
        .env_remove("ROSTER_PEER");
    if let Some(p) = password {
        cmd.env("ROSTER_PASSWORD", p);
    }
    cmd.output().expect("run roster")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `roster ARGS` as the admin; stdout, panics on failure.
fn roster_ok(args: &[&str]) -> String {
    let out = roster(args, Some(ADMIN_PASSWORD));
    assert!(
        out.status.success(),
        "roster {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `roster ARGS`, which must fail; its stderr.
fn roster_fails(args: &[&str], password: Option<&str>) -> String {
    let out = roster(args, password);
    assert!(
        !out.status.success(),
        "roster {args:?} should fail: {}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// One item of every kind of persistent state, written through the node's APIs.
pub(crate) fn populate(node: &Node) {
    node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=prod&namespaceName=Prod&namespaceDesc=backed-up",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/service?serviceName=orders&namespaceId=prod&protectThreshold=0.3&metadata=owner%3Dteam",
    )
    .expect(200);
    for (ns, port) in [("prod", 8080), ("public", 9090)] {
        node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=orders&namespaceId={ns}&ip=127.20.0.1&port={port}&ephemeral=false&weight=3"),
        )
        .expect(200);
    }
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        "username=carol&password=carol-pass-1",
    )
    .expect(200);
    node.call_form(
        "POST",
        "/nacos/v1/auth/roles",
        "role=prod-reader&username=carol",
    )
    .expect(200);
    node.call_form(
        "POST",
        "/nacos/v1/auth/permissions",
        &format!("role=prod-reader&resource={}&action=r", enc("prod:*:*")),
    )
    .expect(200);
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        "dataId=app.yaml&group=DEFAULT_GROUP&tenant=prod&content=level%3A+debug",
    )
    .expect(200);
    roster_ok(&[
        "sync",
        "add",
        "--name",
        "from-etcd",
        "--from",
        "etcd://127.0.0.1:1",
        "--dry-run",
        "--http",
        &node.addr(),
    ]);
}

/// Reads every item [`populate`] wrote back through the user-facing APIs.
pub(crate) fn check_populated(node: &Node) {
    let nss = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    let prod = nss["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["namespace"] == "prod")
        .cloned()
        .unwrap_or_else(|| panic!("namespace prod: {nss}"));
    assert_eq!(prod["namespaceShowName"], "Prod");
    assert_eq!(prod["namespaceDesc"], "backed-up");
    let svc = node
        .call(
            "GET",
            "/nacos/v1/ns/service?serviceName=orders&namespaceId=prod",
        )
        .expect(200)
        .json();
    assert_eq!(svc["protectThreshold"], 0.3, "{svc}");
    assert_eq!(svc["metadata"], json!({"owner": "team"}), "{svc}");
    for (ns, port) in [("prod", 8080), ("public", 9090)] {
        let list = node
            .call(
                "GET",
                &format!("/nacos/v1/ns/instance/list?serviceName=orders&namespaceId={ns}"),
            )
            .expect(200)
            .json();
        let hosts = list["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "{ns}: {list}");
        assert_eq!(hosts[0]["port"], port);
        assert_eq!(hosts[0]["weight"], 3.0);
        assert_eq!(hosts[0]["ephemeral"], false);
    }
    // carol logs in with her password and reads what her role grants, and only that.
    let login = node
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=carol&password=carol-pass-1",
            &[],
            None,
        )
        .expect(200)
        .json();
    let token = login["accessToken"].as_str().unwrap().to_string();
    node.raw(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName=orders&namespaceId=prod&accessToken={token}"
        ),
        &[],
        None,
    )
    .expect(200);
    node.raw(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName=orders&namespaceId=public&accessToken={token}"
        ),
        &[],
        None,
    )
    .expect(403);
    let config = node
        .call(
            "GET",
            "/nacos/v1/cs/configs?dataId=app.yaml&group=DEFAULT_GROUP&tenant=prod",
        )
        .expect(200);
    assert_eq!(config.body, "level: debug");
    let task = node
        .call("GET", "/api/v1/sync/tasks/from-etcd")
        .expect(200)
        .json();
    assert_eq!(task["source"], "etcd://127.0.0.1:1", "{task}");
}

/// `roster snapshot inspect FILE --output json`.
fn inspect(file: &Path) -> Value {
    let out = roster_ok(&["snapshot", "inspect", path_str(file), "--output", "json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `roster snapshot restore` into `node`'s (stopped) data dir as node `id`, on its
/// own peer port.
fn restore_into(node: &Node, file: &Path, id: u64) -> String {
    roster_ok(&[
        "snapshot",
        "restore",
        path_str(file),
        "--data-dir",
        path_str(&node.data_dir()),
        "--node-id",
        &id.to_string(),
        "--peer",
        &format!("127.0.0.1:{}", node.peer_port),
    ])
}

#[test]
fn a_saved_snapshot_restores_every_item_into_a_new_cluster() {
    let mut node = Node::start();
    populate(&node);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.rsnap");
    let http = node.addr();
    let saved = roster_ok(&["snapshot", "save", path_str(&file), "--http", &http]);
    assert!(saved.contains("saved"), "{saved}");
    assert!(!dir.path().join("backup.rsnap.tmp").exists());
    // A download hands out password hashes and signing keys: the audit trail names who.
    roster_tests::eventually(std::time::Duration::from_secs(10), || {
        let trail = node.call("GET", "/api/v1/audit").expect(200).json();
        let taken = trail["entries"].as_array().into_iter().flatten().any(|e| {
            e["action"] == "GET /api/v1/snapshot" && e["user"] == "nacos" && e["status"] == 200
        });
        taken.then_some(()).ok_or(format!("{trail}"))
    });

    let summary = inspect(&file);
    let counts = &summary["meta"]["counts"];
    assert_eq!(counts["namespaces"], 1, "{summary}");
    assert_eq!(counts["persistentInstances"], 2, "{summary}");
    assert_eq!(counts["users"], 2, "{summary}");
    assert_eq!(counts["roleBindings"], 1, "{summary}");
    assert_eq!(counts["grants"], 1, "{summary}");
    assert_eq!(counts["syncTasks"], 1, "{summary}");
    assert_eq!(counts["configs"], 1, "{summary}");
    assert!(counts["services"].as_u64().unwrap() >= 1, "{summary}");
    assert_eq!(summary["formatVersion"], 1);
    assert_eq!(summary["meta"]["nodeId"], 1);
    assert!(summary["meta"]["lastAppliedIndex"].as_u64().unwrap() > 5);
    let text_summary = roster_ok(&["snapshot", "inspect", path_str(&file)]);
    assert!(
        text_summary.contains("persistent instances: 2"),
        "{text_summary}"
    );

    // An existing file is kept unless --force.
    let err = roster_fails(
        &["snapshot", "save", path_str(&file), "--http", &http],
        Some(ADMIN_PASSWORD),
    );
    assert!(err.contains("--force"), "{err}");
    roster_ok(&[
        "snapshot",
        "save",
        path_str(&file),
        "--http",
        &http,
        "--force",
    ]);

    // Only admins take snapshots.
    let err = roster_fails(
        &[
            "snapshot",
            "save",
            path_str(&dir.path().join("carol.rsnap")),
            "--http",
            &http,
            "--username",
            "carol",
        ],
        Some("carol-pass-1"),
    );
    assert!(err.contains("403"), "{err}");
    assert!(!dir.path().join("carol.rsnap").exists());
    node.raw("GET", "/api/v1/snapshot", &[], None).expect(401);

    // Cut short or damaged: refused by inspect and restore, saying which.
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.rsnap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = roster_fails(&["snapshot", "inspect", path_str(&cut)], None);
    assert!(err.contains("truncated"), "{err}");
    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let bad = dir.path().join("bad.rsnap");
    std::fs::write(&bad, &damaged).unwrap();
    let err = roster_fails(&["snapshot", "inspect", path_str(&bad)], None);
    assert!(err.contains("checksum"), "{err}");
    let target = dir.path().join("never");
    let err = roster_fails(
        &[
            "snapshot",
            "restore",
            path_str(&bad),
            "--data-dir",
            path_str(&target),
        ],
        None,
    );
    assert!(err.contains("checksum"), "{err}");
    assert!(!target.exists(), "a refused restore creates nothing");

    // Kill, wipe, restore, start: everything is back, and the cluster takes writes.
    node.kill();
    std::fs::remove_dir_all(node.data_dir()).unwrap();
    let restored = restore_into(&node, &file, 1);
    assert!(restored.contains("cluster of one"), "{restored}");
    // A data dir that is not empty is refused, and left as it was.
    let err = roster_fails(
        &[
            "snapshot",
            "restore",
            path_str(&file),
            "--data-dir",
            path_str(&node.data_dir()),
        ],
        None,
    );
    assert!(err.contains("not empty"), "{err}");
    node.start_again();
    node.wait_ready();
    check_populated(&node);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=orders&namespaceId=prod&ip=127.20.0.2&port=8081&ephemeral=false",
    )
    .expect(200);
    let list = node
        .call(
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=orders&namespaceId=prod",
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"].as_array().unwrap().len(), 2, "{list}");
    let cluster = node.call("GET", "/api/v1/cluster").expect(200).json();
    assert_eq!(cluster["members"].as_array().unwrap().len(), 1, "{cluster}");
    assert!(
        cluster["appliedIndex"].as_u64().unwrap()
            > summary["meta"]["lastAppliedIndex"].as_u64().unwrap(),
        "the log goes on from the snapshot's index: {cluster}"
    );
}

#[test]
fn scheduled_snapshots_appear_and_only_the_newest_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    // Someone else's file in the same directory is never pruned.
    let foreign = backups.join("roster-20200101T000000.000Z-node9.rsnap");
    std::fs::write(&foreign, b"not ours").unwrap();
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--snapshot-every".into(),
            "1s".into(),
            "--snapshot-keep".into(),
            "2".into(),
            "--snapshot-dir".into(),
            path_str(&backups).into(),
        ],
        ..Default::default()
    });
    node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=sched&namespaceName=Sched",
    )
    .expect(200);
    let own = || -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&backups)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with("-node1.rsnap"))
            .collect();
        files.sort();
        files
    };
    // Written each second, pruned to two: after four more, the first two are gone.
    let first = eventually(Duration::from_secs(15), || match own().first() {
        Some(f) => Ok(f.clone()),
        None => Err("no scheduled snapshot yet".into()),
    });
    eventually(Duration::from_secs(20), || {
        let files = own();
        if files.len() == 2 && !files.contains(&first) {
            Ok(())
        } else {
            Err(format!("{files:?}"))
        }
    });
    for _ in 0..3 {
        assert!(own().len() <= 2, "{:?}", own());
        std::thread::sleep(Duration::from_millis(700));
    }
    assert!(foreign.exists(), "another node's file is left alone");
    let newest = own().pop().unwrap();
    let summary = inspect(&newest);
    assert_eq!(summary["meta"]["counts"]["namespaces"], 1, "{summary}");
    assert!(node.log().contains("scheduled snapshot written"));
}

/// The committed fixture, written by the first version of the format: a snapshot taken
/// from [`populate`]d node (admin password [`ADMIN_PASSWORD`]). Every later roster must
/// restore it.
fn fixture() -> PathBuf {
    workspace_root().join("tests/fixtures/snapshot-v1.rsnap")
}

/// Writes the fixture of the current format version, once: run it by name
/// (`--ignored`) when a new version of the format comes, and commit the file beside
/// the older ones. It refuses to overwrite one: they are what old backups look like.
#[test]
#[ignore]
fn write_the_fixture_of_the_current_version() {
    let file = fixture();
    assert!(
        !file.exists(),
        "{} exists: never rewrite a fixture",
        file.display()
    );
    let node = Node::start();
    populate(&node);
    roster_ok(&["snapshot", "save", path_str(&file), "--http", &node.addr()]);
}

#[test]
fn the_version_1_fixture_restores_with_every_item() {
    let summary = inspect(&fixture());
    assert_eq!(summary["formatVersion"], 1, "{summary}");
    let mut node = Node::start();
    node.kill();
    std::fs::remove_dir_all(node.data_dir()).unwrap();
    // Restored as another node id than the one that took it.
    restore_into(&node, &fixture(), 1);
    node.start_again();
    node.wait_ready();
    check_populated(&node);
}

/// The last log index `node` applied.
fn applied(node: &Node) -> u64 {
    node.call("GET", "/api/v1/cluster").expect(200).json()["appliedIndex"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_node_recovered_after_losing_two_of_three_serves_everything_and_grows_again() {
    let mut cluster = Cluster::start(3, &[]);
    // The first of the two lost goes now: a new leader takes over in a later term, so
    // the log's entries are of a later term than its first, and the recovered node must
    // elect itself above them.
    let first = cluster.leader();
    cluster.nodes[first].kill();
    let leader = cluster.leader();
    populate(&cluster.nodes[leader]);
    let survivor = cluster.follower();
    let target = applied(&cluster.nodes[leader]);
    // The survivor holds every acknowledged write: wait until it applied them.
    eventually(Duration::from_secs(10), || {
        let at = applied(&cluster.nodes[survivor]);
        if at >= target {
            Ok(())
        } else {
            Err(format!("survivor at {at}, leader at {target}"))
        }
    });
    check_populated(&cluster.nodes[survivor]);
    cluster.nodes[leader].kill();
    let status = cluster.nodes[survivor].terminate();
    assert!(status.success(), "{status:?}");
    let id = (survivor + 1) as u64;
    let data_dir = cluster.nodes[survivor].data_dir();
    let dry = roster_ok(&[
        "recover",
        "--data-dir",
        path_str(&data_dir),
        "--node-id",
        &id.to_string(),
        "--dry-run",
    ]);
    assert!(dry.contains("dry run"), "{dry}");
    // It moves to new ports on the way (its old peer address is given up with the old
    // cluster).
    let (http, peer) = (free_port(), free_port());
    let out = roster_ok(&[
        "recover",
        "--data-dir",
        path_str(&data_dir),
        "--node-id",
        &id.to_string(),
        "--peer",
        &format!("127.0.0.1:{peer}"),
        "--output",
        "json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        report["lastApplied"]["index"].as_u64().unwrap() >= target,
        "{report}"
    );
    assert!(
        report["lastApplied"]["term"].as_u64().unwrap() >= 2,
        "{report}"
    );
    assert_eq!(
        report["previousMembers"].as_object().unwrap().len(),
        3,
        "{report}"
    );
    let backup = PathBuf::from(report["backup"].as_str().unwrap());
    assert!(
        backup.join("raft/log.redb").exists(),
        "old data kept: {report}"
    );
    // Recovering a recovered node again is harmless: it is a cluster of one already.

    assert_eq!(report["peer"], format!("127.0.0.1:{peer}"), "{report}");
    // The survivor alone, without --members.
    let mut alone = Node::start_with(NodeOptions {
        args: vec!["--node-id".into(), id.to_string()],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        ports: Some((http, peer)),
        wait_ready: false,
        ..Default::default()
    });
    // The harness starts a node at once: stop it, and give it the recovered data dir.
    alone.kill();
    let _ = std::fs::remove_dir_all(alone.data_dir());
    std::fs::rename(&data_dir, alone.data_dir()).unwrap();
    alone.start_again();
    alone.wait_ready();
    check_populated(&alone);
    // It leads in a term above every entry it holds: its new entries sort after them.
    let view = alone.call("GET", "/api/v1/cluster").expect(200).json();
    assert!(
        view["term"].as_u64().unwrap() > report["lastApplied"]["term"].as_u64().unwrap(),
        "{view} {report}"
    );
    alone
        .call(
            "POST",
            "/nacos/v1/console/namespaces?customNamespaceId=after&namespaceName=After",
        )
        .expect(200);
    alone
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=late&ip=127.20.1.1&port=7000&ephemeral=false",
        )
        .expect(200);

    // Grow it back: a fresh node joins with `roster cluster add` and catches up.
    let mut fresh = Node::start_with(NodeOptions {
        args: vec!["--node-id".into(), "4".into(), "--join".into()],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        wait_ready: false,
        ..Default::default()
    });
    roster_ok(&[
        "cluster",
        "add",
        "4",
        &format!("127.0.0.1:{}", fresh.peer_port),
        "--http",
        &alone.addr(),
    ]);
    fresh.wait_ready();
    check_populated(&fresh);
    let late = fresh
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=late")
        .expect(200)
        .json();
    assert_eq!(late["hosts"].as_array().unwrap().len(), 1, "{late}");
    let view = alone.call("GET", "/api/v1/cluster").expect(200).json();
    let voters = view["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["voter"] == true)
        .count();
    assert_eq!(voters, 2, "{view}");
}
