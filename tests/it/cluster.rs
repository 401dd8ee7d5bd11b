//! Three-node clusters of real processes: persistent writes through any node, leader and
//! follower crashes mid-stream, snapshot catch-up, minorities that cannot commit,
//! membership changes and the peer channel's authentication; [`peer_channel`]: replays,
//! unauthenticated bodies, connection limits, what the wire shows, mutual TLS.

mod peer_channel;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{
    enc, eventually, free_port, roster_bin, Cluster, Node, NodeOptions, ADMIN_PASSWORD,
    CLUSTER_SECRET,
};

fn persistent_ports(node: &Node, service: &str) -> BTreeSet<u64> {
    let v = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}&consistent=true"),
        )
        .expect(200)
        .json();
    let hosts = v["hosts"].as_array().unwrap();
    let ports: BTreeSet<u64> = hosts.iter().map(|h| h["port"].as_u64().unwrap()).collect();
    assert_eq!(ports.len(), hosts.len(), "no instance twice");
    ports
}

#[test]
fn persistent_writes_through_any_node_are_read_on_all() {
    let c = Cluster::start(3, &[]);
    for (i, node) in c.nodes.iter().enumerate() {
        node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=everywhere&ip=127.20.0.{i}&port={}&ephemeral=false", 100 + i),
        )
        .expect(200);
    }
    node_settings_everywhere(&c);
    for node in &c.nodes {
        assert_eq!(
            persistent_ports(node, "everywhere"),
            BTreeSet::from([100, 101, 102])
        );
    }
    let view = c.view(0);
    assert_eq!(view["members"].as_array().unwrap().len(), 3);
    let leader = c.leader();
    let lv = c.view(leader);
    assert_eq!(lv["state"], "leader");
    for m in lv["members"].as_array().unwrap() {
        assert_eq!(m["live"], true, "{m}");
        assert_eq!(m["voter"], true);
        assert!(
            m["http"].as_str().unwrap().starts_with("127.0.0.1:"),
            "nodes learned each other's --http: {m}"
        );
        assert!(m["lag"].as_u64().is_some());
    }
    // The same figures in /metrics.
    let leader_node = &c.nodes[leader];
    assert_eq!(leader_node.metric("roster_cluster_members "), Some(3.0));
    assert_eq!(
        leader_node.metric("roster_cluster_members_live "),
        Some(3.0)
    );
    assert_eq!(leader_node.metric("roster_ready "), Some(1.0));
    assert_eq!(leader_node.metric("roster_raft_is_leader "), Some(1.0));
    assert!(leader_node.metric("roster_raft_commit_index ").unwrap() >= 3.0);
    let follower_id = (0..3).find(|i| *i != leader).unwrap() + 1;
    assert!(leader_node
        .metric(&format!(
            "roster_raft_replication_lag{{node=\"{follower_id}\"}}"
        ))
        .is_some());
    assert!(leader_node
        .metric("roster_distro_clients_owned_by{node=")
        .is_some());
    // Nacos' node list.
    let nodes = c.nodes[1]
        .call("GET", "/nacos/v1/core/cluster/nodes")
        .expect(200)
        .json();
    assert_eq!(nodes["data"].as_array().unwrap().len(), 3);
    assert!(nodes["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["state"] == "UP"));
    // The CLI, against a follower, in both formats.
    let follower = c.follower();
    let out = Command::new(roster_bin())
        .args([
            "cluster",
            "status",
            "--http",
            &c.nodes[follower].addr(),
            "--password",
            ADMIN_PASSWORD,
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["members"].as_array().unwrap().len(), 3);
    assert!(
        v["commitIndex"].as_u64().is_some(),
        "figures from the leader: {v}"
    );
    let out = Command::new(roster_bin())
        .args([
            "cluster",
            "status",
            "--http",
            &c.nodes[follower].addr(),
            "--password",
            ADMIN_PASSWORD,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("leader") && text.contains("LAG"), "{text}");
    let out = Command::new(roster_bin())
        .args([
            "cluster",
            "status",
            "--http",
            &c.nodes[0].addr(),
            "--password",
            "wrong",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("login failed"));
}

/// One write sent to a node that is paused (SIGSTOP) while the write it depends on is
/// acknowledged through another node: the paused node takes it when it resumes, before
/// it has applied what it missed. Returns the status of the answer.
fn through_a_lagging_node(c: &Cluster, lagging: usize, before: &str, write: (&str, &str)) -> u16 {
    let writer = (lagging + 1) % 3;
    c.nodes[lagging].pause();
    c.nodes[writer].call("POST", before).expect(200);
    let (method, query) = write;
    let answer = std::thread::scope(|s| {
        let queued = s.spawn(|| c.nodes[lagging].call(method, query).status);
        // The request waits in the paused node's accept queue.
        std::thread::sleep(Duration::from_millis(300));
        c.nodes[lagging].resume();
        queued.join().unwrap()
    });
    answer
}

#[test]
fn a_write_to_a_node_that_has_not_applied_the_instance_yet_is_not_lost() {
    let c = Cluster::start(3, &[]);
    let lagging = c.follower();
    let list = |node: &Node, service: &str| {
        node.call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}&consistent=true"),
        )
        .expect(200)
        .json()["hosts"]
            .as_array()
            .unwrap()
            .clone()
    };
    // A deregistration through a node that has not applied the registration yet: with
    // ephemeral=false, without the flag, and with ephemeral=true (the kind found
    // decides). Each used to answer ok and leave the instance registered everywhere.
    for (round, flag) in ["&ephemeral=false", "", "&ephemeral=true"]
        .iter()
        .enumerate()
    {
        let service = format!("lagging-dereg-{round}");
        let at = format!("serviceName={service}&ip=127.21.0.1&port=8080");
        let status = through_a_lagging_node(
            &c,
            lagging,
            &format!("/nacos/v1/ns/instance?{at}&ephemeral=false"),
            ("DELETE", &format!("/nacos/v1/ns/instance?{at}{flag}")),
        );
        assert_eq!(status, 200, "deregistration{flag}");
        for (i, node) in c.nodes.iter().enumerate() {
            let hosts = list(node, &service);
            assert!(
                hosts.is_empty(),
                "node {}, deregistration{flag}: {hosts:?}",
                i + 1
            );
        }
    }
    // An update through such a node finds the instance (it used to answer 404) and
    // changes it everywhere.
    let at = "serviceName=lagging-update&ip=127.21.0.2&port=8080";
    let status = through_a_lagging_node(
        &c,
        lagging,
        &format!("/nacos/v1/ns/instance?{at}&ephemeral=false"),
        ("PUT", &format!("/nacos/v1/ns/instance?{at}&weight=3")),
    );
    assert_eq!(status, 200, "update");
    for node in &c.nodes {
        let hosts = list(node, "lagging-update");
        assert_eq!(hosts.len(), 1);
        assert_eq!(hosts[0]["weight"], 3.0, "{hosts:?}");
    }
    // So do a service's settings (404 before), a cluster's health check and a new
    // user's password.
    let status = through_a_lagging_node(
        &c,
        lagging,
        "/nacos/v1/ns/service?serviceName=lagging-service",
        (
            "PUT",
            "/nacos/v1/ns/service?serviceName=lagging-service&protectThreshold=0.5",
        ),
    );
    assert_eq!(status, 200, "service update");
    let status = through_a_lagging_node(
        &c,
        lagging,
        "/nacos/v1/ns/service?serviceName=lagging-cluster",
        (
            "PUT",
            &format!(
                "/nacos/v1/ns/cluster?serviceName=lagging-cluster&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={}",
                enc(r#"{"type":"NONE"}"#)
            ),
        ),
    );
    assert_eq!(status, 200, "cluster settings");
    let status = through_a_lagging_node(
        &c,
        lagging,
        "/nacos/v1/auth/users?username=lagging-user&password=first-password-1",
        (
            "PUT",
            "/nacos/v1/auth/users?username=lagging-user&newPassword=second-password-2",
        ),
    );
    assert_eq!(status, 200, "password change");
    for node in &c.nodes {
        let svc = node
            .call(
                "GET",
                "/nacos/v1/ns/service?serviceName=lagging-service&consistent=true",
            )
            .expect(200)
            .json();
        assert_eq!(svc["protectThreshold"], 0.5, "{svc}");
    }
}

/// The whole cluster killed right after an acknowledged write, and started again: the
/// first consistent reads the followers answer show the write. (openraft takes a
/// leader's vote up again at start, so the old leader leads again at once, in the same
/// term, knowing the commit index only from its last saved hint — which can be behind
/// what it acknowledged. Its read index came from that hint, and consistent reads just
/// after the restart missed the last acknowledged registration or deregistration:
/// issue 36's robustness campaign, 3 times in 1,800 s. This test runs the same path
/// but did not hit the narrow window on the old build in 30 rounds; the campaign is
/// what catches it.)
#[test]
fn consistent_reads_right_after_a_whole_cluster_restart_see_every_acknowledged_write() {
    let mut c = Cluster::start(3, &[]);
    // Tokens outlive restarts: taken now, while every node answers.
    for node in &c.nodes {
        node.token();
    }
    for round in 0..10 {
        let leader = c.leader();
        let service = format!("restart-read-{round}");
        let at =
            |port: u16| format!("serviceName={service}&ip=127.22.0.1&port={port}&ephemeral=false");
        c.nodes[leader]
            .call("POST", &format!("/nacos/v1/ns/instance?{}", at(1)))
            .expect(200);
        c.nodes[leader]
            .call("POST", &format!("/nacos/v1/ns/instance?{}", at(2)))
            .expect(200);
        // The last write before the crash: a deregistration.
        c.nodes[leader]
            .call("DELETE", &format!("/nacos/v1/ns/instance?{}", at(1)))
            .expect(200);
        for node in &mut c.nodes {
            node.kill();
        }
        // The followers first (they know the old leader from their saved votes and
        // ask it for read indexes), the leader last: a follower's read reaches it as it
        // starts, before it has heard from anyone.
        for (i, node) in c.nodes.iter_mut().enumerate() {
            if i != leader {
                node.start_again();
            }
        }
        // The first answer of each follower, as soon as it answers at all.
        let (before, rest) = c.nodes.split_at_mut(leader);
        let (leader_node, after) = rest.split_first_mut().unwrap();
        let followers: Vec<(usize, &Node)> = before
            .iter()
            .enumerate()
            .chain(after.iter().enumerate().map(|(j, n)| (leader + 1 + j, n)))
            .collect();
        std::thread::scope(|s| {
            for (i, node) in followers {
                let service = &service;
                s.spawn(move || {
                    let path = format!(
                        "/nacos/v1/ns/instance/list?serviceName={service}&consistent=true&accessToken={}",
                        node.token()
                    );
                    let deadline = Instant::now() + Duration::from_secs(30);
                    let v = loop {
                        match node.try_request("GET", &path, &[], None) {
                            Ok(r) if r.status == 200 => break r.json(),
                            other => assert!(Instant::now() < deadline, "no answer: {other:?}"),
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    };
                    let ports: BTreeSet<u64> = v["hosts"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| h["port"].as_u64().unwrap())
                        .collect();
                    assert_eq!(
                        ports,
                        BTreeSet::from([2]),
                        "round {round}: node {}'s first consistent read after the restart",
                        i + 1
                    );
                });
            }
            std::thread::sleep(Duration::from_millis(300));
            leader_node.start_again();
        });
        for node in &mut c.nodes {
            node.wait_ready();
        }
    }
}

/// Service settings, namespaces and users written on one node are Raft data everywhere.
fn node_settings_everywhere(c: &Cluster) {
    c.nodes[2]
        .call(
            "POST",
            "/nacos/v1/ns/service?serviceName=settled&protectThreshold=0.7",
        )
        .expect(200);
    c.nodes[1]
        .call(
            "POST",
            "/nacos/v1/console/namespaces?customNamespaceId=shared&namespaceName=Shared",
        )
        .expect(200);
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/auth/users?username=dana&password=dana-pass-1",
        )
        .expect(200);
    for node in &c.nodes {
        let s = node
            .call(
                "GET",
                "/nacos/v1/ns/service?serviceName=settled&consistent=true",
            )
            .expect(200)
            .json();
        assert_eq!(s["protectThreshold"], 0.7);
        let ns = node
            .call(
                "GET",
                "/nacos/v1/console/namespaces?show=all&namespaceId=shared",
            )
            .expect(200)
            .json();
        assert_eq!(ns["namespaceShowName"], "Shared");
        node.raw(
            "POST",
            "/nacos/v1/auth/login?username=dana&password=dana-pass-1",
            &[],
            None,
        )
        .expect(200);
    }
}

/// Registers `count` persistent instances round-robin through the running nodes,
/// killing node `victim` after `kill_after` of them; returns the ports that got `ok`.
fn stream_with_crash(c: &mut Cluster, count: u16, kill_after: u16, victim: usize) -> BTreeSet<u64> {
    let mut acked = BTreeSet::new();
    let started = Instant::now();
    for i in 0..count {
        if i == kill_after {
            c.nodes[victim].kill();
        }
        let running: Vec<usize> = (0..c.nodes.len())
            .filter(|n| c.nodes[*n].is_running())
            .collect();
        let node = &c.nodes[running[usize::from(i) % running.len()]];
        let port = 2000 + u64::from(i);
        if register_stream(node, "127.21.0.1", port) {
            acked.insert(port);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the stream is bounded in time"
        );
    }
    acked
}

/// Registers the persistent instance `ip:port` in service `stream` through `node`;
/// whether it was acknowledged (a failure is printed, not fatal: nodes die mid-stream).
fn register_stream(node: &Node, ip: &str, port: u64) -> bool {
    let path =
        format!("/nacos/v1/ns/instance?serviceName=stream&ip={ip}&port={port}&ephemeral=false");
    let auth = format!("Bearer {}", node.token());
    match node.try_request("POST", &path, &[("authorization", &auth)], None) {
        Ok(r) if r.status == 200 && r.body == "ok" => true,
        Ok(r) => {
            eprintln!("registration {port}: {} {}", r.status, r.body);
            false
        }
        Err(e) => {
            eprintln!("registration {port}: {e}");
            false
        }
    }
}

/// Every node holds every acknowledged write, and beyond them at most `unanswered`
/// (writes in flight at the crash, committed but never answered).
fn check_all_have(c: &Cluster, acked: &BTreeSet<u64>, unanswered: usize) {
    for (i, node) in c.nodes.iter().enumerate() {
        let present = eventually(Duration::from_secs(20), || {
            let ports = persistent_ports(node, "stream");
            if acked.is_subset(&ports) {
                Ok(ports)
            } else {
                Err(format!(
                    "node {} misses {:?}",
                    i + 1,
                    acked.difference(&ports).collect::<Vec<_>>()
                ))
            }
        });
        // Anything beyond the acknowledged ones was a registration whose answer was lost.
        assert!(
            present.len() <= acked.len() + unanswered,
            "node {}: {} present for {} acked",
            i + 1,
            present.len(),
            acked.len()
        );
    }
}

#[test]
fn no_acknowledged_write_is_lost_when_the_leader_dies() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.leader();
    let acked = stream_with_crash(&mut c, 120, 40, leader);
    assert!(
        acked.len() >= 100,
        "the survivors kept taking writes: {} acked",
        acked.len()
    );
    c.nodes[leader].start_again();
    c.nodes[leader].wait_ready();
    check_all_have(&c, &acked, 3);
}

/// Concurrent writers share Raft entries (batched on the followers' way to the leader
/// and on the leader); killing the leader mid-stream must still lose none of them.
#[test]
fn no_acknowledged_concurrent_write_is_lost_when_the_leader_dies() {
    let mut c = Cluster::start(3, &[]);
    let leader = c.leader();
    let acked = std::sync::Mutex::new(BTreeSet::new());
    let (before, rest) = c.nodes.split_at_mut(leader);
    let (victim, after) = rest.split_first_mut().unwrap();
    let followers: Vec<&Node> = before.iter().chain(after.iter()).collect();
    std::thread::scope(|s| {
        for writer in 0..8u64 {
            let (node, acked) = (followers[writer as usize % 2], &acked);
            s.spawn(move || {
                let started = Instant::now();
                for i in 0..40u64 {
                    let port = 5000 + writer * 100 + i;
                    if register_stream(node, "127.21.0.2", port) {
                        acked.lock().unwrap().insert(port);
                    }
                    assert!(
                        started.elapsed() < Duration::from_secs(120),
                        "the stream is bounded in time"
                    );
                }
            });
        }
        // Kill the leader a quarter of the way in, while every writer is busy.
        let started = Instant::now();
        while acked.lock().unwrap().len() < 80 && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        victim.kill();
        let at_kill = acked.lock().unwrap().len();
        assert!(
            at_kill < 320,
            "the leader died after the stream ended ({at_kill} acked)"
        );
        eprintln!("leader killed with {at_kill} of 320 acknowledged");
    });
    let acked = acked.into_inner().unwrap();
    assert!(
        acked.len() >= 200,
        "the survivors kept taking writes: {} of 320 acked",
        acked.len()
    );
    c.nodes[leader].start_again();
    c.nodes[leader].wait_ready();
    // Each writer has at most one write in flight.
    check_all_have(&c, &acked, 8);
}

#[test]
fn no_acknowledged_write_is_lost_when_a_follower_dies() {
    let mut c = Cluster::start(3, &[]);
    let follower = c.follower();
    let acked = stream_with_crash(&mut c, 120, 40, follower);
    assert!(
        acked.len() >= 110,
        "a follower's death costs at most its in-flight writes: {}",
        acked.len()
    );
    c.nodes[follower].start_again();
    c.nodes[follower].wait_ready();
    check_all_have(&c, &acked, 3);
}

#[test]
fn a_node_that_fell_behind_catches_up_by_snapshot() {
    let mut c = Cluster::start(3, &["--raft-snapshot-logs", "50"]);
    let behind = c.follower();
    c.nodes[behind].kill();
    let writer = (0..3).find(|i| *i != behind).unwrap();
    let token = c.nodes[writer].token();
    for i in 0..200u16 {
        let path = format!(
            "/nacos/v1/ns/instance?serviceName=snap&ip=127.22.0.1&port={}&ephemeral=false",
            3000 + i
        );
        c.nodes[writer]
            .raw(
                "POST",
                &path,
                &[("authorization", &format!("Bearer {token}"))],
                None,
            )
            .expect(200);
    }
    // The others compacted their logs past what the stopped node has.
    eventually(Duration::from_secs(10), || {
        let v = c.view(writer);
        if v["snapshotIndex"].as_u64().unwrap_or(0) >= 150 {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    c.nodes[behind].start_again();
    c.nodes[behind].wait_ready();
    let v = c.nodes[behind]
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=snap")
        .expect(200)
        .json();
    assert_eq!(v["hosts"].as_array().unwrap().len(), 200);
    let view = c.view(behind);
    assert!(
        view["snapshotIndex"].as_u64().unwrap() >= 150,
        "installed a snapshot: {view}"
    );
}

#[test]
fn a_minority_cannot_commit_and_the_cluster_converges_after() {
    let c = Cluster::start(3, &[]);
    let leader = c.leader();
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    // Freeze the two others: the leader is alone.
    for i in &others {
        c.nodes[*i].pause();
    }
    let r = c.nodes[leader].call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=minority&ip=127.23.0.1&port=1&ephemeral=false",
    );
    assert_eq!(
        r.status, 503,
        "a minority refuses persistent writes: {}",
        r.body
    );
    for i in &others {
        c.nodes[*i].resume();
    }
    // The majority is back; the write goes through, and everyone agrees.
    eventually(Duration::from_secs(20), || {
        let r = c.nodes[leader].call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=minority&ip=127.23.0.2&port=2&ephemeral=false",
        );
        if r.status == 200 {
            Ok(())
        } else {
            Err(r.body)
        }
    });
    let reference = persistent_ports(&c.nodes[0], "minority");
    assert!(reference.contains(&2));
    for node in &c.nodes {
        assert_eq!(persistent_ports(node, "minority"), reference);
    }
}

#[test]
fn nodes_join_and_leave_at_run_time() {
    let c = Cluster::start(3, &[]);
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=grow&ip=127.24.0.1&port=1&ephemeral=false",
        )
        .expect(200);
    // And an ephemeral one, which the new node must load from a peer before it says
    // it is ready (it once took itself for a cluster of one and served none).
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=grow-live&ip=127.24.0.3&port=3",
        )
        .expect(200);
    let (http, peer) = (free_port(), free_port());
    let mut fourth = Node::start_with(NodeOptions {
        args: vec!["--node-id".into(), "4".into(), "--join".into()],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        ports: Some((http, peer)),
        wait_ready: false,
        ..Default::default()
    });
    let out = Command::new(roster_bin())
        .args(["cluster", "add", "4", &format!("127.0.0.1:{peer}")])
        .args([
            "--http",
            &c.nodes[1].addr(),
            "--password",
            ADMIN_PASSWORD,
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fourth.wait_ready();
    let v = fourth
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=grow")
        .expect(200)
        .json();
    assert_eq!(
        v["hosts"].as_array().unwrap().len(),
        1,
        "the new node has the data"
    );
    let v = fourth
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=grow-live")
        .expect(200)
        .json();
    assert_eq!(
        v["hosts"].as_array().unwrap().len(),
        1,
        "the new node has the ephemeral instances once ready: {v}"
    );
    eventually(Duration::from_secs(10), || {
        let view = c.view(0);
        let m = view["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == 4)
            .cloned();
        match m {
            Some(m) if m["voter"] == true && m["live"] == true => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    // Bad membership requests.
    let r = c.nodes[0].call("POST", "/api/v1/cluster/members?id=x&peer=127.0.0.1:1");
    assert!(r.status == 400 && r.body.contains("'id'"), "{}", r.body);
    let r = c.nodes[0].call("POST", "/api/v1/cluster/members?id=9&peer=nohost");
    assert!(r.status == 400 && r.body.contains("'peer'"), "{}", r.body);
    let r = c.nodes[0].call("DELETE", "/api/v1/cluster/members?id=9");
    assert_eq!(r.status, 404, "{}", r.body);
    // Remove it again; the three carry on.
    let out = Command::new(roster_bin())
        .args([
            "cluster",
            "remove",
            "4",
            "--http",
            &c.nodes[2].addr(),
            "--password",
            ADMIN_PASSWORD,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fourth.kill();
    c.nodes[2]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=grow&ip=127.24.0.2&port=2&ephemeral=false",
        )
        .expect(200);
    let view = c.view(0);
    assert!(
        !view["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == 4),
        "{view}"
    );
}

#[test]
fn peer_messages_need_the_cluster_secret() {
    let c = Cluster::start(3, &[]);
    let peer = format!("127.0.0.1:{}", c.nodes[0].peer_port);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    // No authentication at all.
    let r = agent
        .post(format!("http://{peer}/peer/v1/raft/vote"))
        .send(&b"x"[..])
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // A forged MAC, and a wrong protocol version.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    for (protocol, auth) in [("1", format!("{now}.00ff")), ("99", format!("{now}.00ff"))] {
        let r = agent
            .post(format!("http://{peer}/peer/v1/hello"))
            .header("x-roster-protocol", protocol)
            .header("x-roster-node", "2")
            .header("x-roster-auth", &auth)
            .send(&b"x"[..])
            .unwrap();
        assert_eq!(r.status().as_u16(), 403);
    }
    // A node with another secret cannot join in: it never becomes ready.
    let (http, peer_port) = (free_port(), free_port());
    let intruder = Node::start_with(NodeOptions {
        args: vec![
            "--node-id".into(),
            "7".into(),
            "--members".into(),
            format!("{},7=127.0.0.1:{peer_port}", c.members),
        ],
        env: vec![(
            "ROSTER_CLUSTER_SECRET".into(),
            "some-other-secret-entirely".into(),
        )],
        ports: Some((http, peer_port)),
        wait_ready: false,
        ..Default::default()
    });
    std::thread::sleep(Duration::from_secs(3));
    let r = intruder.raw("GET", "/health/ready", &[], None);
    assert_eq!(r.status, 503);
    assert!(c.nodes[0].log().contains("refused a peer message"));
    // And a multi-node node without any secret refuses to start.
    let out = Command::new(roster_bin())
        .args(["--node-id", "1", "--members", &c.members, "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .env_remove("ROSTER_CLUSTER_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cluster secret"));
}

#[test]
fn a_node_cut_off_by_the_network_cannot_commit_and_converges_after() {
    let lab = roster_tests::netlab::NetLab::create(3)
        .unwrap_or_else(|e| panic!("this test needs network namespaces (root and iproute2): {e}"));
    let c = Cluster::start_in(&lab, 3, &[]);
    // Ephemeral instances with long timeouts, so that only the partition matters.
    let meta = roster_tests::enc(
        r#"{"preserved.heart.beat.timeout":"120000","preserved.ip.delete.timeout":"240000"}"#,
    );
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=split&ip=127.40.0.1&port=1&ephemeral=false",
        )
        .expect(200);
    c.nodes[0]
        .call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=split-e&ip=127.40.1.1&port=1&metadata={meta}"
            ),
        )
        .expect(200);
    eventually(Duration::from_secs(3), || {
        let v = c.nodes[2]
            .call("GET", "/nacos/v1/ns/instance/list?serviceName=split-e")
            .json();
        if v["hosts"].as_array().unwrap().len() == 1 {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    // Cut the leader off: the hardest side to be on.
    let cut = c.leader();
    lab.cut(cut + 1);
    let r = c.nodes[cut].call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=split&ip=127.40.0.2&port=2&ephemeral=false",
    );
    assert_eq!(
        r.status, 503,
        "the cut-off node refuses persistent writes: {}",
        r.body
    );
    assert!(
        r.body.contains("leader") || r.body.contains("quorum"),
        "a clear reason: {}",
        r.body
    );
    // The majority elects a leader and goes on.
    let other = (cut + 1) % 3;
    eventually(Duration::from_secs(20), || {
        let r = c.nodes[other].call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=split&ip=127.40.0.3&port=3&ephemeral=false",
        );
        if r.status == 200 {
            Ok(())
        } else {
            Err(format!("{} {}", r.status, r.body))
        }
    });
    // Ephemeral writes stay available on both sides (AP).
    c.nodes[other]
        .call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=split-e&ip=127.40.1.2&port=1&metadata={meta}"
            ),
        )
        .expect(200);
    c.nodes[cut]
        .call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=split-e&ip=127.40.1.3&port=1&metadata={meta}"
            ),
        )
        .expect(200);
    lab.heal(cut + 1);
    // After healing, every node agrees on both kinds of data.
    for node in &c.nodes {
        eventually(Duration::from_secs(30), || {
            let p = persistent_ports(node, "split");
            if p == BTreeSet::from([1, 3]) {
                Ok(())
            } else {
                Err(format!("persistent {p:?}"))
            }
        });
        eventually(Duration::from_secs(30), || {
            let v = node
                .call("GET", "/nacos/v1/ns/instance/list?serviceName=split-e")
                .json();
            let ips: BTreeSet<String> = v["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["ip"].as_str().unwrap().to_string())
                .collect();
            let want: BTreeSet<String> = ["127.40.1.1", "127.40.1.2", "127.40.1.3"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            if ips == want {
                Ok(())
            } else {
                Err(format!("ephemeral {ips:?}"))
            }
        });
    }
}
