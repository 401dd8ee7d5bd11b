//! The load generator: `wrk -t2 -c50 --latency`, optionally with one of the Lua scripts
//! in `bench/lua/`, and the figures read from its report.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::procs;
use crate::report::{median, thousands, Row, Unit};

/// wrk threads and connections, the same for every run and both systems.
pub const THREADS: u32 = 2;
/// Open connections.
pub const CONNECTIONS: u32 = 50;

/// One wrk run to make.
pub struct Load {
    /// Target URL (the script may replace path and method).
    pub url: String,
    /// Lua script, with its arguments.
    pub script: Option<(PathBuf, Vec<String>)>,
    /// Duration, seconds.
    pub secs: u64,
    /// Extra request headers (`Name: value`), sent with every request (`-H`; a script's
    /// requests carry them when it formats them with wrk's default headers).
    pub headers: Vec<String>,
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Responses received.
    pub requests: u64,
    /// Measured duration, seconds.
    pub secs: f64,
    /// Responses with a status outside 2xx/3xx.
    pub non_2xx: u64,
    /// Connect, read, write errors and timeouts.
    pub socket_errors: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

impl Figures {
    /// Successful responses per second.
    pub fn ok_per_sec(&self) -> f64 {
        if self.secs <= 0.0 {
            return 0.0;
        }
        self.requests.saturating_sub(self.non_2xx) as f64 / self.secs
    }

    /// Successful responses.
    pub fn ok(&self) -> u64 {
        self.requests.saturating_sub(self.non_2xx)
    }

    /// A short account of failures, empty when there were none.
    pub fn failures(&self) -> String {
        Failures::failures(self)
    }
}

/// What went wrong in a run or in runs: a short account, empty when nothing did.
pub trait Failures {
    /// The account.
    fn failures(&self) -> String;
}

impl Failures for Figures {
    fn failures(&self) -> String {
        match (self.non_2xx, self.socket_errors) {
            (0, 0) => String::new(),
            (n, 0) => format!("{n} non-2xx"),
            (0, e) => format!("{e} socket errors"),
            (n, e) => format!("{n} non-2xx, {e} socket errors"),
        }
    }
}

/// The runs of one load on one system, one per round; each figure is summarised by its
/// median over the rounds, so that one disturbed run does not decide a verdict.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Runs(pub Vec<Figures>);

impl Runs {
    /// Median successful responses per second.
    pub fn rate(&self) -> Option<f64> {
        median(self.0.iter().map(Figures::ok_per_sec))
    }

    /// Median of the runs' median latencies, ms.
    pub fn p50(&self) -> Option<f64> {
        median(self.0.iter().map(|f| f.p50_ms))
    }

    /// Median of the runs' 99th percentiles, ms.
    pub fn p99(&self) -> Option<f64> {
        median(self.0.iter().map(|f| f.p99_ms))
    }

    /// Each round's rate, in round order: `93,067 · 91,540 · 95,012`.
    pub fn rates(&self) -> String {
        self.0
            .iter()
            .map(|f| thousands(f.ok_per_sec().round() as u64))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

/// The p50 and p99 rows of `metric` (`<metric>, p50` in ms, ...) for both systems'
/// runs, without a target.
pub fn latency_rows(
    group: &'static str,
    metric: &str,
    roster: Option<&Runs>,
    rnacos: Option<&Runs>,
) -> [Row; 2] {
    [
        ("p50", Runs::p50 as fn(&Runs) -> Option<f64>),
        ("p99", Runs::p99),
    ]
    .map(|(label, pick)| {
        Row::pair(
            group,
            format!("{metric}, {label}"),
            Unit::Ms,
            roster.and_then(pick),
            rnacos.and_then(pick),
            None,
            "",
        )
    })
}

impl Failures for Runs {
    /// The failures of every run that had some, empty when all were clean.
    fn failures(&self) -> String {
        self.0
            .iter()
            .map(Figures::failures)
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs `load` and parses the report; the raw report is kept in `out`.
pub async fn run(load: &Load, out: &Path) -> Result<Figures> {
    let report =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut command = Command::new("wrk");
    command
        .arg(format!("-t{THREADS}"))
        .arg(format!("-c{CONNECTIONS}"))
        .arg(format!("-d{}s", load.secs))
        .arg("--latency");
    for header in &load.headers {
        command.arg("-H").arg(header);
    }
    if let Some((script, _)) = &load.script {
        command.arg("-s").arg(script);
    }
    command.arg(&load.url);
    if let Some((_, args)) = &load.script {
        command.arg("--").args(args);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(report.try_clone()?))
        .stderr(Stdio::from(report));
    let pid = procs::spawn(&mut command)?;
    // wrk stops by itself after -d; the margin covers Lua set-up and its 2 s timeout.
    let status = procs::wait(pid, Duration::from_secs(load.secs + 30)).await?;
    let text = std::fs::read_to_string(out)?;
    if !status.success() {
        bail!("wrk failed ({status}):\n{text}");
    }
    parse(&text).with_context(|| format!("reading wrk's report {}", out.display()))
}

/// Reads wrk's `--latency` report.
pub fn parse(text: &str) -> Result<Figures> {
    let mut figures = Figures::default();
    let mut seen_total = false;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", value] => figures.p50_ms = millis(value)?,
            ["99%", value] => figures.p99_ms = millis(value)?,
            [n, "requests", "in", secs, ..] => {
                figures.requests = n.parse().context("request count")?;
                figures.secs = secs
                    .trim_end_matches(',')
                    .trim_end_matches('s')
                    .parse()
                    .context("duration")?;
                seen_total = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                figures.non_2xx = n.parse().context("non-2xx count")?
            }
            ["Socket", "errors:", rest @ ..] => {
                // connect 0, read 0, write 0, timeout 12
                figures.socket_errors = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    if !seen_total {
        bail!("no request count in wrk's report:\n{text}");
    }
    Ok(figures)
}

/// A wrk duration (`850.00us`, `1.13ms`, `2.01s`, `1.00m`) in milliseconds.
fn millis(value: &str) -> Result<f64> {
    let split = value
        .find(|c: char| c.is_ascii_alphabetic())
        .with_context(|| format!("no unit in {value:?}"))?;
    let (number, unit) = value.split_at(split);
    let number: f64 = number
        .parse()
        .with_context(|| format!("bad number {value:?}"))?;
    let scale = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => bail!("unknown unit in {value:?}"),
    };
    Ok(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "\
Running 10s test @ http://127.0.0.1:8848/nacos/v1/ns/instance/list?serviceName=demo
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.25ms    1.01ms  30.12ms   91.00%
    Req/Sec    20.91k     1.53k   24.01k    70.50%
  Latency Distribution
     50%    1.13ms
     75%    1.40ms
     90%    2.00ms
     99%  850.00us
  416020 requests in 10.00s, 1.02GB read
  Socket errors: connect 0, read 3, write 0, timeout 12
  Non-2xx or 3xx responses: 5
Requests/sec:  41602.00
Transfer/sec:    104.49MB
";

    #[test]
    fn reads_a_latency_report() {
        let f = parse(REPORT).unwrap();
        assert_eq!(f.requests, 416_020);
        assert_eq!(f.secs, 10.0);
        assert_eq!(f.non_2xx, 5);
        assert_eq!(f.socket_errors, 15);
        assert!((f.p50_ms - 1.13).abs() < 1e-9);
        assert!((f.p99_ms - 0.85).abs() < 1e-9);
        assert!((f.ok_per_sec() - 41_601.5).abs() < 1e-6);
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(millis("2.00s").unwrap(), 2000.0);
        assert_eq!(millis("1.50m").unwrap(), 90_000.0);
        assert!(millis("12").is_err());
    }

    #[test]
    fn a_report_without_a_total_is_an_error() {
        assert!(parse("unable to connect to 127.0.0.1:1 Connection refused").is_err());
    }
}
