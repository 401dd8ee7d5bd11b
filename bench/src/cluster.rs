//! Three-node clusters, a fresh one per system and run, roster first:
//!
//! - persistent registrations per second through a follower (distinct instances, no
//!   metadata), then whether the cluster holds what it acknowledged: each node's count
//!   right after the run, and how long until every node holds at least the acknowledged
//!   count;
//! - ephemeral registrations per second through node 1 with the Dubbo 3 instance shape
//!   ([`Shape::Dubbo`]: `bench/lua/register.lua` with shape `dubbo`), the same check of
//!   what every node holds (polled every second: the instances expire 30 s after
//!   registration without beats), and memory per instance on every node: (RSS right
//!   after the run − the node's idle RSS) / instances it held right after (read before
//!   any list, so the figure is the registry's, not the list bodies' cache); the worst
//!   node is the figure. The notes give it again once every service has been listed
//!   (counting lists each): roster then also keeps up to `--list-cache-mib` (64 MiB) of
//!   serialized lists.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::api::services;
use crate::list::failures;
use crate::machine::rss_kib;
use crate::report::{thousands, Report, Row, Target, Unit};
use crate::servers::{self, Cluster, System};
use crate::shapes::Shape;
use crate::wrk::{Figures, Load};
use crate::Bench;

/// Services the persistent registrations are spread over.
const SERVICES: usize = 100;
/// Pause between count polls while waiting for the cluster to converge.
const POLL: Duration = Duration::from_secs(5);
/// Services the ephemeral registrations are spread over (as in the `register` group).
const EPHEMERAL_SERVICES: usize = 1_000;
/// Service name prefix of the ephemeral registrations.
const EPHEMERAL_PREFIX: &str = "eph";
/// The shape of the ephemeral registrations (`register.lua`'s fourth argument).
const EPHEMERAL_SHAPE: Shape = Shape::Dubbo;
/// Pause between count polls of the ephemeral run (its instances expire 30 s after
/// registration, so the cluster is read often).
const EPHEMERAL_POLL: Duration = Duration::from_secs(1);
/// Settling time before the idle readings.
const IDLE_SETTLE: Duration = Duration::from_secs(2);
/// Memory per ephemeral Dubbo instance on the worst node, bytes.
const EPHEMERAL_BYTES_TARGET: f64 = 500.0;
/// Ephemeral registrations per second through one node.
const EPHEMERAL_RATE_TARGET: f64 = 20_000.0;

/// Instances each node holds over the benchmark's services.
async fn counts(cluster: &Cluster, names: &[String]) -> Vec<Option<usize>> {
    let mut out = Vec::new();
    for node in &cluster.nodes {
        out.push(node.api().count(names).await.ok());
    }
    out
}

fn counts_text(counts: &[Option<usize>]) -> String {
    counts
        .iter()
        .map(|c| c.map_or("?".to_string(), |c| thousands(c as u64)))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// A fresh three-node cluster of `system`. Forming one sometimes fails on a busy machine
/// (an r-nacos node that never joins or never learns the leader): then one more is
/// started, the first failure kept under "Checks".
async fn start(bench: &Bench, report: &mut Report, system: System, name: &str) -> Result<Cluster> {
    match servers::start_cluster(system, &bench.setup, name).await {
        Ok(cluster) => Ok(cluster),
        Err(e) => {
            report.check(format!(
                "{system} cluster {name} did not form, starting another: {}",
                first_line(&e)
            ));
            servers::start_cluster(system, &bench.setup, &format!("{name}-again")).await
        }
    }
}

/// Runs the cluster metrics: the persistent run of both systems, then the ephemeral
/// one (a failure of the first is reported and does not skip the second).
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    if let Err(e) = persistent(bench, report).await {
        report.check(format!("cluster, persistent registrations FAILED: {e:#}"));
    }
    ephemeral(bench, report).await
}

/// Persistent registrations through a follower.
async fn persistent(bench: &Bench, report: &mut Report) -> Result<()> {
    let names = services("per", SERVICES);
    let mut figures: Vec<(System, Figures)> = Vec::new();
    let mut notes = Vec::new();
    for system in System::BOTH {
        let cluster = start(bench, report, system, &format!("cluster-{}", system.key())).await?;
        let leader = cluster.leader().await?;
        let follower = cluster.follower().await?;
        eprintln!(
            "  {system}: leader {leader}, writing through node {}",
            follower.id
        );
        let load = Load {
            url: format!("http://{}/", follower.http),
            script: Some((
                bench.script("register.lua"),
                vec!["per".to_string(), SERVICES.to_string(), "false".to_string()],
            )),
            secs: bench.plan.secs,
            headers: Vec::new(),
        };
        let measured = bench
            .wrk(&format!("cluster-{}", system.key()), load)
            .await?;
        let acked = measured.ok() as usize;
        let ended = Instant::now();
        let right_after = counts(&cluster, &names).await;
        // Two moments: when every node first holds at least what was acknowledged
        // (requests in flight when wrk stopped may add a few), and when the nodes agree
        // and have not moved since the previous poll.
        let (mut polled_at, mut previous, mut last) = (0.0, None, right_after.clone());
        let mut held_after: Option<f64> = None;
        let settled_after = loop {
            let holds = last.iter().all(|c| c.is_some_and(|c| c >= acked));
            if holds && held_after.is_none() {
                held_after = Some(polled_at);
            }
            let agree = last.windows(2).all(|w| w[0] == w[1]);
            if holds && agree && previous.as_ref() == Some(&last) {
                break Some(polled_at);
            }
            if ended.elapsed() >= bench.plan.converge {
                break None;
            }
            tokio::time::sleep(POLL).await;
            polled_at = ended.elapsed().as_secs_f64();
            previous = Some(std::mem::replace(&mut last, counts(&cluster, &names).await));
        };
        let convergence = match (held_after, settled_after) {
            (Some(h), Some(s)) => format!(
                "every node held the acknowledged count {h:.0} s after the run; the counts agreed and stood still from {s:.0} s"
            ),
            (Some(h), None) => format!(
                "every node held the acknowledged count {h:.0} s after the run, but the counts did NOT settle within {:.0} s",
                bench.plan.converge.as_secs_f64()
            ),
            (None, _) => format!(
                "NOT every node held the acknowledged count {:.0} s after the run",
                bench.plan.converge.as_secs_f64()
            ),
        };
        let converged_after = held_after;
        report.check(format!(
            "{system} cluster: {} persistent registrations acknowledged through follower {} (leader {leader}); \
             nodes 1/2/3 held {} right after the run and {} at the end; {convergence}",
            thousands(acked as u64),
            follower.id,
            counts_text(&right_after),
            counts_text(&last),
        ));
        notes.push(format!(
            "{system}: acked {}, held {} right after{}",
            thousands(acked as u64),
            counts_text(&right_after),
            match converged_after {
                Some(s) if s > 0.5 => format!(", all ≥ acked after {s:.0} s"),
                Some(_) => String::new(),
                None => ", not converged".to_string(),
            }
        ));
        report.raw(
            format!("cluster.{}", system.key()),
            json!({
                "wrk": &measured,
                "leader": leader,
                "follower": follower.id,
                "acked": acked,
                "heldRightAfter": right_after,
                "heldAtEnd": last,
                "allHeldAfterSecs": held_after,
                "settledAfterSecs": settled_after,
            }),
        );
        figures.push((system, measured));
    }

    let of = |system| figures.iter().find(|(s, _)| *s == system).map(|(_, f)| f);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    report.rows.push(Row::pair(
        "cluster",
        "3 nodes: persistent registrations via a follower",
        Unit::PerSec,
        roster.map(Figures::ok_per_sec),
        rnacos.map(Figures::ok_per_sec),
        Some(Target::AtLeast(5_000.0)),
        format!("{}{}", notes.join("; "), failures(roster, rnacos)),
    ));
    for (label, pick) in [
        ("p50", (|f: &Figures| f.p50_ms) as fn(&Figures) -> f64),
        ("p99", |f: &Figures| f.p99_ms),
    ] {
        report.rows.push(Row::pair(
            "cluster",
            format!("3 nodes: persistent registrations, {label}"),
            Unit::Ms,
            roster.map(pick),
            rnacos.map(pick),
            None,
            "",
        ));
    }
    Ok(())
}

/// Instances every node holds over `names`, the nodes counted at once.
async fn counts_at_once(cluster: &Cluster, names: &[String]) -> Vec<Option<usize>> {
    let tasks: Vec<_> = cluster
        .nodes
        .iter()
        .map(|node| {
            let (api, names) = (node.api(), names.to_vec());
            tokio::spawn(async move { api.count(&names).await })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.ok().and_then(Result::ok));
    }
    out
}

/// The first line of an error's outermost message (some carry a node's log tail), for
/// a table cell.
fn first_line(e: &anyhow::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// Every node's VmRSS, KiB (`None` for a node that cannot be read).
fn rss_all(cluster: &Cluster) -> Vec<Option<u64>> {
    cluster.nodes.iter().map(|n| rss_kib(n.pid).ok()).collect()
}

/// What one system's ephemeral run measured.
struct Ephemeral {
    /// wrk's figures.
    figures: Figures,
    /// Registrations acknowledged (2xx).
    acked: usize,
    /// Every node's idle RSS, KiB.
    idle_kib: Vec<Option<u64>>,
    /// Every node's count right after the run.
    right_after: Vec<Option<usize>>,
    /// Every node's count at the last poll (when all held, or when the wait ended).
    last: Vec<Option<usize>>,
    /// Seconds after the run when every node first held the acknowledged count.
    held_after: Option<f64>,
    /// Every node's RSS right after the run, before any list, KiB.
    rss_right_after: Vec<Option<u64>>,
    /// Every node's RSS right after that poll, KiB.
    loaded_kib: Vec<Option<u64>>,
    /// Age of the oldest instance (since wrk started) at the RSS reading, seconds.
    oldest_secs: f64,
}

impl Ephemeral {
    /// Bytes per instance held on each node right after the run, before any list:
    /// (RSS − idle RSS) / held.
    fn per_node(&self) -> Vec<Option<f64>> {
        per_instance(&self.idle_kib, &self.rss_right_after, &self.right_after)
    }

    /// The same once every service has been listed (when every node held the
    /// acknowledged count, or the wait ended).
    fn per_node_listed(&self) -> Vec<Option<f64>> {
        per_instance(&self.idle_kib, &self.loaded_kib, &self.last)
    }

    /// The worst node's bytes per instance.
    fn worst(&self) -> Option<f64> {
        self.per_node().into_iter().flatten().reduce(f64::max)
    }

    /// The notes of the rate row.
    fn rate_note(&self, system: System, converge: Duration) -> String {
        format!(
            "{system}: acked {}, held {} right after, {}",
            thousands(self.acked as u64),
            counts_text(&self.right_after),
            match self.held_after {
                Some(s) => format!(
                    "{} when all held, all ≥ acked after {s:.0} s (oldest instance {:.0} s old)",
                    counts_text(&self.last),
                    self.oldest_secs
                ),
                None => format!(
                    "NOT all ≥ acked within {:.0} s: {} at the end (oldest instance {:.0} s old)",
                    converge.as_secs_f64(),
                    counts_text(&self.last),
                    self.oldest_secs
                ),
            }
        )
    }

    /// The notes of the memory row.
    fn memory_note(&self, system: System) -> String {
        let nodes = |bytes: Vec<Option<f64>>, held: &[Option<usize>]| -> String {
            bytes
                .iter()
                .zip(held)
                .enumerate()
                .map(|(i, (bytes, held))| {
                    format!(
                        "node {} {} B × {}",
                        i + 1,
                        bytes.map_or("?".to_string(), |b| thousands(b.max(0.0).round() as u64)),
                        held.map_or("?".to_string(), |h| thousands(h as u64))
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{system}: {}; once every service was listed: {}{}",
            nodes(self.per_node(), &self.right_after),
            nodes(self.per_node_listed(), &self.last),
            if self.held_after.is_some() {
                String::new()
            } else {
                " (NOT every node held the acknowledged count)".to_string()
            }
        )
    }
}

/// Ephemeral Dubbo-shaped registrations through node 1 of a fresh cluster per system,
/// what every node holds afterwards, and every node's memory per instance.
async fn ephemeral(bench: &Bench, report: &mut Report) -> Result<()> {
    let names = services(EPHEMERAL_PREFIX, EPHEMERAL_SERVICES);
    let mut runs: Vec<(System, Ephemeral)> = Vec::new();
    let mut failed = Vec::new();
    for system in System::BOTH {
        match ephemeral_run(bench, report, system, &names).await {
            Ok(run) => runs.push((system, run)),
            // One system failing (refusing the shape, a node dying) keeps the other's.
            Err(e) => {
                report.check(format!(
                    "{system} cluster, ephemeral {} registrations FAILED: {e:#}",
                    EPHEMERAL_SHAPE.key()
                ));
                failed.push(format!("{system}: FAILED ({}; see Checks)", first_line(&e)));
            }
        }
    }
    let of = |system| runs.iter().find(|(s, _)| *s == system).map(|(_, r)| r);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    fn figures(run: Option<&Ephemeral>) -> Option<&Figures> {
        run.map(|r| &r.figures)
    }
    let mut rate_notes: Vec<String> = runs
        .iter()
        .map(|(s, r)| r.rate_note(*s, bench.plan.converge))
        .collect();
    rate_notes.extend(failed.iter().cloned());
    report.rows.push(Row::pair(
        "cluster",
        format!(
            "3 nodes: ephemeral registrations via one node, {} shape",
            EPHEMERAL_SHAPE.key()
        ),
        Unit::PerSec,
        roster.map(|r| r.figures.ok_per_sec()),
        rnacos.map(|r| r.figures.ok_per_sec()),
        Some(Target::AtLeast(EPHEMERAL_RATE_TARGET)),
        format!(
            "{}{}",
            rate_notes.join("; "),
            failures(figures(roster), figures(rnacos))
        ),
    ));
    for (label, pick) in [
        ("p50", (|f: &Figures| f.p50_ms) as fn(&Figures) -> f64),
        ("p99", |f: &Figures| f.p99_ms),
    ] {
        report.rows.push(Row::pair(
            "cluster",
            format!(
                "3 nodes: ephemeral registrations, {} shape, {label}",
                EPHEMERAL_SHAPE.key()
            ),
            Unit::Ms,
            figures(roster).map(pick),
            figures(rnacos).map(pick),
            None,
            "",
        ));
    }
    let mut memory_notes: Vec<String> = runs.iter().map(|(s, r)| r.memory_note(*s)).collect();
    memory_notes.extend(failed);
    report.rows.push(Row::pair(
        "cluster",
        format!(
            "3 nodes: memory per {} instance, worst node",
            EPHEMERAL_SHAPE.key()
        ),
        Unit::Bytes,
        roster.and_then(Ephemeral::worst),
        rnacos.and_then(Ephemeral::worst),
        Some(Target::AtMost(EPHEMERAL_BYTES_TARGET)),
        format!(
            "(RSS right after the run, before any list − the node's idle RSS) / \
             instances it held, per node: {}",
            memory_notes.join("; ")
        ),
    ));
    Ok(())
}

/// Bytes per instance on each node: (loaded − idle RSS) / held.
fn per_instance(
    idle_kib: &[Option<u64>],
    loaded_kib: &[Option<u64>],
    held: &[Option<usize>],
) -> Vec<Option<f64>> {
    (0..held.len())
        .map(|i| {
            let (idle, loaded, held) = (
                (*idle_kib.get(i)?)?,
                (*loaded_kib.get(i)?)?,
                (*held.get(i)?)?,
            );
            (held > 0).then(|| (loaded as f64 - idle as f64) * 1024.0 / held as f64)
        })
        .collect()
}

/// One system's ephemeral run on a fresh cluster.
async fn ephemeral_run(
    bench: &Bench,
    report: &mut Report,
    system: System,
    names: &[String],
) -> Result<Ephemeral> {
    let name = format!("cluster-eph-{}", system.key());
    let cluster = start(bench, report, system, &name).await?;
    let leader = cluster.leader().await?;
    let node = cluster.nodes.first().context("a cluster has nodes")?;
    eprintln!(
        "  {system}: leader {leader}, ephemeral {} registrations through node {}",
        EPHEMERAL_SHAPE.key(),
        node.id
    );
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle_kib = rss_all(&cluster);
    let load = Load {
        url: format!("http://{}/", node.http),
        script: Some((
            bench.script("register.lua"),
            vec![
                EPHEMERAL_PREFIX.to_string(),
                EPHEMERAL_SERVICES.to_string(),
                "true".to_string(),
                EPHEMERAL_SHAPE.key().to_string(),
            ],
        )),
        secs: bench.plan.secs,
        headers: Vec::new(),
    };
    let started = Instant::now();
    let figures = bench.wrk(&name, load).await?;
    let acked = figures.ok() as usize;
    let ended = Instant::now();
    let rss_right_after = rss_all(&cluster);
    let right_after = counts_at_once(&cluster, names).await;
    let first_count_secs = ended.elapsed().as_secs_f64();
    let mut last = right_after.clone();
    let held_after = loop {
        let polled_at = ended.elapsed().as_secs_f64();
        if last.iter().all(|c| c.is_some_and(|c| c >= acked)) {
            break Some(polled_at);
        }
        if ended.elapsed() >= bench.plan.converge {
            break None;
        }
        tokio::time::sleep(EPHEMERAL_POLL).await;
        last = counts_at_once(&cluster, names).await;
    };
    let loaded_kib = rss_all(&cluster);
    let oldest_secs = started.elapsed().as_secs_f64();
    let run = Ephemeral {
        figures,
        acked,
        idle_kib,
        right_after,
        last,
        held_after,
        rss_right_after: rss_right_after.clone(),
        loaded_kib,
        oldest_secs,
    };
    let kib_text = |v: &[Option<u64>]| {
        v.iter()
            .map(|k| k.map_or("?".to_string(), |k| format!("{:.1}", k as f64 / 1024.0)))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    report.check(format!(
        "{system} cluster: {} ephemeral {} registrations acknowledged through node {} \
         (leader {leader}); nodes 1/2/3 held {} right after the run (counted in {first_count_secs:.1} s) \
         and {} {}; RSS idle {} MiB, loaded {} MiB (oldest instance {:.0} s old)",
        thousands(acked as u64),
        EPHEMERAL_SHAPE.key(),
        node.id,
        counts_text(&run.right_after),
        counts_text(&run.last),
        match held_after {
            Some(s) => format!("when every node held the acknowledged count, {s:.0} s after the run"),
            None => format!(
                "when the wait ended ({:.0} s): NOT every node held the acknowledged count",
                bench.plan.converge.as_secs_f64()
            ),
        },
        kib_text(&run.idle_kib),
        kib_text(&run.loaded_kib),
        oldest_secs,
    ));
    report.raw(
        format!("clusterEphemeral.{}", system.key()),
        json!({
            "shape": EPHEMERAL_SHAPE.key(),
            "wrk": &run.figures,
            "leader": leader,
            "writtenTo": node.id,
            "acked": acked,
            "idleKiB": run.idle_kib,
            "rssRightAfterKiB": rss_right_after,
            "heldRightAfter": run.right_after,
            "heldAtReading": run.last,
            "allHeldAfterSecs": held_after,
            "loadedKiB": run.loaded_kib,
            "oldestSecs": oldest_secs,
            "bytesPerInstance": run.per_node(),
            "bytesPerInstanceListed": run.per_node_listed(),
        }),
    );
    Ok(run)
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::process::Command;

    use serde_json::Value;

    use super::*;
    use crate::api::encode;

    /// The request targets wrk sends with `register.lua` and `args` in 1 s over one
    /// connection, answered by a minimal HTTP server.
    fn register_lua_requests(args: &[&str]) -> Vec<String> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (sent, received) = std::sync::mpsc::channel();
        // Left running when the test ends: it only ever accepts wrk's connections.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let sent = sent.clone();
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    for line in BufReader::new(stream).lines() {
                        let Ok(line) = line else { return };
                        let line = line.trim_end_matches('\r');
                        if let Some(target) = line
                            .strip_prefix("POST ")
                            .and_then(|l| l.strip_suffix(" HTTP/1.1"))
                        {
                            let _ = sent.send(target.to_string());
                        } else if line.is_empty()
                            && writer
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/lua/register.lua");
        let status = Command::new("wrk")
            .args(["-t1", "-c1", "-d1s", "-s", script])
            .arg(format!("http://{addr}/"))
            .arg("--")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        // Fails rather than skips: `bench/run` installs wrk, and a check that passes
        // without running proves nothing.
        status.expect("wrk runs (bench/run installs it: apt-get install wrk)");
        std::thread::sleep(Duration::from_millis(100));
        received.try_iter().collect()
    }

    fn query(target: &str) -> Vec<(String, String)> {
        let (_, query) = target.split_once('?').unwrap();
        query
            .split('&')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    #[test]
    fn register_lua_sends_the_dubbo_shape_as_the_driver_does() {
        let targets = register_lua_requests(&["eph", "1000", "true", "dubbo"]);
        assert!(targets.len() >= 300, "{} requests", targets.len());
        let mut stamps = std::collections::HashSet::new();
        for target in &targets {
            let q = query(target);
            let names: Vec<&str> = q.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                names,
                ["serviceName", "ip", "port", "ephemeral", "metadata"],
                "{target}"
            );
            let service = &q[0].1;
            let ip: std::net::Ipv4Addr = q[1].1.parse().unwrap();
            assert!(ip.is_loopback());
            let [_, t, hi, lo] = ip.octets();
            assert_eq!(t, 1);
            let port: u64 = q[2].1.parse().unwrap();
            let n = (port - 10_000) * 65_536 + u64::from(hi) * 256 + u64::from(lo);
            assert_eq!(service, &format!("eph-{}", n % 1000));
            let stamp = 1_764_633_600_000 + n * 37 + 1;
            assert!(stamps.insert(stamp));
            let mut expected = Shape::Dubbo.metadata(service, 0).unwrap();
            expected.insert("timestamp".into(), Value::String(stamp.to_string()));
            // The same bytes the driver's own registrations send.
            assert_eq!(q[4].1, encode(&Value::Object(expected).to_string()));
        }
    }

    #[test]
    fn register_lua_without_a_shape_sends_no_metadata() {
        let targets = register_lua_requests(&["reg", "1000", "false"]);
        let target = &targets[0];
        let q = query(target);
        let n: u64 = q[1].1.rsplit('.').next().unwrap().parse().unwrap();
        assert_eq!(
            target,
            &format!(
                "/nacos/v1/ns/instance?serviceName=reg-{n}&ip=127.1.0.{n}&port=10000&ephemeral=false"
            )
        );
    }
}
