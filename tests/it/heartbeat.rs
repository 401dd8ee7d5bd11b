//! Beat lifecycle with short `preserved.*` timeouts: unhealthy after the beat timeout,
//! removed after the delete timeout, revived by a beat, re-registered by a full beat.

use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, json, Node, Value};

fn hosts(node: &Node, service: &str) -> Vec<Value> {
    // Catalog view: every instance, no protection threshold.
    let v = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/catalog/instances?serviceName={service}&clusterName=DEFAULT"),
        )
        .json();
    v["list"].as_array().cloned().unwrap_or_default()
}

fn short_metadata() -> String {
    enc(
        r#"{"preserved.heart.beat.interval":"500","preserved.heart.beat.timeout":"1500","preserved.ip.delete.timeout":"3000"}"#,
    )
}

#[test]
fn silent_instances_turn_unhealthy_then_disappear() {
    let node = Node::start();
    let started = Instant::now();
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=hb&ip=127.12.0.1&port=80&metadata={}",
            short_metadata()
        ),
    )
    .expect(200);
    // A default-timeout neighbour stays healthy meanwhile.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=hb&ip=127.12.0.2&port=80",
    )
    .expect(200);
    let h = hosts(&node, "hb");
    assert_eq!(h[0]["instanceHeartBeatTimeOut"], 1500);
    eventually(Duration::from_secs(5), || {
        let h = hosts(&node, "hb");
        match h.iter().find(|x| x["ip"] == "127.12.0.1") {
            Some(x) if x["healthy"] == false => Ok(()),
            other => Err(format!("still {other:?}")),
        }
    });
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "not before the timeout"
    );
    eventually(Duration::from_secs(6), || {
        let h = hosts(&node, "hb");
        if h.iter().any(|x| x["ip"] == "127.12.0.1") {
            Err(format!("still listed: {h:?}"))
        } else {
            Ok(())
        }
    });
    assert!(
        started.elapsed() >= Duration::from_millis(3000),
        "not before the delete timeout"
    );
    let h = hosts(&node, "hb");
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["healthy"], true);
    assert!(node.metric("roster_expiry_removed_total").unwrap() >= 1.0);
    // The empty-after-expiry service is kept (no Nacos-style auto-delete).
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=hb&ip=127.12.0.2&port=80",
    )
    .expect(200);
    node.call("GET", "/nacos/v1/ns/service?serviceName=hb")
        .expect(200);
}

#[test]
fn beats_keep_instances_and_revive_them() {
    let node = Node::start();
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=alive&ip=127.13.0.1&port=80&metadata={}",
            short_metadata()
        ),
    )
    .expect(200);
    // Beat for 4 s: three times the beat timeout, longer than the delete timeout.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let r = node
            .call(
                "PUT",
                "/nacos/v1/ns/instance/beat?serviceName=alive&ip=127.13.0.1&port=80",
            )
            .expect(200)
            .json();
        assert_eq!(r["code"], 10200);
        assert_eq!(r["clientBeatInterval"], 500);
        assert_eq!(hosts(&node, "alive")[0]["healthy"], true);
        std::thread::sleep(Duration::from_millis(400));
    }
    // Silence: unhealthy; then one beat revives it.
    eventually(Duration::from_secs(5), || {
        match hosts(&node, "alive").first() {
            Some(h) if h["healthy"] == false => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    node.call(
        "PUT",
        "/nacos/v1/ns/instance/beat?serviceName=alive&ip=127.13.0.1&port=80",
    )
    .expect(200);
    assert_eq!(hosts(&node, "alive")[0]["healthy"], true);
}

#[test]
fn full_beats_re_register_expired_instances() {
    let node = Node::start();
    let beat = enc(&format!(
        r#"{{"ip":"127.14.0.1","port":80,"serviceName":"DEFAULT_GROUP@@back","cluster":"c1","metadata":{}}}"#,
        r#"{"preserved.heart.beat.timeout":"1500","preserved.ip.delete.timeout":"3000","preserved.heart.beat.interval":"500","v":"1"}"#
    ));
    // No such instance: a full beat registers it (weight 1.0 when the beat has none).
    let r = node
        .call(
            "PUT",
            &format!("/nacos/v1/ns/instance/beat?serviceName=back&beat={beat}"),
        )
        .expect(200)
        .json();
    assert_eq!(r["code"], 10200);
    assert_eq!(r["clientBeatInterval"], 500);
    let v = node
        .call(
            "GET",
            "/nacos/v1/ns/instance?serviceName=back&ip=127.14.0.1&port=80",
        )
        .expect(200)
        .json();
    assert_eq!(v["clusterName"], "c1");
    assert_eq!(v["weight"], 1.0);
    assert_eq!(v["metadata"]["v"], "1");
    // A light beat for an unknown address is told to re-register.
    let r = node
        .call(
            "PUT",
            "/nacos/v1/ns/instance/beat?serviceName=back&ip=127.14.0.2&port=80",
        )
        .expect(200)
        .json();
    assert_eq!(r["code"], 20404);
    // Bad beats are 400s that name the field.
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/instance/beat?serviceName=back&beat=%7Bnot",
    );
    assert!(r.status == 400 && r.body.contains("'beat'"), "{}", r.body);
    let r = node.call(
        "PUT",
        &format!(
            "/nacos/v1/ns/instance/beat?serviceName=back&beat={}",
            enc(r#"{"ip":"127.14.0.3","port":70000}"#)
        ),
    );
    assert!(
        r.status == 400 && r.body.contains("beat.port"),
        "{}",
        r.body
    );
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/instance/beat?serviceName=back&ip=127.14.0.2",
    );
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'port' is required.")
    );
}

#[test]
fn protection_threshold_when_every_instance_is_silent() {
    // The default threshold (0) never protects: silent instances are listed unhealthy
    // and a healthy-only list is empty (Nacos would report them all healthy).
    let node = Node::start();
    let meta = enc(
        r#"{"preserved.heart.beat.interval":"500","preserved.heart.beat.timeout":"1000","preserved.ip.delete.timeout":"60000"}"#,
    );
    for ip in ["127.15.0.1", "127.15.0.2"] {
        node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=prot&ip={ip}&port=80&metadata={meta}"),
        )
        .expect(200);
    }
    eventually(Duration::from_secs(5), || {
        let v = node
            .call("GET", "/nacos/v1/ns/instance/list?serviceName=prot")
            .json();
        let hosts = v["hosts"].as_array().cloned().unwrap_or_default();
        if hosts.len() == 2 && hosts.iter().all(|x| x["healthy"] == false) {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    let v = node
        .call(
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=prot&healthyOnly=true",
        )
        .expect(200)
        .json();
    assert_eq!(v["reachProtectionThreshold"], false);
    assert_eq!(v["hosts"], json!([]));
    // A positive threshold protects: 0 of 1 healthy <= 0.5, so every instance is
    // returned, reported healthy, even to a healthy-only query.
    node.call(
        "POST",
        "/nacos/v1/ns/service?serviceName=prot-on&protectThreshold=0.5",
    )
    .expect(200);
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName=prot-on&ip=127.15.1.1&port=80&metadata={meta}"),
    )
    .expect(200);
    eventually(Duration::from_secs(5), || {
        let v = node
            .call(
                "GET",
                "/nacos/v1/ns/instance/list?serviceName=prot-on&healthyOnly=true",
            )
            .json();
        if v["reachProtectionThreshold"] == true && v["hosts"][0]["healthy"] == true {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
    assert!(hosts(&node, "prot-on")
        .iter()
        .all(|x| x["healthy"] == false));
}
