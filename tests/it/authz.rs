//! Roles and permissions (Nacos-compatible) on every face: a user granted `rw` on
//! namespace A and `r` on namespace B registers, lists and subscribes where allowed
//! and gets 403 elsewhere — over HTTP v1 and v2, roster's `/api/v1/instances` and pick,
//! the event stream, the raw gRPC protocol and the real Python SDKs (HTTP and gRPC).
//! Grants and their revocation reach every node of a cluster within a second, without
//! a new login; a password or role change ends the user's tokens on every node; DNS
//! answers only for `--dns-namespaces`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{
    enc, eventually, free_port, json, unique, workspace_root, Cluster, Node, NodeOptions, Resp,
    Value, ADMIN_PASSWORD,
};

use crate::grpc::{decode, payload, RawClient};

pub(crate) const PASSWORD: &str = "ann-pass-123";
pub(crate) const DENIED: &str = "authorization failed!";

/// Namespaces A (granted `rw`), B (`r`) and C (nothing), a user holding both grants and
/// `r` on the public services named `<shared>*`, and the user's token.
struct World {
    a: String,
    b: String,
    c: String,
    user: String,
    /// Prefix of the public services the user may read.
    shared: String,
    token: String,
}

/// Binds `role` to `user` and grants it `action` on `resource`, as the admin.
pub(crate) fn grant(node: &Node, user: &str, role: &str, resource: &str, action: &str) {
    node.call_form(
        "POST",
        "/nacos/v1/auth/roles",
        &format!("role={role}&username={user}"),
    )
    .expect(200);
    node.call_form(
        "POST",
        "/nacos/v1/auth/permissions",
        &format!("role={role}&resource={}&action={action}", enc(resource)),
    )
    .expect(200);
}

pub(crate) fn login(node: &Node, user: &str, password: &str) -> String {
    node.raw(
        "POST",
        &format!("/nacos/v1/auth/login?username={user}&password={password}"),
        &[],
        None,
    )
    .expect(200)
    .json()["accessToken"]
        .as_str()
        .expect("token")
        .to_string()
}

/// Sets up the world on `node` (roles before the login: binding one ends tokens).
fn world(node: &Node) -> World {
    let (a, b, c) = (unique("authz-a"), unique("authz-b"), unique("authz-c"));
    for ns in [&a, &b, &c] {
        node.call_form(
            "POST",
            "/nacos/v1/console/namespaces",
            &format!("customNamespaceId={ns}&namespaceName={ns}"),
        )
        .expect(200);
    }
    let user = unique("ann");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={PASSWORD}"),
    )
    .expect(200);
    let shared = unique("shared");
    grant(node, &user, &format!("{user}-a"), &format!("{a}:*:*"), "rw");
    grant(node, &user, &format!("{user}-b"), &format!("{b}:*:*"), "r");
    // Nacos' spelling of the public namespace: an empty prefix.
    grant(
        node,
        &user,
        &format!("{user}-p"),
        &format!(":DEFAULT_GROUP:naming/{shared}*"),
        "r",
    );
    let token = login(node, &user, PASSWORD);
    World {
        a,
        b,
        c,
        user,
        shared,
        token,
    }
}

/// A request with `token` as the bearer.
fn with(node: &Node, token: &str, method: &str, path: &str) -> Resp {
    node.raw(
        method,
        path,
        &[("authorization", &format!("Bearer {token}"))],
        None,
    )
}

#[track_caller]
fn denied(resp: Resp) {
    assert_eq!((resp.status, resp.body.as_str()), (403, DENIED));
}

#[track_caller]
fn denied_v2(resp: Resp) {
    assert_eq!(resp.status, 403, "{}", resp.body);
    assert_eq!(
        resp.json(),
        json!({"code": 10001, "message": "access denied", "data": DENIED})
    );
}

fn hosts(v: &Value) -> Vec<String> {
    let mut ips: Vec<String> = v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["ip"].as_str().unwrap().to_string())
        .collect();
    ips.sort();
    ips
}

/// Registers `ip:80` in `service` of `namespace` as the admin.
pub(crate) fn admin_register(node: &Node, namespace: &str, service: &str, ip: &str) {
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?namespaceId={namespace}&serviceName={service}&ip={ip}&port=80"
        ),
    )
    .expect(200);
}

#[test]
fn http_faces_allow_only_what_the_grants_say() {
    let node = Node::start();
    let w = world(&node);
    let (a, b, c, t) = (&w.a, &w.b, &w.c, w.token.as_str());
    let svc = "orders";
    for (ns, ip) in [(b, "127.31.1.1"), (c, "127.31.2.1")] {
        admin_register(&node, ns, svc, ip);
    }
    let at = |ns: &str| format!("namespaceId={ns}&serviceName={svc}");

    // v1 writes: in A only.
    let register = |ns: &str, ip: &str| {
        with(
            &node,
            t,
            "POST",
            &format!("/nacos/v1/ns/instance?{}&ip={ip}&port=80", at(ns)),
        )
    };
    assert_eq!(register(a, "127.31.0.1").expect(200).body, "ok");
    denied(register(b, "127.31.1.2"));
    denied(register(c, "127.31.2.2"));
    denied(register("public", "127.31.3.2"));
    let beat = |ns: &str, ip: &str| {
        with(
            &node,
            t,
            "PUT",
            &format!("/nacos/v1/ns/instance/beat?{}&ip={ip}&port=80", at(ns)),
        )
    };
    beat(a, "127.31.0.1").expect(200);
    denied(beat(b, "127.31.1.1"));
    denied(with(
        &node,
        t,
        "DELETE",
        &format!("/nacos/v1/ns/instance?{}&ip=127.31.1.1&port=80", at(b)),
    ));
    denied(with(
        &node,
        t,
        "PUT",
        &format!(
            "/nacos/v1/ns/instance?{}&ip=127.31.1.1&port=80&weight=5",
            at(b)
        ),
    ));
    denied(with(
        &node,
        t,
        "DELETE",
        &format!("/nacos/v1/ns/service?{}", at(b)),
    ));
    with(
        &node,
        t,
        "POST",
        &format!("/nacos/v1/ns/service?namespaceId={a}&serviceName=made-by-ann"),
    )
    .expect(200);
    // v1 reads: A and B; B's instance is untouched by the refused writes.
    let list = |ns: &str| {
        with(
            &node,
            t,
            "GET",
            &format!("/nacos/v1/ns/instance/list?{}", at(ns)),
        )
    };
    assert_eq!(hosts(&list(a).expect(200).json()), ["127.31.0.1"]);
    let listed_b = list(b).expect(200).json();
    assert_eq!(hosts(&listed_b), ["127.31.1.1"]);
    assert_eq!(listed_b["hosts"][0]["weight"], 1.0);
    denied(list(c));
    denied(list("public"));
    with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/ns/instance?{}&ip=127.31.1.1&port=80", at(b)),
    )
    .expect(200);
    denied(with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/ns/instance?{}&ip=127.31.2.1&port=80", at(c)),
    ));
    denied(with(
        &node,
        t,
        "GET",
        &format!(
            "/nacos/v1/ns/catalog/instances?{}&clusterName=DEFAULT",
            at(c)
        ),
    ));

    // v2: the same, in its envelope.
    let v2 = with(
        &node,
        t,
        "POST",
        &format!("/nacos/v2/ns/instance?{}&ip=127.31.0.2&port=80", at(a)),
    )
    .expect(200)
    .json();
    assert_eq!(v2["code"], 0);
    denied_v2(with(
        &node,
        t,
        "POST",
        &format!("/nacos/v2/ns/instance?{}&ip=127.31.1.3&port=80", at(b)),
    ));
    let v2_list = |ns: &str| {
        with(
            &node,
            t,
            "GET",
            &format!("/nacos/v2/ns/instance/list?{}", at(ns)),
        )
    };
    assert_eq!(
        hosts(&v2_list(b).expect(200).json()["data"]),
        ["127.31.1.1"]
    );
    denied_v2(v2_list(c));

    // roster's own list and pick.
    let ours =
        |route: &str, ns: &str| with(&node, t, "GET", &format!("/api/v1/{route}?{}", at(ns)));
    assert_eq!(
        hosts(&ours("instances", b).expect(200).json()),
        ["127.31.1.1"]
    );
    denied(ours("instances", c));
    assert_eq!(ours("pick", b).expect(200).json()["ip"], "127.31.1.1");
    denied(ours("pick", c));

    // Service lists: a namespace without a grant is refused; in one with a grant on
    // some services, the others are left out.
    let shared = format!("{}-1", w.shared);
    for (name, ip) in [
        (shared.as_str(), "127.31.3.1"),
        ("not-shared", "127.31.3.3"),
    ] {
        admin_register(&node, "public", name, ip);
    }
    let v1_services = |ns: &str| {
        with(
            &node,
            t,
            "GET",
            &format!("/nacos/v1/ns/service/list?pageNo=1&pageSize=100&namespaceId={ns}"),
        )
    };
    assert_eq!(
        v1_services("public").expect(200).json(),
        json!({"count": 1, "doms": [shared]})
    );
    assert_eq!(
        v1_services(b).expect(200).json(),
        json!({"count": 1, "doms": [svc]})
    );
    denied(v1_services(c));
    let v2_services = with(
        &node,
        t,
        "GET",
        "/nacos/v2/ns/service/list?namespaceId=public",
    )
    .expect(200)
    .json();
    assert_eq!(
        v2_services["data"],
        json!({"count": 1, "services": [shared]})
    );
    denied_v2(with(
        &node,
        t,
        "GET",
        &format!("/nacos/v2/ns/service/list?namespaceId={c}"),
    ));
    let catalog = with(
        &node,
        t,
        "GET",
        "/nacos/v1/ns/catalog/services?namespaceId=public&pageNo=1&pageSize=100",
    )
    .expect(200)
    .json();
    assert_eq!(catalog["count"], 1);
    assert_eq!(catalog["serviceList"][0]["name"], shared.as_str());
    denied(with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/ns/catalog/services?namespaceId={c}"),
    ));
    // ... and a service of the public namespace outside the grant is refused.
    with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={shared}"),
    )
    .expect(200);
    denied(with(
        &node,
        t,
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=not-shared",
    ));

    // The namespace list: only those the user may read something of.
    let namespaces = with(&node, t, "GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    let mut ids: Vec<&str> = namespaces["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![a.as_str(), b.as_str(), "public"];
    want.sort();
    assert_eq!(ids, want);
    with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/console/namespaces?show=all&namespaceId={b}"),
    )
    .expect(200);
    denied(with(
        &node,
        t,
        "GET",
        &format!("/nacos/v1/console/namespaces?show=all&namespaceId={c}"),
    ));

    // UDP push subscriptions follow read permission at subscribe time.
    let agent = [
        ("authorization", format!("Bearer {t}")),
        ("user-agent", "Nacos-Java-Client:v1.4.6".to_string()),
    ];
    let agent: Vec<(&str, &str)> = agent.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    for (ns, status) in [(b, 200), (c, 403)] {
        let path = format!(
            "/nacos/v1/ns/instance/list?{}&udpPort={port}&clientIP=127.0.0.1",
            at(ns)
        );
        node.raw("GET", &path, &agent, None).expect(status);
    }
    let subscribers = |ns: &str| {
        node.call(
            "GET",
            &format!("/nacos/v1/ns/service/subscribers?{}", at(ns)),
        )
        .expect(200)
        .json()["count"]
            .clone()
    };
    assert_eq!((subscribers(b), subscribers(c)), (json!(1), json!(0)));

    // Management is for admins; the cluster's shape and the probes are for everyone.
    for (method, path) in [
        ("GET", "/nacos/v1/auth/users"),
        ("GET", "/nacos/v1/auth/users/search?username=a"),
        ("GET", "/nacos/v1/auth/roles"),
        ("GET", "/nacos/v1/auth/roles/search?role=a"),
        ("GET", "/nacos/v1/auth/permissions"),
        ("POST", "/nacos/v1/auth/roles?role=x&username=nacos"),
        (
            "POST",
            "/nacos/v1/console/namespaces?customNamespaceId=x&namespaceName=x",
        ),
        (
            "DELETE",
            &format!("/nacos/v1/console/namespaces?namespaceId={a}"),
        ),
        (
            "GET",
            "/nacos/v1/console/namespaces?checkNamespaceIdExist=true&customNamespaceId=x",
        ),
        ("POST", "/api/v1/cluster/members?id=9&peer=127.0.0.1:1"),
        ("GET", "/api/v1/sync/tasks"),
        ("GET", "/api/v1/clients"),
        ("POST", "/api/v1/auth/rotate-key"),
    ] {
        let r = with(&node, t, method, path);
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
    }
    for path in [
        "/api/v1/cluster",
        "/nacos/v1/ns/operator/metrics",
        "/nacos/v1/core/cluster/nodes",
    ] {
        with(&node, t, "GET", path).expect(200);
    }
}

/// An event stream as `token`; the status line read.
fn open_stream(node: &Node, query: &str, token: &str) -> (u16, BufReader<TcpStream>) {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /api/v1/events?{query}&accessToken={token} HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let code = status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, reader)
}

/// The next event's name and data; `None` when the stream ended (the last chunk).
fn next_event(reader: &mut BufReader<TcpStream>) -> Option<(String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut name = None;
    while Instant::now() < deadline {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("a line within 10 s") == 0 || line == "0\r\n" {
            return None;
        }
        if let Some(n) = line.strip_prefix("event: ") {
            name = Some(n.trim().to_string());
        } else if let (Some(n), Some(data)) = (&name, line.strip_prefix("data: ")) {
            return Some((n.clone(), serde_json::from_str(data.trim()).expect("JSON")));
        }
    }
    panic!("no event within 10 s");
}

#[test]
fn the_event_stream_shows_only_readable_services_and_ends_with_the_token() {
    let node = Node::start();
    let w = world(&node);
    let (status, _) = open_stream(&node, &format!("namespaceId={}", w.c), &w.token);
    assert_eq!(status, 403, "a stream of a namespace without a grant");
    let (status, mut stream) = open_stream(&node, "kinds=service,namespace", &w.token);
    assert_eq!(status, 200);
    // A change in C is not shown; the one in A after it is the next event.
    admin_register(&node, &w.c, "evt", "127.33.2.1");
    admin_register(&node, &w.a, "evt", "127.33.0.1");
    loop {
        let (name, data) = next_event(&mut stream).expect("an event");
        if name != "service" {
            continue;
        }
        assert_eq!(
            data,
            json!({"namespaceId": w.a, "groupName": "DEFAULT_GROUP", "serviceName": "evt"})
        );
        break;
    }
    // A new password ends the user's tokens, and the stream opened with one.
    node.call_form(
        "PUT",
        "/nacos/v1/auth/users",
        &format!("username={}&newPassword=ann-pass-456", w.user),
    )
    .expect(200);
    admin_register(&node, &w.a, "evt", "127.33.0.2");
    let deadline = Instant::now() + Duration::from_secs(5);
    while next_event(&mut stream).is_some() {
        assert!(Instant::now() < deadline, "the stream still runs");
    }
}

pub(crate) fn grpc_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) async fn ask(
    c: &mut RawClient,
    kind: &str,
    body: Value,
    token: &str,
) -> (String, Value) {
    decode(
        &c.try_unary(payload(kind, &body, Some(token)))
            .await
            .expect("unary"),
    )
}

pub(crate) fn instance_body(ns: &str, service: &str, kind: &str, ip: &str) -> Value {
    json!({"namespace": ns, "serviceName": service, "groupName": "DEFAULT_GROUP", "type": kind,
           "instance": {"ip": ip, "port": 80, "weight": 1.0, "healthy": true, "enabled": true,
                        "ephemeral": true, "clusterName": "DEFAULT", "metadata": {}}})
}

pub(crate) fn query_body(ns: &str, service: &str) -> Value {
    json!({"namespace": ns, "serviceName": service, "groupName": "DEFAULT_GROUP", "cluster": "",
           "healthyOnly": false, "subscribe": true, "clusters": ""})
}

#[test]
fn grpc_requests_allow_only_what_the_grants_say() {
    let node = Node::start();
    let w = world(&node);
    let (a, b, c, t) = (w.a.clone(), w.b.clone(), w.c.clone(), w.token.clone());
    admin_register(&node, &b, "grpc-svc", "127.34.1.1");
    admin_register(&node, &c, "grpc-svc", "127.34.2.1");
    let addr = format!("127.0.0.1:{}", node.http_port + 1000);
    grpc_runtime().block_on(async {
        let mut cl = RawClient::connect(&addr).await;
        cl.open_stream().await;
        cl.send(
            "ConnectionSetupRequest",
            json!({"clientVersion": "Roster-Test:v1", "tenant": "", "labels": {}, "abilityTable": {}}),
        )
        .await;
        cl.expect("SetupAckRequest", Duration::from_secs(5)).await;
        let refused = |(kind, body): (String, Value), want: &str| {
            assert_eq!(kind, want, "{body}");
            assert_eq!(
                (body["errorCode"].clone(), body["message"].clone(), body["success"].clone()),
                (json!(403), json!(DENIED), json!(false)),
                "{body}"
            );
        };
        // Register: A only.
        let (kind, body) = ask(&mut cl, "InstanceRequest", instance_body(&a, "grpc-svc", "registerInstance", "127.34.0.1"), &t).await;
        assert_eq!((kind.as_str(), body["success"].clone()), ("InstanceResponse", json!(true)), "{body}");
        for ns in [&b, &c] {
            let r = ask(&mut cl, "InstanceRequest", instance_body(ns, "grpc-svc", "registerInstance", "127.34.9.1"), &t).await;
            refused(r, "InstanceResponse");
            let r = ask(&mut cl, "InstanceRequest", instance_body(ns, "grpc-svc", "deregisterInstance", "127.34.9.1"), &t).await;
            refused(r, "InstanceResponse");
            let r = ask(&mut cl, "PersistentInstanceRequest", instance_body(ns, "grpc-svc", "registerInstance", "127.34.9.2"), &t).await;
            refused(r, "InstanceResponse");
            let mut batch = instance_body(ns, "grpc-svc", "batchRegisterInstance", "127.34.9.3");
            batch["instances"] = json!([batch["instance"].clone()]);
            let r = ask(&mut cl, "BatchInstanceRequest", batch, &t).await;
            refused(r, "BatchInstanceResponse");
        }
        // Query and subscribe: A and B.
        let (kind, body) = ask(&mut cl, "ServiceQueryRequest", query_body(&b, "grpc-svc"), &t).await;
        assert_eq!(kind, "QueryServiceResponse", "{body}");
        assert_eq!(body["serviceInfo"]["hosts"][0]["ip"], "127.34.1.1");
        refused(ask(&mut cl, "ServiceQueryRequest", query_body(&c, "grpc-svc"), &t).await, "QueryServiceResponse");
        refused(ask(&mut cl, "SubscribeServiceRequest", query_body(&c, "grpc-svc"), &t).await, "SubscribeServiceResponse");
        let (kind, body) = ask(&mut cl, "SubscribeServiceRequest", query_body(&b, "grpc-svc"), &t).await;
        assert_eq!((kind.as_str(), body["success"].clone()), ("SubscribeServiceResponse", json!(true)), "{body}");
        // The subscription is pushed what the admin adds in B.
        admin_register(&node, &b, "grpc-svc", "127.34.1.2");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let push = cl.expect("NotifySubscriberRequest", deadline.saturating_duration_since(Instant::now())).await;
            if push["serviceInfo"]["hosts"].as_array().unwrap().len() == 2 {
                break;
            }
        }
        // Service lists: refused without a grant (with the reply's fields, which SDKs
        // parse before the code), filtered in the public namespace.
        let list = |ns: &str| json!({"namespace": ns, "groupName": "DEFAULT_GROUP", "serviceName": "", "pageNo": 1, "pageSize": 100});
        let (kind, body) = ask(&mut cl, "ServiceListRequest", list(&c), &t).await;
        assert_eq!((kind.as_str(), body["errorCode"].clone(), body["count"].clone(), body["serviceNames"].clone()),
                   ("ServiceListResponse", json!(403), json!(0), json!([])), "{body}");
        let (_, body) = ask(&mut cl, "ServiceListRequest", list(&b), &t).await;
        assert_eq!(body["serviceNames"], json!(["grpc-svc"]));
        let shared = format!("{}-g", w.shared);
        admin_register(&node, "public", &shared, "127.34.3.1");
        admin_register(&node, "public", "grpc-hidden", "127.34.3.2");
        let (_, body) = ask(&mut cl, "ServiceListRequest", list("public"), &t).await;
        assert_eq!((body["count"].clone(), body["serviceNames"].clone()), (json!(1), json!([shared])));

        // The grant taken back: the next request on the same connection is refused.
        node.call("DELETE", &format!("/nacos/v1/auth/permissions?role={}-b&resource={}&action=r", w.user, enc(&format!("{b}:*:*")))).expect(200);
        refused(ask(&mut cl, "ServiceQueryRequest", query_body(&b, "grpc-svc"), &t).await, "QueryServiceResponse");
        let (kind, _) = ask(&mut cl, "ServiceQueryRequest", query_body(&a, "grpc-svc"), &t).await;
        assert_eq!(kind, "QueryServiceResponse");
    });
}

fn python(dir: &str) -> std::path::PathBuf {
    let python = workspace_root().join(format!("tests/clients/{dir}/.venv/bin/python"));
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    python
}

/// Runs a client script; its JSON lines by (op, namespace).
fn run_script(mut cmd: Command, what: &str) -> BTreeMap<(String, String), Value> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the {what} script ({e}); run scripts/test"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{what}:\n{stdout}");
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            let key = (
                v["op"].as_str().unwrap_or("").to_string(),
                v["namespace"].as_str().unwrap_or("").to_string(),
            );
            (key, v)
        })
        .collect()
}

/// Asserts what each operation got in each namespace: `(op, [A, B, C])`, `None` for an
/// operation the script does not get to.
#[track_caller]
fn expect_outcomes(
    lines: &BTreeMap<(String, String), Value>,
    w: &World,
    expected: &[(&str, [Option<bool>; 3])],
) {
    for (op, per_namespace) in expected {
        for (ns, want) in [&w.a, &w.b, &w.c].into_iter().zip(per_namespace) {
            let line = lines.get(&(op.to_string(), ns.to_string()));
            match want {
                None => assert!(line.is_none(), "{op} in {ns}: {line:?}"),
                Some(allowed) => {
                    let line = line.unwrap_or_else(|| panic!("no {op} line for {ns}"));
                    assert_eq!(line["allowed"], *allowed, "{op} in {ns}: {line}");
                }
            }
        }
    }
    assert!(lines.contains_key(&("done".to_string(), String::new())));
}

#[test]
fn python_sdk_over_http_is_allowed_only_what_the_grants_say() {
    let node = Node::start();
    let w = world(&node);
    let service = "py-authz";
    let mut cmd = Command::new(python("python"));
    cmd.arg(workspace_root().join("tests/clients/python/authz_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", &w.user, "--password", PASSWORD])
        .args(["--admin-password", ADMIN_PASSWORD, "--service", service])
        .args(["--namespaces", &format!("{},{},{}", w.a, w.b, w.c)]);
    let lines = run_script(cmd, "nacos-sdk-python 0.1.16");
    let (yes, no) = (Some(true), Some(false));
    expect_outcomes(
        &lines,
        &w,
        &[
            ("login", [yes, yes, yes]),
            ("register", [yes, no, no]),
            ("beat", [yes, no, no]),
            ("list", [yes, yes, no]),
            ("subscribe", [yes, yes, no]),
            ("subscribe_added", [yes, yes, None]),
            ("deregister", [yes, no, no]),
        ],
    );
    // Every refusal was the 403 the SDK words as "Insufficient privilege.".
    for ((op, ns), line) in &lines {
        if line["allowed"] == false {
            assert_eq!(line["refused"], true, "{op} in {ns}: {line}");
        }
    }
    let listed = &lines[&("list".to_string(), w.a.clone())]["detail"];
    assert_eq!(
        *listed,
        json!(["127.21.0.1"]),
        "the user's own instance in A"
    );
}

#[test]
fn python_3_sdk_over_grpc_is_allowed_only_what_the_grants_say() {
    let node = Node::start();
    let w = world(&node);
    let service = "py3-authz";
    admin_register(&node, &w.b, service, "127.71.9.1");
    let mut cmd = Command::new(python("python3"));
    cmd.arg(workspace_root().join("tests/clients/python3/authz_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", &w.user, "--password", PASSWORD])
        .args(["--admin-password", ADMIN_PASSWORD, "--service", service])
        .args(["--namespaces", &format!("{},{},{}", w.a, w.b, w.c)]);
    let lines = run_script(cmd, "nacos-sdk-python 3.x");
    let (yes, no) = (Some(true), Some(false));
    expect_outcomes(
        &lines,
        &w,
        &[
            ("connect", [yes, yes, yes]),
            ("register", [yes, no, no]),
            ("list", [yes, yes, no]),
            ("subscribe", [yes, yes, no]),
            ("push", [yes, yes, None]),
            ("list_services", [yes, yes, no]),
            ("deregister", [yes, no, no]),
        ],
    );
    for ((op, ns), line) in &lines {
        if line["allowed"] == false {
            assert_eq!(line["code"], 403, "{op} in {ns}: {line}");
        }
    }
    let get = |op: &str, ns: &str| lines[&(op.to_string(), ns.to_string())]["detail"].clone();
    assert_eq!(get("list_hosts", &w.b), json!(["127.71.9.1"]));
    assert_eq!(get("service_names", &w.b), json!([service]));
}

/// What `token` gets for a list in `namespace` on each node.
fn statuses(c: &Cluster, token: &str, namespace: &str) -> Vec<u16> {
    c.nodes
        .iter()
        .map(|n| {
            with(
                n,
                token,
                "GET",
                &format!("/nacos/v1/ns/instance/list?namespaceId={namespace}&serviceName=s"),
            )
            .status
        })
        .collect()
}

/// Waits until every node answers `want`, at most one second after `since`.
#[track_caller]
fn everywhere_within_a_second(
    c: &Cluster,
    token: &str,
    namespace: &str,
    want: u16,
    since: Instant,
) {
    let left = Duration::from_secs(1).saturating_sub(since.elapsed());
    eventually(left.max(Duration::from_millis(1)), || {
        let got = statuses(c, token, namespace);
        if got.iter().all(|s| *s == want) {
            Ok(())
        } else {
            Err(format!("{got:?}, want {want} everywhere"))
        }
    });
    eprintln!(
        "{want} on every node {:?} after the change",
        since.elapsed()
    );
}

#[test]
fn grants_and_revocations_reach_every_node_within_a_second() {
    let c = Cluster::start(3, &[]);
    let leader = c.leader();
    let through = &c.nodes[(leader + 1) % 3];
    let w = world(through);
    // The setup (through a follower) reaches every node.
    eventually(Duration::from_secs(5), || {
        let got = statuses(&c, &w.token, &w.b);
        if got == [200, 200, 200] {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    });
    assert_eq!(statuses(&c, &w.token, &w.c), [403, 403, 403]);
    let resource = format!(
        "role={}-b&resource={}&action=r",
        w.user,
        enc(&format!("{}:*:*", w.b))
    );
    // Taken back through one node: refused on all, the same token.
    let since = Instant::now();
    through
        .call("DELETE", &format!("/nacos/v1/auth/permissions?{resource}"))
        .expect(200);
    everywhere_within_a_second(&c, &w.token, &w.b, 403, since);
    // Granted again through another: allowed on all, without a new login.
    let since = Instant::now();
    c.nodes[leader]
        .call_form("POST", "/nacos/v1/auth/permissions", &resource)
        .expect(200);
    everywhere_within_a_second(&c, &w.token, &w.b, 200, since);
}

#[test]
fn a_password_or_role_change_ends_the_users_tokens_on_every_node() {
    let c = Cluster::start(3, &[]);
    let w = world(&c.nodes[0]);
    eventually(Duration::from_secs(5), || {
        let got = statuses(&c, &w.token, &w.a);
        if got == [200, 200, 200] {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    });
    let own = |node: &Node, token: &str, form: &str| {
        node.raw(
            "PUT",
            &format!("/nacos/v1/auth/users?username={}&{form}", w.user),
            &[("authorization", &format!("Bearer {token}"))],
            None,
        )
    };
    // A user changing their own password gives the current one; a refusal changes
    // nothing.
    let r = own(&c.nodes[1], &w.token, "newPassword=ann-pass-456");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'oldPassword' is required.")
    );
    own(
        &c.nodes[1],
        &w.token,
        "newPassword=ann-pass-456&oldPassword=wrong-pass-1",
    )
    .expect(403);
    // Nor may they change anyone else's.
    c.nodes[1]
        .raw(
            "PUT",
            "/nacos/v1/auth/users?username=nacos&newPassword=stolen-pass-1&oldPassword=x",
            &[("authorization", &format!("Bearer {}", w.token))],
            None,
        )
        .expect(403);
    assert_eq!(statuses(&c, &w.token, &w.a), [200, 200, 200]);

    let since = Instant::now();
    own(
        &c.nodes[1],
        &w.token,
        &format!("newPassword=ann-pass-456&oldPassword={PASSWORD}"),
    )
    .expect(200);
    everywhere_within_a_second(&c, &w.token, &w.a, 403, since);
    let r = with(&c.nodes[2], &w.token, "GET", "/api/v1/cluster");
    assert_eq!((r.status, r.body.as_str()), (403, "token invalid!"));
    // The new password logs in on every node, and its token works everywhere.
    let fresh = eventually(Duration::from_secs(2), || {
        let r = c.nodes[2].raw(
            "POST",
            &format!(
                "/nacos/v1/auth/login?username={}&password=ann-pass-456",
                w.user
            ),
            &[],
            None,
        );
        match r.status {
            200 => Ok(r.json()["accessToken"].as_str().unwrap().to_string()),
            s => Err(format!("{s}: {}", r.body)),
        }
    });
    everywhere_within_a_second(&c, &fresh, &w.a, 200, Instant::now());

    // A change of the user's roles ends their tokens too.
    let since = Instant::now();
    c.nodes[0]
        .call_form(
            "POST",
            "/nacos/v1/auth/roles",
            &format!("role={}-x&username={}", w.user, w.user),
        )
        .expect(200);
    everywhere_within_a_second(&c, &fresh, &w.a, 403, since);
    // An admin changes it without the old one (Nacos' way), which ends the tokens too.
    let newer = login(&c.nodes[0], &w.user, "ann-pass-456");
    let since = Instant::now();
    c.nodes[2]
        .call_form(
            "PUT",
            "/nacos/v1/auth/users",
            &format!("username={}&newPassword=ann-pass-789", w.user),
        )
        .expect(200);
    everywhere_within_a_second(&c, &newer, &w.a, 403, since);
}

#[test]
fn roles_and_permissions_api() {
    let node = Node::start();
    let w = world(&node);
    let role_a = format!("{}-a", w.user);
    // Pages of bindings; admins hold ROLE_ADMIN.
    let page = node
        .call(
            "GET",
            &format!(
                "/nacos/v1/auth/roles?pageNo=1&pageSize=10&username={}",
                w.user
            ),
        )
        .expect(200)
        .json();
    assert_eq!(page["totalCount"], 3);
    assert_eq!(
        page["pageItems"][0],
        json!({"role": role_a, "username": w.user})
    );
    let admins = node
        .call(
            "GET",
            "/nacos/v1/auth/roles?role=ROLE_ADMIN&search=accurate",
        )
        .expect(200)
        .json();
    assert_eq!(
        admins,
        json!({"totalCount": 1, "pageNumber": 1, "pagesAvailable": 1,
               "pageItems": [{"role": "ROLE_ADMIN", "username": "nacos"}]})
    );
    let blur = node
        .call(
            "GET",
            &format!(
                "/nacos/v1/auth/roles?search=blur&role={}&pageNo=2&pageSize=2",
                w.user
            ),
        )
        .expect(200)
        .json();
    assert_eq!(
        (blur["totalCount"].clone(), blur["pagesAvailable"].clone()),
        (json!(3), json!(2))
    );
    assert_eq!(blur["pageItems"].as_array().unwrap().len(), 1);
    let names = node
        .call(
            "GET",
            &format!("/nacos/v1/auth/roles/search?role={}", w.user),
        )
        .expect(200)
        .json();
    assert_eq!(
        names,
        json!([role_a, format!("{}-b", w.user), format!("{}-p", w.user)])
    );
    let users = node
        .call(
            "GET",
            &format!("/nacos/v1/auth/users/search?username={}", w.user),
        )
        .expect(200)
        .json();
    assert_eq!(users, json!([w.user]));

    // Permissions: pages by role, the duplicate check, refusals that change nothing.
    let perms = node
        .call(
            "GET",
            &format!("/nacos/v1/auth/permissions?role={role_a}&pageNo=1&pageSize=10"),
        )
        .expect(200)
        .json();
    assert_eq!(
        perms,
        json!({"totalCount": 1, "pageNumber": 1, "pagesAvailable": 1,
               "pageItems": [{"role": role_a, "resource": format!("{}:*:*", w.a), "action": "rw"}]})
    );
    let duplicate = |resource: &str, action: &str| {
        node.call(
            "GET",
            &format!(
                "/nacos/v1/auth/permissions?role={role_a}&resource={}&action={action}",
                enc(resource)
            ),
        )
        .expect(200)
        .json()
    };
    assert_eq!(
        duplicate(&format!("{}:*:*", w.a), "rw"),
        json!({"code": 0, "message": "success", "data": true})
    );
    assert_eq!(duplicate(&format!("{}:*:*", w.a), "r")["data"], false);
    let add = |form: &str| node.call_form("POST", "/nacos/v1/auth/permissions", form);
    assert_eq!(
        add(&format!(
            "role={role_a}&resource={}&action=rw",
            enc(&format!("{}:*:*", w.a))
        ))
        .status,
        409
    );
    assert_eq!(add("role=no-such-role&resource=x:*:*&action=r").status, 404);
    assert_eq!(
        add(&format!("role={role_a}&resource=justaname&action=r")).status,
        400
    );
    assert_eq!(
        add(&format!("role={role_a}&resource=x:*:*&action=write")).status,
        400
    );
    assert_eq!(add("role=ROLE_ADMIN&resource=x:*:*&action=r").status, 400);
    assert_eq!(add("role=bad%20role&resource=x:*:*&action=r").status, 400);
    let total = |path: &str| node.call("GET", path).expect(200).json()["totalCount"].clone();
    assert_eq!(total("/nacos/v1/auth/permissions"), 3);
    node.call(
        "DELETE",
        &format!(
            "/nacos/v1/auth/permissions?role={role_a}&resource={}&action=r",
            enc(&format!("{}:*:*", w.a))
        ),
    )
    .expect(404);
    // Roles: duplicates, unknown users and unbinding.
    let bind = |form: &str| node.call_form("POST", "/nacos/v1/auth/roles", form);
    assert_eq!(
        bind(&format!("role={role_a}&username={}", w.user)).status,
        409
    );
    assert_eq!(bind("role=r1&username=nobody").status, 404);
    assert_eq!(bind("role=&username=nacos").status, 400);
    node.call(
        "DELETE",
        &format!("/nacos/v1/auth/roles?role={role_a}&username=nacos"),
    )
    .expect(404);
    let r = node
        .call(
            "DELETE",
            &format!("/nacos/v1/auth/roles?role={role_a}&username={}", w.user),
        )
        .expect(200)
        .json();
    assert_eq!(
        r,
        json!({"code": 200, "message": null, "data": format!("delete role of user {} ok!", w.user)})
    );
    node.call("DELETE", &format!("/nacos/v1/auth/roles?role={}-b", w.user))
        .expect(200);
    assert_eq!(
        total(&format!("/nacos/v1/auth/roles?username={}", w.user)),
        1
    );
    // The role's permissions stay, for when it is bound again.
    assert_eq!(total("/nacos/v1/auth/permissions"), 3);

    // ROLE_ADMIN: granted through the API it makes an admin; the last admin keeps it.
    let r = node.call(
        "DELETE",
        "/nacos/v1/auth/roles?role=ROLE_ADMIN&username=nacos",
    );
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "cannot delete admin: nacos")
    );
    bind(&format!("role=ROLE_ADMIN&username={}", w.user)).expect(200);
    let token = login(&node, &w.user, PASSWORD);
    with(&node, &token, "GET", "/nacos/v1/auth/users").expect(200);
    with(
        &node,
        &token,
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?namespaceId={}&serviceName=x",
            w.c
        ),
    )
    .expect(200);
    node.call(
        "DELETE",
        &format!("/nacos/v1/auth/roles?role=ROLE_ADMIN&username={}", w.user),
    )
    .expect(200);
    // ... and taking it ends that admin's tokens.
    assert_eq!(
        with(&node, &token, "GET", "/nacos/v1/auth/users").status,
        403
    );
    // Deleting a user drops their roles.
    node.call(
        "DELETE",
        &format!("/nacos/v1/auth/users?username={}", w.user),
    )
    .expect(200);
    assert_eq!(
        total(&format!("/nacos/v1/auth/roles?username={}", w.user)),
        0
    );
}

/// The response code and answer count of an A query for `name` at `port`.
fn dns_query(port: u16, name: &str) -> (u8, u16) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    socket.send_to(&q, ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 1500];
    let (n, _) = socket.recv_from(&mut buf).expect("a DNS answer");
    assert!(
        n >= 12 && buf[..2] == [0x12, 0x34],
        "an answer to the query"
    );
    (buf[3] & 0x0f, u16::from_be_bytes([buf[6], buf[7]]))
}

#[test]
fn dns_answers_only_for_its_namespaces() {
    const NOERROR: u8 = 0;
    const NXDOMAIN: u8 = 3;
    let dev = unique("dnsdev");
    let start = |extra: &[&str]| {
        let port = free_port();
        let mut args = vec!["--dns".to_string(), format!("127.0.0.1:{port}")];
        args.extend(extra.iter().map(|a| a.to_string()));
        let node = Node::start_with(NodeOptions {
            args,
            ..Default::default()
        });
        admin_register(&node, "public", "web", "127.35.0.1");
        admin_register(&node, &dev, "api", "127.35.1.1");
        (node, port)
    };
    let in_dev = format!("api.default_group.{dev}.roster");
    // The default: public only; the name in another namespace does not exist.
    let (_default, port) = start(&[]);
    assert_eq!(dns_query(port, "web.roster"), (NOERROR, 1));
    assert_eq!(dns_query(port, &in_dev), (NXDOMAIN, 0));
    // Named: those namespaces.
    let (_both, port) = start(&["--dns-namespaces", &format!("public,{dev}")]);
    assert_eq!(dns_query(port, "web.roster"), (NOERROR, 1));
    assert_eq!(dns_query(port, &in_dev), (NOERROR, 1));
    let (_dev_only, port) = start(&["--dns-namespaces", &dev]);
    assert_eq!(dns_query(port, "web.roster"), (NXDOMAIN, 0));
    assert_eq!(dns_query(port, &in_dev), (NOERROR, 1));
}

/// A request with `token` in the `accessToken` header, where Nacos 3's maintainer client
/// puts it.
fn with_header(node: &Node, token: &str, method: &str, path: &str) -> Resp {
    node.raw(method, path, &[("accesstoken", token)], None)
}

#[track_caller]
fn denied_v3(resp: Resp) {
    assert_eq!(resp.status, 403, "{}", resp.body);
    assert_eq!(resp.json()["code"], json!(10001), "{}", resp.body);
}

#[test]
fn v3_routes_allow_only_what_the_grants_say() {
    let node = Node::start();
    let w = world(&node);
    let (a, b, c, t) = (&w.a, &w.b, &w.c, w.token.as_str());
    let svc = "orders";
    for (ns, ip) in [(b, "127.32.1.1"), (c, "127.32.2.1")] {
        admin_register(&node, ns, svc, ip);
    }
    let at = |ns: &str| format!("namespaceId={ns}&groupName=DEFAULT_GROUP&serviceName={svc}");

    // Without a token: 401 in the envelope; the state probes are open.
    let anonymous = node.raw(
        "GET",
        &format!("/nacos/v3/client/ns/instance/list?{}", at(b)),
        &[],
        None,
    );
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    for path in [
        "/nacos/v3/admin/core/state",
        "/nacos/v3/admin/core/state/liveness",
        "/nacos/v3/admin/core/state/readiness",
    ] {
        node.raw("GET", path, &[], None).expect(200);
    }

    // Writes, client and admin API: in A only.
    for path in [
        "/nacos/v3/client/ns/instance",
        "/nacos/v3/admin/ns/instance",
    ] {
        let register = |ns: &str, ip: &str| {
            with_header(
                &node,
                t,
                "POST",
                &format!("{path}?{}&ip={ip}&port=80", at(ns)),
            )
        };
        assert_eq!(
            register(a, "127.32.0.1").expect(200).json()["code"],
            json!(0)
        );
        denied_v3(register(b, "127.32.1.2"));
        denied_v3(register(c, "127.32.2.2"));
        denied_v3(register("public", "127.32.3.2"));
        denied_v3(with_header(
            &node,
            t,
            "DELETE",
            &format!("{path}?{}&ip=127.32.1.1&port=80", at(b)),
        ));
    }
    for (method, path) in [
        ("POST", "/nacos/v3/admin/ns/service"),
        ("PUT", "/nacos/v3/admin/ns/service"),
        ("DELETE", "/nacos/v3/admin/ns/service"),
        ("PUT", "/nacos/v3/admin/ns/instance/partial"),
        ("PUT", "/nacos/v3/admin/ns/health/instance"),
        ("PUT", "/nacos/v3/admin/ns/cluster"),
    ] {
        denied_v3(with_header(
            &node,
            t,
            method,
            &format!(
                "{path}?{}&ip=127.32.1.1&port=80&healthy=false&clusterName=DEFAULT",
                at(b)
            ),
        ));
    }
    // Reads: A and B; B's instance untouched by the refused writes.
    for path in [
        "/nacos/v3/client/ns/instance/list",
        "/nacos/v3/admin/ns/instance/list",
    ] {
        let list = |ns: &str| with_header(&node, t, "GET", &format!("{path}?{}", at(ns)));
        let listed = list(b).expect(200).json();
        let ips: Vec<&str> = listed["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: {listed}"))
            .iter()
            .map(|i| i["ip"].as_str().unwrap())
            .collect();
        assert_eq!(ips, ["127.32.1.1"], "{path}");
        list(a).expect(200);
        denied_v3(list(c));
    }
    denied_v3(with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/ns/service?{}", at(c)),
    ));
    with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/ns/service/list?namespaceId={b}"),
    )
    .expect(200);
    denied_v3(with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/ns/service/list?namespaceId={c}"),
    ));

    // Configuration: the item named by namespaceId, groupName, dataId.
    let item = |ns: &str| format!("namespaceId={ns}&groupName=g&dataId=app.yaml");
    for ns in [b, c] {
        node.call_form(
            "POST",
            "/nacos/v3/admin/cs/config",
            &format!("{}&content=from-admin", item(ns)),
        )
        .expect(200);
    }
    let publish = |ns: &str| {
        with_header(
            &node,
            t,
            "POST",
            &format!("/nacos/v3/admin/cs/config?{}&content=by-ann", item(ns)),
        )
    };
    publish(a).expect(200);
    denied_v3(publish(b));
    denied_v3(publish(c));
    denied_v3(with_header(
        &node,
        t,
        "DELETE",
        &format!("/nacos/v3/admin/cs/config?{}", item(b)),
    ));
    for path in ["/nacos/v3/admin/cs/config", "/nacos/v3/client/cs/config"] {
        let read = with_header(&node, t, "GET", &format!("{path}?{}", item(b)))
            .expect(200)
            .json();
        assert_eq!(
            read["data"]["content"],
            json!("from-admin"),
            "{path}: {read}"
        );
        denied_v3(with_header(&node, t, "GET", &format!("{path}?{}", item(c))));
    }
    denied_v3(with_header(
        &node,
        t,
        "GET",
        &format!(
            "/nacos/v3/admin/cs/history/list?{}&pageNo=1&pageSize=10",
            item(c)
        ),
    ));
    denied_v3(with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/cs/config/list?namespaceId={c}&pageNo=1&pageSize=10"),
    ));

    // Namespaces: listed as far as readable; one of them shown only if readable.
    let spaces = with_header(&node, t, "GET", "/nacos/v3/admin/core/namespace/list")
        .expect(200)
        .json();
    let mut ids: Vec<&str> = spaces["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{spaces}"))
        .iter()
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![a.as_str(), b.as_str(), "public"];
    want.sort();
    assert_eq!(ids, want);
    with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/core/namespace?namespaceId={b}"),
    )
    .expect(200);
    denied_v3(with_header(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/admin/core/namespace?namespaceId={c}"),
    ));

    // Management is for admins; the cluster's shape is for everyone.
    for (method, path) in [
        ("GET", "/nacos/v3/auth/user/list?pageNo=1&pageSize=10"),
        ("POST", "/nacos/v3/auth/user?username=x&password=yyyyyyyy"),
        ("DELETE", "/nacos/v3/auth/user?username=nacos"),
        ("GET", "/nacos/v3/auth/role/list?pageNo=1&pageSize=10"),
        ("POST", "/nacos/v3/auth/role?role=x&username=nacos"),
        ("GET", "/nacos/v3/auth/permission/list?pageNo=1&pageSize=10"),
        (
            "POST",
            "/nacos/v3/admin/core/namespace?namespaceId=x&namespaceName=x",
        ),
        (
            "DELETE",
            &format!("/nacos/v3/admin/core/namespace?namespaceId={a}"),
        ),
        ("GET", "/nacos/v3/admin/core/loader/current"),
        (
            "POST",
            "/nacos/v3/admin/core/loader/reloadClient?connectionId=x",
        ),
        ("GET", "/nacos/v3/admin/ns/client/list"),
        ("GET", "/nacos/v3/admin/cs/listener?ip=127.0.0.1"),
        ("DELETE", "/nacos/v3/admin/cs/config/batch?ids=1"),
        ("PATCH", "/nacos/v3/admin/ns/service"),
    ] {
        denied_v3(with_header(&node, t, method, path));
    }
    for path in [
        "/nacos/v3/admin/core/cluster/node/list",
        "/nacos/v3/admin/ns/ops/metrics",
    ] {
        with_header(&node, t, "GET", path).expect(200);
    }
    // The user's token works as a bearer and as the accessToken parameter too.
    with(
        &node,
        t,
        "GET",
        &format!("/nacos/v3/client/ns/instance/list?{}", at(b)),
    )
    .expect(200);
    node.raw(
        "GET",
        &format!(
            "/nacos/v3/client/ns/instance/list?{}&accessToken={t}",
            at(b)
        ),
        &[],
        None,
    )
    .expect(200);
}
