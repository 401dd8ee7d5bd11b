//! What a real Nacos SDK does when the node it is connected to dies, checked the same way
//! for every client that has a `stay` program (nacos-sdk-go v2, the Java nacos-client 2.x
//! and 3.x): the program registers its instances, subscribes and listens, prints a
//! `pushed` line per list it is handed and a `config` line per change it hears, and
//! answers `check N` on stdin with a `healthy` line (`n`, `server_healthy`, `hosts`).
//!
//! [`follow_the_client`] kills the node holding the client's naming connection (`kill -9`)
//! and, when its config connection is elsewhere, that node too (the first started again in
//! between): every survivor must list the client's instances in every sample, every
//! 100 ms; the client must reconnect and redo its registration (on the node it moved to),
//! its subscription and its listener (a registration and a config change made through a
//! survivor reach it); no list it was handed may lack its own instances.

use std::time::{Duration, Instant};

use roster_tests::scenario::Running;
use roster_tests::{eventually, json, Cluster, Node, Value};

/// The client under test: its service, config item, the instances it registers
/// ("ip:port", sorted), the request kind of its registration, and the address prefix of
/// the instances the test registers through survivors (`<prefix>.<round>`).
pub struct Stay<'a> {
    pub service: &'a str,
    pub data_id: &'a str,
    pub mine: &'a [String],
    pub registration: &'a str,
    pub probe_prefix: &'a str,
}

/// The service's instances a node lists (public namespace), as sorted "ip:port".
pub fn listed(node: &Node, service: &str) -> Vec<String> {
    let mut ips = crate::sync::addrs(&crate::sync::hosts(
        node,
        "public",
        "DEFAULT_GROUP",
        service,
    ));
    ips.sort();
    ips
}

/// The hosts of a `pushed` or `healthy` line.
pub fn hosts(line: &Value) -> Vec<String> {
    line["hosts"]
        .as_array()
        .map(|a| a.iter().map(|h| h.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The running node (index) that counted the client's gRPC requests of `kind`: where its
/// naming (`SubscribeServiceRequest`) or config (`ConfigBatchListenRequest`) connection is.
pub fn node_of(c: &Cluster, kind: &str) -> usize {
    eventually(Duration::from_secs(5), || {
        let on: Vec<usize> = (0..c.nodes.len())
            .filter(|i| c.nodes[*i].is_running())
            .filter(|i| {
                c.nodes[*i]
                    .metric(&format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"))
                    .unwrap_or(0.0)
                    >= 1.0
            })
            .collect();
        match on[..] {
            [one] => Ok(one),
            _ => Err(format!("{kind} seen on nodes {on:?}")),
        }
    })
}

/// Waits until every node lists the client's instances and the client was handed them,
/// kills its nodes in turn, and checks what it went through (see the module's text). The
/// client's stdin is closed at the end and it must exit 0.
pub fn follow_the_client(c: &mut Cluster, client: &mut Running, stay: &Stay) {
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || {
            let list = listed(node, stay.service);
            if list == stay.mine {
                Ok(())
            } else {
                Err(format!("{list:?}"))
            }
        });
    }
    client.wait_for("its own instances pushed", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v) == stay.mine
    });
    let naming = node_of(c, "SubscribeServiceRequest");
    let config = node_of(c, "ConfigBatchListenRequest");
    eprintln!(
        "naming on node {}, config on node {}",
        naming + 1,
        config + 1
    );
    kill_and_follow(c, client, stay, naming, 1);
    // The client registered again, and subscribed, on the node it moved to.
    let moved = node_of(c, "SubscribeServiceRequest");
    let redone = c.nodes[moved]
        .metric(&format!(
            "roster_grpc_requests_total{{kind=\"{}\"}}",
            stay.registration
        ))
        .unwrap_or(0.0);
    assert!(
        redone >= 1.0,
        "node {} holds the subscription but saw no {}",
        moved + 1,
        stay.registration
    );
    if config != naming {
        // The listener's node still stood: bring the first back, then kill that one.
        c.nodes[naming].start_again();
        c.nodes[naming].wait_ready();
        kill_and_follow(c, client, stay, config, 2);
    }
    // No list the client handed its listener lacked its own instances.
    let pushed: Vec<Vec<String>> = client
        .drain()
        .iter()
        .filter(|v| v["step"] == "pushed")
        .map(hosts)
        .collect();
    for list in &pushed {
        assert!(
            stay.mine.iter().all(|m| list.contains(m)),
            "the subscriber was handed a list without the live instances: {list:?} (all: {pushed:?})"
        );
    }
    client.close_stdin();
    client.wait_success(Duration::from_secs(30));
}

/// Kills `victim` and samples the survivors' lists every 100 ms for 12 s; then the client
/// must answer a check healthy with its instances, and hear a registration and a config
/// change made through a survivor.
fn kill_and_follow(c: &mut Cluster, client: &mut Running, stay: &Stay, victim: usize, round: u32) {
    eprintln!("killing node {}", victim + 1);
    c.nodes[victim].kill();
    let hit = Instant::now();
    let mut gaps = Vec::new();
    while hit.elapsed() < Duration::from_secs(12) {
        for (i, node) in c.nodes.iter().enumerate().filter(|(i, _)| *i != victim) {
            let list = listed(node, stay.service);
            if !stay.mine.iter().all(|m| list.contains(m)) {
                gaps.push(format!(
                    "{:?} after the kill, node {} lists {list:?}",
                    hit.elapsed(),
                    i + 1
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        gaps.is_empty(),
        "a survivor stopped listing the live client's instances:\n{}",
        gaps.join("\n")
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0.. {
        client.send(&format!("check {round}.{n}"));
        let line = client.wait_for("a check's answer", Duration::from_secs(10), |v| {
            v["step"] == "healthy" && v["n"] == json!(format!("{round}.{n}"))
        });
        if line["server_healthy"] == json!(true)
            && stay.mine.iter().all(|m| hosts(&line).contains(m))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the client never reconnected: {line}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The subscription was redone: a registration through a survivor is pushed.
    let survivor = (victim + 1) % c.nodes.len();
    let ip = format!("{}.{round}", stay.probe_prefix);
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/ns/instance",
            &format!(
                "serviceName={}&ip={ip}&port=8080&ephemeral=true",
                stay.service
            ),
        )
        .expect(200);
    let pushed = client.wait_for("the push of a new instance", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v).iter().any(|h| h.starts_with(&format!("{ip}:")))
    });
    eprintln!("pushed after the failover: {pushed}");
    // The listener was redone: a change through a survivor is heard.
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/cs/configs",
            &format!(
                "dataId={}&group=DEFAULT_GROUP&content=round:%20{round}",
                stay.data_id
            ),
        )
        .expect(200);
    let content = format!("round: {round}");
    client.wait_for("the config change", Duration::from_secs(10), |v| {
        v["step"] == "config" && v["content"] == json!(content)
    });
}
