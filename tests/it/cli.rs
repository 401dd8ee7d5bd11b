//! The `roster` client subcommands as a person meets them: errors said once and in plain
//! words, a closed stdout (`roster ... | head -1`) ended quietly, `--help` that names
//! what a first start needs, `sync list` in aligned columns, `sync apply`, `instance list`
//! naming the face that registered each instance.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use roster_tests::fixtures::{EurekaInstance, FakeEureka};
use roster_tests::{eventually, json, roster_bin, unique, Node, ADMIN_PASSWORD};

use crate::grpc::{decode, payload, RawClient};

/// Runs `roster ARGS --http NODE` with `password` (none: no password at all).
fn roster(node: &Node, password: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(roster_bin());
    cmd.args(args)
        .args(["--http", &node.addr()])
        .env_remove("ROSTER_PASSWORD")
        .env_remove("ROSTER_PASSWORD_FILE");
    if let Some(p) = password {
        cmd.env("ROSTER_PASSWORD", p);
    }
    cmd.output().expect("run roster")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `roster ARGS` as the admin; stdout, panics on failure.
fn roster_ok(node: &Node, args: &[&str]) -> String {
    let out = roster(node, Some(ADMIN_PASSWORD), args);
    assert!(
        out.status.success(),
        "roster {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn cli_says_an_error_once_in_plain_words_and_ends_quietly_on_a_closed_pipe() {
    let node = Node::start();

    // A wrong password: "wrong username or password", once, and no log line about it.
    let out = roster(&node, Some("not-the-password"), &["cluster", "status"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("wrong username or password").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("user not found"), "{err}");
    assert!(!err.contains("roster stopped"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // stdout closed before the answer is printed (`| head -0`): no panic, success.
    let mut child = Command::new(roster_bin())
        .args(["cluster", "status", "--http", &node.addr()])
        .env("ROSTER_PASSWORD", ADMIN_PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run roster");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{:?}: {err}", out.status);

    // What a first start needs is in --help.
    let help = Command::new(roster_bin())
        .arg("--help")
        .output()
        .expect("run roster --help");
    let help = text(&help.stdout);
    assert!(help.contains("ROSTER_ADMIN_PASSWORD"), "{help}");
    assert!(help.contains("initial-admin-password"), "{help}");
    // `sync add --help` keeps its own options apart from the connection's.
    let help = Command::new(roster_bin())
        .args(["sync", "add", "--help"])
        .output()
        .expect("run roster sync add --help");
    let help = text(&help.stdout);
    let heading = help.find("Connection options:").expect(&help);
    let own = help.find("--dry-run").expect(&help);
    let http = help.find("--http").expect(&help);
    assert!(own < heading && heading < http, "{help}");
}

#[test]
fn cli_lists_tasks_aligned_with_their_targets_and_applies_a_dry_run() {
    let node = Node::start();
    // Sources nobody serves: the tasks exist, report errors, import nothing.
    let short = "a";
    let long = unique("a-much-longer-task-name-than-the-column");
    for name in [short, long.as_str()] {
        roster_ok(
            &node,
            &[
                "sync",
                "add",
                "--name",
                name,
                "--from",
                "etcd://127.0.0.1:1",
                "--dry-run",
            ],
        );
    }
    let list = roster_ok(&node, &["sync", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    // Every column starts where its header does.
    for column in ["STATE", "NAMESPACE", "GROUP", "SOURCE"] {
        let at = lines[0].find(column).expect(column);
        for line in &lines[1..] {
            assert_ne!(line.as_bytes()[at], b' ', "{column}: {list}");
            assert_eq!(&line[at - 2..at], "  ", "{column} starts at {at}: {list}");
        }
    }
    for line in &lines[1..] {
        assert!(line.contains("  public  "), "{list}");
        assert!(line.contains("  DEFAULT_GROUP  "), "{list}");
        assert!(line.contains("(dry run)"), "{list}");
    }

    // Apply: no longer a dry run; a second apply is refused.
    let out = roster_ok(&node, &["sync", "apply", short]);
    assert!(out.contains("state:      "), "{out}");
    assert!(!out.contains("dry run"), "{out}");
    assert!(
        out.contains("target:     namespace public group DEFAULT_GROUP services all"),
        "{out}"
    );
    let out = roster(&node, Some(ADMIN_PASSWORD), &["sync", "apply", short]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("409") && err.contains("not a dry run"),
        "{err}"
    );
}

#[test]
fn cli_creates_lists_and_revokes_api_tokens() {
    let node = Node::start();
    let user = unique("scraper");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password=scraper-pass-1"),
    )
    .expect(200);
    let created = roster_ok(
        &node,
        &[
            "auth",
            "token-create",
            "--user",
            &user,
            "--description",
            "host 7",
        ],
    );
    let mut lines = created.lines();
    let said = lines.next().unwrap_or_default();
    assert!(
        said.contains(&user) && said.contains("shown this once"),
        "{created}"
    );
    let token = lines.next().unwrap_or_default().trim().to_string();
    assert!(token.starts_with("roster_"), "{created}");
    let id = token["roster_".len()..][..16].to_string();
    // The token works as its user.
    let r = node.raw(
        "GET",
        "/nacos/v1/ns/catalog/services?namespaceId=public",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_ne!(r.status, 401, "{}", r.body);
    // Listed in columns, without the secret.
    let listed = roster_ok(&node, &["auth", "tokens", "--user", &user]);
    let rows: Vec<&str> = listed.lines().collect();
    assert_eq!(rows.len(), 2, "{listed}");
    assert!(
        rows[0].starts_with("ID") && rows[0].contains("USER"),
        "{listed}"
    );
    assert!(
        rows[1].starts_with(&id) && rows[1].contains("host 7"),
        "{listed}"
    );
    assert!(!listed.contains(&token), "{listed}");
    let revoked = roster_ok(&node, &["auth", "token-revoke", &id]);
    assert!(revoked.contains(&id), "{revoked}");
    let r = node.raw(
        "GET",
        "/nacos/v1/ns/catalog/services?namespaceId=public",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    assert!([401, 403].contains(&r.status), "{} {}", r.status, r.body);
    // Revoking it again fails, said once.
    let again = roster(&node, Some(ADMIN_PASSWORD), &["auth", "token-revoke", &id]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("not found"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn cli_lists_instances_with_the_face_that_registered_each() {
    let node = Node::start();
    let svc = "faces";
    // Nacos v1 HTTP: an address client's ephemeral instance.
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName={svc}&ip=127.0.0.1&port=8081&ephemeral=true"),
    )
    .expect(200);
    // Eureka: the app's name, lower-cased, is the service.
    let eureka = json!({"instance": {
        "instanceId": "127.0.0.1:faces:8082", "app": "FACES", "ipAddr": "127.0.0.1",
        "hostName": "127.0.0.1", "status": "UP", "port": {"$": 8082, "@enabled": "true"},
        "vipAddress": "faces", "leaseInfo": {"renewalIntervalInSecs": 30, "durationInSecs": 90},
        "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
    }});
    let bearer = format!("Bearer {}", node.token());
    let json_headers = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let r = node.raw(
        "POST",
        "/eureka/apps/FACES",
        &json_headers,
        Some(&eureka.to_string()),
    );
    assert_eq!(r.status, 204, "eureka register: {}", r.body);
    // Consul, with an API token of the admin in its own header.
    let created = node
        .raw(
            "POST",
            "/api/v1/tokens",
            &json_headers,
            Some(&json!({"user": "nacos", "description": "consul agent"}).to_string()),
        )
        .expect(201)
        .json();
    let token = created["token"].as_str().unwrap().to_string();
    let consul = json!({"Name": svc, "ID": "faces-1", "Address": "127.0.0.1", "Port": 8083,
                        "Check": {"TTL": "30s"}});
    node.raw(
        "PUT",
        "/v1/agent/service/register",
        &[
            ("x-consul-token", token.as_str()),
            ("content-type", "application/json"),
        ],
        Some(&consul.to_string()),
    )
    .expect(200);
    // A Nacos 2/3 gRPC client, held for the rest of the test.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let grpc_addr = format!("127.0.0.1:{}", node.http_port + 1000);
    let admin_token = node.token();
    let _client = rt.block_on(async {
        let mut c = RawClient::try_set_up(&grpc_addr, Duration::from_secs(10))
            .await
            .expect("a gRPC connection");
        let body = json!({"namespace": "public", "serviceName": svc, "groupName": "DEFAULT_GROUP",
                          "type": "registerInstance", "module": "naming",
                          "instance": {"ip": "127.0.0.1", "port": 8084, "weight": 1.0, "healthy": true,
                                       "enabled": true, "ephemeral": true, "clusterName": "DEFAULT"}});
        let reply = c
            .try_unary(payload("InstanceRequest", &body, Some(&admin_token)))
            .await
            .expect("registered");
        let (kind, body) = decode(&reply);
        assert_eq!(kind, "InstanceResponse", "{body}");
        c
    });
    let expected = [
        ("127.0.0.1:8081", "http"),
        ("127.0.0.1:8082", "eureka"),
        ("127.0.0.1:8083", "consul"),
        ("127.0.0.1:8084", "grpc"),
    ];

    // The console's route: each row says which face registered it.
    let page = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/catalog/instances?serviceName={svc}&clusterName=DEFAULT"),
        )
        .expect(200)
        .json();
    let mut seen: Vec<(String, String)> = page["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert!(i.get("registeredByTask").is_none(), "{i}");
            (
                format!("{}:{}", i["ip"].as_str().unwrap(), i["port"]),
                i["registeredBy"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    seen.sort();
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(a, f)| (a.to_string(), f.to_string()))
        .collect();
    assert_eq!(seen, want, "{page}");
    // The Nacos list clients parse is as it was: no such field.
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={svc}"),
        )
        .expect(200);
    assert!(!list.body.contains("registeredBy"), "{}", list.body);

    // The CLI: a column under its header, one row per instance.
    let listed = roster_ok(&node, &["instance", "list", svc]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 1 + expected.len(), "{listed}");
    let at = lines[0].find("REGISTERED BY").expect(&listed);
    for (addr, face) in expected {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("  {addr}  ")))
            .unwrap_or_else(|| panic!("{addr} is not listed: {listed}"));
        assert_eq!(line[at..].trim_end(), face, "{addr}: {listed}");
        assert!(line.starts_with("DEFAULT  "), "{listed}");
    }
    // In JSON, the rows as the console gets them.
    let out = roster_ok(&node, &["instance", "list", svc, "--output", "json"]);
    let rows: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(rows.as_array().map(Vec::len), Some(expected.len()), "{out}");
    for row in rows.as_array().unwrap() {
        let addr = format!("{}:{}", row["ip"].as_str().unwrap(), row["port"]);
        let face = expected.iter().find(|(a, _)| *a == addr).unwrap().1;
        assert_eq!(row["registeredBy"], face, "{out}");
    }

    // A sync task's copy of a Eureka instance keeps `eureka.instanceId`, yet it is the
    // task's: `sync:TASK` in the column, `registeredByTask` in JSON.
    let source = FakeEureka::start();
    source.register(EurekaInstance::new("synced", "127.0.0.1", 8085));
    roster_ok(
        &node,
        &[
            "sync",
            "add",
            "--name",
            "eureka-dc",
            "--from",
            &source.url(),
        ],
    );
    let listed = eventually(Duration::from_secs(30), || {
        let out = roster(&node, Some(ADMIN_PASSWORD), &["instance", "list", "synced"]);
        let listed = text(&out.stdout);
        match listed.lines().nth(1) {
            Some(line) if out.status.success() => Ok(line.to_string()),
            _ => Err(format!("not imported yet: {listed}{}", text(&out.stderr))),
        }
    });
    assert!(
        listed.contains("  127.0.0.1:8085  ") && listed.ends_with("  sync:eureka-dc"),
        "{listed}"
    );
    let page = node
        .call(
            "GET",
            "/nacos/v1/ns/catalog/instances?serviceName=synced&clusterName=DEFAULT",
        )
        .expect(200)
        .json();
    let row = &page["list"][0];
    assert!(row["metadata"]["eureka.instanceId"].is_string(), "{page}");
    assert_eq!(
        (&row["registeredBy"], &row["registeredByTask"]),
        (&json!("sync"), &json!("eureka-dc")),
        "{page}"
    );

    // A service that does not exist: said once, and a failure.
    let out = roster(&node, Some(ADMIN_PASSWORD), &["instance", "list", "nosuch"]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("nosuch"),
        "{}",
        text(&out.stderr)
    );
}
