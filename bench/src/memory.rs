//! Resident memory of a fresh single node: idle, then right after the last of 10,000
//! and of 100,000 ephemeral registrations (1,000 services of 100) is acknowledged. The
//! count each server holds is read from its API just after each reading, so the figure
//! is for what it really held (ephemeral instances expire 30 s after registration
//! without beats; the age of the oldest one at the reading is reported).

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use crate::api::Layout;
use crate::machine::rss_kib;
use crate::report::{median, thousands, Report, Row, Target, Unit};
use crate::servers::{self, System};
use crate::Bench;

/// Instance layout: 100 per service.
const LAYOUT: Layout = Layout {
    prefix: "mem",
    per_service: 100,
};
/// Settling time before the idle reading.
const IDLE_SETTLE: Duration = Duration::from_secs(2);

/// One run's readings.
#[derive(Default)]
struct Readings {
    idle_mib: f64,
    /// Per plan count: RSS (MiB), instances held, age of the oldest instance (s).
    loaded: Vec<(f64, usize, f64)>,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the memory readings: a fresh node per system and round.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let counts = bench.plan.rss_counts;
    let mut all: Vec<(System, Readings)> = Vec::new();
    for (round, system) in bench.runs() {
        let name = format!("rss-{}-r{}", system.key(), round + 1);
        let node = servers::start(system, &bench.setup, &name).await?;
        let api = node.api();
        tokio::time::sleep(IDLE_SETTLE).await;
        let mut readings = Readings {
            idle_mib: mib(rss_kib(node.pid)?),
            loaded: Vec::new(),
        };
        let first_registration = Instant::now();
        let mut registered = 0;
        for count in counts {
            let bulk = api.register_bulk(LAYOUT, registered..count, true).await?;
            let rss = mib(rss_kib(node.pid)?);
            let age = first_registration.elapsed().as_secs_f64();
            let held = api.count(&LAYOUT.services(count)).await?;
            report.check(format!(
                "{system}, round {}: RSS {rss:.1} MiB with {} instances held ({} registered at {:.0}/s, {} failed; oldest {age:.0} s old)",
                round + 1,
                thousands(held as u64),
                thousands((count - registered) as u64),
                bulk.acked as f64 / bulk.secs,
                bulk.failed,
            ));
            readings.loaded.push((rss, held, age));
            registered = count;
        }
        all.push((system, readings));
    }
    for system in System::BOTH {
        let runs: Vec<_> = all
            .iter()
            .filter(|(s, _)| *s == system)
            .map(|(_, r)| {
                json!({
                    "idleMiB": r.idle_mib,
                    "loaded": r.loaded.iter().zip(counts).map(|((rss, held, age), count)| json!({
                        "registered": count, "held": held, "rssMiB": rss, "oldestSecs": age,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        report.raw(format!("rss.{}", system.key()), runs);
    }

    // A system's readings over the rounds: the median, and each round's figure.
    let of = |system: System, pick: &dyn Fn(&Readings) -> Option<f64>| {
        let values: Vec<f64> = all
            .iter()
            .filter(|(s, _)| *s == system)
            .filter_map(|(_, r)| pick(r))
            .collect();
        let rounds = values
            .iter()
            .map(|v| format!("{v:.1}"))
            .collect::<Vec<_>>()
            .join(" · ");
        (median(values), rounds)
    };
    let ((roster, roster_rounds), (rnacos, rnacos_rounds)) = (
        of(System::Roster, &|r| Some(r.idle_mib)),
        of(System::RNacos, &|r| Some(r.idle_mib)),
    );
    report.rows.push(Row::pair(
        "rss",
        "RSS idle",
        Unit::MiB,
        roster,
        rnacos,
        None,
        format!("fresh node, 2 s after ready; per round {roster_rounds} vs {rnacos_rounds}"),
    ));
    for (i, count) in counts.iter().enumerate() {
        let rss = |r: &Readings| r.loaded.get(i).map(|x| x.0);
        let ((roster, roster_rounds), (rnacos, rnacos_rounds)) =
            (of(System::Roster, &rss), of(System::RNacos, &rss));
        // Every run must have held every instance at the reading.
        let short: Vec<String> = all
            .iter()
            .filter_map(|(system, r)| r.loaded.get(i).map(|x| (system, x.1)))
            .filter(|(_, held)| held != count)
            .map(|(system, held)| format!("{system} held {}", thousands(held as u64)))
            .collect();
        report.rows.push(Row::pair(
            "rss",
            format!("RSS at {} ephemeral instances", thousands(*count as u64)),
            Unit::MiB,
            roster,
            rnacos,
            (i == counts.len() - 1).then_some(Target::RatioAtMost(0.5)),
            format!(
                "{}; per round {roster_rounds} vs {rnacos_rounds}",
                if short.is_empty() {
                    "every run held every instance".to_string()
                } else {
                    short.join(", ")
                }
            ),
        ));
    }
    Ok(())
}
