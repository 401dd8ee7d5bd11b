//! nacos-sdk-go v2 (gRPC, auth on): naming and config on one node from start to end, a
//! wrong password refused, and a failover: the node the client is connected to is killed
//! and the client's registrations, subscription and listener are there again on the others.

use std::time::{Duration, Instant};

use roster_tests::{eventually, json, Cluster, Node, Value, ADMIN_PASSWORD};

use super::{run, scenario, step, Running};

#[test]
fn nacos_sdk_go_v2_registers_selects_subscribes_and_configures_over_grpc() {
    let node = Node::start();
    let mut cmd = scenario("nacos2-flow");
    cmd.args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "go2-orders", "--data-id", "go2-app.yaml"]);
    let steps = run(cmd, "nacos-sdk-go v2");
    for name in [
        "connect",
        "register",
        "select_instances",
        "select_one",
        "get_service",
        "subscribe",
        "push_registered",
        "push_unhealthy",
        "push_deregistered",
        "batch_register",
        "deregister",
        "publish",
        "get",
        "listen",
        "listen_http_change",
        "listen_go_change",
        "cas_stale",
        "cas_current",
        "search",
        "delete",
        "done",
    ] {
        step(&steps, name);
    }
    // The SDK spoke gRPC to the node: its requests are counted by kind.
    for kind in [
        "InstanceRequest",
        "BatchInstanceRequest",
        "SubscribeServiceRequest",
        "ConfigPublishRequest",
        "ConfigQueryRequest",
        "ConfigBatchListenRequest",
        "ConfigRemoveRequest",
    ] {
        let n = node
            .metric(&format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"))
            .unwrap_or(0.0);
        assert!(n >= 1.0, "{kind} reached the node over gRPC ({n})");
    }
    // The SDK closed its clients at the end: the batch's instances, registered on its
    // connection, left with it; the deregistered one was gone before.
    for service in ["go2-orders-batch", "go2-orders"] {
        let v = node
            .call(
                "GET",
                &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
            )
            .expect(200)
            .json();
        assert_eq!(v["hosts"], json!([]), "{service}: {v}");
    }
}

#[test]
fn nacos_sdk_go_v2_with_a_wrong_password_is_refused() {
    let node = Node::start();
    let mut cmd = scenario("nacos2-flow");
    cmd.args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", "not-the-password"])
        .args(["--service", "go2-refused"]);
    let out = cmd.output().expect("run the Go client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a wrong password fails the run:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(r#""ok":false,"reason""#) && stdout.contains(r#""step":"register""#),
        "the registration is what fails: {stdout}"
    );
    let v = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=go2-refused")
        .expect(200)
        .json();
    assert_eq!(v["hosts"], json!([]), "nothing was registered: {v}");
}

fn listed(node: &Node, service: &str) -> Vec<String> {
    let v = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
        )
        .expect(200)
        .json();
    let mut ips: Vec<String> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect();
    ips.sort();
    ips
}

/// The node (index) whose gRPC requests of `kind` the client sent: its naming or config
/// connection's node.
fn node_of(c: &Cluster, kind: &str) -> usize {
    eventually(Duration::from_secs(5), || {
        let on: Vec<usize> = (0..c.nodes.len())
            .filter(|i| c.nodes[*i].is_running())
            .filter(|i| {
                c.nodes[*i]
                    .metric(&format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"))
                    .unwrap_or(0.0)
                    >= 1.0
            })
            .collect();
        match on[..] {
            [one] => Ok(one),
            _ => Err(format!("{kind} seen on nodes {on:?}")),
        }
    })
}

fn hosts(line: &Value) -> Vec<String> {
    line["hosts"]
        .as_array()
        .map(|a| a.iter().map(|h| h.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Kills `victim` and samples the survivors' lists every 100 ms for `secs`: every one of
/// `mine` must be listed by every survivor in every sample. Then the client must be
/// connected again (answers "check" healthy) and must hear a registration and a config
/// change made through a survivor.
fn kill_and_follow(c: &mut Cluster, go: &mut Running, victim: usize, mine: &[String], round: u32) {
    eprintln!("killing node {}", victim + 1);
    c.nodes[victim].kill();
    let hit = Instant::now();
    let mut gaps = Vec::new();
    while hit.elapsed() < Duration::from_secs(12) {
        for (i, node) in c.nodes.iter().enumerate().filter(|(i, _)| *i != victim) {
            let list = listed(node, "go2-failover");
            let missing: Vec<&String> = mine.iter().filter(|m| !list.contains(m)).collect();
            if !missing.is_empty() {
                gaps.push(format!(
                    "{:?} after the kill, node {} lists {list:?}",
                    hit.elapsed(),
                    i + 1
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        gaps.is_empty(),
        "a survivor stopped listing the live client's instances:\n{}",
        gaps.join("\n")
    );
    // Reconnected: the SDK says so, and its own read answers its instances.
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0.. {
        go.send(&format!("check {round}.{n}"));
        let line = go.wait_for("a check's answer", Duration::from_secs(10), |v| {
            v["step"] == "healthy" && v["n"] == json!(format!("{round}.{n}"))
        });
        if line["server_healthy"] == json!(true) && mine.iter().all(|m| hosts(&line).contains(m)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the client never reconnected: {line}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The subscription was redone: a registration through a survivor is pushed.
    let survivor = (victim + 1) % c.nodes.len();
    let ip = format!("127.52.1.{round}");
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/ns/instance",
            &format!("serviceName=go2-failover&ip={ip}&port=8080&ephemeral=true"),
        )
        .expect(200);
    let pushed = go.wait_for("the push of a new instance", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v).iter().any(|h| h.starts_with(&ip))
    });
    eprintln!("pushed after the failover: {pushed}");
    // The listener was redone: a change through a survivor is heard.
    let content = format!("round: {round}");
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/cs/configs",
            &format!("dataId=go2-failover.yaml&group=DEFAULT_GROUP&content=round:%20{round}"),
        )
        .expect(200);
    go.wait_for("the config change", Duration::from_secs(10), |v| {
        v["step"] == "config" && v["content"] == json!(content)
    });
}

#[test]
fn nacos_sdk_go_v2_moves_to_a_survivor_when_its_node_is_killed() {
    let mut c = Cluster::start(3, &[]);
    let servers = c
        .nodes
        .iter()
        .map(|n| n.addr())
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = scenario("nacos2-stay");
    cmd.args(["--server", &servers])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args([
            "--service",
            "go2-failover",
            "--data-id",
            "go2-failover.yaml",
        ])
        .args(["--ips", "3"]);
    let mut go = Running::start(cmd, "nacos-sdk-go v2 (failover)");
    go.wait_step("ready", Duration::from_secs(20));
    let mine: Vec<String> = (1..=3).map(|i| format!("127.52.0.{i}:8080")).collect();
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || {
            let list = listed(node, "go2-failover");
            if list == mine {
                Ok(())
            } else {
                Err(format!("{list:?}"))
            }
        });
    }
    go.wait_for("its own instances pushed", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v) == mine
    });
    let naming = node_of(&c, "SubscribeServiceRequest");
    let config = node_of(&c, "ConfigBatchListenRequest");
    eprintln!(
        "naming on node {}, config on node {}",
        naming + 1,
        config + 1
    );
    kill_and_follow(&mut c, &mut go, naming, &mine, 1);
    if config != naming {
        // The listener's node still stood: bring the first back, then kill that one.
        c.nodes[naming].start_again();
        c.nodes[naming].wait_ready();
        kill_and_follow(&mut c, &mut go, config, &mine, 2);
    }
    // No list the SDK handed its listener lacked the client's own instances.
    let pushed: Vec<Vec<String>> = go
        .drain()
        .iter()
        .filter(|v| v["step"] == "pushed")
        .map(hosts)
        .collect();
    for list in &pushed {
        assert!(
            mine.iter().all(|m| list.contains(m)),
            "the subscriber was handed a list without the live instances: {list:?} (all: {pushed:?})"
        );
    }
    go.close_stdin();
    go.wait_success(Duration::from_secs(20));
}
