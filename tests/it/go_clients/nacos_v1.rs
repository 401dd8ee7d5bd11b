//! nacos-sdk-go v1.1.6 (HTTP with UDP push, the v1 Go client many services still run)
//! against a node with auth on: the `nacos1-flow` scenario registers an instance whose
//! beats keep it healthy past its beat timeout, subscribes and hears by UDP push a
//! registration and a deregistration made over plain HTTP, selects and reads the
//! service, publishes, reads, long-polls and deletes a configuration, and deregisters.
//! The node's side is checked here: the beats it received, the pushes the SDK acked, the
//! subscriber it holds (at a loopback address), and nothing left behind.

use std::net::UdpSocket;
use std::time::Duration;

use roster_tests::{json, unique, Node, Value, ADMIN_PASSWORD};

use super::{run, scenario, step, steps};

const GO_V1_AGENT: &str = "Nacos-Go-Client:v1.1.6";

#[test]
fn nacos_sdk_go_v1_beats_hears_udp_pushes_and_long_polls_configs() {
    let node = Node::start();
    flow(&node, &unique("go1-orders"), None);
}

#[test]
fn nacos_sdk_go_v1_in_a_namespace() {
    let node = Node::start();
    let ns = unique("go1-ns");
    node.call(
        "POST",
        &format!("/nacos/v1/console/namespaces?customNamespaceId={ns}&namespaceName={ns}"),
    )
    .expect(200);
    let service = unique("go1-orders");
    flow(&node, &service, Some(&ns));
    // Nothing of it landed in the public namespace.
    let public = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/service/subscribers?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(public["count"], 0, "{public}");
}

/// Runs `nacos1-flow` for `service` (in `namespace`, else public) on `node`, the node's
/// only client, and checks its steps and what the node saw.
fn flow(node: &Node, service: &str, namespace: Option<&str>) {
    let mut cmd = scenario("nacos1-flow");
    cmd.args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", service]);
    if let Some(ns) = namespace {
        cmd.args(["--namespace", ns]);
    }
    let steps = run(cmd, "nacos-sdk-go v1");

    // The SDK announced no address of any network, and listens for pushes on a port.
    assert_eq!(step(&steps, "announce")["clientIP"], "");
    step(&steps, "register");
    let beats = step(&steps, "beats");
    assert!(beats["beats_sent"].as_u64().unwrap() >= 4, "{beats}");
    let subscribe = step(&steps, "subscribe");
    assert_eq!(subscribe["clientIP"], "", "{subscribe}");
    let udp_port: u16 = subscribe["udpPort"].as_str().unwrap().parse().unwrap();
    assert_eq!(step(&steps, "subscribers")["ip"], "127.0.0.1");
    // Heard with no list query in between: by UDP push, not by the SDK's polling.
    for name in ["push_register", "push_deregister"] {
        let s = step(&steps, name);
        assert_eq!(
            (&s["via"], &s["list_queries_between"]),
            (&json!("udp"), &json!(0)),
            "{s}"
        );
    }
    for name in [
        "select_instances",
        "select_one",
        "config_publish",
        "config_get",
        "config_delete",
        "deregister",
    ] {
        step(&steps, name);
    }
    assert_eq!(
        step(&steps, "get_service")["name"],
        format!("DEFAULT_GROUP@@{service}")
    );
    assert_eq!(step(&steps, "config_listen")["content"], "greeting=changed");
    let done = step(&steps, "done");

    // The node received every beat the SDK sent, and never found the instance silent.
    let sent = done["beats_sent"].as_f64().unwrap();
    let received = node.metric("roster_beats_total").unwrap_or(0.0);
    assert!(received >= sent, "beats: sent {sent}, received {received}");
    assert_eq!(node.metric("roster_expiry_unhealthy_total"), Some(0.0));
    // Both changes were pushed by UDP and acknowledged by the SDK.
    let acked = node
        .metric("roster_udp_pushes_total{outcome=\"acked\"}")
        .unwrap_or(0.0);
    assert!(acked >= 2.0, "UDP pushes acked: {acked}");
    // The node holds the SDK's subscription at the loopback address, nowhere else.
    let (ns_param, tenant) = match namespace {
        Some(ns) => (format!("&namespaceId={ns}"), format!("&tenant={ns}")),
        None => (String::new(), String::new()),
    };
    let subs = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/service/subscribers?serviceName={service}{ns_param}"),
        )
        .expect(200)
        .json();
    let subscribers = subs["subscribers"].as_array().unwrap();
    assert_eq!(subscribers.len(), 1, "{subs}");
    assert_eq!(
        (
            &subscribers[0]["ip"],
            &subscribers[0]["port"],
            &subscribers[0]["protocol"],
            &subscribers[0]["agent"]
        ),
        (
            &json!("127.0.0.1"),
            &json!(udp_port),
            &json!("udp"),
            &json!(GO_V1_AGENT)
        ),
        "{subs}"
    );
    // Nothing is left: no instance, no configuration.
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}{ns_param}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"], json!([]), "{list}");
    node.call(
        "GET",
        &format!("/nacos/v1/cs/configs?dataId={service}.properties&group=DEFAULT_GROUP{tenant}"),
    )
    .expect(404);
}

#[test]
fn nacos_sdk_go_v1_with_a_wrong_password_fails_its_first_call() {
    let node = Node::start();
    let service = unique("go1-refused");
    let out = scenario("nacos1-flow")
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", "not-the-password"])
        .args(["--service", &service])
        .output()
        .expect("cannot run the Go nacos-sdk-go v1 scenario");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "it must fail:\n{stdout}");
    let failed: Vec<Value> = steps(&stdout)
        .into_iter()
        .filter(|s| s["ok"] == json!(false))
        .collect();
    assert_eq!(failed.len(), 1, "{stdout}");
    // The first call fails, and the run says why: the SDK's login was refused.
    assert_eq!(failed[0]["step"], "register", "{stdout}");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(reason.contains("login answered \"403"), "{reason}");
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"], json!([]), "nothing registered: {list}");
}

/// nacos-sdk-go v1 announces `clientIP` empty when it finds no interface address (or all
/// are filtered out): the list query still subscribes it, at the address it came from.
#[test]
fn a_list_query_without_client_ip_is_pushed_to_the_requester() {
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let token = node.token();
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName=no-client-ip&udpPort={port}&clientIP=&accessToken={token}"),
        &[("user-agent", GO_V1_AGENT)],
        None,
    )
    .expect(200);
    let subs = node
        .call(
            "GET",
            "/nacos/v1/ns/service/subscribers?serviceName=no-client-ip",
        )
        .expect(200)
        .json();
    assert_eq!(subs["count"], 1, "{subs}");
    assert_eq!(subs["subscribers"][0]["ip"], "127.0.0.1", "{subs}");
    assert_eq!(subs["subscribers"][0]["port"], port, "{subs}");
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=no-client-ip&ip=127.20.0.1&port=80",
    )
    .expect(200);
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let (len, _) = socket.recv_from(&mut buf).expect("a push to the requester");
    let packet: Value = roster_tests::serde_json::from_slice(&buf[..len]).unwrap();
    assert_eq!(packet["type"], "dom", "{packet}");
}
