//! dubbo-go v3 with application-level service discovery (`registry-type: service`): roster
//! is its registry, metadata report and config centre. Providers and a consumer talk
//! Triple; the test reads back what dubbo-go wrote into roster (the interface → application
//! mapping, the metadata of the provider's revision), follows a provider's crash, and kills
//! the one node every client is connected to.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{
    enc, eventually, free_port, json, unique, Cluster, Node, Value, ADMIN_PASSWORD,
};

use tempfile::TempDir;

use super::{scenario, Running};
use crate::calls::{
    answered, assert_all_loopback, config, dubbo_revision, hosts, now_ms, reports_from,
    wait_answers,
};

/// The interface the Go providers export (`dubboGreeterInterface`).
const INTERFACE: &str = "org.roster.test.Greeter";

/// A dubbo-go program of `app`; its Nacos client keeps its cache and log in `dir`.
fn role(role: &str, servers: &str, app: &str, dir: &Path) -> Command {
    let mut cmd = scenario(role);
    cmd.args(["--server", servers])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--app", app, "--seconds", "300"])
        .arg("--dir")
        .arg(dir);
    cmd
}

/// A provider named `name` serving Triple on 127.0.0.1:`port`, started and registered.
fn provider(servers: &str, app: &str, name: &str, port: u16, tmp: &TempDir) -> (Running, Value) {
    let mut cmd = role("dubbo-provider", servers, app, &tmp.path().join(name));
    cmd.args(["--name", name, "--port", &port.to_string()]);
    let mut p = Running::start(cmd, &format!("dubbo-go provider {name}"));
    let serving = p.wait_step("serving", Duration::from_secs(60));
    (p, serving)
}

fn consumer(servers: &str, app: &str, tmp: &TempDir) -> Running {
    let cmd = role("dubbo-consumer", servers, app, &tmp.path().join("consumer"));
    let mut c = Running::start(cmd, "dubbo-go consumer");
    c.wait_step("dialed", Duration::from_secs(60));
    c
}

/// The sorted `ip:port` of the healthy instances of `service` on `node`.
fn addrs(node: &Node, service: &str) -> Vec<String> {
    let mut a: Vec<String> = hosts(node, service)
        .iter()
        .filter(|h| h["healthy"] == json!(true))
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect();
    a.sort();
    a
}

#[test]
fn dubbo_go_discovers_providers_by_application_through_roster() {
    let node = Node::start();
    let tmp = tempfile::tempdir().unwrap();
    let servers = node.addr();
    let app = unique("dubbo-greeter");
    // The config centre: dubbo-go reads data id = application, group dubbo, at start.
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!(
            "dataId={app}&group=dubbo&content={}",
            enc("dubbo:\n  custom:\n    config-map:\n      greeting: hello from roster\n")
        ),
    )
    .expect(200);

    let port1 = free_port();
    let (mut p1, serving) = provider(&servers, &app, "p1", port1, &tmp);
    assert_eq!(
        serving["greeting"],
        json!("hello from roster"),
        "the provider read its config centre item: {serving}"
    );
    let mut c = consumer(&servers, &unique("dubbo-caller"), &tmp);
    wait_answers(&mut c, &["p1"]);

    // What dubbo-go wrote to roster: the mapping, found by interface name alone ...
    assert_eq!(config(&node, INTERFACE, "mapping"), app, "the mapping");
    // ... and the instance, on loopback, with its metadata's revision ...
    let revision = dubbo_revision(&node, &app, port1, &serving);
    // ... whose metadata is in the config store under data id = application, group =
    // revision (as Dubbo Java writes it), and under `app:revision` in DEFAULT_GROUP (as
    // dubbo-go 3.1 did).
    for (data_id, group) in [
        (app.clone(), revision.clone()),
        (format!("{app}:{revision}"), "DEFAULT_GROUP".to_string()),
    ] {
        let meta: Value = roster_tests::serde_json::from_str(&config(&node, &data_id, &group))
            .unwrap_or_else(|e| panic!("metadata {data_id}/{group}: {e}"));
        assert_eq!(meta["app"], json!(app), "{meta}");
        assert_eq!(meta["revision"], json!(revision), "{meta}");
        let service = &meta["services"][format!("{INTERFACE}:tri")];
        assert_eq!(service["name"], json!(INTERFACE), "{meta}");
        assert_eq!(service["port"], json!(port1), "{meta}");
    }

    // A second provider of the application: the calls reach both.
    let port2 = free_port();
    let (_p2, serving2) = provider(&servers, &app, "p2", port2, &tmp);
    assert_eq!(
        serving2["revision"],
        json!(revision),
        "same services, same revision"
    );
    wait_answers(&mut c, &["p1", "p2"]);
    assert_eq!(
        addrs(&node, &app),
        vec![format!("127.0.0.1:{port1}"), format!("127.0.0.1:{port2}")]
    );
    assert_all_loopback(&node);

    // p1 crashes. Its instance belongs to its gRPC connection, which has no beat timeout:
    // it goes when the connection closes, and the kernel closes a killed process's
    // sockets at once. So the bound is 0 + 1 s for roster to stop listing it; then the
    // push to the consumer and dubbo-go's refresh of its invokers, 2 s more, after which
    // no call may go to p1 (one attempt per call: it would show as an error).
    let killed_ms = now_ms();
    let killed = Instant::now();
    p1.kill();
    let gone = eventually(Duration::from_secs(5), || {
        // Every host, healthy or not: the instance must be gone, not merely unhealthy.
        let a: Vec<String> = hosts(&node, &app)
            .iter()
            .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
            .collect();
        if a == vec![format!("127.0.0.1:{port2}")] {
            Ok(killed.elapsed())
        } else {
            Err(format!("{a:?}"))
        }
    });
    assert!(
        gone <= Duration::from_secs(1),
        "roster listed the killed provider for {gone:?}"
    );
    for line in reports_from(&mut c, killed_ms + 3000, 3) {
        assert!(
            line["errors"] == 0 && answered(&line, "p1") == 0 && answered(&line, "p2") > 0,
            "a call went to the killed provider more than 3 s after the kill: {line}"
        );
    }
    c.close_stdin();
    c.wait_success(Duration::from_secs(20));
}

fn grpc_connections(node: &Node) -> u64 {
    node.metric("roster_grpc_connections").unwrap_or(0.0) as u64
}

/// The value `read` answers once it has answered the same for 3 s (sampled every 250 ms),
/// waiting at most `timeout`.
fn steady(timeout: Duration, read: impl Fn() -> u64) -> u64 {
    let deadline = Instant::now() + timeout;
    let mut value = read();
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_secs(3) {
        assert!(
            Instant::now() < deadline,
            "no steady value within {timeout:?} (last {value})"
        );
        std::thread::sleep(Duration::from_millis(250));
        let now = read();
        if now != value {
            value = now;
            since = Instant::now();
        }
    }
    value
}

/// Waits at most `timeout` until `read` has answered `want` for 3 s straight.
fn steady_at(timeout: Duration, want: u64, read: impl Fn() -> u64, what: &str) {
    let deadline = Instant::now() + timeout;
    let mut since = Instant::now();
    loop {
        let now = read();
        if now != want {
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(3) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {now}, not {want} for 3 s, within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn dubbo_go_keeps_calling_when_the_node_every_client_uses_is_killed() {
    let mut cluster = Cluster::start(3, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let servers = cluster.server_list();
    let app = unique("dubbo-greeter");
    let (port1, port2) = (free_port(), free_port());
    let (_p1, _) = provider(&servers, &app, "p1", port1, &tmp);
    let (_p2, _) = provider(&servers, &app, "p2", port2, &tmp);
    let mut c = consumer(&servers, &unique("dubbo-caller"), &tmp);
    wait_answers(&mut c, &["p1", "p2"]);
    let mine = vec![format!("127.0.0.1:{port1}"), format!("127.0.0.1:{port2}")];

    // Every client knows all three nodes and picked one at random. Gather them all on node
    // `x`: stop the two others (a node that shuts down tells its clients to reconnect
    // elsewhere, and `x` is the only one left), wait until `x` holds every connection,
    // then start the two again. No client has a reason to leave `x` after that.
    let x = 0;
    let others = [1, 2];
    let total = steady(Duration::from_secs(20), || {
        cluster.nodes.iter().map(grpc_connections).sum()
    });
    eprintln!(
        "gRPC connections before: {:?}",
        cluster
            .nodes
            .iter()
            .map(grpc_connections)
            .collect::<Vec<_>>()
    );
    // Both at once, so that no client hops from one to the other.
    std::thread::scope(|s| {
        for (i, node) in cluster.nodes.iter_mut().enumerate() {
            if others.contains(&i) {
                s.spawn(move || node.terminate());
            }
        }
    });
    // A client may open a connection to `x` and drop it again while it reconnects, and
    // one whose reset came while it was busy notices its dead connection only at its next
    // 5-s health check: wait until `x` holds exactly `total` for 3 s straight.
    steady_at(
        Duration::from_secs(40),
        total,
        || grpc_connections(&cluster.nodes[x]),
        &format!("node {}'s gRPC connections", x + 1),
    );
    for i in others {
        cluster.nodes[i].start_again();
    }
    for i in others {
        cluster.nodes[i].wait_ready();
    }
    for (i, node) in cluster.nodes.iter().enumerate() {
        eventually(Duration::from_secs(20), || {
            let a = addrs(node, &app);
            if a == mine {
                Ok(())
            } else {
                Err(format!("node {} lists {a:?}", i + 1))
            }
        });
        assert_all_loopback(node);
    }
    for i in others {
        assert_eq!(
            grpc_connections(&cluster.nodes[i]),
            0,
            "node {} holds no client's connection",
            i + 1
        );
    }
    assert_eq!(grpc_connections(&cluster.nodes[x]), total);
    wait_answers(&mut c, &["p1", "p2"]);

    // Kill `x`. Every client reconnects to a survivor; meanwhile every survivor keeps
    // listing both providers (healthy) in every sample, and the consumer's calls go on.
    // 25 s of samples outlast the four Distro verification rounds (20 s) for which the
    // survivors keep the instances of the dead node's connections: they span the hand-over
    // from those to the providers' registrations through their new connections.
    eprintln!("killing node {}", x + 1);
    let killed_ms = now_ms();
    cluster.nodes[x].kill();
    let killed = Instant::now();
    let mut gaps = Vec::new();
    let mut samples = 0;
    while killed.elapsed() < Duration::from_secs(25) {
        for i in others {
            let a = addrs(&cluster.nodes[i], &app);
            samples += 1;
            if !mine.iter().all(|m| a.contains(m)) {
                gaps.push(format!(
                    "{:?} after the kill, node {} lists {a:?}",
                    killed.elapsed(),
                    i + 1
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        gaps.is_empty(),
        "a survivor stopped listing a live provider ({} of {samples} samples):\n{}",
        gaps.len(),
        gaps.join("\n")
    );
    let after: Vec<Value> = c
        .drain()
        .iter()
        .filter(|v| v["step"] == "calls" && v["at_ms"].as_u64().unwrap_or(0) > killed_ms)
        .cloned()
        .collect();
    assert!(after.len() >= 20, "the consumer reported {after:?}");
    for line in &after {
        assert!(
            line["errors"] == 0 && answered(line, "p1") > 0 && answered(line, "p2") > 0,
            "a call failed after the node was killed: {line}"
        );
    }
    // The clients are on the survivors now ...
    eventually(Duration::from_secs(20), || {
        let n: u64 = others
            .iter()
            .map(|i| grpc_connections(&cluster.nodes[*i]))
            .sum();
        if n >= total {
            Ok(())
        } else {
            Err(format!("the survivors hold {n} of {total} connections"))
        }
    });
    // ... and the consumer's subscription with them: a third provider, registered through
    // a survivor only, is called.
    let survivors = others
        .iter()
        .map(|i| cluster.nodes[*i].addr())
        .collect::<Vec<_>>()
        .join(",");
    let (_p3, _) = provider(&survivors, &app, "p3", free_port(), &tmp);
    wait_answers(&mut c, &["p1", "p2", "p3"]);
    c.close_stdin();
    c.wait_success(Duration::from_secs(20));
}
