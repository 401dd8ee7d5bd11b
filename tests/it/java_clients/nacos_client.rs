//! The Java `nacos-client`, three lines — 1.4.x (HTTP with UDP push and beats), 2.x and
//! 3.x (gRPC) — each against nodes with auth on. One scenario source
//! (`tests/clients/java/nacos-flow`) built by the modules `nacos-client-1`, `-2` and `-3`
//! against their own line: `flow` runs naming and config on one node from start to end;
//! `stay` registers, subscribes and listens while the test kills the node the client is
//! connected to (2.x and 3.x: a 1.x client holds no connection, its requests go to any
//! node, so one node is its test). A wrong password fails every line.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use roster_tests::{json, unique, workspace_root, Cluster, Node, Value, ADMIN_PASSWORD};

use super::{java, run, step, steps, Running};
use crate::sdk_failover::{follow_the_client, listed, Stay};

/// A client line: its Maven module, what it speaks, whether it tries Nacos 3's login
/// first.
struct Line {
    module: &'static str,
    grpc: bool,
    v3_login: bool,
}

const V1: Line = Line {
    module: "nacos-client-1",
    grpc: false,
    v3_login: false,
};
const V2: Line = Line {
    module: "nacos-client-2",
    grpc: true,
    v3_login: false,
};
const V3: Line = Line {
    module: "nacos-client-3",
    grpc: true,
    v3_login: true,
};

/// The version of nacos-client the module's pom.xml pins (`nacos-client.version`).
fn pinned(line: &Line) -> String {
    let root = std::env::var_os("ROSTER_JAVA_CLIENTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/clients/java"));
    let pom = std::fs::read_to_string(root.join(line.module).join("pom.xml")).unwrap();
    let (_, rest) = pom
        .split_once("<nacos-client.version>")
        .expect("the pom pins nacos-client.version");
    rest.split_once('<').unwrap().0.trim().to_string()
}

/// A command running the scenario `mode` of `line` against `servers`, the client's files
/// under `home`.
fn scenario(line: &Line, mode: &str, servers: &str, password: &str, home: &Path) -> Command {
    let mut cmd = java(line.module, "org.roster.clients.nacos.NacosScenario");
    cmd.arg(mode)
        .args(["--server", servers])
        .args(["--username", "nacos", "--password", password])
        .arg("--home")
        .arg(home);
    cmd
}

fn metric(node: &Node, name: &str) -> f64 {
    node.metric(name).unwrap_or(0.0)
}

/// Runs `flow` of `line` on a node of its own and checks its steps and what the node saw.
fn flow(line: &Line) {
    let node = Node::start();
    let home = tempfile::tempdir().unwrap();
    let service = unique("java-orders");
    let data_id = format!("{}.yaml", unique("java-app"));
    let mut cmd = scenario(line, "flow", &node.addr(), ADMIN_PASSWORD, home.path());
    cmd.args(["--service", &service, "--data-id", &data_id]);
    let steps = run(cmd, line.module);

    // The jar on the classpath is the version the pom pins.
    assert_eq!(
        step(&steps, "connect")["version"],
        json!(pinned(line)),
        "{}",
        line.module
    );
    let mut names = vec![
        "register",
        "register_persistent",
        "get_all",
        "select_instances",
        "select_one",
        "subscribe",
        "push_registered",
        "push_unhealthy",
        "push_deregistered",
        "services",
        "deregister",
        "publish",
        "get",
        "listen",
        "listen_http_change",
        "remove",
        "done",
    ];
    if line.grpc {
        names.extend(["batch_register", "cas_stale", "cas_current"]);
    }
    for name in names {
        step(&steps, name);
    }
    // The node pushes to the client at a loopback address only: a 1.x client is a UDP
    // target (it names its own address, pinned to 127.0.0.1), 2.x and 3.x their connection.
    let subscribers = step(&steps, "subscribe")["subscribers"].clone();
    let subscribers = subscribers.as_array().unwrap();
    assert_eq!(subscribers.len(), 1, "{subscribers:?}");
    let protocol = if line.grpc { "grpc" } else { "udp" };
    assert_eq!(
        (&subscribers[0]["ip"], &subscribers[0]["protocol"]),
        (&json!("127.0.0.1"), &json!(protocol)),
        "{subscribers:?}"
    );
    let listener = if line.grpc { "grpc" } else { "http" };
    assert_eq!(step(&steps, "listen")["protocol"], json!(listener));

    // The client logged in with the user's password: 1.x and 2.x over v1, 3.x at Nacos
    // 3's login, which roster serves (no fallback to v1).
    let route = if line.v3_login {
        "/nacos/v3/auth/user/login"
    } else {
        "/nacos/v1/auth/users/login"
    };
    let logins = metric(
        &node,
        &format!("roster_http_requests_total{{route=\"{route}\",method=\"POST\",status=\"200\"}}"),
    );
    assert!(logins >= 1.0, "logins at {route}: {logins}");
    if line.v3_login {
        let fallbacks = metric(
            &node,
            "roster_http_requests_total{route=\"/nacos/v1/auth/users/login\",method=\"POST\",status=\"200\"}",
        );
        assert_eq!(
            fallbacks, 0.0,
            "{}: logins through the v1 fallback",
            line.module
        );
    }

    // Only the silent HTTP instance turned unhealthy: the client's own, whose beat
    // timeout is 3 s too, was held by its beats (1.x) or its connection (2.x, 3.x).
    assert_eq!(metric(&node, "roster_expiry_unhealthy_total"), 1.0);
    if line.grpc {
        for kind in [
            "InstanceRequest",
            "PersistentInstanceRequest",
            "BatchInstanceRequest",
            "SubscribeServiceRequest",
            "ServiceListRequest",
            "ConfigPublishRequest",
            "ConfigQueryRequest",
            "ConfigBatchListenRequest",
            "ConfigRemoveRequest",
        ] {
            let n = metric(
                &node,
                &format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"),
            );
            assert!(n >= 1.0, "{kind} reached the node over gRPC ({n})");
        }
        assert_eq!(
            metric(&node, "roster_udp_pushes_total{outcome=\"sent\"}"),
            0.0
        );
        assert_eq!(metric(&node, "roster_beats_total"), 0.0);
    } else {
        // The three changes were pushed by UDP and acknowledged; the beats came.
        let acked = metric(&node, "roster_udp_pushes_total{outcome=\"acked\"}");
        assert!(acked >= 3.0, "UDP pushes acked: {acked}");
        let beats = metric(&node, "roster_beats_total");
        assert!(beats >= 2.0, "beats received: {beats}");
        assert_eq!(metric(&node, "roster_grpc_connections "), 0.0);
    }
    // Nothing left: deregistered, or gone with the client's connection.
    for s in [
        service.clone(),
        format!("{service}-batch"),
        format!("{service}-persistent"),
    ] {
        assert_eq!(listed(&node, &s), Vec::<String>::new(), "{s}");
    }
    // The client kept its caches where it was told, not under the user's home.
    assert!(
        home.path().join("nacos/naming").is_dir(),
        "no naming cache under {}",
        home.path().display()
    );
}

#[test]
fn nacos_client_1_registers_beats_hears_udp_pushes_and_long_polls() {
    flow(&V1);
}

#[test]
fn nacos_client_2_registers_subscribes_and_configures_over_grpc() {
    flow(&V2);
}

#[test]
fn nacos_client_3_logs_in_at_the_v3_path_and_runs_over_grpc() {
    flow(&V3);
}

#[test]
fn nacos_client_with_a_wrong_password_is_refused() {
    let node = Node::start();
    for line in [&V1, &V2, &V3] {
        let home = tempfile::tempdir().unwrap();
        let service = unique("java-refused");
        let mut cmd = scenario(line, "flow", &node.addr(), "not-the-password", home.path());
        cmd.args(["--service", &service]);
        let out = cmd.output().expect("run the Java client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: a wrong password fails the run:\n{stdout}\n{}",
            line.module,
            String::from_utf8_lossy(&out.stderr)
        );
        let failed: Vec<Value> = steps(&stdout)
            .into_iter()
            .filter(|s| s["ok"] == json!(false))
            .collect();
        assert!(
            failed.len() == 1 && failed[0]["step"] == "register",
            "{}: the registration is what fails: {stdout}",
            line.module
        );
        assert_eq!(listed(&node, &service), Vec::<String>::new());
    }
}

/// `stay` of `line` with three instances on a three-node cluster: the nodes holding its
/// naming and its config connection are killed in turn (one kill when they are the same).
fn failover(line: &Line) {
    let mut c = Cluster::start(3, &[]);
    let servers = c.server_list();
    let home = tempfile::tempdir().unwrap();
    let service = unique("java-failover");
    let data_id = format!("{}.yaml", unique("java-failover"));
    let mut cmd = scenario(line, "stay", &servers, ADMIN_PASSWORD, home.path());
    cmd.args(["--service", &service, "--data-id", &data_id])
        .args(["--ips", "3"]);
    let mut client = Running::start(cmd, line.module);
    client.wait_step("ready", Duration::from_secs(30));
    let mine: Vec<String> = (1..=3).map(|i| format!("127.62.0.{i}:8080")).collect();
    let stay = Stay {
        service: &service,
        data_id: &data_id,
        mine: &mine,
        registration: "BatchInstanceRequest",
        probe_prefix: "127.62.1",
    };
    follow_the_client(&mut c, &mut client, &stay);
}

#[test]
fn nacos_client_2_moves_to_a_survivor_when_its_node_is_killed() {
    failover(&V2);
}

#[test]
fn nacos_client_3_moves_to_a_survivor_when_its_node_is_killed() {
    failover(&V3);
}

/// Gray releases of one item as `line` hears and reads them, published over HTTP v1
/// while it listens: a beta for another address leaves it the formal content, a beta
/// for its own address reaches its listener and its reads until stopped, and (3.x) a
/// tag version for its gray label (`nacos.config.gray.label`) the same way.
fn gray(line: &Line) {
    let node = Node::start();
    let home = tempfile::tempdir().unwrap();
    let data_id = format!("{}.yaml", unique("java-gray"));
    let mut cmd = scenario(line, "gray", &node.addr(), ADMIN_PASSWORD, home.path());
    cmd.args(["--data-id", &data_id, "--gray-label", "canary"]);
    let steps = run(cmd, line.module);
    let by_label = line.module == V3.module;
    let heard = &step(&steps, "done")["heard"];
    let mut want = vec!["stage: beta", "stage: formal"];
    if by_label {
        step(&steps, "label");
        want.extend(["stage: canary", "stage: formal"]);
    }
    assert_eq!(heard, &json!(want), "{}", line.module);
    // The item's history names each gray publication and removal.
    let history = node
        .call(
            "GET",
            &format!("/nacos/v1/cs/history?search=accurate&dataId={data_id}&group=DEFAULT_GROUP&pageSize=50"),
        )
        .expect(200)
        .json();
    let mut grays: Vec<String> = history["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["publishType"] == "gray")
        .map(|v| {
            format!(
                "{}:{}",
                v["grayName"].as_str().unwrap(),
                v["opType"].as_str().unwrap()
            )
        })
        .collect();
    grays.sort();
    let mut expected = vec!["beta:D", "beta:I", "beta:U"];
    if by_label {
        expected.extend(["tag_canary:D", "tag_canary:I"]);
    }
    assert_eq!(grays, expected, "{}: {history}", line.module);
}

#[test]
fn nacos_clients_hear_and_read_gray_releases_by_address_and_label() {
    for line in [&V1, &V2, &V3] {
        gray(line);
    }
}
