//! Server-side health checks of persistent instances: TCP by default, HTTP when the
//! cluster says so; health flips after three opposite results and is committed. Never
//! aimed at a deny-listed network or the node's own sockets, and never with a path or
//! headers that could add a header line or a second request.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use roster_tests::{enc, eventually, Node, NodeOptions};

fn healthy(node: &Node, service: &str, port: u16) -> Option<bool> {
    let v = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port={port}"),
        )
        .json();
    v["healthy"].as_bool()
}

fn wait_health(node: &Node, service: &str, port: u16, want: bool) {
    eventually(Duration::from_secs(15), || {
        match healthy(node, service, port) {
            Some(h) if h == want => Ok(()),
            other => Err(format!("healthy = {other:?}, want {want}")),
        }
    });
}

#[test]
fn tcp_checks_follow_the_port() {
    let node = Node::start_with(NodeOptions {
        args: vec!["--health-check-interval-secs".into(), "1".into()],
        ..Default::default()
    });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=tcpchk&ip=127.0.0.1&port={port}&ephemeral=false"
        ),
    )
    .expect(200);
    // The listening port keeps it healthy over several rounds.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(healthy(&node, "tcpchk", port), Some(true));
    drop(listener);
    wait_health(&node, "tcpchk", port, false);
    let _again = TcpListener::bind(("127.0.0.1", port)).expect("rebind the same port");
    wait_health(&node, "tcpchk", port, true);
}

#[test]
fn http_checks_expect_the_status_code() {
    let node = Node::start_with(NodeOptions {
        args: vec!["--health-check-interval-secs".into(), "1".into()],
        ..Default::default()
    });
    // A tiny HTTP server whose /health answers with a status the test controls.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let status = Arc::new(AtomicU16::new(200));
    {
        let status = status.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 1024];
                let n = stream.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]);
                let code = if req.starts_with("GET /health ") {
                    status.load(Ordering::Relaxed)
                } else {
                    404
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
    }
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=httpchk&ip=127.0.0.1&port={port}&ephemeral=false"
        ),
    )
    .expect(200);
    let checker =
        enc(r#"{"type":"HTTP","path":"/health","headers":"","expectedResponseCode":200}"#);
    node.call(
        "PUT",
        &format!("/nacos/v1/ns/cluster?serviceName=httpchk&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={checker}"),
    )
    .expect(200);
    status.store(500, Ordering::Relaxed);
    wait_health(&node, "httpchk", port, false);
    status.store(200, Ordering::Relaxed);
    wait_health(&node, "httpchk", port, true);
    // Bad cluster settings are refused.
    let r = node.call("PUT", "/nacos/v1/ns/cluster?serviceName=httpchk&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker=%7B%22type%22%3A%22SMTP%22%7D");
    assert!(
        r.status == 400 && r.body.contains("healthChecker"),
        "{}",
        r.body
    );
    let r = node.call("PUT", "/nacos/v1/ns/cluster?serviceName=httpchk&clusterName=DEFAULT&checkPort=99999&useInstancePort4Check=true&healthChecker=%7B%22type%22%3A%22TCP%22%7D");
    assert!(
        r.status == 400 && r.body.contains("checkPort"),
        "{}",
        r.body
    );
}

/// Persistent instance `ip:port` of `service`, registered unhealthy: a successful
/// probe would flip it to healthy, so it stays unhealthy only if never probed.
fn register_unhealthy(node: &Node, service: &str, ip: &str, port: u16) {
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port={port}&ephemeral=false&healthy=false"),
    )
    .expect(200);
}

fn health_of(node: &Node, service: &str, ip: &str, port: u16) -> Option<bool> {
    node.call(
        "GET",
        &format!("/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port={port}"),
    )
    .json()["healthy"]
        .as_bool()
}

/// A listener on `ip` that counts the connections it accepts, until the test ends.
fn counting_listener(ip: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (port, accepted)
}

#[test]
fn deny_listed_targets_and_the_nodes_own_sockets_are_never_probed() {
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--health-check-interval-secs".into(),
            "1".into(),
            "--health-check-deny".into(),
            "127.0.0.2/32".into(),
        ],
        ..Default::default()
    });
    let (denied_port, denied_accepts) = counting_listener("127.0.0.2");
    let (open_port, open_accepts) = counting_listener("127.0.0.1");
    register_unhealthy(&node, "deny", "127.0.0.2", denied_port);
    register_unhealthy(&node, "deny", "127.0.0.1", open_port);
    // The node's own HTTP and peer ports: answered if probed, so healthy if probed.
    register_unhealthy(&node, "deny", "127.0.0.1", node.http_port);
    register_unhealthy(&node, "deny", "127.0.0.1", node.peer_port);
    // An HTTP check at the node's own API as well: no request may reach it.
    let checker = enc(
        r#"{"type":"HTTP","path":"/nacos/v1/ns/instance/list?serviceName=probe","headers":"","expectedResponseCode":200}"#,
    );
    node.call("POST", "/nacos/v1/ns/instance?serviceName=selfcheck&ip=127.0.0.1&port=1&ephemeral=false&healthy=false")
        .expect(200);
    let r = node.call(
        "PUT",
        &format!("/nacos/v1/ns/cluster?serviceName=selfcheck&clusterName=DEFAULT&checkPort={}&useInstancePort4Check=false&healthChecker={checker}", node.http_port),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The checker runs: the open listener's instance turns healthy after three rounds.
    wait_health(&node, "deny", open_port, true);
    let rounds = open_accepts.load(Ordering::Relaxed);
    assert!(rounds >= 3, "{rounds} probes of the open target");
    // Two more rounds, to be sure of the rest.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        denied_accepts.load(Ordering::Relaxed),
        0,
        "the deny-listed target was connected to"
    );
    assert_eq!(
        health_of(&node, "deny", "127.0.0.2", denied_port),
        Some(false)
    );
    assert_eq!(
        health_of(&node, "deny", "127.0.0.1", node.http_port),
        Some(false)
    );
    assert_eq!(
        health_of(&node, "deny", "127.0.0.1", node.peer_port),
        Some(false)
    );
    assert_eq!(health_of(&node, "selfcheck", "127.0.0.1", 1), Some(false));
    let log = node.log();
    assert!(log.contains("health check skipped"), "the skip is logged");
}

#[test]
fn http_check_settings_that_could_inject_requests_are_refused() {
    let node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=inject&ip=127.0.0.1&port=1&ephemeral=false",
    )
    .expect(200);
    let put = |checker: &str| {
        node.call(
            "PUT",
            &format!("/nacos/v1/ns/cluster?serviceName=inject&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={}", enc(checker)),
        )
    };
    let cases = [
        (
            r#"{"type":"HTTP","path":"/h\r\nX-Injected: 1","headers":""}"#,
            "healthChecker.path",
        ),
        (
            r#"{"type":"HTTP","path":"/h HTTP/1.1\r\n\r\nGET /admin","headers":""}"#,
            "healthChecker.path",
        ),
        (
            r#"{"type":"HTTP","path":"health","headers":""}"#,
            "healthChecker.path",
        ),
        (
            r#"{"type":"HTTP","path":"/h","headers":"X-A: 1\r\nX-Injected: 2"}"#,
            "healthChecker.headers",
        ),
        (
            r#"{"type":"HTTP","path":"/h","headers":"X-A: 1\n\nGET /admin HTTP/1.1"}"#,
            "healthChecker.headers",
        ),
        (
            r#"{"type":"HTTP","path":"/h","headers":"Bad Name: 1"}"#,
            "healthChecker.headers",
        ),
        (
            r#"{"type":"HTTP","path":"/h","headers":"Transfer-Encoding: chunked"}"#,
            "healthChecker.headers",
        ),
    ];
    for (checker, field) in cases {
        let r = put(checker);
        assert!(
            r.status == 400 && r.body.contains(field),
            "{checker:?}: {} {}",
            r.status,
            r.body
        );
        assert!(
            !r.body.contains('\r') && !r.body.contains("X-Injected"),
            "{}",
            r.body
        );
    }
    // Nothing was stored: the cluster is still checked by TCP.
    let detail = node
        .call("GET", "/nacos/v1/ns/service?serviceName=inject")
        .expect(200)
        .json();
    assert_eq!(
        detail["clusters"][0]["healthChecker"]["type"], "TCP",
        "{detail}"
    );
    // Clean settings are stored.
    put(r#"{"type":"HTTP","path":"/health?x=%0D%0A","headers":"X-Probe: 1|Host: svc.local"}"#)
        .expect(200);
    let detail = node
        .call("GET", "/nacos/v1/ns/service?serviceName=inject")
        .expect(200)
        .json();
    assert_eq!(
        detail["clusters"][0]["healthChecker"]["path"], "/health?x=%0D%0A",
        "{detail}"
    );
}
