//! Selection over HTTP and DNS: metadata selectors, priority lanes, server-side picks,
//! and DNS answers read with `dig` and with a Rust resolver.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use roster_tests::{enc, eventually, free_port, Node, NodeOptions, Value};

fn list(node: &Node, query: &str) -> Value {
    node.call("GET", &format!("/nacos/v1/ns/instance/list?{query}"))
        .expect(200)
        .json()
}

fn ports(v: &Value) -> Vec<u64> {
    let mut p: Vec<u64> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["port"].as_u64().unwrap())
        .collect();
    p.sort();
    p
}

fn register(node: &Node, service: &str, port: u16, metadata: &str, weight: f64) {
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.50.0.1&port={port}&weight={weight}&metadata={}", enc(metadata)),
    )
    .expect(200);
}

#[test]
fn selectors_filter_by_metadata_and_services_store_a_default() {
    let node = Node::start();
    register(&node, "sel", 1, r#"{"env":"prod","zone":"a"}"#, 1.0);
    register(
        &node,
        "sel",
        2,
        r#"{"env":"prod","zone":"b","canary":"true"}"#,
        1.0,
    );
    register(&node, "sel", 3, r#"{"env":"dev","zone":"a"}"#, 1.0);
    let table = [
        ("env=prod", vec![1, 2]),
        ("env=prod,zone in (a,b),!canary", vec![1]),
        ("zone notin (b)", vec![1, 3]),
        ("canary", vec![2]),
        ("env!=prod", vec![3]),
        ("", vec![1, 2, 3]),
    ];
    for (selector, want) in table {
        let v = list(
            &node,
            &format!("serviceName=sel&selector={}", enc(selector)),
        );
        assert_eq!(ports(&v), want, "{selector}");
    }
    // roster's own list takes the same selectors.
    let v = node
        .call(
            "GET",
            &format!(
                "/api/v1/instances?serviceName=sel&selector={}",
                enc("zone=a")
            ),
        )
        .expect(200)
        .json();
    assert_eq!(ports(&v), [1, 3]);
    // A parse error names the position.
    let r = node.call(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName=sel&selector={}",
            enc("env in (a,b")
        ),
    );
    assert_eq!(r.status, 400);
    assert!(
        r.body.contains("'selector'") && r.body.contains("position 11"),
        "{}",
        r.body
    );
    // A stored default applies when a query gives none.
    let stored = enc(r#"{"type":"metadata","expression":"env=dev"}"#);
    node.call(
        "PUT",
        &format!("/nacos/v1/ns/service?serviceName=sel&protectThreshold=0&selector={stored}"),
    )
    .expect(200);
    assert_eq!(ports(&list(&node, "serviceName=sel")), [3]);
    assert_eq!(
        ports(&list(
            &node,
            &format!("serviceName=sel&selector={}", enc("env=prod"))
        )),
        [1, 2]
    );
    let bad = enc(r#"{"type":"metadata","expression":"env="}"#);
    let r = node.call(
        "PUT",
        &format!("/nacos/v1/ns/service?serviceName=sel&protectThreshold=0&selector={bad}"),
    );
    assert!(
        r.status == 400 && r.body.contains("position 4"),
        "{}",
        r.body
    );
}

#[test]
fn lanes_route_coloured_traffic_to_its_branch() {
    let node = Node::start();
    register(&node, "checkout", 1, r#"{"version":"base"}"#, 1.0);
    register(&node, "checkout", 2, r#"{"lane":"feature-x"}"#, 1.0);
    register(&node, "checkout", 3, r#"{"lane":"v2.0"}"#, 1.0);
    let lanes = |l: &str| list(&node, &format!("serviceName=checkout&lanes={}", enc(l)));
    let v = lanes("feature-x,v2.0");
    assert_eq!(ports(&v), [2]);
    assert_eq!(v["lane"], "feature-x");
    assert_eq!(
        ports(&lanes("hotfix,v2.0")),
        [3],
        "the first listed lane that exists"
    );
    let v = lanes("hotfix");
    assert_eq!(ports(&v), [1], "no listed lane: the base lane");
    assert!(v.get("lane").is_none());
    assert_eq!(
        ports(&lanes("")),
        [1],
        "uncoloured traffic stays on the base lane"
    );
    assert_eq!(
        ports(&list(&node, "serviceName=checkout")).len(),
        3,
        "without lanes, every instance"
    );
    // A lane whose instances are all unhealthy is skipped.
    node.call(
        "POST",
        "/nacos/v1/ns/service?serviceName=pay&laneKey=branch",
    )
    .expect(200);
    // Silent after 3 s: long enough that the first read below sees it healthy on a
    // loaded machine (1 s left little room; the DNS test below failed that way).
    let meta = enc(
        r#"{"branch":"b1","preserved.heart.beat.interval":"1000","preserved.heart.beat.timeout":"3000"}"#,
    );
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName=pay&ip=127.50.1.1&port=1&metadata={meta}"),
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=pay&ip=127.50.1.2&port=2",
    )
    .expect(200);
    assert_eq!(
        ports(&list(&node, "serviceName=pay&lanes=b1")),
        [1],
        "the service's lane key"
    );
    eventually(Duration::from_secs(10), || {
        let v = list(&node, "serviceName=pay&lanes=b1");
        if ports(&v) == [2] {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    let detail = node
        .call("GET", "/nacos/v1/ns/service?serviceName=pay")
        .expect(200)
        .json();
    assert_eq!(detail["laneKey"], "branch");
}

fn pick(node: &Node, query: &str) -> Value {
    node.call("GET", &format!("/api/v1/pick?{query}"))
        .expect(200)
        .json()
}

/// Metadata that keeps an ephemeral instance healthy without beats for ten minutes:
/// the picks below take longer than the default 15 s on a loaded machine, and an
/// instance gone unhealthy meanwhile would fail them (it did once in CI).
const NO_BEATS_NEEDED: &str =
    r#"{"preserved.heart.beat.timeout":"600000","preserved.ip.delete.timeout":"600000"}"#;

#[test]
fn picks_follow_weights_round_robin_and_keys() {
    let node = Node::start();
    register(&node, "pick", 1, NO_BEATS_NEEDED, 1.0);
    register(&node, "pick", 2, NO_BEATS_NEEDED, 3.0);
    register(&node, "pick", 3, NO_BEATS_NEEDED, 6.0);
    register(&node, "pick", 4, NO_BEATS_NEEDED, 0.0);
    // Weighted random: over 10,000 picks each share is within 2 points of its weight.
    let token = node.token();
    let auth = format!("Bearer {token}");
    let mut counts: BTreeMap<u64, f64> = BTreeMap::new();
    for _ in 0..10_000 {
        let v = node
            .raw(
                "GET",
                "/api/v1/pick?serviceName=pick",
                &[("authorization", &auth)],
                None,
            )
            .expect(200)
            .json();
        *counts.entry(v["port"].as_u64().unwrap()).or_default() += 1.0;
    }
    for (port, weight) in [(1u64, 0.1), (2, 0.3), (3, 0.6)] {
        let share = counts.get(&port).copied().unwrap_or(0.0) / 10_000.0;
        assert!(
            (share - weight).abs() < 0.02,
            "port {port}: {share} vs {weight}"
        );
    }
    assert!(!counts.contains_key(&4), "weight 0 is never picked");
    // Smooth round-robin: exact proportions over a cycle of 10.
    let mut rr: BTreeMap<u64, usize> = BTreeMap::new();
    for _ in 0..10 {
        *rr.entry(
            pick(&node, "serviceName=pick&strategy=round-robin")["port"]
                .as_u64()
                .unwrap(),
        )
        .or_default() += 1;
    }
    assert_eq!(rr, BTreeMap::from([(1, 1), (2, 3), (3, 6)]));
    // Consistent hash: stable per key; removing an instance moves only its keys.
    let keys: Vec<String> = (0..200).map(|i| format!("user{i}")).collect();
    let owner = |k: &str| {
        pick(&node, &format!("serviceName=pick&strategy=hash&key={k}"))["port"]
            .as_u64()
            .unwrap()
    };
    let before: Vec<u64> = keys.iter().map(|k| owner(k)).collect();
    assert_eq!(before, keys.iter().map(|k| owner(k)).collect::<Vec<_>>());
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=pick&ip=127.50.0.1&port=2",
    )
    .expect(200);
    for (k, b) in keys.iter().zip(&before) {
        let after = owner(k);
        if *b != 2 {
            assert_eq!(after, *b, "{k} moved");
        } else {
            assert_ne!(after, 2);
        }
    }
    // Bad requests, and nothing to pick.
    let r = node.call("GET", "/api/v1/pick?serviceName=pick&strategy=fastest");
    assert!(
        r.status == 400 && r.body.contains("'strategy'"),
        "{}",
        r.body
    );
    let r = node.call("GET", "/api/v1/pick?serviceName=pick&strategy=hash");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'key' is required.")
    );
    assert_eq!(
        node.call("GET", "/api/v1/pick?serviceName=nothing-here")
            .status,
        404
    );
    // Lanes and selectors apply to picks too.
    register(&node, "pick", 5, r#"{"lane":"blue"}"#, 1.0);
    assert_eq!(pick(&node, "serviceName=pick&lanes=blue")["port"], 5);
    assert_eq!(pick(&node, "serviceName=pick&lanes=blue")["lane"], "blue");
    assert_eq!(
        pick(
            &node,
            &format!("serviceName=pick&selector={}", enc("lane=blue"))
        )["port"],
        5
    );
}

fn dig(port: u16, name: &str, rtype: &str) -> Vec<String> {
    let out = Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            name,
            rtype,
            "+short",
            "+tries=1",
            "+time=2",
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!("dig is needed (Debian's dnsutils; scripts/test installs it): {e}")
        });
    assert!(
        out.status.success(),
        "dig failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

fn dig_status(port: u16, name: &str) -> String {
    let out = Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            name,
            "A",
            "+tries=1",
            "+time=2",
        ])
        .output()
        .expect("dig");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find_map(|l| {
            l.split("status: ")
                .nth(1)
                .map(|s| s.split(',').next().unwrap_or("").to_string())
        })
        .unwrap_or(text)
}

/// A Rust resolver (hickory) pointed at the node's DNS port, without a cache.
fn resolve_rust(port: u16, name: &str) -> (BTreeSet<IpAddr>, BTreeSet<(u16, u16, String)>) {
    use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::proto::rr::{RData, RecordType};
    use hickory_resolver::TokioResolver;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut udp = ConnectionConfig::udp();
        udp.port = port;
        let config = ResolverConfig::from_parts(
            None,
            vec![],
            vec![NameServerConfig::new(
                "127.0.0.1".parse().unwrap(),
                true,
                vec![udp],
            )],
        );
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        builder.options_mut().cache_size = 0;
        let resolver = builder.build().expect("resolver");
        let ips: BTreeSet<IpAddr> = match resolver.lookup_ip(name).await {
            Ok(l) => l.iter().collect(),
            Err(_) => BTreeSet::new(),
        };
        let srv = match resolver.lookup(name, RecordType::SRV).await {
            Ok(l) => l
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(s) => Some((s.port, s.weight, s.target.to_string())),
                    _ => None,
                })
                .collect(),
            Err(_) => BTreeSet::new(),
        };
        (ips, srv)
    })
}

#[test]
fn dns_answers_match_the_registry_and_follow_health() {
    let dns_port = free_port();
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--dns".into(),
            format!("127.0.0.1:{dns_port}"),
            "--dns-ttl".into(),
            "1".into(),
            "--dns-namespaces".into(),
            "public,dev".into(),
        ],
        ..Default::default()
    });
    let meta =
        enc(r#"{"preserved.heart.beat.interval":"500","preserved.heart.beat.timeout":"1000"}"#);
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=web&ip=127.60.0.1&port=8080&weight=2&metadata={meta}"
        ),
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=web&ip=127.60.0.2&port=8081",
    )
    .expect(200);
    node.call("POST", "/nacos/v1/ns/instance?serviceName=api&groupName=shop&namespaceId=dev&ip=127.60.1.1&port=9000").expect(200);
    let grpc_config = r#"[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]"#;
    let metadata = serde_json::json!({ "grpc_config": grpc_config }).to_string();
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/service?serviceName=web&metadata={}",
            enc(&metadata)
        ),
    )
    .expect(200);

    // 127.60.0.1 beats (its timeout is 1 s) while the answers are read: on a loaded
    // machine the reads below take longer than its timeout.
    let beating = AtomicBool::new(true);
    std::thread::scope(|s| {
        s.spawn(|| {
            while beating.load(Ordering::Relaxed) {
                node.call(
                    "PUT",
                    "/nacos/v1/ns/instance/beat?serviceName=web&ip=127.60.0.1&port=8080",
                )
                .expect(200);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        // The beats stop when the reads are done, or when one fails (the scope waits
        // for the beating thread).
        struct StopBeating<'a>(&'a AtomicBool);
        impl Drop for StopBeating<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _stop = StopBeating(&beating);
        {
            assert_eq!(
                dig(dns_port, "web.roster", "A"),
                ["127.60.0.1", "127.60.0.2"]
            );
            assert_eq!(
                dig(dns_port, "web.default_group.public.roster", "A"),
                ["127.60.0.1", "127.60.0.2"]
            );
            assert_eq!(dig(dns_port, "api.shop.dev.roster", "A"), ["127.60.1.1"]);
            let srv = dig(dns_port, "web.roster", "SRV");
            assert_eq!(
                srv,
                [
                    "10 100 8081 127-60-0-2.ip.roster.",
                    "10 200 8080 127-60-0-1.ip.roster."
                ]
            );
            assert_eq!(dig(dns_port, "127-60-0-1.ip.roster", "A"), ["127.60.0.1"]);
            let txt = dig(dns_port, "_grpc_config.web.roster", "TXT").join("");
            assert!(
                txt.contains("grpc_config=[{") && txt.contains("round_robin"),
                "{txt}"
            );
            assert_eq!(dig_status(dns_port, "missing.roster"), "NXDOMAIN");
            assert_eq!(dig_status(dns_port, "example.com"), "REFUSED");

            let (ips, srv) = resolve_rust(dns_port, "web.roster.");
            assert_eq!(
                ips,
                BTreeSet::from(["127.60.0.1".parse().unwrap(), "127.60.0.2".parse().unwrap()])
            );
            assert_eq!(srv.len(), 2);
            assert!(
                srv.contains(&(8080, 200, "127-60-0-1.ip.roster.".into())),
                "{srv:?}"
            );
        }
    });
    // 127.60.0.1 stops beating: it leaves the answers.
    eventually(Duration::from_secs(5), || {
        let a = dig(dns_port, "web.roster", "A");
        if a == ["127.60.0.2"] {
            Ok(())
        } else {
            Err(format!("{a:?}"))
        }
    });
    let (ips, srv) = resolve_rust(dns_port, "web.roster.");
    assert_eq!(ips, BTreeSet::from(["127.60.0.2".parse().unwrap()]));
    assert_eq!(srv.len(), 1);
}
