//! The Eureka sync source against a real Eureka server: the Spring Cloud Netflix Eureka
//! server (Spring Cloud 2025.0.0, Eureka 2.0.4), standalone on loopback, with instances
//! registered, renewed, changed and cancelled by the real Eureka client (`DiscoveryClient`,
//! one JVM holding several instances). Programs: `tests/clients/java/eureka/`.
//!
//! The server logs every read of `/eureka/apps` and `/eureka/apps/delta` as a step line,
//! so a test sees how the task read it: one full fetch, then deltas whose hash always
//! matched (a mismatch would list again). What the real server cannot be made to do —
//! basic auth, an HTTP 500, malformed answers — stays on the fake (`sync_fakes.rs`).

use std::time::Duration;

use roster_sync::{Filter, ServiceName, Snapshot, Source, SourceInstance, Update};
use roster_tests::{eventually, free_port, json, source_addrs, Node, Value};

use super::{java, Running};
use crate::sync::{addrs, create_task, hosts, task, wait_addrs, wait_host, wait_state};

const MODULE: &str = "eureka";
/// Spring Boot starts in 5-20 s on a loaded 2-core machine: a JVM gets this long to be up.
const START: Duration = Duration::from_secs(90);
/// How long a command of the instance program may take (the server shows its effect).
const COMMAND: Duration = Duration::from_secs(30);
/// Eviction of a lapsed lease (3 s lease: Eureka evicts after twice that, sweeping every
/// second) plus the task's delta poll (5 s), with room for a loaded machine.
const EVICTED_WITHIN: Duration = Duration::from_secs(45);

/// A Eureka server started on a free loopback port (not waited for), and the port.
fn eureka_server() -> (Running, u16) {
    let port = free_port();
    let mut cmd = java(MODULE, "org.roster.clients.eureka.EurekaServer");
    cmd.args(["--port", &port.to_string(), "--seconds", "240"]);
    (Running::start(cmd, "Eureka server"), port)
}

/// The instance program, pointed at the server on `port` (not waited for).
fn instance_program(port: u16) -> Running {
    let mut cmd = java(MODULE, "org.roster.clients.eureka.EurekaInstances");
    cmd.args(["--server", &format!("http://127.0.0.1:{port}/eureka/")])
        .args(["--seconds", "240"]);
    Running::start(cmd, "Eureka instances")
}

/// Sends `command` to the instance program and waits for its `step` about `id`.
fn act(instances: &mut Running, command: &str, step: &str, id: &str) -> Value {
    instances.send(command);
    let line = instances.wait_for(&format!("{step} {id}"), COMMAND, |v| {
        v["ok"] == false || (v["step"] == step && v["id"] == id)
    });
    assert_eq!(line["ok"], true, "{command}: {line}");
    line
}

/// The reads of `path` (`/eureka/apps` or `/eureka/apps/delta`) the server logged so far.
fn reads(server: &mut Running, path: &str) -> Vec<Value> {
    server
        .drain()
        .iter()
        .filter(|v| v["step"] == "request" && v["path"] == path)
        .cloned()
        .collect()
}

/// Whether the server has the instance (`GET /eureka/apps/APP/ID`).
fn server_has(port: u16, app: &str, id: &str) -> bool {
    let url = format!("http://127.0.0.1:{port}/eureka/apps/{app}/{id}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let resp = agent
        .get(&url)
        .header("accept", "application/json")
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    resp.status().as_u16() == 200
}

/// The imported instance of `inventory` at `ip:8080` in `cluster` (disabled or not);
/// `None` when roster has no such instance.
fn imported(node: &Node, ip: &str, cluster: &str) -> Option<Value> {
    let r = node.call(
        "GET",
        &format!(
            "/nacos/v1/ns/instance?serviceName=inventory&ip={ip}&port=8080&clusterName={cluster}"
        ),
    );
    (r.status == 200).then(|| r.json())
}

#[test]
fn eureka_real_server_imported_followed_through_deltas_and_lease_expiry() {
    let (mut server, port) = eureka_server();
    let mut instances = instance_program(port);
    let node = Node::start();
    server.wait_step("ready", START);
    instances.wait_step("started", START);

    act(
        &mut instances,
        "register inventory 127.7.0.1 8080 inv-1 zone=az1 weight=5 version=1.2",
        "registered",
        "inv-1",
    );
    let source = format!("eureka://127.0.0.1:{port}/eureka");
    // No full reconcile during the test: every change must come through a delta.
    create_task(
        &node,
        json!({"name": "eureka", "source": source, "reconcileSecs": 3600}),
    );
    let svc = ("public", "DEFAULT_GROUP", "inventory");
    let found = wait_addrs(&node, svc.0, svc.1, svc.2, &["127.7.0.1:8080"]);
    let first = &found[0];
    assert_eq!(first["healthy"], true, "UP is healthy: {first}");
    assert_eq!(first["enabled"], true, "{first}");
    assert_eq!(first["weight"], 5.0, "metadata.weight: {first}");
    assert_eq!(first["clusterName"], "az1", "metadata.zone: {first}");
    let m = &first["metadata"];
    assert_eq!(m["version"], "1.2", "{first}");
    assert_eq!(m["syncSource"], "EUREKA", "{first}");
    assert_eq!(m["eureka.app"], "INVENTORY", "{first}");
    assert_eq!(m["eureka.instanceId"], "inv-1", "{first}");
    assert_eq!(m["eureka.vipAddress"], "inventory", "{first}");
    assert_eq!(m["eureka.status"], "UP", "{first}");
    assert_eq!(m["sync.sourceInstanceId"], "inv-1", "{first}");
    assert_eq!(m["healthCheckUrl"], "http://127.7.0.1:8080/actuator/health");
    assert!(m.get("@class").is_none(), "{first}");

    // Changes after the first full fetch: a registration, the client's own DOWN, an
    // operator's OUT_OF_SERVICE override, a cancel.
    act(
        &mut instances,
        "register inventory 127.7.0.2 8080 inv-2 zone=az2",
        "registered",
        "inv-2",
    );
    wait_addrs(
        &node,
        svc.0,
        svc.1,
        svc.2,
        &["127.7.0.1:8080", "127.7.0.2:8080"],
    );
    act(&mut instances, "status inv-2 DOWN", "status", "inv-2");
    wait_host(&node, svc, 1, |h| {
        h["healthy"] == false && h["enabled"] == true && h["metadata"]["eureka.status"] == "DOWN"
    });
    act(&mut instances, "status inv-2 UP", "status", "inv-2");
    wait_host(&node, svc, 1, |h| h["healthy"] == true);
    act(&mut instances, "cancel inv-2", "cancelled", "inv-2");
    wait_addrs(&node, svc.0, svc.1, svc.2, &["127.7.0.1:8080"]);
    // OUT_OF_SERVICE: disabled (and not healthy: only UP is). Disabled instances are not
    // in the v1 list: the instance itself is read.
    act(
        &mut instances,
        "override inv-1 OUT_OF_SERVICE",
        "override",
        "inv-1",
    );
    eventually(COMMAND, || match imported(&node, "127.7.0.1", "az1") {
        Some(i) if i["enabled"] == false && i["metadata"]["eureka.status"] == "OUT_OF_SERVICE" => {
            Ok(())
        }
        other => Err(format!("inv-1 not disabled yet: {other:?}")),
    });

    // A lease that lapses: the client stops renewing without cancelling; Eureka evicts the
    // instance, and the sync removes it.
    act(
        &mut instances,
        "stop-renewing inv-1",
        "stopped-renewing",
        "inv-1",
    );
    assert!(
        server_has(port, "INVENTORY", "inv-1"),
        "not cancelled: the lease is still there"
    );
    eventually(EVICTED_WITHIN, || {
        if server_has(port, "INVENTORY", "inv-1") {
            Err("Eureka has not evicted inv-1 yet".to_string())
        } else {
            Ok(())
        }
    });
    eventually(EVICTED_WITHIN, || {
        match imported(&node, "127.7.0.1", "az1") {
            None => Ok(()),
            Some(i) => Err(format!("still imported: {i}")),
        }
    });
    assert!(hosts(&node, svc.0, svc.1, svc.2).is_empty());

    // One full fetch, every later change through a delta, and no hash mismatch (which
    // would have listed again).
    let full = reads(&mut server, "/eureka/apps");
    let deltas = reads(&mut server, "/eureka/apps/delta");
    assert_eq!(full.len(), 1, "full fetches: {full:?}");
    assert!(deltas.len() >= 6, "delta fetches: {}", deltas.len());
    for read in full.iter().chain(&deltas) {
        assert_eq!(read["status"], 200, "{read}");
        assert_eq!(read["accept"], "application/json", "{read}");
    }
    let t = task(&node, "eureka");
    assert_eq!(t["status"]["state"], "running", "{t}");
}

#[test]
fn eureka_real_server_killed_deletes_nothing() {
    let (mut server, port) = eureka_server();
    let mut instances = instance_program(port);
    let node = Node::start();
    server.wait_step("ready", START);
    instances.wait_step("started", START);
    for (ip, id) in [("127.7.1.1", "pay-1"), ("127.7.1.2", "pay-2")] {
        act(
            &mut instances,
            &format!("register payments {ip} 9000 {id}"),
            "registered",
            id,
        );
    }
    let source = format!("eureka://127.0.0.1:{port}/eureka");
    create_task(
        &node,
        json!({"name": "away", "source": source, "reconcileSecs": 5}),
    );
    let want = ["127.7.1.1:9000", "127.7.1.2:9000"];
    wait_addrs(&node, "public", "DEFAULT_GROUP", "payments", &want);

    server.kill();
    let t = wait_state(&node, "away", "error");
    assert!(
        t["status"]["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable"),
        "{t}"
    );
    // Past a full reconcile interval: the source is gone, its instances are not.
    std::thread::sleep(Duration::from_secs(6));
    let h = hosts(&node, "public", "DEFAULT_GROUP", "payments");
    assert_eq!(addrs(&h), want);
    assert!(h.iter().all(|i| i["healthy"] == true), "{h:?}");
    let t = task(&node, "away");
    assert_eq!(t["status"]["state"], "error", "{t}");
}

// ---------------------------------------------------------------------------------------
// The source itself (`roster_sync::open`), driven step by step

/// The instance at `ip:port` of `service`.
fn instance<'a>(snapshot: &'a Snapshot, service: &str, addr: &str) -> &'a SourceInstance {
    snapshot
        .services
        .get(&ServiceName::plain(service))
        .unwrap_or_else(|| panic!("no service {service} in {:?}", snapshot.services))
        .iter()
        .find(|i| format!("{}:{}", i.ip, i.port) == addr)
        .unwrap_or_else(|| panic!("no {addr} in {service}"))
}

/// Watches until the answer is not an empty change set; within 20 s.
fn next_update(rt: &tokio::runtime::Runtime, source: &mut dyn Source) -> Update {
    rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, source.watch()).await {
                Err(_) => panic!("no update within 20 s"),
                Ok(Ok(Update::Services(c))) if c.is_empty() => continue,
                Ok(Ok(update)) => return update,
                Ok(Err(e)) => panic!("watch: {e:?}"),
            }
        }
    })
}

#[test]
fn eureka_real_server_source_lists_applies_deltas_and_resyncs() {
    let (mut server, port) = eureka_server();
    let mut instances = instance_program(port);
    server.wait_step("ready", START);
    instances.wait_step("started", START);
    act(
        &mut instances,
        "register order-service 127.7.2.1 8080 order-1 zone=az1 weight=5 management.port=8081",
        "registered",
        "order-1",
    );
    act(
        &mut instances,
        "register payment-service 127.7.2.7 9000 pay-1",
        "registered",
        "pay-1",
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = format!("eureka://127.0.0.1:{port}/eureka").parse().unwrap();
    let mut source = roster_sync::open(&url, &Filter::all()).unwrap();

    let snapshot = rt.block_on(source.list()).unwrap();
    let names: Vec<&str> = snapshot.services.keys().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["order-service", "payment-service"]);
    let order = instance(&snapshot, "order-service", "127.7.2.1:8080");
    assert!(order.healthy && order.enabled);
    assert_eq!((order.weight, order.cluster.as_str()), (5.0, "az1"));
    assert_eq!(order.source_id, "order-1");
    assert_eq!(order.metadata["management.port"], "8081");
    assert_eq!(order.metadata["eureka.app"], "ORDER-SERVICE");
    assert_eq!(order.metadata["secure"], "false");
    let pay = instance(&snapshot, "payment-service", "127.7.2.7:9000");
    assert_eq!((pay.weight, pay.cluster.as_str()), (1.0, "DEFAULT"));
    assert!(!pay.metadata.contains_key("@class"), "{:?}", pay.metadata);

    // A registration and a status change arrive through the delta (one poll, or two).
    act(
        &mut instances,
        "register order-service 127.7.2.2 8080 order-2",
        "registered",
        "order-2",
    );
    act(&mut instances, "status pay-1 STARTING", "status", "pay-1");
    let mut changes = match next_update(&rt, source.as_mut()) {
        Update::Services(c) => c,
        other => panic!("expected changes, got {other:?}"),
    };
    // The two changes may straddle two polls.
    if changes.len() < 2 {
        if let Update::Services(more) = next_update(&rt, source.as_mut()) {
            changes.extend(more);
        }
    }
    assert_eq!(
        source_addrs(&changes[&ServiceName::plain("order-service")]),
        ["127.7.2.1:8080", "127.7.2.2:8080"]
    );
    let pay = &changes[&ServiceName::plain("payment-service")][0];
    assert!(!pay.healthy && pay.enabled, "STARTING: {pay:?}");
    assert_eq!(reads(&mut server, "/eureka/apps").len(), 1, "no full fetch");
    // The same changes stay in the delta (for 180 s): delivered again, they change nothing.
    let quiet = rt.block_on(async {
        let again = async {
            loop {
                match source.watch().await {
                    Ok(Update::Services(c)) if c.is_empty() => continue,
                    other => return other,
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(7), again).await
    });
    assert!(quiet.is_err(), "a re-delivered delta reported: {quiet:?}");

    // A change that leaves the delta before the source polls: the hash no longer matches
    // and the source asks for a resync; a list then has it.
    server.send("delta-retention-ms 300");
    server.wait_step("set", COMMAND);
    act(
        &mut instances,
        "register order-service 127.7.2.3 8080 order-3",
        "registered",
        "order-3",
    );
    // The client registers again a second after it starts (its replicator's first run):
    // both have left the delta after this.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        matches!(next_update(&rt, source.as_mut()), Update::Resync),
        "a lost change resyncs"
    );
    let snapshot = rt.block_on(source.list()).unwrap();
    assert_eq!(
        source_addrs(&snapshot.services[&ServiceName::plain("order-service")]),
        ["127.7.2.1:8080", "127.7.2.2:8080", "127.7.2.3:8080"]
    );

    // Deltas disabled on the server (403): a resync, and lists still work.
    server.send("disable-delta true");
    server.wait_for("deltas disabled", COMMAND, |v| {
        v["step"] == "set" && v["disableDelta"] == true
    });
    assert!(matches!(next_update(&rt, source.as_mut()), Update::Resync));
    // The server logs a read after its filter chain returns, which can be after the source
    // has the answer: wait (bounded) for the 403 to appear in the log.
    let mut denied = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !denied.iter().any(|r: &Value| r["status"] == 403) && std::time::Instant::now() < until {
        denied.extend(reads(&mut server, "/eureka/apps/delta"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        denied.iter().any(|r| r["status"] == 403),
        "no delta read answered 403: {denied:?}"
    );
    assert_eq!(rt.block_on(source.list()).unwrap().services.len(), 2);
}
