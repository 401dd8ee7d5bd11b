//! The Consul and Eureka sync sources against the fakes of `roster_tests::fixtures`:
//! sources opened with `roster_sync::open` are listed and watched directly while the tests
//! change the fakes. Consul's server is not under an open-source licence; Eureka's is, and
//! `java_clients::eureka` runs the real one (listing, deltas, lost deltas, deltas disabled,
//! lease expiry, a dead server): what stays here for Eureka is what the real server cannot
//! be made to do (basic auth, an HTTP 500).

use std::collections::BTreeMap;
use std::time::Duration;

use roster_sync::{Filter, ServiceName, Services, Source, SourceError, SourceInstance, Update};
use roster_tests::fixtures::{
    ConsulOptions, ConsulService, EurekaInstance, EurekaOptions, FakeConsul, FakeEureka,
};
use roster_tests::source_addrs as addrs;
use tokio::time::{sleep, timeout, Instant};

/// The longest a change may take to show up in a watch.
const CHANGE_WITHIN: Duration = Duration::from_secs(15);

/// Opens the source `url` names with `filter` (`None`: every service).
fn open(url: &str, filter: Option<&str>) -> Box<dyn Source> {
    let url = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    let filter = Filter::parse(filter).unwrap();
    roster_sync::open(&url, &filter).unwrap_or_else(|e| panic!("open: {e}"))
}

/// The instance at `ip:port` of `service`.
fn instance<'a>(services: &'a Services, service: &str, addr: &str) -> &'a SourceInstance {
    services
        .get(&ServiceName::plain(service))
        .unwrap_or_else(|| panic!("no service {service} in {services:?}"))
        .iter()
        .find(|i| format!("{}:{}", i.ip, i.port) == addr)
        .unwrap_or_else(|| panic!("no {addr} in {service}"))
}

/// Watches until an update names some service; fails on a resync, an error or after
/// [`CHANGE_WITHIN`].
async fn next_changes(source: &mut dyn Source) -> Services {
    let deadline = Instant::now() + CHANGE_WITHIN;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match timeout(left, source.watch()).await {
            Err(_) => panic!("no change within {CHANGE_WITHIN:?}"),
            Ok(Ok(Update::Services(changes))) if changes.is_empty() => continue,
            Ok(Ok(Update::Services(changes))) => return changes,
            Ok(other) => panic!("expected changes, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Consul

/// `order-service` with two instances (one using its node's address), `payment-service`
/// with one, and a sidecar proxy.
fn consul_with_services() -> FakeConsul {
    let consul = FakeConsul::start();
    consul.register(ConsulService {
        tags: vec!["secure=false".into(), "v1".into()],
        meta: BTreeMap::from([
            ("zone".into(), "az1".into()),
            ("version".into(), "1.4.2".into()),
        ]),
        weights: (10, 1),
        ..ConsulService::new("order-service", "127.1.10.12", 8080)
    });
    consul.register(ConsulService {
        address: String::new(),
        ..ConsulService::new("order-service", "127.1.10.13", 8080)
    });
    consul.register(ConsulService::new("payment-service", "127.1.11.7", 9000));
    consul.register(ConsulService {
        kind: "connect-proxy".into(),
        ..ConsulService::new("order-service-sidecar-proxy", "127.1.10.12", 21000)
    });
    consul
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_list_maps_services_and_skips_consul_and_proxies() {
    let consul = consul_with_services();
    let mut source = open(&consul.url(), None);
    let snapshot = timeout(CHANGE_WITHIN, source.list())
        .await
        .unwrap()
        .unwrap();
    assert!(!snapshot.partial);
    let names: Vec<&str> = snapshot.services.keys().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["order-service", "payment-service"],
        "no consul, no proxy"
    );

    let order = &snapshot.services[&ServiceName::plain("order-service")];
    assert_eq!(addrs(order), vec!["127.1.10.12:8080", "127.1.10.13:8080"]);
    let a = instance(&snapshot.services, "order-service", "127.1.10.12:8080");
    assert_eq!(a.weight, 10.0);
    assert!(a.healthy && a.enabled);
    assert_eq!(a.cluster, "DEFAULT");
    assert_eq!(a.source_id, "node-127.1.10.12/order-service-8080");
    assert_eq!(a.metadata["zone"], "az1");
    assert_eq!(a.metadata["secure"], "false", "k=v tag");
    assert_eq!(a.metadata["consul.datacenter"], "dc1");
    assert_eq!(a.metadata["consul.tags"], "secure=false,v1");
    // Service.Address empty: the node's address.
    let b = instance(&snapshot.services, "order-service", "127.1.10.13:8080");
    assert_eq!(b.source_id, "node-127.1.10.13/order-service-8080");

    // The filter keeps the other services' health from being read at all (a fresh
    // fake: the watch tasks of `source` read order-service in the background).
    let fresh = consul_with_services();
    let mut only_pay = open(&fresh.url(), Some("payment-*"));
    let snapshot = only_pay.list().await.unwrap();
    assert_eq!(snapshot.services.len(), 1);
    assert_eq!(fresh.requests_to("/v1/health/service/order-service"), 0);
    assert!(fresh.requests_to("/v1/health/service/payment-service") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_blocking_query_sees_change_within_seconds() {
    let consul = consul_with_services();
    let mut source = open(&consul.url(), None);
    source.list().await.unwrap();

    // Blocking queries hang instead of polling: in a quiet second the watch tasks
    // (catalog + two services) make at most one request each.
    let watching = tokio::spawn(async move {
        let changes = next_changes(source.as_mut()).await;
        (source, changes, Instant::now())
    });
    sleep(Duration::from_millis(500)).await;
    let quiet_start = consul.requests();
    sleep(Duration::from_millis(1500)).await;
    assert!(
        consul.requests() - quiet_start <= 3,
        "{} requests in a quiet 1.5 s: polling, not blocking",
        consul.requests() - quiet_start
    );

    let changed_at = Instant::now();
    consul.register(ConsulService::new("payment-service", "127.1.11.8", 9000));
    let (_source, changes, seen_at) = timeout(CHANGE_WITHIN, watching).await.unwrap().unwrap();
    assert!(
        seen_at - changed_at < Duration::from_secs(3),
        "seen after {:?}",
        seen_at - changed_at
    );
    assert_eq!(changes.len(), 1, "only the changed service: {changes:?}");
    assert_eq!(
        addrs(&changes[&ServiceName::plain("payment-service")]),
        vec!["127.1.11.7:9000", "127.1.11.8:9000"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_blocking_query_reports_new_and_removed_services() {
    let consul = consul_with_services();
    let mut source = open(&consul.url(), None);
    source.list().await.unwrap();

    consul.register(ConsulService::new("inventory", "127.1.12.1", 7000));
    let changes = next_changes(source.as_mut()).await;
    assert_eq!(
        addrs(&changes[&ServiceName::plain("inventory")]),
        vec!["127.1.12.1:7000"]
    );

    assert!(consul.deregister("node-127.1.11.7", "payment-service-9000"));
    let changes = next_changes(source.as_mut()).await;
    assert_eq!(changes[&ServiceName::plain("payment-service")], Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_critical_check_marks_unhealthy_and_maintenance_disables() {
    let consul = consul_with_services();
    let mut source = open(&consul.url(), None);
    source.list().await.unwrap();
    let node = "node-127.1.10.12";
    let id = "order-service-8080";

    assert!(consul.set_status(node, id, "critical"));
    let changes = next_changes(source.as_mut()).await;
    let a = instance(&changes, "order-service", "127.1.10.12:8080");
    assert!(!a.healthy && a.enabled);

    assert!(consul.set_status(node, id, "warning"));
    let changes = next_changes(source.as_mut()).await;
    let a = instance(&changes, "order-service", "127.1.10.12:8080");
    assert!(a.healthy);
    assert_eq!(a.weight, 1.0, "Weights.Warning while warning");

    assert!(consul.set_maintenance(node, id, true));
    let changes = next_changes(source.as_mut()).await;
    let a = instance(&changes, "order-service", "127.1.10.12:8080");
    assert!(!a.enabled, "maintenance disables");
    assert!(
        a.healthy,
        "the maintenance check itself does not make it unhealthy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_acl_token_and_filtered_answer_is_partial() {
    let consul = FakeConsul::start_with(ConsulOptions {
        token: Some("s3cret".into()),
        ..ConsulOptions::default()
    });
    consul.register(ConsulService::new("web", "127.2.0.1", 80));
    consul.register(ConsulService::new("vault", "127.2.0.2", 8200));

    let mut anonymous = open(&consul.url(), None);
    let err = anonymous.list().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Refused(m) if m.contains("403") && m.contains("ACL not found")),
        "{err:?}"
    );

    let mut source = open(&format!("{}?token=s3cret", consul.url()), None);
    assert!(!source.list().await.unwrap().partial);

    consul.hide(&["vault"]);
    let snapshot = source.list().await.unwrap();
    assert!(snapshot.partial, "filtered by ACLs: partial");
    assert_eq!(
        addrs(&snapshot.services[&ServiceName::plain("web")]),
        vec!["127.2.0.1:80"]
    );
    assert!(!snapshot.services.contains_key(&ServiceName::plain("vault")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_server_error_fails_list_and_watch() {
    let consul = consul_with_services();
    let mut source = open(&consul.url(), None);
    consul.fail_with(Some(500));
    let err = timeout(CHANGE_WITHIN, source.list())
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::Unreachable(m) if m.contains("HTTP 500")),
        "{err:?}"
    );

    consul.fail_with(None);
    source.list().await.unwrap();
    // The blocking queries hang; failing the server does not end them, a change does:
    // their answers may still report it, then the follow-up queries meet the failure.
    consul.fail_with(Some(503));
    consul.register(ConsulService::new("payment-service", "127.1.11.9", 9000));
    let deadline = Instant::now() + CHANGE_WITHIN;
    let err = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match timeout(left, source.watch()).await {
            Err(_) => panic!("no error within {CHANGE_WITHIN:?}"),
            Ok(Ok(Update::Services(_))) => continue,
            Ok(Ok(Update::Resync)) => panic!("expected an error, got a resync"),
            Ok(Ok(Update::Configs(_))) => panic!("expected an error, got configurations"),
            Ok(Err(e)) => break e,
        }
    };
    assert!(
        matches!(&err, SourceError::Unreachable(m) if m.contains("HTTP 503")),
        "{err:?}"
    );
    // After an error, the runner lists again; until then, watch asks for that.
    assert!(matches!(source.watch().await, Ok(Update::Resync)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consul_fake_dc_param_selects_the_datacenter() {
    let consul = consul_with_services();
    let mut right = open(&format!("{}?dc=dc1", consul.url()), None);
    assert_eq!(right.list().await.unwrap().services.len(), 2);
    let mut wrong = open(&format!("{}?dc=dc9", consul.url()), None);
    let err = wrong.list().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Unreachable(m) if m.contains("No path to datacenter")),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Eureka

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eureka_fake_basic_auth_and_server_error() {
    let eureka = FakeEureka::start_with(EurekaOptions {
        basic_auth: Some(("sync".into(), "pa55".into())),
    });
    eureka.register(EurekaInstance::new("web", "127.3.0.1", 80));
    let mut anonymous = open(&eureka.url(), None);
    let err = anonymous.list().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Refused(m) if m.contains("401")),
        "{err:?}"
    );

    let url = format!("eureka://sync:pa55@{}/eureka", eureka.addr());
    let mut source = open(&url, None);
    assert_eq!(source.list().await.unwrap().services.len(), 1);

    eureka.fail_with(Some(500));
    let err = source.list().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Unreachable(m) if m.contains("HTTP 500")),
        "{err:?}"
    );
}
