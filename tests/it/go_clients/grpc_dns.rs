//! grpc-go resolving through roster's DNS: `dns://<roster DNS>/<service>.roster:<port>`,
//! with the `round_robin` policy the service's metadata asks for (`grpc_config`, served
//! as TXT). Three grpc-go servers (the standard health service) on 127.0.40.1-3, one
//! port, registered over HTTP v1 and beating; calls are counted by the instance that
//! answered.
//!
//! grpc-go's DNS resolver re-resolves only when the channel asks (a connection lost),
//! at most once per minimum interval (30 s by default; 2 s here), never on the TTL. So:
//! - with grpc-go's defaults, an instance turned unhealthy (beats stop) stays in the
//!   rotation while it serves; once it stops serving too (a dead process), the lost
//!   connection re-resolves it away, and it does not come back on that channel even when
//!   healthy again; a new channel reaches all three;
//! - with servers setting `MaxConnectionAge` (gRPC's advice for DNS-balanced services),
//!   every connection's end re-resolves: the unhealthy instance leaves the rotation while
//!   still serving, and rejoins the same channel once healthy.

use super::{run, scenario, step};
use roster_tests::{free_port, unique, Node, NodeOptions, Value, ADMIN_PASSWORD};

fn run_grpc_dns(extra: &[&str]) -> Vec<Value> {
    let dns = free_port();
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--dns".into(),
            format!("127.0.0.1:{dns}"),
            "--dns-ttl".into(),
            "1".into(),
        ],
        ..Default::default()
    });
    let service = unique("grpc-dns");
    let mut cmd = scenario("grpc-dns");
    cmd.args([
        "-server",
        &node.addr(),
        "-username",
        "nacos",
        "-password",
        ADMIN_PASSWORD,
        "-dns",
        &format!("127.0.0.1:{dns}"),
        "-service",
        &service,
        "-hosts",
        "127.0.40.1,127.0.40.2,127.0.40.3",
        "-beat-timeout",
        "3s",
        "-min-resolution",
        "2s",
    ]);
    cmd.args(extra);
    let steps = run(cmd, "the grpc-go DNS scenario");
    let dns_step = step(&steps, "dns");
    let target = dns_step["target"].as_str().unwrap();
    assert!(
        target.starts_with(&format!("dns://127.0.0.1:{dns}/{service}.roster:")),
        "{target}"
    );
    steps
}

/// Each of the three instances answered some of `calls`, and nothing failed.
fn every_instance(calls: &Value, want: &[&str]) {
    let calls = calls.as_object().unwrap();
    assert!(calls.get("error").is_none(), "{calls:?}");
    for host in want {
        let n: u64 = calls
            .iter()
            .filter(|(addr, _)| addr.starts_with(&format!("{host}:")))
            .map(|(_, n)| n.as_u64().unwrap())
            .sum();
        assert!(n > 0, "no call reached {host}: {calls:?}");
    }
    assert_eq!(calls.len(), want.len(), "{calls:?}");
}

const ALL: [&str; 3] = ["127.0.40.1", "127.0.40.2", "127.0.40.3"];

#[test]
fn grpc_go_round_robin_over_roster_dns_follows_health_at_re_resolution() {
    let steps = run_grpc_dns(&[]);
    every_instance(&step(&steps, "all_healthy")["calls"], &ALL);
    step(&steps, "unhealthy");
    // Unhealthy but serving, no connection lost: grpc-go still calls it.
    every_instance(&step(&steps, "still_in_rotation")["calls"], &ALL);
    // Stopped: re-resolved away, and not called again on that channel once back.
    every_instance(
        &step(&steps, "left_rotation")["calls_after_return"],
        &ALL[..2],
    );
    every_instance(&step(&steps, "redial")["calls"], &ALL);
    step(&steps, "done");
}

#[test]
fn grpc_go_over_roster_dns_with_max_connection_age_drops_unhealthy_servers() {
    let steps = run_grpc_dns(&["-max-connection-age", "2s"]);
    every_instance(&step(&steps, "all_healthy")["calls"], &ALL);
    step(&steps, "unhealthy");
    every_instance(
        &step(&steps, "left_rotation_serving")["calls_after"],
        &ALL[..2],
    );
    step(&steps, "rejoined");
    every_instance(&step(&steps, "redial")["calls"], &ALL);
    step(&steps, "done");
}
