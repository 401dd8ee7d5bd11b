//! Spring Cloud teams that use Eureka or Consul move to roster by changing an address:
//! the same Spring Boot provider/consumer pair (Spring Boot 3.5.7, Spring Cloud 2025.0.0,
//! `spring-boot-starter-web`, a `@LoadBalanced` RestClient calling `http://SERVICE/hello`
//! through `spring-cloud-starter-loadbalancer`, its 35-s cache off) against one roster
//! node, once with `spring-cloud-starter-netflix-eureka-client` (roster's `/eureka/` as the
//! `defaultZone`, with the user and password in the URL) and once with
//! `spring-cloud-starter-consul-discovery` (roster's HTTP address as the Consul agent's, a
//! roster API token as the ACL token). Two providers share the calls (round robin), one
//! that goes stops getting them within a bound, and the Nacos v1 list shows what the
//! starters registered. Programs: `tests/clients/java/spring-eureka/` and
//! `tests/clients/java/spring-consul/`.
//!
//! Spring Cloud Consul's health indicator (part of `/actuator/health`, which the starter's
//! HTTP check GETs) reads `GET /v1/status/leader` and `GET /v1/catalog/services` without
//! the ACL token; roster answers those anonymously, as a Consul agent does, so the
//! providers run with the starter's defaults (a 401 there once turned their health DOWN).

use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, free_port, json, unique, Node, NodeOptions, Value};

use super::{java, Running};
use crate::authz::{grant, PASSWORD};
use crate::calls::{answered, now_ms, reports_from, wait_report};

/// Spring Boot starts in 5-20 s on a loaded 2-core machine: a JVM gets this long to be up.
const START: Duration = Duration::from_secs(90);

/// The instances `node`'s Nacos v1 list shows for `service` (public namespace, healthy or
/// not, the admin's token as `accessToken`), sorted by port.
fn v1_hosts(node: &Node, service: &str) -> Vec<Value> {
    let r = node.raw(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName={}&healthyOnly=false&accessToken={}",
            enc(service),
            enc(&node.token())
        ),
        &[],
        None,
    );
    if r.status == 404 {
        return Vec::new();
    }
    let mut hosts = r.expect(200).json()["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    hosts.sort_by_key(|h| h["port"].as_u64());
    hosts
}

/// (port, healthy) of each instance `node` lists for `service`.
fn ports_health(node: &Node, service: &str) -> Vec<(u64, bool)> {
    v1_hosts(node, service)
        .iter()
        .map(|h| (h["port"].as_u64().unwrap(), h["healthy"] == true))
        .collect()
}

/// Waits for a second in which both providers answered, in turns (round robin: their
/// counts differ by at most one), and no call failed.
fn wait_round_robin(c: &mut Running) -> Value {
    wait_report(c, "calls answered by p1 and p2 in turns", |v| {
        let (a, b) = (answered(v, "p1"), answered(v, "p2"));
        v["errors"] == 0 && a > 0 && b > 0 && a.abs_diff(b) <= 1
    })
}

/// After `from_ms` (the stop or the kill of p1): the reports of the 3 seconds from
/// `from_ms + bound` on must show p2 alone answering and no call failing, and every call
/// that failed after `from_ms` failed before `from_ms + bound`. Answers how long after
/// `from_ms` the calls were p2's alone (the start of the first such second; at most a
/// second late).
fn calls_leave_p1(c: &mut Running, from_ms: u64, bound: Duration) -> Duration {
    let bound_ms = bound.as_millis() as u64;
    let lines = reports_from(c, from_ms + bound_ms, 3);
    for line in &lines {
        assert!(
            line["errors"] == 0 && answered(line, "p1") == 0 && answered(line, "p2") > 0,
            "a call went to p1, or failed, more than {bound:?} after it went: {line}"
        );
    }
    let after: Vec<Value> = c
        .drain()
        .iter()
        .filter(|v| v["step"] == "calls" && v["at_ms"].as_u64().is_some_and(|at| at > from_ms))
        .cloned()
        .collect();
    for line in &after {
        if let Some(last) = line["last_error_ms"].as_u64() {
            assert!(
                last <= from_ms + bound_ms,
                "a call failed more than {bound:?} after p1 went: {line}"
            );
        }
    }
    // The first second (a report's at_ms is that second's end) from which every report
    // is p2's alone.
    let clean = |v: &Value| v["errors"] == 0 && answered(v, "p1") == 0;
    let first_clean = after.iter().rposition(|v| !clean(v)).map_or(0, |i| i + 1);
    let start = after[first_clean]["at_ms"].as_u64().unwrap() - 1000;
    Duration::from_millis(start.saturating_sub(from_ms))
}

// ---- Spring Cloud Netflix Eureka ----

const EUREKA_MODULE: &str = "spring-eureka";
/// The providers' `spring.application.name`: Eureka application GREETER-EUREKA, the
/// Nacos service `greeter-eureka`, the consumer's `http://greeter-eureka/hello`.
const EUREKA_SERVICE: &str = "greeter-eureka";

/// A program of the Eureka module, pointed at `node`'s `/eureka/` as the admin.
fn eureka_program(main: &str, node: &Node) -> Command {
    let mut cmd = java(EUREKA_MODULE, main);
    cmd.args(["--server", &node.addr()])
        .args([
            "--username",
            "nacos",
            "--password",
            roster_tests::ADMIN_PASSWORD,
        ])
        .args(["--service", EUREKA_SERVICE, "--seconds", "240"]);
    cmd
}

fn eureka_provider(node: &Node, name: &str, port: u16) -> Running {
    let mut cmd = eureka_program("org.roster.clients.springeureka.provider.Provider", node);
    cmd.args(["--name", name, "--port", &port.to_string()]);
    Running::start(cmd, &format!("Spring Cloud Eureka provider {name}"))
}

#[test]
fn spring_registries_eureka_provider_and_consumer_through_roster() {
    let test = Instant::now();
    let node = Node::start();
    // Every JVM starts at once (each takes seconds).
    let (port1, port2) = (free_port(), free_port());
    let mut p1 = eureka_provider(&node, "p1", port1);
    let mut p2 = eureka_provider(&node, "p2", port2);
    let mut c = Running::start(
        eureka_program("org.roster.clients.springeureka.consumer.Consumer", &node),
        "Spring Cloud Eureka consumer",
    );
    p1.wait_step("started", START);
    p2.wait_step("started", START);

    // Both registered (the client registers in the background, after Spring is up): the
    // Nacos v1 list of the lower-cased application shows them on loopback, healthy,
    // ephemeral (kept by their renewals), with their instance ids and metadata.
    let mut both = [port1 as u64, port2 as u64];
    both.sort();
    eventually(Duration::from_secs(30), || {
        let p = ports_health(&node, EUREKA_SERVICE);
        if p == vec![(both[0], true), (both[1], true)] {
            Ok(())
        } else {
            Err(format!("v1 lists {p:?}"))
        }
    });
    for (h, (name, port)) in v1_hosts(&node, EUREKA_SERVICE)
        .iter()
        .zip(sorted_names(&[("p1", port1), ("p2", port2)]))
    {
        assert_eq!(h["ip"], json!("127.0.0.1"), "{h}");
        assert_eq!(h["ephemeral"], json!(true), "{h}");
        assert_eq!(h["enabled"], json!(true), "{h}");
        let m = &h["metadata"];
        assert_eq!(m["name"], json!(name), "{h}");
        assert_eq!(
            m["eureka.instanceId"],
            json!(format!("{name}-{port}")),
            "{h}"
        );
        assert_eq!(m["eureka.app"], json!("GREETER-EUREKA"), "{h}");
        assert_eq!(m["eureka.status"], json!("UP"), "{h}");
    }

    // The consumer's lb:// calls reach both, in turns.
    c.wait_step("started", START);
    let rr = wait_round_robin(&mut c);
    eprintln!("eureka: round robin over both providers: {rr}");

    // p1 stops: its context closes and the client cancels its lease (DELETE
    // /eureka/apps/GREETER-EUREKA/ID). Roster stops listing it at once; the consumer's
    // client sees it in its next delta fetch (every second) and the load balancer (no
    // cache) chooses from that. Spring Boot's graceful shutdown stops p1's web server
    // before the client cancels, so calls made in that gap fail: the bound covers them.
    let stopped_ms = now_ms();
    let stopped = Instant::now();
    p1.close_stdin();
    let gone = eventually(Duration::from_secs(20), || {
        let p = ports_health(&node, EUREKA_SERVICE);
        if p == vec![(port2 as u64, true)] {
            Ok(stopped.elapsed())
        } else {
            Err(format!("v1 lists {p:?}"))
        }
    });
    eprintln!("eureka: roster stopped listing the stopped provider after {gone:?}");
    p1.wait_step("stopped", Duration::from_secs(30));
    p1.wait_success(Duration::from_secs(30));
    let moved = calls_leave_p1(&mut c, stopped_ms, Duration::from_secs(6));
    eprintln!("eureka: the calls went to p2 alone from {moved:?} after p1's stop began");

    // The consumer ends; p2 stops and cancels: roster lists nothing.
    c.close_stdin();
    c.wait_step("done", Duration::from_secs(30));
    c.wait_success(Duration::from_secs(30));
    p2.close_stdin();
    p2.wait_step("stopped", Duration::from_secs(30));
    p2.wait_success(Duration::from_secs(30));
    eventually(Duration::from_secs(10), || {
        let p = ports_health(&node, EUREKA_SERVICE);
        if p.is_empty() {
            Ok(())
        } else {
            Err(format!("v1 still lists {p:?}"))
        }
    });
    eprintln!("eureka: the scenario took {:?}", test.elapsed());
}

/// (name, port) pairs sorted by port, as [`v1_hosts`] sorts the instances.
fn sorted_names<'a>(pairs: &[(&'a str, u16)]) -> Vec<(&'a str, u16)> {
    let mut v = pairs.to_vec();
    v.sort_by_key(|p| p.1);
    v
}

// ---- Spring Cloud Consul ----

const CONSUL_MODULE: &str = "spring-consul";

/// A node whose leader probes every second (three results flip an instance: about 3 s),
/// a user allowed to read and write the public namespace, and a roster API token of that
/// user: what the Consul clients hold as their ACL token.
fn consul_node() -> (Node, String) {
    let node = Node::start_with(NodeOptions {
        args: vec!["--health-check-interval-secs".into(), "1".into()],
        ..NodeOptions::default()
    });
    let user = unique("spring-consul");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={PASSWORD}"),
    )
    .expect(200);
    grant(&node, &user, &format!("{user}-rw"), "public:*:*", "rw");
    let auth = format!("Bearer {}", node.token());
    let created = node
        .raw(
            "POST",
            "/api/v1/tokens",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            Some(&json!({"user": user, "description": "spring cloud consul"}).to_string()),
        )
        .expect(201)
        .json();
    let token = created["token"].as_str().expect("a token").to_string();
    (node, token)
}

fn consul_program(main: &str, node: &Node, token: &str, service: &str) -> Command {
    let mut cmd = java(CONSUL_MODULE, main);
    cmd.args(["--server", &node.addr(), "--token", token])
        .args(["--service", service, "--seconds", "240"]);
    cmd
}

/// The passing instances' ports roster's Consul face answers the consumer's question
/// with (`GET /v1/health/service/SERVICE?passing`, the token as `X-Consul-Token`).
fn consul_passing(node: &Node, token: &str, service: &str) -> Vec<u64> {
    let r = node
        .raw(
            "GET",
            &format!("/v1/health/service/{service}?passing=true"),
            &[("x-consul-token", token)],
            None,
        )
        .expect(200);
    let mut p: Vec<u64> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["Service"]["Port"].as_u64())
        .collect();
    p.sort();
    p
}

/// Two providers registered through `spring-cloud-starter-consul-discovery` in `mode`
/// (`http`: the starter's HTTP check on /actuator/health, run by roster's leader; `ttl`:
/// a 3 s TTL check the starter passes), a consumer over the passing instances; p1 killed
/// with SIGKILL (no deregistration): roster's check turns it critical and the consumer
/// stops calling it within `bound`.
fn consul_scenario(mode: &str, service: &str, ephemeral: bool, bound: Duration) {
    let test = Instant::now();
    let (node, token) = consul_node();
    let provider = |name: &str, port: u16| {
        let mut cmd = consul_program(
            "org.roster.clients.springconsul.provider.Provider",
            &node,
            &token,
            service,
        );
        cmd.args(["--name", name, "--port", &port.to_string(), "--mode", mode]);
        Running::start(
            cmd,
            &format!("Spring Cloud Consul provider {name} ({mode})"),
        )
    };
    let (port1, port2) = (free_port(), free_port());
    let mut p1 = provider("p1", port1);
    let mut p2 = provider("p2", port2);
    let mut c = Running::start(
        consul_program(
            "org.roster.clients.springconsul.consumer.Consumer",
            &node,
            &token,
            service,
        ),
        "Spring Cloud Consul consumer",
    );
    p1.wait_step("started", START);
    p2.wait_step("started", START);

    // Both registered (PUT /v1/agent/service/register, before Spring reports it is up)
    // and passing: the Nacos v1 list shows them on loopback, healthy, persistent for an
    // HTTP check (roster's leader runs it) or ephemeral for a TTL check (kept by the
    // starter's passes), with the starter's metadata and roster's consul.* keys.
    let mut both = [port1 as u64, port2 as u64];
    both.sort();
    eventually(Duration::from_secs(30), || {
        let p = ports_health(&node, service);
        if p == vec![(both[0], true), (both[1], true)] {
            Ok(())
        } else {
            Err(format!("v1 lists {p:?}"))
        }
    });
    for (h, (name, port)) in v1_hosts(&node, service)
        .iter()
        .zip(sorted_names(&[("p1", port1), ("p2", port2)]))
    {
        assert_eq!(h["ip"], json!("127.0.0.1"), "{h}");
        assert_eq!(h["ephemeral"], json!(ephemeral), "{h}");
        assert_eq!(h["enabled"], json!(true), "{h}");
        let m = &h["metadata"];
        assert_eq!(m["name"], json!(name), "{h}");
        assert_eq!(m["consul.id"], json!(format!("{name}-{port}")), "{h}");
        assert_eq!(m["consul.check"], json!(mode), "{h}");
        if mode == "http" {
            assert_eq!(
                m["consul.check.target"],
                json!(format!("http://127.0.0.1:{port}/actuator/health")),
                "{h}"
            );
        }
    }
    assert_eq!(consul_passing(&node, &token, service), both);

    // The consumer's lb:// calls reach both, in turns.
    c.wait_step("started", START);
    let rr = wait_round_robin(&mut c);
    eprintln!("consul ({mode}): round robin over both providers: {rr}");

    // p1 is killed: no deregistration. Its check fails (the HTTP GET is refused; the TTL
    // lapses without a pass), roster turns it critical: out of the passing instances the
    // consumer asks for on each choice, unhealthy in the Nacos v1 list, still listed
    // there (Consul keeps a service whose check is critical).
    let killed_ms = now_ms();
    let killed = Instant::now();
    p1.kill();
    let critical = eventually(bound + Duration::from_secs(10), || {
        let p = ports_health(&node, service);
        if p == vec![(port1 as u64, false), (port2 as u64, true)] {
            Ok(killed.elapsed())
        } else {
            Err(format!("v1 lists {p:?}"))
        }
    });
    eprintln!("consul ({mode}): roster marked the killed provider unhealthy after {critical:?}");
    assert!(
        critical <= bound,
        "the killed provider was healthy for {critical:?}"
    );
    assert_eq!(consul_passing(&node, &token, service), vec![port2 as u64]);
    let moved = calls_leave_p1(&mut c, killed_ms, bound + Duration::from_secs(1));
    eprintln!("consul ({mode}): the calls went to p2 alone from {moved:?} after the kill");

    // The consumer ends; p2 stops and deregisters (PUT /v1/agent/service/deregister/ID);
    // p1, never deregistered, stays, critical.
    c.close_stdin();
    c.wait_step("done", Duration::from_secs(30));
    c.wait_success(Duration::from_secs(30));
    p2.close_stdin();
    p2.wait_step("stopped", Duration::from_secs(30));
    p2.wait_success(Duration::from_secs(30));
    eventually(Duration::from_secs(10), || {
        let p = ports_health(&node, service);
        if p == vec![(port1 as u64, false)] {
            Ok(())
        } else {
            Err(format!("v1 lists {p:?}"))
        }
    });
    eprintln!("consul ({mode}): the scenario took {:?}", test.elapsed());
}

/// The starter's default: an HTTP check on /actuator/health, which roster's leader runs
/// every second (`--health-check-interval-secs 1`); three refused GETs flip the killed
/// provider. HTTP-checked services are persistent instances: a name of their own.
#[test]
fn spring_registries_consul_http_check_provider_and_consumer_through_roster() {
    consul_scenario("http", "greeter-consul", false, Duration::from_secs(8));
}

/// `heartbeat.enabled`: a 3 s TTL check the starter passes (`PUT /v1/agent/check/pass/
/// service:ID`) — an ephemeral instance whose passes are its beats; killed, it lapses
/// after 3 s.
#[test]
fn spring_registries_consul_ttl_check_provider_and_consumer_through_roster() {
    consul_scenario("ttl", "greeter-consul-ttl", true, Duration::from_secs(10));
}
