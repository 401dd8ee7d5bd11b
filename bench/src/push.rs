//! UDP push latency (roster only; r-nacos has no UDP push): 100 sockets subscribe to a
//! service as Nacos 1.x Java clients do, answer every push with the Java client's ack,
//! and each round registers a new instance and times, per subscriber, the first push
//! that contains it.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::api::{Api, Instance};
use crate::report::{percentile, thousands, Report, Row, Target, Unit};
use crate::servers::{self, System};
use crate::shapes::Shape;
use crate::Bench;

/// The subscribed service.
const SERVICE: &str = "pushed";
/// The agent that makes roster push (a Java client).
const AGENT: &str = "Nacos-Java-Client:v2.1.0";
/// How long a round waits for every subscriber.
const ROUND_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause between rounds.
const BETWEEN_ROUNDS: Duration = Duration::from_millis(100);

/// One push as a subscriber saw it.
struct Receipt {
    subscriber: usize,
    at: Instant,
    ips: Vec<String>,
}

/// Receiver tasks, aborted when dropped.
struct Receivers(Vec<JoinHandle<()>>);

impl Drop for Receivers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Reads pushes on `socket`: timestamps each, acks it, reports the hosts it lists.
async fn receive(
    subscriber: usize,
    socket: Arc<UdpSocket>,
    receipts: mpsc::UnboundedSender<Receipt>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok((len, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let at = Instant::now();
        let Some(packet) = decode(&buf[..len]) else {
            continue;
        };
        // The Java 1.x client's ack, lastRefTime as a string.
        let ack = format!(
            r#"{{"type":"push-ack","lastRefTime":"{}","data":""}}"#,
            packet["lastRefTime"]
        );
        let _ = socket.send_to(ack.as_bytes(), from).await;
        let data: Value = packet["data"]
            .as_str()
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        let ips = data["hosts"]
            .as_array()
            .map(|hosts| {
                hosts
                    .iter()
                    .filter_map(|h| h["ip"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if receipts
            .send(Receipt {
                subscriber,
                at,
                ips,
            })
            .is_err()
        {
            return;
        }
    }
}

/// A push packet, gunzipped when it is gzip.
fn decode(raw: &[u8]) -> Option<Value> {
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::GzDecoder::new(raw)
            .read_to_string(&mut text)
            .ok()?;
        serde_json::from_str(&text).ok()
    } else {
        serde_json::from_slice(raw).ok()
    }
}

/// roster's UDP push counters by outcome, from `/metrics`.
async fn push_counters(api: &Api) -> Vec<(String, f64)> {
    let Ok(answer) = api.get("/metrics").await else {
        return Vec::new();
    };
    answer
        .text()
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("roster_udp_pushes_total{outcome=\"")?;
            let (outcome, value) = rest.split_once("\"}")?;
            Some((outcome.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Runs the push metric.
pub async fn run(bench: &Bench, report: &mut Report) -> Result<()> {
    let n = bench.plan.push_subscribers;
    let rounds = bench.plan.push_rounds;
    if rounds > 250 {
        bail!("at most 250 push rounds");
    }
    let node = servers::start(System::Roster, &bench.setup, "push-roster").await?;
    let api = node.api();
    let instance = |ip: String| Instance {
        service: SERVICE.to_string(),
        ip,
        port: 8080,
        k: 0,
    };
    api.register(&instance("127.77.0.1".to_string()), true, Shape::None)
        .await?;

    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n {
        let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
        let port = socket.local_addr()?.port();
        let answer = api
            .get_with(
                &format!(
                    "/nacos/v1/ns/instance/list?serviceName={SERVICE}&udpPort={port}&clientIP=127.0.0.1"
                ),
                &[("User-Agent", AGENT)],
            )
            .await?;
        if answer.status != 200 {
            bail!("subscribing answered {} {}", answer.status, answer.text());
        }
        sockets.push(Arc::new(socket));
    }
    let subscribers = api
        .get(&format!(
            "/nacos/v1/ns/service/subscribers?serviceName={SERVICE}&pageNo=1&pageSize=1000"
        ))
        .await?
        .json()?;
    let listed = subscribers["count"].as_u64().unwrap_or(0);
    report.check(format!(
        "roster: {listed} UDP subscribers listed for the push service (of {n})"
    ));

    let (tx, mut rx) = mpsc::unbounded_channel();
    let _receivers = Receivers(
        sockets
            .iter()
            .enumerate()
            .map(|(i, s)| tokio::spawn(receive(i, s.clone(), tx.clone())))
            .collect(),
    );
    let before = push_counters(&api).await;

    let mut latencies_ms: Vec<f64> = Vec::new();
    let mut missed = 0;
    for round in 0..rounds {
        // Stale receipts (resends, earlier rounds) must not count for this round.
        while rx.try_recv().is_ok() {}
        let ip = format!("127.77.1.{}", round + 1);
        let sent = Instant::now();
        api.register(&instance(ip.clone()), true, Shape::None)
            .await?;
        let deadline = sent + ROUND_TIMEOUT;
        let mut got: Vec<Option<Duration>> = vec![None; n];
        let mut remaining = n;
        while remaining > 0 {
            let receipt = match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
                Ok(Some(r)) => r,
                Ok(None) | Err(_) => break,
            };
            if got[receipt.subscriber].is_none() && receipt.ips.contains(&ip) {
                got[receipt.subscriber] = Some(receipt.at.duration_since(sent));
                remaining -= 1;
            }
        }
        missed += remaining;
        latencies_ms.extend(got.iter().flatten().map(|d| d.as_secs_f64() * 1000.0));
        tokio::time::sleep(BETWEEN_ROUNDS).await;
    }
    // Resends of unacknowledged pushes start 1 s after a push: wait that long, so the
    // counters show whether the acks were taken.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = push_counters(&api).await;
    let delta: Vec<(String, f64)> = after
        .iter()
        .map(|(outcome, v)| {
            let was = before
                .iter()
                .find(|(o, _)| o == outcome)
                .map_or(0.0, |(_, v)| *v);
            (outcome.clone(), v - was)
        })
        .collect();
    let counters = delta
        .iter()
        .map(|(o, v)| format!("{o} {v:.0}"))
        .collect::<Vec<_>>()
        .join(", ");

    latencies_ms.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99, max) = (
        percentile(&latencies_ms, 50.0),
        percentile(&latencies_ms, 99.0),
        latencies_ms.last().copied(),
    );
    let expected = n * rounds;
    report.check(format!(
        "roster: push receipts {} of {} ({missed} missing after {:.0} s); server push counters during the rounds: {}",
        thousands(latencies_ms.len() as u64),
        thousands(expected as u64),
        ROUND_TIMEOUT.as_secs_f64(),
        if counters.is_empty() { "unavailable".to_string() } else { counters.clone() },
    ));
    report.raw(
        "push.roster",
        json!({
            "subscribers": n, "rounds": rounds, "receipts": latencies_ms.len(), "missing": missed,
            "p50Ms": p50, "p99Ms": p99, "maxMs": max, "serverCounters": delta,
        }),
    );
    let note = format!(
        "{n} subscribers × {rounds} rounds: {} receipts, {missed} missing; r-nacos: no UDP push",
        thousands(latencies_ms.len() as u64)
    );
    report.rows.push(Row::pair(
        "push",
        format!("UDP push latency, {n} subscribers, p50"),
        Unit::Ms,
        p50,
        None,
        None,
        note.clone(),
    ));
    report.rows.push(Row::pair(
        "push",
        format!("UDP push latency, {n} subscribers, p99"),
        Unit::Ms,
        p99,
        None,
        Some(Target::Below(100.0)),
        format!(
            "max {:.1} ms; server counters: {counters}",
            max.unwrap_or(0.0)
        ),
    ));
    drop(tx);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_gzipped_packets_decode() {
        let packet = br#"{"type":"dom","lastRefTime":5,"data":"{}"}"#;
        assert_eq!(decode(packet).unwrap()["lastRefTime"], 5);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, packet).unwrap();
        let zipped = gz.finish().unwrap();
        assert_eq!(decode(&zipped).unwrap()["type"], "dom");
    }
}
