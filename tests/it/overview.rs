//! The console's Overview (issue 22): `GET /api/v1/overview` serves the node's own
//! metric history (a sample at start-up, then one every 5 s), and the members' consoles
//! may call any member's API from the browser (CORS for the members' origins only).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use roster_tests::{eventually, unique, Cluster, Https, Node, NodeOptions, Resp, Value};

/// The overview of `node`, as the admin, `since` a sample's `t` if given.
fn overview(node: &Node, since: Option<u64>) -> Value {
    let path = match since {
        Some(t) => format!("/api/v1/overview?since={t}"),
        None => "/api/v1/overview".to_string(),
    };
    node.call("GET", &path).expect(200).json()
}

fn samples(overview: &Value) -> &Vec<Value> {
    overview["samples"].as_array().expect("samples")
}

/// The latest sample of `node`'s overview.
fn latest(node: &Node) -> Value {
    let o = overview(node, None);
    samples(&o).last().expect("a sample").clone()
}

/// Waits for samples taken after `since` and returns them (the sampler takes one every
/// 5 s).
fn samples_after(node: &Node, since: u64) -> Vec<Value> {
    eventually(Duration::from_secs(15), || {
        let o = overview(node, Some(since));
        let new = samples(&o).clone();
        if new.is_empty() {
            Err(format!("no sample after {since}"))
        } else {
            Ok(new)
        }
    })
}

#[test]
fn a_node_charts_its_own_figures_from_its_first_second() {
    let node = Node::start();
    let first = overview(&node, None);
    assert_eq!(first["node"], 1);
    assert_eq!(first["intervalMs"], 5000);
    assert_eq!(first["windowMs"], 900_000);
    let start = samples(&first);
    assert!(!start.is_empty(), "a sample at start-up: {first}");
    // Raft as it is at the answer, whatever the newest sample (taken at start-up, up
    // to 5 s ago, before the node led) says: what the console's summary shows.
    assert_eq!(first["raft"]["state"], "leader", "{first}");
    assert_eq!(first["raft"]["leader"], 1, "{first}");
    assert!(first["raft"]["term"].as_u64() > Some(0), "{first}");
    let s = &start[0];
    for key in [
        "t",
        "instances",
        "healthy",
        "registrations",
        "deregistrations",
        "beats",
        "pushes",
        "pushFailures",
    ] {
        assert!(s[key].is_number(), "{key} in {s}");
    }
    for face in ["v1", "v2", "grpc", "api", "v3", "eureka", "consul"] {
        assert!(s["faces"][face]["rate"].is_number(), "{face} in {s}");
    }
    assert!(s["raft"]["term"].is_number(), "{s}");
    assert!(s["guardEngaged"].is_array(), "{s}");
    for state in [
        "pending", "starting", "running", "holding", "error", "paused",
    ] {
        assert_eq!(s["syncTasks"][state], 0, "{state} in {s}");
    }
    let t0 = start.last().unwrap()["t"].as_u64().unwrap();

    // Instances registered over Nacos v1 and v2, read back over both and over /api/v1.
    let (v1, v2) = (unique("ov-v1"), unique("ov-v2"));
    for port in [8080, 8081] {
        node.call_form(
            "POST",
            "/nacos/v1/ns/instance",
            &format!("serviceName={v1}&ip=127.0.0.1&port={port}"),
        )
        .expect(200);
    }
    node.call_form(
        "POST",
        "/nacos/v2/ns/instance",
        &format!("serviceName={v2}&ip=127.0.0.1&port=8082"),
    )
    .expect(200);
    node.call_form(
        "DELETE",
        "/nacos/v1/ns/instance",
        &format!("serviceName={v1}&ip=127.0.0.1&port=8081"),
    )
    .expect(200);
    node.call(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={v1}"),
    )
    .expect(200);
    node.call(
        "GET",
        &format!("/nacos/v2/ns/instance/list?serviceName={v2}"),
    )
    .expect(200);
    node.call("GET", "/api/v1/cluster").expect(200);

    // The requests may straddle two samples: each figure shows in one of the new ones.
    let new = eventually(Duration::from_secs(20), || {
        let new = samples_after(&node, t0);
        let any = |f: &dyn Fn(&Value) -> bool| new.iter().any(f);
        let counted = any(&|s| s["registrations"].as_f64() > Some(0.0))
            && any(&|s| s["deregistrations"].as_f64() > Some(0.0))
            && ["v1", "v2", "api"].iter().all(|face| {
                any(&|s| {
                    s["faces"][face]["rate"].as_f64() > Some(0.0)
                        && s["faces"][face]["p99Ms"].as_f64() > Some(0.0)
                })
            });
        if counted {
            Ok(new)
        } else {
            Err(format!("not every figure counted yet: {new:?}"))
        }
    });
    let last = new.last().unwrap();
    assert_eq!(last["instances"], 2, "{last}");
    // Healthy until they miss their beats (15 s; the first new sample is at most 5 s
    // after the registrations).
    assert_eq!(new[0]["healthy"], new[0]["instances"], "{:?}", new[0]);
    assert_eq!(last["raft"]["state"], "leader", "{last}");
    assert_eq!(last["raft"]["lag"], serde_json::json!({}), "{last}");
    // A face without a request in an interval has no percentile.
    assert!(new.iter().all(|s| s["faces"]["grpc"]["p99Ms"].is_null()));
    // The same counters on /metrics.
    assert!(node.metric("roster_registrations_total") >= Some(3.0));
    assert!(node.metric("roster_deregistrations_total") >= Some(1.0));

    // `since` gives only what is newer, oldest first.
    let all = overview(&node, None);
    let ts: Vec<u64> = samples(&all)
        .iter()
        .map(|s| s["t"].as_u64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    let newest = *ts.last().unwrap();
    let after_newest = overview(&node, Some(newest));
    let after_newest: Vec<u64> = samples(&after_newest)
        .iter()
        .map(|s| s["t"].as_u64().unwrap())
        .collect();
    assert!(after_newest.iter().all(|t| *t > newest), "{after_newest:?}");
    let before_newest = ts[ts.len() - 2];
    let tail = overview(&node, Some(before_newest));
    assert_eq!(samples(&tail)[0]["t"], newest);

    // A bad `since` is a 400 that names it; no token, no overview.
    for bad in ["abc", "-1", "1.5"] {
        let r = node.call("GET", &format!("/api/v1/overview?since={bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(r.body.contains("since"), "{bad}: {}", r.body);
    }
    node.raw("GET", "/api/v1/overview", &[], None).expect(401);
}

#[test]
fn the_leader_charts_each_followers_lag_and_a_follower_none() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.leader();
    let follower = cluster.follower();
    let leader_id = leader as u64 + 1;
    // The sample at start-up may predate the election: wait for one after it.
    eventually(Duration::from_secs(20), || {
        let s = latest(&cluster.nodes[leader]);
        let raft = &s["raft"];
        let lag = raft["lag"].as_object().cloned().unwrap_or_default();
        let mut ids: Vec<String> = lag.keys().cloned().collect();
        ids.sort();
        let others: Vec<String> = (1..=3u64)
            .filter(|id| *id != leader_id)
            .map(|id| id.to_string())
            .collect();
        if raft["state"] == "leader"
            && ids == others
            && lag.values().all(Value::is_u64)
            && raft["commit"].is_u64()
        {
            Ok(())
        } else {
            Err(format!("leader's sample: {s}"))
        }
    });
    eventually(Duration::from_secs(20), || {
        let s = latest(&cluster.nodes[follower]);
        let raft = &s["raft"];
        if raft["state"] == "follower"
            && raft["leader"] == leader_id
            && raft["lag"] == serde_json::json!({})
            && raft["commit"].is_null()
        {
            Ok(())
        } else {
            Err(format!("follower's sample: {s}"))
        }
    });
}

/// The CORS headers of an answer, lower-case names.
fn cors_headers(r: &Resp) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(k, _)| k.starts_with("access-control-"))
        .cloned()
        .collect()
}

/// The head of `GET /api/v1/events` opened from `origin`, lower-cased.
fn events_head(node: &Node, origin: &str) -> String {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /api/v1/events?accessToken={} HTTP/1.1\r\nhost: x\r\norigin: {origin}\r\naccept: text/event-stream\r\n\r\n",
        node.token()
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    for _ in 0..50 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line.to_lowercase());
    }
    head
}

#[test]
fn members_consoles_may_call_across_origins_and_no_one_else() {
    let cluster = Cluster::start(2, &[]);
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let member = format!("http://{}", b.addr());
    let own = format!("http://{}", a.addr());
    let preflight = |origin: &str| {
        a.raw(
            "OPTIONS",
            "/api/v1/overview",
            &[
                ("origin", origin),
                ("access-control-request-method", "GET"),
                ("access-control-request-headers", "authorization"),
            ],
            None,
        )
    };
    // A member's address is learned from its hellos (once a second).
    eventually(Duration::from_secs(10), || {
        let r = preflight(&member);
        match r.status {
            204 => Ok(r),
            other => Err(format!("preflight from {member}: {other} {:?}", r.headers)),
        }
    });
    // Answered without a token: before the guard, which refuses any tokenless request
    // on this path (as the foreign origins' preflights below show).
    for origin in [&member, &own] {
        let r = preflight(origin).expect(204);
        assert_eq!(
            r.header("access-control-allow-origin"),
            Some(origin.as_str())
        );
        let methods = r.header("access-control-allow-methods").unwrap();
        for m in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            assert!(methods.contains(m), "{methods}");
        }
        let headers = r.header("access-control-allow-headers").unwrap();
        for h in ["Authorization", "Content-Type", "accessToken"] {
            assert!(headers.contains(h), "{headers}");
        }
        assert_eq!(r.header("access-control-max-age"), Some("600"));
        assert_eq!(r.header("access-control-allow-credentials"), None);
    }
    // The answer itself, with the token, is readable by the member's console.
    let token = format!("Bearer {}", a.token());
    let r = a
        .raw(
            "GET",
            "/api/v1/overview",
            &[("authorization", &token), ("origin", &member)],
            None,
        )
        .expect(200);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some(member.as_str())
    );
    assert!(
        r.header("vary").is_some_and(|v| v.contains("Origin")),
        "{:?}",
        r.headers
    );
    assert_eq!(r.header("access-control-allow-credentials"), None);
    // Without a token it is still refused.
    a.raw("GET", "/api/v1/overview", &[("origin", &member)], None)
        .expect(401);
    // The event stream (EventSource: a token in the query) too.
    let head = events_head(a, &member);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("access-control-allow-origin: {member}")),
        "{head}"
    );

    // The console's page may connect to the other member (and to nothing else
    // beyond its own server): its policy's connect-src names it.
    let page = a.raw("GET", "/", &[], None).expect(200);
    let csp = page.header("content-security-policy").expect("a policy");
    assert!(
        csp.ends_with(&format!("connect-src 'self' {member}")),
        "{csp}"
    );

    // Any other origin gets no CORS header: its preflight meets the guard, and its
    // requests need a token as always.
    for foreign in ["http://127.0.0.1:1", "https://evil.example", "null"] {
        let r = preflight(foreign);
        assert_eq!(r.status, 401, "{foreign}: {}", r.body);
        assert!(cors_headers(&r).is_empty(), "{foreign}: {:?}", r.headers);
        let r = a
            .raw(
                "GET",
                "/api/v1/overview",
                &[("authorization", &token), ("origin", foreign)],
                None,
            )
            .expect(200);
        assert!(cors_headers(&r).is_empty(), "{foreign}: {:?}", r.headers);
        a.raw("GET", "/api/v1/overview", &[("origin", foreign)], None)
            .expect(401);
        assert!(!events_head(a, foreign).contains("access-control-"));
    }
    // The scheme is part of the origin: the member over HTTPS is not this cluster's.
    let r = preflight(&format!("https://{}", b.addr()));
    assert_eq!(r.status, 401);
}

/// Takes naming events and does nothing with them.
struct Ignore;

impl nacos_sdk::api::naming::NamingEventListener for Ignore {
    fn event(&self, _: std::sync::Arc<nacos_sdk::api::naming::NamingChangeEvent>) {}
}

#[test]
fn grpc_requests_registrations_and_pushes_are_charted() {
    use nacos_sdk::api::naming::{NamingServiceBuilder, ServiceInstance};
    use nacos_sdk::api::props::ClientProps;

    let node = Node::start();
    let t0 = latest(&node)["t"].as_u64().unwrap();
    let (single, batch) = (unique("ov-grpc"), unique("ov-batch"));
    let instance = |port| ServiceInstance {
        ip: "127.0.0.1".into(),
        port,
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let naming = rt.block_on(async {
        let props = ClientProps::new()
            .server_addr(node.addr())
            .namespace("public")
            .app_name("roster-overview-test")
            .auth_username("nacos")
            .auth_password(roster_tests::ADMIN_PASSWORD)
            .load_cache_at_start(false)
            .cache_dir(tempfile::tempdir().unwrap().keep());
        let naming = NamingServiceBuilder::new(props)
            .enable_auth_plugin_http()
            .build()
            .await
            .expect("nacos-sdk client");
        naming
            .register_instance(single.clone(), None, instance(9001))
            .await
            .expect("register");
        naming
            .batch_register_instance(batch.clone(), None, vec![instance(9002), instance(9003)])
            .await
            .expect("batch register");
        naming
            .subscribe(single.clone(), None, vec![], std::sync::Arc::new(Ignore))
            .await
            .expect("subscribe");
        naming
    });
    // A change the subscriber is pushed.
    node.call_form(
        "POST",
        "/nacos/v1/ns/instance",
        &format!("serviceName={single}&ip=127.0.0.1&port=9004"),
    )
    .expect(200);
    eventually(Duration::from_secs(20), || {
        let new = samples_after(&node, t0);
        let grpc = new.iter().any(|s| {
            s["faces"]["grpc"]["rate"].as_f64() > Some(0.0)
                && s["faces"]["grpc"]["p99Ms"].as_f64() > Some(0.0)
        });
        let registered = new.iter().any(|s| s["registrations"].as_f64() > Some(0.0));
        let pushed = new.iter().any(|s| s["pushes"].as_f64() > Some(0.0));
        let last = new.last().unwrap();
        if grpc && registered && pushed && last["instances"] == 4 {
            Ok(())
        } else {
            Err(format!("not charted yet: {new:?}"))
        }
    });
    // One gRPC registration, a batch of two, one over HTTP.
    assert_eq!(node.metric("roster_registrations_total"), Some(4.0));
    rt.block_on(async move { drop(naming) });
}

#[test]
fn a_node_serving_https_allows_its_members_https_origins_only() {
    let dir = tempfile::tempdir().unwrap();
    // A CA and a certificate for 127.0.0.1 it signed.
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (ca_pem, cert_pem, key_pem) = (
        dir.path().join("ca.pem"),
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
    );
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    std::fs::write(&cert_pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--http-tls-cert".into(),
            cert_pem.display().to_string(),
            "--http-tls-key".into(),
            key_pem.display().to_string(),
        ],
        wait_ready: false,
        ..Default::default()
    });
    let https = Https::new(&node.addr(), &ca_pem);
    https.wait_ready();
    let preflight = |origin: &str| {
        https
            .try_request(
                "OPTIONS",
                "/api/v1/overview",
                &[("origin", origin), ("access-control-request-method", "GET")],
                None,
            )
            .unwrap()
    };
    let own = format!("https://{}", node.addr());
    let r = preflight(&own);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(r.header("access-control-allow-origin"), Some(own.as_str()));
    let plain = format!("http://{}", node.addr());
    let r = preflight(&plain);
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(cors_headers(&r).is_empty(), "{:?}", r.headers);
}
