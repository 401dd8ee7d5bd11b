//! Three-node clusters: persistent registrations per second through a follower
//! (distinct instances), then whether the cluster holds what it acknowledged: each
//! node's count right after the run, and how long until every node holds at least the
//! acknowledged count.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::api::services;
use crate::list::failures;
use crate::report::{thousands, Report, Row, Target, Unit};
use crate::servers::{self, Cluster, System};
use crate::wrk::{Figures, Load};
use crate::Bench;

/// Services the registrations are spread over.
const SERVICES: usize = 100;
/// Pause between count polls while waiting for the cluster to converge.
const POLL: Duration = Duration::from_secs(5);

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

/// Runs the cluster metric.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let names = services("per", SERVICES);
    let mut figures: Vec<(System, Figures)> = Vec::new();
    let mut notes = Vec::new();
    for system in System::BOTH {
        let cluster =
            servers::start_cluster(system, &bench.setup, &format!("cluster-{}", system.key()))
                .await?;
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
