//! The deployment files, held to what roster does: the Kubernetes manifests
//! (`deploy/kubernetes`), the container image (`Dockerfile`), the systemd unit
//! (`deploy/systemd`), the metrics reference (`docs/metrics.md`) against a live node's
//! `/metrics`, the Prometheus alerts (`deploy/prometheus`, through `promtool`) and the
//! Grafana dashboard (`deploy/grafana`); and members named by host names, followed to a
//! new address when a node comes back on one (what a pod does on Kubernetes).
//!
//! Docker Hub cannot be reached here, so the Dockerfile is read, not built. `promtool`
//! and `systemd-analyze` come from Debian's `prometheus` and `systemd` packages
//! (`scripts/test` installs them); a missing one fails its test, it never skips.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use roster_tests::{
    eventually, free_port, roster_bin, workspace_root, Node, NodeOptions, Value, CLUSTER_SECRET,
};
use serde_json::json;
use yaml_rust2::{Yaml, YamlLoader};

use crate::sync::{create_task, wait_state};

/// The path of the binary in the image, the unit and the manifests.
const BINARY: &str = "/usr/local/bin/roster";

fn read(path: &str) -> String {
    let full = workspace_root().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Every document of a YAML file, as JSON values.
fn yaml_documents(path: &str) -> Vec<Value> {
    let docs = YamlLoader::load_from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    docs.iter().map(to_json).filter(|d| !d.is_null()).collect()
}

fn to_json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Integer(i) => json!(i),
        Yaml::Real(r) => r.parse::<f64>().map_or(Value::Null, |f| json!(f)),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => to_json(other).to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// The metrics `docs/metrics.md` describes: name (as queried) → (type, labels).
fn documented_metrics() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut metrics = BTreeMap::new();
    for line in read("docs/metrics.md").lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "| `name` | type | labels | meaning |" splits into 6 cells.
        let Some(name) = cells
            .get(1)
            .and_then(|c| c.strip_prefix("`roster_"))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        assert_eq!(
            cells.len(),
            6,
            "docs/metrics.md: a row of 4 columns: {line}"
        );
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_string())
            .filter(|l| !l.is_empty())
            .collect();
        let previous = metrics.insert(format!("roster_{name}"), (cells[2].to_string(), labels));
        assert!(
            previous.is_none(),
            "docs/metrics.md lists roster_{name} twice"
        );
    }
    assert!(
        metrics.len() > 20,
        "docs/metrics.md: only {} metrics",
        metrics.len()
    );
    metrics
}

/// The metric names a PromQL expression reads (identifiers starting with `roster_`,
/// outside string literals), a histogram's series by the histogram's name.
fn metrics_in(
    expr: &str,
    documented: &BTreeMap<String, (String, BTreeSet<String>)>,
) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' || c == '`' {
            // A string literal: a label value or a regex, never a metric.
            let mut escaped = false;
            for d in chars.by_ref() {
                if d == c && !escaped {
                    break;
                }
                escaped = d == '\\' && !escaped;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let mut ident = c.to_string();
            while let Some(&d) = chars.peek() {
                if !(d.is_ascii_alphanumeric() || d == '_' || d == ':') {
                    break;
                }
                ident.push(d);
                chars.next();
            }
            if ident.starts_with("roster_") {
                names.push(histogram_of(&ident, documented).unwrap_or(ident));
            }
        } else if c.is_ascii_digit() {
            // A number or a duration (5m, 1e3): not an identifier.
            while chars.peek().is_some_and(|d| d.is_ascii_alphanumeric()) {
                chars.next();
            }
        }
    }
    names
}

/// The histogram that `series` (`<name>_bucket`, `_sum`, `_count`) belongs to.
fn histogram_of(
    series: &str,
    documented: &BTreeMap<String, (String, BTreeSet<String>)>,
) -> Option<String> {
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = series.strip_suffix(suffix)?;
        (documented.get(base)?.0 == "histogram").then(|| base.to_string())
    })
}

/// Fails with the undocumented names `exprs` read, and when an expression reads none.
fn assert_documented(what: &str, exprs: &[String]) {
    let documented = documented_metrics();
    assert!(!exprs.is_empty(), "{what}: no expressions found");
    for expr in exprs {
        let names = metrics_in(expr, &documented);
        assert!(!names.is_empty(), "{what}: `{expr}` reads no roster metric");
        for name in names {
            assert!(
                documented.contains_key(&name),
                "{what}: `{expr}` reads {name}, which docs/metrics.md does not describe (or /metrics does not export)"
            );
        }
    }
}

/// Runs `program` with `args` in `dir`; fails the test with its output when the program
/// is missing or exits with an error. Returns its stdout and stderr.
fn run_tool(program: &str, package: &str, args: &[&str], dir: &Path) -> (String, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {program} ({e}): install Debian's `{package}` package (scripts/test does)")
        });
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{program} {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    (stdout, stderr)
}

// ---- Observability -------------------------------------------------------------------

#[test]
fn metrics_reference_describes_exactly_what_a_node_exports() {
    let node = Node::start();
    // One request of each kind, so that the labelled families have samples to check.
    node.call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=10")
        .expect(200);
    let page = node.raw("GET", "/metrics", &[], None).expect(200).body;
    let documented = documented_metrics();
    let mut exported = BTreeMap::new();
    for line in page.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = rest.split_once(' ').expect("# TYPE name type");
        // Counters are queried as <family>_total, as they are exported.
        let queried = match kind {
            "counter" => format!("{family}_total"),
            _ => family.to_string(),
        };
        exported.insert(queried, kind.to_string());
    }
    let missing: Vec<_> = exported
        .keys()
        .filter(|n| !documented.contains_key(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "/metrics exports what docs/metrics.md does not describe: {missing:?}"
    );
    let stale: Vec<_> = documented
        .keys()
        .filter(|n| !exported.contains_key(*n))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/metrics.md describes what /metrics does not export: {stale:?}"
    );
    for (name, kind) in &exported {
        assert_eq!(
            &documented[name].0, kind,
            "docs/metrics.md: the type of {name}"
        );
    }
    // The labels of every sample are the documented ones (`le`: a histogram's bucket).
    for sample in page.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, labels)) = sample.split_once('{') else {
            continue;
        };
        let name = histogram_of(series, &documented).unwrap_or(series.to_string());
        let names: BTreeSet<String> = labels
            .split("\",")
            .filter_map(|pair| pair.split_once('=').map(|(k, _)| k.trim().to_string()))
            .filter(|k| k != "le")
            .collect();
        assert_eq!(
            names, documented[&name].1,
            "docs/metrics.md: labels of {sample}"
        );
    }
}

#[test]
fn node_exports_certificate_expiry_data_dir_space_and_sync_task_states() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.not_after = rcgen::date_time_ymd(2031, 5, 17);
    let not_after = params.not_after.unix_timestamp();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    // gRPC over TLS; HTTP (and /metrics) stays plaintext.
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--grpc-tls-cert".into(),
            cert_path.display().to_string(),
            "--grpc-tls-key".into(),
            key_path.display().to_string(),
        ],
        ..Default::default()
    });
    assert_eq!(
        node.metric(r#"roster_tls_certificate_expiry_timestamp_seconds{listener="grpc"}"#),
        Some(not_after as f64)
    );
    assert_eq!(
        node.metric(r#"roster_tls_certificate_expiry_timestamp_seconds{listener="http"}"#),
        None,
        "no series for a listener without TLS"
    );
    let size = node
        .metric("roster_data_dir_filesystem_size_bytes ")
        .unwrap();
    let avail = node
        .metric("roster_data_dir_filesystem_avail_bytes ")
        .unwrap();
    assert!(
        size > 0.0 && avail > 0.0 && avail <= size,
        "{avail} of {size}"
    );

    let state = |s: &str| node.metric(&format!("roster_sync_tasks{{state=\"{s}\"}}"));
    assert_eq!(state("error"), Some(0.0), "exported before any task");
    // A source nobody serves: the task goes to `error`, and the gauge with it.
    create_task(
        &node,
        json!({"name": "unreachable", "source": format!("etcd://127.0.0.1:{}", free_port())}),
    );
    wait_state(&node, "unreachable", "error");
    eventually(Duration::from_secs(10), || match state("error") {
        Some(1.0) => Ok(()),
        other => Err(format!("roster_sync_tasks{{state=\"error\"}} is {other:?}")),
    });
    assert_eq!(state("running"), Some(0.0));
}

#[test]
fn alert_rules_pass_promtool_and_read_documented_metrics() {
    let dir = workspace_root().join("deploy/prometheus");
    run_tool(
        "promtool",
        "prometheus",
        &["check", "rules", "roster-alerts.yml"],
        &dir,
    );
    let (out, _) = run_tool(
        "promtool",
        "prometheus",
        &["test", "rules", "roster-alerts.test.yml"],
        &dir,
    );
    assert!(out.contains("SUCCESS"), "{out}");

    let rules = &yaml_documents("deploy/prometheus/roster-alerts.yml")[0];
    let mut exprs = Vec::new();
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            exprs.push(rule["expr"].as_str().expect("expr").to_string());
            alerts.insert(rule["alert"].as_str().expect("alert").to_string());
            assert!(
                rule["labels"]["severity"].is_string()
                    && rule["annotations"]["summary"].is_string(),
                "every alert has a severity and a summary: {rule}"
            );
        }
    }
    assert_documented("roster-alerts.yml", &exprs);
    let tests = read("deploy/prometheus/roster-alerts.test.yml");
    for alert in [
        "RosterNoLeader",
        "RosterReplicationLag",
        "RosterEvictionGuardEngaged",
        "RosterPushFailures",
        "RosterSyncTaskError",
        "RosterCertificateExpiresSoon",
        "RosterDataDirFilling",
        "RosterNodeNotReady",
    ] {
        assert!(alerts.contains(alert), "roster-alerts.yml has no {alert}");
    }
    for alert in &alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "roster-alerts.test.yml does not test {alert}"
        );
    }
}

#[test]
fn dashboard_queries_only_documented_metrics() {
    let dashboard: Value =
        serde_json::from_str(&read("deploy/grafana/roster-dashboard.json")).expect("JSON");
    let mut exprs = Vec::new();
    collect_queries(&dashboard, &mut exprs);
    assert_documented("roster-dashboard.json", &exprs);
    let read_by_panels: BTreeSet<String> = exprs
        .iter()
        .flat_map(|e| metrics_in(e, &documented_metrics()))
        .collect();
    for topic in [
        "roster_ready",
        "roster_instances",
        "roster_beats_total",
        "roster_http_requests_total",
        "roster_http_request_duration_seconds",
        "roster_udp_pushes_total",
        "roster_grpc_pushes_total",
        "roster_raft_term",
        "roster_raft_last_applied",
        "roster_raft_replication_lag",
        "roster_eviction_guard_engaged",
        "roster_sync_tasks",
    ] {
        assert!(read_by_panels.contains(topic), "no panel shows {topic}");
    }
}

/// Every PromQL expression in a dashboard: panel targets and template variable queries.
fn collect_queries(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    ("query", Value::String(q)) if q.contains("roster_") => out.push(q.clone()),
                    _ => collect_queries(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_queries(v, out)),
        _ => {}
    }
}

// ---- Kubernetes ----------------------------------------------------------------------

/// The manifests kustomization.yaml lists, by kind and name.
fn manifests() -> BTreeMap<(String, String), Value> {
    let kustomization = &yaml_documents("deploy/kubernetes/kustomization.yaml")[0];
    let mut found = BTreeMap::new();
    for resource in kustomization["resources"].as_array().expect("resources") {
        let file = format!("deploy/kubernetes/{}", resource.as_str().unwrap());
        for doc in yaml_documents(&file) {
            let kind = doc["kind"].as_str().expect("kind").to_string();
            let name = doc["metadata"]["name"].as_str().expect("name").to_string();
            assert!(
                found.insert((kind, name), doc).is_none(),
                "{file}: a duplicate"
            );
        }
    }
    found
}

fn get<'a>(manifests: &'a BTreeMap<(String, String), Value>, kind: &str, name: &str) -> &'a Value {
    manifests
        .get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes"))
}

/// The container's environment as Kubernetes sets it in namespace `ns`: `$(VAR)`
/// references expanded, `fieldRef`s to the pod's name and namespace resolved; values
/// from Secrets stay out.
fn container_env(container: &Value, pod: &str, ns: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in container["env"].as_array().expect("env") {
        let name = var["name"].as_str().unwrap().to_string();
        let value = match (&var["value"], &var["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(v), _) => expand(v, &env),
            (_, Value::String(path)) if path == "metadata.name" => pod.to_string(),
            (_, Value::String(path)) if path == "metadata.namespace" => ns.to_string(),
            _ => continue,
        };
        env.insert(name, value);
    }
    env
}

/// `$(VAR)` expansion as Kubernetes does it: earlier variables only; unknown ones stay.
fn expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = value.to_string();
    for (name, v) in env {
        out = out.replace(&format!("$({name})"), v);
    }
    out
}

#[test]
fn kubernetes_manifests_name_members_by_dns_and_probe_health() {
    let all = manifests();
    let sts = get(&all, "StatefulSet", "roster");
    let spec = &sts["spec"];
    let replicas = spec["replicas"].as_u64().expect("replicas");
    assert_eq!(replicas, 3);
    assert_eq!(spec["podManagementPolicy"], "Parallel");
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(&spec["selector"]["matchLabels"], pod_labels);
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    let port = |name: &str| -> u64 {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("the container has no port named {name}"))
    };

    // Probes: ready on /health/ready, live on /health/live, on the HTTP port.
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"],
        "/health/ready"
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"],
        "/health/live"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "http");
    }

    // Unprivileged, read-only root filesystem.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(pod["securityContext"]["runAsUser"].as_u64() > Some(0));
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);

    // The members: the pods' DNS names through the headless Service, id = ordinal + 1.
    let peer_service = spec["serviceName"].as_str().expect("serviceName");
    let env = container_env(container, "roster-0", "ns");
    let members = roster_members(&env["ROSTER_MEMBERS"]);
    let peer_port = port("peer");
    let expected: BTreeMap<u64, String> = (0..replicas)
        .map(|i| {
            (
                i + 1,
                format!("roster-{i}.{peer_service}.ns.svc.cluster.local:{peer_port}"),
            )
        })
        .collect();
    assert_eq!(members, expected, "ROSTER_MEMBERS");
    assert_eq!(env["FOUNDING_MEMBERS"], replicas.to_string());
    assert_eq!(listens_everywhere(&env["ROSTER_HTTP"]), port("http"));
    assert_eq!(listens_everywhere(&env["ROSTER_PEER"]), peer_port);
    assert_eq!(
        port("grpc"),
        port("http") + 1000,
        "gRPC: the HTTP port + 1000"
    );

    // The data dir lies inside the claim, one level down (roster makes it 0700).
    let mount_of = |volume: &str| -> String {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == volume)
            .and_then(|m| m["mountPath"].as_str())
            .unwrap_or_else(|| panic!("nothing mounts volume {volume}"))
            .to_string()
    };
    let claim = &spec["volumeClaimTemplates"][0]["metadata"]["name"];
    let data_mount = mount_of(claim.as_str().expect("a volume claim template"));
    assert!(
        env["ROSTER_DATA_DIR"].starts_with(&format!("{data_mount}/")),
        "ROSTER_DATA_DIR {} is not inside the claim at {data_mount}",
        env["ROSTER_DATA_DIR"]
    );

    // Secrets: referenced, never inlined; no Secret object in the manifests.
    assert!(
        all.keys().all(|(kind, _)| kind != "Secret"),
        "a Secret is committed"
    );
    let secret_volume = |secret: &str| -> String {
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["secret"]["secretName"] == secret)
            .unwrap_or_else(|| panic!("no volume of Secret {secret}"));
        mount_of(volume["name"].as_str().unwrap())
    };
    assert!(env["ROSTER_CLUSTER_SECRET_FILE"].starts_with(&secret_volume("roster-cluster")));
    assert!(env["ROSTER_PASSWORD_FILE"].starts_with(&secret_volume("roster-admin")));
    for var in container["env"].as_array().unwrap() {
        let name = var["name"].as_str().unwrap();
        if name.contains("PASSWORD") || name.contains("SECRET") {
            assert!(
                name.ends_with("_FILE") || var["valueFrom"]["secretKeyRef"]["name"].is_string(),
                "{name} must come from a Secret: {var}"
            );
        }
    }
    assert!(
        !read("deploy/kubernetes/statefulset.yaml").contains("ROSTER_CLUSTER_SECRET\n"),
        "the cluster secret goes by file"
    );

    // The Services: headless for peers (not-ready pods published), one for clients.
    let peers = &get(&all, "Service", peer_service)["spec"];
    assert_eq!(peers["clusterIP"], "None");
    assert_eq!(peers["publishNotReadyAddresses"], true);
    assert_eq!(&peers["selector"], pod_labels);
    let clients = &get(&all, "Service", "roster")["spec"];
    assert_eq!(&clients["selector"], pod_labels);
    let served: BTreeSet<(u64, String)> = clients["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let target = p["targetPort"].as_str().expect("named target ports");
            let protocol = p["protocol"].as_str().unwrap_or("TCP").to_string();
            assert_eq!(p["port"].as_u64(), Some(port(target)), "{p}");
            (port(target), protocol)
        })
        .collect();
    for wanted in [(8848, "TCP"), (9848, "TCP"), (8600, "UDP"), (8600, "TCP")] {
        assert!(
            served.contains(&(wanted.0, wanted.1.to_string())),
            "the client Service lacks {wanted:?}"
        );
    }

    let pdb = &get(&all, "PodDisruptionBudget", "roster")["spec"];
    assert_eq!(pdb["maxUnavailable"], 1);
    assert_eq!(&pdb["selector"]["matchLabels"], pod_labels);
}

/// The port of `addr`, which must be every interface's (a pod's or a container's
/// listeners are reached from outside it).
fn listens_everywhere(addr: &str) -> u64 {
    let addr: std::net::SocketAddr = addr.parse().expect("an IP:PORT");
    assert!(
        addr.ip().is_unspecified(),
        "{addr} is not reachable from outside"
    );
    u64::from(addr.port())
}

/// `ID=HOST:PORT,...` as a map; fails on anything but a DNS name for a host.
fn roster_members(list: &str) -> BTreeMap<u64, String> {
    list.split(',')
        .map(|entry| {
            let (id, addr) = entry.split_once('=').expect("ID=HOST:PORT");
            let host = addr.rsplit_once(':').expect("HOST:PORT").0;
            assert!(
                host.parse::<std::net::IpAddr>().is_err() && host.contains('.'),
                "members are named by DNS names, not addresses: {addr}"
            );
            (id.parse().expect("a node id"), addr.to_string())
        })
        .collect()
}

#[test]
fn kubernetes_entrypoint_derives_the_node_id_and_joins_beyond_the_founders() {
    let all = manifests();
    let container =
        &get(&all, "StatefulSet", "roster")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["/bin/sh", "-c"]));
    let script = container["args"][0]
        .as_str()
        .expect("the entrypoint script");
    assert!(script.contains(&format!("exec {BINARY}")), "{script}");
    // Run the script with a stand-in for roster that prints what it was given.
    let dir = tempfile::tempdir().unwrap();
    let stub = dir.path().join("roster");
    std::fs::write(
        &stub,
        "#!/bin/sh\necho \"id=$ROSTER_NODE_ID members=$ROSTER_MEMBERS args=$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = script.replace(BINARY, &stub.display().to_string());
    let start = |pod: &str| -> String {
        let env = container_env(container, pod, "ns");
        let out = Command::new("/bin/sh")
            .args(["-c", &script])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(&env)
            .output()
            .expect("sh");
        assert!(out.status.success(), "{pod}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let founders = "1=roster-0.roster-peer.ns.svc.cluster.local:7848,\
                    2=roster-1.roster-peer.ns.svc.cluster.local:7848,\
                    3=roster-2.roster-peer.ns.svc.cluster.local:7848";
    assert_eq!(start("roster-0"), format!("id=1 members={founders} args="));
    assert_eq!(start("roster-2"), format!("id=3 members={founders} args="));
    // Scaled up: a new pod names itself only and waits for `roster cluster add`.
    assert_eq!(
        start("roster-3"),
        "id=4 members=4=roster-3.roster-peer.ns.svc.cluster.local:7848 args=--join"
    );
    assert_eq!(
        start("roster-11"),
        "id=12 members=12=roster-11.roster-peer.ns.svc.cluster.local:7848 args=--join"
    );
}

// ---- Container image and systemd -----------------------------------------------------

/// The Dockerfile's instructions: (keyword, arguments), continuation lines joined,
/// comments dropped.
fn dockerfile() -> Vec<(String, String)> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (keyword, rest) = current.split_once(' ').unwrap_or((&current, ""));
                instructions.push((keyword.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    instructions
}

#[test]
fn dockerfile_builds_in_two_stages_and_runs_unprivileged() {
    let all = dockerfile();
    let of = |keyword: &str| -> Vec<&str> {
        all.iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let stages = of("FROM");
    assert_eq!(
        stages.len(),
        2,
        "a builder stage and a runtime stage: {stages:?}"
    );
    assert!(stages[0].starts_with("rust:") && stages[0].ends_with(" AS builder"));
    assert!(
        !stages[1].starts_with("rust:"),
        "the runtime image is not the toolchain's: {}",
        stages[1]
    );
    let runtime: Vec<&(String, String)> = all
        .iter()
        .skip_while(|(k, v)| !(k == "FROM" && v == stages[1]))
        .collect();
    let in_runtime = |keyword: &str| -> Vec<&str> {
        runtime
            .iter()
            .filter(|(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert!(of("RUN")
        .iter()
        .any(|r| r.contains("cargo build --release --locked -p roster-server")));
    assert!(
        in_runtime("COPY")
            .iter()
            .any(|c| c.starts_with("--from=builder ") && c.ends_with(BINARY)),
        "the binary is copied to {BINARY}"
    );
    assert_eq!(in_runtime("ENTRYPOINT"), [format!("[\"{BINARY}\"]")]);
    let user = in_runtime("USER");
    assert_eq!(user.len(), 1, "{user:?}");
    let uid = user[0].split(':').next().unwrap();
    assert!(
        uid != "root" && uid != "0",
        "runs as root: USER {}",
        user[0]
    );

    // The data dir the image configures is the volume.
    let env = in_runtime("ENV").join(" ");
    let env: BTreeMap<&str, &str> = env
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let data_dir = env.get("ROSTER_DATA_DIR").expect("ENV ROSTER_DATA_DIR");
    assert_eq!(in_runtime("VOLUME"), [format!("[\"{data_dir}\"]")]);
    assert_eq!(listens_everywhere(env["ROSTER_HTTP"]), 8848);
    assert_eq!(listens_everywhere(env["ROSTER_PEER"]), 7848);
    let exposed = in_runtime("EXPOSE").join(" ");
    for port in ["8848/tcp", "9848/tcp", "7848/tcp"] {
        assert!(exposed.contains(port), "EXPOSE {port}");
    }
    let health = in_runtime("HEALTHCHECK");
    assert_eq!(health.len(), 1);
    assert!(health[0].contains("/health/ready"), "{}", health[0]);

    // The context keeps what the build needs: every workspace member and the console.
    let ignored: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "server",
        "raft",
        "sync",
        "console-ui",
        "console-ui/dist",
        "tests",
        "bench",
    ] {
        assert!(
            !ignored.iter().any(|p| p == needed),
            ".dockerignore leaves out {needed}"
        );
    }
    assert!(ignored.iter().any(|p| p == "target"));
}

#[test]
fn dockerfile_health_check_probes_readiness() {
    let health = dockerfile()
        .into_iter()
        .find(|(k, _)| k == "HEALTHCHECK")
        .expect("HEALTHCHECK")
        .1;
    let (_, command) = health
        .split_once(" CMD ")
        .expect("HEALTHCHECK ... CMD [...]");
    let argv: Vec<String> = serde_json::from_str(command).expect("CMD in exec form");
    // The image's runtime has bash; the check reads the port from ROSTER_HTTP.
    let check = |http_port: u16| {
        Command::new(&argv[0])
            .args(&argv[1..])
            .env("ROSTER_HTTP", format!("127.0.0.1:{http_port}"))
            .output()
            .expect("run the health check")
            .status
    };
    let node = Node::start();
    assert!(check(node.http_port).success(), "a ready node is healthy");
    assert!(
        !check(free_port()).success(),
        "nothing listening is unhealthy"
    );
    // A node that is up but not ready (it waits for members that never come).
    let waiting = Node::start_with(NodeOptions {
        args: vec![
            "--node-id".into(),
            "1".into(),
            "--members".into(),
            format!("1=127.0.0.1:{},2=127.0.0.1:{}", free_port(), free_port()),
        ],
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        wait_ready: false,
        ..Default::default()
    });
    eventually(Duration::from_secs(20), || {
        waiting
            .try_request("GET", "/health/live", &[], None)
            .and_then(|r| (r.status == 200).then_some(()).ok_or(r.body))
    });
    assert!(
        !check(waiting.http_port).success(),
        "a node that is not ready is unhealthy"
    );
}

#[test]
fn systemd_unit_is_hardened_and_passes_systemd_analyze_verify() {
    let unit = read("deploy/systemd/roster.service");
    let settings: Vec<(&str, &str)> = unit
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let value = |key: &str| -> Vec<&str> {
        settings
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .collect()
    };
    for (key, wanted) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("Restart", "on-failure"),
        ("User", "roster"),
        ("ExecStart", BINARY),
    ] {
        assert_eq!(value(key), [wanted], "{key}");
    }
    assert!(value("LimitNOFILE")[0].parse::<u64>().unwrap() >= 20_480);
    assert_eq!(
        value("EnvironmentFile").len(),
        1,
        "EnvironmentFile for the secrets"
    );
    let data_dir = value("Environment")
        .iter()
        .find_map(|e| e.strip_prefix("ROSTER_DATA_DIR="))
        .expect("Environment=ROSTER_DATA_DIR=...");
    assert_eq!(value("ReadWritePaths"), [data_dir]);

    // systemd-analyze verify checks that ExecStart's binary exists: the committed unit,
    // with the binary under test in its place.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("roster.service");
    let bin = roster_bin();
    std::fs::write(
        &copy,
        unit.replace(
            &format!("ExecStart={BINARY}"),
            &format!("ExecStart={}", bin.display()),
        ),
    )
    .unwrap();
    let (_, stderr) = run_tool(
        "systemd-analyze",
        "systemd",
        &["verify", copy.to_str().unwrap()],
        dir.path(),
    );
    // A setting it cannot parse is a warning on stderr, naming the file.
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("roster.service"))
        .collect();
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify: {complaints:#?}"
    );
}

// ---- Host names ----------------------------------------------------------------------

/// Runs a node in a mount namespace of its own where `/etc/hosts` is `hosts` (a file the
/// test rewrites in place), and with `--peer` read from `peer_file` when that is not
/// empty: a node that comes back on another address under the same name. Loopback only.
fn renaming_wrapper(hosts: &Path, peer_file: &Path) -> Vec<String> {
    const SCRIPT: &str = r#"
hosts=$1; peer_file=$2; shift 2
mount --bind "$hosts" /etc/hosts || exit 97
if [ -s "$peer_file" ]; then
  n=$#; i=0; prev=
  while [ "$i" -lt "$n" ]; do
    arg=$1; shift; i=$((i + 1))
    if [ "$prev" = --peer ]; then arg=$(cat "$peer_file"); fi
    set -- "$@" "$arg"; prev=$arg
  done
fi
exec "$@"
"#;
    [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        SCRIPT,
        "roster-hosts",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([hosts, peer_file].map(|p| p.display().to_string()))
    .collect()
}

#[test]
fn members_named_by_host_name_are_found_again_at_a_new_address() {
    // Mount namespaces need root, as on CI; elsewhere this fails, it does not skip.
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .output()
        .expect("unshare (util-linux)");
    assert!(
        probe.status.success(),
        "this test needs root for a private /etc/hosts (unshare --mount): {probe:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "node-1.roster.test",
        "node-2.roster.test",
        "node-3.roster.test",
    ];
    let hosts = dir.path().join("hosts");
    let write_hosts = |node_2_at: &str| {
        let text = format!(
            "127.0.0.1 localhost\n127.0.0.1 {}\n{node_2_at} {}\n127.0.0.1 {}\n",
            names[0], names[1], names[2]
        );
        // In place: the bind mount holds the file's inode.
        std::fs::write(&hosts, text).unwrap();
    };
    write_hosts("127.0.0.2");
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let members = (0..3)
        .map(|i| format!("{}={}:{}", i + 1, names[i], ports[i].1))
        .collect::<Vec<_>>()
        .join(",");
    let peer_files: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("peer-{i}")))
        .collect();
    for (i, file) in peer_files.iter().enumerate() {
        let bind = if i == 1 {
            format!("127.0.0.2:{}", ports[1].1)
        } else {
            String::new()
        };
        std::fs::write(file, bind).unwrap();
    }
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| {
            Node::start_with(NodeOptions {
                args: vec![
                    "--node-id".into(),
                    (i + 1).to_string(),
                    "--members".into(),
                    members.clone(),
                ],
                env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
                ports: Some(ports[i]),
                wait_ready: false,
                wrapper: renaming_wrapper(&hosts, &peer_files[i]),
                ..Default::default()
            })
        })
        .collect();
    for node in &mut nodes {
        node.wait_ready();
    }
    // A write through node 1, retried while an election settles (node 2 may have led).
    let register = |node: &Node, port: u16| {
        eventually(Duration::from_secs(20), || {
            let r = node.call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName=renamed&ip=127.0.0.1&port={port}&ephemeral=false"),
            );
            (r.status == 200)
                .then_some(())
                .ok_or(format!("{}: {}", r.status, r.body))
        });
    };
    register(&nodes[0], 1001);

    // Node 2 comes back on 127.0.0.3 under the same name, as a pod on a new IP.
    nodes[1].kill();
    write_hosts("127.0.0.3");
    std::fs::write(&peer_files[1], format!("127.0.0.3:{}", ports[1].1)).unwrap();
    nodes[1].start_again();
    nodes[1].wait_ready();
    register(&nodes[0], 1002);
    let ports_on_node_2 = || -> Result<(), String> {
        let list = nodes[1]
            .call("GET", "/nacos/v1/ns/instance/list?serviceName=renamed")
            .json();
        let ports: BTreeSet<u64> = list["hosts"]
            .as_array()
            .map(|h| h.iter().filter_map(|h| h["port"].as_u64()).collect())
            .unwrap_or_default();
        if ports == BTreeSet::from([1001, 1002]) {
            Ok(())
        } else {
            Err(format!("node 2 holds {ports:?}"))
        }
    };
    eventually(Duration::from_secs(20), ports_on_node_2);
    // And node 1 hears from it again.
    eventually(Duration::from_secs(10), || {
        let live = nodes[0].metric("roster_cluster_members_live ");
        (live == Some(3.0))
            .then_some(())
            .ok_or(format!("node 1 hears from {live:?} members"))
    });
}
