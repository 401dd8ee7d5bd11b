//! Transitions over time: a case running on its nodes ([`CaseRun`]) waits until every
//! path agrees on the next state, checks deadlines, holds and flaps, and records each
//! path's worst latency in the [`Report`] table.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::paths::{Probe, Target};
use super::service::Spec;
use super::views::{judge, show, Path, State};
use super::{now_ms, GRACE_MS, POLL, SETUP_MS};

/// (case, transition, worst latency per path that changed).
type Row = (String, String, BTreeMap<Path, u64>);

/// Worst latency per path for each (case, transition), over every node.
#[derive(Default)]
pub(super) struct Report {
    rows: Mutex<Vec<Row>>,
}

impl Report {
    fn record(&self, case: &str, what: &str, path: Path, latency: u64) {
        let mut rows = self.rows.lock().unwrap();
        let i = match rows.iter().position(|(c, w, _)| c == case && w == what) {
            Some(i) => i,
            None => {
                rows.push((case.into(), what.into(), BTreeMap::new()));
                rows.len() - 1
            }
        };
        let slot = rows[i].2.entry(path).or_insert(0);
        *slot = (*slot).max(latency);
    }

    pub(super) fn print(&self, title: &str) {
        let rows = self.rows.lock().unwrap();
        let mut out = format!(
            "{title}: worst ms from the reference beat over every node \
             ('=' the path does not change)\n{:<44}",
            "case / transition"
        );
        for p in Path::ALL {
            out.push_str(&format!("{:>15}", p.name()));
        }
        for (case, what, cells) in rows.iter() {
            out.push_str(&format!("\n{:<44}", format!("{case} / {what}")));
            for p in Path::ALL {
                let cell = cells.get(&p).map_or("=".to_string(), |ms| ms.to_string());
                out.push_str(&format!("{cell:>15}"));
            }
        }
        eprintln!("{out}");
    }
}

/// A case running on one or more nodes.
pub(super) struct CaseRun<'a> {
    pub(super) spec: &'a Spec,
    probes: Vec<Probe<'a>>,
    report: &'a Report,
    /// When the last transition (or hold) ended.
    settled: u64,
}

impl<'a> CaseRun<'a> {
    pub(super) fn new(spec: &'a Spec, targets: &'a [Target<'a>], report: &'a Report) -> Self {
        Self {
            spec,
            probes: targets.iter().map(|t| Probe::new(t, spec)).collect(),
            report,
            settled: now_ms(),
        }
    }

    fn sample_all(&mut self) {
        let started = Instant::now();
        for p in &mut self.probes {
            p.sample();
        }
        std::thread::sleep(
            POLL.saturating_sub(started.elapsed())
                .max(Duration::from_millis(20)),
        );
    }

    /// Waits until every path on every node shows `next`, then checks it did so by
    /// `deadline`, not before `not_before` where it changed, and without flapping.
    pub(super) fn transition(
        &mut self,
        what: &str,
        prev: &State,
        next: &State,
        since: u64,
        not_before: Option<u64>,
        deadline: u64,
    ) {
        // Bounded by the deadline: at most (deadline - now) / POLL rounds.
        loop {
            self.sample_all();
            let all = self.probes.iter().all(|p| {
                Path::ALL.iter().all(|path| {
                    judge(&p.history(*path), since, self.settled, &next.expect(*path))
                        .agreed
                        .is_some()
                })
            });
            if all || now_ms() > deadline + GRACE_MS {
                break;
            }
        }
        let mut problems = Vec::new();
        let mut table = String::new();
        for p in &self.probes {
            for path in Path::ALL {
                let expected = next.expect(path);
                let changed = prev.expect(path) != expected;
                let v = judge(&p.history(path), since, self.settled, &expected);
                let status = match v.agreed {
                    None => {
                        problems.push(format!("{} {}: never", p.target.label, path.name()));
                        "MISSED".to_string()
                    }
                    Some((before, _)) if before > deadline => {
                        problems.push(format!(
                            "{} {}: still the old view {} ms after the deadline",
                            p.target.label,
                            path.name(),
                            before - deadline
                        ));
                        "LATE".to_string()
                    }
                    Some((_, at)) => {
                        if changed {
                            self.report.record(
                                self.spec.case,
                                what,
                                path,
                                at.saturating_sub(since),
                            );
                            if not_before.is_some_and(|nb| at < nb) {
                                problems.push(format!(
                                    "{} {}: {} ms before it may change",
                                    p.target.label,
                                    path.name(),
                                    not_before.unwrap() - at
                                ));
                            }
                        }
                        format!("+{} ms", at.saturating_sub(since))
                    }
                };
                if v.flapped {
                    problems.push(format!("{} {}: flapped", p.target.label, path.name()));
                }
                table.push_str(&format!(
                    "\n  {:<8} {:<15} {:<8} expected [{}]\n  {:<33} showed   [{}]",
                    p.target.label,
                    path.name(),
                    status,
                    show(&Some(expected)),
                    "",
                    show(&v.last)
                ));
            }
        }
        self.settled = now_ms();
        if !problems.is_empty() {
            let errors: Vec<String> = self
                .probes
                .iter()
                .flat_map(|p| {
                    p.target
                        .subscribers
                        .log
                        .lock()
                        .unwrap()
                        .errors
                        .iter()
                        .rev()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .collect();
            let events: Vec<usize> = self
                .probes
                .iter()
                .map(|p| p.console.events.load(Ordering::Relaxed))
                .collect();
            let not_before = not_before.map_or(String::new(), |nb| {
                format!(", not before +{} ms", nb.saturating_sub(since))
            });
            panic!(
                "case {} ({}), transition '{what}': {}\n\
                 reference beat at {since}, deadline +{} ms{not_before}\n{table}\n\
                 console events per node: {events:?}\nSDK observer errors: {errors:?}",
                self.spec.case,
                self.spec.service,
                problems.join("; "),
                deadline - since,
            );
        }
    }

    /// Checks that every path keeps showing `state` from `from` until `until` (and once
    /// more after it).
    pub(super) fn hold(&mut self, what: &str, state: &State, from: u64, until: u64) {
        while now_ms() < until {
            self.sample_all();
        }
        self.sample_all();
        let mut problems = Vec::new();
        for p in &self.probes {
            for path in Path::ALL {
                let expected = state.expect(path);
                let history = p.history(path);
                let first = history.iter().rposition(|s| s.end < from).unwrap_or(0);
                if let Some(s) = history[first..].iter().find(|s| s.view != expected) {
                    problems.push(format!(
                        "{} {} at +{} ms: [{}], expected [{}]",
                        p.target.label,
                        path.name(),
                        s.end.saturating_sub(from),
                        show(&Some(s.view.clone())),
                        show(&Some(expected.clone()))
                    ));
                }
            }
        }
        self.settled = now_ms();
        assert!(
            problems.is_empty(),
            "case {}, '{what}': a path changed while it should hold:\n{}",
            self.spec.case,
            problems.join("\n")
        );
    }

    /// The first agreement, with no deadline beyond setup.
    pub(super) fn settle(&mut self, state: &State) {
        let now = now_ms();
        self.transition("initial", state, state, now, None, now + SETUP_MS);
    }
}
