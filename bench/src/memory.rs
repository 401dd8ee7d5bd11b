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
use crate::report::{thousands, Report, Row, Target, Unit};
use crate::servers::{self, System};
use crate::Bench;

/// Instance layout: 100 per service.
const LAYOUT: Layout = Layout {
    prefix: "mem",
    per_service: 100,
};
/// Settling time before the idle reading.
const IDLE_SETTLE: Duration = Duration::from_secs(2);

/// One system's readings.
#[derive(Default)]
struct Readings {
    idle_mib: Option<f64>,
    /// Per plan count: RSS (MiB), instances held, age of the oldest instance (s).
    loaded: Vec<(f64, usize, f64)>,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs the memory readings.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let counts = bench.plan.rss_counts;
    let mut all: Vec<(System, Readings)> = Vec::new();
    for system in System::BOTH {
        let node = servers::start(system, &bench.setup, &format!("rss-{}", system.key())).await?;
        let api = node.api();
        tokio::time::sleep(IDLE_SETTLE).await;
        let mut readings = Readings {
            idle_mib: Some(mib(rss_kib(node.pid)?)),
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
                "{system}: RSS {rss:.1} MiB with {} instances held ({} registered at {:.0}/s, {} failed; oldest {age:.0} s old)",
                thousands(held as u64),
                thousands((count - registered) as u64),
                bulk.acked as f64 / bulk.secs,
                bulk.failed,
            ));
            readings.loaded.push((rss, held, age));
            registered = count;
        }
        report.raw(
            format!("rss.{}", system.key()),
            json!({
                "idleMiB": readings.idle_mib,
                "loaded": readings.loaded.iter().zip(counts).map(|((rss, held, age), count)| json!({
                    "registered": count, "held": held, "rssMiB": rss, "oldestSecs": age,
                })).collect::<Vec<_>>(),
            }),
        );
        all.push((system, readings));
    }

    let of = |system| all.iter().find(|(s, _)| *s == system).map(|(_, r)| r);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    report.rows.push(Row::pair(
        "rss",
        "RSS idle",
        Unit::MiB,
        roster.and_then(|r| r.idle_mib),
        rnacos.and_then(|r| r.idle_mib),
        None,
        "fresh node, 2 s after ready",
    ));
    for (i, count) in counts.iter().enumerate() {
        let at = |r: Option<&Readings>| r.and_then(|r| r.loaded.get(i).copied());
        let (a, b) = (at(roster), at(rnacos));
        let held =
            |x: Option<(f64, usize, f64)>| x.map_or("—".to_string(), |x| thousands(x.1 as u64));
        report.rows.push(Row::pair(
            "rss",
            format!("RSS at {} ephemeral instances", thousands(*count as u64)),
            Unit::MiB,
            a.map(|x| x.0),
            b.map(|x| x.0),
            (i == counts.len() - 1).then_some(Target::RatioAtMost(0.5)),
            format!("held: roster {}, r-nacos {}", held(a), held(b)),
        ));
    }
    Ok(())
}
