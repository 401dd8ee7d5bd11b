//! What the tests of calling clients (dubbo-go, Dubbo Java, Spring Cloud) read: a
//! consumer's one-second reports (`{"step":"calls","by":{"p1":10},"errors":0,"at_ms":…}`,
//! `at_ms` the second's start), the instances a node lists, the items a client wrote to
//! the config store, and what a Dubbo provider registered.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roster_tests::scenario::Running;
use roster_tests::{enc, json, Node, Value};

/// Wall-clock milliseconds, the clock of the reports' `at_ms`.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Calls answered by `name` in a one-second report.
pub fn answered(line: &Value, name: &str) -> u64 {
    line["by"][name].as_u64().unwrap_or(0)
}

/// Waits up to 30 s for a report, of a second that began from now on, that `accept`s.
pub fn wait_report(c: &mut Running, what: &str, accept: impl Fn(&Value) -> bool) -> Value {
    let from = now_ms();
    c.wait_for(what, Duration::from_secs(30), |v| {
        v["step"] == "calls" && v["at_ms"].as_u64().is_some_and(|at| at >= from + 1000) && accept(v)
    })
}

/// Waits for a report, of a second that began from now on, in which every one of `names`
/// answered and no call failed.
pub fn wait_answers(c: &mut Running, names: &[&str]) -> Value {
    wait_report(
        c,
        &format!("calls answered by {names:?} without errors"),
        |v| v["errors"] == 0 && names.iter().all(|n| answered(v, n) > 0),
    )
}

/// The reports for seconds that began at `from_ms` or later; waits until there are
/// `count` of them.
pub fn reports_from(c: &mut Running, from_ms: u64, count: usize) -> Vec<Value> {
    let started = |v: &Value| v["at_ms"].as_u64().is_some_and(|at| at >= from_ms + 1000);
    let deadline = Instant::now() + Duration::from_secs(count as u64 + 30);
    loop {
        let lines: Vec<Value> = c
            .drain()
            .iter()
            .filter(|v| v["step"] == "calls" && started(v))
            .cloned()
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "the consumer reported {} seconds from {from_ms}, not {count}",
            lines.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The instances (as JSON) `node` lists for `service` in the public namespace, healthy
/// or not, sorted by address.
pub fn hosts(node: &Node, service: &str) -> Vec<Value> {
    crate::sync::hosts(node, "public", "DEFAULT_GROUP", service)
}

/// Every instance of every service `node` holds in `namespace` has a loopback address,
/// and there is at least one service.
pub fn assert_all_loopback_in(node: &Node, namespace: &str) {
    let path = format!(
        "/nacos/v1/ns/service/list?pageNo=1&pageSize=1000&namespaceId={}",
        enc(namespace)
    );
    let v = node.call("GET", &path).expect(200).json();
    let services = v["doms"].as_array().cloned().unwrap_or_default();
    assert!(!services.is_empty(), "no service registered: {v}");
    for service in services {
        let service = service.as_str().unwrap();
        for h in crate::sync::hosts(node, namespace, "DEFAULT_GROUP", service) {
            let ip = h["ip"].as_str().unwrap();
            assert!(
                ip.starts_with("127."),
                "{service} has an instance off loopback: {h}"
            );
        }
    }
}

/// [`assert_all_loopback_in`] the public namespace.
pub fn assert_all_loopback(node: &Node) {
    assert_all_loopback_in(node, "public");
}

/// The content of config item `data_id` in `group` (public namespace), which must exist.
pub fn config(node: &Node, data_id: &str, group: &str) -> String {
    node.call(
        "GET",
        &format!(
            "/nacos/v1/cs/configs?dataId={}&group={}",
            enc(data_id),
            enc(group)
        ),
    )
    .expect(200)
    .body
}

/// The one instance a Dubbo provider of application `app` registered (public namespace):
/// 127.0.0.1 on `port`, its metadata revision the one the provider reported `serving`,
/// kept remotely. Answers the revision.
pub fn dubbo_revision(node: &Node, app: &str, port: u16, serving: &Value) -> String {
    let listed = hosts(node, app);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let host = &listed[0];
    assert_eq!(host["ip"], json!("127.0.0.1"), "{host}");
    assert_eq!(host["port"], json!(port), "{host}");
    let revision = host["metadata"]["dubbo.metadata.revision"]
        .as_str()
        .expect("a revision in the instance's metadata")
        .to_string();
    assert_eq!(serving["revision"], json!(revision), "{serving}");
    assert_eq!(
        host["metadata"]["dubbo.metadata.storage-type"],
        json!("remote"),
        "{host}"
    );
    revision
}
