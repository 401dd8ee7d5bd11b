//! Server-side health checks of persistent instances: TCP by default, HTTP when the
//! cluster says so; health flips after three opposite results and is committed.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
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
