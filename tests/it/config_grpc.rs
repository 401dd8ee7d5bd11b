//! The Nacos configuration API over gRPC, with real clients: nacos-sdk-python 3.x
//! (`tests/clients/python3/config_flow.py`) on one node and across a three-node cluster,
//! the Rust `nacos-sdk` crate's config client, and the hand-rolled client of `grpc.rs`
//! for what the SDKs hide: bad input refused naming the field, the listen bound, the
//! tenant as the client spelled it, pushes acknowledged and resent, permissions, and
//! the audit trail.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacos_sdk::api::config::{
    ConfigChangeListener, ConfigResponse, ConfigService, ConfigServiceBuilder,
};
use nacos_sdk::api::props::ClientProps;
use roster_tests::{
    enc, eventually, unique, workspace_root, Cluster, Node, NodeOptions, Value, ADMIN_PASSWORD,
};
use serde_json::json;

use crate::grpc::{decode, payload, RawClient};

const GROUP: &str = "DEFAULT_GROUP";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `config_flow.py`: the listener on `server`, the writer on `writer`; its steps.
fn config_flow(server: &str, writer: &str, data_id: &str) -> Vec<Value> {
    let python = workspace_root().join("tests/clients/python3/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    let out = Command::new(&python)
        .arg(workspace_root().join("tests/clients/python3/config_flow.py"))
        .args(["--server", server, "--writer-server", writer])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--data-id", data_id])
        .output()
        .expect("run config_flow.py");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "config_flow.py failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("config_flow.py:\n{stdout}");
    let steps: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let names: Vec<&str> = steps.iter().filter_map(|s| s["step"].as_str()).collect();
    assert_eq!(
        names,
        [
            "connect",
            "publish",
            "listen",
            "get",
            "push",
            "cas",
            "gray",
            "bad_input",
            "remove",
            "sdk_log",
            "shutdown",
            "done"
        ],
        "{stdout}"
    );
    steps
}

/// The step named `name`.
fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps.iter().find(|s| s["step"] == name).unwrap()
}

#[test]
fn python_3_sdk_publishes_reads_listens_compares_and_sets_and_removes() {
    let node = Node::start();
    let data_id = unique("py3-cfg");
    let steps = config_flow(&node.addr(), &node.addr(), &data_id);
    // The stale compare-and-set was refused as Nacos refuses it.
    let stale = &step(&steps, "cas")["stale"];
    assert_eq!(stale["code"], 500, "{stale}");
    assert!(stale["message"]
        .as_str()
        .unwrap()
        .contains("Cas publish fail"));
    // The pushes went over gRPC and were acknowledged.
    let publishes = node.metric("roster_grpc_requests_total{kind=\"ConfigPublishRequest\"}");
    assert!(publishes.unwrap_or(0.0) >= 5.0, "{publishes:?}");
    let acked = node.metric("roster_grpc_pushes_total{outcome=\"acked\"}");
    assert!(acked.unwrap_or(0.0) >= 2.0, "{acked:?}");
}

#[test]
fn a_listener_on_one_node_hears_a_publish_through_another() {
    let c = Cluster::start(3, &[]);
    // Writer and listener each on a follower: the publish goes to the leader, and the
    // listener's node pushes what it applies.
    let leader = c.leader();
    let a = c.follower();
    let b = (0..3).find(|i| *i != a && *i != leader).unwrap();
    let data_id = unique("py3-cfg-cluster");
    let steps = config_flow(&c.nodes[b].addr(), &c.nodes[a].addr(), &data_id);
    eprintln!(
        "publish on node {} heard through node {} in {} ms",
        a + 1,
        b + 1,
        step(&steps, "push")["latency_ms"]
    );
    let acked = c.nodes[b].metric("roster_grpc_pushes_total{outcome=\"acked\"}");
    assert!(acked.unwrap_or(0.0) >= 1.0, "{acked:?}");
}

/// The contents a Rust SDK listener was told of.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<String>>>);

impl ConfigChangeListener for Heard {
    fn notify(&self, config: ConfigResponse) {
        self.0.lock().unwrap().push(config.content().clone());
    }
}

impl Heard {
    /// Waits up to `timeout` for `content`.
    /// How many times `content` was heard.
    fn count(&self, content: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == content)
            .count()
    }

    async fn wait_for(&self, content: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.0.lock().unwrap().iter().any(|c| c == content) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

async fn rust_client(node: &Node) -> ConfigService {
    let cache = tempfile::tempdir().unwrap();
    let props = ClientProps::new()
        .server_addr(node.addr())
        .namespace("public")
        .app_name("roster-rust-config")
        .auth_username("nacos")
        .auth_password(ADMIN_PASSWORD)
        .load_cache_at_start(false)
        .cache_dir(cache.keep());
    ConfigServiceBuilder::new(props)
        .enable_auth_plugin_http()
        .build()
        .await
        .expect("nacos-sdk config client")
}

#[test]
fn the_rust_nacos_sdk_publishes_reads_listens_and_compares_and_sets() {
    let node = Node::start();
    let data_id = unique("rust-cfg");
    let id = || data_id.clone();
    let group = || GROUP.to_string();
    runtime().block_on(async {
        let writer = rust_client(&node).await;
        let reader = rust_client(&node).await;
        let published = writer
            .publish_config(id(), group(), "k=1".into(), Some("properties".into()))
            .await;
        assert!(matches!(published, Ok(true)), "{published:?}");
        let got = reader.get_config(id(), group()).await.expect("get_config");
        assert_eq!(
            (got.content().as_str(), got.content_type().as_str()),
            ("k=1", "properties")
        );
        assert_eq!(got.md5().len(), 32, "{got:?}");

        // The listener is told of another client's publish. The SDK sends its listen
        // request in the background after add_listener returns, so a publish may beat
        // it: publish again (bounded) until one is heard.
        let heard = Heard::default();
        reader
            .add_listener(id(), group(), Arc::new(heard.clone()))
            .await
            .expect("add_listener");
        let mut told = None;
        for round in 2..=4 {
            let content = format!("k={round}");
            let ok = writer
                .publish_config(id(), group(), content.clone(), None)
                .await;
            assert!(matches!(ok, Ok(true)), "{ok:?}");
            if heard.wait_for(&content, Duration::from_secs(3)).await {
                told = Some(round);
                break;
            }
        }
        assert!(
            told.is_some(),
            "no change heard: {:?}",
            heard.0.lock().unwrap()
        );

        // Compare-and-set: the current md5 wins, a stale one is refused and changes nothing.
        let current = writer.get_config(id(), group()).await.expect("get_config");
        let cas = writer
            .publish_config_cas(id(), group(), "k=cas".into(), None, current.md5().clone())
            .await;
        assert!(matches!(cas, Ok(true)), "{cas:?}");
        let stale = writer
            .publish_config_cas(id(), group(), "k=stale".into(), None, current.md5().clone())
            .await;
        let refusal = format!("{stale:?}");
        assert!(
            !matches!(stale, Ok(true)) && refusal.contains("Cas publish fail"),
            "{refusal}"
        );
        // The reader listens, so the SDK answers get_config from its cache, which the
        // push of the change updates: read once the push is heard.
        assert!(heard.wait_for("k=cas", Duration::from_secs(5)).await);
        let got = reader.get_config(id(), group()).await.expect("get_config");
        assert_eq!(got.content(), "k=cas");

        // A beta for another address: this reader still reads the formal content. Then
        // one for this machine's (the reader's): it hears and reads the beta; stopping the
        // beta gives it the formal content again.
        let elsewhere = writer
            .publish_config_beta(id(), group(), "k=far".into(), None, "127.0.0.9".into())
            .await;
        assert!(matches!(elsewhere, Ok(true)), "{elsewhere:?}");
        let before = heard.count("k=cas");
        let beta = writer
            .publish_config_beta(id(), group(), "k=beta".into(), None, "127.0.0.1".into())
            .await;
        assert!(matches!(beta, Ok(true)), "{beta:?}");
        assert!(
            heard.wait_for("k=beta", Duration::from_secs(5)).await,
            "the beta was not heard: {:?}",
            heard.0.lock().unwrap()
        );
        assert!(!heard.0.lock().unwrap().iter().any(|c| c == "k=far"));
        let got = reader.get_config(id(), group()).await.expect("get_config");
        assert_eq!(got.content(), "k=beta");
        node.call(
            "DELETE",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group={GROUP}&beta=true"),
        )
        .expect(200);
        let deadline = Instant::now() + Duration::from_secs(5);
        while heard.count("k=cas") == before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            heard.count("k=cas"),
            before + 1,
            "{:?}",
            heard.0.lock().unwrap()
        );

        // What roster does not keep is refused, naming the field.
        let bad = writer
            .publish_config("a b".into(), group(), "k=1".into(), None)
            .await;
        assert!(format!("{bad:?}").contains("'dataId'"), "{bad:?}");

        let removed = writer.remove_config(id(), group()).await;
        assert!(matches!(removed, Ok(true)), "{removed:?}");
        // Asked of the writer: the SDK answers a listened item from its cache, which a
        // removal does not clear (it logs the not-found its refresh gets).
        let gone = writer.get_config(id(), group()).await;
        assert!(
            matches!(gone, Err(nacos_sdk::api::error::Error::ConfigNotFound(_))),
            "{gone:?}"
        );
    });
}

fn grpc_addr(node: &Node) -> String {
    format!("127.0.0.1:{}", node.http_port + 1000)
}

/// A hand-rolled client on `node`, its stream open and set up.
async fn connected(node: &Node) -> RawClient {
    let mut c = RawClient::connect(&grpc_addr(node)).await;
    c.open_stream().await;
    let setup = json!({"clientVersion": "Roster-Test:v1", "tenant": "",
                       "labels": {"source": "sdk", "module": "config"}, "abilityTable": {}});
    c.send("ConnectionSetupRequest", setup).await;
    c.expect("SetupAckRequest", Duration::from_secs(5)).await;
    c
}

/// One unary call with `token`.
async fn ask(c: &mut RawClient, kind: &str, body: Value, token: &str) -> (String, Value) {
    decode(
        &c.try_unary(payload(kind, &body, Some(token)))
            .await
            .expect("unary call"),
    )
}

fn publish_body(tenant: &str, data_id: &str, content: &str, addition: Value) -> Value {
    json!({"headers": {}, "requestId": "1", "module": "config", "dataId": data_id,
           "group": GROUP, "tenant": tenant, "content": content, "casMd5": null,
           "additionMap": addition})
}

fn query_body(tenant: &str, data_id: &str) -> Value {
    json!({"headers": {}, "module": "config", "dataId": data_id, "group": GROUP,
           "tenant": tenant, "tag": ""})
}

/// A listen (or unlisten) of `items`: (dataId, tenant, md5).
fn listen_body(listen: bool, items: &[(&str, &str, &str)]) -> Value {
    let contexts: Vec<Value> = items
        .iter()
        .map(|(d, t, m)| json!({"dataId": d, "group": GROUP, "tenant": t, "md5": m}))
        .collect();
    json!({"headers": {}, "module": "config", "dataId": "", "group": "", "tenant": "",
           "listen": listen, "configListenContexts": contexts})
}

/// Asserts a failed reply of `kind` with `code` whose message contains `needle`.
#[track_caller]
fn refused((kind, body): (String, Value), want_kind: &str, code: u16, needle: &str) {
    assert_eq!(kind, want_kind, "{body}");
    assert_eq!(
        (body["resultCode"].clone(), body["errorCode"].clone()),
        (json!(500), json!(code)),
        "{body}"
    );
    assert_eq!(body["success"], false, "{body}");
    assert!(body["message"].as_str().unwrap().contains(needle), "{body}");
}

#[test]
fn the_wire_refuses_bad_input_bounds_listens_and_resends_unacknowledged_pushes() {
    let node = Node::start_with(NodeOptions {
        args: vec!["--config-max-listeners".into(), "3".into()],
        ..Default::default()
    });
    let token = node.token();
    let tenant = unique("cfg-wire");
    let t = tenant.as_str();
    runtime().block_on(async {
        let mut w = connected(&node).await;
        let mut l = connected(&node).await;
        let publish = "ConfigPublishRequest";
        let reply = "ConfigPublishResponse";
        // Bad input: the reply type, 400, the field named; nothing stored.
        let yaml = json!({"type": "yaml"});
        refused(ask(&mut w, publish, publish_body(t, "a b", "x: 1", yaml.clone()), &token).await, reply, 400, "'dataId'");
        refused(ask(&mut w, publish, publish_body(t, "good", "", yaml.clone()), &token).await, reply, 400, "'content'");
        refused(ask(&mut w, publish, publish_body(t, "good", "x: 1", json!({"type": "ya ml"})), &token).await, reply, 400, "'type'");
        refused(ask(&mut w, publish, publish_body("../x", "good", "x: 1", yaml.clone()), &token).await, reply, 400, "'tenant'");
        let absent = ask(&mut w, "ConfigQueryRequest", query_body(t, "good"), &token).await;
        assert_eq!(absent.1["lastModified"], 0, "readable by clients that parse it: {}", absent.1);
        refused(absent, "ConfigQueryResponse", 300, "config data not exist");

        // Published and read back.
        let (kind, body) = ask(&mut w, publish, publish_body(t, "good", "x: 1", yaml.clone()), &token).await;
        assert_eq!((kind.as_str(), body["success"].clone()), ("ConfigPublishResponse", json!(true)), "{body}");
        let (kind, body) = ask(&mut w, "ConfigQueryRequest", query_body(t, "good"), &token).await;
        assert_eq!(kind, "ConfigQueryResponse");
        assert_eq!((body["content"].clone(), body["contentType"].clone(), body["resultCode"].clone()), (json!("x: 1"), json!("yaml"), json!(200)), "{body}");
        assert!(body["lastModified"].as_u64().unwrap() > 0, "{body}");
        let md5 = body["md5"].as_str().unwrap().to_string();
        assert_eq!(md5.len(), 32);

        // A listen answers what differs from what the client holds, as it named it.
        let listen = "ConfigBatchListenRequest";
        let (kind, body) = ask(&mut l, listen, listen_body(true, &[("good", t, "")]), &token).await;
        assert_eq!(kind, "ConfigChangeBatchListenResponse");
        assert_eq!(body["changedConfigs"], json!([{"dataId": "good", "group": GROUP, "tenant": t}]));
        let (_, body) = ask(&mut l, listen, listen_body(true, &[("good", t, &md5)]), &token).await;
        assert_eq!((body["changedConfigs"].clone(), body["success"].clone()), (json!([]), json!(true)), "{body}");

        // A change is pushed; unacknowledged, it is sent again, then acknowledged.
        ask(&mut w, publish, publish_body(t, "good", "x: 2", yaml.clone()), &token).await;
        let push = l.expect("ConfigChangeNotifyRequest", Duration::from_secs(5)).await;
        assert_eq!((push["dataId"].clone(), push["group"].clone(), push["tenant"].clone(), push["module"].clone()),
                   (json!("good"), json!(GROUP), json!(t), json!("config")), "{push}");
        assert!(push["headers"].is_object() && push["requestId"].is_string(), "{push}");
        let again = l.expect("ConfigChangeNotifyRequest", Duration::from_secs(10)).await;
        assert_eq!(again["dataId"], "good");
        assert_ne!(again["requestId"], push["requestId"], "a resend is a new request");
        l.send("ConfigChangeNotifyResponse", json!({"resultCode": 200, "errorCode": 0, "requestId": again["requestId"]})).await;
        eventually(Duration::from_secs(5), || {
            let acked = node.metric("roster_grpc_pushes_total{outcome=\"acked\"}").unwrap_or(0.0);
            (acked >= 1.0).then_some(()).ok_or(format!("acked {acked}"))
        });

        // The tenant as spelled: the public namespace listened to as "public" is pushed
        // as "public", as "" as "".
        ask(&mut w, publish, publish_body("", "spelled", "a=1", json!({})), &token).await;
        let (_, body) = ask(&mut l, listen, listen_body(true, &[("spelled", "public", "")]), &token).await;
        assert_eq!(body["changedConfigs"][0]["tenant"], "public", "{body}");
        ask(&mut w, publish, publish_body("", "spelled", "a=2", json!({})), &token).await;
        let push = l.expect("ConfigChangeNotifyRequest", Duration::from_secs(5)).await;
        assert_eq!((push["dataId"].clone(), push["tenant"].clone()), (json!("spelled"), json!("public")), "{push}");
        l.send("ConfigChangeNotifyResponse", json!({"resultCode": 200, "errorCode": 0, "requestId": push["requestId"]})).await;

        // The bound (3 here): two more would make 4; refused whole, nothing added.
        let (kind, body) = ask(&mut l, listen, listen_body(true, &[("more-1", t, ""), ("more-2", t, "")]), &token).await;
        refused((kind, body), "ConfigChangeBatchListenResponse", 400, "--config-max-listeners");
        let (_, body) = ask(&mut l, listen, listen_body(true, &[("more-1", t, "")]), &token).await;
        assert_eq!(body["success"], true, "one more fits: {body}");

        // Unlistened: no push.
        let (_, body) = ask(&mut l, listen, listen_body(false, &[("good", t, "")]), &token).await;
        assert_eq!(body["success"], true, "{body}");
        ask(&mut w, publish, publish_body(t, "good", "x: 3", yaml.clone()), &token).await;
        let quiet = tokio::time::timeout(Duration::from_secs(2), l.expect("ConfigChangeNotifyRequest", Duration::from_secs(10))).await;
        assert!(quiet.is_err(), "pushed after unlisten: {quiet:?}");

        // Removed: gone; a removal with a tag touches nothing stored.
        let remove = |data_id: &str, tag: &str| json!({"headers": {}, "module": "config", "dataId": data_id, "group": GROUP, "tenant": t, "tag": tag});
        let (kind, body) = ask(&mut w, "ConfigRemoveRequest", remove("good", "gray"), &token).await;
        assert_eq!((kind.as_str(), body["success"].clone()), ("ConfigRemoveResponse", json!(true)), "{body}");
        let (_, body) = ask(&mut w, "ConfigQueryRequest", query_body(t, "good"), &token).await;
        assert_eq!(body["content"], "x: 3");
        ask(&mut w, "ConfigRemoveRequest", remove("good", ""), &token).await;
        refused(ask(&mut w, "ConfigQueryRequest", query_body(t, "good"), &token).await, "ConfigQueryResponse", 300, "config data not exist");
    });

    // The writes are in the audit trail, refused ones with their code.
    let trail = eventually(Duration::from_secs(10), || {
        let trail = node
            .call(
                "GET",
                &format!("/api/v1/audit?namespaceId={}&limit=100", enc(&tenant)),
            )
            .expect(200)
            .json();
        let entries = trail["entries"].as_array().unwrap().clone();
        (entries.len() >= 8)
            .then_some(entries)
            .ok_or(format!("{trail}"))
    });
    let seen: Vec<(String, u64, String)> = trail
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["status"].as_u64().unwrap(),
                e["resource"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let publish_good = |status: u64| {
        (
            "ConfigPublishRequest".to_string(),
            status,
            format!("config:{GROUP}/good"),
        )
    };
    assert!(
        seen.contains(&publish_good(200)) && seen.contains(&publish_good(400)),
        "{seen:?}"
    );
    assert!(
        seen.contains(&(
            "ConfigRemoveRequest".to_string(),
            200,
            format!("config:{GROUP}/good")
        )),
        "{seen:?}"
    );
    assert!(
        trail
            .iter()
            .all(|e| e["face"] == "grpc" && e["user"] == "nacos"),
        "{trail:?}"
    );
}

#[test]
fn a_listener_without_read_permission_is_refused() {
    let node = Node::start();
    let admin = node.token();
    let user = unique("cfg-reader");
    let role = format!("{user}-role");
    let password = "reader-pass-123";
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={password}"),
    )
    .expect(200);
    // A role with a grant on something else (roles before the login: binding one ends
    // the user's tokens).
    node.call_form(
        "POST",
        "/nacos/v1/auth/roles",
        &format!("role={role}&username={user}"),
    )
    .expect(200);
    let grant = |resource: &str, action: &str| {
        node.call_form(
            "POST",
            "/nacos/v1/auth/permissions",
            &format!("role={role}&resource={}&action={action}", enc(resource)),
        )
        .expect(200);
    };
    grant(":DEFAULT_GROUP:config/elsewhere", "r");
    let token = node
        .raw(
            "POST",
            &format!("/nacos/v1/auth/login?username={user}&password={password}"),
            &[],
            None,
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    let data_id = unique("guarded");
    let d = data_id.as_str();
    runtime().block_on(async {
        let mut a = connected(&node).await;
        let mut u = connected(&node).await;
        ask(
            &mut a,
            "ConfigPublishRequest",
            publish_body("", d, "secret=1", json!({})),
            &admin,
        )
        .await;
        let listen = listen_body(true, &[("elsewhere", "", ""), (d, "", "")]);
        // One unreadable item refuses the whole listen, as naming refuses: 403.
        refused(
            ask(&mut u, "ConfigBatchListenRequest", listen.clone(), &token).await,
            "ConfigChangeBatchListenResponse",
            403,
            "authorization failed!",
        );
        refused(
            ask(&mut u, "ConfigQueryRequest", query_body("", d), &token).await,
            "ConfigQueryResponse",
            403,
            "authorization failed!",
        );
        refused(
            ask(
                &mut u,
                "ConfigPublishRequest",
                publish_body("", d, "secret=2", json!({})),
                &token,
            )
            .await,
            "ConfigPublishResponse",
            403,
            "authorization failed!",
        );
        // Nothing listened: the admin's change is not pushed.
        ask(
            &mut a,
            "ConfigPublishRequest",
            publish_body("", d, "secret=3", json!({})),
            &admin,
        )
        .await;
        let quiet = tokio::time::timeout(
            Duration::from_secs(2),
            u.expect("ConfigChangeNotifyRequest", Duration::from_secs(10)),
        )
        .await;
        assert!(quiet.is_err(), "pushed to a refused listener: {quiet:?}");

        // Read granted: the next listen on the same connection passes, and is pushed to.
        grant(&format!(":DEFAULT_GROUP:config/{d}"), "r");
        let (kind, body) = ask(&mut u, "ConfigBatchListenRequest", listen, &token).await;
        assert_eq!(
            (kind.as_str(), body["success"].clone()),
            ("ConfigChangeBatchListenResponse", json!(true)),
            "{body}"
        );
        assert_eq!(
            body["changedConfigs"],
            json!([{"dataId": d, "group": GROUP, "tenant": ""}])
        );
        ask(
            &mut a,
            "ConfigPublishRequest",
            publish_body("", d, "secret=4", json!({})),
            &admin,
        )
        .await;
        let push = u
            .expect("ConfigChangeNotifyRequest", Duration::from_secs(5))
            .await;
        assert_eq!(push["dataId"], d);
        // Reading is not writing.
        refused(
            ask(
                &mut u,
                "ConfigPublishRequest",
                publish_body("", d, "secret=5", json!({})),
                &token,
            )
            .await,
            "ConfigPublishResponse",
            403,
            "authorization failed!",
        );
    });
}

#[test]
fn the_listener_query_names_the_long_polls_and_the_grpc_connections_listening() {
    let node = Node::start();
    let data_id = unique("listened");
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!("dataId={data_id}&group={GROUP}&content=v%3D1"),
    )
    .expect(200);
    let md5 = node
        .call(
            "GET",
            &format!("/nacos/v1/cs/configs?dataId={data_id}&group={GROUP}"),
        )
        .expect(200)
        .header("content-md5")
        .unwrap()
        .to_string();
    let query = format!("/nacos/v1/cs/configs/listener?dataId={data_id}&group={GROUP}");
    let listeners = |protocol: &str| -> Vec<Value> {
        let v = node.call("GET", &query).expect(200).json();
        v["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["protocol"] == protocol)
            .cloned()
            .collect()
    };
    assert!(listeners("http").is_empty() && listeners("grpc").is_empty());
    let rt = runtime();
    let client = rt.block_on(rust_client(&node));
    rt.block_on(client.add_listener(data_id.clone(), GROUP.into(), Arc::new(Heard::default())))
        .expect("add_listener");
    std::thread::scope(|scope| {
        let poll = scope.spawn(|| {
            let form = format!(
                "Listening-Configs={}",
                enc(&format!("{data_id}\u{2}{GROUP}\u{2}{md5}\u{1}"))
            );
            node.try_request(
                "POST",
                &format!("/nacos/v1/cs/configs/listener?accessToken={}", node.token()),
                &[
                    ("Content-Type", "application/x-www-form-urlencoded"),
                    ("Long-Pulling-Timeout", "20000"),
                    ("User-Agent", "long-poller/1"),
                ],
                Some(&form),
            )
            .expect("long poll")
        });
        // Both are listed while they listen, with the md5 they hold.
        eventually(Duration::from_secs(10), || {
            let (http, grpc) = (listeners("http"), listeners("grpc"));
            match (http.first(), grpc.first()) {
                (Some(h), Some(g)) if h["md5"] == md5.as_str() && h["current"] == true => {
                    assert_eq!(h["client"], "long-poller/1", "{h}");
                    assert!(g["client"].as_str().unwrap_or("").contains("Rust"), "{g}");
                    Ok(())
                }
                _ => Err(format!("http {http:?}, grpc {grpc:?}")),
            }
        });
        assert_eq!(node.metric("roster_config_long_polls"), Some(1.0));
        let nacos_shape = node.call("GET", &query).expect(200).json();
        assert_eq!(nacos_shape["collectStatus"], 200, "{nacos_shape}");
        assert!(
            nacos_shape["lisentersGroupkeyStatus"]
                .as_object()
                .is_some_and(|m| m.len() == 2),
            "{nacos_shape}"
        );
        // A change answers the long poll, which is then no longer listed.
        node.call_form(
            "POST",
            "/nacos/v1/cs/configs",
            &format!("dataId={data_id}&group={GROUP}&content=v%3D2"),
        )
        .expect(200);
        let answer = poll.join().unwrap();
        assert!(answer.body.contains(&data_id), "{}", answer.body);
    });
    eventually(Duration::from_secs(5), || {
        if listeners("http").is_empty() && listeners("grpc").len() == 1 {
            Ok(())
        } else {
            Err(format!("{:?}", node.call("GET", &query).json()))
        }
    });
    // Reading it is what the query needs: a user without a grant is refused.
    node.call(
        "POST",
        "/nacos/v1/auth/users?username=nolisten&password=nolisten-pass-1",
    )
    .expect(200);
    let token = node
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=nolisten&password=nolisten-pass-1",
            &[],
            None,
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = node
        .raw("GET", &format!("{query}&accessToken={token}"), &[], None)
        .status;
    assert_eq!(refused, 403);
    drop(client);
}
