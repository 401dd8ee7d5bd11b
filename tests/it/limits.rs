//! What the HTTP and gRPC listeners let a client hold, and a node out of descriptors:
//! a request head that stalls and a keep-alive connection left idle are closed, each on
//! its own clock; a request body that stalls is answered 408 and closed, one that keeps
//! coming slowly is served; connections over a cap are closed at once while the others
//! are served, and one IP gets only its share of the HTTP port; a gRPC connection that
//! never sets up a client is closed, and one IP gets only its share; and a node whose descriptors a flood of idle connections used up keeps
//! serving, keeps its persistent instances' health, writes its Raft snapshot once
//! descriptors free, and never shuts down. The DNS port's TCP side is capped and closes
//! a connection that goes without a complete query for 10 s, while UDP answers on.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roster_tests::{eventually, free_port, json, unique, Node, NodeOptions};

use crate::grpc::{decode, payload, RawClient};

/// Sends `request` on `stream` and reads one response; its status, or `None` when the
/// server closed the connection instead.
fn exchange(stream: &mut TcpStream, request: &str) -> Option<u16> {
    if stream.write_all(request.as_bytes()).is_err() {
        return None;
    }
    answer(stream, Duration::from_secs(10))
}

/// Reads one response off `stream` within `within`; its status, or `None` when the
/// server closed the connection (or said nothing) instead.
fn answer(stream: &mut TcpStream, within: Duration) -> Option<u16> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
    let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    while got.len() < head_end + length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    Some(status)
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: roster\r\n\r\n")
}

/// How long until the server closes `stream` (reading and dropping what it sends), or
/// `None` if it is still open after `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() {
            return None;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(_) => return Some(started.elapsed()),
        }
    }
}

fn connect(node: &Node) -> TcpStream {
    TcpStream::connect(node.addr()).expect("connect")
}

#[test]
fn a_stalled_request_head_and_an_idle_keep_alive_connection_are_closed_each_on_its_clock() {
    let node = Node::start_with(NodeOptions {
        args: [
            "--http-header-timeout-secs",
            "1",
            "--http-idle-timeout-secs",
            "4",
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    });
    // Three connections side by side: half a head, nothing at all, and a request
    // answered and then left idle.
    let opened = Instant::now();
    let mut half = connect(&node);
    half.write_all(b"GET /health/live HTTP/1.1\r\nHost: ro")
        .unwrap();
    let mut silent = connect(&node);
    let mut idle = connect(&node);
    assert_eq!(exchange(&mut idle, &get("/health/live")), Some(200));
    let answered = Instant::now();

    closed_within(&mut half, Duration::from_secs(6))
        .expect("a stalled head is closed after the header timeout");
    let half_closed = opened.elapsed();
    assert!(
        half_closed >= Duration::from_millis(950) && half_closed < Duration::from_secs(3),
        "half a head closed after {half_closed:?} (header timeout 1 s)"
    );
    let silent_closed = closed_within(&mut silent, Duration::from_secs(6))
        .expect("a connection that never sends a head is closed");
    assert!(
        silent_closed < Duration::from_secs(3),
        "a silent new connection closed after {silent_closed:?} (header timeout 1 s)"
    );
    // The idle connection outlives the header timeout: idleness has its own clock.
    closed_within(&mut idle, Duration::from_secs(10)).expect("an idle connection is closed");
    let idle_closed = answered.elapsed();
    assert!(
        idle_closed >= Duration::from_millis(3800) && idle_closed < Duration::from_secs(8),
        "idle keep-alive closed {idle_closed:?} after its answer (idle timeout 4 s)"
    );

    // A connection that keeps asking stays, past both clocks.
    let mut busy = connect(&node);
    for _ in 0..6 {
        assert_eq!(exchange(&mut busy, &get("/health/live")), Some(200));
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_eq!(exchange(&mut busy, &get("/health/ready")), Some(200));
}

#[test]
fn connections_over_the_http_cap_are_closed_at_once_while_the_others_are_served() {
    const CAP: usize = 4;
    let node = Node::start_with(NodeOptions {
        args: vec!["--http-max-connections".into(), CAP.to_string()],
        ..Default::default()
    });
    // The harness may hold one pooled connection of its own: open until one is refused.
    let mut admitted = Vec::new();
    let mut refused_in = None;
    for _ in 0..CAP + 2 {
        let mut stream = connect(&node);
        let started = Instant::now();
        match exchange(&mut stream, &get("/health/ready")) {
            Some(status) => {
                assert_eq!(status, 200);
                admitted.push(stream);
            }
            None => {
                refused_in = Some(started.elapsed());
                break;
            }
        }
    }
    let refused_in = refused_in.expect("a connection over the cap is refused");
    assert!(
        refused_in < Duration::from_secs(2),
        "refused after {refused_in:?}"
    );
    assert!(
        (CAP - 1..=CAP).contains(&admitted.len()),
        "{} admitted under a cap of {CAP}",
        admitted.len()
    );
    // The admitted connections are still served, while another is refused.
    for stream in &mut admitted {
        assert_eq!(exchange(stream, &get("/health/live")), Some(200));
    }
    assert_eq!(exchange(&mut connect(&node), &get("/health/live")), None);
    // A place given back is taken by the next connection.
    admitted.pop();
    eventually(Duration::from_secs(5), || {
        match exchange(&mut connect(&node), &get("/health/live")) {
            Some(200) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

/// A connection to `node`'s HTTP port from the loopback address `source` (the harness's
/// own client comes from 127.0.0.1).
fn connect_from(node: &Node, source: &str) -> TcpStream {
    let local: SocketAddr = format!("{source}:0").parse().unwrap();
    let server: SocketAddr = node.addr().parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(local).expect("bind a loopback source address");
        let stream = socket.connect(server).await.expect("connect");
        stream.into_std().unwrap()
    });
    stream.set_nonblocking(false).unwrap();
    stream
}

#[test]
fn one_ip_gets_only_its_share_of_http_connections() {
    const PER_IP: usize = 3;
    let node = Node::start_with(NodeOptions {
        args: vec!["--http-max-connections-per-ip".into(), PER_IP.to_string()],
        ..Default::default()
    });
    // From an address of its own: the harness's pooled connections come from 127.0.0.1.
    let mut admitted = Vec::new();
    for i in 0..PER_IP {
        let mut stream = connect_from(&node, "127.0.0.3");
        assert_eq!(
            exchange(&mut stream, &get("/health/live")),
            Some(200),
            "connection {i} of the share"
        );
        admitted.push(stream);
    }
    let started = Instant::now();
    let mut over = connect_from(&node, "127.0.0.3");
    assert_eq!(
        exchange(&mut over, &get("/health/live")),
        None,
        "a connection over one IP's share is closed"
    );
    let refused_in = started.elapsed();
    assert!(
        refused_in < Duration::from_secs(2),
        "refused after {refused_in:?}"
    );
    // Another IP, and the harness's 127.0.0.1, are not held to 127.0.0.3's share; the
    // admitted connections are still served.
    let mut other = connect_from(&node, "127.0.0.4");
    assert_eq!(exchange(&mut other, &get("/health/live")), Some(200));
    node.raw("GET", "/health/ready", &[], None).expect(200);
    for stream in &mut admitted {
        assert_eq!(exchange(stream, &get("/health/live")), Some(200));
    }
    let refused = |cap: &str| {
        node.metric(&format!(
            "roster_http_connections_refused_total{{cap=\"{cap}\"}}"
        ))
    };
    assert_eq!(refused("per_ip"), Some(1.0));
    assert_eq!(refused("total"), Some(0.0));
    // A place given back is taken by the IP's next connection.
    admitted.pop();
    eventually(Duration::from_secs(5), || {
        match exchange(&mut connect_from(&node, "127.0.0.3"), &get("/health/live")) {
            Some(200) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    assert!(node.log().contains("connection limit of one IP reached"));
}

#[test]
fn a_stalled_request_body_is_answered_408_and_closed_while_a_slow_steady_one_is_served() {
    const BODY_SECS: u64 = 2;
    let node = Node::start_with(NodeOptions {
        args: vec!["--http-body-timeout-secs".into(), BODY_SECS.to_string()],
        ..Default::default()
    });
    let token = node.token();
    let form = "application/x-www-form-urlencoded";
    let stalled = unique("stalled");
    // Three bodies that stop, side by side: an anonymous form (the guard reads forms
    // before authentication) cut halfway, a login whose body never starts, and an
    // admin's JSON body to a handler that reads it itself.
    let stalls = [
        (
            "/nacos/v1/ns/instance".to_string(),
            form,
            format!("serviceName={stalled}&ip=127.0.0.1&port=80"),
            200,
        ),
        ("/nacos/v1/auth/login".to_string(), form, String::new(), 64),
        (
            format!("/api/v1/sync/tasks?accessToken={token}"),
            "application/json",
            r#"{"name":"#.to_string(),
            100,
        ),
    ];
    let sent = Instant::now();
    let mut streams: Vec<TcpStream> = stalls
        .iter()
        .map(|(path, kind, part, length)| {
            let mut stream = connect(&node);
            write!(
                stream,
                "POST {path} HTTP/1.1\r\nHost: roster\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n\r\n{part}"
            )
            .unwrap();
            stream
        })
        .collect();
    for (stream, (path, ..)) in streams.iter_mut().zip(&stalls) {
        let status = answer(stream, Duration::from_secs(BODY_SECS + 8));
        let took = sent.elapsed();
        assert_eq!(status, Some(408), "{path}: a stalled body, after {took:?}");
        assert!(
            took >= Duration::from_millis(BODY_SECS * 1000 - 200)
                && took < Duration::from_secs(BODY_SECS + 4),
            "{path}: answered {took:?} after the head (body timeout {BODY_SECS} s)"
        );
        closed_within(stream, Duration::from_secs(2))
            .unwrap_or_else(|| panic!("{path}: the connection stays open after the 408"));
    }
    assert_eq!(node.metric("roster_http_body_timeouts_total"), Some(3.0));
    // The cut registration changed nothing.
    let list = node.call(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={stalled}"),
    );
    assert!(
        list.status == 404 || list.json()["hosts"] == json!([]),
        "{} {}",
        list.status,
        list.body
    );

    // A legal body that keeps coming, a few bytes every 300 ms for longer than the
    // timeout, is read whole and served.
    let steady = unique("steady");
    let body = format!("serviceName={steady}&ip=127.0.0.8&port=8080");
    let mut stream = connect(&node);
    stream.set_nodelay(true).unwrap();
    write!(
        stream,
        "POST /nacos/v1/ns/instance?accessToken={token} HTTP/1.1\r\nHost: roster\r\nContent-Type: {form}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let started = Instant::now();
    for chunk in body.as_bytes().chunks(3) {
        std::thread::sleep(Duration::from_millis(300));
        stream.write_all(chunk).unwrap();
    }
    assert!(started.elapsed() > Duration::from_secs(BODY_SECS + 1));
    assert_eq!(answer(&mut stream, Duration::from_secs(10)), Some(200));
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={steady}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"][0]["ip"], "127.0.0.8", "{list}");
    assert_eq!(node.metric("roster_http_body_timeouts_total"), Some(3.0));
}

/// A connection to the gRPC port from `local` (a loopback address).
async fn grpc_socket(node: &Node, local: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(format!("{local}:0").parse::<SocketAddr>().unwrap())
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", node.http_port + 1000)
        .parse()
        .unwrap();
    socket
        .connect(addr)
        .await
        .expect("connect to the gRPC port")
}

/// How long until the server closes `stream`, or `None` if it is open after `within`.
async fn grpc_closed_within(
    stream: &mut tokio::net::TcpStream,
    within: Duration,
) -> Option<Duration> {
    use tokio::io::AsyncReadExt;
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.ok()
}

#[test]
fn grpc_connections_must_set_up_a_client_in_time_and_one_ip_gets_only_its_share() {
    const SETUP_SECS: u64 = 3;
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--grpc-setup-timeout-secs".into(),
            SETUP_SECS.to_string(),
            "--grpc-max-connections-per-ip".into(),
            "3".into(),
        ],
        ..Default::default()
    });
    let token = node.token();
    let grpc_addr = format!("127.0.0.1:{}", node.http_port + 1000);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use tokio::io::AsyncWriteExt;
        // HTTP/2 spoken, but no client ever set up: closed after the deadline.
        let mut mute = grpc_socket(&node, "127.0.0.5").await;
        mute.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            .await
            .unwrap();
        // A Nacos client that sets up is kept past the deadline.
        let mut client = RawClient::connect(&grpc_addr).await;
        client.open_stream().await;
        client
            .send(
                "ConnectionSetupRequest",
                json!({"clientVersion":"Roster-Test:v1","tenant":"","labels":{},"abilityTable":{}}),
            )
            .await;
        client.expect("SetupAckRequest", Duration::from_secs(5)).await;

        let closed = grpc_closed_within(&mut mute, Duration::from_secs(SETUP_SECS + 6))
            .await
            .expect("a connection that never sets up a client is closed");
        assert!(
            closed >= Duration::from_millis(SETUP_SECS * 1000 - 300),
            "closed after {closed:?}, before the {SETUP_SECS} s deadline"
        );
        // The set-up client's connection is the same one, registered, after the deadline.
        let service = unique("limits");
        let body = json!({"headers":{},"namespace":"public","serviceName":service,"groupName":"DEFAULT_GROUP",
            "type":"registerInstance","instance":{"ip":"127.0.0.9","port":8080,"weight":1.0,"healthy":true,
            "enabled":true,"ephemeral":true,"clusterName":"DEFAULT","metadata":{}},"module":"naming"});
        let reply = client
            .try_unary(payload("InstanceRequest", &body, Some(&token)))
            .await
            .expect("unary call");
        let (kind, reply) = decode(&reply);
        assert_eq!((kind.as_str(), &reply["success"]), ("InstanceResponse", &json!(true)), "{reply}");

        // 127.0.0.1 holds one connection (the client); two more are admitted, then no more.
        let mut second = grpc_socket(&node, "127.0.0.1").await;
        let mut third = grpc_socket(&node, "127.0.0.1").await;
        let mut fourth = grpc_socket(&node, "127.0.0.1").await;
        let refused = grpc_closed_within(&mut fourth, Duration::from_secs(1))
            .await
            .expect("a fourth connection from one IP is closed at once");
        assert!(refused < Duration::from_secs(1));
        // Another IP is not held to 127.0.0.1's share.
        let mut other = grpc_socket(&node, "127.0.0.2").await;
        for (name, stream) in [("second", &mut second), ("third", &mut third), ("other IP", &mut other)] {
            assert!(
                grpc_closed_within(stream, Duration::from_millis(500)).await.is_none(),
                "the {name} connection was closed at once"
            );
        }
    });
    // The HTTP side never noticed.
    node.raw("GET", "/health/ready", &[], None).expect(200);
}

/// A port on 127.0.0.1 that accepts (and drops) connections until the returned flag is
/// set, or for five minutes at most: a live instance for TCP health checks.
fn live_port() -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(300);
        while !stopping.load(Ordering::Relaxed) && Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => drop(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    (port, stop)
}

#[test]
fn a_node_out_of_descriptors_keeps_serving_and_writes_its_snapshot_once_they_free() {
    const FLOOD: usize = 300;
    let node = Node::start_with(NodeOptions {
        // 256 descriptors: fewer than the flood below.
        wrapper: vec!["prlimit".into(), "--nofile=256:256".into()],
        args: [
            "--raft-snapshot-logs",
            "10",
            // Probes of the live instance below go on through the exhaustion.
            "--health-check-interval-secs",
            "1",
            // The flood's connections stay until this test lets them go.
            "--http-header-timeout-secs",
            "300",
            "--http-idle-timeout-secs",
            "300",
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    });
    let token = node.token();
    let applied_before = node.call("GET", "/api/v1/cluster").expect(200).json()["appliedIndex"]
        .as_u64()
        .expect("appliedIndex");
    // A live persistent instance, healthy before the flood.
    let (live, stop_live) = live_port();
    let checked = unique("live");
    let instance = format!("/nacos/v1/ns/instance?serviceName={checked}&ip=127.0.0.1&port={live}");
    node.call("POST", &format!("{instance}&ephemeral=false"))
        .expect(200);
    let health = || node.call("GET", &instance).expect(200).json()["healthy"].clone();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(health(), json!(true), "probed healthy before the flood");
    // A keep-alive connection opened before the flood, to write through during it.
    let mut writer = connect(&node);
    assert_eq!(exchange(&mut writer, &get("/health/ready")), Some(200));

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut flood = Vec::new();
    while flood.len() < FLOOD && Instant::now() < deadline {
        match TcpStream::connect_timeout(&node.addr().parse().unwrap(), Duration::from_secs(2)) {
            Ok(stream) => flood.push(stream),
            Err(e) => panic!("flood connection {}: {e}", flood.len()),
        }
    }
    assert_eq!(flood.len(), FLOOD);
    eventually(Duration::from_secs(15), || {
        node.log()
            .contains("cannot accept connections")
            .then_some(())
            .ok_or_else(|| "the node has not run out of descriptors".to_string())
    });

    // Twelve Raft writes while no descriptor is free: a snapshot is due after ten.
    let prefix = unique("lim");
    for i in 0..12 {
        let request = format!(
            "POST /nacos/v1/console/namespaces?customNamespaceId={prefix}-{i}&namespaceName={prefix}-{i}&accessToken={token} HTTP/1.1\r\nHost: roster\r\nContent-Length: 0\r\n\r\n"
        );
        assert_eq!(exchange(&mut writer, &request), Some(200), "namespace {i}");
    }
    eventually(Duration::from_secs(15), || {
        node.log()
            .contains("transient storage error; retrying")
            .then_some(())
            .ok_or_else(|| "no snapshot write has met the exhaustion yet".to_string())
    });
    // Out of descriptors for a few seconds more (more health-check rounds than it takes
    // to flip), the node still answers on the connection it has.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(exchange(&mut writer, &get("/health/ready")), Some(200));
    drop(flood);

    // Descriptors free: the snapshot is written and the node serves new connections.
    let view = eventually(Duration::from_secs(30), || {
        let r = node.try_request(
            "GET",
            &format!("/api/v1/cluster?accessToken={token}"),
            &[],
            None,
        )?;
        let view = r.json();
        if view["snapshotIndex"].as_u64().unwrap_or(0) > applied_before {
            Ok(view)
        } else {
            Err(format!("no snapshot past {applied_before} yet: {view}"))
        }
    });
    assert_eq!(view["ready"], true, "{view}");
    node.raw("GET", "/health/ready", &[], None).expect(200);
    let service = unique("after-flood");
    node.call_form(
        "POST",
        "/nacos/v1/ns/instance",
        &format!("serviceName={service}&ip=127.0.0.7&port=8080"),
    )
    .expect(200);
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"][0]["ip"], "127.0.0.7", "{list}");
    let log = node.log();
    assert!(
        log.contains("storage recovered from transient errors"),
        "{log}"
    );
    assert!(!log.contains("raft stopped"), "{log}");
    // The probes this node could not make counted against no instance.
    assert!(
        log.contains("cannot open health-check connections"),
        "no probe met the exhaustion: {log}"
    );
    assert!(
        !log.contains("health check flipped an instance"),
        "the live instance was marked down while the node was out of descriptors: {log}"
    );
    assert_eq!(health(), json!(true));
    stop_live.store(true, Ordering::Relaxed);
}

/// A DNS query for the A records of `name`, with `id`.
fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut query = id.to_be_bytes().to_vec();
    // Recursion desired; one question, no other records.
    query.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    // The root label, type A, class IN.
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    query
}

/// The id and response code of a DNS answer.
fn dns_reply(reply: &[u8]) -> Option<(u16, u8)> {
    (reply.len() >= 12).then(|| (u16::from_be_bytes([reply[0], reply[1]]), reply[3] & 0x0f))
}

/// NXDOMAIN: the answer to a name in the zone that names nothing.
const NXDOMAIN: u8 = 3;

/// Asks `name` over TCP on `stream`: the answer's id and response code, or `None` when
/// the server closed the connection instead.
fn ask_tcp(stream: &mut TcpStream, id: u16, name: &str) -> Option<(u16, u8)> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let query = dns_query(id, name);
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    stream.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).ok()?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).ok()?;
    dns_reply(&reply)
}

/// Asks `name` over UDP at `addr`: the answer's id and response code, or `None`.
fn ask_udp(addr: SocketAddr, id: u16, name: &str) -> Option<(u16, u8)> {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    socket.send_to(&dns_query(id, name), addr).ok()?;
    let mut reply = [0u8; 1500];
    let n = socket.recv(&mut reply).ok()?;
    dns_reply(&reply[..n])
}

/// Whether the server has closed `stream` (looked at without waiting).
fn is_closed(mut stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let closed = match stream.read(&mut [0u8; 64]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn dns_over_tcp_is_capped_and_closes_silent_connections_while_udp_answers() {
    // The DNS port's TCP cap (`dns::TCP_MAX_CONNECTIONS`) and timeout (`TCP_IDLE_TIMEOUT`).
    const CAP: usize = 150;
    const TIMEOUT: Duration = Duration::from_secs(10);
    // More than the cap, and more than the node's descriptors.
    const FLOOD: usize = 300;
    let dns_port = free_port();
    let node = Node::start_with(NodeOptions {
        wrapper: vec!["prlimit".into(), "--nofile=256:256".into()],
        args: vec!["--dns".into(), format!("127.0.0.1:{dns_port}")],
        ..Default::default()
    });
    let dns: SocketAddr = ([127, 0, 0, 1], dns_port).into();
    let name = format!("{}.roster.", unique("nothing"));

    // A connection that asks once and stays, half a query (its length, and nothing
    // after), then a flood of silent connections.
    let opened = Instant::now();
    let mut asked = TcpStream::connect(dns).unwrap();
    assert_eq!(ask_tcp(&mut asked, 1, &name), Some((1, NXDOMAIN)));
    let mut half = TcpStream::connect(dns).unwrap();
    half.write_all(&[0, 40, 0x12]).unwrap();
    let mut flood = Vec::new();
    for i in 0..FLOOD {
        let stream = TcpStream::connect_timeout(&dns, Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("flood connection {i}: {e}"));
        flood.push(stream);
    }
    // Those over the cap are closed at once; the first two and the rest are kept.
    eventually(Duration::from_secs(5), || {
        let closed = flood.iter().filter(|s| is_closed(s)).count();
        if closed >= FLOOD - (CAP - 2) {
            Ok(())
        } else {
            Err(format!("{closed} of {FLOOD} closed; the cap is {CAP}"))
        }
    });
    let mut kept: Vec<TcpStream> = flood.into_iter().filter(|s| !is_closed(s)).collect();
    assert_eq!(
        kept.len(),
        CAP - 2,
        "kept under the cap, with the first two"
    );
    assert!(!is_closed(&half), "the half query was closed at once");
    assert!(
        !is_closed(&asked),
        "the connection that asked was closed at once"
    );

    // Meanwhile the node has descriptors for new HTTP connections, UDP answers, and a
    // new TCP connection over the cap is closed rather than left waiting.
    assert_eq!(
        exchange(&mut connect(&node), &get("/health/ready")),
        Some(200)
    );
    assert_eq!(ask_udp(dns, 2, &name), Some((2, NXDOMAIN)));
    assert_eq!(
        ask_tcp(&mut TcpStream::connect(dns).unwrap(), 3, &name),
        None
    );

    // After the timeout, the half query, the one that asked and the silent ones are
    // closed.
    closed_within(&mut half, TIMEOUT + Duration::from_secs(8))
        .expect("half a query is closed after the timeout");
    let half_closed = opened.elapsed();
    assert!(
        half_closed >= TIMEOUT - Duration::from_millis(500)
            && half_closed < TIMEOUT + Duration::from_secs(6),
        "half a query closed {half_closed:?} after connecting (timeout {TIMEOUT:?})"
    );
    kept.push(asked);
    eventually(Duration::from_secs(5), || {
        let open = kept.iter().filter(|s| !is_closed(s)).count();
        if open == 0 {
            Ok(())
        } else {
            Err(format!("{open} idle connections still open"))
        }
    });
    // Their places free, TCP answers again, on one connection query after query.
    let mut asking = TcpStream::connect(dns).unwrap();
    for id in 4..7 {
        assert_eq!(ask_tcp(&mut asking, id, &name), Some((id, NXDOMAIN)));
    }
    assert!(node
        .log()
        .contains("connection limit of the listener reached"));
}
