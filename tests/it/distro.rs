//! Ephemeral instances across a three-node cluster (Distro): replication, owners dying
//! while clients keep beating, restarts that load from peers, pauses that heal, and the
//! eviction guard.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, Cluster, Node, NodeOptions, Value};

fn hosts(node: &Node, query: &str) -> Vec<Value> {
    let v = node
        .call("GET", &format!("/nacos/v1/ns/instance/list?{query}"))
        .expect(200)
        .json();
    v["hosts"].as_array().cloned().unwrap_or_default()
}

fn addrs(node: &Node, query: &str) -> BTreeSet<String> {
    hosts(node, query)
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect()
}

/// The index of the node that owns `client`, as node `asker` sees it.
fn owner(c: &Cluster, asker: usize, client: &str) -> usize {
    let v = c.nodes[asker]
        .call("GET", &format!("/api/v1/cluster/owner?client={client}"))
        .expect(200)
        .json();
    (v["owner"].as_u64().unwrap() - 1) as usize
}

#[test]
fn registrations_reach_every_node_within_two_seconds() {
    let c = Cluster::start(3, &[]);
    let started = Instant::now();
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=spread&ip=127.30.0.1&port=80",
        )
        .expect(200);
    c.nodes[2]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=spread&ip=127.30.0.2&port=80",
        )
        .expect(200);
    for node in &c.nodes {
        eventually(Duration::from_secs(2), || {
            let a = addrs(node, "serviceName=spread");
            if a.len() == 2 {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        });
    }
    eprintln!("replicated to all three in {:?}", started.elapsed());
    // Deregistration through yet another node replicates too.
    c.nodes[1]
        .call(
            "DELETE",
            "/nacos/v1/ns/instance?serviceName=spread&ip=127.30.0.1&port=80",
        )
        .expect(200);
    for node in &c.nodes {
        eventually(Duration::from_secs(2), || {
            let a = addrs(node, "serviceName=spread");
            if a.len() == 1 {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        });
    }
    let view = c.view(0);
    let owned: u64 = view["distroOwned"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(owned, 1, "one client, one owner: {view}");
    // A refusal made by the owner reaches the client whole through a node that forwarded
    // to it (the error travels with its kind, `distro::forward`): an ephemeral
    // registration into a service of persistent instances, for an address node 0 does
    // not own, through node 0.
    c.nodes[0]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=mixed&ip=127.30.1.1&port=80&ephemeral=false",
        )
        .expect(200);
    // Every node, the owner included, has applied the persistent instance (Raft) before
    // the ephemeral registration arrives there.
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || {
            let a = addrs(node, "serviceName=mixed");
            if a.contains("127.30.1.1:80") {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        });
    }
    let elsewhere = (2..40)
        .map(|i| format!("127.30.1.{i}"))
        .find(|ip| owner(&c, 0, &format!("{ip}:80")) != 0)
        .expect("an address another node owns");
    let v1 = c.nodes[0].call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName=mixed&ip={elsewhere}&port=80"),
    );
    assert_eq!(v1.status, 400, "{}", v1.body);
    assert!(
        v1.body.contains("holds persistent instances"),
        "{}",
        v1.body
    );
    let v2 = c.nodes[0].call(
        "POST",
        &format!("/nacos/v2/ns/instance?serviceName=mixed&ip={elsewhere}&port=80"),
    );
    assert_eq!(v2.status, 400, "{}", v2.body);
    assert_eq!(v2.json()["code"], 20002, "{}", v2.body);
    // Bad owner queries name the field.
    let r = c.nodes[0].call("GET", "/api/v1/cluster/owner?client=nonsense");
    assert!(r.status == 400 && r.body.contains("'client'"), "{}", r.body);
}

/// Beats `client` of `service` through `via` every 500 ms until `stop`; counts failures.
fn beat_forever(
    node_addr: String,
    token: String,
    service: &'static str,
    client: (&'static str, u16),
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    roster_tests::addresses::check_ip(client.0);
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        let beat = enc(&format!(
            r#"{{"ip":"{}","port":{},"serviceName":"DEFAULT_GROUP@@{service}"}}"#,
            client.0, client.1
        ));
        let mut failures = 0;
        while !stop.load(Ordering::Relaxed) {
            let url = format!("http://{node_addr}/nacos/v1/ns/instance/beat?serviceName={service}&beat={beat}&accessToken={token}");
            match agent.put(&url).send_empty() {
                Ok(r) if r.status().as_u16() == 200 => {}
                _ => failures += 1,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        failures
    })
}

#[test]
fn an_owner_dies_and_beating_clients_stay_healthy() {
    let mut c = Cluster::start(3, &[]);
    let client = ("127.31.0.1", 8080u16);
    let id = format!("{}:{}", client.0, client.1);
    let owner_idx = owner(&c, 0, &id);
    let via = (owner_idx + 1) % 3;
    let watcher = (owner_idx + 2) % 3;
    c.nodes[via]
        .call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=survive&ip={}&port={}",
                client.0, client.1
            ),
        )
        .expect(200);
    let stop = Arc::new(AtomicBool::new(false));
    let beater = beat_forever(
        c.nodes[via].addr(),
        c.nodes[via].token(),
        "survive",
        client,
        stop.clone(),
    );
    // Let a verification round carry the owner's last beat to the others.
    std::thread::sleep(Duration::from_secs(6));
    c.nodes[owner_idx].kill();
    // For longer than the 15 s beat timeout, the instance stays healthy on both survivors.
    let until = Instant::now() + Duration::from_secs(18);
    while Instant::now() < until {
        for idx in [via, watcher] {
            let h = hosts(&c.nodes[idx], "serviceName=survive");
            assert_eq!(h.len(), 1, "node {} lost the instance", idx + 1);
            assert_eq!(h[0]["healthy"], true, "node {} sees it unhealthy", idx + 1);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let new_owner = owner(&c, via, &id);
    assert_ne!(new_owner, owner_idx, "a survivor took the client");
    stop.store(true, Ordering::Relaxed);
    let failures = beater.join().unwrap();
    assert_eq!(failures, 0, "every beat was answered");
}

#[test]
fn killing_a_non_owner_changes_nothing() {
    let mut c = Cluster::start(3, &[]);
    let client = ("127.32.0.1", 8080u16);
    let owner_idx = owner(&c, 0, &format!("{}:{}", client.0, client.1));
    let other = (owner_idx + 1) % 3;
    c.nodes[owner_idx]
        .call(
            "POST",
            &format!(
                "/nacos/v1/ns/instance?serviceName=calm&ip={}&port={}",
                client.0, client.1
            ),
        )
        .expect(200);
    let stop = Arc::new(AtomicBool::new(false));
    let beater = beat_forever(
        c.nodes[owner_idx].addr(),
        c.nodes[owner_idx].token(),
        "calm",
        client,
        stop.clone(),
    );
    eventually(Duration::from_secs(2), || {
        if hosts(&c.nodes[other], "serviceName=calm").len() == 1 {
            Ok(())
        } else {
            Err("not replicated".into())
        }
    });
    c.nodes[other].kill();
    std::thread::sleep(Duration::from_secs(4));
    let survivor = (owner_idx + 2) % 3;
    for idx in [owner_idx, survivor] {
        let h = hosts(&c.nodes[idx], "serviceName=calm");
        assert_eq!(h.len(), 1);
        assert_eq!(h[0]["healthy"], true);
    }
    assert_eq!(
        owner(&c, owner_idx, &format!("{}:{}", client.0, client.1)),
        owner_idx,
        "ownership stayed"
    );
    stop.store(true, Ordering::Relaxed);
    assert_eq!(beater.join().unwrap(), 0);
}

#[test]
fn a_restarted_node_loads_ephemeral_instances_before_it_is_ready() {
    let mut c = Cluster::start(3, &[]);
    for i in 0..8 {
        c.nodes[i % 3]
            .call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName=reload&ip=127.33.0.{i}&port=80"),
            )
            .expect(200);
    }
    // Every node holds all eight before node 3 goes: it loads from one peer, and a copy
    // still on its way to that peer (a write node 3 owned and had not pushed yet, on a
    // loaded machine) would be missing there, which is replication lag, not what this
    // test is about.
    eventually(Duration::from_secs(10), || {
        let held: Vec<usize> = c
            .nodes
            .iter()
            .map(|n| addrs(n, "serviceName=reload").len())
            .collect();
        if held.iter().all(|&n| n == 8) {
            Ok(())
        } else {
            Err(format!("held {held:?}"))
        }
    });
    c.nodes[2].restart();
    // Ready means loaded: no waiting here.
    assert_eq!(addrs(&c.nodes[2], "serviceName=reload").len(), 8);
    assert!(c.nodes[2]
        .log()
        .contains("loaded ephemeral instances from a peer"));
}

#[test]
fn a_paused_node_converges_after_it_resumes() {
    let c = Cluster::start(3, &["--distro-verify-secs", "2"]);
    for i in 0..4 {
        c.nodes[0]
            .call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName=heal&ip=127.34.0.{i}&port=80"),
            )
            .expect(200);
    }
    eventually(Duration::from_secs(3), || {
        if addrs(&c.nodes[2], "serviceName=heal").len() == 4 {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    c.nodes[2].pause();
    // While node 3 is frozen, the others change things.
    for i in 4..8 {
        c.nodes[1]
            .call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName=heal&ip=127.34.0.{i}&port=80"),
            )
            .expect(200);
    }
    c.nodes[0]
        .call(
            "DELETE",
            "/nacos/v1/ns/instance?serviceName=heal&ip=127.34.0.0&port=80",
        )
        .expect(200);
    std::thread::sleep(Duration::from_secs(5));
    c.nodes[2].resume();
    // Every node, node 3 included, converges on the seven. (Not read off node 1: a
    // write another node took while node 3 owned the client reaches node 1 by
    // propagation or verification, a moment later under load.)
    let expected: BTreeSet<String> = (1..8).map(|i| format!("127.34.0.{i}:80")).collect();
    for node in &c.nodes {
        eventually(Duration::from_secs(15), || {
            let a = addrs(node, "serviceName=heal");
            if a == expected {
                Ok(())
            } else {
                Err(format!("{a:?}"))
            }
        });
    }
}

#[test]
fn the_eviction_guard_keeps_mass_silence_listed() {
    let node = Node::start_with(NodeOptions::default());
    let meta = enc(
        r#"{"preserved.heart.beat.interval":"500","preserved.heart.beat.timeout":"1000","preserved.ip.delete.timeout":"2000"}"#,
    );
    let token = node.token();
    let auth = format!("Bearer {token}");
    let beat_all = |count: usize| {
        for i in 0..count {
            node.raw("PUT", &format!("/nacos/v1/ns/instance/beat?serviceName=herd&namespaceId=herd&ip=127.35.0.{i}&port=80"), &[("authorization", &auth)], None)
                .expect(200);
        }
    };
    for i in 0..20 {
        node.raw("POST", &format!("/nacos/v1/ns/instance?serviceName=herd&namespaceId=herd&ip=127.35.0.{i}&port=80&metadata={meta}"), &[("authorization", &auth)], None)
            .expect(200);
    }
    // A lone instance elsewhere, silent too.
    node.call("POST", &format!("/nacos/v1/ns/instance?serviceName=loner&namespaceId=quiet&ip=127.35.1.1&port=80&metadata={meta}")).expect(200);
    // All twenty fall silent at once: unhealthy, then kept well past the delete timeout.
    let catalog = |ns: &str, svc: &str| {
        let r = node.call("GET", &format!("/nacos/v1/ns/catalog/instances?serviceName={svc}&namespaceId={ns}&clusterName=DEFAULT"));
        if r.status == 404 {
            return Vec::new(); // no instance left in the cluster
        }
        r.json()["list"].as_array().cloned().unwrap_or_default()
    };
    eventually(Duration::from_secs(5), || {
        let l = catalog("herd", "herd");
        if l.len() == 20 && l.iter().all(|h| h["healthy"] == false) {
            Ok(())
        } else {
            Err(format!("{} listed", l.len()))
        }
    });
    // The lone one is removed on time meanwhile.
    eventually(Duration::from_secs(5), || {
        if catalog("quiet", "loner").is_empty() {
            Ok(())
        } else {
            Err("loner still listed".into())
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(catalog("herd", "herd").len(), 20, "the guard kept them");
    assert_eq!(node.metric("roster_eviction_guard_engaged"), Some(1.0));
    assert!(node.metric("roster_eviction_held_total").unwrap() >= 20.0);
    assert!(node.log().contains("eviction guard engaged"));
    let view = node.call("GET", "/api/v1/cluster").expect(200).json();
    assert_eq!(view["evictionGuardEngaged"], serde_json::json!(["herd"]));
    // Beats return: all healthy again, and the guard lets go.
    beat_all(20);
    let l = catalog("herd", "herd");
    assert!(l.iter().all(|h| h["healthy"] == true), "{l:?}");
    let deadline = Instant::now() + Duration::from_secs(8);
    while node.metric("roster_eviction_guard_engaged") != Some(0.0) {
        assert!(Instant::now() < deadline, "the guard never released");
        beat_all(20);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(node.log().contains("eviction guard released"));
}
