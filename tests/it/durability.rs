//! Acknowledged persistent writes survive `kill -9` and restart.

use std::time::Duration;

use roster_tests::{eventually, json, Node, NodeOptions};

#[test]
fn acknowledged_persistent_writes_survive_kill_9() {
    let mut node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=prod&namespaceName=Prod",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/auth/users?username=carol&password=carol-pass-1",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/service?serviceName=orders&protectThreshold=0.3&metadata=owner%3Dteam",
    )
    .expect(200);
    let mut acked = Vec::new();
    for i in 0..40u16 {
        let ns = if i % 2 == 0 { "public" } else { "prod" };
        let path = format!("/nacos/v1/ns/instance?serviceName=orders&namespaceId={ns}&ip=127.10.0.{}&port={}&ephemeral=false&weight=2", i % 250, 1000 + i);
        node.call("POST", &path).expect(200);
        acked.push((ns, 1000 + i));
    }
    // An ephemeral instance, to see that it does not come back from disk.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=eph&ip=127.10.1.1&port=80",
    )
    .expect(200);
    node.restart();

    for ns in ["public", "prod"] {
        let v = node
            .call(
                "GET",
                &format!("/nacos/v1/ns/instance/list?serviceName=orders&namespaceId={ns}"),
            )
            .expect(200)
            .json();
        let mut ports: Vec<u64> = v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["port"].as_u64().unwrap())
            .collect();
        ports.sort();
        let mut want: Vec<u64> = acked
            .iter()
            .filter(|(n, _)| *n == ns)
            .map(|(_, p)| u64::from(*p))
            .collect();
        want.sort();
        assert_eq!(ports, want, "namespace {ns}");
        assert!(v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["ephemeral"] == false && h["weight"] == 2.0));
    }
    let svc = node
        .call("GET", "/nacos/v1/ns/service?serviceName=orders")
        .expect(200)
        .json();
    assert_eq!(svc["protectThreshold"], 0.3);
    assert_eq!(svc["metadata"], json!({"owner":"team"}));
    let nss = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    assert!(nss["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["namespace"] == "prod"));
    node.raw(
        "POST",
        "/nacos/v1/auth/login?username=carol&password=carol-pass-1",
        &[],
        None,
    )
    .expect(200);
    let eph = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=eph")
        .expect(200)
        .json();
    assert_eq!(
        eph["hosts"].as_array().unwrap().len(),
        0,
        "ephemeral instances live in memory only"
    );

    // Deletions are durable too.
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=orders&ip=127.10.0.0&port=1000",
    )
    .expect(200);
    node.restart();
    let v = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=orders")
        .expect(200)
        .json();
    assert!(!v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["port"] == 1000));
    assert_eq!(v["hosts"].as_array().unwrap().len(), 19);
}

#[test]
fn snapshots_compact_the_log_and_restore() {
    // Enough writes to pass a small snapshot threshold, then kill -9.
    let mut node = Node::start_with(NodeOptions {
        args: vec!["--raft-snapshot-logs".into(), "100".into()],
        ..Default::default()
    });
    let token = node.token();
    let auth = format!("Bearer {token}");
    for i in 0..260u32 {
        let path = format!(
            "/nacos/v1/ns/instance?serviceName=bulk&ip=127.11.{}.{}&port=80&ephemeral=false",
            i / 250,
            i % 250
        );
        node.raw("POST", &path, &[("authorization", &auth)], None)
            .expect(200);
    }
    // Snapshots are built in the background once the threshold is passed.
    eventually(Duration::from_secs(10), || {
        match node.metric("roster_raft_snapshot_index") {
            Some(i) if i >= 100.0 => Ok(()),
            other => Err(format!("snapshot index {other:?}")),
        }
    });
    node.restart();
    let v = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=bulk")
        .expect(200)
        .json();
    assert_eq!(v["hosts"].as_array().unwrap().len(), 260);
    // The log was compacted: a restart replays at most the tail after the snapshot.
    assert!(node.metric("roster_raft_snapshot_index").unwrap() >= 100.0);
}
