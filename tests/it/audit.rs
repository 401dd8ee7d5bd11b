//! Login throttling and the audit trail, through real requests: wrong passwords from one
//! address (other loopback addresses as other sources), unknown and known users
//! throttled and refused alike, the timing of logins for unknown and known users, and a
//! scripted session of HTTP and gRPC writes read back from `/api/v1/audit` and from
//! `audit.jsonl` in the data dir.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use roster_tests::{eventually, unique, Node, Value, ADMIN_PASSWORD};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::grpc::{decode, payload, RawClient};

/// An HTTP answer read off a raw connection.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    took: Duration,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `method path` sent to `node` from the loopback address `source` (the harness's
/// client always comes from 127.0.0.1), on a fresh connection.
fn request_from(node: &Node, source: &str, method: &str, path: &str) -> Answer {
    let server: SocketAddr = node.addr().parse().unwrap();
    let local: SocketAddr = format!("{source}:0").parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(local).expect("bind a loopback source address");
        let started = Instant::now();
        let mut stream = socket.connect(server).await.expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {server}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
            .await
            .expect("an answer within 30 s")
            .unwrap();
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        let mut lines = head.lines();
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_string(),
            took,
        }
    })
}

fn login_from(node: &Node, source: &str, user: &str, password: &str) -> Answer {
    request_from(
        node,
        source,
        "POST",
        &format!("/nacos/v1/auth/login?username={user}&password={password}"),
    )
}

fn create_user(node: &Node, user: &str, password: &str) {
    node.call(
        "POST",
        &format!("/nacos/v1/auth/users?username={user}&password={password}"),
    )
    .expect(200);
}

#[test]
fn wrong_logins_from_one_address_wait_and_a_success_resets_the_count() {
    let node = Node::start();
    let (user, right) = ("throttled", "right-password-1");
    create_user(&node, user, right);
    let here = "127.0.0.1";
    for i in 0..5 {
        let a = login_from(&node, here, user, &format!("wrong-{i}"));
        assert_eq!(a.status, 403, "failure {i}: {}", a.body);
    }
    // The sixth attempt waits, whatever its password.
    let refused = login_from(&node, here, user, "wrong-5");
    assert_eq!(refused.status, 429, "{}", refused.body);
    let wait: u64 = refused
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=5).contains(&wait), "Retry-After {wait}");
    assert!(refused.body.contains("retry in"), "{}", refused.body);
    let waited_from = Instant::now();
    let right_too = login_from(&node, here, user, right);
    assert_eq!(right_too.status, 429, "{}", right_too.body);
    assert!(right_too.header("retry-after").is_some());
    // So does the password path of request authentication (what the npm client sends).
    let by_password = request_from(
        &node,
        here,
        "GET",
        &format!("/nacos/v1/ns/service/list?username={user}&password={right}"),
    );
    assert_eq!(by_password.status, 429, "{}", by_password.body);
    assert!(by_password.header("retry-after").is_some());
    // Another address is another pair.
    assert_eq!(login_from(&node, "127.0.0.2", user, right).status, 200);
    // After the wait the right password gets in (polled: not before the wait's end).
    let answer = eventually(Duration::from_secs(wait + 5), || {
        let a = login_from(&node, here, user, right);
        let status = a.status;
        (status == 200).then_some(a).ok_or(status.to_string())
    });
    assert!(answer.body.contains("accessToken"), "{}", answer.body);
    assert!(
        waited_from.elapsed() + Duration::from_secs(1) >= Duration::from_secs(wait),
        "let in after {:?} of a {wait} s wait",
        waited_from.elapsed()
    );
    // The success reset the count: five failures again before a wait (without the
    // reset, the first one would have started a ten-second wait).
    for i in 0..5 {
        let a = login_from(&node, here, user, &format!("again-{i}"));
        assert_eq!(a.status, 403, "failure {i} after the reset: {}", a.body);
    }
    assert_eq!(login_from(&node, here, user, right).status, 429);
}

#[test]
fn unknown_and_known_users_are_throttled_alike_in_the_same_words() {
    let node = Node::start();
    let (known, right) = ("known-user", "right-password-1");
    create_user(&node, known, right);
    let unknown = unique("nobody");
    // One sequence for each name, from an address of its own: five wrong passwords,
    // then a sixth and the first one again.
    let tried = |source: &str, user: &str| -> Vec<Answer> {
        ["w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-0"]
            .iter()
            .map(|password| login_from(&node, source, user, password))
            .collect()
    };
    let (of_known, of_unknown) = (tried("127.0.4.1", known), tried("127.0.4.2", &unknown));
    for (i, (k, u)) in of_known.iter().zip(&of_unknown).enumerate() {
        let expected = if i < 5 { 403 } else { 429 };
        assert_eq!(
            (k.status, u.status),
            (expected, expected),
            "attempt {i}: known {}, unknown {}",
            k.body,
            u.body
        );
        if i < 5 {
            // Nacos' words for a wrong password and an unknown user alike.
            assert_eq!(
                (k.body.trim(), u.body.trim()),
                ("user not found!", "user not found!")
            );
        } else {
            // The same words and wait, up to the second the wait has run.
            let words = |a: &Answer| a.body.split(" retry in").next().unwrap().to_string();
            assert_eq!(words(k), words(u), "attempt {i}");
            let wait = |a: &Answer| -> u64 { a.header("retry-after").unwrap().parse().unwrap() };
            assert!((1..=5).contains(&wait(k)) && (1..=5).contains(&wait(u)));
            assert!(wait(k).abs_diff(wait(u)) <= 1, "{} vs {}", wait(k), wait(u));
        }
    }
    // The request-authentication path of v2 (its envelope) says the same for both.
    let v2 = |source: &str, user: &str| {
        let a = request_from(
            &node,
            source,
            "GET",
            &format!("/nacos/v2/ns/service/list?username={user}&password=w-9"),
        );
        (a.status, a.body)
    };
    assert_eq!(v2("127.0.4.3", known), v2("127.0.4.4", &unknown));
    // Both waits end alike: the known name gets in with its password, the unknown one
    // is refused again as before, not throttled.
    let after_wait = |source: &str, user: &str, password: &str| {
        eventually(Duration::from_secs(10), || {
            let a = login_from(&node, source, user, password);
            (a.status != 429).then_some(a.status).ok_or(a.body)
        })
    };
    assert_eq!(after_wait("127.0.4.1", known, right), 200);
    assert_eq!(after_wait("127.0.4.2", &unknown, "w-6"), 403);
}

#[test]
fn logins_of_unknown_users_take_as_long_as_those_of_known_ones() {
    let node = Node::start();
    // Each sample from an address of its own, so the throttle never answers first;
    // known and unknown alternate, so both see the same load.
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..9 {
        let source = format!("127.0.3.{}", 10 + i);
        let a = login_from(&node, &source, "nacos", &format!("not-it-{i}"));
        assert_eq!(a.status, 403, "{}", a.body);
        known.push(a.took);
        let a = login_from(&node, &source, &format!("nobody-{i}"), &format!("nor-{i}"));
        assert_eq!(a.status, 403, "{}", a.body);
        unknown.push(a.took);
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (known, unknown) = (median(known), median(unknown));
    eprintln!("login medians: known user {known:?}, unknown user {unknown:?}");
    // Without the dummy hash an unknown user is answered in about a millisecond and a
    // known one after a whole argon2 check (tens of ms at least).
    assert!(
        unknown * 3 >= known && known * 3 >= unknown,
        "known {known:?} vs unknown {unknown:?}"
    );
}

/// `/api/v1/audit` with `query`, as the admin.
fn audit(node: &Node, query: &str) -> Value {
    node.call("GET", &format!("/api/v1/audit?{query}"))
        .expect(200)
        .json()
}

fn action_and_status(entries: &Value) -> Vec<(String, u64)> {
    entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Namespace `ns`'s audit trail on `node` once its (action, status) pairs, newest
/// first, are `expected` (within 10 s).
fn trail_of(node: &Node, ns: &str, expected: &[(String, u64)]) -> Value {
    eventually(Duration::from_secs(10), || {
        let trail = audit(node, &format!("namespaceId={ns}"));
        let found = action_and_status(&trail);
        (found == expected)
            .then_some(trail)
            .ok_or(format!("{found:?}"))
    })
}

#[test]
fn a_session_is_in_the_audit_trail_newest_first_and_in_the_file() {
    let node = Node::start();
    let token = node.token();
    let started = now_ms();
    let ns = unique("audit-ns");
    let ns = ns.as_str();
    let service = unique("orders");
    node.call(
        "POST",
        &format!("/nacos/v1/console/namespaces?customNamespaceId={ns}&namespaceName=audited"),
    )
    .expect(200);
    let instance = format!("serviceName={service}&ip=127.0.0.1&port=8080&namespaceId={ns}");
    node.call("POST", &format!("/nacos/v1/ns/instance?{instance}"))
        .expect(200);
    // A heartbeat and a list: not audited.
    node.call("PUT", &format!("/nacos/v1/ns/instance/beat?{instance}"))
        .expect(200);
    node.call(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={service}&namespaceId={ns}"),
    )
    .expect(200);
    // A failed delete: the service still has its instance.
    let failed = node.call(
        "DELETE",
        &format!("/nacos/v1/ns/service?serviceName={service}&namespaceId={ns}"),
    );
    assert_eq!(failed.status, 400, "{}", failed.body);
    node.call("DELETE", &format!("/nacos/v1/ns/instance?{instance}"))
        .expect(200);
    // A registration over gRPC, with the hand-rolled client.
    let grpc_service = unique("grpc-orders");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = RawClient::connect(&format!("127.0.0.1:{}", node.http_port + 1000)).await;
        c.open_stream().await;
        c.send(
            "ConnectionSetupRequest",
            json!({"clientVersion":"Roster-Test:v1","tenant":"","labels":{"source":"sdk","module":"naming"},"abilityTable":{}}),
        )
        .await;
        c.expect("SetupAckRequest", Duration::from_secs(5)).await;
        let body = json!({"namespace":ns,"serviceName":grpc_service,"groupName":"DEFAULT_GROUP",
            "type":"registerInstance","instance":{"ip":"127.0.0.1","port":9090,"weight":1.0,
            "healthy":true,"enabled":true,"ephemeral":true,"clusterName":"DEFAULT","metadata":{}},
            "module":"naming"});
        let answer = c
            .try_unary(payload("InstanceRequest", &body, Some(&token)))
            .await
            .expect("unary call");
        let (kind, body) = decode(&answer);
        assert_eq!((kind.as_str(), body["success"].clone()), ("InstanceResponse", json!(true)), "{body}");
    });

    // Read back, filtered to the namespace: newest first, with who, where and how.
    let expected = [
        ("InstanceRequest registerInstance".to_string(), 200),
        ("DELETE /nacos/v1/ns/instance".to_string(), 200),
        ("DELETE /nacos/v1/ns/service".to_string(), 400),
        ("POST /nacos/v1/ns/instance".to_string(), 200),
        ("POST /nacos/v1/console/namespaces".to_string(), 200),
    ];
    let trail = trail_of(&node, ns, &expected);
    assert_eq!(trail["truncated"], false);
    let entries = trail["entries"].as_array().unwrap();
    for e in entries {
        assert_eq!(e["user"], "nacos", "{e}");
        assert_eq!(e["address"], "127.0.0.1", "{e}");
        assert_eq!(e["namespaceId"], ns, "{e}");
        assert!(e["time"].as_u64().unwrap() >= started, "{e}");
    }
    let faces: Vec<&str> = entries
        .iter()
        .map(|e| e["face"].as_str().unwrap())
        .collect();
    assert_eq!(faces, ["grpc", "http-v1", "http-v1", "http-v1", "console"]);
    assert_eq!(
        entries[0]["resource"],
        format!("127.0.0.1#9090#DEFAULT#DEFAULT_GROUP@@{grpc_service}")
    );
    assert_eq!(
        entries[3]["resource"],
        format!("127.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@{service}")
    );
    assert_eq!(entries[2]["resource"], format!("DEFAULT_GROUP@@{service}"));

    // A failed login is audited under the name it tried; a user who is not an admin
    // may not read the trail, and that refusal is audited under their name.
    let failed_login = login_from(&node, "127.0.0.5", "nacos", "not-the-password");
    assert_eq!(failed_login.status, 403);
    create_user(&node, "reader", "reader-pass-1");
    let denied = node.raw(
        "GET",
        "/api/v1/audit?username=reader&password=reader-pass-1",
        &[],
        None,
    );
    assert_eq!(denied.status, 403, "{}", denied.body);
    let reader = eventually(Duration::from_secs(10), || {
        let trail = audit(&node, "user=reader");
        let found = action_and_status(&trail);
        (found == [("GET /api/v1/audit".to_string(), 403)])
            .then_some(trail)
            .ok_or(format!("{found:?}"))
    });
    assert_eq!(reader["entries"][0]["face"], "api");
    let logins = audit(&node, "user=nacos&limit=1000");
    let login = logins["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["address"] == "127.0.0.5")
        .expect("the failed login");
    assert_eq!(
        (
            login["action"].clone(),
            login["status"].clone(),
            login["face"].clone()
        ),
        (
            json!("POST /nacos/v1/auth/login"),
            json!(403),
            json!("http-v1")
        )
    );
    // The creation of the user, by the admin, from the console's route.
    let users = audit(&node, "user=nacos&limit=1000");
    assert!(
        users["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "POST /nacos/v1/auth/users"
                && e["resource"] == "user:reader"
                && e["face"] == "console"),
        "{users}"
    );

    // Filters: a time window, and a limit that leaves entries out.
    let newest = entries[0]["time"].as_u64().unwrap();
    let oldest = entries[4]["time"].as_u64().unwrap();
    let window = audit(
        &node,
        &format!("namespaceId={ns}&since={oldest}&until={oldest}"),
    );
    assert!(
        action_and_status(&window).contains(&expected[4]),
        "{window}"
    );
    assert!(!action_and_status(&window).contains(&expected[0]) || newest == oldest);
    let later = audit(&node, &format!("namespaceId={ns}&since={}", newest + 1));
    assert_eq!(later["entries"], json!([]));
    let two = audit(&node, &format!("namespaceId={ns}&limit=2"));
    assert_eq!(action_and_status(&two), expected[..2]);
    assert_eq!(two["truncated"], true);
    for bad in ["limit=0", "limit=1001", "since=yesterday"] {
        let r = node.call("GET", &format!("/api/v1/audit?{bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }

    // The same lines are in the data dir's file, oldest first.
    let text = std::fs::read_to_string(node.data_dir().join("audit.jsonl")).expect("audit.jsonl");
    let ours: Vec<(String, u64)> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["namespaceId"] == ns)
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut oldest_first = expected.to_vec();
    oldest_first.reverse();
    assert_eq!(ours, oldest_first);
    assert!(
        !text.contains("/instance/beat") && !text.contains("/instance/list"),
        "beats and lists are not audited"
    );
    assert_eq!(node.metric("roster_audit_dropped_lines_total"), Some(0.0));
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn the_trail_is_for_admins_only() {
    let node = Node::start();
    create_user(&node, "plain", "plain-pass-1");
    let r = node.raw(
        "GET",
        "/api/v1/audit?username=plain&password=plain-pass-1",
        &[],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let r = node.raw("GET", "/api/v1/audit", &[], None);
    assert_eq!(r.status, 401, "{}", r.body);
    let admin = node.raw(
        "GET",
        &format!("/api/v1/audit?username=nacos&password={ADMIN_PASSWORD}"),
        &[],
        None,
    );
    assert_eq!(admin.status, 200, "{}", admin.body);
}

#[test]
fn refused_grpc_writes_are_in_the_audit_trail() {
    let node = Node::start();
    let ns = unique("audit-refused");
    create_user(&node, "granted-nothing", "nothing-pass-1");
    let token = crate::authz::login(&node, "granted-nothing", "nothing-pass-1");
    let instance = json!({"ip": "127.0.0.1", "port": 7070, "ephemeral": true});
    let register = json!({"namespace": ns, "serviceName": "refused",
                          "type": "registerInstance", "instance": instance});
    let publish = json!({"tenant": ns, "dataId": "app.yaml", "content": "x"});
    // Refused: a bad token, a user without the permission, a bad token again.
    let refused = [
        ("InstanceRequest", &register, "not-a-token"),
        ("InstanceRequest", &register, token.as_str()),
        ("ConfigPublishRequest", &publish, "not-a-token"),
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = crate::authz_push::connected(&node).await;
        for (kind, body, token) in refused {
            let answer = c.try_unary(payload(kind, body, Some(token))).await;
            let (_, body) = decode(&answer.expect("unary call"));
            let refusal = (body["errorCode"].clone(), body["success"].clone());
            assert_eq!(refusal, (json!(403), json!(false)), "{body}");
        }
    });
    let expected = [
        ("ConfigPublishRequest".to_string(), 403),
        ("InstanceRequest registerInstance".to_string(), 403),
        ("InstanceRequest registerInstance".to_string(), 403),
    ];
    let trail = trail_of(&node, &ns, &expected);
    let entries = trail["entries"].as_array().unwrap();
    let field = |e: &Value, name: &str| e[name].as_str().unwrap().to_string();
    let who: Vec<[String; 3]> = entries
        .iter()
        .map(|e| [field(e, "user"), field(e, "face"), field(e, "address")])
        .collect();
    let by = |user: &str| [user.to_string(), "grpc".into(), "127.0.0.1".into()];
    assert_eq!(
        who,
        [by("anonymous"), by("granted-nothing"), by("anonymous")]
    );
    assert_eq!(entries[0]["resource"], "config:DEFAULT_GROUP/app.yaml");
    let instance = "127.0.0.1#7070#DEFAULT#DEFAULT_GROUP@@refused";
    assert_eq!(entries[1]["resource"], instance);
}

#[test]
fn v3_writes_and_refused_reads_are_in_the_audit_trail() {
    let node = Node::start();
    let ns = unique("audit-v3");
    let ns = ns.as_str();
    node.call_form(
        "POST",
        "/nacos/v3/admin/core/namespace",
        &format!("namespaceId={ns}&namespaceName=audited"),
    )
    .expect(200);
    let service = unique("v3-orders");
    let instance = format!(
        "namespaceId={ns}&groupName=DEFAULT_GROUP&serviceName={service}&ip=127.0.0.1&port=8080"
    );
    node.call_form("POST", "/nacos/v3/client/ns/instance", &instance)
        .expect(200);
    // Lists clients poll: not audited.
    node.call(
        "GET",
        &format!("/nacos/v3/client/ns/instance/list?namespaceId={ns}&groupName=DEFAULT_GROUP&serviceName={service}"),
    )
    .expect(200);
    node.call_form(
        "POST",
        "/nacos/v3/admin/cs/config",
        &format!("namespaceId={ns}&groupName=G&dataId=app.yaml&content=a: 1"),
    )
    .expect(200);
    // A reader refused: audited as forbidden, with its target.
    create_user(&node, "v3-reader", "v3-reader-pass");
    let token = node
        .raw(
            "POST",
            "/nacos/v3/auth/user/login",
            &[],
            Some("username=v3-reader&password=v3-reader-pass"),
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = node.raw(
        "GET",
        &format!("/nacos/v3/admin/cs/config?namespaceId={ns}&groupName=G&dataId=app.yaml"),
        &[("accesstoken", &token)],
        None,
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    let s = |a: &str, status: u64| (a.to_string(), status);
    let trail = trail_of(
        &node,
        ns,
        &[
            s("GET /nacos/v3/admin/cs/config", 403),
            s("POST /nacos/v3/admin/cs/config", 200),
            s("POST /nacos/v3/client/ns/instance", 200),
            s("POST /nacos/v3/admin/core/namespace", 200),
        ],
    );
    let entries = trail["entries"].as_array().unwrap();
    assert_eq!(entries[0]["user"], "v3-reader", "{trail}");
    assert_eq!(entries[0]["resource"], "config:G/app.yaml", "{trail}");
    assert_eq!(entries[1]["resource"], "config:G/app.yaml", "{trail}");
    assert_eq!(
        entries[2]["resource"],
        format!("127.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@{service}"),
        "{trail}"
    );
}
