use super::*;

fn publish(key: &ConfigKey, content: &str, cas: Option<&str>) -> Publish {
    Publish {
        key: key.clone(),
        content: content.to_string(),
        r#type: None,
        app_name: None,
        desc: None,
        tags: None,
        cas_md5: cas.map(str::to_string),
        by: "nacos".into(),
        src_ip: "127.0.0.1".into(),
        retention: Retention::default(),
    }
}

#[test]
fn md5_is_nacos_md5() {
    // As Nacos' MD5Utils.md5Hex over UTF-8.
    assert_eq!(md5_hex("中文"), "a7bac2239fcdcb3a067903d8077c4a07");
    assert_eq!(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
}

#[test]
fn publish_get_and_compare_and_set() {
    let configs = Configs::new();
    let key = ConfigKey::new("", "mapping", "org.demo.Api");
    assert_eq!(key.namespace, "public");
    assert_eq!(key.tenant(), "");
    // A compare-and-set against an item that does not exist is refused ...
    assert_eq!(
        configs.publish(&publish(&key, "app-a", Some("nope")), 1),
        Err(ConfigRejection::CasMismatch)
    );
    assert!(configs.get(&key).is_none());
    // ... unless it expects no item: Dubbo 3 creates an interface's mapping with
    // `casMd5=0`, and a second provider's insert from the same read is refused.
    configs
        .publish(&publish(&key, "app-a", Some(CAS_ABSENT)), 10)
        .unwrap();
    assert_eq!(
        configs.publish(&publish(&key, "app-x", Some(CAS_ABSENT)), 11),
        Err(ConfigRejection::CasMismatch)
    );
    let item = configs.get(&key).unwrap();
    assert_eq!(&*item.content, "app-a");
    assert_eq!(item.md5, md5_hex("app-a"));
    assert_eq!(item.r#type, "text");
    assert_eq!((item.created_ms, item.modified_ms), (10, 10));
    // Two appends from the same read: the first wins, the second is refused.
    let seen = item.md5.clone();
    configs
        .publish(&publish(&key, "app-a,app-b", Some(&seen)), 20)
        .unwrap();
    assert_eq!(
        configs.publish(&publish(&key, "app-a,app-c", Some(&seen)), 21),
        Err(ConfigRejection::CasMismatch)
    );
    let item = configs.get(&key).unwrap();
    assert_eq!(&*item.content, "app-a,app-b");
    assert_eq!((item.created_ms, item.modified_ms), (10, 20));
    assert!(configs.is_changed(&key, &seen));
    assert!(!configs.is_changed(&key, &item.md5));
}

#[test]
fn absent_attributes_keep_the_stored_ones() {
    let configs = Configs::new();
    let key = ConfigKey::new("dev", "G", "app.yaml");
    let mut first = publish(&key, "a: 1", None);
    first.r#type = Some("yaml".into());
    first.app_name = Some("shop".into());
    first.tags = Some("x,y".into());
    configs.publish(&first, 1).unwrap();
    configs.publish(&publish(&key, "a: 2", None), 2).unwrap();
    let item = configs.get(&key).unwrap();
    assert_eq!(
        (
            item.r#type.as_str(),
            item.app_name.as_str(),
            item.tags.as_str()
        ),
        ("yaml", "shop", "x,y")
    );
}

#[test]
fn history_keeps_each_version_within_retention() {
    let configs = Configs::new();
    let key = ConfigKey::new("", "G", "d");
    let keep = Retention {
        max_age_ms: 1_000,
        max_versions: 3,
    };
    for (i, at) in [(1, 100), (2, 200), (3, 300), (4, 400)] {
        let mut p = publish(&key, &format!("v{i}"), None);
        p.retention = keep;
        configs.publish(&p, at).unwrap();
    }
    let history = configs.history(&key);
    let contents: Vec<&str> = history.iter().map(|v| &*v.content).collect();
    assert_eq!(contents, ["v4", "v3", "v2"], "at most three, newest first");
    assert_eq!(history[2].op, Op::Update);
    let previous = configs.previous(&key, history[0].id).unwrap();
    assert_eq!(&*previous.content, "v3");
    assert_eq!(configs.version(&key, history[1].id).unwrap(), history[1]);
    // Deleting records the deleted content; time then prunes all but the newest.
    assert!(configs.remove(&key, "ann", "127.0.0.2", keep, 5_000));
    assert!(!configs.remove(&key, "ann", "127.0.0.2", keep, 5_001));
    let history = configs.history(&key);
    assert_eq!(history.len(), 1);
    assert_eq!((history[0].op, &*history[0].content), (Op::Delete, "v4"));
    assert_eq!(history[0].by, "ann");
    assert_eq!(configs.keys_with_history("public"), vec![key.clone()]);
    assert!(configs.get(&key).is_none());
    assert!(configs.is_changed(&key, "whatever"));
    assert!(!configs.is_changed(&key, ""));
}

#[test]
fn search_exact_and_blur_with_paging() {
    let configs = Configs::new();
    for (ns, group, id) in [
        ("", "DEFAULT_GROUP", "shop.yaml"),
        ("", "DEFAULT_GROUP", "shop-db.yaml"),
        ("", "mapping", "org.demo.Api"),
        ("dev", "DEFAULT_GROUP", "shop.yaml"),
    ] {
        let mut p = publish(&ConfigKey::new(ns, group, id), "x", None);
        p.app_name = Some("shop".into());
        p.tags = Some("blue".into());
        configs.publish(&p, 1).unwrap();
    }
    let all = |s: &Search| configs.search(s, |_, _| true, 1, 100);
    let public = Search {
        namespace: Some("public"),
        ..Default::default()
    };
    assert_eq!(all(&public).total, 3);
    let exact = Search {
        data_id: Some("shop.yaml"),
        ..public.clone()
    };
    assert_eq!(all(&exact).total, 1);
    let blur = Search {
        data_id: Some("shop*"),
        blur: true,
        ..public.clone()
    };
    assert_eq!(all(&blur).total, 2);
    let part = Search {
        data_id: Some("db"),
        blur: true,
        ..public.clone()
    };
    assert_eq!(all(&part).items[0].0.data_id, "shop-db.yaml");
    let tagged = Search {
        tags: vec!["blue"],
        app_name: Some("shop"),
        ..Default::default()
    };
    assert_eq!(all(&tagged).total, 4);
    let page2 = configs.search(&Search::default(), |_, _| true, 2, 3);
    assert_eq!((page2.total, page2.items.len()), (4, 1));
    let visible = configs.search(&Search::default(), |k, _| k.namespace == "dev", 1, 3);
    assert_eq!(
        (visible.total, visible.items[0].0.namespace.as_str()),
        (1, "dev")
    );
    assert_eq!(configs.count_in("dev"), 1);
    assert!(
        search::glob("a*b*c", "aXbYc") && !search::glob("a*b*c", "aXc") && search::glob("*", "")
    );
}

#[test]
fn a_snapshot_restores_items_history_and_ids() {
    let configs = Configs::new();
    let key = ConfigKey::new("", "G", "d");
    configs.publish(&publish(&key, "one", None), 1).unwrap();
    configs.publish(&publish(&key, "two", None), 2).unwrap();
    let data = configs.data();
    let restored = Configs::new();
    restored.restore(&data);
    assert_eq!(restored.data(), data);
    assert_eq!(restored.drain_changes(), vec![key.clone()]);
    // Ids go on from where the snapshot left them.
    restored.publish(&publish(&key, "three", None), 3).unwrap();
    assert_eq!(restored.history(&key)[0].id, 3);
}

#[tokio::test]
async fn changes_wake_the_consumer_and_every_waiter() {
    let configs = Configs::new();
    let mut waiter = configs.watch();
    let key = ConfigKey::new("", "G", "d");
    configs.publish(&publish(&key, "one", None), 1).unwrap();
    configs.changed().await;
    waiter.changed().await.unwrap();
    assert_eq!(configs.drain_changes(), vec![key.clone()]);
    assert!(configs.drain_changes().is_empty());
    // A refused publication changes nothing and wakes no one.
    let before = *waiter.borrow_and_update();
    configs
        .publish(&publish(&key, "x", Some("stale")), 2)
        .unwrap_err();
    assert_eq!(*configs.watch().borrow(), before);
}

#[test]
fn imports_own_their_items_and_leave_the_others_alone() {
    let configs = Configs::new();
    let mine = ConfigKey::new("", "G", "imported");
    let theirs = ConfigKey::new("", "G", "local");
    configs
        .publish(&publish(&theirs, "roster's own", None), 1)
        .unwrap();
    let imported = |content: &str| Imported {
        content: content.into(),
        r#type: "yaml".into(),
        app_name: "shop".into(),
    };
    let keep = Retention::default();
    let skipped = configs.apply_import(
        "t1",
        &[
            (mine.clone(), imported("a")),
            (theirs.clone(), imported("b")),
        ],
        std::slice::from_ref(&theirs),
        keep,
        2,
    );
    assert_eq!(skipped, 1);
    assert_eq!(&*configs.get(&theirs).unwrap().content, "roster's own");
    let item = configs.get(&mine).unwrap();
    assert_eq!(item.owner.as_deref(), Some("t1"));
    assert_eq!(item.created_by, "sync:t1");
    assert!(configs.held_by_other(&mine, "t2") && !configs.held_by_other(&mine, "t1"));
    assert_eq!(configs.owned_by("t1").len(), 1);
    // Publishing through the API takes the item from its task.
    configs.publish(&publish(&mine, "edited", None), 3).unwrap();
    assert_eq!(configs.get(&mine).unwrap().owner, None);
    assert_eq!(
        configs.apply_import("t1", &[(mine.clone(), imported("c"))], &[], keep, 4),
        1
    );
    assert_eq!(&*configs.get(&mine).unwrap().content, "edited");
    // A task's removal reaches only its own items.
    let other = ConfigKey::new("dev", "G", "x");
    configs.apply_import("t1", &[(other.clone(), imported("x"))], &[], keep, 5);
    assert_eq!(configs.remove_owned("t1", keep, 6), 1);
    assert!(configs.get(&other).is_none());
    assert!(configs.get(&mine).is_some());
}

#[test]
fn pruning_reaches_history_no_write_touches() {
    let configs = Configs::new();
    let keep = Retention {
        max_age_ms: 1_000,
        max_versions: 100,
    };
    let (live, gone) = (
        ConfigKey::new("", "G", "live"),
        ConfigKey::new("", "G", "gone"),
    );
    for (i, at) in [(1, 100), (2, 200), (3, 300)] {
        configs
            .publish(&publish(&live, &format!("v{i}"), None), at)
            .unwrap();
    }
    configs.publish(&publish(&gone, "g1", None), 100).unwrap();
    assert!(configs.remove(&gone, "ann", "127.0.0.2", keep, 400));
    // Within the retention nothing is due, and pruning drops nothing.
    assert!(!configs.history_due(keep, 1_100));
    assert_eq!(configs.prune_history(keep, 1_100), 0);
    assert_eq!(configs.history(&live).len(), 3);
    // Later, the live item keeps only its newest version; the removed one's history
    // (a publication and its removal) goes whole.
    assert!(configs.history_due(keep, 1_450));
    assert_eq!(configs.prune_history(keep, 1_450), 4);
    let contents: Vec<String> = configs
        .history(&live)
        .iter()
        .map(|v| v.content.to_string())
        .collect();
    assert_eq!(contents, ["v3"]);
    assert!(configs.history(&gone).is_empty());
    assert_eq!(configs.keys_with_history("public"), vec![live.clone()]);
    // The newest version of a live item is never due, however old.
    assert!(!configs.history_due(keep, 1_000_000));
    assert_eq!(configs.prune_history(keep, 1_000_000), 0);
    assert_eq!(&*configs.get(&live).unwrap().content, "v3");
}
