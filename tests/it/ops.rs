//! The command line, ops endpoints and lifecycle.

use std::process::Command;

use roster_tests::{roster_bin, Node, NodeOptions};

#[test]
fn version_and_help() {
    let out = Command::new(roster_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("roster "));
    let out = Command::new(roster_bin()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--http",
        "--peer",
        "--data-dir",
        "--node-id",
        "--config",
        "--log-level",
        "--log-format",
        "--no-auth",
    ] {
        assert!(help.contains(flag), "--help mentions {flag}");
    }
    assert!(
        help.contains("ROSTER_HTTP"),
        "--help names the environment variables"
    );
}

#[test]
fn bad_flags_and_config_are_refused() {
    let out = Command::new(roster_bin())
        .args(["--http", "nonsense"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--http"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("roster.toml");
    std::fs::write(&cfg, "no-such-flag = 1\n").unwrap();
    let out = Command::new(roster_bin())
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-flag"));
}

#[test]
fn config_file_and_environment_configure_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("roster.toml");
    std::fs::write(&cfg, "log-format = \"json\"\nsubscriber-ttl-secs = 7\n").unwrap();
    let node = Node::start_with(NodeOptions {
        args: vec!["--config".into(), cfg.display().to_string()],
        env: vec![("ROSTER_TOKEN_TTL_SECS".into(), "600".into())],
        ..Default::default()
    });
    let login = node
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=nacos&password=test-admin-pass-1",
            &[],
            None,
        )
        .expect(200);
    assert_eq!(login.json()["tokenTtl"], 600, "from ROSTER_TOKEN_TTL_SECS");
    let first = node.log().lines().next().unwrap_or("").to_string();
    assert!(
        first.starts_with('{'),
        "json logs from the config file: {first}"
    );
}

#[test]
fn health_metrics_and_graceful_shutdown() {
    let mut node = Node::start();
    node.raw("GET", "/health/live", &[], None).expect(200);
    node.raw("GET", "/health/ready", &[], None).expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=m&ip=127.19.0.1&port=80",
    )
    .expect(200);
    node.call(
        "PUT",
        "/nacos/v1/ns/instance/beat?serviceName=m&ip=127.19.0.1&port=80",
    )
    .expect(200);
    // Unknown paths are counted under one label, not one per invented path.
    node.call("GET", "/nacos/v1/ns/no-such-thing-7").expect(404);
    let r = node.raw("GET", "/metrics", &[], None).expect(200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    assert!(!r.body.contains("no-such-thing-7"), "{}", r.body);
    for name in [
        "roster_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"}",
        "roster_http_requests_total{route=\"/nacos/v1/ns/instance\",method=\"POST\",status=\"200\"}",
        "roster_http_request_duration_seconds_bucket",
        "roster_instances ",
        "roster_services ",
        "roster_beats_total",
        "roster_raft_term",
        "roster_raft_is_leader 1",
        "roster_raft_last_applied",
    ] {
        assert!(r.body.contains(name), "metrics contain {name}");
    }
    assert_eq!(node.metric("roster_instances "), Some(1.0));
    assert_eq!(node.metric("roster_beats_total"), Some(1.0));
    let status = node.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
    assert!(node.log().contains("shutting down"));
}

/// Plain lists are cached per service version while the node's budget allows
/// (`--list-cache-mib`), the gauge shows the bytes kept, and a node with no budget
/// serializes every answer: both answer the same, before and after a change.
#[test]
fn lists_are_cached_within_the_budget_and_answered_alike_without_one() {
    let cached = Node::start();
    let uncached = Node::start_with(NodeOptions {
        args: vec!["--list-cache-mib".into(), "0".into()],
        ..Default::default()
    });
    let meta = "%7B%22dubbo.endpoints%22%3A%22%5B%7B%5C%22port%5C%22%3A20880%7D%5D%22%2C%22side%22%3A%22provider%22%7D";
    let hosts = |node: &Node| {
        let v = node
            .call("GET", "/nacos/v1/ns/instance/list?serviceName=lc")
            .expect(200)
            .json();
        let mut hosts: Vec<String> = v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| format!("{}:{} {}", h["ip"], h["port"], h["metadata"]))
            .collect();
        hosts.sort();
        hosts
    };
    for node in [&cached, &uncached] {
        for port in [1, 2] {
            node.call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName=lc&ip=127.19.0.2&port={port}&metadata={meta}"),
            )
            .expect(200);
        }
        assert_eq!(node.metric("roster_list_cache_bytes"), Some(0.0));
    }
    let before = hosts(&cached);
    assert_eq!(before.len(), 2);
    assert!(before[0].contains("\"side\":\"provider\""), "{before:?}");
    assert_eq!(hosts(&uncached), before);
    let kept = cached.metric("roster_list_cache_bytes").unwrap();
    assert!(kept > 0.0, "the body is kept");
    assert_eq!(uncached.metric("roster_list_cache_bytes"), Some(0.0));
    // A change: both answer the new list; the cached node's old body is gone.
    for node in [&cached, &uncached] {
        node.call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=lc&ip=127.19.0.2&port=3",
        )
        .expect(200);
    }
    let after = hosts(&cached);
    assert_eq!(after.len(), 3);
    assert_eq!(hosts(&uncached), after);
    assert!(cached.metric("roster_list_cache_bytes").unwrap() > kept);
    assert_eq!(uncached.metric("roster_list_cache_bytes"), Some(0.0));
}
