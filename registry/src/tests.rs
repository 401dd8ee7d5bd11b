//! Registry core tests: plain calls with explicit time, no clock and no sleeping.

use super::*;
use crate::guard::EvictionGuard;
use crate::namespace::NamespaceInfo;
use crate::service::ServiceSettings;

fn key(name: &str) -> ServiceKey {
    ServiceKey::new("public", "DEFAULT_GROUP", name)
}

fn reg(ip: &str, port: u16, ephemeral: bool) -> Registration {
    Registration {
        ip: ip.into(),
        port,
        cluster: "DEFAULT".into(),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral,
        metadata: Metadata::new(),
        instance_id: None,
        client: None,
        owner: None,
    }
}

/// One expiry pass at `now_ms` on a lone node (it judges every client) with the default
/// eviction guard.
fn sweep(r: &Registry, now_ms: u64) -> ExpiryReport {
    r.expire_due(now_ms, &|_| true, &EvictionGuard::default())
}

fn ports(r: &Registry, name: &str) -> Vec<(u16, bool)> {
    let svc = r
        .service("public", &format!("DEFAULT_GROUP@@{name}"))
        .expect("service");
    svc.view()
        .instances
        .values()
        .map(|i| (i.port, i.healthy))
        .collect()
}

#[test]
fn register_then_deregister() {
    let r = Registry::new();
    r.register(&key("a"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    r.register(&key("a"), &reg("10.0.0.2", 80, true), 0)
        .unwrap();
    assert_eq!(ports(&r, "a").len(), 2);
    let svc = r.service_by_key(&key("a")).unwrap();
    let inst = svc.view().instances.values().next().unwrap().clone();
    assert_eq!(inst.instance_id(), None, "the default id is not stored");
    assert_eq!(
        inst.id(&svc.grouped),
        "10.0.0.1#80#DEFAULT#DEFAULT_GROUP@@a"
    );
    assert!(r.deregister(&key("a"), "10.0.0.1", 80, None, 1));
    assert!(
        !r.deregister(&key("a"), "10.0.0.1", 80, None, 1),
        "second time is a no-op"
    );
    assert_eq!(ports(&r, "a"), [(80, true)]);
    // The empty service is kept.
    r.deregister(&key("a"), "10.0.0.2", 80, Some(true), 2);
    assert!(ports(&r, "a").is_empty());
}

#[test]
fn kinds_do_not_mix() {
    let r = Registry::new();
    r.register(&key("a"), &reg("10.0.0.1", 80, false), 0)
        .unwrap();
    let err = r
        .register(&key("a"), &reg("10.0.0.2", 80, true), 0)
        .unwrap_err();
    assert!(matches!(err, RegistryError::KindConflict { .. }), "{err}");
    assert!(r.kind_conflict(&key("a"), true).is_some());
    assert!(r.kind_conflict(&key("a"), false).is_none());
    // Deregistering with the wrong kind leaves the instance alone.
    assert!(!r.deregister(&key("a"), "10.0.0.1", 80, Some(true), 0));
    assert!(r.deregister(&key("a"), "10.0.0.1", 80, Some(false), 0));
    r.register(&key("a"), &reg("10.0.0.2", 80, true), 0)
        .unwrap();
}

#[test]
fn operator_updates_survive_re_registration() {
    let r = Registry::new();
    r.register(&key("a"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    let patch = InstancePatch {
        enabled: Some(false),
        ..Default::default()
    };
    r.update_instance(&key("a"), "10.0.0.1", 80, true, &patch, 1)
        .unwrap();
    let mut again = reg("10.0.0.1", 80, true);
    again.weight = 5.0;
    r.register(&key("a"), &again, 2).unwrap();
    let svc = r.service_by_key(&key("a")).unwrap();
    let inst = svc.view().instances.values().next().unwrap().clone();
    assert!(!inst.enabled, "operator's disable is kept");
    assert_eq!(inst.weight, 5.0, "unpinned fields follow the client");
    let missing = r
        .update_instance(&key("a"), "10.0.0.9", 80, true, &patch, 3)
        .unwrap_err();
    assert!(matches!(missing, RegistryError::InstanceNotFound { .. }));
    let no_service = r
        .update_instance(&key("zz"), "10.0.0.9", 80, true, &patch, 3)
        .unwrap_err();
    assert!(matches!(no_service, RegistryError::ServiceNotFound(_)));
}

#[test]
fn silence_makes_unhealthy_then_removes() {
    let r = Registry::new();
    let mut short = reg("10.0.0.1", 80, true);
    short
        .metadata
        .insert(instance::BEAT_TIMEOUT_KEY.into(), "3000".into());
    short
        .metadata
        .insert(instance::DELETE_TIMEOUT_KEY.into(), "6000".into());
    r.register(&key("a"), &short, 1_000).unwrap();
    r.register(&key("a"), &reg("10.0.0.2", 80, true), 1_000)
        .unwrap();

    assert_eq!(sweep(&r, 3_999), ExpiryReport::default());
    assert_eq!(sweep(&r, 4_001).unhealthy, 1);
    assert_eq!(ports(&r, "a"), [(80, false), (80, true)]);

    // A beat revives it and pushes its deadlines out.
    assert_eq!(
        r.beat(&key("a"), "10.0.0.1", 80, 5_000).unwrap().timeout_ms,
        3000
    );
    assert_eq!(ports(&r, "a"), [(80, true), (80, true)]);
    assert_eq!(sweep(&r, 7_001), ExpiryReport::default());
    assert_eq!(sweep(&r, 8_001).unhealthy, 1);
    assert_eq!(sweep(&r, 11_001).removed, 1);
    assert_eq!(ports(&r, "a"), [(80, true)]);
    // The default-timeout instance follows Nacos' 15 s / 30 s.
    assert_eq!(sweep(&r, 16_001).unhealthy, 1);
    assert_eq!(sweep(&r, 31_001).removed, 1);
    assert!(ports(&r, "a").is_empty());
    assert!(r.beat(&key("a"), "10.0.0.1", 80, 40_000).is_none());
}

#[test]
fn persistent_instances_never_expire() {
    let r = Registry::new();
    r.register(&key("p"), &reg("10.0.0.1", 80, false), 0)
        .unwrap();
    assert_eq!(sweep(&r, 1_000_000), ExpiryReport::default());
    assert_eq!(ports(&r, "p"), [(80, true)]);
    assert!(r.beat(&key("p"), "10.0.0.1", 80, 1).is_none());
}

#[test]
fn services_delete_only_when_empty() {
    let r = Registry::new();
    r.create_service(&key("s"), &ServiceSettings::default(), 0)
        .unwrap();
    assert!(matches!(
        r.create_service(&key("s"), &ServiceSettings::default(), 0),
        Err(RegistryError::ServiceExists(_))
    ));
    r.register(&key("s"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    assert!(matches!(
        r.check_deletable(&key("s")),
        Err(RegistryError::ServiceNotEmpty(_))
    ));
    // Applied anyway (a registration raced the check): settings go, the service stays.
    r.delete_service(&key("s"), 1);
    assert!(r
        .service_by_key(&key("s"))
        .unwrap()
        .view()
        .settings
        .is_none());
    r.deregister(&key("s"), "10.0.0.1", 80, None, 1);
    r.check_deletable(&key("s")).unwrap();
    r.delete_service(&key("s"), 2);
    assert!(r.service_by_key(&key("s")).is_none());
    assert!(matches!(
        r.check_deletable(&key("s")),
        Err(RegistryError::ServiceNotFound(_))
    ));
}

#[test]
fn sweep_removes_only_idle_implicit_services() {
    let r = Registry::new();
    r.create_service(&key("kept"), &ServiceSettings::default(), 0)
        .unwrap();
    r.register(&key("gone"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    r.deregister(&key("gone"), "10.0.0.1", 80, None, 10);
    assert!(r.sweep_empty(100, 50).is_empty());
    assert_eq!(r.sweep_empty(100, 110), [key("gone")]);
    assert!(r.service_by_key(&key("kept")).is_some());
}

#[test]
fn namespaces_guard_their_services() {
    let r = Registry::new();
    let dev = NamespaceInfo {
        id: "dev".into(),
        name: "Dev".into(),
        description: "".into(),
    };
    r.create_namespace(&dev).unwrap();
    assert!(matches!(
        r.create_namespace(&dev),
        Err(RegistryError::NamespaceExists(_))
    ));
    let k = ServiceKey::new("dev", "DEFAULT_GROUP", "x");
    r.register(&k, &reg("10.0.0.1", 80, true), 0).unwrap();
    assert!(matches!(
        r.check_namespace_deletable("dev"),
        Err(RegistryError::NamespaceNotEmpty { services: 1, .. })
    ));
    assert!(matches!(
        r.check_namespace_deletable("public"),
        Err(RegistryError::PublicNamespace)
    ));
    r.deregister(&k, "10.0.0.1", 80, None, 1);
    r.delete_service(&k, 2);
    r.check_namespace_deletable("dev").unwrap();
    r.delete_namespace("dev").unwrap();
    assert_eq!(
        r.namespaces()
            .iter()
            .map(|n| n.id.to_string())
            .collect::<Vec<_>>(),
        ["public"]
    );
}

#[test]
fn persistent_data_round_trips_and_keeps_ephemeral() {
    let r = Registry::new();
    r.create_namespace(&NamespaceInfo {
        id: "dev".into(),
        name: "Dev".into(),
        description: "d".into(),
    })
    .unwrap();
    r.register(&key("p"), &reg("10.0.0.1", 80, false), 0)
        .unwrap();
    r.register(&key("e"), &reg("10.0.0.2", 80, true), 0)
        .unwrap();
    r.create_service(
        &key("s"),
        &ServiceSettings {
            protect_threshold: 0.5,
            ..Default::default()
        },
        0,
    )
    .unwrap();
    let data = r.persistent_data();
    let bytes = rmp_serde::to_vec_named(&data).unwrap();
    let decoded: PersistentData = rmp_serde::from_slice(&bytes).unwrap();

    let fresh = Registry::new();
    fresh
        .register(&key("e2"), &reg("10.0.0.3", 80, true), 0)
        .unwrap();
    fresh
        .register(&key("p"), &reg("10.0.0.9", 80, false), 0)
        .unwrap();
    fresh.restore_persistent(&decoded, 5);
    assert_eq!(ports(&fresh, "p"), [(80, true)]);
    let p = fresh.service_by_key(&key("p")).unwrap().view();
    assert_eq!(
        p.instances.values().next().unwrap().ip(),
        "10.0.0.1",
        "restore replaces persistent state"
    );
    assert_eq!(ports(&fresh, "e2").len(), 1, "ephemeral instances stay");
    assert!(fresh
        .service_by_key(&key("e"))
        .is_none_or(|s| s.view().instances.is_empty()));
    let s = fresh.service_by_key(&key("s")).unwrap().view();
    assert_eq!(s.settings.as_ref().unwrap().protect_threshold, 0.5);
    assert_eq!(
        fresh.namespace("dev").unwrap().info().unwrap().description,
        "d"
    );
}

#[test]
fn changes_are_marked_for_watchers() {
    let r = Registry::new();
    let watch = r.watch();
    r.register(&key("a"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    r.register(&key("a"), &reg("10.0.0.2", 80, true), 0)
        .unwrap();
    // Re-registering an identical instance is not a change.
    assert_eq!(watch.drain(), [key("a")]);
    r.register(&key("a"), &reg("10.0.0.2", 80, true), 1)
        .unwrap();
    assert!(watch.drain().is_empty());
}

#[test]
fn a_beat_into_a_replaced_version_is_carried_over() {
    let r = Registry::new();
    r.register(&key("b"), &reg("10.0.0.1", 80, true), 1_000)
        .unwrap();
    let svc = r.service_by_key(&key("b")).unwrap();
    let clock_of = |r: &Registry| {
        let view = r.service_by_key(&key("b")).unwrap().view();
        let inst = view.instances.get("10.0.0.1:80").unwrap().clone();
        inst.clock().unwrap().last_beat_ms()
    };
    // A writer copies the clock into a new version; a beat then lands in the old version
    // before the new one is published (the window a lock-free beat can hit).
    let old = svc.view().instances.get("10.0.0.1:80").unwrap().clone();
    svc.update(2_000, |view| {
        let next = Instance {
            weight: 2.0,
            ..Instance::clone(&old)
        };
        view.instances.insert(Arc::new(next));
        old.clock().unwrap().beat(9_000);
        (Changed::Yes, ())
    })
    .unwrap();
    assert_eq!(
        clock_of(&r),
        9_000,
        "the late beat reached the published version"
    );

    // A later change of health keeps the clock, and a beat through the registry lands in
    // the current version.
    assert!(r.set_health(&key("b"), "10.0.0.1", 80, true, false, 9_500));
    assert_eq!(clock_of(&r), 9_000);
    r.beat(&key("b"), "10.0.0.1", 80, 12_000).unwrap();
    assert_eq!(clock_of(&r), 12_000);
    assert_eq!(ports(&r, "b"), [(80, true)], "the beat revived it");
}

#[test]
fn a_new_instance_brings_the_next_sweep_forward() {
    let r = Registry::new();
    r.register(&key("s"), &reg("10.0.0.1", 80, true), 0)
        .unwrap();
    // Swept once: nothing is due before the default 15 s.
    assert_eq!(sweep(&r, 100), ExpiryReport::default());
    // An instance with a 1 s timeout joins; its deadline, not the service's old one,
    // decides when the service is looked at next.
    let mut short = reg("10.0.0.2", 80, true);
    short
        .metadata
        .insert(instance::BEAT_TIMEOUT_KEY.into(), "1000".into());
    r.register(&key("s"), &short, 200).unwrap();
    assert_eq!(sweep(&r, 1_100), ExpiryReport::default());
    assert_eq!(sweep(&r, 1_300).unhealthy, 1);
    assert_eq!(ports(&r, "s"), [(80, true), (80, false)]);
}

#[test]
fn a_view_shows_every_finished_write_and_never_changes_after() {
    let r = Registry::new();
    r.register(&key("v"), &reg("10.0.0.1", 80, true), 1_000)
        .unwrap();
    let svc = r.service_by_key(&key("v")).unwrap();
    let first = svc.view();
    // Writes with no read in between change the service's state in place, unpublished.
    for port in 81..=90 {
        r.register(&key("v"), &reg("10.0.0.1", port, true), 2_000)
            .unwrap();
    }
    r.deregister(&key("v"), "10.0.0.1", 80, Some(true), 3_000);
    assert_eq!(first.instances.len(), 1, "a published view never changes");
    assert_eq!(first.revision, 1);

    // The next reader sees all of them, counted.
    let now = svc.view();
    assert_eq!(
        now.instances.values().map(|i| i.port).collect::<Vec<_>>(),
        (81..=90).collect::<Vec<_>>()
    );
    assert_eq!(now.revision, 12);
    assert_eq!(now.modified_ms, 3_000);
    assert!(Arc::ptr_eq(&now, &svc.view()), "no change, no new view");

    // A re-registration that changes nothing neither counts nor republishes.
    r.register(&key("v"), &reg("10.0.0.1", 81, true), 4_000)
        .unwrap();
    assert!(Arc::ptr_eq(&now, &svc.view()));
}
