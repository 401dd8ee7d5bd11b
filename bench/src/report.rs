//! The results: one row per figure (roster, r-nacos, their ratio, the target and
//! whether it is met), checks made along the way, notes; rendered as a markdown table
//! and as JSON.

use serde::Serialize;
use serde_json::json;

use crate::machine::Machine;

/// How a figure is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unit {
    /// Operations per second.
    PerSec,
    /// Milliseconds.
    Ms,
    /// Mebibytes.
    MiB,
    /// Bytes.
    Bytes,
    /// Microseconds (of CPU time, per request).
    Us,
    /// Seconds.
    Secs,
}

/// A goal a row is checked against.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "value")]
pub enum Target {
    /// The ratio must be at least this.
    RatioAtLeast(f64),
    /// The ratio must be at most this.
    RatioAtMost(f64),
    /// roster's figure must be at least this.
    AtLeast(f64),
    /// roster's figure must be below this.
    Below(f64),
    /// roster's figure must be at most this.
    AtMost(f64),
}

/// What the ratio column compares roster with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Versus {
    /// roster / r-nacos.
    RNacos,
    /// roster / the bare-axum ceiling.
    Ceiling,
    /// roster / another of roster's own figures (the row's `reference`), e.g. one face
    /// against the Nacos v1 list on the same data.
    Reference,
}

/// The roster figure a roster-only row is compared with.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// What it is, short (the ratio column reads `0.85x <name>`).
    pub name: &'static str,
    /// Its figure, in the row's unit.
    pub value: Option<f64>,
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Metric group (`list`, `register`, ...).
    pub group: &'static str,
    /// What is measured.
    pub metric: String,
    /// Unit of both figures.
    pub unit: Unit,
    /// roster's figure.
    pub roster: Option<f64>,
    /// r-nacos' figure (absent where it has no such feature).
    pub rnacos: Option<f64>,
    /// What the ratio compares with.
    pub versus: Versus,
    /// The compared figure of a [`Versus::Reference`] row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
    /// roster over the comparison figure.
    pub ratio: Option<f64>,
    /// The goal, if any.
    pub target: Option<Target>,
    /// Whether the goal is met (absent without a goal or a figure).
    pub pass: Option<bool>,
    /// Counts, checks and failures behind the figures.
    pub note: String,
}

impl Row {
    /// A roster-vs-r-nacos row; the ratio and verdict are computed.
    pub fn pair(
        group: &'static str,
        metric: impl Into<String>,
        unit: Unit,
        roster: Option<f64>,
        rnacos: Option<f64>,
        target: Option<Target>,
        note: impl Into<String>,
    ) -> Self {
        let ratio = match (roster, rnacos) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        Self::finish(Self {
            group,
            metric: metric.into(),
            unit,
            roster,
            rnacos,
            versus: Versus::RNacos,
            reference: None,
            ratio,
            target,
            pass: None,
            note: note.into(),
        })
    }

    /// A row comparing roster with the bare-axum ceiling.
    pub fn ceiling(
        group: &'static str,
        metric: impl Into<String>,
        roster: Option<f64>,
        ceiling: Option<f64>,
        target: Target,
        note: impl Into<String>,
    ) -> Self {
        let ratio = match (roster, ceiling) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        Self::finish(Self {
            group,
            metric: metric.into(),
            unit: Unit::PerSec,
            roster,
            rnacos: None,
            versus: Versus::Ceiling,
            reference: None,
            ratio,
            target: Some(target),
            pass: None,
            note: note.into(),
        })
    }

    /// A roster-only row compared with another of roster's figures (`reference`, named
    /// `name`), without a target: r-nacos has no such face, and the ratio shows what
    /// the face costs beside the reference on the same data.
    pub fn reference(
        group: &'static str,
        metric: impl Into<String>,
        unit: Unit,
        roster: Option<f64>,
        name: &'static str,
        reference: Option<f64>,
        note: impl Into<String>,
    ) -> Self {
        let ratio = match (roster, reference) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        Self::finish(Self {
            group,
            metric: metric.into(),
            unit,
            roster,
            rnacos: None,
            versus: Versus::Reference,
            reference: Some(Reference {
                name,
                value: reference,
            }),
            ratio,
            target: None,
            pass: None,
            note: note.into(),
        })
    }

    fn finish(mut self) -> Self {
        self.pass = match self.target {
            Some(Target::RatioAtLeast(t)) => self.ratio.map(|r| r >= t),
            Some(Target::RatioAtMost(t)) => self.ratio.map(|r| r <= t),
            Some(Target::AtLeast(t)) => self.roster.map(|v| v >= t),
            Some(Target::Below(t)) => self.roster.map(|v| v < t),
            Some(Target::AtMost(t)) => self.roster.map(|v| v <= t),
            None => None,
        };
        self
    }
}

/// Everything a run produced.
#[derive(Debug, Default)]
pub struct Report {
    /// The table.
    pub rows: Vec<Row>,
    /// Checks made along the way (counts held, convergence, acks).
    pub checks: Vec<String>,
    /// Raw figures per run, for the JSON.
    pub raw: serde_json::Map<String, serde_json::Value>,
}

impl Report {
    /// Records a check, and prints it as progress.
    pub fn check(&mut self, text: String) {
        eprintln!("  check: {text}");
        self.checks.push(text);
    }

    /// Keeps a raw figure under `key`.
    pub fn raw(&mut self, key: impl Into<String>, value: impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.raw.insert(key.into(), value);
    }
}

/// How the run was made, for the header and the notes.
pub struct Context<'a> {
    /// Machine and versions.
    pub machine: &'a Machine,
    /// Shortened run.
    pub quick: bool,
    /// Metric groups run.
    pub groups: Vec<&'static str>,
    /// Wall time of the run, seconds.
    pub elapsed_secs: f64,
    /// Fixed notes on method.
    pub notes: Vec<String>,
}

fn figure(value: Option<f64>, unit: Unit) -> String {
    match value {
        None => "—".to_string(),
        Some(v) => match unit {
            Unit::PerSec => thousands(v.round() as u64),
            Unit::Ms => format!("{v:.2}"),
            Unit::MiB => format!("{v:.1}"),
            Unit::Bytes => thousands(v.round() as u64),
            Unit::Us => format!("{v:.1}"),
            Unit::Secs => format!("{v:.1}"),
        },
    }
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::PerSec => "/s",
        Unit::Ms => "ms",
        Unit::MiB => "MiB",
        Unit::Bytes => "B",
        Unit::Us => "µs",
        Unit::Secs => "s",
    }
}

/// The nearest-rank percentile `p` (0..=100) of sorted `values`.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (the mean of the middle two for an even count); `None` when
/// there are none.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio_text(row: &Row) -> String {
    match (row.ratio, row.versus) {
        (None, _) => "—".to_string(),
        (Some(r), Versus::RNacos) => format!("{r:.2}x"),
        (Some(r), Versus::Ceiling) => format!("{:.0}% of ceiling", r * 100.0),
        (Some(r), Versus::Reference) => match &row.reference {
            Some(reference) => format!(
                "{r:.2}x {} ({})",
                reference.name,
                figure(reference.value, row.unit)
            ),
            None => format!("{r:.2}x"),
        },
    }
}

fn target_text(target: Option<Target>, unit: Unit, versus: Versus) -> String {
    match (target, versus) {
        (None, Versus::Reference) => "—".to_string(),
        (None, _) => String::new(),
        (Some(Target::RatioAtLeast(t)), Versus::Ceiling) => {
            format!(">= {:.0}% of ceiling", t * 100.0)
        }
        (Some(Target::RatioAtMost(t)), Versus::Ceiling) => {
            format!("<= {:.0}% of ceiling", t * 100.0)
        }
        (Some(Target::RatioAtLeast(t)), Versus::RNacos) => format!(">= {t:.1}x r-nacos"),
        (Some(Target::RatioAtMost(t)), Versus::RNacos) => format!("<= {t:.1}x r-nacos"),
        (Some(Target::RatioAtLeast(t)), Versus::Reference) => format!(">= {t:.2}x reference"),
        (Some(Target::RatioAtMost(t)), Versus::Reference) => format!("<= {t:.2}x reference"),
        (Some(Target::AtLeast(t)), _) => {
            format!(">= {} {}", figure(Some(t), unit), unit_name(unit))
        }
        (Some(Target::Below(t)), _) => format!("< {} {}", figure(Some(t), unit), unit_name(unit)),
        (Some(Target::AtMost(t)), _) => {
            format!("<= {} {}", figure(Some(t), unit), unit_name(unit))
        }
    }
}

fn verdict(pass: Option<bool>, target: Option<Target>) -> &'static str {
    match (pass, target) {
        (Some(true), _) => "PASS",
        (Some(false), _) => "FAIL",
        (None, Some(_)) => "no figure",
        (None, None) => "",
    }
}

/// The markdown report: header, table, checks and notes.
pub fn markdown(report: &Report, context: &Context<'_>) -> String {
    let m = context.machine;
    let mut out = String::new();
    out.push_str("## roster vs r-nacos, side by side\n\n");
    out.push_str(&format!(
        "Machine: {}, {} cores, Linux {}; {}. roster {} (`{}`), {}, {}.{}\n\n",
        m.cpu,
        m.cores,
        m.kernel,
        m.date,
        m.roster_commit,
        m.roster_version,
        m.rnacos_version,
        m.wrk_version,
        if context.quick {
            " **Quick run (`--quick`): shortened, not comparable with a full run.**"
        } else {
            ""
        }
    ));
    out.push_str("| Metric | roster | r-nacos | ratio | Target | Result | Notes |\n");
    out.push_str("|---|---:|---:|---:|---|---|---|\n");
    for row in &report.rows {
        let rnacos = match (row.rnacos, row.versus) {
            (None, Versus::RNacos | Versus::Reference) => "n/a".to_string(),
            (None, Versus::Ceiling) => "—".to_string(),
            (v, _) => figure(v, row.unit),
        };
        out.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {} | {} | {} |\n",
            row.metric,
            unit_name(row.unit),
            figure(row.roster, row.unit),
            rnacos,
            ratio_text(row),
            target_text(row.target, row.unit, row.versus),
            verdict(row.pass, row.target),
            row.note.replace('|', "/"),
        ));
    }
    if !report.checks.is_empty() {
        out.push_str("\nChecks:\n\n");
        for check in &report.checks {
            out.push_str(&format!("- {check}\n"));
        }
    }
    out.push_str("\nNotes:\n\n");
    for note in &context.notes {
        out.push_str(&format!("- {note}\n"));
    }
    out.push_str(&format!(
        "- Metric groups run: {}; bench wall time {:.0} s.\n",
        context.groups.join(", "),
        context.elapsed_secs
    ));
    out
}

/// The JSON report.
pub fn json(report: &Report, context: &Context<'_>) -> serde_json::Value {
    json!({
        "machine": context.machine,
        "quick": context.quick,
        "groups": context.groups,
        "elapsedSecs": context.elapsed_secs,
        "rows": report.rows,
        "checks": report.checks,
        "notes": context.notes,
        "raw": report.raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_target_direction() {
        let more = Row::pair(
            "g",
            "qps",
            Unit::PerSec,
            Some(30.0),
            Some(10.0),
            Some(Target::RatioAtLeast(2.0)),
            "",
        );
        assert_eq!(more.pass, Some(true));
        let less = Row::pair(
            "g",
            "rss",
            Unit::MiB,
            Some(60.0),
            Some(100.0),
            Some(Target::RatioAtMost(0.5)),
            "",
        );
        assert_eq!(less.pass, Some(false));
        let missing = Row::pair(
            "g",
            "push",
            Unit::Ms,
            None,
            None,
            Some(Target::Below(100.0)),
            "",
        );
        assert_eq!(missing.pass, None);
        let at_most = |v| {
            Row::pair(
                "g",
                "bytes",
                Unit::Bytes,
                Some(v),
                Some(900.0),
                Some(Target::AtMost(500.0)),
                "",
            )
            .pass
        };
        assert_eq!(at_most(500.0), Some(true));
        assert_eq!(at_most(500.5), Some(false));
        assert_eq!(
            target_text(Some(Target::AtMost(500.0)), Unit::Bytes, Versus::RNacos),
            "<= 500 B"
        );
    }

    #[test]
    fn reference_rows_compare_roster_with_roster() {
        let row = Row::reference(
            "faces",
            "Consul health, QPS",
            Unit::PerSec,
            Some(30_000.0),
            "v1 list",
            Some(40_000.0),
            "",
        );
        assert_eq!(row.ratio, Some(0.75));
        assert_eq!(row.pass, None);
        assert_eq!(ratio_text(&row), "0.75x v1 list (40,000)");
        assert_eq!(target_text(row.target, row.unit, row.versus), "—");
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(json["versus"], "reference");
        assert_eq!(json["reference"]["value"], 40_000.0);
        assert_eq!(json["rnacos"], serde_json::Value::Null);
        let pair =
            serde_json::to_value(Row::pair("g", "m", Unit::Ms, None, None, None, "")).unwrap();
        assert!(pair.get("reference").is_none());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn medians_take_the_middle() {
        assert_eq!(median([]), None);
        assert_eq!(median([7.0]), Some(7.0));
        assert_eq!(median([90.0, 10.0, 50.0]), Some(50.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(41_602), "41,602");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
