//! The Java `nacos-client`, three lines — 1.4.x (HTTP with UDP push and beats), 2.x and
//! 3.x (gRPC) — each against nodes with auth on. One scenario source
//! (`tests/clients/java/nacos-flow`) built by the modules `nacos-client-1`, `-2` and `-3`
//! against their own line: `flow` runs naming and config on one node from start to end;
//! `stay` registers, subscribes and listens while the test kills the node the client is
//! connected to (2.x and 3.x: a 1.x client holds no connection, its requests go to any
//! node, so one node is its test). A wrong password fails every line.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use roster_tests::{
    eventually, json, unique, workspace_root, Cluster, Node, Value, ADMIN_PASSWORD,
};

use super::{java, run, step, steps, Running};

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

fn listed(node: &Node, service: &str) -> Vec<String> {
    let v = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
        )
        .expect(200)
        .json();
    let mut hosts: Vec<String> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect();
    hosts.sort();
    hosts
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

    // The client logged in with the user's password, over the v1 login: 3.x tries Nacos
    // 3's first, which roster does not serve (a 404), and falls back.
    let logins = metric(
        &node,
        "roster_http_requests_total{route=\"/nacos/v1/auth/users/login\",method=\"POST\",status=\"200\"}",
    );
    assert!(
        logins >= 1.0,
        "logins at /nacos/v1/auth/users/login: {logins}"
    );
    assert_eq!(
        node.log().contains("path=/nacos/v3/auth/user/login}"),
        line.v3_login,
        "{}: a login tried at /nacos/v3/auth/user/login",
        line.module
    );

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
fn nacos_client_3_logs_in_by_the_v1_fallback_and_runs_over_grpc() {
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

/// The node (index) that received the client's gRPC requests of `kind`: its naming or
/// config connection's node.
fn node_of(c: &Cluster, kind: &str) -> usize {
    eventually(Duration::from_secs(5), || {
        let on: Vec<usize> = (0..c.nodes.len())
            .filter(|i| c.nodes[*i].is_running())
            .filter(|i| {
                metric(
                    &c.nodes[*i],
                    &format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"),
                ) >= 1.0
            })
            .collect();
        match on[..] {
            [one] => Ok(one),
            _ => Err(format!("{kind} seen on nodes {on:?}")),
        }
    })
}

fn hosts(line: &Value) -> Vec<String> {
    line["hosts"]
        .as_array()
        .map(|a| a.iter().map(|h| h.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Kills `victim` and samples the survivors' lists every 100 ms for 12 s: each of `mine`
/// must be listed by every survivor in every sample. Then the client must be connected
/// again (its "check" answers UP and its instances, read from a node) and must hear a
/// registration and a config change made through a survivor: its subscription and
/// listener were redone.
fn kill_and_follow(
    c: &mut Cluster,
    client: &mut Running,
    names: (&str, &str),
    victim: usize,
    mine: &[String],
    round: u32,
) {
    let (service, data_id) = names;
    eprintln!("killing node {}", victim + 1);
    c.nodes[victim].kill();
    let hit = Instant::now();
    let mut gaps = Vec::new();
    while hit.elapsed() < Duration::from_secs(12) {
        for (i, node) in c.nodes.iter().enumerate().filter(|(i, _)| *i != victim) {
            let list = listed(node, service);
            if !mine.iter().all(|m| list.contains(m)) {
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
        if line["server_healthy"] == json!(true) && mine.iter().all(|m| hosts(&line).contains(m)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the client never reconnected: {line}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let survivor = (victim + 1) % c.nodes.len();
    let ip = format!("127.62.1.{round}");
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/ns/instance",
            &format!("serviceName={service}&ip={ip}&port=8080&ephemeral=true"),
        )
        .expect(200);
    let pushed = client.wait_for("the push of a new instance", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v).iter().any(|h| h.starts_with(&ip))
    });
    eprintln!("pushed after the failover: {pushed}");
    c.nodes[survivor]
        .call_form(
            "POST",
            "/nacos/v1/cs/configs",
            &format!("dataId={data_id}&group=DEFAULT_GROUP&content=round:%20{round}"),
        )
        .expect(200);
    let content = format!("round: {round}");
    client.wait_for("the config change", Duration::from_secs(10), |v| {
        v["step"] == "config" && v["content"] == json!(content)
    });
}

/// `stay` of `line` with three instances on a three-node cluster: the nodes holding its
/// naming and its config connection are killed in turn (one kill when they are the same).
fn failover(line: &Line) {
    let mut c = Cluster::start(3, &[]);
    let servers = c
        .nodes
        .iter()
        .map(|n| n.addr())
        .collect::<Vec<_>>()
        .join(",");
    let home = tempfile::tempdir().unwrap();
    let service = unique("java-failover");
    let data_id = format!("{}.yaml", unique("java-failover"));
    let mut cmd = scenario(line, "stay", &servers, ADMIN_PASSWORD, home.path());
    cmd.args(["--service", &service, "--data-id", &data_id])
        .args(["--ips", "3"]);
    let mut client = Running::start(cmd, line.module);
    client.wait_step("ready", Duration::from_secs(30));
    let mine: Vec<String> = (1..=3).map(|i| format!("127.62.0.{i}:8080")).collect();
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || {
            let list = listed(node, &service);
            if list == mine {
                Ok(())
            } else {
                Err(format!("{list:?}"))
            }
        });
    }
    client.wait_for("its own instances pushed", Duration::from_secs(10), |v| {
        v["step"] == "pushed" && hosts(v) == mine
    });
    let naming = node_of(&c, "SubscribeServiceRequest");
    let config = node_of(&c, "ConfigBatchListenRequest");
    eprintln!(
        "naming on node {}, config on node {}",
        naming + 1,
        config + 1
    );
    let names = (service.as_str(), data_id.as_str());
    kill_and_follow(&mut c, &mut client, names, naming, &mine, 1);
    // The client redid its registration (one batch) and its subscription on the node it
    // moved to.
    let moved = node_of(&c, "SubscribeServiceRequest");
    let redone = metric(
        &c.nodes[moved],
        "roster_grpc_requests_total{kind=\"BatchInstanceRequest\"}",
    );
    assert!(
        redone >= 1.0,
        "node {} holds the subscription but saw no registration",
        moved + 1
    );
    if config != naming {
        // The listener's node still stood: bring the first back, then kill that one.
        c.nodes[naming].start_again();
        c.nodes[naming].wait_ready();
        kill_and_follow(&mut c, &mut client, names, config, &mine, 2);
    }
    let listening = node_of(&c, "ConfigBatchListenRequest");
    eprintln!(
        "naming moved to node {}, config to node {}",
        moved + 1,
        listening + 1
    );
    // No list the client handed its listener lacked its own instances.
    let pushed: Vec<Vec<String>> = client
        .drain()
        .iter()
        .filter(|v| v["step"] == "pushed")
        .map(hosts)
        .collect();
    for list in &pushed {
        assert!(
            mine.iter().all(|m| list.contains(m)),
            "the subscriber was handed a list without the live instances: {list:?} (all: {pushed:?})"
        );
    }
    client.close_stdin();
    client.wait_success(Duration::from_secs(30));
}

#[test]
fn nacos_client_2_moves_to_a_survivor_when_its_node_is_killed() {
    failover(&V2);
}

#[test]
fn nacos_client_3_moves_to_a_survivor_when_its_node_is_killed() {
    failover(&V3);
}
