//! Consul's HTTP API on roster (`/v1/...` on the HTTP port, and on `--consul-http`'s port):
//! HashiCorp's Go client (`github.com/hashicorp/consul/api`, `tests/clients/go/consul.go`)
//! registers with a TTL check, passes, warns and lapses, reads the catalog, the agent and
//! health, and blocks on health while the test registers through Nacos; `py-consul`
//! (`tests/clients/python/consul_flow.py`) registers with HTTP and TCP checks that roster's
//! leader runs against servers the test holds, and its HTTP-checked registration survives
//! a SIGKILL of the node; plain HTTP covers bad input, credentials and grants, the routes
//! not served, blocking and `filter`; three nodes share registrations and TTL lapses; and
//! Prometheus' own Consul discovery (`tests/clients/go-promsd`: Debian's `prometheus` has
//! no `consul_sd_configs`) discovers, relabels and follows targets through blocking queries.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use roster_tests::{
    enc, eventually, free_port, json, unique, Cluster, Node, NodeOptions, Resp, Value,
    ADMIN_PASSWORD,
};

use crate::authz::{grant, PASSWORD};
use crate::go_clients::{scenario, Running};

/// How long a command of a client program may take.
const STEP: Duration = Duration::from_secs(40);

/// A request to `addr` (`host:port`) with `headers` and a raw body: what a Consul client
/// sends (a JSON body with no content type, as `consul/api` sends it).
pub(crate) fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Resp {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(body.unwrap_or_default().to_string())
        .expect("request");
    let mut resp = agent
        .run(req)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    Resp {
        status: resp.status().as_u16(),
        body: resp.body_mut().read_to_string().unwrap_or_default(),
        headers: resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
    }
}

/// A Consul client of one address with one token (`X-Consul-Token`).
pub(crate) struct Consul {
    pub addr: String,
    pub token: String,
}

impl Consul {
    pub(crate) fn new(addr: &str, token: &str) -> Self {
        Self {
            addr: addr.to_string(),
            token: token.to_string(),
        }
    }

    pub(crate) fn get(&self, path: &str) -> Resp {
        send(
            &self.addr,
            "GET",
            path,
            &[("x-consul-token", &self.token)],
            None,
        )
    }

    /// A PUT with a JSON body (addresses in it are loopback: checked).
    pub(crate) fn put(&self, path: &str, body: Option<&Value>) -> Resp {
        if let Some(b) = body {
            for key in ["Address", "address"] {
                if let Some(ip) = b[key].as_str() {
                    roster_tests::addresses::check_ip(ip);
                    assert!(ip.starts_with("127."), "not loopback: {ip}");
                }
            }
        }
        let text = body.map(Value::to_string);
        send(
            &self.addr,
            "PUT",
            path,
            &[("x-consul-token", &self.token)],
            text.as_deref(),
        )
    }

    pub(crate) fn register(&self, body: &Value) {
        self.put("/v1/agent/service/register", Some(body))
            .expect(200);
    }

    /// `GET /v1/health/service/{service}` (`query` appended as is).
    pub(crate) fn health(&self, service: &str, query: &str) -> Vec<Value> {
        let r = self
            .get(&format!("/v1/health/service/{service}{query}"))
            .expect(200);
        r.json().as_array().cloned().unwrap_or_default()
    }
}

/// An API token of a new user granted `action` on `resource` (`namespace:group:kind/name`).
pub(crate) fn api_token(node: &Node, resource: &str, action: &str) -> String {
    let user = unique("consul-user");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={PASSWORD}"),
    )
    .expect(200);
    grant(node, &user, &format!("{user}-role"), resource, action);
    token_of(node, &user)
}

/// A new API token of `user` (created by the admin).
pub(crate) fn token_of(node: &Node, user: &str) -> String {
    let auth = format!("Bearer {}", node.token());
    let created = send(
        &node.addr(),
        "POST",
        "/api/v1/tokens",
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
        ],
        Some(&json!({"user": user, "description": "consul face test"}).to_string()),
    )
    .expect(201)
    .json();
    created["token"].as_str().expect("token").to_string()
}

/// The entry of a health answer whose service address is `ip`.
pub(crate) fn entry<'a>(entries: &'a [Value], ip: &str) -> Option<&'a Value> {
    entries.iter().find(|e| e["Service"]["Address"] == ip)
}

/// A health entry's status as Consul clients aggregate it: critical over warning over
/// passing.
pub(crate) fn aggregated(entry: &Value) -> &'static str {
    let statuses: Vec<&str> = entry["Checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["Status"].as_str().unwrap_or(""))
        .collect();
    if statuses.contains(&"critical") {
        "critical"
    } else if statuses.contains(&"warning") {
        "warning"
    } else if statuses.iter().all(|s| *s == "passing") {
        "passing"
    } else {
        "unknown"
    }
}

/// The status of the check `id` of a health entry.
fn check_status<'a>(entry: &'a Value, id: &str) -> Option<&'a str> {
    entry["Checks"]
        .as_array()?
        .iter()
        .find(|c| c["CheckID"] == id)
        .and_then(|c| c["Status"].as_str())
}

/// Nacos v1's hosts of `service` in `public`, healthy or not.
fn nacos_hosts(node: &Node, service: &str) -> Vec<Value> {
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false"),
        )
        .expect(200)
        .json();
    list["hosts"].as_array().cloned().unwrap_or_default()
}

fn nacos_host(node: &Node, service: &str, ip: &str) -> Option<Value> {
    nacos_hosts(node, service)
        .into_iter()
        .find(|h| h["ip"] == ip)
}

/// The addresses the Eureka face lists for the application of `service` (as the admin,
/// with Basic credentials, as Eureka clients send theirs).
fn eureka_ips(node: &Node, service: &str) -> Vec<String> {
    use base64::Engine as _;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("nacos:{ADMIN_PASSWORD}"))
    );
    let r = send(
        &node.addr(),
        "GET",
        &format!("/eureka/apps/{}", service.to_uppercase()),
        &[("authorization", &basic), ("accept", "application/json")],
        None,
    );
    if r.status == 404 {
        return Vec::new();
    }
    let app = r.expect(200).json();
    let mut ips: Vec<String> = app["application"]["instance"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["ipAddr"].as_str().map(str::to_string))
        .collect();
    ips.sort();
    ips
}

/// A Consul `Meta` shown holds every registered key with its value, and none of roster's
/// own `consul.*` keys.
#[track_caller]
fn meta_holds(shown: &Value, registered: &Value) {
    let shown_map = shown
        .as_object()
        .unwrap_or_else(|| panic!("Meta is not a map: {shown}"));
    for (k, v) in registered.as_object().unwrap() {
        assert_eq!(shown_map.get(k), Some(v), "Meta {shown} lacks {k}={v}");
    }
    assert!(
        !shown_map.keys().any(|k| k.starts_with("consul.")),
        "roster's own keys in Meta: {shown}"
    );
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A loopback HTTP server answering every request 200 with `body` (a health endpoint,
/// a Prometheus exposition), counting requests; stopped (its port closed) on `stop` or
/// drop.
pub(crate) struct Stub {
    pub port: u16,
    pub requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stub {
    pub(crate) fn start(body: &'static str) -> Self {
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("stub bind");
        listener.set_nonblocking(true).unwrap();
        let (stop, requests) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let thread = {
            let (stop, requests) = (stop.clone(), requests.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut conn, _)) => {
                            requests.fetch_add(1, Ordering::Relaxed);
                            let _ = conn.set_nonblocking(false);
                            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                            let mut seen = Vec::new();
                            let mut buf = [0u8; 1024];
                            // A request's head (a TCP check sends none: the read ends).
                            for _ in 0..64 {
                                match conn.read(&mut buf) {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                                }
                                if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                                    break;
                                }
                            }
                            if !seen.is_empty() {
                                let _ = write!(
                                    conn,
                                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                                    body.len()
                                );
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        Self {
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the port: connections are refused from now on.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("stub thread");
        }
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn consul_face_go_client_ttl_check_views_blocking_query_and_deregistration() {
    let node = Node::start();
    let token = api_token(&node, "public:*:*", "rw");
    let service = unique("consul-go");
    let id = format!("{service}-1");
    let (ip, other_ip) = ("127.45.1.1", "127.45.1.2");
    let check_id = format!("service:{id}");
    let mut cmd = scenario("consul");
    cmd.args([
        "-addr",
        &node.addr(),
        "-token",
        &token,
        "-service",
        &service,
        "-id",
        &id,
        "-ip",
        ip,
        "-port",
        "8080",
        "-other-ip",
        other_ip,
    ]);
    let mut go = Running::start(cmd, "the consul/api scenario");
    go.wait_step("registered", STEP);

    // Consul's TTL checks start critical: listed, not passing, until the first pass.
    let first = go.wait_step("critical_first", STEP);
    assert_eq!(first["listed_passing"], false, "{first}");
    assert_eq!(first["entry"]["checks"][&check_id], "critical", "{first}");
    assert_eq!(first["entry"]["checks"]["serfHealth"], "passing", "{first}");
    go.wait_step("passing", STEP);

    // The catalog, the catalog's services and the agent show it with its tags and Meta
    // (roster's own keys hidden).
    let views = go.wait_step("views", STEP);
    let catalog = &views["catalog"];
    assert_eq!(catalog["service"], service.as_str(), "{views}");
    assert_eq!(
        (&catalog["address"], &catalog["port"]),
        (&json!(ip), &json!(8080)),
        "{views}"
    );
    assert_eq!(catalog["tags"], json!(["go", "tier=api"]), "{views}");
    // The Meta registered (roster also shows `k=v` tags as metadata; its own `consul.*`
    // keys stay hidden).
    meta_holds(&catalog["meta"], &json!({"version": "1", "lang": "go"}));
    assert_eq!(
        catalog["node"], ip,
        "a Consul node is the instance's IP: {views}"
    );
    assert_eq!(catalog["datacenter"], "dc1", "{views}");
    let tags = views["services_tags"]
        .as_array()
        .expect("services lists it");
    assert!(tags.contains(&json!("go")), "{views}");
    let agent = &views["agent"];
    assert_eq!(agent["service"], service.as_str(), "{views}");
    assert_eq!(agent["tags"], json!(["go", "tier=api"]), "{views}");
    meta_holds(&agent["meta"], &json!({"version": "1", "lang": "go"}));
    // Nacos v1 holds it healthy, Meta and `k=v` tags as metadata; Eureka lists it.
    let held = nacos_host(&node, &service, ip).expect("Nacos v1 lists it");
    assert_eq!(held["healthy"], true, "{held}");
    assert_eq!(held["port"], 8080, "{held}");
    assert_eq!(held["metadata"]["version"], "1", "{held}");
    assert_eq!(held["metadata"]["tier"], "api", "{held}");
    assert_eq!(eureka_ips(&node, &service), [ip]);
    go.send("go");

    let warned = go.wait_step("warning", STEP);
    assert_eq!(warned["entry"]["checks"][&check_id], "warning", "{warned}");

    // A watcher blocks on the service's health; another instance registers through Nacos
    // v1 meanwhile: the block returns after the registration, long before its 20 s end.
    let blocking = go.wait_step("blocking", STEP);
    std::thread::sleep(Duration::from_secs(2));
    let registering = now_ms();
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName={service}&ip={other_ip}&port=8080"),
    )
    .expect(200);
    let unblocked = go.wait_step("unblocked", STEP);
    let (blocked_at, returned_at) = (
        blocking["at_ms"].as_u64().unwrap(),
        unblocked["at_ms"].as_u64().unwrap(),
    );
    assert!(
        returned_at >= registering,
        "returned {} ms before the registration: {unblocked}",
        registering - returned_at
    );
    assert!(
        returned_at - blocked_at < 15_000,
        "blocked {} ms: it waited out its wait, not the change: {unblocked}",
        returned_at - blocked_at
    );
    assert_ne!(unblocked["index"], blocking["index"], "{unblocked}");
    let entries = unblocked["entries"].as_array().unwrap();
    let other = entries
        .iter()
        .find(|e| e["address"] == other_ip)
        .unwrap_or_else(|| panic!("the Nacos instance is not in the answer: {unblocked}"));
    // Across faces: healthy in Nacos is passing in Consul.
    assert_eq!(other["aggregated"], "passing", "{other}");
    assert_eq!(other["port"], 8080, "{other}");
    assert!(
        entries.iter().any(|e| e["id"] == id.as_str()),
        "{unblocked}"
    );

    // Nothing changes (passes keep a passing check as it is): the wait runs out, same
    // index.
    let quiet = go.wait_step("quiet", STEP);
    let took = quiet["took_ms"].as_u64().unwrap();
    assert!((1_800..8_000).contains(&took), "{quiet}");
    assert_eq!(quiet["index_before"], quiet["index_after"], "{quiet}");

    // The client stops passing: critical within about its TTL (3 s) on every face.
    let stopped = go.wait_step("stopped_passing", STEP);
    let last_pass = stopped["last_pass_ms"].as_u64().unwrap();
    let faces = Consul::new(&node.addr(), &token);
    let lapsed_after = eventually(Duration::from_secs(15), || {
        let nacos = nacos_host(&node, &service, ip).ok_or("gone from Nacos v1")?;
        let health = faces.health(&service, "");
        let consul = entry(&health, ip).ok_or("gone from Consul's health")?;
        if nacos["healthy"] == false && check_status(consul, &check_id) == Some("critical") {
            Ok(now_ms() - last_pass)
        } else {
            Err(format!("nacos {nacos}, consul {consul}"))
        }
    });
    eprintln!("critical on every face {lapsed_after} ms after the last pass");
    assert!(
        (2_500..8_000).contains(&lapsed_after),
        "critical {lapsed_after} ms after the last pass (TTL 3 s)"
    );
    // Still listed (unhealthy) among Nacos's hosts, not among the passing.
    assert!(entry(&faces.health(&service, "?passing=true"), ip).is_none());
    let critical = go.wait_step("critical", STEP);
    assert!(
        critical["after_last_pass_ms"].as_u64().unwrap() < 8_000,
        "{critical}"
    );
    go.send("go");

    // Deregistered: gone from every face; the Nacos instance stays.
    go.wait_step("deregistered", STEP);
    go.wait_success(STEP);
    eventually(Duration::from_secs(10), || {
        let ips: Vec<String> = nacos_hosts(&node, &service)
            .iter()
            .map(|h| h["ip"].as_str().unwrap_or("").to_string())
            .collect();
        let eureka = eureka_ips(&node, &service);
        let catalog = faces
            .get(&format!("/v1/catalog/service/{service}"))
            .expect(200)
            .json();
        let agent = faces.get("/v1/agent/services").expect(200).json();
        let gone = ips == [other_ip]
            && eureka == [other_ip]
            && catalog.as_array().is_some_and(|c| c.len() == 1)
            && agent.get(&id).is_none();
        gone.then_some(()).ok_or(format!(
            "nacos {ips:?}, eureka {eureka:?}, catalog {catalog}"
        ))
    });
}

/// The Python client's venv (`scripts/test` makes it).
fn python() -> std::path::PathBuf {
    let python = roster_tests::workspace_root().join("tests/clients/python/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    python
}

#[test]
fn consul_face_py_consul_http_and_tcp_checks_run_by_roster_and_kept_across_a_restart() {
    let mut node = Node::start();
    let token = api_token(&node, "public:*:*", "rw");
    let service = unique("consul-py");
    let (http_ip, tcp_ip) = ("127.45.2.1", "127.45.2.2");
    let mut health = Stub::start("ok\n");
    let tcp = Stub::start("");
    let script = roster_tests::workspace_root().join("tests/clients/python/consul_flow.py");
    let mut cmd = std::process::Command::new(python());
    cmd.arg(script).args([
        "--host",
        "127.0.0.1",
        "--port",
        &node.http_port.to_string(),
        "--token",
        &token,
        "--service",
        &service,
        "--http-ip",
        http_ip,
        "--http-url",
        &format!("http://127.0.0.1:{}/health", health.port),
        "--tcp-ip",
        tcp_ip,
        "--tcp-target",
        &format!("127.0.0.1:{}", tcp.port),
    ]);
    let mut py = Running::start(cmd, "py-consul");
    py.wait_step("registered", STEP);
    let passing = py.wait_step("passing", STEP);
    for id in [format!("{service}-http"), format!("{service}-tcp")] {
        let checks = passing["checks"][&id].as_object().expect("checks");
        assert!(
            checks.len() >= 2 && checks.values().all(|s| s == "passing"),
            "{id}: {passing}"
        );
    }
    // roster's leader probes the targets the checks name.
    eventually(Duration::from_secs(20), || {
        let (h, t) = (
            health.requests.load(Ordering::Relaxed),
            tcp.requests.load(Ordering::Relaxed),
        );
        (h > 0 && t > 0)
            .then_some(())
            .ok_or(format!("probes: http {h}, tcp {t}"))
    });
    let views = py.wait_step("views", STEP);
    let http_id = format!("{service}-http");
    let agent = &views["agent"][&http_id];
    assert_eq!(
        (&agent["Service"], &agent["Address"], &agent["Port"]),
        (&json!(service), &json!(http_ip), &json!(8080)),
        "{views}"
    );
    assert_eq!(agent["Tags"], json!(["py", "check=http"]), "{views}");
    meta_holds(&agent["Meta"], &json!({"version": "2"}));
    let catalog = views["catalog"].as_array().unwrap();
    assert_eq!(catalog.len(), 2, "{views}");
    assert_eq!(catalog[1]["address"], tcp_ip, "{views}");
    meta_holds(&catalog[1]["meta"], &json!({"version": "3"}));
    // Persistent instances in Nacos terms, healthy.
    for ip in [http_ip, tcp_ip] {
        let h = nacos_host(&node, &service, ip).expect("listed by Nacos v1");
        assert_eq!(
            (&h["healthy"], &h["ephemeral"]),
            (&json!(true), &json!(false)),
            "{h}"
        );
    }

    // The HTTP check's server goes away: critical (3 failed probes in a row).
    health.stop();
    py.send("http-down");
    let down = py.wait_step("http_critical", Duration::from_secs(60));
    eprintln!("the HTTP check turned critical: {down}");
    let h = nacos_host(&node, &service, http_ip).expect("still listed");
    assert_eq!(h["healthy"], false, "{h}");
    let t = nacos_host(&node, &service, tcp_ip).expect("still listed");
    assert_eq!(t["healthy"], true, "{t}");

    // SIGKILL and a start on the same data dir: the registrations are kept.
    node.restart();
    py.send("persisted");
    let kept = py.wait_step("persisted", STEP);
    assert_eq!(kept["address"], http_ip, "{kept}");
    meta_holds(&kept["meta"], &json!({"version": "2"}));
    assert!(kept["ids"]
        .as_array()
        .unwrap()
        .contains(&json!(format!("{service}-tcp"))));

    py.send("deregister");
    py.wait_step("deregistered", STEP);
    py.wait_success(STEP);
    assert!(nacos_hosts(&node, &service).is_empty());
}

#[test]
fn consul_face_http_bad_input_credentials_grants_routes_blocking_and_filter() {
    let own_port = free_port();
    let node = Node::start_with(NodeOptions {
        args: vec!["--consul-http".into(), format!("127.0.0.1:{own_port}")],
        ..Default::default()
    });
    let token = api_token(&node, "public:*:*", "rw");
    let c = Consul::new(&node.addr(), &token);
    let service = unique("consul-http");

    // Bad bodies: 400 naming the field, in plain text; nothing registered.
    for (body, field) in [
        (json!({"Address": "127.45.3.9", "Port": 80}), "Name"),
        (
            json!({"Name": service, "Address": "127.45.3.9", "Port": 70000}),
            "Port",
        ),
        (
            json!({"Name": service, "Address": "127.45.3.9", "Port": 80, "Check": {"TTL": "abc"}}),
            "Check.TTL",
        ),
        (
            json!({"Name": service, "Address": "127.45.3.9", "Port": 80,
                   "Check": {"Args": ["/bin/true"], "Interval": "10s"}}),
            "Args",
        ),
        (
            json!({"Name": service, "Address": "127.45.3.9", "Port": 80, "Kind": "connect-proxy"}),
            "Kind",
        ),
    ] {
        let r = c.put("/v1/agent/service/register", Some(&body));
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(field), "{body}: {}", r.body);
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("text/plain")),
            "{body}: {:?}",
            r.headers
        );
    }
    let not_json = send(
        &node.addr(),
        "PUT",
        "/v1/agent/service/register",
        &[("x-consul-token", &token)],
        Some("{not json"),
    );
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    let services = c.get("/v1/catalog/services").expect(200).json();
    assert!(services.get(&service).is_none(), "{services}");
    assert!(nacos_hosts(&node, &service).is_empty());

    // Unknown ids and checks.
    c.put("/v1/agent/service/deregister/no-such-service", None)
        .expect(404);
    c.put("/v1/agent/check/pass/no-such-check", None)
        .expect(404);
    c.get("/v1/agent/service/no-such-service").expect(404);

    // Two instances, versions 1 and 2; the tag `k=v` and Meta become Nacos metadata.
    for (n, ip) in [(1, "127.45.3.1"), (2, "127.45.3.2")] {
        c.register(&json!({
            "Name": service, "ID": format!("{service}-{n}"), "Address": ip, "Port": 9000 + n,
            "Tags": [format!("v{n}"), "zone=a"], "Meta": {"version": n.to_string()},
            "Weights": {"Passing": 3, "Warning": 1},
        }));
    }
    let held = nacos_host(&node, &service, "127.45.3.2").expect("in Nacos v1");
    assert_eq!(held["metadata"]["version"], "2", "{held}");
    assert_eq!(held["metadata"]["zone"], "a", "{held}");
    assert_eq!(held["weight"], 3.0, "{held}");
    assert_eq!(held["healthy"], true, "check-less is passing: {held}");

    // Reads carry Consul's headers.
    let r = c.get(&format!("/v1/health/service/{service}")).expect(200);
    let index: u64 = r
        .header("x-consul-index")
        .expect("X-Consul-Index")
        .parse()
        .expect("a number");
    assert!(index >= 1);
    assert_eq!(r.header("x-consul-knownleader"), Some("true"));
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    for path in [
        "/v1/catalog/services".to_string(),
        format!("/v1/catalog/service/{service}"),
        "/v1/agent/services".to_string(),
        format!("/v1/health/checks/{service}"),
    ] {
        let r = c.get(&path).expect(200);
        assert!(r.header("x-consul-index").is_some(), "{path}");
    }
    let agent_self = c.get("/v1/agent/self").expect(200).json();
    assert_eq!(agent_self["Config"]["Datacenter"], "dc1", "{agent_self}");
    assert_eq!(
        c.get("/v1/catalog/datacenters").expect(200).json(),
        json!(["dc1"])
    );
    let leader = c.get("/v1/status/leader").expect(200).json();
    assert!(leader.as_str().is_some_and(|l| l.contains(':')), "{leader}");

    // A blocking query on the unchanged service returns at its wait, same index.
    let start = Instant::now();
    let r = c
        .get(&format!(
            "/v1/health/service/{service}?index={index}&wait=1s"
        ))
        .expect(200);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(r.header("x-consul-index"), Some(index.to_string().as_str()));

    // filter and tag.
    let only = |query: &str| -> Vec<String> {
        let mut ids: Vec<String> = c
            .health(&service, query)
            .iter()
            .map(|e| e["Service"]["ID"].as_str().unwrap_or("").to_string())
            .collect();
        ids.sort();
        ids
    };
    let v2 = vec![format!("{service}-2")];
    assert_eq!(
        only(&format!("?filter={}", enc("Service.Meta.version == \"2\""))),
        v2
    );
    assert_eq!(only("?tag=v2"), v2);
    assert_eq!(
        only(&format!(
            "?filter={}",
            enc("\"v1\" in Service.Tags or Service.Port == 9002")
        ))
        .len(),
        2
    );
    let catalog = c
        .get(&format!(
            "/v1/catalog/service/{service}?filter={}",
            enc("ServiceMeta.version == \"2\"")
        ))
        .expect(200)
        .json();
    assert_eq!(catalog.as_array().unwrap().len(), 1, "{catalog}");
    assert_eq!(catalog[0]["ServiceID"], v2[0].as_str(), "{catalog}");
    let bad = c.get(&format!(
        "/v1/health/service/{service}?filter={}",
        enc("Service.Meta.version ==")
    ));
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("filter"), "{}", bad.body);

    // Maintenance: a critical `_service_maintenance` check, off the passing list.
    let one = format!("{service}-1");
    c.put(
        &format!("/v1/agent/service/maintenance/{one}?enable=true&reason=test"),
        None,
    )
    .expect(200);
    let all = c.health(&service, "");
    let e = entry(&all, "127.45.3.1").expect("still listed");
    assert_eq!(
        check_status(e, &format!("_service_maintenance:{one}")),
        Some("critical"),
        "{e}"
    );
    assert_eq!(only("?passing=true"), v2);
    c.put(
        &format!("/v1/agent/service/maintenance/{one}?enable=false"),
        None,
    )
    .expect(200);
    assert_eq!(only("?passing=true").len(), 2);

    // A check that is not TTL cannot be passed.
    let target = Stub::start("");
    c.register(&json!({
        "Name": service, "ID": format!("{service}-tcp"), "Address": "127.45.3.3", "Port": 9003,
        "Check": {"TCP": format!("127.0.0.1:{}", target.port), "Interval": "1s"},
    }));
    let r = c.put(&format!("/v1/agent/check/pass/service:{service}-tcp"), None);
    assert_eq!(r.status, 400, "{}", r.body);

    // Re-registering an ID at a new address replaces it.
    c.register(&json!({
        "Name": service, "ID": format!("{service}-tcp"), "Address": "127.45.3.4", "Port": 9003,
    }));
    eventually(Duration::from_secs(5), || {
        let ips: Vec<String> = nacos_hosts(&node, &service)
            .iter()
            .map(|h| h["ip"].as_str().unwrap_or("").to_string())
            .collect();
        (ips.contains(&"127.45.3.4".to_string()) && !ips.contains(&"127.45.3.3".to_string()))
            .then_some(())
            .ok_or(format!("{ips:?}"))
    });

    // Credentials: a write without any is 401, naming where the token goes; reads
    // without any are anonymous, as Consul's anonymous token: the leader and the
    // datacenter, and an empty catalog (Spring Cloud Consul's health indicator reads
    // them so); a bad token on a read is refused, not taken as anonymous. A reader may
    // not write; a user of another namespace sees no service here.
    let anonymous = send(
        &node.addr(),
        "PUT",
        "/v1/agent/service/register",
        &[],
        Some(&json!({"Name": service, "Address": "127.45.3.5", "Port": 1}).to_string()),
    );
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert!(
        anonymous.body.contains("X-Consul-Token"),
        "{}",
        anonymous.body
    );
    let open = |path: &str| {
        let r = send(&node.addr(), "GET", path, &[], None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        serde_json::from_str::<Value>(&r.body).expect("JSON")
    };
    assert_eq!(open("/v1/status/leader"), json!(node.addr()));
    assert_eq!(open("/v1/catalog/services"), json!({}));
    assert_eq!(open(&format!("/v1/health/service/{service}")), json!([]));
    assert_eq!(open("/v1/agent/self")["Config"]["Datacenter"], "dc1");
    let forged = send(
        &node.addr(),
        "GET",
        "/v1/catalog/services",
        &[("X-Consul-Token", "roster_0000000000000000_forged")],
        None,
    );
    assert!(
        matches!(forged.status, 401 | 403),
        "a bad token is refused: {} {}",
        forged.status,
        forged.body
    );
    let reader = Consul::new(&node.addr(), &api_token(&node, "public:*:*", "r"));
    let r = reader.put(
        "/v1/agent/service/register",
        Some(&json!({"Name": service, "Address": "127.45.3.5", "Port": 1})),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let read = reader.get("/v1/catalog/services").expect(200).json();
    assert!(read.get(&service).is_some(), "{read}");
    let elsewhere_ns = unique("consul-ns");
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        &format!("customNamespaceId={elsewhere_ns}&namespaceName={elsewhere_ns}"),
    )
    .expect(200);
    let elsewhere = Consul::new(
        &node.addr(),
        &api_token(&node, &format!("{elsewhere_ns}:*:*"), "rw"),
    );
    let theirs = elsewhere.get("/v1/catalog/services").expect(200).json();
    assert!(
        theirs
            .as_object()
            .is_some_and(|m| m.get(&service).is_none()),
        "{theirs}"
    );
    // Other ways of carrying the token: `?token=` and bearer.
    let by_query = send(
        &node.addr(),
        "GET",
        &format!("/v1/catalog/services?token={}", enc(&token)),
        &[],
        None,
    );
    assert_eq!(by_query.status, 200, "{}", by_query.body);
    let bearer = format!("Bearer {token}");
    let by_bearer = send(
        &node.addr(),
        "GET",
        "/v1/catalog/services",
        &[("authorization", &bearer)],
        None,
    );
    assert_eq!(by_bearer.status, 200, "{}", by_bearer.body);

    // Routes not served.
    for path in ["/v1/kv/x", "/v1/session/list", "/v1/acl/tokens", "/v1/txn"] {
        let r = c.get(path);
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }

    // `--consul-http`: the same API on its own port.
    let own = Consul::new(&format!("127.0.0.1:{own_port}"), &token);
    let there = own.get("/v1/catalog/services").expect(200);
    assert!(there.header("x-consul-index").is_some());
    assert_eq!(
        there.json()[&service],
        c.get("/v1/catalog/services").expect(200).json()[&service]
    );
    own.register(&json!({"Name": service, "ID": format!("{service}-own"),
                         "Address": "127.45.3.6", "Port": 9006}));
    assert!(entry(&c.health(&service, ""), "127.45.3.6").is_some());
    own.put(&format!("/v1/agent/service/deregister/{service}-own"), None)
        .expect(200);
    assert!(entry(&c.health(&service, ""), "127.45.3.6").is_none());

    // Reads filter what a caller may not read, as Consul's ACLs do: the user of another
    // namespace gets an empty list, not a refusal.
    let hidden = elsewhere.get(&format!("/v1/health/service/{service}"));
    assert_eq!(
        (hidden.status, hidden.body.as_str()),
        (200, "[]"),
        "health/service of a service the caller may not read"
    );
}

#[test]
fn consul_face_on_three_nodes_registrations_and_ttl_lapses_are_everywhere() {
    let c = Cluster::start(3, &[]);
    let token = api_token(&c.nodes[0], "public:*:*", "rw");
    let faces: Vec<Consul> = c
        .nodes
        .iter()
        .map(|n| Consul::new(&n.addr(), &token))
        .collect();
    let service = unique("consul-3");
    faces[0].register(
        &json!({"Name": service, "ID": "n1", "Address": "127.45.4.1",
                              "Port": 8080, "Tags": ["persistent"]}),
    );
    for (i, face) in faces.iter().enumerate() {
        eventually(Duration::from_secs(10), || {
            let all = face.health(&service, "?passing=true");
            entry(&all, "127.45.4.1")
                .map(|_| ())
                .ok_or(format!("node {} lists {all:?}", i + 1))
        });
    }

    // A TTL instance through node 2, passed through node 2 for a while, then left.
    // (Another service: roster holds TTL-checked instances as ephemeral ones, which a
    // service of persistent instances does not take; see the test of a mixed service.)
    let ttl_service = format!("{service}-ttl");
    faces[1].register(
        &json!({"Name": ttl_service, "ID": "ttl", "Address": "127.45.4.2",
                              "Port": 8080, "Check": {"TTL": "3s", "Status": "passing"}}),
    );
    let mut last_pass = Instant::now();
    for _ in 0..5 {
        faces[1]
            .put("/v1/agent/check/pass/service:ttl", None)
            .expect(200);
        last_pass = Instant::now();
        std::thread::sleep(Duration::from_secs(1));
    }
    for (i, face) in faces.iter().enumerate() {
        let all = face.health(&ttl_service, "");
        let e = entry(&all, "127.45.4.2")
            .unwrap_or_else(|| panic!("node {} lacks the TTL instance: {all:?}", i + 1));
        assert_eq!(aggregated(e), "passing", "node {}: {e}", i + 1);
    }
    for (i, face) in faces.iter().enumerate() {
        eventually(Duration::from_secs(15), || {
            let all = face.health(&ttl_service, "");
            let e = entry(&all, "127.45.4.2").ok_or(format!("node {} lacks it", i + 1))?;
            (check_status(e, "service:ttl") == Some("critical"))
                .then_some(())
                .ok_or(format!("node {}: {e}", i + 1))
        });
    }
    let took = last_pass.elapsed();
    assert!(
        took >= Duration::from_millis(2500),
        "critical after {took:?}"
    );
    eprintln!("critical on all three {took:?} after the last pass");
    // The persistent one stays passing everywhere.
    for face in &faces {
        let all = face.health(&service, "?passing=true");
        assert!(entry(&all, "127.45.4.1").is_some(), "{all:?}");
        let ttl = face.health(&ttl_service, "?passing=true");
        assert!(entry(&ttl, "127.45.4.2").is_none(), "{ttl:?}");
    }
}

#[test]
fn consul_face_health_by_node_and_by_state() {
    // `/v1/health/node/{node}` (a node is an address) and `/v1/health/state/{state}`: the
    // checks there, each node's `serfHealth` among them; a state that is none is a 400.
    let node = Node::start();
    let c = Consul::new(&node.addr(), &api_token(&node, "public:*:*", "rw"));
    let service = unique("consul-state");
    c.register(
        &json!({"Name": service, "ID": "up", "Address": "127.45.7.1", "Port": 80,
                       "Check": {"TTL": "30s", "Status": "passing"}}),
    );
    c.register(
        &json!({"Name": service, "ID": "down", "Address": "127.45.7.2", "Port": 80,
                       "Check": {"TTL": "30s"}}),
    );
    let checks = |path: &str| -> Vec<(String, String, String)> {
        let mut out: Vec<_> = c
            .get(path)
            .expect(200)
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|k| {
                let s = |f: &str| k[f].as_str().unwrap_or_default().to_string();
                (s("Node"), s("CheckID"), s("Status"))
            })
            .collect();
        out.sort();
        out
    };
    let t = |n: &str, id: &str, st: &str| (n.to_string(), id.to_string(), st.to_string());
    assert_eq!(
        checks("/v1/health/node/127.45.7.1"),
        [
            t("127.45.7.1", "serfHealth", "passing"),
            t("127.45.7.1", "service:up", "passing"),
        ]
    );
    let critical = checks("/v1/health/state/critical");
    assert!(
        critical.contains(&t("127.45.7.2", "service:down", "critical")),
        "{critical:?}"
    );
    assert!(
        !critical.iter().any(|c| c.1 == "service:up"),
        "{critical:?}"
    );
    let passing = checks("/v1/health/state/passing");
    assert!(
        passing.contains(&t("127.45.7.1", "service:up", "passing")),
        "{passing:?}"
    );
    assert!(
        passing.contains(&t("127.45.7.2", "serfHealth", "passing")),
        "{passing:?}"
    );
    assert_eq!(checks("/v1/health/state/any").len(), 4);
    assert!(checks("/v1/health/node/127.45.7.9").is_empty());
    let bad = c.get("/v1/health/state/broken");
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("state"), "{}", bad.body);
}

#[test]
fn consul_face_one_service_holds_ttl_checked_or_persistent_instances_not_both() {
    // As Nacos 2, a service holds ephemeral or persistent instances: a TTL-checked Consul
    // service is ephemeral, a check-less (or HTTP/TCP-checked) one persistent. The second
    // kind is refused with a 400 naming the rule, whichever comes first, and the first
    // stays as it was (README, "Consul": Mixing).
    let node = Node::start();
    let c = Consul::new(&node.addr(), &api_token(&node, "public:*:*", "rw"));
    for (service, first_ttl) in [(unique("consul-mix"), false), (unique("consul-mix"), true)] {
        let ttl = json!({"Name": service, "ID": "ttl", "Address": "127.45.6.1", "Port": 80,
                         "Check": {"TTL": "30s", "Status": "passing"}});
        let plain = json!({"Name": service, "ID": "plain", "Address": "127.45.6.2", "Port": 80});
        let (a, b, first) = if first_ttl {
            (ttl, plain, "ttl")
        } else {
            (plain, ttl, "plain")
        };
        c.register(&a);
        let r = c.put("/v1/agent/service/register", Some(&b));
        assert_eq!(r.status, 400, "the second of {a} then {b}: {}", r.body);
        assert!(
            r.body.contains("persistent") && r.body.contains("ephemeral"),
            "the refusal names the rule: {}",
            r.body
        );
        let ids: Vec<String> = c
            .health(&service, "?passing=true")
            .iter()
            .filter_map(|e| e["Service"]["ID"].as_str().map(str::to_string))
            .collect();
        assert_eq!(ids, [first], "{service}");
    }
}

#[test]
fn consul_face_prometheus_consul_sd_discovers_relabels_and_follows_blocking_queries() {
    // Prometheus' own Consul service discovery (Debian's `prometheus` is built without it):
    // `tests/clients/go-promsd` parses `consul_sd_configs` and `relabel_configs` as
    // prometheus.yml is parsed, runs `discovery/consul` against roster and prints each
    // target group, the targets the relabelling keeps and (-trace) each request and answer.
    let node = Node::start();
    let writer = Consul::new(&node.addr(), &api_token(&node, "public:*:*", "rw"));
    // Prometheus only reads: its token's user may read `public`, nothing more.
    let token = api_token(&node, "public:*:*", "r");
    let service = unique("consul-sd");
    let other = unique("consul-sd-other");
    // Both TTL-checked (a service holds ephemeral or persistent instances, not both): the
    // tagged one passing, the other critical until a first pass that never comes.
    writer.register(
        &json!({"Name": service, "ID": "tagged", "Address": "127.45.5.1",
                            "Port": 9100, "Tags": ["metrics", "team=core"],
                            "Meta": {"env": "test"},
                            "Check": {"TTL": "300s", "Status": "passing"}}),
    );
    writer.register(
        &json!({"Name": service, "ID": "untagged", "Address": "127.45.5.2",
                            "Port": 9, "Tags": ["other"], "Check": {"TTL": "300s"}}),
    );
    writer.register(
        &json!({"Name": other, "ID": "elsewhere", "Address": "127.45.5.3",
                            "Port": 80, "Tags": ["metrics"]}),
    );
    let health = writer.health(&service, "");
    let node_name = health[0]["Node"]["Node"]
        .as_str()
        .expect("Node.Node")
        .to_string();
    let node_address = health[0]["Node"]["Address"].as_str().expect("Node.Address");
    let node_address = node_address.to_string();

    let sd = |datacenter: &str, services: &str| {
        format!(
            "\n      - server: {addr}\n        token: \"{token}\"\n        scheme: http\
             {datacenter}{services}\n        refresh_interval: 1s\n        allow_stale: true",
            addr = node.addr(),
        )
    };
    let relabel = "\n    relabel_configs:\
                   \n      - source_labels: [__meta_consul_tags]\
                   \n        regex: \".*,metrics,.*\"\
                   \n        action: keep\
                   \n      - source_labels: [__meta_consul_service]\
                   \n        target_label: service\
                   \n      - source_labels: [__meta_consul_service_metadata_env]\
                   \n        target_label: env";
    let only = format!("\n        services: [{service}]");
    let config = format!(
        "scrape_configs:\
         \n  - job_name: consul-dc\n    consul_sd_configs:{}{relabel}\
         \n  - job_name: consul-self\n    consul_sd_configs:{}{relabel}\
         \n  - job_name: consul-all\n    consul_sd_configs:{}\n",
        sd("\n        datacenter: dc1", &only),
        // No datacenter: Prometheus asks `/v1/agent/self` for it.
        sd("", &only),
        // No services: Prometheus watches `/v1/catalog/services` (blocking) for them.
        sd("", ""),
    );
    let mut sd = PromSd::start(&config);

    // The initial groups: the service's two instances, labelled as Prometheus labels them.
    let groups = |job: &str, source: &str, sd: &PromSd| -> Option<Value> {
        sd.updates()
            .iter()
            .rev()
            .filter(|u| u["job"] == job)
            .flat_map(|u| u["groups"].as_array().cloned().unwrap_or_default())
            .find(|g| g["source"] == source)
    };
    for job in ["consul-dc", "consul-self", "consul-all"] {
        let group = eventually(Duration::from_secs(30), || {
            sd.read();
            match groups(job, &service, &sd) {
                Some(g) if g["targets"].as_array().map_or(0, Vec::len) == 2 => Ok(g),
                g => Err(format!("{job}: {g:?}\n{}", sd.transcript())),
            }
        });
        let context = format!("{job}: {group}\n{}", sd.transcript());
        assert_eq!(
            group["labels"]["__meta_consul_service"], service,
            "{context}"
        );
        assert_eq!(group["labels"]["__meta_consul_dc"], "dc1", "{context}");
        let target = |id: &str| -> Value {
            group["targets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["__meta_consul_service_id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("no target {id}: {context}"))
        };
        let (tagged, untagged) = (target("tagged"), target("untagged"));
        assert_eq!(tagged["__address__"], "127.45.5.1:9100", "{context}");
        assert_eq!(tagged["__meta_consul_service_address"], "127.45.5.1");
        assert_eq!(tagged["__meta_consul_service_port"], "9100");
        assert_eq!(
            tagged["__meta_consul_tags"], ",metrics,team=core,",
            "{context}"
        );
        assert_eq!(
            tagged["__meta_consul_service_metadata_env"], "test",
            "{context}"
        );
        assert_eq!(tagged["__meta_consul_health"], "passing", "{context}");
        assert_eq!(
            tagged["__meta_consul_node"],
            node_name.as_str(),
            "{context}"
        );
        assert_eq!(tagged["__meta_consul_address"], node_address.as_str());
        assert_eq!(untagged["__address__"], "127.45.5.2:9", "{context}");
        assert_eq!(untagged["__meta_consul_tags"], ",other,", "{context}");
        assert_eq!(untagged["__meta_consul_health"], "critical", "{context}");
        // Meta is what was registered, with each `key=value` tag (roster's rule, README
        // "Consul": What; Consul itself keeps tags out of Meta); none of roster's own
        // (`consul.*`) keys leak in.
        assert_eq!(
            tagged["__meta_consul_service_metadata_team"], "core",
            "{context}"
        );
        for t in [&tagged, &untagged] {
            let meta: Vec<&String> = t
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| k.starts_with("__meta_consul_service_metadata_"))
                .collect();
            let want: &[&str] = if t == &tagged {
                &[
                    "__meta_consul_service_metadata_env",
                    "__meta_consul_service_metadata_team",
                ]
            } else {
                &[]
            };
            assert_eq!(meta, want, "{context}");
            assert!(
                !t.as_object()
                    .unwrap()
                    .keys()
                    .any(|k| k.contains("consul_consul") || k.contains("metadata_consul")),
                "{context}"
            );
        }
    }
    // Without `services`, every service is watched, each its own group.
    let elsewhere = groups("consul-all", &other, &sd)
        .unwrap_or_else(|| panic!("consul-all lacks {other}\n{}", sd.transcript()));
    assert_eq!(elsewhere["targets"][0]["__address__"], "127.45.5.3:80");
    assert_eq!(elsewhere["targets"][0]["__meta_consul_health"], "passing");
    // The relabelling keeps the target tagged `metrics`, labelled from its Meta.
    for job in ["consul-dc", "consul-self"] {
        let kept = sd.kept(job);
        assert_eq!(kept.len(), 1, "{job}: {kept:?}\n{}", sd.transcript());
        assert_eq!(kept[0]["__address__"], "127.45.5.1:9100", "{kept:?}");
        assert_eq!(kept[0]["service"], service, "{kept:?}");
        assert_eq!(kept[0]["env"], "test", "{kept:?}");
        assert_eq!(kept[0]["job"], job, "{kept:?}");
    }
    // The datacenter came from `/v1/agent/self` for the jobs not naming it.
    assert!(
        sd.exchanges()
            .iter()
            .any(|e| e["path"] == "/v1/agent/self" && e["status"] == 200),
        "{}",
        sd.transcript()
    );

    // The watches now block (`index` of the last answer, `wait` 2 minutes). The tagged
    // instance deregistered: each watch of the service returns with a new index and
    // the discoverer emits a group without it, long before any wait could run out.
    std::thread::sleep(Duration::from_secs(4));
    let seen = sd.updates().len();
    let gone = Instant::now();
    writer
        .put("/v1/agent/service/deregister/tagged", None)
        .expect(200);
    for job in ["consul-dc", "consul-self", "consul-all"] {
        eventually(Duration::from_secs(15), || {
            sd.read();
            let updates = sd.updates();
            let later: Vec<&Value> = updates[seen..].iter().filter(|u| u["job"] == job).collect();
            let group = later
                .iter()
                .rev()
                .flat_map(|u| u["groups"].as_array().cloned().unwrap_or_default())
                .find(|g| g["source"] == service.as_str());
            match group {
                Some(g)
                    if g["targets"].as_array().is_some_and(|t| {
                        t.len() == 1 && t[0]["__meta_consul_service_id"] == "untagged"
                    }) =>
                {
                    Ok(())
                }
                g => Err(format!(
                    "{job} after the deregistration: {g:?}\n{}",
                    sd.transcript()
                )),
            }
        });
    }
    let took = gone.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    for job in ["consul-dc", "consul-self"] {
        assert_eq!(
            sd.kept(job),
            Vec::<Value>::new(),
            "{job}\n{}",
            sd.transcript()
        );
    }
    // Prometheus' client blocked: a health watch sent with the index of its last answer
    // waited (a second and more, where an answer takes a millisecond, with no change)
    // and returned with a greater index.
    let woken: Vec<Value> = sd
        .exchanges()
        .into_iter()
        .filter(|e| {
            e["path"] == format!("/v1/health/service/{service}").as_str()
                && e["status"] == 200
                && e["ms"].as_u64().unwrap_or(0) >= 1000
        })
        .collect();
    assert!(woken.len() >= 2, "{}", sd.transcript());
    for e in &woken {
        let query = e["query"].as_str().unwrap_or("");
        let asked: u64 = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("index="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a blocking query without an index: {e}"));
        assert!(query.contains("wait=120000ms"), "{e}");
        let answered: u64 = e["index"]
            .as_str()
            .unwrap_or("")
            .parse()
            .expect("X-Consul-Index");
        assert!(answered > asked, "{e}");
    }
    // The other service did not change: its watch (consul-all) is still blocked.
    let elsewhere_path = format!("/v1/health/service/{other}");
    assert!(
        !sd.exchanges()
            .iter()
            .any(|e| e["path"] == elsewhere_path.as_str()
                && e["query"].as_str().unwrap_or("").contains("index=")),
        "{}",
        sd.transcript()
    );
    // Nothing roster answered made Prometheus' code fail: no error logged, every
    // request answered 200.
    sd.read();
    let failed: Vec<Value> = sd
        .exchanges()
        .into_iter()
        .filter(|e| e["status"] != 200)
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let log = sd.stop();
    assert!(
        !log.lines().any(|l| l.contains("\"level\":\"ERROR\"")),
        "Prometheus' discovery logged errors:\n{log}"
    );
}

/// Prometheus' Consul discovery (`tests/clients/go-promsd`) running on a configuration,
/// its output lines collected as they come.
struct PromSd {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
    stderr: std::path::PathBuf,
}

impl PromSd {
    /// Runs the discovery with `-trace` for at most two minutes (it also stops when
    /// dropped: its stdin closes).
    fn start(config: &str) -> Self {
        let stderr = std::env::temp_dir().join(format!("{}.log", unique("promsd")));
        let mut child = std::process::Command::new(roster_tests::foreign::promsd_bin())
            .args(["-trace", "-for", "120s", "-config", config])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("roster-promsd");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Takes in the lines printed so far.
    fn read(&mut self) {
        while let Ok(v) = self.lines.try_recv() {
            self.seen.push(v);
        }
    }

    /// The discoverer's updates so far, in order.
    fn updates(&self) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|v| v.get("job").is_some())
            .cloned()
            .collect()
    }

    /// The requests the discoverer sent and roster's answers, in order.
    fn exchanges(&self) -> Vec<Value> {
        self.seen
            .iter()
            .filter_map(|v| v.get("http"))
            .cloned()
            .collect()
    }

    /// The targets the relabelling of `job` keeps, from its last update.
    fn kept(&self, job: &str) -> Vec<Value> {
        self.updates()
            .iter()
            .rev()
            .find(|u| u["job"] == job)
            .and_then(|u| u["kept"].as_array().cloned())
            .unwrap_or_default()
    }

    /// Everything so far, for failure messages: exchanges (bodies cut short), updates,
    /// the discoverer's log.
    fn transcript(&self) -> String {
        let mut text = String::new();
        for v in &self.seen {
            let mut v = v.clone();
            if let Some(body) = v["http"]["body"].as_str() {
                let cut: String = body.chars().take(600).collect();
                v["http"]["body"] = Value::String(cut);
            }
            text.push_str(&format!("{v}\n"));
        }
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        format!("{text}-- log:\n{log}")
    }

    /// Stops the program (closing its stdin) and returns its log.
    fn stop(mut self) -> String {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for PromSd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
    }
}
