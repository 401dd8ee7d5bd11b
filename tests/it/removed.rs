//! The node's life at the cluster's edges: a member removed at run time stands down
//! (not ready, refuses HTTP, gRPC and DNS clients, says why in its log), a node that
//! never formed a cluster stops promptly, and a healthy cluster's logs name its leader and
//! hold no WARN or ERROR lines.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use roster_tests::{eventually, free_port, Cluster, Node, NodeOptions, CLUSTER_SECRET};
use serde_json::json;

use crate::grpc::{decode, payload, RawClient};

/// DNS response codes.
const NOERROR: u8 = 0;
const REFUSED: u8 = 5;

/// Lines of `log` at WARN or ERROR (the text format puts the level after the time).
fn warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect()
}

/// The response code and answer count of an A query for `name` over UDP at `port`, or
/// why there is none.
fn dns_query(port: u16, name: &str) -> Result<(u8, u16), String> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    // Id 0x2323, recursion desired, one question.
    let mut query = vec![0x23, 0x23, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.').filter(|l| !l.is_empty()) {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    // The root label, type A, class IN.
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    socket
        .send_to(&query, ("127.0.0.1", port))
        .map_err(|e| e.to_string())?;
    let mut reply = [0u8; 1500];
    let n = socket.recv(&mut reply).map_err(|e| e.to_string())?;
    if n < 12 || reply[..2] != [0x23, 0x23] {
        return Err(format!("not an answer to the query: {:?}", &reply[..n]));
    }
    Ok((reply[3] & 0x0f, u16::from_be_bytes([reply[6], reply[7]])))
}

/// The type and body of the answer to a raw gRPC server check at `node`.
fn grpc_server_check(node: &Node) -> (String, serde_json::Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = RawClient::connect(&format!("127.0.0.1:{}", node.http_port + 1000)).await;
        let check = payload(
            "ServerCheckRequest",
            &json!({"headers": {}, "requestId": ""}),
            None,
        );
        decode(&client.try_unary(check).await.expect("a gRPC answer"))
    })
}

#[test]
fn a_removed_node_stands_down_and_the_rest_carry_on() {
    let (c, dns) = Cluster::start_with_dns(3, &[]);
    let leader = c.leader();
    let victim = (leader + 1) % 3;
    let id = victim + 1;
    // A name every node answers for over DNS and gRPC, the one to be removed included.
    c.nodes[leader]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=stale&ip=127.25.1.1&port=80",
        )
        .expect(200);
    eventually(Duration::from_secs(10), || {
        match dns_query(dns[victim], "stale.roster")? {
            (NOERROR, 1) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(grpc_server_check(&c.nodes[victim]).0, "ServerCheckResponse");
    let term = c.view(leader)["term"].as_u64().unwrap();
    c.nodes[leader]
        .call("DELETE", &format!("/api/v1/cluster/members?id={id}"))
        .expect(200);
    let removed = &c.nodes[victim];
    eventually(Duration::from_secs(15), || {
        let r = removed.try_request("GET", "/health/ready", &[], None);
        match r {
            Ok(r) if r.status == 503 && r.body.contains("removed from the cluster") => Ok(()),
            Ok(r) => Err(format!("{} {}", r.status, r.body)),
            Err(e) => Err(e.to_string()),
        }
    });
    let r = removed
        .try_request(
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=any",
            &[],
            None,
        )
        .unwrap();
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.body.contains("removed from the cluster"), "{}", r.body);
    assert!(r.body.contains("delete its data dir"), "{}", r.body);
    // gRPC clients get the same reason; DNS, which carries none, is refused (a resolver
    // asks another server) where the others still answer.
    let (kind, body) = grpc_server_check(removed);
    assert_eq!(
        (kind.as_str(), &body["errorCode"]),
        ("ErrorResponse", &json!(300)),
        "{body}"
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("removed from the cluster"), "{body}");
    assert!(message.contains("delete its data dir"), "{body}");
    assert_eq!(dns_query(dns[victim], "stale.roster"), Ok((REFUSED, 0)));
    for i in (0..3).filter(|i| *i != victim) {
        // NOERROR: the name is known (its instance, never beating, may be unhealthy by now).
        let answer = dns_query(dns[i], "stale.roster");
        assert_eq!(answer.map(|a| a.0), Ok(NOERROR), "node {i}");
    }
    let log = removed.log();
    assert_eq!(
        log.matches("this node was removed from the cluster")
            .count(),
        1,
        "said once: {log}"
    );
    // The two left keep taking writes, for longer than a few election timeouts.
    let others: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
    let started = Instant::now();
    let mut port = 1;
    while started.elapsed() < Duration::from_secs(6) {
        for i in &others {
            c.nodes[*i]
                .call(
                    "POST",
                    &format!(
                        "/nacos/v1/ns/instance?serviceName=carry-on&ip=127.25.0.1&port={port}&ephemeral=false"
                    ),
                )
                .expect(200);
            port += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    for i in &others {
        let view = c.view(*i);
        assert!(
            !view["members"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == id),
            "{view}"
        );
        // No election was forced on them: the removed node's votes did not disturb.
        assert_eq!(view["term"].as_u64(), Some(term), "{view}");
        assert_eq!(view["leader"].as_u64(), Some(leader as u64 + 1), "{view}");
    }
}

#[test]
fn a_node_that_never_joined_stops_promptly() {
    let mut node = Node::start_with(NodeOptions {
        args: vec!["--node-id".into(), "7".into(), "--join".into()],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        wait_ready: false,
        ..Default::default()
    });
    eventually(Duration::from_secs(10), || {
        match node.try_request("GET", "/health/live", &[], None) {
            Ok(r) if r.status == 200 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    stops_promptly(&mut node);
}

#[test]
fn a_member_whose_peers_never_came_stops_promptly() {
    let members = format!(
        "1=127.0.0.1:{},2=127.0.0.1:{},3=127.0.0.1:{}",
        free_port(),
        free_port(),
        free_port()
    );
    let mut node = Node::start_with(NodeOptions {
        args: vec!["--node-id".into(), "2".into(), "--members".into(), members],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        wait_ready: false,
        ..Default::default()
    });
    std::thread::sleep(Duration::from_secs(1));
    stops_promptly(&mut node);
}

#[test]
fn a_healthy_cluster_logs_its_leader_and_no_warnings() {
    // As an operator runs it: the default log filter (the harness sets RUST_LOG; empty
    // counts as unset), and connection caps under the test machine's descriptor limit,
    // which roster warns of otherwise.
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let members = ports
        .iter()
        .enumerate()
        .map(|(i, (_, peer))| format!("{}=127.0.0.1:{peer}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, ports)| {
            Node::start_with(NodeOptions {
                args: [
                    "--node-id",
                    &(i + 1).to_string(),
                    "--members",
                    &members,
                    "--http-max-connections",
                    "1000",
                    "--grpc-max-connections",
                    "1000",
                ]
                .map(String::from)
                .to_vec(),
                env: vec![
                    ("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into()),
                    ("RUST_LOG".into(), String::new()),
                ],
                ports: Some(*ports),
                wait_ready: false,
                ..Default::default()
            })
        })
        .collect();
    for node in &mut nodes {
        node.wait_ready();
    }
    let c = Cluster { nodes, members };
    let leader = c.leader() + 1;
    eventually(Duration::from_secs(10), || {
        for node in &c.nodes {
            let log = node.log();
            if !log.contains("raft leader elected") || !log.contains(&format!("leader={leader}")) {
                return Err(format!("no leader line: {log}"));
            }
            if !log.contains("raft membership changed") {
                return Err(format!("no membership line: {log}"));
            }
        }
        Ok(())
    });
    for node in &c.nodes {
        let log = node.log();
        assert!(warnings(&log).is_empty(), "{:?}", warnings(&log));
    }
}

#[test]
fn a_restart_with_another_peer_address_warns_how_to_change_it() {
    let mut node = Node::start();
    let old = node.peer_port;
    node.kill();
    node.peer_port = free_port();
    node.start_again();
    node.wait_ready();
    let log = node.log();
    let line = log
        .lines()
        .find(|l| l.contains("another peer address than the stored cluster membership"))
        .unwrap_or_else(|| panic!("no warning: {log}"));
    assert!(line.contains(" WARN "), "{line}");
    assert!(
        line.contains(&format!("127.0.0.1:{old} stays in use")),
        "{line}"
    );
    assert!(line.contains("roster cluster remove 1"), "{line}");
}

/// SIGTERM stops `node` within 5 s.
fn stops_promptly(node: &mut Node) {
    let started = Instant::now();
    node.terminate();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}: {}",
        started.elapsed(),
        node.log()
    );
}
