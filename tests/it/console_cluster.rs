//! The web console against a three-node cluster, driven in Debian's Chromium by
//! `tests/console/console_cluster.mjs`: the overview's charts receive new points; the
//! cluster page shows each member's own view, asked of that member; when the node that
//! served the console is killed, the console moves to another member by itself, says
//! so, and carries on (cluster page, services, overview), stays there while that node
//! comes back, and returns when asked. Every page it shows fits 1366 × 768 and passes
//! axe-core's serious rules, in English and Chinese; screenshots land in
//! `target/console-screenshots/`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use roster_tests::{workspace_root, Cluster, Value, ADMIN_PASSWORD};

#[test]
fn the_console_follows_the_cluster_when_its_node_dies() {
    let mut cluster = Cluster::start(3, &[]);
    let shots = workspace_root().join("target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    assert!(
        workspace_root()
            .join("tests/console/node_modules/playwright-core")
            .exists(),
        "playwright-core missing: run scripts/test"
    );
    let servers: Vec<String> = cluster.nodes.iter().map(|n| n.addr()).collect();
    let mut child = Command::new("node")
        .arg(workspace_root().join("tests/console/console_cluster.mjs"))
        .args(["--servers", &servers.join(",")])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "console-cluster-svc"])
        .arg("--shots")
        .arg(&shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs the browser script");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut steps = Vec::new();
    let mut kills = 0;
    // The script's lines: steps as they pass, and requests to kill or start node 1,
    // answered with a line once done. The script's watchdog bounds the loop.
    for line in stdout.lines() {
        let line = line.expect("the script's output");
        let request: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        match (request["want"].as_str(), request["node"].as_u64()) {
            (Some("kill"), Some(1)) => {
                cluster.nodes[0].kill();
                kills += 1;
            }
            (Some("start"), Some(1)) => {
                cluster.nodes[0].start_again();
                cluster.nodes[0].wait_ready();
            }
            (Some(other), _) => panic!("the script asked for {other}: {line}"),
            (None, _) => {
                steps.push(line);
                continue;
            }
        }
        writeln!(stdin, "done").expect("the script reads its answer");
    }
    let out = child.wait_with_output().expect("the script ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = steps.join("\n");
    assert!(
        out.status.success(),
        "browser flow failed ({}):\n--- steps\n{report}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("browser flow:\n{report}");
    assert_eq!(kills, 1, "the script killed node 1 once");
    for step in ["overview", "cluster-views", "failover", "switch-back"] {
        assert!(
            steps
                .iter()
                .any(|l| l.contains(&format!("\"step\":\"{step}\",\"ok\":true"))),
            "step {step} did not pass:\n{report}"
        );
    }
    for page in [
        "overview",
        "overview-zh",
        "cluster-views",
        "failover",
        "failover-zh",
    ] {
        let shot = shots.join(format!("{page}.png"));
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "screenshot {}",
            shot.display()
        );
    }
}
