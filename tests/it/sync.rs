//! Sync tasks end to end: real roster nodes importing from real sources (a second
//! roster node as the Nacos server, real etcd, real ZooKeeper) and from the Consul fake;
//! the API's input checks; the CLI; failover; a source going away. Eureka: a real server
//! in `java_clients::eureka`.

use std::time::Duration;

use roster_tests::{eventually, unique, Node, Resp, ADMIN_PASSWORD};
use serde_json::{json, Value};

/// A JSON request as the admin.
#[track_caller]
pub fn call_json(node: &Node, method: &str, path: &str, body: &Value) -> Resp {
    roster_tests::addresses::check_json(body);
    let url = format!("http://{}{}", node.addr(), path);
    let req = ureq::http::Request::builder()
        .method(method)
        .uri(&url)
        .header("authorization", format!("Bearer {}", node.token()))
        .header("content-type", "application/json")
        .body(body.to_string())
        .expect("request");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .run(req)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    Resp {
        status: resp.status().as_u16(),
        body: resp.body_mut().read_to_string().unwrap_or_default(),
        headers: Vec::new(),
    }
}

/// Creates a task and returns its view.
pub fn create_task(node: &Node, body: Value) -> Value {
    call_json(node, "POST", "/api/v1/sync/tasks", &body)
        .expect(201)
        .json()
}

/// The task `name` as `node` shows it.
pub fn task(node: &Node, name: &str) -> Value {
    node.call("GET", &format!("/api/v1/sync/tasks/{name}"))
        .expect(200)
        .json()
}

/// The instances of a service (all of them, healthy or not), sorted by `ip:port`.
pub fn hosts(node: &Node, namespace: &str, group: &str, service: &str) -> Vec<Value> {
    let r = node.call(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?namespaceId={namespace}&groupName={group}&serviceName={}&healthyOnly=false",
            roster_tests::enc(service)
        ),
    );
    if r.status == 404 {
        return Vec::new();
    }
    let mut hosts = r.expect(200).json()["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    hosts.sort_by_key(|h| format!("{}:{}", h["ip"], h["port"]));
    hosts
}

/// `ip:port` of each host.
pub fn addrs(hosts: &[Value]) -> Vec<String> {
    hosts
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap_or("?"), h["port"]))
        .collect()
}

/// Waits until the service has exactly `want` addresses.
pub fn wait_addrs(
    node: &Node,
    namespace: &str,
    group: &str,
    service: &str,
    want: &[&str],
) -> Vec<Value> {
    eventually(Duration::from_secs(20), || {
        let h = hosts(node, namespace, group, service);
        if addrs(&h) == want {
            Ok(h)
        } else {
            Err(format!("{service}: {:?}, want {want:?}", addrs(&h)))
        }
    })
}

/// Waits until the `index`th instance (by `ip:port`) of the service satisfies `check`.
pub fn wait_host(
    node: &Node,
    (namespace, group, service): (&str, &str, &str),
    index: usize,
    check: impl Fn(&Value) -> bool,
) {
    eventually(Duration::from_secs(30), || {
        let h = hosts(node, namespace, group, service);
        match h.get(index) {
            Some(host) if check(host) => Ok(()),
            other => Err(format!("{service}[{index}]: {other:?}")),
        }
    });
}

/// Waits until the task reports `state`.
pub fn wait_state(node: &Node, name: &str, state: &str) -> Value {
    eventually(Duration::from_secs(30), || {
        let t = task(node, name);
        if t["status"]["state"] == state {
            Ok(t)
        } else {
            Err(format!("{name}: {}", t["status"]))
        }
    })
}

#[test]
fn sync_api_rejects_bad_input_and_changes_nothing() {
    let node = Node::start();
    let post = |body: Value| call_json(&node, "POST", "/api/v1/sync/tasks", &body);
    for (body, needle) in [
        (
            json!({"name": "a b", "source": "etcd://127.0.0.1:2379"}),
            "'name'",
        ),
        (json!({"name": "t", "source": "127.0.0.1:2379"}), "'source'"),
        (
            json!({"name": "t", "source": "etcd://h:1?layout=kratoss"}),
            "unknown layout",
        ),
        (
            json!({"name": "t", "source": "consul://h:1?datacenter=x"}),
            "unknown parameter 'datacenter'",
        ),
        (
            json!({"name": "t", "source": "etcd://h:1", "holdShare": 2}),
            "'holdShare'",
        ),
        (
            json!({"name": "t", "source": "etcd://h:1", "reconcileSecs": 1}),
            "'reconcileSecs'",
        ),
        (
            json!({"name": "t", "source": "etcd://h:1", "namespace": "nope"}),
            "namespace 'nope' does not exist",
        ),
        (
            json!({"name": "t", "source": "etcd://h:1", "services": "!"}),
            "'services'",
        ),
        (
            json!({"name": "t", "source": "etcd://h:1", "colour": "red"}),
            "unknown field `colour`",
        ),
        (json!({"source": "etcd://h:1"}), "missing field `name`"),
        (
            json!({"name": "t", "source": "etcd://h:1", "group": "a b"}),
            "'group'",
        ),
    ] {
        let r = post(body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(needle), "{body}: {}", r.body);
    }
    let listed = node.call("GET", "/api/v1/sync/tasks").expect(200).json();
    assert_eq!(listed["tasks"], json!([]), "a refused task was stored");
    let created = create_task(
        &node,
        json!({"name": "t", "source": "etcd://127.0.0.1:1?username=u&password=secret"}),
    );
    assert_eq!(
        created["source"],
        "etcd://127.0.0.1:1?password=***&username=u"
    );
    let r = post(json!({"name": "t", "source": "etcd://127.0.0.1:2"})).expect(409);
    assert!(r.body.contains("already exists"), "{}", r.body);
    node.call("GET", "/api/v1/sync/tasks/none").expect(404);
    node.call("DELETE", "/api/v1/sync/tasks/none").expect(404);
    node.call("POST", "/api/v1/sync/tasks/none/pause")
        .expect(404);
    // Unauthenticated callers get nothing.
    assert_eq!(node.raw("GET", "/api/v1/sync/tasks", &[], None).status, 401);
    // A source that cannot be reached: the task says so and keeps trying.
    let t = wait_state(&node, "t", "error");
    assert!(
        t["status"]["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("unreachable"),
        "{t}"
    );
}

/// A v1 registration on `node`.
pub fn register(
    node: &Node,
    namespace: &str,
    group: &str,
    service: &str,
    ip: &str,
    port: u16,
    extra: &str,
) {
    node.call_form(
        "POST",
        "/nacos/v1/ns/instance",
        &format!("namespaceId={namespace}&groupName={group}&serviceName={service}&ip={ip}&port={port}&ephemeral=false{extra}"),
    )
    .expect(200);
}

#[test]
fn sync_from_a_nacos_source_follows_it_and_never_loops() {
    // The source "Nacos" is a second roster node, through its Nacos v1 API.
    let source = Node::start();
    let node = Node::start();
    source
        .call_form(
            "POST",
            "/nacos/v1/console/namespaces",
            "customNamespaceId=dev&namespaceName=dev",
        )
        .expect(200);
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        "customNamespaceId=dev&namespaceName=dev",
    )
    .expect(200);
    let svc = unique("orders");
    register(
        &source,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.1.0.1",
        8080,
        "&weight=2&metadata=%7B%22zone%22%3A%22a%22%7D",
    );
    register(
        &source,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.1.0.2",
        8080,
        "",
    );
    register(&source, "dev", "G1", "billing", "127.1.0.3", 9000, "");
    // A native instance already here at one of the addresses: it is left alone.
    register(
        &node,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.1.0.2",
        8080,
        "&metadata=%7B%22native%22%3A%22yes%22%7D",
    );
    let from = format!(
        "nacos://{}?username=nacos&password={ADMIN_PASSWORD}",
        source.addr()
    );
    create_task(&node, json!({"name": "from-nacos", "source": from}));
    let found = wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        &svc,
        &["127.1.0.1:8080", "127.1.0.2:8080"],
    );
    let imported = &found[0];
    assert_eq!(imported["weight"], 2.0);
    assert_eq!(imported["metadata"]["zone"], "a");
    assert_eq!(imported["metadata"]["syncSource"], "NACOS");
    assert_eq!(imported["metadata"]["sync.taskId"], "from-nacos");
    assert!(imported["metadata"]["sourceClusterId"].is_string());
    assert_eq!(
        found[1]["metadata"]["native"], "yes",
        "the native instance was overwritten"
    );
    // Namespaces and groups come across as they are at the source.
    wait_addrs(&node, "dev", "G1", "billing", &["127.1.0.3:9000"]);
    let t = wait_state(&node, "from-nacos", "running");
    assert_eq!(t["status"]["skipped"], 1, "{t}");
    // Users cannot remove an import: the task owns it.
    let r = node.call(
        "DELETE",
        &format!("/nacos/v1/ns/instance?serviceName={svc}&ip=127.1.0.1&port=8080&ephemeral=false"),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("from-nacos"), "{}", r.body);

    // Changes and removals at the source follow.
    source
        .call_form(
            "PUT",
            "/nacos/v1/ns/instance",
            &format!("serviceName={svc}&ip=127.1.0.1&port=8080&ephemeral=false&weight=5"),
        )
        .expect(200);
    wait_host(&node, ("public", "DEFAULT_GROUP", &svc), 0, |first| {
        first["weight"] == 5.0
    });
    source
        .call(
            "DELETE",
            "/nacos/v1/ns/instance?namespaceId=dev&groupName=G1&serviceName=billing&ip=127.1.0.3&port=9000&ephemeral=false",
        )
        .expect(200);
    wait_addrs(&node, "dev", "G1", "billing", &[]);

    // The way back: a task on the source reading this node imports nothing it copied.
    let back = format!(
        "nacos://{}?username=nacos&password={ADMIN_PASSWORD}",
        node.addr()
    );
    create_task(&source, json!({"name": "back", "source": back}));
    let t = wait_state(&source, "back", "running");
    assert!(
        t["status"]["copiesIgnored"].as_u64().unwrap_or(0) >= 1,
        "{t}"
    );
    assert_eq!(
        addrs(&hosts(&source, "public", "DEFAULT_GROUP", &svc)),
        ["127.1.0.1:8080", "127.1.0.2:8080"],
        "a copy was imported back"
    );

    // Deleting the task removes what it imported, and only that.
    let r = node
        .call("DELETE", "/api/v1/sync/tasks/from-nacos")
        .expect(200)
        .json();
    assert_eq!(r["removedInstances"], 1);
    wait_addrs(&node, "public", "DEFAULT_GROUP", &svc, &["127.1.0.2:8080"]);
}

#[test]
fn sync_dry_run_reports_writes_nothing_and_applies_once() {
    let source = Node::start();
    let node = Node::start();
    let svc = unique("dry");
    register(
        &source,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.2.0.1",
        80,
        "",
    );
    let from = format!(
        "nacos://{}?username=nacos&password={ADMIN_PASSWORD}",
        source.addr()
    );
    create_task(
        &node,
        json!({"name": "dry", "source": from, "dryRun": true, "group": "MIGRATED"}),
    );
    let t = eventually(Duration::from_secs(20), || {
        let t = task(&node, "dry");
        if t["status"]["dryRun"]["wouldAdd"].as_u64() >= Some(1) {
            Ok(t)
        } else {
            Err(t.to_string())
        }
    });
    let sample = t["status"]["dryRun"]["sample"].to_string();
    assert!(
        sample.contains(&format!("public/MIGRATED/{svc} 127.2.0.1:80")),
        "{sample}"
    );
    assert!(hosts(&node, "public", "MIGRATED", &svc).is_empty());

    // Apply: the dry run becomes a real import of what it reported.
    let t = call_json(&node, "POST", "/api/v1/sync/tasks/dry/apply", &json!({}))
        .expect(200)
        .json();
    assert_eq!(t["dryRun"], false, "{t}");
    assert_eq!(
        t["status"]["dryRun"],
        Value::Null,
        "the stale report goes: {t}"
    );
    wait_addrs(&node, "public", "MIGRATED", &svc, &["127.2.0.1:80"]);
    let t = wait_state(&node, "dry", "running");
    assert_eq!(t["status"]["instances"], 1, "{t}");
    // Once only; an unknown task is a 404.
    let again = call_json(&node, "POST", "/api/v1/sync/tasks/dry/apply", &json!({}));
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.body.contains("not a dry run"), "{}", again.body);
    call_json(&node, "POST", "/api/v1/sync/tasks/none/apply", &json!({})).expect(404);
}

/// Runs `roster sync ...` against `node`; returns stdout, panics on failure.
fn roster_sync_cli(node: &Node, args: &[&str]) -> String {
    let out = std::process::Command::new(roster_tests::roster_bin())
        .arg("sync")
        .args(args)
        .args(["--http", &node.addr(), "--password", ADMIN_PASSWORD])
        .output()
        .expect("run roster sync");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "roster sync {args:?}: {stdout}{stderr}"
    );
    stdout
}

#[test]
fn sync_cli_adds_lists_pauses_resumes_and_deletes() {
    let source = Node::start();
    let node = Node::start();
    let svc = unique("cli");
    register(
        &source,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.3.0.1",
        80,
        "",
    );
    let from = format!(
        "nacos://{}?username=nacos&password={ADMIN_PASSWORD}",
        source.addr()
    );
    let out = roster_sync_cli(
        &node,
        &["add", "--name", "cli", "--from", &from, "--services", &svc],
    );
    assert!(out.contains("name:       cli"), "{out}");
    assert!(out.contains("password=***"), "{out}");
    wait_addrs(&node, "public", "DEFAULT_GROUP", &svc, &["127.3.0.1:80"]);
    wait_state(&node, "cli", "running");
    let out = roster_sync_cli(&node, &["list"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("cli ") && l.contains("running")),
        "{out}"
    );
    let out = roster_sync_cli(&node, &["pause", "cli"]);
    assert!(out.contains("state:      paused"), "{out}");
    // Paused: the source's changes wait, the imports stay.
    register(
        &source,
        "public",
        "DEFAULT_GROUP",
        &svc,
        "127.3.0.2",
        80,
        "",
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        addrs(&hosts(&node, "public", "DEFAULT_GROUP", &svc)),
        ["127.3.0.1:80"]
    );
    roster_sync_cli(&node, &["resume", "cli"]);
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        &svc,
        &["127.3.0.1:80", "127.3.0.2:80"],
    );
    let out = roster_sync_cli(&node, &["--output", "json", "status", "cli"]);
    let v: Value = serde_json::from_str(&out).expect("json status");
    assert_eq!(v["status"]["instances"], 2, "{v}");
    let out = roster_sync_cli(&node, &["delete", "cli"]);
    assert!(
        out.contains("deleted cli and its 2 imported instance(s)"),
        "{out}"
    );
    wait_addrs(&node, "public", "DEFAULT_GROUP", &svc, &[]);
    // A bad URL: the CLI fails with the server's words.
    let out = std::process::Command::new(roster_tests::roster_bin())
        .args(["sync", "add", "--name", "x", "--from", "redis://h:1"])
        .args(["--http", &node.addr(), "--password", ADMIN_PASSWORD])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("400") && err.contains("unknown source scheme"),
        "{err}"
    );
}

/// A go-micro registration: one node of `service` at `address`.
fn micro(service: &str, id: &str, address: &str, zone: &str) -> String {
    json!({
        "name": service,
        "version": "latest",
        "metadata": null,
        "endpoints": [],
        "nodes": [{
            "id": id,
            "address": address,
            "metadata": {"protocol": "mucp", "registry": "etcd", "zone": zone}
        }]
    })
    .to_string()
}

fn micro_key(service: &str, id: &str) -> String {
    format!("/micro/registry/{service}/{id}")
}

#[test]
fn sync_etcd_go_micro_and_kratos_follow_the_source() {
    let etcd = roster_tests::foreign::Etcd::start();
    let node = Node::start();
    etcd.put(
        &micro_key("greeter", "greeter-1"),
        &micro("greeter", "greeter-1", "127.4.0.1:8080", "a"),
    );
    let from = format!("etcd://{}?layout=go-micro", etcd.addr());
    create_task(&node, json!({"name": "micro", "source": from}));
    let found = wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "greeter",
        &["127.4.0.1:8080"],
    );
    assert_eq!(found[0]["metadata"]["zone"], "a");
    assert_eq!(found[0]["metadata"]["syncSource"], "ETCD");
    assert_eq!(
        found[0]["metadata"]["sync.sourceInstanceId"],
        micro_key("greeter", "greeter-1")
    );
    // What roster's API would refuse (whitespace in a service name) is not imported.
    etcd.put(
        &micro_key("bad name", "bad-1"),
        &micro("bad name", "bad-1", "127.4.0.9:8080", "a"),
    );
    eventually(Duration::from_secs(20), || {
        let t = task(&node, "micro");
        if t["status"]["skipped"] == 1 {
            Ok(())
        } else {
            Err(t.to_string())
        }
    });
    let names = node
        .call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert!(!names["doms"].to_string().contains("bad name"), "{names}");
    // Added, changed, deleted at the source: reflected within seconds (by the watch).
    etcd.put(
        &micro_key("greeter", "greeter-2"),
        &micro("greeter", "greeter-2", "127.4.0.2:8080", "a"),
    );
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "greeter",
        &["127.4.0.1:8080", "127.4.0.2:8080"],
    );
    etcd.put(
        &micro_key("greeter", "greeter-1"),
        &micro("greeter", "greeter-1", "127.4.0.1:8080", "b"),
    );
    wait_host(&node, ("public", "DEFAULT_GROUP", "greeter"), 0, |first| {
        first["metadata"]["zone"] == "b"
    });
    etcd.delete(&micro_key("greeter", "greeter-2"));
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "greeter",
        &["127.4.0.1:8080"],
    );
    // A lease that runs out is a deletion too.
    etcd.put_with_lease(
        &micro_key("greeter", "greeter-3"),
        &micro("greeter", "greeter-3", "127.4.0.3:8080", "a"),
        2,
    );
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "greeter",
        &["127.4.0.1:8080", "127.4.0.3:8080"],
    );
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "greeter",
        &["127.4.0.1:8080"],
    );

    // go-kratos, into a group of its own: one instance per endpoint.
    let kratos = json!({
        "id": "k-1", "name": "orders", "version": "v1.4.2",
        "metadata": {"weight": "10", "zone": "az1"},
        "endpoints": ["http://127.4.1.1:8000", "grpc://127.4.1.1:9000"]
    });
    etcd.put("/microservices/orders/k-1", &kratos.to_string());
    let from = format!("etcd://{}?layout=kratos", etcd.addr());
    create_task(
        &node,
        json!({"name": "kratos", "source": from, "group": "KRATOS"}),
    );
    let found = wait_addrs(
        &node,
        "public",
        "KRATOS",
        "orders",
        &["127.4.1.1:8000", "127.4.1.1:9000"],
    );
    assert_eq!(found[0]["weight"], 10.0);
    assert_eq!(found[0]["metadata"]["protocol"], "http");
    assert_eq!(found[1]["metadata"]["protocol"], "grpc");
    etcd.delete("/microservices/orders/k-1");
    wait_addrs(&node, "public", "KRATOS", "orders", &[]);
}

#[test]
fn sync_etcd_going_away_deletes_nothing_and_reconcile_converges() {
    let mut etcd = roster_tests::foreign::Etcd::start();
    let node = Node::start();
    for i in 1..=2 {
        let id = format!("away-{i}");
        etcd.put(
            &micro_key("away", &id),
            &micro("away", &id, &format!("127.4.2.{i}:80"), "a"),
        );
    }
    let from = format!("etcd://{}", etcd.addr());
    create_task(
        &node,
        json!({"name": "away", "source": from, "reconcileSecs": 5}),
    );
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "away",
        &["127.4.2.1:80", "127.4.2.2:80"],
    );
    etcd.stop();
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
    assert_eq!(
        addrs(&hosts(&node, "public", "DEFAULT_GROUP", "away")),
        ["127.4.2.1:80", "127.4.2.2:80"]
    );
    etcd.start_again();
    etcd.delete(&micro_key("away", "away-1"));
    wait_addrs(&node, "public", "DEFAULT_GROUP", "away", &["127.4.2.2:80"]);
    wait_state(&node, "away", "running");
}

#[test]
fn sync_task_fails_over_with_the_leader_without_duplicates_or_losses() {
    let etcd = roster_tests::foreign::Etcd::start();
    for i in 1..=3 {
        let id = format!("fo-{i}");
        etcd.put(
            &micro_key("failover", &id),
            &micro("failover", &id, &format!("127.4.3.{i}:80"), "a"),
        );
    }
    let mut cluster = roster_tests::Cluster::start(3, &[]);
    let follower = cluster.follower();
    let from = format!("etcd://{}", etcd.addr());
    create_task(
        &cluster.nodes[follower],
        json!({"name": "fo", "source": from}),
    );
    let all3 = ["127.4.3.1:80", "127.4.3.2:80", "127.4.3.3:80"];
    for node in &cluster.nodes {
        wait_addrs(node, "public", "DEFAULT_GROUP", "failover", &all3);
    }
    let old = cluster.leader();
    let t = wait_state(&cluster.nodes[follower], "fo", "running");
    assert_eq!(t["status"]["runner"], (old + 1) as u64, "{t}");
    cluster.nodes[old].kill();
    // Changes while the leadership moves: the next leader's runner picks them up.
    etcd.put(
        &micro_key("failover", "fo-4"),
        &micro("failover", "fo-4", "127.4.3.4:80", "a"),
    );
    etcd.delete(&micro_key("failover", "fo-1"));
    let new = cluster.leader();
    assert_ne!(new, old);
    let want = ["127.4.3.2:80", "127.4.3.3:80", "127.4.3.4:80"];
    for (i, node) in cluster.nodes.iter().enumerate() {
        if i != old {
            let h = wait_addrs(node, "public", "DEFAULT_GROUP", "failover", &want);
            assert_eq!(h.len(), 3, "duplicates on node {}", i + 1);
        }
    }
    eventually(Duration::from_secs(20), || {
        let t = task(&cluster.nodes[new], "fo");
        if t["status"]["runner"] == (new + 1) as u64 && t["status"]["instances"] == 3 {
            Ok(())
        } else {
            Err(t.to_string())
        }
    });
}

/// A Dubbo 2.x provider node name: the URL-encoded provider URL.
fn dubbo_node(ip: &str, port: u16) -> String {
    let url = format!(
        "dubbo://{ip}:{port}/org.example.DemoService?anyhost=true&application=demo&group=g1&interface=org.example.DemoService&methods=hello&release=2.7.23&side=provider&version=1.0.0&weight=200"
    );
    format!(
        "/dubbo/org.example.DemoService/providers/{}",
        form_encode(&url)
    )
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn sync_zookeeper_dubbo_and_spring_cloud_follow_the_source() {
    use roster_tests::foreign::{zk_create, zk_delete, ExpiringSession, ZooKeeper};
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let zookeeper = ZooKeeper::start();
    let node = Node::start();
    let client = rt.block_on(zookeeper.client());
    let first = dubbo_node("127.5.0.1", 20880);
    rt.block_on(zk_create(
        &client,
        &first,
        b"",
        zookeeper_client::CreateMode::Persistent,
    ));
    let from = format!("zookeeper://{}?layout=dubbo", zookeeper.addr());
    create_task(&node, json!({"name": "dubbo", "source": from}));
    let svc = "providers:org.example.DemoService:1.0.0:g1";
    let found = wait_addrs(&node, "public", "DEFAULT_GROUP", svc, &["127.5.0.1:20880"]);
    assert_eq!(found[0]["weight"], 200.0);
    assert_eq!(found[0]["metadata"]["application"], "demo");
    assert_eq!(found[0]["metadata"]["syncSource"], "ZK");
    // A provider on an ephemeral node; its host drops off the network and ZooKeeper
    // expires its session: the node and the import go.
    let session = rt.block_on(ExpiringSession::open(&zookeeper, Duration::from_secs(2)));
    rt.block_on(session.create_ephemeral(&dubbo_node("127.5.0.2", 20880), b""));
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        svc,
        &["127.5.0.1:20880", "127.5.0.2:20880"],
    );
    session.cut();
    wait_addrs(&node, "public", "DEFAULT_GROUP", svc, &["127.5.0.1:20880"]);
    rt.block_on(zk_delete(&client, &first));
    wait_addrs(&node, "public", "DEFAULT_GROUP", svc, &[]);

    // Spring Cloud Zookeeper (Curator JSON under /services), into its own group.
    let instance = json!({
        "name": "order-service", "id": "6d4e5121", "address": "127.5.1.1", "port": 8080,
        "sslPort": null,
        "payload": {
            "@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
            "id": "order-service-1", "name": "order-service",
            "metadata": {"instance_status": "UP", "zone": "az1"}
        },
        "registrationTimeUTC": 1610116500446u64, "serviceType": "DYNAMIC", "uriSpec": null
    });
    let path = "/services/order-service/6d4e5121";
    rt.block_on(zk_create(
        &client,
        path,
        instance.to_string().as_bytes(),
        zookeeper_client::CreateMode::Persistent,
    ));
    let from = format!("zookeeper://{}?layout=spring-cloud", zookeeper.addr());
    create_task(
        &node,
        json!({"name": "spring", "source": from, "group": "SC"}),
    );
    let found = wait_addrs(&node, "public", "SC", "order-service", &["127.5.1.1:8080"]);
    assert_eq!(found[0]["metadata"]["zone"], "az1");
    rt.block_on(zk_delete(&client, path));
    wait_addrs(&node, "public", "SC", "order-service", &[]);
}

#[test]
fn sync_consul_fake_follows_registrations_and_health() {
    // No Consul server can be installed here: a fake replays its documented API.
    use roster_tests::fixtures::{ConsulService, FakeConsul};
    let consul = FakeConsul::start();
    let node = Node::start();
    consul.register(ConsulService::new("payments", "127.6.0.1", 8080));
    create_task(&node, json!({"name": "consul", "source": consul.url()}));
    let found = wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "payments",
        &["127.6.0.1:8080"],
    );
    assert_eq!(found[0]["healthy"], true);
    assert_eq!(found[0]["metadata"]["syncSource"], "CONSUL");
    consul.register(ConsulService::new("payments", "127.6.0.2", 8080));
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "payments",
        &["127.6.0.1:8080", "127.6.0.2:8080"],
    );
    let second = ConsulService::new("payments", "127.6.0.2", 8080);
    assert!(consul.set_status(&second.node, &second.id, "critical"));
    wait_host(&node, ("public", "DEFAULT_GROUP", "payments"), 1, |s| {
        s["healthy"] == false
    });
    assert!(consul.deregister(&second.node, &second.id));
    wait_addrs(
        &node,
        "public",
        "DEFAULT_GROUP",
        "payments",
        &["127.6.0.1:8080"],
    );
}
