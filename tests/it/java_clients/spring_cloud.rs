//! Spring Cloud Alibaba 2025.0.0.0 (Spring Boot 3.5, Spring Cloud 2025.0, nacos-client
//! 3.0.3 inside, gRPC, auth on) against one roster node: providers register through
//! `spring-cloud-starter-alibaba-nacos-discovery`, a consumer calls them through Spring
//! Cloud LoadBalancer (a `@LoadBalanced` RestClient, `http://provider/who`) and reads its
//! configuration through `spring-cloud-starter-alibaba-nacos-config`
//! (`spring.config.import=nacos:…`): a `@RefreshScope` bean and a
//! `@ConfigurationProperties` bean follow a change of the item made over HTTP v1. A killed
//! provider stops getting calls. Programs: `tests/clients/java/spring-cloud/`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, free_port, json, unique, Node, ADMIN_PASSWORD};
use tempfile::TempDir;

use super::{java, Running};
use crate::calls::{answered, assert_all_loopback, hosts, now_ms, reports_from, wait_answers};

const MODULE: &str = "spring-cloud";
/// The service the providers register as (`spring.application.name`) and the consumer
/// calls (`http://provider/…`, resolved by the load balancer).
const SERVICE: &str = "provider";

/// Spring Boot starts in 5-20 s on a loaded 2-core machine: a JVM gets this long to be up.
const START: Duration = Duration::from_secs(90);

/// A program of the module, pointed at `node` with auth, keeping nacos-client's logs and
/// snapshots in `dir`.
fn program(main: &str, node: &Node, dir: &Path) -> Command {
    let mut cmd = java(MODULE, main);
    cmd.args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", SERVICE, "--seconds", "240"])
        .arg("--dir")
        .arg(dir);
    cmd
}

fn provider(node: &Node, name: &str, port: u16, tmp: &TempDir) -> Running {
    let mut cmd = program(
        "org.roster.clients.spring.provider.Provider",
        node,
        &tmp.path().join(name),
    );
    cmd.args(["--name", name, "--port", &port.to_string()]);
    Running::start(cmd, &format!("Spring Cloud provider {name}"))
}

/// The sorted ports of the instances `node` lists for the providers' service.
fn ports(node: &Node) -> Vec<u64> {
    let mut p: Vec<u64> = hosts(node, SERVICE)
        .iter()
        .filter_map(|h| h["port"].as_u64())
        .collect();
    p.sort();
    p
}

fn publish(node: &Node, data_id: &str, content: &str) {
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!(
            "dataId={}&group=DEFAULT_GROUP&content={}",
            enc(data_id),
            enc(content)
        ),
    )
    .expect(200);
}

fn metric(node: &Node, series: &str) -> u64 {
    node.metric(series).unwrap_or(0.0) as u64
}

#[test]
fn spring_cloud_alibaba_discovers_calls_and_refreshes_through_roster() {
    let node = Node::start();
    let tmp = tempfile::tempdir().unwrap();
    let data_id = format!("{}.properties", unique("sca-consumer"));
    publish(&node, &data_id, "greeting=hello\nroster.word=one\n");

    // p1 and the consumer start together (each JVM takes seconds).
    let port1 = free_port();
    let mut p1 = provider(&node, "p1", port1, &tmp);
    let mut cmd = program(
        "org.roster.clients.spring.consumer.Consumer",
        &node,
        &tmp.path().join("consumer"),
    );
    cmd.args(["--data-id", &data_id]);
    let mut c = Running::start(cmd, "Spring Cloud consumer");

    // p1 registered on loopback, with its metadata, as an ephemeral (gRPC) instance: the
    // program saw roster's HTTP v1 list show it before printing "serving".
    let serving = p1.wait_step("serving", START);
    assert_eq!(serving["ip"], json!("127.0.0.1"), "{serving}");
    assert_eq!(serving["ephemeral"], json!(true), "{serving}");
    assert_eq!(serving["healthy"], json!(true), "{serving}");
    let listed = hosts(&node, SERVICE);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["port"], json!(port1), "{listed:?}");
    assert_eq!(listed[0]["metadata"]["name"], json!("p1"), "{listed:?}");

    // The consumer read the item at start (spring.config.import=nacos:…), and calls p1
    // through the load balancer.
    let started = c.wait_step("started", START);
    assert_eq!(started["greeting"], json!("hello"), "{started}");
    assert_eq!(started["word"], json!("one"), "{started}");
    wait_answers(&mut c, &["p1"]);

    // nacos-client 3.0.3 logs in at /nacos/v3/auth/user/login first, and roster serves
    // Nacos 3's login there: no 404, no fallback to v1.
    assert!(
        metric(
            &node,
            "roster_http_requests_total{route=\"/nacos/v3/auth/user/login\",method=\"POST\",status=\"200\"}"
        ) >= 2,
        "the clients did not log in at the v3 path"
    );
    assert_eq!(
        metric(
            &node,
            "roster_http_requests_total{route=\"unmatched\",method=\"POST\",status=\"404\"}"
        ),
        0,
        "a client posted to a path roster does not serve"
    );

    // The item changes over HTTP v1: the @RefreshScope bean and the
    // @ConfigurationProperties bean take the new values.
    publish(&node, &data_id, "greeting=bonjour\nroster.word=two\n");
    let changed = Instant::now();
    c.wait_for("the new greeting and word", Duration::from_secs(20), |v| {
        v["step"] == "config" && v["greeting"] == "bonjour" && v["word"] == "two"
    });
    eprintln!("the consumer's beans refreshed in {:?}", changed.elapsed());

    // A second provider: the calls reach both (round robin).
    let port2 = free_port();
    let mut p2 = provider(&node, "p2", port2, &tmp);
    p2.wait_step("serving", START);
    let mut both = vec![port1 as u64, port2 as u64];
    both.sort();
    assert_eq!(ports(&node), both);
    wait_answers(&mut c, &["p1", "p2"]);
    assert_all_loopback(&node);

    // p1 crashes. Its instance belongs to its gRPC connection, which has no heartbeat
    // timeout: it goes when the connection closes, and the kernel closes a killed
    // process's sockets at once. So the bound is 0 + 1 s, for roster to stop listing it
    // and for the consumer to stop calling it: roster pushes the change to the consumer's
    // nacos-client, and the load balancer (its own 35-s cache turned off) chooses from
    // that list on each call. One attempt per call: a call to p1 would fail.
    let killed_ms = now_ms();
    let killed = Instant::now();
    p1.kill();
    let gone = eventually(Duration::from_secs(5), || {
        let p = ports(&node);
        if p == vec![port2 as u64] {
            Ok(killed.elapsed())
        } else {
            Err(format!("{p:?}"))
        }
    });
    eprintln!("roster stopped listing the killed provider after {gone:?}");
    assert!(
        gone <= Duration::from_secs(1),
        "roster listed the killed provider for {gone:?}"
    );
    for line in reports_from(&mut c, killed_ms + 1000, 3) {
        assert!(
            line["errors"] == 0 && answered(&line, "p1") == 0 && answered(&line, "p2") > 0,
            "a call went to the killed provider more than 1 s after the kill: {line}"
        );
    }
    // In the second the kill fell in, a failed call may only be one made before the bound.
    for line in c
        .drain()
        .iter()
        .filter(|v| v["step"] == "calls" && v["at_ms"].as_u64().is_some_and(|at| at > killed_ms))
    {
        if let Some(last) = line["last_error_ms"].as_u64() {
            assert!(
                last <= killed_ms + 1000,
                "a call failed more than 1 s after the kill: {line}"
            );
        }
    }

    // The consumer ends; p2 stops gracefully and deregisters through the starter.
    c.close_stdin();
    c.wait_success(Duration::from_secs(30));
    p2.close_stdin();
    eventually(Duration::from_secs(10), || {
        let p = ports(&node);
        if p.is_empty() {
            Ok(())
        } else {
            Err(format!("roster still lists {p:?}"))
        }
    });
    p2.wait_step("stopped", Duration::from_secs(30));
    p2.wait_success(Duration::from_secs(30));

    // nacos-client wrote its logs where it was told, not in the home directory.
    for who in ["p1", "p2", "consumer"] {
        let log = tmp.path().join(who).join("logs/nacos/naming.log");
        assert!(log.exists(), "{} missing", log.display());
    }
}
