//! Tests of the Nacos source: the documented payloads, then the whole source against a
//! scripted Nacos (a few lines of HTTP/1.1 over a loopback socket) for login, token
//! renewal, paging, the per-group fallback and polling.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// The instance-list example of the reference (§6.2).
const INSTANCE_LIST: &str = r#"{
  "name": "DEFAULT_GROUP@@order-service",
  "groupName": "DEFAULT_GROUP",
  "clusters": "",
  "cacheMillis": 10000,
  "hosts": [
    {
      "instanceId": "10.0.0.12#8080#DEFAULT#DEFAULT_GROUP@@order-service",
      "ip": "10.0.0.12", "port": 8080, "weight": 1.0,
      "healthy": true, "enabled": true, "ephemeral": true,
      "clusterName": "DEFAULT",
      "serviceName": "DEFAULT_GROUP@@order-service",
      "metadata": {"preserved.register.source": "SPRING_CLOUD", "version": "1.4.2"},
      "instanceHeartBeatInterval": 5000, "instanceIdGenerator": "simple",
      "instanceHeartBeatTimeOut": 15000, "ipDeleteTimeout": 30000
    }
  ],
  "lastRefTime": 1700000000000,
  "checksum": "",
  "allIPs": false,
  "reachProtectionThreshold": false,
  "valid": true
}"#;

#[test]
fn instance_list_example_maps_one_to_one() {
    let list: InstanceList = serde_json::from_str(INSTANCE_LIST).unwrap();
    let hosts = list.hosts.unwrap();
    let i = map_host(&hosts[0], "DEFAULT_GROUP@@order-service").unwrap();
    assert_eq!(i.ip, "10.0.0.12");
    assert_eq!(i.port, 8080);
    assert_eq!(i.weight, 1.0);
    assert!(i.healthy && i.enabled);
    assert_eq!(i.cluster, "DEFAULT");
    assert_eq!(
        i.source_id,
        "10.0.0.12#8080#DEFAULT#DEFAULT_GROUP@@order-service"
    );
    assert_eq!(i.metadata["preserved.register.source"], "SPRING_CLOUD");
    assert_eq!(i.metadata.len(), 2);
}

#[test]
fn nacos_1x_hosts_and_gaps() {
    let host: Host = serde_json::from_value(json!({
        "ip": "10.0.0.5", "port": 9000, "valid": false, "marked": false,
        "metadata": {"n": 1}
    }))
    .unwrap();
    let i = map_host(&host, "G@@s").unwrap();
    assert!(!i.healthy, "`valid` stands in for `healthy`");
    assert!(i.enabled);
    assert_eq!(i.cluster, "DEFAULT");
    assert_eq!(i.source_id, "10.0.0.5#9000#DEFAULT#G@@s");
    assert_eq!(i.metadata["n"], "1");
    let portless: Host = serde_json::from_value(json!({"ip": "10.0.0.5", "port": 0})).unwrap();
    assert!(map_host(&portless, "G@@s").is_none());
}

#[test]
fn listing_payloads() {
    let ns = json!({"code": 200, "message": null, "data": [
        {"namespace": "", "namespaceShowName": "public"},
        {"namespace": "prod", "namespaceShowName": "prod"}]});
    assert_eq!(parse_namespaces(&ns).unwrap(), vec!["public", "prod"]);
    assert!(parse_namespaces(&json!({"code": 200})).is_none());

    let doms = json!({"count": 148, "doms": ["svc-a", "svc-b"]});
    let (count, rows) = parse_service_list_page(&doms).unwrap();
    assert_eq!(count, 148);
    assert_eq!(rows[1], ("DEFAULT_GROUP".to_string(), "svc-b".to_string()));

    let catalog = json!({"count": 2, "serviceList": [
        {"name": "a", "groupName": "G1", "clusterCount": 1, "ipCount": 2,
         "healthyInstanceCount": 2, "triggerFlag": "false"},
        {"name": "G2@@b", "groupName": ""}]});
    let (count, rows) = parse_catalog_page(&catalog).unwrap();
    assert_eq!(count, 2);
    assert_eq!(
        rows,
        vec![("G1".into(), "a".into()), ("G2".into(), "b".into())]
    );
}

#[test]
fn a_configuration_page_item_maps_with_its_namespace() {
    // A page item of `GET /nacos/v1/cs/configs?search=accurate` (Nacos 2.x).
    let item = json!({
        "id": "1", "dataId": "app.yaml", "group": "DEFAULT_GROUP", "content": "a: 1",
        "md5": null, "encryptedDataKey": null, "tenant": "", "appName": "shop", "type": "yaml"
    });
    let c = map_config(&item, "public").unwrap();
    assert_eq!(
        (c.namespace.as_str(), c.group.as_str(), c.data_id.as_str()),
        ("public", "DEFAULT_GROUP", "app.yaml")
    );
    assert_eq!(
        (c.content.as_str(), c.r#type.as_str(), c.app_name.as_str()),
        ("a: 1", "yaml", "shop")
    );
    assert!(map_config(&json!({"group": "G"}), "public").is_none());
    let url: SourceUrl = "nacos://127.0.0.1:8848?configs=maybe".parse().unwrap();
    let refused = NacosSource::new(&url, &Filter::default()).err().unwrap();
    assert!(refused.to_string().contains("configs=maybe"), "{refused}");
}

#[test]
fn diff_reports_changed_and_gone_services() {
    let name = |n: &str| ServiceName {
        namespace: Some("public".into()),
        group: Some("G".into()),
        name: n.into(),
    };
    let inst = |port| SourceInstance {
        cluster: "DEFAULT".into(),
        ip: "10.0.0.1".into(),
        port,
        weight: 1.0,
        healthy: true,
        enabled: true,
        metadata: Default::default(),
        source_id: port.to_string(),
    };
    let old: Services = [(name("a"), vec![inst(1)]), (name("b"), vec![inst(2)])].into();
    let new: Services = [(name("a"), vec![inst(1)]), (name("c"), vec![inst(3)])].into();
    let changes = diff(&old, &new);
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[&name("b")], Vec::new());
    assert_eq!(changes[&name("c")], vec![inst(3)]);
}

// ---------------------------------------------------------------------------------------
// A scripted Nacos

/// What the scripted Nacos holds and how it behaves.
#[derive(Default)]
struct Script {
    /// Credentials it accepts; `None`: no auth.
    user: Option<(String, String)>,
    /// Tokens handed out so far; the last one is valid.
    tokens: Vec<String>,
    /// Namespace id → services (`group`, `name`) → hosts.
    services: BTreeMap<String, BTreeMap<(String, String), Vec<Value>>>,
    /// Answer 404 on the catalog API (an older server).
    no_catalog: bool,
    /// Requests seen, as `METHOD path?query`.
    seen: Vec<String>,
}

type Shared = Arc<StdMutex<Script>>;

/// Starts the scripted Nacos; returns its URL prefix `host:port`.
async fn start(script: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                let Some((method, target, body)) = read_request(&mut stream).await else {
                    return;
                };
                let (status, body) = answer(&script, &method, &target, &body);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
            });
        }
    });
    addr.to_string()
}

/// Reads one request: method, target, body.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let mut first = head.lines().next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    Some((method, target, body))
}

/// Routes one request.
fn answer(script: &Shared, method: &str, target: &str, body: &str) -> (u16, String) {
    let mut s = script.lock().unwrap();
    s.seen.push(format!("{method} {target}"));
    let (path, q) = target.split_once('?').unwrap_or((target, ""));
    let params: BTreeMap<String, String> = form_urlencoded::parse(q.as_bytes())
        .into_owned()
        .chain(form_urlencoded::parse(body.as_bytes()).into_owned())
        .collect();
    let param = |k: &str| params.get(k).cloned().unwrap_or_default();
    if path == "/nacos/v1/auth/login" {
        let Some((user, password)) = s.user.clone() else {
            return (404, "no auth".into());
        };
        if (param("username"), param("password")) != (user, password) {
            return (403, "unknown user!".into());
        }
        let token = format!("token-{}", s.tokens.len() + 1);
        s.tokens.push(token.clone());
        return (
            200,
            json!({"accessToken": token, "tokenTtl": 18000}).to_string(),
        );
    }
    if s.user.is_some() && s.tokens.last() != Some(&param("accessToken")) {
        return (403, "token invalid!".into());
    }
    let ns = match param("namespaceId") {
        id if id.is_empty() => "public".to_string(),
        id => id,
    };
    let services = s.services.get(&ns).cloned().unwrap_or_default();
    let page = |all: Vec<Value>| {
        let no: usize = param("pageNo").parse().unwrap_or(1);
        let size: usize = param("pageSize").parse().unwrap_or(10);
        all.into_iter()
            .skip(no.saturating_sub(1) * size)
            .take(size)
            .collect::<Vec<_>>()
    };
    match path {
        "/nacos/v1/console/namespaces" => {
            let data: Vec<Value> = s
                .services
                .keys()
                .map(|id| json!({"namespace": if id == "public" { "" } else { id }}))
                .collect();
            (200, json!({"code": 200, "data": data}).to_string())
        }
        "/nacos/v1/ns/catalog/services" if s.no_catalog => (404, "not found".into()),
        "/nacos/v1/ns/catalog/services" => {
            let rows: Vec<Value> = services
                .keys()
                .map(|(g, n)| json!({"name": n, "groupName": g}))
                .collect();
            let count = rows.len();
            (
                200,
                json!({"count": count, "serviceList": page(rows)}).to_string(),
            )
        }
        "/nacos/v1/ns/service/list" => {
            let group = param("groupName");
            let rows: Vec<Value> = services
                .keys()
                .filter(|(g, _)| *g == group)
                .map(|(_, n)| json!(n))
                .collect();
            let count = rows.len();
            (200, json!({"count": count, "doms": page(rows)}).to_string())
        }
        "/nacos/v1/ns/instance/list" => {
            let key = (param("groupName"), param("serviceName"));
            let hosts = services.get(&key).cloned().unwrap_or_default();
            (
                200,
                json!({"name": format!("{}@@{}", key.0, key.1), "hosts": hosts}).to_string(),
            )
        }
        _ => (404, "no route".into()),
    }
}

fn host(ip: &str, port: u16) -> Value {
    json!({"ip": ip, "port": port, "weight": 1.0, "healthy": true, "enabled": true,
           "clusterName": "DEFAULT", "metadata": {}})
}

fn add(script: &Shared, ns: &str, group: &str, name: &str, hosts: Vec<Value>) {
    script
        .lock()
        .unwrap()
        .services
        .entry(ns.into())
        .or_default()
        .insert((group.into(), name.into()), hosts);
}

fn source(url: &str, filter: &Filter) -> NacosSource {
    NacosSource::new(&url.parse().unwrap(), filter).unwrap()
}

#[tokio::test]
async fn nacos_scripted_login_paging_and_namespaces() {
    let script: Shared = Arc::new(StdMutex::new(Script {
        user: Some(("sync".into(), "s3cret".into())),
        ..Script::default()
    }));
    for i in 0..150 {
        add(
            &script,
            "public",
            "DEFAULT_GROUP",
            &format!("svc-{i:03}"),
            vec![host("10.0.0.1", 8000 + i)],
        );
    }
    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "consumers:com.acme.Api::",
        vec![host("10.0.0.9", 1)],
    );
    add(
        &script,
        "prod",
        "PAY",
        "payment",
        vec![host("10.0.1.1", 9000), host("10.0.1.2", 9000)],
    );
    let addr = start(script.clone()).await;

    let mut src = source(&format!("nacos://sync:s3cret@{addr}"), &Filter::all());
    let snap = src.list().await.unwrap();
    assert_eq!(
        snap.services.len(),
        151,
        "150 paged + payment; consumers skipped"
    );
    let payment = ServiceName {
        namespace: Some("prod".into()),
        group: Some("PAY".into()),
        name: "payment".into(),
    };
    assert_eq!(snap.services[&payment].len(), 2);
    let public = ServiceName {
        namespace: Some("public".into()),
        group: Some("DEFAULT_GROUP".into()),
        name: "svc-149".into(),
    };
    assert_eq!(snap.services[&public][0].port, 8149);

    let s = script.lock().unwrap();
    assert_eq!(s.tokens.len(), 1, "one login serves every call");
    let catalog_pages = s
        .seen
        .iter()
        .filter(|r| r.contains("/catalog/services") && r.contains("namespaceId=public"))
        .count();
    assert_eq!(catalog_pages, 2, "150 services in pages of 100");
    assert!(s
        .seen
        .iter()
        .filter(|r| !r.contains("/auth/login"))
        .all(|r| r.contains("accessToken=token-1")));
    assert!(
        s.seen.iter().all(|r| !r.contains("s3cret")),
        "password only in the body"
    );
}

#[tokio::test]
async fn nacos_scripted_relogin_after_refusal_and_bad_password() {
    let script: Shared = Arc::new(StdMutex::new(Script {
        user: Some(("sync".into(), "s3cret".into())),
        ..Script::default()
    }));
    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "a",
        vec![host("10.0.0.1", 80)],
    );
    let addr = start(script.clone()).await;
    let mut src = source(
        &format!("nacos://sync:s3cret@{addr}?namespace=public"),
        &Filter::all(),
    );
    src.list().await.unwrap();
    // The server forgets the token (restart, revocation): the next call is refused,
    // the source logs in again and carries on.
    script.lock().unwrap().tokens.push("someone-else".into());
    let snap = src.list().await.unwrap();
    assert_eq!(snap.services.len(), 1);
    assert_eq!(script.lock().unwrap().tokens.len(), 3);

    let mut wrong = source(&format!("nacos://sync:nope@{addr}"), &Filter::all());
    let err = wrong.list().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Refused(m) if m.contains("login as 'sync' failed")),
        "{err:?}"
    );
}

#[tokio::test]
async fn nacos_scripted_falls_back_to_service_list_per_group() {
    let script: Shared = Arc::new(StdMutex::new(Script {
        no_catalog: true,
        ..Script::default()
    }));
    add(&script, "public", "G1", "a", vec![host("10.0.0.1", 80)]);
    add(&script, "public", "G2", "b", vec![host("10.0.0.2", 80)]);
    add(&script, "public", "G3", "c", vec![host("10.0.0.3", 80)]);
    let addr = start(script.clone()).await;
    let mut src = source(&format!("nacos://{addr}?group=G1,G2"), &Filter::all());
    let snap = src.list().await.unwrap();
    let names: Vec<(&str, &str)> = snap
        .services
        .keys()
        .map(|s| (s.group.as_deref().unwrap(), s.name.as_str()))
        .collect();
    assert_eq!(names, vec![("G1", "a"), ("G2", "b")]);
}

#[tokio::test]
async fn nacos_scripted_watch_reports_changed_and_removed_services() {
    let script: Shared = Arc::new(StdMutex::new(Script::default()));
    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "a",
        vec![host("10.0.0.1", 80)],
    );
    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "b",
        vec![host("10.0.0.2", 80)],
    );
    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "skip-me",
        vec![host("10.0.0.3", 80)],
    );
    let addr = start(script.clone()).await;
    let mut src = source(
        &format!("nacos://{addr}"),
        &Filter::parse(Some("!skip-*")).unwrap(),
    );
    assert_eq!(src.list().await.unwrap().services.len(), 2);

    add(
        &script,
        "public",
        "DEFAULT_GROUP",
        "a",
        vec![host("10.0.0.1", 80), host("10.0.0.4", 81)],
    );
    add(&script, "public", "DEFAULT_GROUP", "skip-me", vec![]);
    script
        .lock()
        .unwrap()
        .services
        .get_mut("public")
        .unwrap()
        .remove(&("DEFAULT_GROUP".to_string(), "b".to_string()));
    let update = tokio::time::timeout(Duration::from_secs(10), src.watch())
        .await
        .expect("a poll within seconds")
        .unwrap();
    let Update::Services(changes) = update else {
        panic!("expected services, got {update:?}")
    };
    let by_name: BTreeMap<&str, usize> = changes
        .iter()
        .map(|(k, v)| (k.name.as_str(), v.len()))
        .collect();
    assert_eq!(by_name, BTreeMap::from([("a", 2), ("b", 0)]));
}
