//! nacos-sdk-go v2 (gRPC, auth on): naming and config on one node from start to end, a
//! wrong password refused, and a failover: the node the client is connected to is killed
//! and the client's registrations, subscription and listener are there again on the others.

use std::time::Duration;

use roster_tests::{json, Cluster, Node, ADMIN_PASSWORD};

use super::{run, scenario, step, Running};
use crate::sdk_failover::{follow_the_client, Stay};

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

#[test]
fn nacos_sdk_go_v2_moves_to_a_survivor_when_its_node_is_killed() {
    let mut c = Cluster::start(3, &[]);
    let servers = c.server_list();
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
    let stay = Stay {
        service: "go2-failover",
        data_id: "go2-failover.yaml",
        mine: &mine,
        registration: "BatchInstanceRequest",
        probe_prefix: "127.52.1",
    };
    follow_the_client(&mut c, &mut go, &stay);
}
