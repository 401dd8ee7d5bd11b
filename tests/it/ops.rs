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
