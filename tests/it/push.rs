//! UDP push to v1 subscribers, exercised with a socket that behaves like the Java 1.x
//! client: subscribe through a list query, receive `dom` packets, ack them.

use std::io::Read;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use roster_tests::{json, Node, Value};

const JAVA_AGENT: &str = "Nacos-Java-Client:v1.4.6";

/// Receives one push packet (gunzipped if needed) within `timeout`.
fn receive(socket: &UdpSocket, timeout: Duration) -> Option<(Value, std::net::SocketAddr, bool)> {
    socket.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = vec![0u8; 65536];
    let (len, from) = socket.recv_from(&mut buf).ok()?;
    let raw = &buf[..len];
    let gzipped = raw.starts_with(&[0x1f, 0x8b]);
    let text = if gzipped {
        let mut s = String::new();
        flate2::read::GzDecoder::new(raw)
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(raw.to_vec()).unwrap()
    };
    Some((serde_json::from_str(&text).unwrap(), from, gzipped))
}

fn ack(socket: &UdpSocket, packet: &Value, to: std::net::SocketAddr) {
    let ack = json!({"type":"push-ack","lastRefTime":packet["lastRefTime"],"data":""});
    socket.send_to(ack.to_string().as_bytes(), to).unwrap();
}

fn subscribe(node: &Node, service: &str, socket: &UdpSocket, agent: &str) {
    let port = socket.local_addr().unwrap().port();
    let token = node.token();
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={service}&clusters=DEFAULT&udpPort={port}&clientIP=127.0.0.1&app=shop&accessToken={token}"),
        &[("user-agent", agent)],
        None,
    )
    .expect(200);
}

#[test]
fn changes_are_pushed_acked_and_subscribers_listed() {
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "pushed", &socket, JAVA_AGENT);
    let subs = node
        .call("GET", "/nacos/v1/ns/service/subscribers?serviceName=pushed")
        .expect(200)
        .json();
    assert_eq!(subs["count"], 1);
    let s = &subs["subscribers"][0];
    assert_eq!(s["agent"], JAVA_AGENT);
    assert_eq!(s["app"], "shop");
    assert_eq!(
        s["port"].as_u64(),
        Some(u64::from(socket.local_addr().unwrap().port()))
    );
    assert_eq!(s["serviceName"], "DEFAULT_GROUP@@pushed");

    let sent_at = Instant::now();
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=pushed&ip=127.16.0.1&port=80",
    )
    .expect(200);
    let (packet, from, _) = receive(&socket, Duration::from_secs(5)).expect("a push");
    let latency = sent_at.elapsed();
    assert_eq!(packet["type"], "dom");
    let data: Value = serde_json::from_str(packet["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["name"], "DEFAULT_GROUP@@pushed");
    assert_eq!(data["clusters"], "DEFAULT");
    assert_eq!(data["hosts"][0]["ip"], "127.16.0.1");
    eprintln!("push arrived {latency:?} after the registration was acknowledged");
    ack(&socket, &packet, from);
    // Acked pushes are not resent: nothing with this push's lastRefTime comes again (a
    // push of a later change, acked in turn, may).
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        let Some((again, from, _)) = receive(&socket, left) else {
            break;
        };
        assert_ne!(
            again["lastRefTime"], packet["lastRefTime"],
            "no resend after an ack: {again}"
        );
        eprintln!("a later push arrived meanwhile: {again}");
        ack(&socket, &again, from);
    }
    let acked = node
        .metric("roster_udp_pushes_total{outcome=\"acked\"}")
        .unwrap_or(0.0);
    assert!(acked >= 1.0);

    // Deregistration is pushed too, as an empty host list.
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=pushed&ip=127.16.0.1&port=80",
    )
    .expect(200);
    let (packet, from, _) = receive(&socket, Duration::from_secs(5)).expect("a push");
    let data: Value = serde_json::from_str(packet["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["hosts"], json!([]));
    ack(&socket, &packet, from);
}

#[test]
fn unacked_pushes_are_resent_a_bounded_number_of_times() {
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "resend", &socket, JAVA_AGENT);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=resend&ip=127.17.0.1&port=80",
    )
    .expect(200);
    let (first, _, _) = receive(&socket, Duration::from_secs(5)).expect("a push");
    let mut copies = 1;
    while let Some((again, _, _)) = receive(&socket, Duration::from_secs(6)) {
        assert_eq!(again["lastRefTime"], first["lastRefTime"], "the same push");
        copies += 1;
        assert!(copies <= 10, "resends are bounded");
    }
    assert!(copies >= 2, "resent at least once without an ack");
    assert_eq!(
        node.metric("roster_udp_pushes_total{outcome=\"failed\"}"),
        Some(1.0)
    );
}

#[test]
fn a_newer_push_replaces_an_unacked_older_one() {
    // A client that missed a push (no ack) and then got and acked a newer one must not
    // be sent the older state again: clients keep whatever they received last.
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "superseded", &socket, JAVA_AGENT);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=superseded&ip=127.17.1.1&port=80",
    )
    .expect(200);
    let (older, _, _) = receive(&socket, Duration::from_secs(5)).expect("a push");
    // Not acked. The next change is pushed anew, and acked.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=superseded&ip=127.17.1.2&port=80",
    )
    .expect(200);
    let newer = loop {
        let (packet, from, _) = receive(&socket, Duration::from_secs(5)).expect("a push");
        if packet["lastRefTime"] != older["lastRefTime"] {
            ack(&socket, &packet, from);
            break packet;
        }
    };
    let hosts = |packet: &Value| -> usize {
        let data: Value = serde_json::from_str(packet["data"].as_str().unwrap()).unwrap();
        data["hosts"].as_array().unwrap().len()
    };
    assert_eq!(hosts(&newer), 2);
    // The older push would have been resent after 1 s: nothing old may come now.
    let quiet_until = Instant::now() + Duration::from_millis(2_500);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        let Some((again, from, _)) = receive(&socket, left) else {
            break;
        };
        assert_ne!(
            again["lastRefTime"], older["lastRefTime"],
            "the older state was resent after a newer one: {again}"
        );
        ack(&socket, &again, from);
    }
    assert_eq!(
        node.metric("roster_udp_pushes_total{outcome=\"superseded\"}"),
        Some(1.0)
    );
}

#[test]
fn large_pushes_are_gzipped() {
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "big", &socket, JAVA_AGENT);
    let token = node.token();
    let auth = format!("Bearer {token}");
    for i in 0..20 {
        let path = format!("/nacos/v1/ns/instance?serviceName=big&ip=127.18.0.{i}&port=80");
        node.raw("POST", &path, &[("authorization", &auth)], None)
            .expect(200);
    }
    // Drain pushes until one carries all 20 hosts (changes coalesce).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (packet, from, gzipped) = receive(&socket, Duration::from_secs(5)).expect("a push");
        ack(&socket, &packet, from);
        let data: Value = serde_json::from_str(packet["data"].as_str().unwrap()).unwrap();
        if data["hosts"].as_array().unwrap().len() == 20 {
            assert!(gzipped, "a 20-host push is over 1 KiB and must be gzipped");
            break;
        }
        assert!(Instant::now() < deadline, "never saw all 20 hosts");
    }
}

#[test]
fn clients_that_cannot_listen_are_not_subscribed() {
    let node = Node::start();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "nopush", &socket, "Nacos-Python-Client:v0.1.16");
    let subs = node
        .call("GET", "/nacos/v1/ns/service/subscribers?serviceName=nopush")
        .expect(200)
        .json();
    assert_eq!(subs["count"], 0);
    let r = node.call(
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=x&udpPort=99999&clientIP=127.0.0.1",
    );
    assert!(r.status == 400 && r.body.contains("udpPort"), "{}", r.body);
    let r = node.call(
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=x&udpPort=5000&clientIP=nope",
    );
    assert!(r.status == 400 && r.body.contains("clientIP"), "{}", r.body);
}

#[test]
fn subscribers_expire_when_they_stop_querying() {
    let node = Node::start_with(roster_tests::NodeOptions {
        args: vec!["--subscriber-ttl-secs".into(), "1".into()],
        ..Default::default()
    });
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    subscribe(&node, "fade", &socket, JAVA_AGENT);
    roster_tests::eventually(Duration::from_secs(5), || {
        let subs = node
            .call("GET", "/nacos/v1/ns/service/subscribers?serviceName=fade")
            .json();
        if subs["count"] == 0 {
            Ok(())
        } else {
            Err(subs.to_string())
        }
    });
}

/// A user who is not an admin, and their token.
fn plain_user_token(node: &Node) -> String {
    node.call(
        "POST",
        "/nacos/v1/auth/users?username=pusher&password=pusher-pass-1",
    )
    .expect(200);
    // Read access to the public namespace, no more: subscribing is reading.
    node.call("POST", "/nacos/v1/auth/roles?role=reader&username=pusher")
        .expect(200);
    node.call(
        "POST",
        "/nacos/v1/auth/permissions?role=reader&resource=%3A*%3A*&action=r",
    )
    .expect(200);
    let r = node
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=pusher&password=pusher-pass-1",
            &[],
            None,
        )
        .expect(200);
    r.json()["accessToken"].as_str().unwrap().to_string()
}

/// Two UDP sockets on the same port, one on 127.0.0.1 and one on 127.0.0.2.
fn socket_pair() -> (UdpSocket, UdpSocket) {
    for _ in 0..50 {
        let there = UdpSocket::bind("127.0.0.2:0").unwrap();
        let port = there.local_addr().unwrap().port();
        if let Ok(here) = UdpSocket::bind(("127.0.0.1", port)) {
            return (here, there);
        }
    }
    panic!("no UDP port free on both 127.0.0.1 and 127.0.0.2");
}

fn subscribe_as(node: &Node, token: &str, service: &str, client_ip: &str, port: u16) {
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={service}&udpPort={port}&clientIP={client_ip}&accessToken={token}"),
        &[("user-agent", JAVA_AGENT)],
        None,
    )
    .expect(200);
}

#[test]
fn pushes_go_only_to_the_address_the_query_came_from() {
    let node = Node::start();
    let token = plain_user_token(&node);
    let (here, there) = socket_pair();
    let port = here.local_addr().unwrap().port();
    // The query comes from 127.0.0.1 and names 127.0.0.2: the pushes come here.
    subscribe_as(&node, &token, "aimed", "127.0.0.2", port);
    let subs = node
        .call("GET", "/nacos/v1/ns/service/subscribers?serviceName=aimed")
        .expect(200)
        .json();
    assert_eq!(subs["count"], 1, "{subs}");
    assert_eq!(subs["subscribers"][0]["ip"], "127.0.0.1", "{subs}");
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=aimed&ip=127.19.0.1&port=80",
    )
    .expect(200);
    let (packet, from, _) =
        receive(&here, Duration::from_secs(5)).expect("a push to the requester");
    ack(&here, &packet, from);
    // Nothing at the address the query named, resends included (1 s, 2 s, 4 s).
    assert!(
        receive(&there, Duration::from_secs(3)).is_none(),
        "a push went to the clientIP the query named"
    );
    // An admin may subscribe another address (an agent behind a proxy).
    subscribe_as(&node, &node.token(), "aimed-admin", "127.0.0.2", port);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=aimed-admin&ip=127.19.0.2&port=80",
    )
    .expect(200);
    let (packet, from, _) =
        receive(&there, Duration::from_secs(5)).expect("a push where the admin said");
    ack(&there, &packet, from);
    // Ports outside 1..=65535 are refused; 0 subscribes nothing.
    for bad in ["-1", "65536", "abc"] {
        let r = node.call(
            "GET",
            &format!(
                "/nacos/v1/ns/instance/list?serviceName=aimed&udpPort={bad}&clientIP=127.0.0.1"
            ),
        );
        assert!(
            r.status == 400 && r.body.contains("udpPort"),
            "{bad}: {}",
            r.body
        );
    }
    subscribe_as(&node, &token, "aimed-zero", "127.0.0.1", 0);
    let subs = node
        .call(
            "GET",
            "/nacos/v1/ns/service/subscribers?serviceName=aimed-zero",
        )
        .expect(200)
        .json();
    assert_eq!(subs["count"], 0, "{subs}");
}
