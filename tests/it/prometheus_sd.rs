//! Prometheus HTTP service discovery as Nacos 2.2+ serves it (issue 41, item 3):
//! `/nacos/prometheus`, per namespace and per service, in Nacos' shape (one target
//! group per instance, metadata as labels, `__meta_clusterName`) with label names made
//! valid and roster's `__meta_roster_*` labels; a caller (token or HTTP Basic, as Nacos
//! guards it) sees what it may read; and Debian's real Prometheus, given
//! `http_sd_configs` with `basic_auth` pointed at roster, discovers an instance,
//! relabels on roster's labels and scrapes it (roster's own `/metrics`).

use std::time::Duration;

use base64::Engine as _;
use roster_tests::foreign::Prometheus;
use roster_tests::{enc, eventually, unique, Node, Value, ADMIN_PASSWORD};

use crate::authz::{grant, login, PASSWORD};

/// Registers a persistent instance (no heartbeats to keep up) with `metadata` (JSON).
fn register(node: &Node, ns: &str, service: &str, ip: &str, port: u16, metadata: &str) {
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?namespaceId={ns}&serviceName={service}&ip={ip}&port={port}&ephemeral=false&metadata={}",
            enc(metadata)
        ),
    )
    .expect(200);
}

/// The target groups an answer lists.
fn groups(r: roster_tests::Resp) -> Vec<Value> {
    let r = r.expect(200);
    r.json()
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("not a list: {}", r.body))
}

/// The group whose target is `target`.
fn group<'a>(groups: &'a [Value], target: &str) -> &'a Value {
    groups
        .iter()
        .find(|g| g["targets"] == serde_json::json!([target]))
        .unwrap_or_else(|| panic!("no target {target} in {groups:?}"))
}

fn targets(groups: &[Value]) -> Vec<String> {
    let mut all: Vec<String> = groups
        .iter()
        .map(|g| g["targets"][0].as_str().unwrap_or_default().to_string())
        .collect();
    all.sort();
    all
}

#[test]
fn prometheus_discovers_what_roster_lists_in_nacos_shape() {
    let node = Node::start();
    let (dev, svc) = (unique("sd-dev"), unique("sd-target"));
    node.call_form(
        "POST",
        "/nacos/v1/console/namespaces",
        &format!("customNamespaceId={dev}&namespaceName={dev}"),
    )
    .expect(200);
    let me = format!("127.0.0.1:{}", node.http_port);
    register(
        &node,
        "public",
        &svc,
        "127.0.0.1",
        node.http_port,
        r#"{"app.name":"roster","team-x":"core","9lives":"yes","a/b c":"odd"}"#,
    );
    register(&node, "public", "sd-other", "127.0.0.3", 9100, "{}");
    register(
        &node,
        &dev,
        "dev-svc",
        "127.0.0.2",
        9100,
        r#"{"env":"dev"}"#,
    );

    // Every namespace.
    let all = groups(node.call("GET", "/nacos/prometheus"));
    assert_eq!(
        targets(&all),
        [me.as_str(), "127.0.0.2:9100", "127.0.0.3:9100"],
        "{all:?}"
    );
    let labels = &group(&all, &me)["labels"];
    assert_eq!(labels["__meta_clusterName"], "DEFAULT", "{labels}");
    assert_eq!(labels["app_name"], "roster", "{labels}");
    assert_eq!(labels["team_x"], "core", "{labels}");
    assert_eq!(labels["_9lives"], "yes", "{labels}");
    assert_eq!(labels["a_b_c"], "odd", "{labels}");
    assert_eq!(labels["__meta_roster_namespace"], "public", "{labels}");
    assert_eq!(labels["__meta_roster_group"], "DEFAULT_GROUP", "{labels}");
    assert_eq!(labels["__meta_roster_service"], svc.as_str(), "{labels}");
    assert_eq!(labels["__meta_roster_healthy"], "true", "{labels}");
    assert_eq!(labels["__meta_roster_enabled"], "true", "{labels}");
    for name in labels.as_object().unwrap().keys() {
        let valid = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        assert!(valid, "label name {name}");
    }
    // A namespace; a service by name or as `group@@name`; a namespace that does not
    // exist lists nothing (as Nacos).
    let in_dev = groups(node.call("GET", &format!("/nacos/prometheus/namespaceId/{dev}")));
    assert_eq!(targets(&in_dev), ["127.0.0.2:9100"]);
    assert_eq!(group(&in_dev, "127.0.0.2:9100")["labels"]["env"], "dev");
    for name in [svc.clone(), enc(&format!("DEFAULT_GROUP@@{svc}"))] {
        let one = groups(node.call(
            "GET",
            &format!("/nacos/prometheus/namespaceId/public/service/{name}"),
        ));
        assert_eq!(targets(&one), [me.as_str()], "{name}");
    }
    assert!(groups(node.call("GET", "/nacos/prometheus/namespaceId/nowhere")).is_empty());
    // Wrong methods and paths; no caller.
    node.call("POST", "/nacos/prometheus").expect(405);
    node.call("DELETE", &format!("/nacos/prometheus/namespaceId/{dev}"))
        .expect(405);
    node.call("GET", "/nacos/prometheus/namespaceId/")
        .expect(404);
    node.call(
        "GET",
        &format!("/nacos/prometheus/namespaceId/{dev}/other/x"),
    )
    .expect(404);
    let anonymous = node.raw("GET", "/nacos/prometheus", &[], None);
    assert!(
        [401, 403].contains(&anonymous.status),
        "{} {}",
        anonymous.status,
        anonymous.body
    );

    // A user who may read the dev namespace only sees its targets.
    let user = unique("scraper");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={PASSWORD}"),
    )
    .expect(200);
    grant(
        &node,
        &user,
        &format!("{user}-dev"),
        &format!("{dev}:*:*"),
        "r",
    );
    let token = login(&node, &user, PASSWORD);
    let theirs = |path: &str| {
        groups(node.raw(
            "GET",
            path,
            &[("authorization", &format!("Bearer {token}"))],
            None,
        ))
    };
    assert_eq!(targets(&theirs("/nacos/prometheus")), ["127.0.0.2:9100"]);
    assert!(theirs(&format!(
        "/nacos/prometheus/namespaceId/public/service/{svc}"
    ))
    .is_empty());
    // HTTP Basic with the user's password, as Nacos guards these routes (Prometheus'
    // `basic_auth`); a wrong password is refused.
    let basic = |password: &str| {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        node.raw(
            "GET",
            "/nacos/prometheus",
            &[("authorization", &format!("Basic {encoded}"))],
            None,
        )
    };
    assert_eq!(targets(&groups(basic(PASSWORD))), ["127.0.0.2:9100"]);
    let wrong = basic("not-the-password");
    assert!(
        [401, 403].contains(&wrong.status),
        "{} {}",
        wrong.status,
        wrong.body
    );
}

#[test]
fn debian_prometheus_finds_and_scrapes_a_target_through_roster() {
    let node = Node::start();
    let svc = unique("scraped");
    let me = format!("127.0.0.1:{}", node.http_port);
    // The target is roster's own `/metrics` (public), registered as an instance.
    register(
        &node,
        "public",
        &svc,
        "127.0.0.1",
        node.http_port,
        r#"{"app.name":"roster","team-x":"core"}"#,
    );
    // Disabled: Prometheus keeps only enabled targets (a relabelling on roster's label).
    register(&node, "public", &svc, "127.0.0.4", 9100, "{}");
    node.call(
        "PUT",
        &format!("/nacos/v1/ns/instance?serviceName={svc}&ip=127.0.0.4&port=9100&ephemeral=false&enabled=false"),
    )
    .expect(200);
    let config = format!(
        r#"
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: roster-sd
    http_sd_configs:
      - url: http://{me}/nacos/prometheus/namespaceId/public/service/{svc}
        refresh_interval: 1s
        basic_auth:
          username: nacos
          password: "{password}"
    relabel_configs:
      - source_labels: [__meta_roster_enabled]
        regex: "true"
        action: keep
      - source_labels: [__meta_roster_service]
        target_label: service
"#,
        password = ADMIN_PASSWORD
    );
    let prometheus = Prometheus::start(&config);
    let ours = || -> Vec<Value> {
        let data = prometheus.api("targets?state=active");
        let active = data["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        active
            .into_iter()
            .filter(|t| t["labels"]["job"] == "roster-sd")
            .collect()
    };
    let target = || -> Result<Value, String> {
        match &ours()[..] {
            [one] => Ok(one.clone()),
            other => Err(format!("active targets of the job: {other:?}")),
        }
    };
    eventually(Duration::from_secs(30), || {
        let t = target()?;
        if t["health"] == "up" {
            Ok(())
        } else {
            Err(format!("{t}"))
        }
    });
    let t = target().unwrap();
    assert_eq!(t["labels"]["instance"], me.as_str(), "{t}");
    assert_eq!(t["labels"]["app_name"], "roster", "{t}");
    assert_eq!(t["labels"]["team_x"], "core", "{t}");
    assert_eq!(t["labels"]["service"], svc.as_str(), "{t}");
    assert_eq!(
        t["discoveredLabels"]["__meta_clusterName"], "DEFAULT",
        "{t}"
    );
    // The scrape itself: roster's metrics, stored under the discovered labels.
    eventually(Duration::from_secs(30), || {
        let data = prometheus.api(&format!(
            "query?query={}",
            enc(&format!("up{{job=\"roster-sd\",service=\"{svc}\"}}"))
        ));
        match data["result"][0]["value"][1].as_str() {
            Some("1") => Ok(()),
            _ => Err(format!("{data}")),
        }
    });
    // Deregistered: the target goes at the next refresh.
    node.call(
        "DELETE",
        &format!(
            "/nacos/v1/ns/instance?serviceName={svc}&ip=127.0.0.1&port={}&ephemeral=false",
            node.http_port
        ),
    )
    .expect(200);
    eventually(Duration::from_secs(30), || match &ours()[..] {
        [] => Ok(()),
        left => Err(format!("still targets: {left:?}")),
    });
}
