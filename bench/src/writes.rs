//! Ephemeral writes on a single node: distinct registrations per second (every request
//! a new instance), and heartbeats per second over 10,000 registered instances.

use anyhow::{bail, Result};

use crate::api::{services, Layout};
use crate::list::failures;
use crate::report::{thousands, Report, Row, Target, Unit};
use crate::servers::{self, System};
use crate::shapes::Shape;
use crate::wrk::{Figures, Load, Runs};
use crate::Bench;

/// Services the distinct registrations are spread over.
const REGISTER_SERVICES: usize = 1_000;
/// Layout of the instances that beat.
const BEAT_LAYOUT: Layout = Layout {
    prefix: "beat",
    per_service: 100,
};

/// Distinct ephemeral registrations per second.
pub async fn register(bench: &Bench, report: &mut Report) -> Result<()> {
    let mut figures: Vec<(System, Runs)> = Vec::new();
    let mut held_after = Vec::new();
    for (round, system) in bench.runs() {
        let name = format!("register-{}-r{}", system.key(), round + 1);
        let node = servers::start(system, &bench.setup, &name).await?;
        let load = Load {
            url: format!("http://{}/", node.http),
            script: Some((
                bench.script("register.lua"),
                vec![
                    "reg".to_string(),
                    REGISTER_SERVICES.to_string(),
                    "true".to_string(),
                ],
            )),
            secs: bench.plan.secs,
            headers: Vec::new(),
        };
        let measured = bench.wrk(&name, load).await?;
        let held = node
            .api()
            .count(&services("reg", REGISTER_SERVICES))
            .await?;
        report.check(format!(
            "{system}, round {}: distinct ephemeral registrations: {} acknowledged in {:.1} s, {} held right after",
            round + 1,
            thousands(measured.ok()),
            measured.secs,
            thousands(held as u64)
        ));
        held_after.push(format!("{system} {}", thousands(held as u64)));
        add_run(&mut figures, system, measured);
    }
    push_rows(
        report,
        "register",
        "ephemeral registrations, distinct instances",
        &figures,
        format!("held right after each run: {}", held_after.join(", ")),
    );
    Ok(())
}

/// Heartbeats per second cycling over the plan's registered instances.
pub async fn beat(bench: &Bench, report: &mut Report) -> Result<()> {
    let count = bench.plan.beat_instances;
    let mut figures: Vec<(System, Runs)> = Vec::new();
    let mut held_after = Vec::new();
    for (round, system) in bench.runs() {
        let name = format!("beat-{}-r{}", system.key(), round + 1);
        let node = servers::start(system, &bench.setup, &name).await?;
        let api = node.api();
        let bulk = api
            .register_bulk(BEAT_LAYOUT, 0..count, true, Shape::None)
            .await?;
        if bulk.failed > 0 {
            bail!("{system}: {} of {count} registrations failed", bulk.failed);
        }
        // One beat by hand, to see that the script's request is understood.
        let first = BEAT_LAYOUT.instance(0);
        let beat = format!(
            r#"{{"ip":"{}","port":{},"serviceName":"DEFAULT_GROUP@@{}","cluster":"DEFAULT","weight":1.0,"metadata":{{}}}}"#,
            first.ip, first.port, first.service
        );
        let answer = api
            .put(&format!(
                "/nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40{}&beat={}",
                first.service,
                encode(&beat)
            ))
            .await?;
        let code = answer.json().ok().and_then(|v| v["code"].as_u64());
        if answer.status != 200 || code != Some(10200) {
            bail!(
                "{system}: a beat answered {} {}",
                answer.status,
                answer.text()
            );
        }
        let load = || Load {
            url: format!("http://{}/", node.http),
            script: Some((
                bench.script("beat.lua"),
                vec![
                    BEAT_LAYOUT.prefix.to_string(),
                    count.to_string(),
                    BEAT_LAYOUT.per_service.to_string(),
                    crate::wrk::THREADS.to_string(),
                ],
            )),
            secs: bench.plan.secs,
            headers: Vec::new(),
        };
        bench.warm_up(&name, load()).await?;
        let measured = bench.wrk(&name, load()).await?;
        let held = api.count(&BEAT_LAYOUT.services(count)).await?;
        report.check(format!(
            "{system}, round {}: beats: {} instances registered at {:.0}/s beforehand; {} held after the run",
            round + 1,
            thousands(bulk.acked as u64),
            bulk.acked as f64 / bulk.secs,
            thousands(held as u64)
        ));
        held_after.push(format!("{system} {}", thousands(held as u64)));
        add_run(&mut figures, system, measured);
    }
    push_rows(
        report,
        "beat",
        &format!("heartbeats over {} instances", thousands(count as u64)),
        &figures,
        format!("held after each run: {}", held_after.join(", ")),
    );
    Ok(())
}

/// Adds one round's run of `system`.
fn add_run(figures: &mut Vec<(System, Runs)>, system: System, run: Figures) {
    match figures.iter_mut().find(|(s, _)| *s == system) {
        Some((_, runs)) => runs.0.push(run),
        None => figures.push((system, Runs(vec![run]))),
    }
}

/// The rate row (target: twice r-nacos) and the latency rows of one write metric.
fn push_rows(
    report: &mut Report,
    group: &'static str,
    metric: &str,
    figures: &[(System, Runs)],
    note: String,
) {
    let of = |system| figures.iter().find(|(s, _)| *s == system).map(|(_, f)| f);
    let (roster, rnacos) = (of(System::Roster), of(System::RNacos));
    for (system, runs) in figures {
        report.raw(format!("{group}.{}", system.key()), runs);
    }
    report.rows.push(Row::pair(
        group,
        metric,
        Unit::PerSec,
        roster.and_then(Runs::rate),
        rnacos.and_then(Runs::rate),
        Some(Target::RatioAtLeast(2.0)),
        format!(
            "{note}; per round {} vs {}{}",
            roster.map(Runs::rates).unwrap_or_default(),
            rnacos.map(Runs::rates).unwrap_or_default(),
            failures(roster, rnacos)
        ),
    ));
    report.rows.push(Row::pair(
        group,
        format!("{metric}, p50"),
        Unit::Ms,
        roster.and_then(Runs::p50),
        rnacos.and_then(Runs::p50),
        None,
        "",
    ));
    report.rows.push(Row::pair(
        group,
        format!("{metric}, p99"),
        Unit::Ms,
        roster.and_then(Runs::p99),
        rnacos.and_then(Runs::p99),
        None,
        "",
    ));
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
