//! Nacos 3's fuzzy watch through the Java `nacos-client` 3.x (`NamingService.fuzzyWatchWithServiceKeys`,
//! `ConfigService.fuzzyWatchWithGroupKeys`): the scenario `fuzzy` watches a pattern on
//! one node of three while another node registers, publishes and removes — so what it
//! hears of came through Distro (an ephemeral instance) or Raft (a persistent instance,
//! configuration items), not through the node it watches on.

use roster_tests::{json, unique, Cluster, Value, ADMIN_PASSWORD};

use super::{java, run, step};

/// The names each of a step's `field` (an array of strings) holds.
fn strings(step: &Value, field: &str) -> Vec<String> {
    step[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} is not an array: {step}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn nacos_client_3_fuzzy_watch_hears_what_other_nodes_add_and_remove() {
    let c = Cluster::start(3, &[]);
    let (watched, via) = (&c.nodes[0], &c.nodes[2]);
    let home = tempfile::tempdir().unwrap();
    let prefix = unique("java-fuzzy");
    let mut cmd = java("nacos-client-3", "org.roster.clients.nacos.NacosScenario");
    cmd.arg("fuzzy")
        .args(["--server", &watched.addr(), "--via", &via.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", &prefix])
        .arg("--home")
        .arg(home.path());
    let steps = run(cmd, "nacos-client-3 fuzzy");
    for name in [
        "seeded",
        "naming_watch",
        "config_watch",
        "naming_added",
        "naming_removed",
        "naming_removed_persistent",
        "config_added",
        "config_removed",
        "unmatched",
        "done",
    ] {
        step(&steps, name);
    }

    // The first syncs brought what was there before the watch, keyed as Nacos keys it.
    let pre = format!("{prefix}-pre");
    let services = strings(step(&steps, "naming_watch"), "keys");
    assert!(
        services.iter().any(|k| k.ends_with(&format!("@@{pre}"))),
        "naming sync: {services:?}"
    );
    let items = strings(step(&steps, "config_watch"), "keys");
    assert_eq!(
        items,
        [format!("{prefix}-pre.yaml+DEFAULT_GROUP+public")],
        "config sync"
    );
    // Only what the patterns match was told.
    let heard = strings(step(&steps, "unmatched"), "heard");
    assert!(
        heard.iter().all(|n| n.starts_with(&prefix)),
        "heard of {heard:?}"
    );

    // The watches reached the watcher's node over gRPC, and it pushed what was heard.
    for kind in ["NamingFuzzyWatchRequest", "ConfigFuzzyWatchRequest"] {
        let n = watched
            .metric(&format!("roster_grpc_requests_total{{kind=\"{kind}\"}}"))
            .unwrap_or(0.0);
        assert!(n >= 1.0, "{kind} reached the watched node ({n})");
    }
    let sent = watched
        .metric("roster_grpc_pushes_total{outcome=\"sent\"}")
        .unwrap_or(0.0);
    // Two first syncs with their ends, three service changes and two item changes.
    assert!(sent >= 9.0, "pushes sent: {sent}");
    assert_eq!(step(&steps, "done")["ok"], json!(true));
}
