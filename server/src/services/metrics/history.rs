//! The node's recent metric history, for the console's Overview page
//! (`GET /api/v1/overview`): a sample every [`INTERVAL`] (the first at start-up, so the
//! page never opens on an empty chart), the last [`KEPT`] of them (15 minutes) in a ring,
//! read from the node's own figures with no Prometheus in between.
//!
//! A sample holds totals as they are at the sample (instances, healthy instances, Raft's
//! position, the eviction guard, sync task states) and, for what is counted, rates over
//! the interval since the previous sample (zero, and no percentile, in the first):
//!
//! - `registrations` / `deregistrations`: instance registrations and deregistrations
//!   this node accepted from clients and carried out — HTTP (Nacos v1 and v2) and gRPC
//!   (`InstanceRequest`, `PersistentInstanceRequest`, each instance of a
//!   `BatchInstanceRequest`). Writes this node forwards to the instance's Distro owner
//!   count here, where the client sent them; the changes nodes replicate to each other
//!   (Distro, Raft) do not, nor beats that re-register an instance, sync imports or
//!   expiry. The same counters are `roster_registrations_total` and
//!   `roster_deregistrations_total`.
//! - `beats`: `roster_beats_total`.
//! - `faces`: requests per second and their 99th percentile latency per API face
//!   (`metrics::faces`). HTTP requests count once routed (the guard's refusals and
//!   unmatched paths do not, as in `roster_http_requests_total`); gRPC requests once
//!   answered or given up.
//! - `pushes`: pushes put on the wire, UDP and gRPC together (`sent` and `resent`);
//!   `pushFailures`: every outcome that is neither that nor an acknowledgement
//!   (`failed`, and UDP's `superseded`: replaced by a newer push before the client
//!   acknowledged it).
//!
//! Memory is bounded: [`KEPT`] samples of a few hundred bytes each (the eviction guard's
//! namespaces and the replication lag per member are the only variable parts).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roster_raft::{NodeId, ServerState};
use serde::ser::{Serialize, SerializeMap, Serializer};
use tokio::sync::watch;

use super::faces::{self, Face, Readings};
use super::{Metrics, NodeFigures, TASK_STATES};
use crate::services::workers::Workers;

/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// Samples kept: 15 minutes' worth.
pub const KEPT: usize = 180;

/// One sample, as the overview serves it.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// When it was taken, Unix ms (strictly increasing from one sample to the next).
    pub t: u64,
    /// Instances in every namespace.
    pub instances: usize,
    /// Healthy instances.
    pub healthy: usize,
    /// Registrations accepted from clients, per second.
    pub registrations: f64,
    /// Deregistrations accepted from clients, per second.
    pub deregistrations: f64,
    /// Heartbeats received, per second.
    pub beats: f64,
    /// Requests per API face.
    pub faces: FaceSamples,
    /// Pushes put on the wire, per second.
    pub pushes: f64,
    /// Pushes that failed or were superseded, per second.
    pub push_failures: f64,
    /// Raft's position on this node.
    pub raft: RaftSample,
    /// Namespaces where the eviction guard holds removals (the handler filters them per
    /// caller).
    pub guard_engaged: Vec<String>,
    /// Sync tasks in each of [`TASK_STATES`].
    pub sync_tasks: TaskCounts,
}

/// Requests of each face over an interval.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct FaceSamples {
    /// Nacos v1 HTTP.
    pub v1: FaceSample,
    /// Nacos v2 HTTP.
    pub v2: FaceSample,
    /// Nacos 2.x gRPC.
    pub grpc: FaceSample,
    /// roster's `/api/v1`.
    pub api: FaceSample,
    /// Nacos v3 HTTP.
    pub v3: FaceSample,
    /// Eureka's API.
    pub eureka: FaceSample,
    /// Consul's API.
    pub consul: FaceSample,
}

/// The requests of one face over an interval.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FaceSample {
    /// Requests per second.
    pub rate: f64,
    /// Their 99th percentile latency, ms; `None` when there was no request.
    pub p99_ms: Option<f64>,
}

/// Raft's position on this node at a sample.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftSample {
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub state: &'static str,
    /// Current term.
    pub term: u64,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// Index of the last log entry here.
    pub last_log_index: u64,
    /// Commit index: known on the leader only (its applied index, as `/metrics` and the
    /// cluster API say).
    pub commit: Option<u64>,
    /// Index of the last applied entry here.
    pub applied: u64,
    /// On the leader: entries each other member is behind its log; empty elsewhere.
    pub lag: BTreeMap<NodeId, u64>,
}

impl RaftSample {
    /// What `raft` says now.
    pub fn of(raft: &roster_raft::RaftStatus) -> Self {
        let leads = raft.state == ServerState::Leader;
        let lag = if leads {
            raft.replication
                .iter()
                .filter(|(id, _)| **id != raft.node_id)
                .map(|(id, matched)| (*id, raft.last_log_index.saturating_sub(*matched)))
                .collect()
        } else {
            BTreeMap::new()
        };
        Self {
            state: crate::services::cluster::view::role_name(raft.state),
            term: raft.term,
            leader: raft.leader,
            last_log_index: raft.last_log_index,
            commit: leads.then_some(raft.last_applied),
            applied: raft.last_applied,
            lag,
        }
    }
}

/// Sync tasks per state, in the order of [`TASK_STATES`]; serialized as a map by name.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskCounts(pub [u32; TASK_STATES.len()]);

impl TaskCounts {
    /// The counts of `states` (labels from [`TASK_STATES`]; `/metrics` shows the same).
    pub fn of(states: &[&'static str]) -> Self {
        let mut counts = Self::default();
        for state in states {
            if let Some(at) = TASK_STATES.iter().position(|s| s == state) {
                counts.0[at] += 1;
            }
        }
        counts
    }
}

impl Serialize for TaskCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(TASK_STATES.len()))?;
        for (state, count) in TASK_STATES.iter().zip(self.0) {
            map.serialize_entry(state, &count)?;
        }
        map.end()
    }
}

/// The ring of samples. Its lock is held to add one sample or copy some out, never
/// across an await.
pub struct History {
    samples: parking_lot::Mutex<VecDeque<Sample>>,
}

impl Default for History {
    fn default() -> Self {
        Self {
            samples: parking_lot::Mutex::new(VecDeque::with_capacity(KEPT)),
        }
    }
}

impl History {
    /// Adds a sample, dropping the oldest beyond [`KEPT`]. Its `t` is moved past the
    /// previous sample's if the clock stepped back, so that `since` never skips one.
    pub fn push(&self, mut sample: Sample) {
        let mut samples = self.samples.lock();
        if let Some(last) = samples.back() {
            sample.t = sample.t.max(last.t + 1);
        }
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples taken after `since` (Unix ms), or all of them, oldest first.
    pub fn since(&self, since: Option<u64>) -> Vec<Sample> {
        let samples = self.samples.lock();
        let from = since.map_or(0, |t| samples.partition_point(|s| s.t <= t));
        samples.range(from..).cloned().collect()
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.lock().len()
    }

    /// Whether no sample was taken yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The counters a sample's rates are differences of, read at one moment.
pub struct Reading {
    /// When they were read.
    pub at: Instant,
    /// `roster_registrations_total`.
    pub registrations: u64,
    /// `roster_deregistrations_total`.
    pub deregistrations: u64,
    /// `roster_beats_total`.
    pub beats: u64,
    /// Pushes put on the wire.
    pub pushes: u64,
    /// Pushes failed or superseded.
    pub push_failures: u64,
    /// Every face's latency buckets.
    pub faces: Box<Readings>,
}

impl super::Metrics {
    /// Counts a push outcome, UDP or gRPC, for the overview: on the wire (`sent`,
    /// `resent`), acknowledged (not counted) or anything else (a failure).
    pub(super) fn tally_push(&self, outcome: &str) {
        match outcome {
            "sent" | "resent" => self.pushes_out.fetch_add(1, Ordering::Relaxed),
            "acked" => 0,
            _ => self.push_failures.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// The counters the overview's rates are differences of, now.
    pub fn overview_reading(&self) -> Reading {
        Reading {
            at: Instant::now(),
            registrations: self.registrations.get(),
            deregistrations: self.deregistrations.get(),
            beats: self.beats.get(),
            pushes: self.pushes_out.load(Ordering::Relaxed),
            push_failures: self.push_failures.load(Ordering::Relaxed),
            faces: self.faces.read(),
        }
    }
}

/// The sample of `now`'s readings and `figures`, with rates over the interval since
/// `before` (none: the first sample). `guard_engaged` is the eviction guard's
/// namespaces (`figures` has only their count).
pub fn sample(
    before: Option<&Reading>,
    now: &Reading,
    figures: &NodeFigures,
    guard_engaged: Vec<String>,
    t: u64,
) -> Sample {
    let secs = before.map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
    // Per second, to three decimals (a chart needs no more; the JSON stays short).
    let rate = |count: u64| {
        if secs > 0.0 {
            (count as f64 / secs * 1000.0).round() / 1000.0
        } else {
            0.0
        }
    };
    let delta = |f: fn(&Reading) -> u64| before.map_or(0, |b| f(now).saturating_sub(f(b)));
    let face = |face: Face| {
        let i = face as usize;
        match before {
            None => FaceSample::default(),
            Some(b) => {
                let (count, p99) = faces::p99_between(&b.faces[i], &now.faces[i]);
                FaceSample {
                    rate: rate(count),
                    p99_ms: p99.map(|ms| (ms * 1000.0).round() / 1000.0),
                }
            }
        }
    };
    let (_, instances, healthy) = figures.totals;
    Sample {
        t,
        instances,
        healthy,
        registrations: rate(delta(|r| r.registrations)),
        deregistrations: rate(delta(|r| r.deregistrations)),
        beats: rate(delta(|r| r.beats)),
        faces: FaceSamples {
            v1: face(Face::V1),
            v2: face(Face::V2),
            grpc: face(Face::Grpc),
            api: face(Face::Api),
            v3: face(Face::V3),
            eureka: face(Face::Eureka),
            consul: face(Face::Consul),
        },
        pushes: rate(delta(|r| r.pushes)),
        push_failures: rate(delta(|r| r.push_failures)),
        raft: RaftSample::of(&figures.raft),
        guard_engaged,
        sync_tasks: TaskCounts::of(&figures.sync_tasks),
    }
}

/// Starts the sampler among `workers`: a sample at once, then every [`INTERVAL`] into
/// `metrics`' history. `read` reads the node's figures (those `/metrics` reads) and the
/// namespaces the eviction guard holds.
pub fn spawn_sampler(
    metrics: Arc<Metrics>,
    read: impl Fn() -> (NodeFigures, Vec<String>) + Send + 'static,
    workers: &mut Workers,
) {
    workers.spawn(run(metrics, read, workers.stopping()));
}

async fn run(
    metrics: Arc<Metrics>,
    read: impl Fn() -> (NodeFigures, Vec<String>),
    mut stopping: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(INTERVAL);
    // A late tick (a stalled runtime) is not made up with a burst of samples.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut before: Option<Reading> = None;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        let now = metrics.overview_reading();
        let (figures, guard) = read();
        let t = roster_registry::clock::now_ms();
        let taken = sample(before.as_ref(), &now, &figures, guard, t);
        metrics.history.push(taken);
        before = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roster_raft::RaftStatus;

    fn figures(state: ServerState, replication: &[(NodeId, u64)]) -> NodeFigures {
        NodeFigures {
            ready: true,
            members: 3,
            members_live: 3,
            owned_by: BTreeMap::new(),
            guard_engaged: 0,
            totals: (2, 10, 9),
            udp_subscribers: 0,
            configs: 0,
            config_long_polls: 0,
            list_cache_bytes: 0,
            raft: RaftStatus {
                node_id: 1,
                state,
                term: 3,
                leader: Some(1),
                last_log_index: 120,
                last_applied: 119,
                snapshot_index: 0,
                voters: Default::default(),
                members: Default::default(),
                membership_index: None,
                replication: replication.iter().copied().collect(),
                millis_since_quorum_ack: None,
                fatal: None,
            },
            sync_tasks: vec!["running", "running", "error"],
        }
    }

    fn reading(at: Instant, registrations: u64, faces: &super::super::faces::Faces) -> Reading {
        Reading {
            at,
            registrations,
            deregistrations: 0,
            beats: 0,
            pushes: 0,
            push_failures: 0,
            faces: faces.read(),
        }
    }

    #[test]
    fn rates_are_over_the_interval_and_the_first_sample_has_none() {
        let faces = super::super::faces::Faces::default();
        let start = Instant::now();
        let first = reading(start, 7, &faces);
        let leader = figures(ServerState::Leader, &[(1, 120), (2, 120), (3, 100)]);
        let s = sample(None, &first, &leader, vec![], 1_000);
        assert_eq!((s.registrations, s.faces.v1.rate), (0.0, 0.0));
        assert_eq!(s.faces.v1.p99_ms, None);
        for _ in 0..10 {
            faces.observe(Face::V2, Duration::from_millis(2));
        }
        let second = reading(start + Duration::from_secs(5), 17, &faces);
        let s = sample(Some(&first), &second, &leader, vec!["ns-a".into()], 6_000);
        assert_eq!(s.registrations, 2.0);
        assert_eq!(s.faces.v2.rate, 2.0);
        assert!(s
            .faces
            .v2
            .p99_ms
            .is_some_and(|ms| (2.0..=2.5).contains(&ms)));
        assert_eq!(s.faces.v1.p99_ms, None);
        // The leader shows each other member's lag, not its own, and the commit index.
        assert_eq!(s.raft.lag, BTreeMap::from([(2, 0), (3, 20)]));
        assert_eq!(s.raft.commit, Some(119));
        assert_eq!((s.instances, s.healthy), (10, 9));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["syncTasks"]["running"], 2);
        assert_eq!(json["syncTasks"]["paused"], 0);
        assert_eq!(json["faces"]["v2"]["p99Ms"], s.faces.v2.p99_ms.unwrap());
        assert_eq!(json["raft"]["lag"]["3"], 20);
        assert_eq!(json["guardEngaged"][0], "ns-a");
        assert_eq!(json["pushFailures"], 0.0);
        // A follower knows no lag and no commit index.
        let follower = figures(ServerState::Follower, &[]);
        let s = sample(Some(&first), &second, &follower, vec![], 6_000);
        assert!(s.raft.lag.is_empty());
        assert_eq!(s.raft.commit, None);
        assert_eq!(
            serde_json::to_value(&s).unwrap()["raft"]["commit"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn pushes_on_the_wire_and_failures_are_told_apart() {
        let m = super::super::Metrics::new();
        for outcome in ["sent", "acked", "resent", "failed", "superseded"] {
            m.push(outcome);
        }
        m.grpc_push("sent");
        m.grpc_push("acked");
        m.grpc_push("failed");
        m.instance_write("registerInstance");
        m.instance_write("deregisterInstance");
        m.instance_write("somethingElse");
        let r = m.overview_reading();
        assert_eq!((r.pushes, r.push_failures), (3, 3));
        assert_eq!((r.registrations, r.deregistrations), (1, 1));
    }

    #[test]
    fn the_ring_keeps_the_last_fifteen_minutes_in_order() {
        let faces = super::super::faces::Faces::default();
        let now = reading(Instant::now(), 0, &faces);
        let f = figures(ServerState::Follower, &[]);
        let history = History::default();
        for i in 0..(KEPT as u64 + 20) {
            history.push(sample(None, &now, &f, vec![], 1_000 + i * 5_000));
        }
        assert_eq!(history.len(), KEPT);
        let all = history.since(None);
        assert_eq!(all[0].t, 1_000 + 20 * 5_000);
        assert!(all.windows(2).all(|w| w[0].t < w[1].t));
        let last = all[KEPT - 1].t;
        assert_eq!(history.since(Some(last)).len(), 0);
        assert_eq!(history.since(Some(last - 1)).len(), 1);
        assert_eq!(history.since(Some(all[KEPT - 3].t)).len(), 2);
        // A clock that stepped back still gives a later `t`.
        history.push(sample(None, &now, &f, vec![], 5));
        assert_eq!(history.since(Some(last)).len(), 1);
        assert_eq!(history.since(Some(last))[0].t, last + 1);
        assert_eq!(history.len(), KEPT);
    }
}
