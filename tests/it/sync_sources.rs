//! The etcd and ZooKeeper sync sources against REAL servers (Debian's etcd 3.4 and
//! ZooKeeper 3.8, see `roster_tests::foreign`): sources opened with
//! `roster_sync::open` are listed and watched directly while the tests change the
//! registries the way go-micro, go-kratos, grpc-go, Dubbo and Spring Cloud do.

use std::time::Duration;

use roster_sync::{Filter, ServiceName, Source, SourceError, SourceInstance, Update};
use roster_tests::foreign::{zk_create, zk_delete, Etcd, ExpiringSession, ZooKeeper};
use roster_tests::source_addrs as addrs;
use roster_tests::{enc, free_port};
use serde_json::json;
use tokio::time::Instant;
use zookeeper_client as zk;

/// The longest a change may take to show up in a watch.
const CHANGE_WITHIN: Duration = Duration::from_secs(20);

/// Opens the source `url` names, admitting every service.
fn open(url: &str) -> Box<dyn Source> {
    let url = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    roster_sync::open(&url, &Filter::all()).unwrap_or_else(|e| panic!("open: {e}"))
}

/// The instance at `ip` (panics if there is none).
fn at<'a>(instances: &'a [SourceInstance], ip: &str) -> &'a SourceInstance {
    instances
        .iter()
        .find(|i| i.ip == ip)
        .unwrap_or_else(|| panic!("no instance at {ip} in {instances:?}"))
}

/// Lists the source and returns the instances of `service` (panics if it is missing).
async fn list_service(source: &mut Box<dyn Source>, service: &str) -> Vec<SourceInstance> {
    let snapshot = source.list().await.unwrap_or_else(|e| panic!("list: {e}"));
    assert!(!snapshot.partial);
    snapshot
        .services
        .get(&ServiceName::plain(service))
        .unwrap_or_else(|| panic!("{service} missing from {:?}", snapshot.services.keys()))
        .clone()
}

/// Watches until an update gives `service` an instance list that passes `check`;
/// panics on an error, a Resync, or after [`CHANGE_WITHIN`].
async fn watch_until(
    source: &mut Box<dyn Source>,
    service: &str,
    check: impl Fn(&[SourceInstance]) -> bool,
) -> Vec<SourceInstance> {
    let deadline = Instant::now() + CHANGE_WITHIN;
    let name = ServiceName::plain(service);
    let mut last = None;
    loop {
        let update = tokio::time::timeout_at(deadline, source.watch())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{service} did not change as expected in {CHANGE_WITHIN:?}; last seen {last:?}"
                )
            });
        match update {
            Ok(Update::Services(services)) => {
                if let Some(instances) = services.get(&name) {
                    if check(instances) {
                        return instances.clone();
                    }
                    last = Some(instances.clone());
                }
            }
            Ok(Update::Resync) => panic!("unexpected Resync while waiting for {service}"),
            Ok(Update::Configs(_)) => panic!("unexpected configurations from {service}'s source"),
            Err(e) => panic!("watch failed while waiting for {service}: {e}"),
        }
    }
}

/// Watches until the source answers something other than "nothing changed".
async fn next_answer(source: &mut Box<dyn Source>) -> Result<Update, SourceError> {
    let deadline = Instant::now() + CHANGE_WITHIN;
    loop {
        let answer = tokio::time::timeout_at(deadline, source.watch())
            .await
            .unwrap_or_else(|_| panic!("the watch answered nothing in {CHANGE_WITHIN:?}"));
        match answer {
            Ok(Update::Services(s)) if s.is_empty() => continue,
            other => return other,
        }
    }
}

/// Lists until it succeeds (a restarted server), for up to [`CHANGE_WITHIN`].
async fn list_until_ok(source: &mut Box<dyn Source>) -> roster_sync::Snapshot {
    let deadline = Instant::now() + CHANGE_WITHIN;
    loop {
        match source.list().await {
            Ok(snapshot) => return snapshot,
            Err(e) if Instant::now() < deadline => {
                eprintln!("list not yet: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("list still failing after {CHANGE_WITHIN:?}: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// etcd

/// A go-micro registration: a whole service with one node.
fn micro(name: &str, id: &str, address: &str, weight: Option<&str>) -> String {
    let mut metadata = json!({"broker": "http", "protocol": "mucp", "registry": "etcd",
                              "server": "mucp", "transport": "http"});
    if let Some(w) = weight {
        metadata["weight"] = json!(w);
    }
    json!({
        "name": name, "version": "latest", "metadata": null,
        "endpoints": [{"name": "Helloworld.Call", "request": {"name": "CallRequest", "type": "CallRequest"},
                       "response": {"name": "CallResponse", "type": "CallResponse"}, "metadata": {}}],
        "nodes": [{"metadata": metadata, "id": id, "address": address}],
    })
    .to_string()
}

/// A go-kratos registration.
fn kratos(id: &str, name: &str, endpoints: &[&str]) -> String {
    json!({
        "id": id, "name": name, "version": "v1.4.2",
        "metadata": {"region": "cn-east", "zone": "az1", "weight": "10"},
        "endpoints": endpoints,
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_go_micro_list_then_watch_add_change_delete() {
    let etcd = Etcd::start();
    let key = |id: &str| format!("/micro/registry/helloworld/{id}");
    etcd.put(
        &key("helloworld-1"),
        &micro("helloworld", "helloworld-1", "127.0.0.1:8001", None),
    );
    etcd.put(
        &key("helloworld-2"),
        &micro("helloworld", "helloworld-2", "127.0.0.2:8002", Some("5")),
    );
    etcd.put(
        "/micro/registry/greeter/greeter-1",
        &micro("greeter", "greeter-1", "127.0.1.1:9000", None),
    );
    // Neither an unreadable value nor a key outside the prefix disturbs anything.
    etcd.put("/micro/registry/broken/x", "not json");
    etcd.put(
        "/elsewhere/x",
        &micro("elsewhere", "x", "127.9.9.9:1", None),
    );

    let mut source = open(&format!("etcd://{}", etcd.addr()));
    let snapshot = source.list().await.expect("list");
    let names: Vec<&str> = snapshot.services.keys().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["greeter", "helloworld"]);
    let hello = &snapshot.services[&ServiceName::plain("helloworld")];
    assert_eq!(addrs(hello), vec!["127.0.0.1:8001", "127.0.0.2:8002"]);
    let first = at(hello, "127.0.0.1");
    assert_eq!(
        (first.weight, first.healthy, first.enabled),
        (1.0, true, true)
    );
    assert_eq!(first.metadata["protocol"], "mucp");
    assert_eq!(first.metadata["version"], "latest");
    assert_eq!(first.source_id, key("helloworld-1"));
    assert_eq!(at(hello, "127.0.0.2").weight, 5.0);

    // Added.
    etcd.put(
        &key("helloworld-3"),
        &micro("helloworld", "helloworld-3", "127.0.0.3:8003", None),
    );
    let now = watch_until(&mut source, "helloworld", |l| l.len() == 3).await;
    assert_eq!(
        addrs(&now),
        vec!["127.0.0.1:8001", "127.0.0.2:8002", "127.0.0.3:8003"]
    );

    // Changed: the complete list comes back, with the new weight.
    etcd.put(
        &key("helloworld-1"),
        &micro("helloworld", "helloworld-1", "127.0.0.1:8001", Some("9")),
    );
    let now = watch_until(&mut source, "helloworld", |l| {
        l.iter().any(|i| i.weight == 9.0)
    })
    .await;
    assert_eq!(now.len(), 3);
    assert_eq!(at(&now, "127.0.0.1").weight, 9.0);

    // Deleted.
    etcd.delete(&key("helloworld-2"));
    let now = watch_until(&mut source, "helloworld", |l| l.len() == 2).await;
    assert_eq!(addrs(&now), vec!["127.0.0.1:8001", "127.0.0.3:8003"]);

    // The last instance of a service deleted: the service comes back empty.
    etcd.delete("/micro/registry/greeter/greeter-1");
    watch_until(&mut source, "greeter", |l| l.is_empty()).await;

    // A fresh list agrees with what the watch built.
    let snapshot = source.list().await.expect("list again");
    assert!(!snapshot
        .services
        .contains_key(&ServiceName::plain("greeter")));
    let hello = &snapshot.services[&ServiceName::plain("helloworld")];
    assert_eq!(addrs(hello), vec!["127.0.0.1:8001", "127.0.0.3:8003"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lease_expiry_shows_as_deletion() {
    let etcd = Etcd::start();
    let stays = "/micro/registry/leased/leased-1";
    let expires = "/micro/registry/leased/leased-2";
    etcd.put(stays, &micro("leased", "leased-1", "127.0.0.1:1", None));
    // Registered like go-micro does, but nobody keeps the lease alive: a crashed node.
    etcd.put_with_lease(
        expires,
        &micro("leased", "leased-2", "127.0.0.2:2", None),
        2,
    );

    let mut source = open(&format!("etcd://{}", etcd.addr()));
    let listed = list_service(&mut source, "leased").await;
    assert_eq!(addrs(&listed), vec!["127.0.0.1:1", "127.0.0.2:2"]);

    let now = watch_until(&mut source, "leased", |l| l.len() == 1).await;
    assert_eq!(addrs(&now), vec!["127.0.0.1:1"]);
    assert_eq!(list_service(&mut source, "leased").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_kratos_one_instance_per_endpoint() {
    let etcd = Etcd::start();
    let key = "/microservices/order-service/3f2c9a7e";
    etcd.put(
        key,
        &kratos(
            "3f2c9a7e",
            "order-service",
            &[
                "http://127.0.0.31:8000?isSecure=false",
                "grpc://127.0.0.31:9000",
            ],
        ),
    );
    // A service whose name starts with the other's: kept apart by the decoded name.
    etcd.put(
        "/microservices/order-service-v2/77",
        &kratos("77", "order-service-v2", &["grpc://127.0.0.32:9000"]),
    );

    let mut source = open(&format!("etcd://{}?layout=kratos", etcd.addr()));
    let snapshot = source.list().await.expect("list");
    assert_eq!(snapshot.services.len(), 2);
    let orders = &snapshot.services[&ServiceName::plain("order-service")];
    assert_eq!(addrs(orders), vec!["127.0.0.31:8000", "127.0.0.31:9000"]);
    let by_port = |port: u16| orders.iter().find(|i| i.port == port).expect("instance");
    assert_eq!(by_port(8000).metadata["protocol"], "http");
    assert_eq!(by_port(9000).metadata["protocol"], "grpc");
    assert_eq!(by_port(8000).metadata["version"], "v1.4.2");
    assert_eq!(by_port(8000).weight, 10.0);
    assert_eq!(
        by_port(8000).source_id,
        format!("{key}#http://127.0.0.31:8000")
    );
    assert_eq!(
        addrs(&snapshot.services[&ServiceName::plain("order-service-v2")]),
        vec!["127.0.0.32:9000"]
    );

    // The instance drops its HTTP endpoint.
    etcd.put(
        key,
        &kratos("3f2c9a7e", "order-service", &["grpc://127.0.0.31:9000"]),
    );
    let now = watch_until(&mut source, "order-service", |l| l.len() == 1).await;
    assert_eq!(addrs(&now), vec!["127.0.0.31:9000"]);
    assert_eq!(now[0].source_id, key);

    etcd.delete(key);
    watch_until(&mut source, "order-service", |l| l.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_compaction_forces_resync_and_list_converges() {
    let etcd = Etcd::start();
    let key = |n: u8| format!("/micro/registry/compacted/c-{n}");
    let value = |n: u8| {
        micro(
            "compacted",
            &format!("c-{n}"),
            &format!("127.0.0.{n}:80"),
            None,
        )
    };
    etcd.put(&key(1), &value(1));
    let mut source = open(&format!("etcd://{}", etcd.addr()));
    assert_eq!(list_service(&mut source, "compacted").await.len(), 1);

    // Changes after the list, then their history compacted away before the watch
    // could read it: the watch cannot say what changed.
    etcd.put(&key(2), &value(2));
    etcd.delete(&key(1));
    etcd.put(&key(3), &value(3));
    etcd.compact(etcd.revision());
    match next_answer(&mut source).await {
        Ok(Update::Resync) => {}
        other => panic!("expected Resync after compaction, got {other:?}"),
    }

    // Listing again gives the current state, and watching works from there.
    let listed = list_service(&mut source, "compacted").await;
    assert_eq!(addrs(&listed), vec!["127.0.0.2:80", "127.0.0.3:80"]);
    etcd.put(&key(4), &value(4));
    let now = watch_until(&mut source, "compacted", |l| l.len() == 3).await;
    assert_eq!(
        addrs(&now),
        vec!["127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_grpc_naming_targets() {
    let etcd = Etcd::start();
    let update = |addr: &str| json!({"Op": 0, "Addr": addr, "Metadata": {"zone": "a"}}).to_string();
    etcd.put("svc/orders/127.0.0.1:50051", &update("127.0.0.1:50051"));
    etcd.put(
        "svc/payments/e1",
        &json!({"Addr": "127.0.0.9:7000", "Metadata": "primary"}).to_string(),
    );
    // Not endpoints of a configured target.
    etcd.put("svc/ordersx/e", &update("127.0.0.7:1"));
    etcd.put("svc/other/e", &update("127.0.0.8:1"));

    let mut source = open(&format!(
        "etcd://{}?layout=grpc-naming&prefix=svc/orders,svc/payments",
        etcd.addr()
    ));
    let snapshot = source.list().await.expect("list");
    let names: Vec<&str> = snapshot.services.keys().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["svc/orders", "svc/payments"]);
    let orders = &snapshot.services[&ServiceName::plain("svc/orders")];
    assert_eq!(addrs(orders), vec!["127.0.0.1:50051"]);
    assert_eq!(
        (orders[0].metadata["zone"].as_str(), orders[0].weight),
        ("a", 1.0)
    );
    assert_eq!(orders[0].source_id, "svc/orders/127.0.0.1:50051");
    let payments = &snapshot.services[&ServiceName::plain("svc/payments")];
    assert_eq!(payments[0].metadata["metadata"], "primary");

    etcd.put("svc/orders/127.0.0.2:50051", &update("127.0.0.2:50051"));
    let now = watch_until(&mut source, "svc/orders", |l| l.len() == 2).await;
    assert_eq!(addrs(&now), vec!["127.0.0.1:50051", "127.0.0.2:50051"]);
    etcd.delete("svc/payments/e1");
    watch_until(&mut source, "svc/payments", |l| l.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_outage_fails_the_watch_and_recovery_relists() {
    let mut etcd = Etcd::start();
    let key = |n: u8| format!("/micro/registry/outage/o-{n}");
    etcd.put(&key(1), &micro("outage", "o-1", "127.0.0.1:80", None));
    // The first host is down: hosts are tried in order.
    let dead = free_port();
    let mut source = open(&format!("etcd://127.0.0.1:{dead},{}", etcd.addr()));
    assert_eq!(list_service(&mut source, "outage").await.len(), 1);
    etcd.put(&key(2), &micro("outage", "o-2", "127.0.0.2:80", None));
    watch_until(&mut source, "outage", |l| l.len() == 2).await;

    // The server goes away under an open watch stream.
    etcd.stop();
    match next_answer(&mut source).await {
        Err(SourceError::Unreachable(_)) => {}
        other => panic!("expected Unreachable from the watch, got {other:?}"),
    }
    match source.list().await {
        Err(SourceError::Unreachable(m)) => assert!(m.contains("etcd"), "{m}"),
        other => panic!("expected Unreachable from list, got {other:?}"),
    }

    etcd.start_again();
    etcd.put(&key(3), &micro("outage", "o-3", "127.0.0.3:80", None));
    let snapshot = list_until_ok(&mut source).await;
    let now = &snapshot.services[&ServiceName::plain("outage")];
    assert_eq!(
        addrs(now),
        vec!["127.0.0.1:80", "127.0.0.2:80", "127.0.0.3:80"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_authentication() {
    let etcd = Etcd::start();
    etcd.put(
        "/micro/registry/secured/s-1",
        &micro("secured", "s-1", "127.0.0.1:80", None),
    );
    etcd.enable_auth("root-pass");
    etcd.login("root", "root-pass");

    let mut anonymous = open(&format!("etcd://{}", etcd.addr()));
    match anonymous.list().await {
        Err(SourceError::Refused(m)) => assert!(m.contains("requires authentication"), "{m}"),
        other => panic!("expected Refused without credentials, got {other:?}"),
    }
    let mut wrong = open(&format!("etcd://root:nope@{}", etcd.addr()));
    match wrong.list().await {
        Err(SourceError::Refused(m)) => {
            assert!(m.contains("authentication as 'root' failed"), "{m}")
        }
        other => panic!("expected Refused with a wrong password, got {other:?}"),
    }

    let mut source = open(&format!("etcd://root:root-pass@{}", etcd.addr()));
    assert_eq!(list_service(&mut source, "secured").await.len(), 1);
    etcd.put(
        "/micro/registry/secured/s-2",
        &micro("secured", "s-2", "127.0.0.2:80", None),
    );
    watch_until(&mut source, "secured", |l| l.len() == 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_expired_token_is_renewed() {
    // Auth tokens that lapse after 1 s unused.
    let etcd = Etcd::start_with(&["--auth-token-ttl=1"]);
    etcd.put(
        "/micro/registry/renewed/r-1",
        &micro("renewed", "r-1", "127.0.0.1:80", None),
    );
    etcd.enable_auth("root-pass");
    etcd.login("root", "root-pass");
    let mut source = open(&format!("etcd://root:root-pass@{}", etcd.addr()));
    assert_eq!(list_service(&mut source, "renewed").await.len(), 1);

    tokio::time::sleep(Duration::from_secs(3)).await;
    // The helper's token (from the same time) is gone: so is the source's.
    let stale = etcd.try_call("/v3/kv/range", json!({"key": "AA=="}));
    assert!(stale.is_err_and(|e| e.contains("invalid auth token")));
    etcd.login("root", "root-pass");
    etcd.put(
        "/micro/registry/renewed/r-2",
        &micro("renewed", "r-2", "127.0.0.2:80", None),
    );
    assert_eq!(list_service(&mut source, "renewed").await.len(), 2);
    etcd.put(
        "/micro/registry/renewed/r-3",
        &micro("renewed", "r-3", "127.0.0.3:80", None),
    );
    watch_until(&mut source, "renewed", |l| l.len() == 3).await;
}

// ---------------------------------------------------------------------------------------
// ZooKeeper

const DEMO: &str = "org.apache.dubbo.demo.DemoService";

/// The znode of a Dubbo 2.x provider of `interface` registered with `url`.
fn provider_node(interface: &str, url: &str) -> String {
    format!("/dubbo/{interface}/providers/{}", enc(url))
}

/// A Dubbo provider URL of the demo interface at `address` with extra `params`.
fn demo_url(address: &str, params: &str) -> String {
    format!(
        "dubbo://{address}/{DEMO}?anyhost=true&application=demo-provider&dubbo=2.0.2&group=g1\
         &interface={DEMO}&methods=sayHello,sayHelloAsync&side=provider&version=1.0.0{params}"
    )
}

/// A Spring Cloud Zookeeper registration.
fn spring_instance(id: &str, address: &str, port: u16, status: &str, zone: &str) -> Vec<u8> {
    json!({
        "name": "order-service", "id": id, "address": address, "port": port, "sslPort": null,
        "payload": {"@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
                    "id": "order-service-1", "name": "order-service",
                    "metadata": {"instance_status": status, "zone": zone}},
        "registrationTimeUTC": 1610116500446u64, "serviceType": "DYNAMIC",
        "uriSpec": {"parts": [{"value": "scheme", "variable": true}, {"value": "://", "variable": false}]},
    })
    .to_string()
    .into_bytes()
}

/// A Dubbo 3 application-level registration.
fn dubbo3_instance(address: &str, port: u16, revision: &str) -> Vec<u8> {
    json!({
        "name": "demo-provider", "id": format!("{address}:{port}"), "address": address,
        "port": port, "sslPort": null,
        "payload": {"@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
                    "id": format!("{address}:{port}"), "name": "demo-provider",
                    "metadata": {"dubbo.endpoints": "[{\"port\":20880,\"protocol\":\"dubbo\"}]",
                                 "dubbo.metadata.revision": revision,
                                 "dubbo.metadata.storage-type": "local"}},
        "registrationTimeUTC": 1700000000000u64, "serviceType": "DYNAMIC", "uriSpec": null,
        "enabled": true,
    })
    .to_string()
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_dubbo_providers_add_and_delete() {
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    let persistent = zk::CreateMode::Persistent;
    let first = provider_node(DEMO, &demo_url("127.168.1.10:20880", "&weight=200"));
    zk_create(&client, &first, b"", persistent).await;
    // Consumers and configurators are not providers.
    let consumer = format!(
        "/dubbo/{DEMO}/consumers/{}",
        enc(&format!("consumer://127.168.1.99/{DEMO}?side=consumer"))
    );
    zk_create(&client, &consumer, b"", persistent).await;
    zk_create(
        &client,
        &format!("/dubbo/{DEMO}/configurators"),
        b"",
        persistent,
    )
    .await;

    let service = format!("providers:{DEMO}:1.0.0:g1");
    let mut source = open(&format!("zookeeper://{}", zookeeper.addr()));
    let snapshot = source.list().await.expect("list");
    assert_eq!(snapshot.services.len(), 1, "{:?}", snapshot.services.keys());
    let listed = &snapshot.services[&ServiceName::plain(&service)];
    assert_eq!(addrs(listed), vec!["127.168.1.10:20880"]);
    let p = &listed[0];
    assert_eq!((p.weight, p.enabled, p.healthy), (200.0, true, true));
    assert_eq!(p.metadata["methods"], "sayHello,sayHelloAsync");
    assert_eq!(p.metadata["protocol"], "dubbo");
    assert_eq!(p.metadata["application"], "demo-provider");
    assert_eq!(p.source_id, first);

    // An IPv6 provider with Dubbo's default weight, and a disabled one on a host name.
    let second = provider_node(DEMO, &demo_url("[::1]:20881", ""));
    zk_create(&client, &second, b"", persistent).await;
    let third = provider_node(DEMO, &demo_url("provider.internal:20882", "&disabled=true"));
    zk_create(&client, &third, b"", persistent).await;
    let now = watch_until(&mut source, &service, |l| l.len() == 3).await;
    assert_eq!(
        addrs(&now),
        vec!["127.168.1.10:20880", "::1:20881", "provider.internal:20882"]
    );
    assert_eq!(at(&now, "::1").weight, 100.0);
    assert!(!at(&now, "provider.internal").enabled);

    // Another version of the interface is another service.
    let v2 = provider_node(
        DEMO,
        &demo_url("127.168.1.11:20880", "").replace("version=1.0.0", "version=2.0.0"),
    );
    zk_create(&client, &v2, b"", persistent).await;
    let v2_service = format!("providers:{DEMO}:2.0.0:g1");
    watch_until(&mut source, &v2_service, |l| l.len() == 1).await;

    zk_delete(&client, &first).await;
    let now = watch_until(&mut source, &service, |l| l.len() == 2).await;
    assert_eq!(addrs(&now), vec!["::1:20881", "provider.internal:20882"]);
    zk_delete(&client, &second).await;
    zk_delete(&client, &third).await;
    watch_until(&mut source, &service, |l| l.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_spring_cloud_add_change_delete() {
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    let mut source = open(&format!(
        "zookeeper://{}?layout=spring-cloud",
        zookeeper.addr()
    ));
    // Nothing registered yet, not even the root.
    assert!(source.list().await.expect("empty list").services.is_empty());

    let first = "/services/order-service/6d4e5121-6c17-4023-8f7b-8922f8b70cae";
    zk_create(
        &client,
        first,
        &spring_instance("6d4e", "127.0.0.21", 8080, "UP", "az1"),
        zk::CreateMode::Ephemeral,
    )
    .await;
    let now = watch_until(&mut source, "order-service", |l| l.len() == 1).await;
    let i = &now[0];
    assert_eq!(
        (i.ip.as_str(), i.port, i.enabled, i.weight),
        ("127.0.0.21", 8080, true, 1.0)
    );
    assert_eq!(i.metadata["zone"], "az1");
    assert_eq!(i.source_id, first);

    let second = "/services/order-service/0a1b";
    zk_create(
        &client,
        second,
        &spring_instance("0a1b", "127.0.0.22", 8080, "OUT_OF_SERVICE", "az2"),
        zk::CreateMode::Ephemeral,
    )
    .await;
    let now = watch_until(&mut source, "order-service", |l| l.len() == 2).await;
    assert!(
        !at(&now, "127.0.0.22").enabled,
        "OUT_OF_SERVICE is not enabled"
    );

    // A re-registration with new data.
    client
        .set_data(
            first,
            &spring_instance("6d4e", "127.0.0.21", 8080, "UP", "az3"),
            None,
        )
        .await
        .expect("set_data");
    let now = watch_until(&mut source, "order-service", |l| {
        l.iter()
            .any(|i| i.metadata.get("zone").is_some_and(|z| z == "az3"))
    })
    .await;
    assert_eq!(now.len(), 2);

    zk_delete(&client, second).await;
    let now = watch_until(&mut source, "order-service", |l| l.len() == 1).await;
    assert_eq!(addrs(&now), vec!["127.0.0.21:8080"]);
    zk_delete(&client, first).await;
    watch_until(&mut source, "order-service", |l| l.is_empty()).await;
    let listed = list_service(&mut source, "order-service").await;
    assert!(
        listed.is_empty(),
        "the service node stays, empty: {listed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_expired_session_removes_its_ephemeral_provider() {
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    let stays = provider_node(DEMO, &demo_url("127.168.1.10:20880", ""));
    zk_create(&client, &stays, b"", zk::CreateMode::Persistent).await;
    // A provider whose host will drop off the network: its session expires, no one
    // closes it.
    let provider = ExpiringSession::open(&zookeeper, Duration::from_secs(2)).await;
    let doomed = provider_node(DEMO, &demo_url("127.168.1.20:20880", ""));
    provider.create_ephemeral(&doomed, b"").await;

    let service = format!("providers:{DEMO}:1.0.0:g1");
    let mut source = open(&format!("zookeeper://{}", zookeeper.addr()));
    assert_eq!(list_service(&mut source, &service).await.len(), 2);

    provider.cut();
    let now = watch_until(&mut source, &service, |l| l.len() == 1).await;
    assert_eq!(addrs(&now), vec!["127.168.1.10:20880"]);
    // The server expired the session, which deleted the node.
    assert_eq!(client.check_stat(&doomed).await.expect("stat"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_dubbo3_application_instances() {
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    let first = "/services/demo-provider/127.168.1.10:20880";
    zk_create(
        &client,
        first,
        &dubbo3_instance("127.168.1.10", 20880, "rev-1"),
        zk::CreateMode::Ephemeral,
    )
    .await;
    // Another layout's tree under another root is not read.
    zk_create(
        &client,
        &provider_node(DEMO, &demo_url("127.168.1.10:20880", "")),
        b"",
        zk::CreateMode::Persistent,
    )
    .await;

    let mut source = open(&format!("zookeeper://{}?layout=dubbo3", zookeeper.addr()));
    let snapshot = source.list().await.expect("list");
    assert_eq!(snapshot.services.len(), 1);
    let listed = &snapshot.services[&ServiceName::plain("demo-provider")];
    assert_eq!(addrs(listed), vec!["127.168.1.10:20880"]);
    assert_eq!(listed[0].metadata["dubbo.metadata.revision"], "rev-1");
    assert_eq!(
        listed[0].metadata["dubbo.endpoints"],
        "[{\"port\":20880,\"protocol\":\"dubbo\"}]"
    );

    // A new metadata revision, then a second instance.
    client
        .set_data(
            first,
            &dubbo3_instance("127.168.1.10", 20880, "rev-2"),
            None,
        )
        .await
        .expect("set_data");
    watch_until(&mut source, "demo-provider", |l| {
        l.iter()
            .any(|i| i.metadata["dubbo.metadata.revision"] == "rev-2")
    })
    .await;
    let second = "/services/demo-provider/127.168.1.11:20880";
    zk_create(
        &client,
        second,
        &dubbo3_instance("127.168.1.11", 20880, "rev-2"),
        zk::CreateMode::Ephemeral,
    )
    .await;
    watch_until(&mut source, "demo-provider", |l| l.len() == 2).await;
    zk_delete(&client, first).await;
    let now = watch_until(&mut source, "demo-provider", |l| l.len() == 1).await;
    assert_eq!(addrs(&now), vec!["127.168.1.11:20880"]);
}

/// A ZooKeeper server holding one Dubbo provider of `DEMO`, and a source that listed it:
/// the server, the provider's node path, its service name and the source.
async fn zk_with_one_provider() -> (ZooKeeper, String, String, Box<dyn Source>) {
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    let first = provider_node(DEMO, &demo_url("127.168.1.10:20880", ""));
    zk_create(&client, &first, b"", zk::CreateMode::Persistent).await;
    drop(client);
    let service = format!("providers:{DEMO}:1.0.0:g1");
    let mut source = open(&format!("zookeeper://{}", zookeeper.addr()));
    assert_eq!(list_service(&mut source, &service).await.len(), 1);
    (zookeeper, first, service, source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_outage_fails_the_watch_and_recovery_relists() {
    let (mut zookeeper, first, service, mut source) = zk_with_one_provider().await;

    zookeeper.stop();
    match next_answer(&mut source).await {
        Err(SourceError::Unreachable(m)) => assert!(m.contains("ZooKeeper"), "{m}"),
        other => panic!("expected Unreachable from the watch, got {other:?}"),
    }

    zookeeper.start_again();
    let client = zookeeper.client().await;
    let second = provider_node(DEMO, &demo_url("127.168.1.11:20880", ""));
    zk_create(&client, &second, b"", zk::CreateMode::Persistent).await;
    let snapshot = list_until_ok(&mut source).await;
    let now = &snapshot.services[&ServiceName::plain(&service)];
    assert_eq!(addrs(now), vec!["127.168.1.10:20880", "127.168.1.11:20880"]);
    // And the watch works again.
    zk_delete(&client, &first).await;
    watch_until(&mut source, &service, |l| l.len() == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_brief_disconnect_answers_resync() {
    let (mut zookeeper, _first, service, mut source) = zk_with_one_provider().await;

    // The server restarts while the watch waits; the session survives, but node events
    // may have been lost meanwhile, so the source asks to be listed again.
    zookeeper.stop();
    let restart = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(500));
        zookeeper.start_again();
        zookeeper
    });
    match next_answer(&mut source).await {
        Ok(Update::Resync) => {}
        other => panic!("expected Resync after a reconnection, got {other:?}"),
    }
    let zookeeper = restart.await.expect("restart");
    let client = zookeeper.client().await;
    let second = provider_node(DEMO, &demo_url("127.168.1.11:20880", ""));
    zk_create(&client, &second, b"", zk::CreateMode::Persistent).await;
    let snapshot = list_until_ok(&mut source).await;
    assert_eq!(snapshot.services[&ServiceName::plain(&service)].len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_watches_answer_nothing_changed() {
    let etcd = Etcd::start();
    etcd.put(
        "/micro/registry/idle/i-1",
        &micro("idle", "i-1", "127.0.0.1:80", None),
    );
    let zookeeper = ZooKeeper::start();
    let client = zookeeper.client().await;
    zk_create(
        &client,
        &provider_node(DEMO, &demo_url("127.168.1.10:20880", "")),
        b"",
        zk::CreateMode::Persistent,
    )
    .await;
    let mut etcd_source = open(&format!("etcd://{}", etcd.addr()));
    let mut zk_source = open(&format!("zookeeper://{}", zookeeper.addr()));
    etcd_source.list().await.expect("etcd list");
    zk_source.list().await.expect("zk list");

    // Nothing changes: each watch says so within about 30 s, not later, not sooner.
    let started = Instant::now();
    let limit = Duration::from_secs(40);
    let (from_etcd, from_zk) = tokio::join!(
        tokio::time::timeout(limit, etcd_source.watch()),
        tokio::time::timeout(limit, zk_source.watch()),
    );
    let waited = started.elapsed();
    for (name, answer) in [("etcd", from_etcd), ("zookeeper", from_zk)] {
        match answer {
            Ok(Ok(Update::Services(services))) => {
                assert!(services.is_empty(), "{name}: {services:?}")
            }
            other => panic!("{name}: expected an empty update, got {other:?}"),
        }
    }
    assert!(
        waited >= Duration::from_secs(15),
        "answered after only {waited:?}"
    );
}
