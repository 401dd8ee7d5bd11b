//! Nacos 3's maintainer client (`nacos-maintainer-client`, the admin SDK over the v3 HTTP
//! API) against one node with auth on: every method of its naming, config and core
//! services, one step each (`tests/clients/java/nacos-maintainer`), judged here by the
//! values answered, then read back through v1. The test prepares over v1 what the views of
//! clients need: an ephemeral instance and a UDP subscriber of another service.
//!
//! Three methods of the client cannot read Nacos' own answer: `getHealthCheckers`,
//! `listSelectorTypes` and `getClientList` parse the whole body as the bare list or map,
//! not the `{code, message, data}` envelope every v3 route answers (Nacos' too). roster
//! answers as Nacos does; the client's parse fails, and this test reads those routes
//! directly.

use std::net::UdpSocket;

use roster_tests::{enc, json, unique, Node, Value, ADMIN_PASSWORD};

use super::{java, run, step};

const MODULE: &str = "nacos-maintainer";

/// What a step answered (it must have passed).
fn answer<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    &step(steps, name)["answer"]
}

/// A step whose call threw: its error (`code`, `message`, `error`).
fn error<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    let found = steps
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {steps:?}"));
    assert_eq!(
        found["ok"],
        json!(false),
        "step {name} should fail: {found}"
    );
    found
}

/// A call roster answers 501 by design, "not served by roster" in the envelope.
fn not_served(steps: &[Value], name: &str) {
    let e = error(steps, name);
    assert_eq!(e["code"], json!(501), "{name}: {e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("not served by roster"), "{name}: {e}");
}

/// A call whose route roster does not have (the client is newer than the v3 table).
fn no_route(steps: &[Value], name: &str) {
    let e = error(steps, name);
    assert_eq!(e["code"], json!(404), "{name}: {e}");
}

/// A call the client cannot read, roster's answer being Nacos' envelope.
fn unreadable(steps: &[Value], name: &str) {
    let e = error(steps, name);
    let class = e["error"].as_str().unwrap_or_default();
    assert!(
        class.ends_with("NacosDeserializationException"),
        "{name}: {e}"
    );
}

/// The strings of `field` in the items of a list (or of a page's `pageItems`).
fn field_of(list: &Value, field: &str) -> Vec<String> {
    let items = list
        .get("pageItems")
        .unwrap_or(list)
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    items
        .iter()
        .map(|i| match &i[field] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// A number answered as a JSON number or a string (ids are strings in Nacos' JSON).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn close(v: &Value, expected: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - expected).abs() < 1e-6)
}

/// The `data` of a v3 answer read directly, as the admin.
fn v3_data(node: &Node, path: &str) -> Value {
    let body = node.call("GET", path).expect(200).json();
    assert_eq!(body["code"], json!(0), "{path}: {body}");
    body["data"].clone()
}

#[test]
fn nacos_maintainer_client_drives_the_v3_admin_api() {
    let node = Node::start();
    let namespace = unique("maint-ns");
    let service = unique("maint-svc");
    let prepared = unique("maint-prepared");
    let data_id = format!("{}.yaml", unique("maint"));
    let port: u16 = 18081;
    let prepared_port: u16 = 19001;

    // What the views of clients need, over v1: an ephemeral instance (kept a minute
    // without beats) and a UDP subscriber, whose pushes this socket takes.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let keep =
        enc(r#"{"preserved.heart.beat.timeout":"60000","preserved.ip.delete.timeout":"60000"}"#);
    node.call_form(
        "POST",
        "/nacos/v1/ns/instance",
        &format!(
            "serviceName={prepared}&ip=127.0.0.1&port={prepared_port}&ephemeral=true&metadata={keep}"
        ),
    )
    .expect(200);
    // A UDP subscriber is one of the push-capable agents (nacos-client 1.x here).
    let bearer = format!("Bearer {}", node.token());
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={prepared}&udpPort={udp_port}&clientIP=127.0.0.1"),
        &[
            ("authorization", &bearer),
            ("user-agent", "Nacos-Java-Client:v1.4.8"),
        ],
        None,
    )
    .expect(200);

    let mut cmd = java(MODULE, "org.roster.clients.maintainer.MaintainerScenario");
    cmd.args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--namespace", &namespace, "--service", &service])
        .args(["--data-id", &data_id, "--prepared", &prepared])
        .args(["--port", &port.to_string()]);
    let steps = run(cmd, MODULE);
    step(&steps, "naming_connect");
    step(&steps, "config_connect");
    step(&steps, "done");

    // The client logged in at Nacos 3's path, without the v1 fallback, and its token
    // (the `accessToken` header) passed every call below.
    let logins = node
        .metric("roster_http_requests_total{route=\"/nacos/v3/auth/user/login\",method=\"POST\",status=\"200\"}")
        .unwrap_or(0.0);
    assert!(
        logins >= 2.0,
        "one login per service at the v3 path: {logins}"
    );
    assert_eq!(
        node.metric("roster_http_requests_total{route=\"/nacos/v1/auth/users/login\""),
        None,
        "no v1 fallback"
    );

    core(&node, &steps, &namespace);
    naming(
        &node,
        &steps,
        &service,
        &prepared,
        port,
        prepared_port,
        udp_port,
    );
    config(&steps, &data_id, &namespace);
    unserved(&node, &steps);

    // What the maintainer made, through v1.
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false"),
        )
        .expect(200)
        .json();
    let hosts = list["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{list}");
    assert_eq!(
        (&hosts[0]["ip"], &hosts[0]["port"], &hosts[0]["ephemeral"]),
        (&json!("127.0.0.1"), &json!(port), &json!(false)),
        "{list}"
    );
    assert!(close(&hosts[0]["weight"], 4.0), "{list}");
    assert_eq!(hosts[0]["metadata"], json!({"b": "3"}), "{list}");
    let detail = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/service?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(detail["metadata"]["tier"], json!("gold"), "{detail}");
    assert_eq!(
        node.call(
            "GET",
            &format!("/nacos/v1/ns/service?serviceName={service}-gone")
        )
        .status
            / 100,
        4
    );
    let content = node
        .call(
            "GET",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group=DEFAULT_GROUP"),
        )
        .expect(200)
        .body;
    assert_eq!(content, "k: v2");
    let namespaces = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    let ours: Vec<&Value> = namespaces["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["namespace"] == json!(namespace))
        .collect();
    assert_eq!(ours.len(), 1, "{namespaces}");
    assert_eq!(
        ours[0]["namespaceShowName"],
        json!(format!("{namespace}-renamed"))
    );
    drop(udp);
}

/// The node's state, its member, namespaces, connections.
fn core(node: &Node, steps: &[Value], namespace: &str) {
    let state = answer(steps, "server_state");
    assert!(
        state["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{state}"
    );
    assert_eq!(answer(steps, "liveness"), &json!(true));
    assert_eq!(answer(steps, "readiness"), &json!(true));
    for name in ["cluster_nodes", "cluster_nodes_up"] {
        let nodes = answer(steps, name);
        assert_eq!(field_of(nodes, "address"), [node.addr()], "{name}: {nodes}");
        assert_eq!(nodes[0]["state"], json!("UP"), "{nodes}");
        assert_eq!(nodes[0]["ip"], json!("127.0.0.1"), "{nodes}");
    }

    assert_eq!(answer(steps, "namespace_create"), &json!(true));
    let ns = answer(steps, "namespace_get");
    assert_eq!(
        (
            &ns["namespace"],
            &ns["namespaceShowName"],
            &ns["namespaceDesc"],
            &ns["type"]
        ),
        (
            &json!(namespace),
            &json!(format!("{namespace}-name")),
            &json!("made by the maintainer"),
            &json!(2)
        ),
        "{ns}"
    );
    assert_eq!(answer(steps, "namespace_update"), &json!(true));
    let ns = answer(steps, "namespace_get_updated");
    assert_eq!(
        (&ns["namespaceShowName"], &ns["namespaceDesc"]),
        (&json!(format!("{namespace}-renamed")), &json!("renamed")),
        "{ns}"
    );
    assert_eq!(answer(steps, "namespace_check"), &json!(true));
    assert_eq!(answer(steps, "namespace_check_absent"), &json!(false));
    assert_eq!(answer(steps, "namespace_create_gone"), &json!(true));
    assert_eq!(answer(steps, "namespace_delete"), &json!(true));
    assert_eq!(answer(steps, "namespace_check_deleted"), &json!(false));
    let ids = field_of(answer(steps, "namespace_list"), "namespace");
    assert!(ids.contains(&"public".to_string()), "{ids:?}");
    assert!(ids.contains(&namespace.to_string()), "{ids:?}");
    assert!(!ids.contains(&format!("{namespace}-gone")), "{ids:?}");

    // The maintainer speaks HTTP only: no gRPC connection on the node.
    assert_eq!(answer(steps, "loader_current"), &json!({}));
    let loader = answer(steps, "loader_cluster");
    assert_eq!(loader["memberCount"], json!(1), "{loader}");
    assert_eq!(
        loader["detail"].as_array().map(Vec::len),
        Some(1),
        "{loader}"
    );
    // Nacos answers success for a connection it does not hold; roster says it is not
    // there.
    let e = error(steps, "loader_reload_client");
    assert_eq!(e["code"], json!(404), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no-such-connection"),
        "{e}"
    );
    assert_eq!(
        answer(steps, "loader_reload_current"),
        &json!("0 connections asked to reconnect")
    );
    // Its factor as `loaderFactorStr` (Nacos reads `loaderFactor`); a single node has
    // no one to balance with.
    assert_eq!(answer(steps, "loader_smart_reload"), &json!("ok"));
}

/// Services, instances, clusters, health, metrics and the views of clients.
fn naming(
    node: &Node,
    steps: &[Value],
    service: &str,
    prepared: &str,
    port: u16,
    prepared_port: u16,
    udp_port: u16,
) {
    assert_eq!(answer(steps, "service_create"), &json!("ok"));
    let detail = answer(steps, "service_detail");
    assert_eq!(
        (
            &detail["namespaceId"],
            &detail["groupName"],
            &detail["serviceName"],
            &detail["ephemeral"],
            &detail["metadata"]
        ),
        (
            &json!("public"),
            &json!("DEFAULT_GROUP"),
            &json!(service),
            &json!(false),
            &json!({"owner": "maint"})
        ),
        "{detail}"
    );
    assert!(close(&detail["protectThreshold"], 0.5), "{detail}");
    assert_eq!(answer(steps, "service_update"), &json!("ok"));
    let detail = answer(steps, "service_detail_updated");
    assert_eq!(
        detail["metadata"],
        json!({"owner": "maint", "tier": "gold"}),
        "{detail}"
    );
    assert!(close(&detail["protectThreshold"], 0.7), "{detail}");
    let names = field_of(answer(steps, "service_list"), "name");
    assert!(
        names.contains(&service.to_string()) && names.contains(&prepared.to_string()),
        "{names:?}"
    );
    let filtered = answer(steps, "service_list_filtered");
    assert_eq!(field_of(filtered, "name"), [service], "{filtered}");
    assert_eq!(filtered["totalCount"], json!(1), "{filtered}");
    let names = field_of(answer(steps, "service_list_detail"), "serviceName");
    assert!(names.contains(&service.to_string()), "{names:?}");

    // Instances: registered, updated, patched, listed.
    assert_eq!(answer(steps, "instance_register"), &json!("ok"));
    assert_eq!(answer(steps, "instance_register_second"), &json!("ok"));
    let one = answer(steps, "instance_detail");
    assert_eq!(
        (
            &one["ip"],
            &one["port"],
            &one["ephemeral"],
            &one["clusterName"],
            &one["metadata"]
        ),
        (
            &json!("127.0.0.1"),
            &json!(port),
            &json!(false),
            &json!("DEFAULT"),
            &json!({"a": "1"})
        ),
        "{one}"
    );
    assert!(close(&one["weight"], 2.0), "{one}");
    assert_eq!(answer(steps, "instance_update"), &json!("ok"));
    let one = answer(steps, "instance_detail_updated");
    assert!(close(&one["weight"], 3.0), "{one}");
    assert_eq!(one["metadata"], json!({"a": "2"}), "{one}");
    // The client sends every field of a partial update: the metadata given replaces the
    // old. (Nacos 3 answers `{a: 1, b: 3}` here: its patch replaces the metadata layered
    // over the registration's, and the registration's `a: 1` shows through.)
    assert_eq!(answer(steps, "instance_partial"), &json!("ok"));
    let one = answer(steps, "instance_detail_partial");
    assert!(close(&one["weight"], 4.0), "{one}");
    assert_eq!(one["metadata"], json!({"b": "3"}), "{one}");
    let mut ports = field_of(answer(steps, "instance_list"), "port");
    ports.sort();
    assert_eq!(ports, [port.to_string(), (port + 1).to_string()]);

    // Metadata of both at once.
    let updated = answer(steps, "metadata_batch_update");
    assert_eq!(
        updated["updated"].as_array().map(Vec::len),
        Some(2),
        "{updated}"
    );
    let list = answer(steps, "instance_list_batch_updated");
    assert_eq!(field_of(list, "port").len(), 2, "{list}");
    for i in list.as_array().unwrap() {
        assert_eq!(i["metadata"]["batch"], json!("yes"), "{list}");
    }
    let deleted = answer(steps, "metadata_batch_delete");
    assert_eq!(
        deleted["updated"].as_array().map(Vec::len),
        Some(2),
        "{deleted}"
    );
    let list = answer(steps, "instance_list_batch_deleted");
    for i in list.as_array().unwrap() {
        assert!(i["metadata"].get("batch").is_none(), "{list}");
    }

    // The cluster checked by no one; an instance marked unhealthy by hand.
    assert_eq!(answer(steps, "cluster_update"), &json!("ok"));
    let detail = answer(steps, "service_detail_cluster");
    let cluster = &detail["clusterMap"]["DEFAULT"];
    assert_eq!(
        (
            &cluster["healthChecker"]["type"],
            &cluster["metadata"],
            &cluster["healthyCheckPort"],
            &cluster["useInstancePortForCheck"]
        ),
        (
            &json!("NONE"),
            &json!({"zone": "z1"}),
            &json!(port),
            &json!(false)
        ),
        "{detail}"
    );
    assert_eq!(answer(steps, "health_update"), &json!("ok"));
    let one = answer(steps, "instance_detail_unhealthy");
    assert_eq!(
        (&one["port"], &one["healthy"]),
        (&json!(port + 1), &json!(false)),
        "{one}"
    );

    // The three the client cannot read: the routes themselves.
    unreadable(steps, "health_checkers");
    let checkers = v3_data(node, "/nacos/v3/admin/ns/health/checkers");
    for kind in ["TCP", "HTTP", "NONE"] {
        assert_eq!(checkers[kind]["type"], json!(kind), "{checkers}");
    }
    unreadable(steps, "selector_types");
    let types = v3_data(node, "/nacos/v3/admin/ns/service/selector/types");
    for kind in ["none", "label"] {
        assert!(types.as_array().unwrap().contains(&json!(kind)), "{types}");
    }
    unreadable(steps, "client_list");

    // Two services, three instances, one subscriber so far.
    let metrics = answer(steps, "metrics");
    assert_eq!(
        (
            &metrics["status"],
            &metrics["serviceCount"],
            &metrics["instanceCount"],
            &metrics["subscribeCount"]
        ),
        (&json!("UP"), &json!(2), &json!(3), &json!(1)),
        "{metrics}"
    );
    assert_eq!(answer(steps, "metrics_status")["status"], json!("UP"));

    // The prepared service: its subscriber and the clients behind it.
    let subscribers = answer(steps, "subscribers");
    assert_eq!(subscribers["totalCount"], json!(1), "{subscribers}");
    let sub = &subscribers["pageItems"][0];
    assert_eq!(
        (&sub["ip"], &sub["port"]),
        (&json!("127.0.0.1"), &json!(udp_port)),
        "{sub}"
    );
    assert_eq!(
        field_of(answer(steps, "prepared_instances"), "port"),
        [prepared_port.to_string()]
    );
    let publishers = answer(steps, "service_publishers");
    assert_eq!(
        field_of(publishers, "port"),
        [prepared_port.to_string()],
        "{publishers}"
    );
    let publisher = publishers[0]["clientId"]
        .as_str()
        .expect("a client id")
        .to_string();
    let clients = v3_data(node, "/nacos/v3/admin/ns/client/list");
    assert!(
        clients.as_array().unwrap().contains(&json!(publisher)),
        "{clients}"
    );
    let client = answer(steps, "client_detail");
    assert_eq!(
        (
            &client["clientId"],
            &client["ephemeral"],
            &client["clientType"]
        ),
        (&json!(publisher), &json!(true), &json!("ipPort")),
        "{client}"
    );
    let published = answer(steps, "client_published");
    assert_eq!(
        field_of(published, "serviceName"),
        [prepared],
        "{published}"
    );
    assert_eq!(
        published[0]["publisherInfo"]["port"],
        json!(prepared_port),
        "{published}"
    );
    let subscribers = answer(steps, "service_subscribers");
    assert_eq!(
        field_of(subscribers, "address"),
        [format!("127.0.0.1:{udp_port}")],
        "{subscribers}"
    );
    let subscriber = subscribers[0]["clientId"].clone();
    assert_eq!(
        field_of(answer(steps, "client_subscribed"), "serviceName"),
        [prepared]
    );
    assert_eq!(
        answer(steps, "client_detail_subscriber")["clientId"],
        subscriber
    );

    // One instance goes, a service made to be removed goes.
    assert_eq!(answer(steps, "instance_deregister"), &json!("ok"));
    assert_eq!(
        field_of(answer(steps, "instance_list_deregistered"), "port"),
        [port.to_string()]
    );
    assert_eq!(answer(steps, "service_create_gone"), &json!("ok"));
    assert_eq!(answer(steps, "service_remove"), &json!("ok"));
    let names = field_of(answer(steps, "service_list_removed"), "name");
    assert!(names.contains(&service.to_string()), "{names:?}");
    assert!(!names.contains(&format!("{service}-gone")), "{names:?}");
    // Nacos answers a missing service 400 (code 21008); a 404 says the same.
    let e = error(steps, "service_detail_removed");
    assert!(e["code"] == json!(400) || e["code"] == json!(404), "{e}");
}

/// Items, their history, listeners, beta, clone, deletes.
fn config(steps: &[Value], data_id: &str, namespace: &str) {
    assert_eq!(answer(steps, "config_publish"), &json!(true));
    assert_eq!(answer(steps, "config_publish_again"), &json!(true));
    let item = answer(steps, "config_get");
    assert_eq!(
        (
            &item["content"],
            &item["dataId"],
            &item["groupName"],
            &item["namespaceId"],
            &item["type"],
            &item["appName"],
            &item["desc"]
        ),
        (
            &json!("k: v2"),
            &json!(data_id),
            &json!("DEFAULT_GROUP"),
            &json!("public"),
            &json!("yaml"),
            &json!("maint-app"),
            &json!("second")
        ),
        "{item}"
    );
    let tags = item["configTags"].as_str().unwrap_or_default();
    assert!(tags.contains("t1") && tags.contains("t2"), "{item}");
    assert_eq!(error(steps, "config_get_absent")["code"], json!(404));
    let listed = answer(steps, "config_list");
    assert_eq!(listed["totalCount"], json!(1), "{listed}");
    assert_eq!(field_of(listed, "dataId"), [data_id]);
    for name in [
        "config_list_namespace",
        "config_search",
        "config_search_detail",
    ] {
        let ids = field_of(answer(steps, name), "dataId");
        assert!(ids.contains(&data_id.to_string()), "{name}: {ids:?}");
    }
    // Nobody listens.
    for name in ["config_listeners", "listeners_by_ip"] {
        let listeners = answer(steps, name);
        let status = &listeners["listenersStatus"];
        assert!(
            status.is_null() || status == &json!({}),
            "{name}: {listeners}"
        );
    }

    // Two versions, newest first; one in detail and the one before it.
    let history = answer(steps, "history_list");
    assert_eq!(history["totalCount"], json!(2), "{history}");
    assert_eq!(field_of(history, "opType"), ["U", "I"], "{history}");
    let ids = field_of(history, "id");
    let newest = answer(steps, "history_detail");
    assert_eq!(
        (&newest["content"], &newest["opType"], text(&newest["id"])),
        (&json!("k: v2"), &json!("U"), ids[0].clone()),
        "{newest}"
    );
    let previous = answer(steps, "history_previous");
    assert_eq!(
        (
            &previous["content"],
            &previous["opType"],
            text(&previous["id"])
        ),
        (&json!("k: v1"), &json!("I"), ids[1].clone()),
        "{previous}"
    );
    let ids = field_of(answer(steps, "history_configs"), "dataId");
    assert!(ids.contains(&data_id.to_string()), "{ids:?}");

    // The description and tags changed, the content not.
    assert_eq!(answer(steps, "config_metadata"), &json!(true));
    let described = answer(steps, "config_get_metadata");
    assert_eq!(
        (
            &described["desc"],
            &described["configTags"],
            &described["content"]
        ),
        (&json!("described"), &json!("t3"), &json!("k: v2")),
        "{described}"
    );

    // A beta for one address, read, stopped.
    assert_eq!(answer(steps, "beta_publish"), &json!(true));
    let beta = answer(steps, "beta_get");
    assert_eq!(beta["content"], json!("k: beta"), "{beta}");
    assert!(
        beta["grayRule"]
            .as_str()
            .unwrap_or_default()
            .contains("127.0.0.1"),
        "{beta}"
    );
    assert_eq!(answer(steps, "beta_stop"), &json!(true));
    assert_eq!(error(steps, "beta_get_stopped")["code"], json!(404));

    // Cloned into the namespace, then deleted there by id; another item deleted by key.
    let clone = answer(steps, "config_clone");
    assert_eq!(clone["succCount"], json!(1), "{clone}");
    let cloned = answer(steps, "config_get_clone");
    assert_eq!(
        (
            &cloned["content"],
            &cloned["namespaceId"],
            &cloned["dataId"]
        ),
        (
            &json!("k: v2"),
            &json!(namespace),
            &json!(format!("{data_id}.clone"))
        ),
        "{cloned}"
    );
    assert_eq!(answer(steps, "config_publish_gone"), &json!(true));
    assert_eq!(answer(steps, "config_delete"), &json!(true));
    assert_eq!(error(steps, "config_get_deleted")["code"], json!(404));
    assert_eq!(answer(steps, "config_batch_delete"), &json!(true));
    assert_eq!(error(steps, "config_get_batch_deleted")["code"], json!(404));
    let history = answer(steps, "history_list_deleted");
    assert_eq!(field_of(history, "opType"), ["D", "I"], "{history}");
    step(steps, "config_local_cache");
}

/// What roster answers 501 by design, and the routes it does not have.
fn unserved(node: &Node, steps: &[Value]) {
    for name in [
        "naming_log",
        "config_log",
        "core_log",
        "raft_ops",
        "id_generators",
        "lookup_mode",
    ] {
        not_served(steps, name);
    }
    // The maintainer 3.2 has no switches methods; the route, read and written directly.
    let switches = v3_data(node, "/nacos/v3/admin/ns/ops/switches");
    assert!(switches.is_object(), "{switches}");
    let r = node.call_form(
        "PUT",
        "/nacos/v3/admin/ns/ops/switches",
        "entry=distroThreshold&value=0.5",
    );
    assert_eq!(r.status, 501, "{}", r.body);
    assert_eq!(r.json()["message"], json!("not served by roster"));
    // Newer than roster's table: plugins.
    for name in [
        "plugin_list",
        "plugin_detail",
        "plugin_availability",
        "plugin_status",
        "plugin_config",
    ] {
        no_route(steps, name);
    }
}
