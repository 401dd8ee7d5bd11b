//! What each client path must show in a state of the service (the truth, [`State`]),
//! what it did show ([`Seen`], [`History`]), and how a history is judged against the
//! expected view ([`judge`]).

use std::collections::{BTreeMap, BTreeSet};

use roster_tests::Value;

/// A client-visible path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Path {
    V1List,
    V1Healthy,
    V2List,
    Instances,
    Pick,
    DnsA,
    DnsSrv,
    GrpcQuery,
    Py3Push,
    NpmPush,
    Console,
}

impl Path {
    pub(super) const ALL: [Path; 11] = [
        Path::V1List,
        Path::V1Healthy,
        Path::V2List,
        Path::Instances,
        Path::Pick,
        Path::DnsA,
        Path::DnsSrv,
        Path::GrpcQuery,
        Path::Py3Push,
        Path::NpmPush,
        Path::Console,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Path::V1List => "v1 list",
            Path::V1Healthy => "v1 healthyOnly",
            Path::V2List => "v2 list",
            Path::Instances => "api instances",
            Path::Pick => "api pick",
            Path::DnsA => "DNS A",
            Path::DnsSrv => "DNS SRV",
            Path::GrpcQuery => "gRPC query",
            Path::Py3Push => "py3 gRPC push",
            Path::NpmPush => "npm UDP push",
            Path::Console => "console SSE",
        }
    }

    /// Read by polling (the others are fed by pushes or events).
    pub(super) fn polled(self) -> bool {
        !matches!(self, Path::Py3Push | Path::NpmPush | Path::Console)
    }
}

/// What one path shows: `ip:port healthy|unhealthy` entries (addresses alone for DNS),
/// plus [`PROTECTED`] when a list says the threshold was reached. Empty: absent.
pub(super) type View = BTreeSet<String>;

const PROTECTED: &str = "reachProtectionThreshold";

pub(super) fn entry(addr: &str, healthy: bool) -> String {
    format!("{addr} {}", if healthy { "healthy" } else { "unhealthy" })
}

/// A `ServiceInfo`-like host array as a view.
pub(super) fn hosts_view(hosts: &Value, protected: bool) -> View {
    let mut view: View = hosts
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let addr = format!("{}:{}", h["ip"].as_str().unwrap_or("?"), h["port"]);
            entry(&addr, h["healthy"].as_bool() == Some(true))
        })
        .collect();
    if protected {
        view.insert(PROTECTED.into());
    }
    view
}

pub(super) fn list_view(info: &Value) -> View {
    hosts_view(&info["hosts"], info["reachProtectionThreshold"] == true)
}

/// The truth: which instances exist and whether each is healthy, and the service's
/// protection threshold.
#[derive(Clone, Debug)]
pub(super) struct State {
    pub(super) hosts: BTreeMap<String, bool>,
    pub(super) threshold: f64,
}

impl State {
    pub(super) fn with(&self, addrs: &[&str], health: Option<bool>) -> State {
        let mut next = self.clone();
        for a in addrs {
            match health {
                Some(h) => next.hosts.insert(a.to_string(), h),
                None => next.hosts.remove(*a),
            };
        }
        next
    }

    /// Nacos' comparison, for a positive threshold (0 is off).
    fn protected(&self) -> bool {
        let total = self.hosts.len();
        let healthy = self.hosts.values().filter(|h| **h).count();
        total > 0 && self.threshold > 0.0 && healthy as f64 / total as f64 <= self.threshold
    }

    /// What `path` must show in this state.
    pub(super) fn expect(&self, path: Path) -> View {
        let p = self.protected();
        let listed = |healthy_only: bool| -> View {
            let mut v: View = self
                .hosts
                .iter()
                .filter(|(_, h)| !healthy_only || p || **h)
                .map(|(a, h)| entry(a, p || *h))
                .collect();
            if p {
                v.insert(PROTECTED.into());
            }
            v
        };
        let healthy = || self.hosts.iter().filter(|(_, h)| **h).map(|(a, _)| a);
        match path {
            Path::V1List
            | Path::V2List
            | Path::Instances
            | Path::GrpcQuery
            | Path::Py3Push
            | Path::NpmPush => listed(false),
            Path::V1Healthy => listed(true),
            // A pick is a host a healthy-only query returns, reported healthy.
            Path::Pick => self
                .hosts
                .iter()
                .filter(|(_, h)| p || **h)
                .map(|(a, _)| entry(a, true))
                .collect(),
            // DNS names only healthy instances, protection or not (server/src/faces/dns.rs).
            Path::DnsA => healthy()
                .map(|a| a.split(':').next().unwrap().to_string())
                .collect(),
            Path::DnsSrv => healthy().cloned().collect(),
            // The console shows the raw health.
            Path::Console => self.hosts.iter().map(|(a, h)| entry(a, *h)).collect(),
        }
    }
}

/// One observation: the view shown from `start` to `end` (a poll's request and answer;
/// a push's arrival for both).
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) view: View,
}

pub(super) type History = Vec<Seen>;

/// How a path's history compares with an expected view from `since`.
pub(super) struct Verdict {
    /// When it came to show the expected view for good: (start of the last observation
    /// that still showed something else, end of the first that showed the expected view;
    /// both at least `since`). The change happened between the two.
    pub(super) agreed: Option<(u64, u64)>,
    /// It showed the expected view, then something else, then the expected view again.
    pub(super) flapped: bool,
    pub(super) last: Option<View>,
}

/// `settled`: when the previous transition ended; until then a path may still show the
/// state before it, so only later returns to the expected view count as flaps.
pub(super) fn judge(history: &[Seen], since: u64, settled: u64, expected: &View) -> Verdict {
    // From the last observation before `since` (what the path showed then) onwards.
    let first = history.iter().rposition(|s| s.end < since).unwrap_or(0);
    let window = &history[first..];
    let mut run = None;
    for (i, s) in window.iter().enumerate().rev() {
        if s.view == *expected {
            run = Some(i);
        } else {
            break;
        }
    }
    let agreed = run.map(|i| {
        let before = if i == 0 { since } else { window[i - 1].start };
        (before.max(since), window[i].end.max(since))
    });
    let flapped = run.is_some_and(|i| {
        window[..i]
            .iter()
            .any(|s| s.start >= since.max(settled) && s.view == *expected)
    });
    Verdict {
        agreed,
        flapped,
        last: window.last().map(|s| s.view.clone()),
    }
}

pub(super) fn show(view: &Option<View>) -> String {
    match view {
        None => "(nothing yet)".into(),
        Some(v) if v.is_empty() => "(absent)".into(),
        Some(v) => v.iter().cloned().collect::<Vec<_>>().join(", "),
    }
}
