//! The configuration store as a cluster keeps it: acknowledged publications survive
//! `kill -9` (from the log and from a snapshot), a publication through any node is read
//! on every node, a node that was down catches up, and Dubbo 3's application-level
//! discovery — mapping appended by compare-and-set from providers spread over three
//! nodes, metadata report, consumer resolving interface → applications → instances →
//! metadata — replayed through nacos-sdk-python 3.x.

use std::process::Command;
use std::time::Duration;

use roster_tests::{enc, eventually, workspace_root, Cluster, Node, NodeOptions, ADMIN_PASSWORD};

/// Publishes `content` at `data_id`/`group` in `tenant` over HTTP v1; 200 expected.
fn publish(node: &Node, tenant: &str, group: &str, data_id: &str, content: &str) {
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!(
            "dataId={}&group={}&tenant={}&content={}",
            enc(data_id),
            enc(group),
            enc(tenant),
            enc(content)
        ),
    )
    .expect(200);
}

/// The content at `data_id`/`group` in `tenant` as `node` answers it (None: 404).
fn read(node: &Node, tenant: &str, group: &str, data_id: &str) -> Option<String> {
    let path = format!(
        "/nacos/v1/cs/configs?dataId={}&group={}&tenant={}&accessToken={}",
        enc(data_id),
        enc(group),
        enc(tenant),
        node.token()
    );
    // `raw` retries once on a pooled connection the node closed while it sat idle.
    let r = node.raw("GET", &path, &[], None);
    match r.status {
        200 => Some(r.body.clone()),
        404 => None,
        s => panic!("GET {path}: {s} {}", r.body),
    }
}

fn md5_header(node: &Node, data_id: &str) -> String {
    let r = node
        .call(
            "GET",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group=DEFAULT_GROUP"),
        )
        .expect(200);
    r.header("content-md5").expect("Content-MD5").to_string()
}

#[test]
fn acknowledged_configs_survive_kill_9_from_the_log_and_from_a_snapshot() {
    // A snapshot every 25 entries: the 70 writes below leave both a snapshot and a log
    // tail to replay.
    let mut node = Node::start_with(NodeOptions {
        args: vec!["--raft-snapshot-logs".into(), "25".into()],
        ..Default::default()
    });
    let mut want = Vec::new();
    for i in 0..50 {
        let tenant = if i % 2 == 0 { "" } else { "prod" };
        let content = format!("key{i}=value-{i}\nname=çfg-{i}\n");
        publish(
            &node,
            tenant,
            "DEFAULT_GROUP",
            &format!("app-{i}.properties"),
            &content,
        );
        want.push((tenant, format!("app-{i}.properties"), Some(content)));
    }
    // Ten changed again, ten deleted.
    for (i, (tenant, data_id, content)) in want.iter_mut().enumerate().take(10) {
        let changed = format!("changed-{i}");
        publish(&node, tenant, "DEFAULT_GROUP", data_id, &changed);
        *content = Some(changed);
    }
    for (tenant, data_id, content) in want.iter_mut().skip(10).take(10) {
        node.call(
            "DELETE",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group=DEFAULT_GROUP&tenant={tenant}"),
        )
        .expect(200);
        *content = None;
    }
    let md5_before = md5_header(&node, "app-0.properties");
    // A snapshot holds part of it, the log the rest.
    eventually(Duration::from_secs(10), || {
        match node.metric("roster_raft_snapshot_index") {
            Some(i) if i >= 25.0 => Ok(()),
            other => Err(format!("snapshot index {other:?}")),
        }
    });
    node.restart();
    for (tenant, data_id, content) in &want {
        assert_eq!(
            read(&node, tenant, "DEFAULT_GROUP", data_id).as_deref(),
            content.as_deref(),
            "{tenant}/{data_id} after kill -9"
        );
    }
    assert_eq!(md5_header(&node, "app-0.properties"), md5_before);
    assert_eq!(
        node.metric("roster_configs"),
        Some(40.0),
        "50 published, 10 deleted"
    );
    // The history came back too: app-0 was published twice.
    let history = node
        .call(
            "GET",
            "/nacos/v1/cs/history?search=accurate&dataId=app-0.properties&group=DEFAULT_GROUP&pageNo=1&pageSize=10",
        )
        .expect(200)
        .json();
    assert_eq!(history["totalCount"], 2, "{history}");
}

#[test]
fn a_publication_through_any_node_is_read_on_every_node_and_survives_losing_the_leader() {
    let mut cluster = Cluster::start(3, &[]);
    let follower = cluster.follower();
    publish(
        &cluster.nodes[follower],
        "",
        "DEFAULT_GROUP",
        "shared.yaml",
        "color: blue\n",
    );
    for (i, node) in cluster.nodes.iter().enumerate() {
        eventually(Duration::from_secs(10), || {
            match read(node, "", "DEFAULT_GROUP", "shared.yaml") {
                Some(c) if c == "color: blue\n" => Ok(()),
                other => Err(format!("node {i} reads {other:?}")),
            }
        });
    }
    // The leader dies without warning; the others elect one and keep taking writes.
    let leader = cluster.leader();
    cluster.nodes[leader].kill();
    let survivor = (0..3).find(|i| *i != leader).unwrap();
    eventually(Duration::from_secs(30), || {
        let r = cluster.nodes[survivor]
            .try_request(
                "POST",
                "/nacos/v1/cs/configs",
                &[("Content-Type", "application/x-www-form-urlencoded")],
                Some(&format!(
                    "dataId=shared.yaml&group=DEFAULT_GROUP&content=color%3A+green%0A&accessToken={}",
                    cluster.nodes[survivor].token()
                )),
            )
            .map_err(|e| e.to_string())?;
        if r.status == 200 {
            Ok(())
        } else {
            Err(format!("{} {}", r.status, r.body))
        }
    });
    // The dead node comes back and catches up.
    cluster.nodes[leader].start_again();
    cluster.nodes[leader].wait_ready();
    for (i, node) in cluster.nodes.iter().enumerate() {
        eventually(Duration::from_secs(20), || {
            match read(node, "", "DEFAULT_GROUP", "shared.yaml") {
                Some(c) if c == "color: green\n" => Ok(()),
                other => Err(format!("node {i} reads {other:?}")),
            }
        });
    }
}

#[test]
fn dubbo_application_level_discovery_over_three_nodes() {
    let cluster = Cluster::start(3, &[]);
    let python = workspace_root().join("tests/clients/python3/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    let mut cmd = Command::new(&python);
    cmd.arg(workspace_root().join("tests/clients/python3/dubbo_replay.py"));
    for node in &cluster.nodes {
        cmd.args(["--server", &node.addr()]);
    }
    cmd.args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--providers", "8"]);
    let out = cmd.output().expect("run dubbo_replay.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Dubbo replay failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        stderr
            .chars()
            .rev()
            .take(6000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    );
    for step in [
        "consumer_listens",
        "providers_done",
        "consume",
        "mapping_listener",
        "done",
    ] {
        assert!(
            stdout.contains(&format!("\"step\": \"{step}\"")),
            "the replay ran step {step}:\n{stdout}"
        );
    }
    // Every node holds the whole mapping: no provider's append was lost.
    for (i, node) in cluster.nodes.iter().enumerate() {
        eventually(Duration::from_secs(10), || {
            let mapping = read(node, "", "mapping", "org.apache.dubbo.demo.DemoService")
                .ok_or("no mapping")?;
            let mut apps: Vec<&str> = mapping.split(',').collect();
            apps.sort();
            let want: Vec<String> = (0..8).map(|p| format!("dubbo-demo-provider-{p}")).collect();
            if apps == want {
                Ok(())
            } else {
                Err(format!("node {i} holds {apps:?}"))
            }
        });
    }
}

#[test]
fn a_namespace_holding_configurations_is_not_deleted_and_counts_them() {
    let node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=cfg-ns&namespaceName=Cfg",
    )
    .expect(200);
    publish(&node, "cfg-ns", "DEFAULT_GROUP", "a.yaml", "a: 1\n");
    publish(&node, "cfg-ns", "DEFAULT_GROUP", "b.yaml", "b: 1\n");
    let list = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    let row = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["namespace"] == "cfg-ns")
        .cloned()
        .unwrap_or_else(|| panic!("cfg-ns listed: {list}"));
    assert_eq!(row["configCount"], 2, "{row}");
    let refused = node
        .call("DELETE", "/nacos/v1/console/namespaces?namespaceId=cfg-ns")
        .expect(409);
    assert!(
        refused.body.contains("2 configuration(s)"),
        "the refusal says why: {}",
        refused.body
    );
    for data_id in ["a.yaml", "b.yaml"] {
        node.call(
            "DELETE",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group=DEFAULT_GROUP&tenant=cfg-ns"),
        )
        .expect(200);
    }
    node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=cfg-ns")
        .expect(200);
}

#[test]
fn a_nacos_sync_task_with_configs_imports_them_and_follows_the_source() {
    use crate::sync::{create_task, task};
    use roster_tests::json;

    let source = Node::start();
    let node = Node::start();
    publish(&source, "", "DEFAULT_GROUP", "app.yaml", "color: blue\n");
    publish(&source, "dev", "mapping", "org.demo.Api", "shop,cart");
    publish(
        &source,
        "",
        "DEFAULT_GROUP",
        "mine.yaml",
        "from the source\n",
    );
    // roster's own item at one of the keys: the task leaves it alone.
    publish(&node, "", "DEFAULT_GROUP", "mine.yaml", "roster's own\n");
    let from = format!(
        "nacos://{}?username=nacos&password={ADMIN_PASSWORD}&configs=true&namespace=public,dev",
        source.addr()
    );
    create_task(&node, json!({"name": "cfg-sync", "source": from}));
    let reads = |tenant: &str, group: &str, data_id: &str, want: Option<&str>| {
        eventually(Duration::from_secs(30), || {
            let got = read(&node, tenant, group, data_id);
            if got.as_deref() == want {
                Ok(())
            } else {
                Err(format!(
                    "{tenant}/{group}/{data_id}: {got:?}, want {want:?}"
                ))
            }
        })
    };
    reads("", "DEFAULT_GROUP", "app.yaml", Some("color: blue\n"));
    reads("dev", "mapping", "org.demo.Api", Some("shop,cart"));
    assert_eq!(
        read(&node, "", "DEFAULT_GROUP", "mine.yaml").as_deref(),
        Some("roster's own\n")
    );
    eventually(Duration::from_secs(20), || {
        let t = task(&node, "cfg-sync");
        let s = &t["status"];
        if s["configs"] == 2 && s["configsSkipped"] == 1 {
            Ok(())
        } else {
            Err(format!("status: {s}"))
        }
    });
    // Changes and removals at the source follow (read again every 10 s).
    publish(&source, "", "DEFAULT_GROUP", "app.yaml", "color: green\n");
    source
        .call(
            "DELETE",
            "/nacos/v1/cs/configs?dataId=org.demo.Api&group=mapping&tenant=dev",
        )
        .expect(200);
    reads("", "DEFAULT_GROUP", "app.yaml", Some("color: green\n"));
    reads("dev", "mapping", "org.demo.Api", None);
    // The history says who wrote it.
    let history = node
        .call(
            "GET",
            "/nacos/v1/cs/history?search=accurate&dataId=app.yaml&group=DEFAULT_GROUP&pageNo=1&pageSize=10",
        )
        .expect(200)
        .json();
    assert_eq!(
        history["pageItems"][0]["srcUser"], "sync:cfg-sync",
        "{history}"
    );
    // Deleting the task takes its imports with it; roster's own item stays.
    node.call("DELETE", "/api/v1/sync/tasks/cfg-sync")
        .expect(200);
    reads("", "DEFAULT_GROUP", "app.yaml", None);
    assert_eq!(
        read(&node, "", "DEFAULT_GROUP", "mine.yaml").as_deref(),
        Some("roster's own\n")
    );
}

/// A multipart body holding `archive` as the field `file`, and its content type.
fn multipart(archive: &[u8]) -> (String, Vec<u8>) {
    let boundary = "roster-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"export.zip\"\r\n\
         Content-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(archive);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[test]
fn an_export_imports_elsewhere_with_each_policy_and_bad_archives_change_nothing() {
    let from = Node::start();
    let to = Node::start();
    publish(&from, "", "DEFAULT_GROUP", "app.yaml", "color: blue\n");
    publish(&from, "", "mapping", "org.demo.Api", "shop,cart");
    publish(&from, "dev", "DEFAULT_GROUP", "dev-only.yaml", "x: 1\n");
    // The public namespace's items, in Nacos 2.x's format.
    let (status, archive) = from.binary(
        "GET",
        "/nacos/v1/cs/configs?exportV2=true&tenant=",
        None,
        Vec::new(),
    );
    assert_eq!(status, 200);
    assert!(archive.starts_with(b"PK"), "a zip archive");

    // The target already holds one of them: ABORT imports nothing and says which.
    publish(&to, "", "DEFAULT_GROUP", "app.yaml", "color: red\n");
    let (content_type, body) = multipart(&archive);
    let (status, answer) = to.binary(
        "POST",
        "/nacos/v1/cs/configs?import=true&namespace=",
        Some(&content_type),
        body.clone(),
    );
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert_eq!(status, 409, "{answer}");
    assert!(answer.contains("DEFAULT_GROUP/app.yaml"), "{answer}");
    assert_eq!(
        read(&to, "", "mapping", "org.demo.Api"),
        None,
        "nothing imported"
    );
    // SKIP leaves it, imports the other.
    let (status, answer) = to.binary(
        "POST",
        "/nacos/v1/cs/configs?import=true&namespace=&policy=SKIP",
        Some(&content_type),
        body.clone(),
    );
    let answer: roster_tests::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (
            answer["data"]["succCount"].as_u64(),
            answer["data"]["skipCount"].as_u64()
        ),
        (Some(1), Some(1)),
        "{answer}"
    );
    assert_eq!(
        read(&to, "", "DEFAULT_GROUP", "app.yaml").as_deref(),
        Some("color: red\n")
    );
    assert_eq!(
        read(&to, "", "mapping", "org.demo.Api").as_deref(),
        Some("shop,cart")
    );
    // OVERWRITE replaces, as the whole body too (application/zip), into another namespace.
    let (status, _) = to.binary(
        "POST",
        "/nacos/v1/cs/configs?import=true&namespace=&policy=OVERWRITE",
        Some("application/zip"),
        archive.clone(),
    );
    assert_eq!(status, 200);
    assert_eq!(
        read(&to, "", "DEFAULT_GROUP", "app.yaml").as_deref(),
        Some("color: blue\n")
    );
    let detail = to
        .call(
            "GET",
            "/nacos/v1/cs/configs?dataId=app.yaml&group=DEFAULT_GROUP&show=all",
        )
        .expect(200)
        .json();
    assert_eq!(
        detail["type"], "text",
        "the type travels in .metadata.yml: {detail}"
    );
    assert_eq!(
        read(&to, "dev", "DEFAULT_GROUP", "dev-only.yaml"),
        None,
        "another namespace's item stays out"
    );

    // A damaged archive, or an item the API would refuse, changes nothing.
    let (status, answer) = to.binary(
        "POST",
        "/nacos/v1/cs/configs?import=true&namespace=fresh&policy=OVERWRITE",
        Some("application/zip"),
        b"PK\x03\x04 not really".to_vec(),
    );
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&answer));
    assert!(String::from_utf8_lossy(&answer).contains("'file'"));
    let listing = to
        .call(
            "GET",
            "/nacos/v1/cs/configs?search=accurate&tenant=fresh&pageNo=1&pageSize=10",
        )
        .expect(200)
        .json();
    assert_eq!(listing["totalCount"], 0, "{listing}");
    // Importing is for admins.
    to.call(
        "POST",
        "/nacos/v1/auth/users?username=importer&password=importer-pass-1",
    )
    .expect(200);
    let token = to
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=importer&password=importer-pass-1",
            &[],
            None,
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = to.raw(
        "POST",
        &format!("/nacos/v1/cs/configs?import=true&namespace=&accessToken={token}"),
        &[("Content-Type", "application/zip")],
        None,
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
}
