//! The web console: how a node serves it (types, caching, compression, redirects, no
//! credentials needed for the files but still for the API), the event stream it listens
//! to (service changes; namespace, user and sync task changes, on every node, for
//! those who may see them), and the whole console driven in Debian's Chromium by
//! `tests/console/` (playwright-core): log in, namespaces, a live registration, edits
//! read back through the API, Chinese, refusals, sync tasks, changes made through the
//! API showing up without a reload, navigation refetching, configurations (created,
//! edited through a diff, rolled back, a stale edit refused, exported as a zip and
//! imported back, their long-poll listeners listed, deleted), roles and permissions
//! granted in the UI, the audit page, every page fitting a 1366 × 768 screen with all its
//! actions visible in English and Chinese (an imported instance's badge, the users page's
//! disabled Delete, translated errors and roles, a dry run applied from its report), the
//! service page's sample code, metadata filter and batch take-offline, the services
//! page's unhealthy filter (and the catalog parameters behind the last two), axe-core
//! finding nothing serious on any screenshot, and the console of a user who is not an
//! admin. Screenshots land in `target/console-screenshots/`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{enc, json, workspace_root, Cluster, Node, NodeOptions, Value, ADMIN_PASSWORD};

use crate::sync::call_json;

/// The hashed script the page loads.
fn script_path(node: &Node) -> String {
    let page = node.raw("GET", "/", &[], None).expect(200).body;
    let start = page
        .find("/assets/")
        .unwrap_or_else(|| panic!("the page loads assets: {page}"));
    let end = start + page[start..].find('"').expect("quoted asset path");
    let path = &page[start..end];
    assert!(path.ends_with(".js") || path.ends_with(".css"), "{path}");
    // Prefer the script.
    match page.match_indices("/assets/").find_map(|(i, _)| {
        let end = i + page[i..].find('"')?;
        page[i..end]
            .ends_with(".js")
            .then(|| page[i..end].to_string())
    }) {
        Some(js) => js,
        None => path.to_string(),
    }
}

#[test]
fn the_console_is_served_cached_and_compressed() {
    let node = Node::start();
    // The page, without credentials, with its security headers.
    let page = node.raw("GET", "/", &[], None).expect(200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("default-src 'self'"));
    let etag = page.header("etag").expect("an etag").to_string();
    let again = node.raw("GET", "/", &[("if-none-match", &etag)], None);
    assert_eq!(again.status, 304);

    // Hashed assets: the right type, cached for a year, gzipped when asked.
    let js = script_path(&node);
    let plain = node.raw("GET", &js, &[], None).expect(200);
    assert!(
        plain.header("content-type").unwrap().contains("javascript"),
        "{:?}",
        plain.header("content-type")
    );
    assert_eq!(
        plain.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(plain.header("content-encoding"), None);
    let raw = raw_get(&node, &js, "gzip");
    assert!(raw.contains("content-encoding: gzip"), "{raw}");

    // Nacos' console address leads here; unknown files are 404; the API stays guarded.
    let moved = raw_get(&node, "/nacos/", "identity");
    assert!(
        moved.starts_with("http/1.1 308") && moved.contains("location: /\r\n"),
        "{moved}"
    );
    assert_eq!(
        node.raw("GET", "/assets/no-such-file.js", &[], None).status,
        404
    );
    assert_eq!(
        node.raw("GET", "/nacos/v1/ns/instance/list?serviceName=x", &[], None)
            .status,
        401
    );
}

/// The response head of a GET with `accept-encoding`, lower-cased (ureq decodes gzip
/// by itself, so this asks by hand).
fn raw_get(node: &Node, path: &str, encoding: &str) -> String {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {}\r\naccept-encoding: {encoding}\r\nconnection: close\r\n\r\n",
        node.addr()
    )
    .unwrap();
    let mut head = String::new();
    let mut reader = BufReader::new(s);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line.to_lowercase());
    }
    head
}

/// Opens the event stream of `namespace` and returns a reader of its lines.
fn open_events(node: &Node, namespace: &str) -> BufReader<TcpStream> {
    open_stream(node, &format!("namespaceId={namespace}"), &node.token())
}

/// Opens `GET /api/v1/events?<query>` as the holder of `token` and returns a reader of
/// its lines.
fn open_stream(node: &Node, query: &str, token: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /api/v1/events?{query}&accessToken={token} HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    reader
}

/// The next event of any kind: its name and data.
fn next_event(reader: &mut BufReader<TcpStream>) -> (String, Value) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut name = None;
    while Instant::now() < deadline {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line within 10 s");
        if let Some(n) = line.strip_prefix("event: ") {
            name = Some(n.trim().to_string());
        } else if let (Some(n), Some(data)) = (&name, line.strip_prefix("data: ")) {
            let data = serde_json::from_str(data.trim()).expect("JSON data");
            return (n.clone(), data);
        }
    }
    panic!("no event within 10 s");
}

/// Passes what `stream` (which follows namespaces) carries from before the test: what
/// the node did just before it was ready (the admin's creation) may still be on its
/// way, in one batch with a change made now. So: two changes of namespace `id` through
/// `node`, one after the other, and everything up to the second.
fn settle(node: &Node, stream: &mut BufReader<TcpStream>, id: &str) {
    let changed = ("namespace".to_string(), json!({ "namespaceId": id }));
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        &format!("customNamespaceId={id}&namespaceName=settle"),
    )
    .expect(200);
    while next_event(stream) != changed {}
    node.call_form(
        "PUT",
        "/nacos/v1/console/namespaces",
        &format!("namespace={id}&namespaceShowName=settled"),
    )
    .expect(200);
    while next_event(stream) != changed {}
}

/// Logs in as `username` and returns the token.
fn login_as(node: &Node, username: &str, password: &str) -> String {
    node.raw(
        "POST",
        &format!("/nacos/v1/auth/login?username={username}&password={password}"),
        &[],
        None,
    )
    .expect(200)
    .json()["accessToken"]
        .as_str()
        .expect("token")
        .to_string()
}

/// The status of a stream that is refused (an accepted one would never end).
fn refused_stream(node: &Node, query: &str, token: &str) -> u16 {
    node.raw(
        "GET",
        &format!("/api/v1/events?{query}&accessToken={token}"),
        &[],
        None,
    )
    .status
}

/// A sync task that never runs (paused; its source is a closed loopback port).
fn paused_task(name: &str) -> Value {
    json!({"name": name, "source": "etcd://127.0.0.1:1?layout=go-micro", "paused": true})
}

/// The next `event: service` data line.
fn next_service_event(reader: &mut BufReader<TcpStream>) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut saw_event = false;
    while Instant::now() < deadline {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a line within 10 s");
        if line.starts_with("event: service") {
            saw_event = true;
        } else if saw_event && line.starts_with("data: ") {
            return line["data: ".len()..].trim().to_string();
        }
    }
    panic!("no service event within 10 s");
}

#[test]
fn the_event_stream_reports_changes_of_its_namespace() {
    let node = Node::start();
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        "customNamespaceId=ev-ns&namespaceName=events",
    )
    .expect(200);
    let mut stream = open_events(&node, "ev-ns");
    // A change elsewhere is not reported; one here is.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=elsewhere&ip=127.7.0.1&port=1",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?namespaceId=ev-ns&groupName=G&serviceName=here&ip=127.7.0.2&port=1",
    )
    .expect(200);
    let data: serde_json::Value = serde_json::from_str(&next_service_event(&mut stream)).unwrap();
    assert_eq!(
        data,
        roster_tests::json!({"namespaceId":"ev-ns","groupName":"G","serviceName":"here"})
    );
    // Settings changes too.
    node.call(
        "PUT",
        "/nacos/v1/ns/service?namespaceId=ev-ns&groupName=G&serviceName=here&protectThreshold=0.5",
    )
    .expect(200);
    let data: serde_json::Value = serde_json::from_str(&next_service_event(&mut stream)).unwrap();
    assert_eq!(data["serviceName"], "here");

    // Credentials are required, a bad namespace is a 400.
    assert_eq!(node.raw("GET", "/api/v1/events", &[], None).status, 401);
    let bad = node.call("GET", "/api/v1/events?namespaceId=bad%20id");
    assert_eq!(bad.status, 400, "{}", bad.body);

    // A node shutting down ends the stream instead of waiting for it.
    let mut node = node;
    let started = Instant::now();
    let status = node.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?} with a stream open",
        started.elapsed()
    );
}

#[test]
fn the_event_stream_reports_catalog_changes_to_those_who_may_see_them() {
    let node = Node::start();
    // Every kind (the default for an admin).
    let admin_token = node.token();
    let mut admin = open_stream(&node, "", &admin_token);
    settle(&node, &mut admin, "cat-start");
    // Users: admins hear that users changed, and nothing else about them.
    node.call(
        "POST",
        "/nacos/v1/auth/users?username=viewer&password=viewer-pass-1",
    )
    .expect(200);
    assert_eq!(next_event(&mut admin), ("user".to_string(), json!({})));
    // The viewer may read every namespace (a role and a grant: more `user` events for
    // the admin's stream, drained by settling).
    node.call("POST", "/nacos/v1/auth/roles?role=viewers&username=viewer")
        .expect(200);
    node.call(
        "POST",
        "/nacos/v1/auth/permissions?role=viewers&resource=*%3A*%3A*&action=r",
    )
    .expect(200);
    settle(&node, &mut admin, "cat-granted");
    // What a non-admin may see (the default for them); one kind.
    let viewer_token = login_as(&node, "viewer", "viewer-pass-1");
    let mut viewer = open_stream(&node, "", &viewer_token);
    let mut namespaces_only = open_stream(&node, "kinds=namespace", &admin_token);
    // User and task events need an admin, as the API that lists them does.
    assert_eq!(refused_stream(&node, "kinds=user", &viewer_token), 403);
    assert_eq!(
        refused_stream(&node, "kinds=service,task", &viewer_token),
        403
    );
    assert_eq!(refused_stream(&node, "kinds=bogus", &admin_token), 400);

    // A service change reaches the streams that follow services, of every namespace.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=cat-svc&ip=127.7.1.1&port=1",
    )
    .expect(200);
    let service = (
        "service".to_string(),
        json!({"namespaceId": "public", "groupName": "DEFAULT_GROUP", "serviceName": "cat-svc"}),
    );
    assert_eq!(next_event(&mut admin), service);
    assert_eq!(next_event(&mut viewer), service);
    // Gone again, so that its expiry cannot interleave with what follows.
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=cat-svc&ip=127.7.1.1&port=1",
    )
    .expect(200);
    assert_eq!(next_event(&mut admin), service);
    assert_eq!(next_event(&mut viewer), service);

    // Namespaces: everyone sees them come, change and go.
    let ns_event = ("namespace".to_string(), json!({"namespaceId": "cat-ns"}));
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        "customNamespaceId=cat-ns&namespaceName=catalog",
    )
    .expect(200);
    for stream in [&mut admin, &mut viewer, &mut namespaces_only] {
        assert_eq!(next_event(stream), ns_event);
    }

    node.call(
        "POST",
        "/nacos/v1/auth/users?username=other&password=other-pass-1",
    )
    .expect(200);
    assert_eq!(next_event(&mut admin), ("user".to_string(), json!({})));
    node.call(
        "PUT",
        "/nacos/v1/auth/users?username=other&newPassword=other-pass-2",
    )
    .expect(200);
    assert_eq!(next_event(&mut admin), ("user".to_string(), json!({})));

    // Sync tasks: created, paused, resumed, deleted.
    let task_event = ("task".to_string(), json!({"name": "cat-task"}));
    call_json(
        &node,
        "POST",
        "/api/v1/sync/tasks",
        &paused_task("cat-task"),
    )
    .expect(201);
    assert_eq!(next_event(&mut admin), task_event);
    call_json(
        &node,
        "POST",
        "/api/v1/sync/tasks/cat-task/pause",
        &json!({}),
    )
    .expect(200);
    assert_eq!(next_event(&mut admin), task_event);
    node.call("DELETE", "/api/v1/sync/tasks/cat-task")
        .expect(200);
    assert_eq!(next_event(&mut admin), task_event);

    // The viewer's and the namespace stream's next event is the next namespace change:
    // no user, task or service event came to them in between.
    node.call_form(
        "PUT",
        "/nacos/v1/console/namespaces",
        "namespace=cat-ns&namespaceShowName=renamed",
    )
    .expect(200);
    for stream in [&mut admin, &mut viewer, &mut namespaces_only] {
        assert_eq!(next_event(stream), ns_event, "renamed");
    }
    // (Waited for: two changes within 100 ms coalesce into one event.)
    node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=cat-ns")
        .expect(200);
    for stream in [&mut admin, &mut viewer, &mut namespaces_only] {
        assert_eq!(next_event(stream), ns_event, "deleted");
    }
    node.call("DELETE", "/nacos/v1/auth/users?username=other")
        .expect(200);
    assert_eq!(next_event(&mut admin), ("user".to_string(), json!({})));
}

#[test]
fn catalog_events_reach_the_streams_of_every_node() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.leader();
    // Watch one follower; change things through the other (which forwards to the leader).
    let watched = &cluster.nodes[(leader + 1) % 3];
    let through = &cluster.nodes[(leader + 2) % 3];
    let mut stream = open_stream(watched, "kinds=namespace,user,task", &watched.token());
    settle(through, &mut stream, "far-start");

    through
        .call_form(
            "POST",
            "/nacos/v1/console/namespaces",
            "customNamespaceId=far-ns&namespaceName=far",
        )
        .expect(200);
    assert_eq!(
        next_event(&mut stream),
        ("namespace".to_string(), json!({"namespaceId": "far-ns"}))
    );
    through
        .call(
            "POST",
            "/nacos/v1/auth/users?username=far-user&password=far-user-pass",
        )
        .expect(200);
    assert_eq!(next_event(&mut stream), ("user".to_string(), json!({})));
    call_json(
        through,
        "POST",
        "/api/v1/sync/tasks",
        &paused_task("far-task"),
    )
    .expect(201);
    assert_eq!(
        next_event(&mut stream),
        ("task".to_string(), json!({"name": "far-task"}))
    );
    // And through the leader itself.
    cluster.nodes[leader]
        .call("DELETE", "/api/v1/sync/tasks/far-task")
        .expect(200);
    assert_eq!(
        next_event(&mut stream),
        ("task".to_string(), json!({"name": "far-task"}))
    );
}

/// The names of a catalog answer's services, in order.
fn catalog_names(node: &Node, query: &str) -> (u64, Vec<String>) {
    let v = node
        .call("GET", &format!("/nacos/v1/ns/catalog/services?{query}"))
        .expect(200)
        .json();
    let names = v["serviceList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    (v["count"].as_u64().unwrap(), names)
}

/// The ports of a catalog instances answer, sorted.
fn catalog_ports(node: &Node, query: &str) -> (u64, Vec<u64>) {
    let v = node
        .call("GET", &format!("/nacos/v1/ns/catalog/instances?{query}"))
        .expect(200)
        .json();
    let mut ports: Vec<u64> = v["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["port"].as_u64().unwrap())
        .collect();
    ports.sort_unstable();
    (v["count"].as_u64().unwrap(), ports)
}

#[test]
fn the_catalog_filters_unhealthy_services_and_instances_by_selector() {
    let node = Node::start();
    // Health set by hand (checker NONE) so nothing probes the loopback ports.
    for svc in ["cat-a", "cat-b", "cat-c"] {
        node.call("POST", &format!("/nacos/v1/ns/service?serviceName={svc}"))
            .expect(200);
        node.call(
            "PUT",
            &format!(
                "/nacos/v1/ns/cluster?serviceName={svc}&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={}",
                enc(r#"{"type":"NONE"}"#)
            ),
        )
        .expect(200);
    }
    // cat-a: all healthy; cat-b and cat-c: one of two unhealthy (cat-c's is also disabled).
    for (svc, port, meta) in [
        ("cat-a", 9001, "env=prod"),
        ("cat-b", 9001, "env=prod,zone=a"),
        ("cat-b", 9002, "env=test,canary=1"),
        ("cat-b", 9003, "env=prod,zone=b"),
        ("cat-c", 9001, "env=prod"),
        ("cat-c", 9002, "env=prod"),
    ] {
        node.call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName={svc}&ip=127.0.0.1&port={port}&ephemeral=false&metadata={}",
                enc(meta)
            ),
        )
        .expect(200);
    }
    for (svc, port) in [("cat-b", 9002), ("cat-c", 9002)] {
        node.call(
            "PUT",
            &format!("/nacos/v1/ns/health/instance?serviceName={svc}&ip=127.0.0.1&port={port}&healthy=false"),
        )
        .expect(200);
    }
    node.call(
        "PUT",
        "/nacos/v1/ns/instance?serviceName=cat-c&ip=127.0.0.1&port=9002&ephemeral=false&enabled=false",
    )
    .expect(200);

    // unhealthyOnly filters before paging: the count is of every page.
    let q = "pageNo=1&pageSize=10&serviceNameParam=cat-";
    let (count, names) = catalog_names(&node, q);
    assert_eq!((count, names.len()), (3, 3), "{names:?}");
    let (count, mut names) = catalog_names(&node, &format!("{q}&unhealthyOnly=true"));
    names.sort();
    assert_eq!(
        (count, names),
        (2, vec!["cat-b".to_string(), "cat-c".to_string()])
    );
    let (count, names) = catalog_names(
        &node,
        "pageNo=2&pageSize=1&serviceNameParam=cat-&unhealthyOnly=true",
    );
    assert_eq!(
        (count, names.len()),
        (2, 1),
        "the second of two pages: {names:?}"
    );
    let (count, _) = catalog_names(&node, &format!("{q}&unhealthyOnly=false"));
    assert_eq!(count, 3);
    let r = node.call(
        "GET",
        &format!("/nacos/v1/ns/catalog/services?{q}&unhealthyOnly=maybe"),
    );
    assert_eq!(r.status, 400, "{}", r.body);

    // selector on the catalog's instances: before paging, disabled ones kept.
    let inst = "serviceName=cat-b&clusterName=DEFAULT&pageNo=1&pageSize=10";
    assert_eq!(catalog_ports(&node, inst), (3, vec![9001, 9002, 9003]));
    let sel = |s: &str| format!("{inst}&selector={}", enc(s));
    assert_eq!(
        catalog_ports(&node, &sel("env=prod")),
        (2, vec![9001, 9003])
    );
    assert_eq!(
        catalog_ports(&node, &sel("env=prod,zone in (b,c)")),
        (1, vec![9003])
    );
    assert_eq!(catalog_ports(&node, &sel("!canary")), (2, vec![9001, 9003]));
    assert_eq!(
        catalog_ports(&node, &sel("env notin (prod)")),
        (1, vec![9002])
    );
    let paged = format!(
        "serviceName=cat-b&clusterName=DEFAULT&pageNo=2&pageSize=1&selector={}",
        enc("env=prod")
    );
    assert_eq!(catalog_ports(&node, &paged), (2, vec![9003]));
    let disabled = format!(
        "serviceName=cat-c&clusterName=DEFAULT&selector={}",
        enc("env=prod")
    );
    assert_eq!(
        catalog_ports(&node, &disabled),
        (2, vec![9001, 9002]),
        "the disabled instance stays"
    );
    // A bad selector is the 400 a person can act on, as on /instance/list.
    let r = node.call(
        "GET",
        &format!("/nacos/v1/ns/catalog/instances?{}", sel("env in (")),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.starts_with("Param 'selector' is illegal"),
        "{}",
        r.body
    );
}

#[test]
fn the_console_works_in_a_real_browser() {
    // The Eureka and Consul faces register into the script's namespace (its layout step
    // shows an instance of each beside a Nacos one).
    let node = Node::start_with(NodeOptions {
        args: [
            "--eureka-namespace",
            "console-ns",
            "--consul-namespace",
            "console-ns",
        ]
        .map(String::from)
        .to_vec(),
        ..NodeOptions::default()
    });
    let shots = workspace_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = workspace_root().join("tests/console/console_flow.mjs");
    assert!(
        workspace_root()
            .join("tests/console/node_modules/playwright-core")
            .exists(),
        "playwright-core missing: run scripts/test"
    );
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium missing: run scripts/test"
    );
    let out = Command::new("node")
        .arg(&script)
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--namespace", "console-ns", "--service", "console-svc"])
        // about three minutes on a debug build with axe on every screenshot
        .args(["--watchdog", "420"])
        .arg("--shots")
        .arg(&shots)
        .output()
        .expect("node runs the browser script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser flow failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("browser flow:\n{stdout}");

    // What the browser did, read back through the API.
    let instance = node
        .call(
            "GET",
            "/nacos/v1/ns/catalog/instances?namespaceId=console-ns&serviceName=console-svc&clusterName=DEFAULT",
        )
        .expect(200)
        .json();
    let row = &instance["list"][0];
    assert_eq!(row["weight"], 3.0, "weight set in the browser: {instance}");
    assert_eq!(
        row["enabled"], false,
        "taken offline in the browser: {instance}"
    );
    let namespaces = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    let ids: Vec<&str> = namespaces["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"console-ns"),
        "the non-empty one was kept: {ids:?}"
    );
    assert!(
        !ids.contains(&"console-ns-empty"),
        "the empty one was deleted: {ids:?}"
    );
    assert!(
        !ids.contains(&"console-ns-api"),
        "the one made through the API was deleted: {ids:?}"
    );
    let users = node
        .call("GET", "/nacos/v1/auth/users?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(
        users["totalCount"], 1,
        "the users made through the API were deleted: {users}"
    );
    assert!(
        !ids.contains(&"console-ns-ro"),
        "the read-only namespace was deleted: {ids:?}"
    );
    // The role and its permissions, granted in the browser, were taken back there.
    let roles = node
        .call("GET", "/nacos/v1/auth/roles?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    let bound: Vec<&str> = roles["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["role"].as_str().unwrap())
        .collect();
    assert_eq!(bound, ["ROLE_ADMIN"], "roles left behind: {roles}");
    let permissions = node
        .call("GET", "/nacos/v1/auth/permissions?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(
        permissions["totalCount"], 0,
        "permissions left behind: {permissions}"
    );
    // The sync tasks made in the browser were deleted there.
    let tasks = node.call("GET", "/api/v1/sync/tasks").expect(200).json();
    assert_eq!(
        tasks["tasks"].as_array().map(Vec::len),
        Some(0),
        "sync tasks left behind: {tasks}"
    );
    // The configuration the browser made, changed and deleted: every version is there,
    // newest first (the stale edit's refused publication is not), and the item is gone.
    let config = "dataId=console-ns-app.yaml&group=DEFAULT_GROUP&tenant=console-ns";
    let gone = node.call("GET", &format!("/nacos/v1/cs/configs?{config}"));
    assert_eq!(gone.status, 404, "deleted in the browser: {}", gone.body);
    let history = node
        .call(
            "GET",
            &format!("/nacos/v1/cs/history?search=accurate&{config}&pageNo=1&pageSize=100"),
        )
        .expect(200)
        .json();
    let ops: Vec<&str> = history["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["opType"].as_str().unwrap())
        .collect();
    // created, edited, rolled back, changed through the API, edited again, deleted (the
    // imports, ABORT refused and SKIP, wrote nothing)
    assert_eq!(ops, ["D", "U", "U", "U", "U", "I"], "{history}");
    for page in [
        "login",
        "namespaces",
        "services",
        "service-detail",
        "service-sample-code",
        "service-sample-code-zh",
        "service-metadata-filter",
        "service-batch",
        "configs",
        "config-diff",
        "config-import",
        "config-listeners",
        "sync",
        "cluster",
        "users",
        "roles",
        "permissions",
        "audit",
        "non-admin-namespaces",
        "non-admin-refused",
        "service-detail-1366",
        "service-faces-zh",
        "sync-1366",
        "namespaces-zh",
        "services-zh",
        "service-detail-zh",
        "configs-zh",
        "sync-zh",
        "cluster-zh",
        "users-zh",
        "roles-zh",
        "permissions-zh",
        "audit-zh",
        "error-zh",
        "login-zh",
        "config-gray",
        "config-gray-zh",
        "config-gray-promote",
        "config-gray-history",
    ] {
        let shot = shots.join(format!("{page}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "screenshot {}",
            shot.display()
        );
    }
}
