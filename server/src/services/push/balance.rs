//! Keeping gRPC clients spread over the ready members ([`Balancer`]). After a rolling
//! restart the node that came back last holds nothing and the others hold its clients;
//! Nacos leaves that to an operator's reload call. Here each node counts its connections,
//! tells the others in its hellos (`cluster::members`), and, when the ready members'
//! counts are further apart than the tolerance, moves some of its own clients to the
//! members below the mean — with Nacos' `ConnectResetRequest` naming the target, which
//! the clients honour — a batch at a time, waiting after each batch for the counts to
//! show it. A node only ever moves its own clients and only its excess over the mean,
//! so nodes acting at once do not overshoot; a client connected less than
//! [`MIN_AGE`] ago (a moved client reconnects, so it is new) is never moved.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use roster_raft::NodeId;
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

use super::connections::ConnectionList;
use crate::services::channel::client::PeerClient;
use crate::services::cluster::members::{Load, Members};
use crate::services::cluster::readiness::Readiness;
use crate::services::workers::Workers;
use roster_registry::clock::now_ms;

/// How often a node counts its connections and looks at the others'.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long after moving clients a node waits before it judges the counts again: a
/// hello round and the clients' reconnections.
pub const SETTLE: Duration = Duration::from_secs(5);
/// A connection younger than this is never moved.
pub const MIN_AGE: Duration = Duration::from_secs(60);
/// The automatic balancing's tolerance: a node within 10 % of the mean is balanced...
pub const TOLERANCE: f64 = 0.10;
/// ...as is one within 5 clients of it.
pub const MIN_SLACK: f64 = 5.0;

/// How the node balances.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Whether it balances by itself (off with `--no-grpc-rebalance`); when not, only on request
    /// (Nacos' `smartReloadCluster`).
    pub automatic: bool,
    /// The most clients it moves in one batch (`--grpc-rebalance-batch`).
    pub batch: usize,
}

/// A member's request for a round now (the peer channel's `balance`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct BalanceRequest {
    /// The round's tolerance, a share of the mean.
    pub tolerance: f64,
}

/// The balancing of this node's gRPC clients: started with
/// [`Balancer::spawn_workers`], asked for a round now with [`Balancer::request`].
/// Cheap to clone.
#[derive(Clone)]
pub struct Balancer {
    shared: Arc<Shared>,
}

struct Shared {
    settings: Settings,
    /// Turns true when the node starts shutting down: from then on it is not ready
    /// for clients moved to it.
    closing: watch::Receiver<bool>,
    /// A requested round's tolerance, taken by the worker.
    requested: Mutex<Option<f64>>,
    wake: Notify,
}

impl Balancer {
    /// A balancer with `settings` for a node that shuts down when `closing` turns
    /// true; nothing runs until [`Balancer::spawn_workers`].
    pub fn new(settings: Settings, closing: watch::Receiver<bool>) -> Self {
        Self {
            shared: Arc::new(Shared {
                settings,
                closing,
                requested: Mutex::new(None),
                wake: Notify::new(),
            }),
        }
    }

    /// Its settings.
    pub fn settings(&self) -> Settings {
        self.shared.settings
    }

    /// Asks for one round now with `tolerance` (a share of the mean), automatic
    /// balancing on or off; the batch size and [`MIN_AGE`] still hold.
    pub fn request(&self, tolerance: f64) {
        *self.shared.requested.lock() = Some(tolerance);
        self.shared.wake.notify_one();
    }

    /// Asks every live member, this node included, for a round now with `tolerance`
    /// (Nacos' `smartReloadCluster`); the members that did not take the request.
    pub async fn request_cluster(
        &self,
        members: &Members,
        client: &PeerClient,
        tolerance: f64,
    ) -> Vec<NodeId> {
        self.request(tolerance);
        let body = rmp_serde::to_vec_named(&BalanceRequest { tolerance })
            .expect("a balance request serializes");
        let me = members.me().node_id;
        let mut calls = JoinSet::new();
        for id in members.live().into_iter().filter(|id| *id != me) {
            let Some(addr) = members.peer_addr(id) else {
                continue;
            };
            let (client, body) = (client.clone(), body.clone());
            calls.spawn(async move {
                let sent = client
                    .post(&addr, "balance", body, Duration::from_secs(2))
                    .await;
                (id, sent.is_ok())
            });
        }
        let mut missed = Vec::new();
        while let Some(done) = calls.join_next().await {
            if let Ok((id, false)) = done {
                missed.push(id);
            }
        }
        missed.sort_unstable();
        missed
    }

    /// Starts the worker among `workers`: counts `connections` into `members`' hellos
    /// and moves clients while `ready`.
    pub fn spawn_workers(
        &self,
        members: Members,
        connections: Arc<dyn ConnectionList>,
        ready: Readiness,
        workers: &mut Workers,
    ) {
        let worker = Worker {
            balancer: self.clone(),
            members,
            connections,
            ready,
            asked: HashMap::new(),
            seen: Vec::new(),
        };
        workers.spawn(worker.run(workers.stopping()));
    }
}

struct Worker {
    balancer: Balancer,
    members: Members,
    connections: Arc<dyn ConnectionList>,
    ready: Readiness,
    /// Connections asked to move, and when: never asked twice within [`MIN_AGE`].
    asked: HashMap<String, Instant>,
    /// The ready members' counts at the last tick.
    seen: Vec<(NodeId, u32)>,
}

impl Worker {
    async fn run(mut self, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut quiet_until = Instant::now();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = self.balancer.shared.wake.notified() => {}
                _ = stopping.changed() => return,
            }
            let ready = self.ready.is_ready() && !*self.balancer.shared.closing.borrow();
            self.members.set_load(Load {
                grpc_clients: u32::try_from(self.connections.count()).unwrap_or(u32::MAX),
                ready,
            });
            // Counts that moved since the last tick (clients moving between other
            // members, a member joining or leaving) are judged once they settle: a
            // half-updated view sees an imbalance that is not there.
            let loads = self.members.ready_loads();
            if moved(&self.seen, &loads) {
                quiet_until = quiet_until.max(Instant::now() + SETTLE);
            }
            self.seen = loads;
            let requested = self.balancer.shared.requested.lock().take();
            let tolerance = match requested {
                Some(t) => t,
                None if self.balancer.shared.settings.automatic
                    && Instant::now() >= quiet_until =>
                {
                    TOLERANCE
                }
                None => continue,
            };
            if !ready {
                continue;
            }
            if self.round(&self.seen.clone(), tolerance) > 0 {
                quiet_until = Instant::now() + SETTLE;
            }
        }
    }

    /// Moves this node's share of the excess (a batch at most); how many were asked.
    fn round(&mut self, loads: &[(NodeId, u32)], tolerance: f64) -> usize {
        let me = self.members.me().node_id;
        let batch = self.balancer.shared.settings.batch;
        let moves = plan(me, loads, tolerance, batch);
        if moves.is_empty() {
            return 0;
        }
        let now = Instant::now();
        self.asked.retain(|_, at| now.duration_since(*at) < MIN_AGE);
        let old_enough = now_ms().saturating_sub(MIN_AGE.as_millis() as u64);
        let mut movable: Vec<(String, u64)> = self
            .connections
            .created()
            .into_iter()
            .filter(|(id, created)| *created <= old_enough && !self.asked.contains_key(id))
            .collect();
        // The newest movable connections go first (as Nacos' reload picks them).
        movable.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut movable = movable.into_iter();
        let mut asked = 0;
        for (target, count) in &moves {
            let Some(addr) = self.members.grpc_addr(*target) else {
                continue;
            };
            let Some((ip, port)) = redirect(&addr) else {
                tracing::warn!(node = target, addr, "cannot tell clients this gRPC address");
                continue;
            };
            let mut sent = 0;
            while sent < *count {
                let Some((id, _)) = movable.next() else { break };
                if self.connections.reset(&id, Some((&ip, &port))) {
                    self.asked.insert(id, now);
                    sent += 1;
                }
            }
            asked += sent;
        }
        tracing::info!(
            ?loads,
            ?moves,
            asked,
            "grpc clients asked to move to less loaded members"
        );
        asked
    }
}

/// What `me` should move, and where, given the ready members' `loads`: nothing while
/// every member is within `tolerance` of the mean (or [`MIN_SLACK`] clients); otherwise
/// its excess over the mean (a `batch` at most), shared among the members below the
/// mean in proportion to their shortfall. Every member above the mean computing this
/// from the same counts moves, in all, what the members below it lack.
pub fn plan(
    me: NodeId,
    loads: &[(NodeId, u32)],
    tolerance: f64,
    batch: usize,
) -> Vec<(NodeId, usize)> {
    let Some(&(_, mine)) = loads.iter().find(|(id, _)| *id == me) else {
        return Vec::new();
    };
    if loads.len() < 2 {
        return Vec::new();
    }
    let total: f64 = loads.iter().map(|(_, n)| f64::from(*n)).sum();
    let mean = total / loads.len() as f64;
    let slack = (mean * tolerance).max(MIN_SLACK);
    if loads
        .iter()
        .all(|(_, n)| (f64::from(*n) - mean).abs() <= slack)
    {
        return Vec::new();
    }
    let excess = (f64::from(mine) - mean).floor();
    if excess < 1.0 {
        return Vec::new();
    }
    let to_move = (excess as usize).min(batch);
    let short: Vec<(NodeId, f64)> = loads
        .iter()
        .filter(|(_, n)| f64::from(*n) < mean)
        .map(|(id, n)| (*id, mean - f64::from(*n)))
        .collect();
    let total_short: f64 = short.iter().map(|(_, s)| s).sum();
    // Largest remainder: each target's share rounded down, the rest to the largest
    // remainders.
    let mut shares: Vec<(NodeId, usize, f64)> = short
        .iter()
        .map(|(id, s)| {
            let exact = to_move as f64 * s / total_short;
            (*id, exact.floor() as usize, exact - exact.floor())
        })
        .collect();
    let mut left = to_move - shares.iter().map(|(_, n, _)| n).sum::<usize>();
    shares.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    for share in shares.iter_mut() {
        if left == 0 {
            break;
        }
        share.1 += 1;
        left -= 1;
    }
    let mut moves: Vec<(NodeId, usize)> = shares
        .into_iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(id, n, _)| (id, n))
        .collect();
    moves.sort_unstable();
    moves
}

/// Whether the ready members' counts changed from `before` to `now` by more than
/// normal comings and goings: a member joined or left the ready set, or the counts
/// moved by more than half the tolerance ([`MIN_SLACK`] at least).
fn moved(before: &[(NodeId, u32)], now: &[(NodeId, u32)]) -> bool {
    if before.len() != now.len() || before.iter().zip(now).any(|(a, b)| a.0 != b.0) {
        return true;
    }
    let mean = now.iter().map(|(_, n)| f64::from(*n)).sum::<f64>() / now.len().max(1) as f64;
    let change: f64 = before
        .iter()
        .zip(now)
        .map(|(a, b)| (f64::from(a.1) - f64::from(b.1)).abs())
        .sum();
    change > (mean * TOLERANCE).max(MIN_SLACK) / 2.0
}

/// Nacos' `serverIp` and `serverPort` for a node whose gRPC address is `grpc_addr`:
/// clients add 1000 to the port they are given.
fn redirect(grpc_addr: &str) -> Option<(String, String)> {
    let (host, port) = grpc_addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.checked_sub(1000)?.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_members_move_nothing() {
        assert!(plan(1, &[(1, 104), (2, 100), (3, 96)], TOLERANCE, 20).is_empty());
        // Within 5 clients, however small the mean.
        assert!(plan(1, &[(1, 6), (2, 1), (3, 2)], TOLERANCE, 20).is_empty());
        // One member: nowhere to go.
        assert!(plan(1, &[(1, 300)], TOLERANCE, 20).is_empty());
        // A member that did not count itself moves nothing.
        assert!(plan(4, &[(1, 300), (2, 0)], TOLERANCE, 20).is_empty());
    }

    #[test]
    fn a_restarted_member_gets_the_excess_of_each_loaded_one() {
        let loads = [(1, 0), (2, 150), (3, 150)];
        assert_eq!(plan(2, &loads, TOLERANCE, 100), [(1, 50)]);
        assert_eq!(plan(3, &loads, TOLERANCE, 100), [(1, 50)]);
        assert!(plan(1, &loads, TOLERANCE, 100).is_empty());
        // A batch at a time.
        assert_eq!(plan(2, &loads, TOLERANCE, 20), [(1, 20)]);
    }

    #[test]
    fn the_excess_is_shared_by_shortfall_and_adds_up_to_it() {
        // Mean 100: node 1 has 200 over; nodes 2 and 3 lack 150 and 50.
        let loads = [(1, 300), (2, 0), (3, 100 - 50), (4, 50)];
        let moves = plan(1, &loads, TOLERANCE, 1000);
        assert_eq!(moves.iter().map(|(_, n)| n).sum::<usize>(), 200);
        assert_eq!(moves, [(2, 100), (3, 50), (4, 50)]);
        // Several loaded members move, in all, what the others lack.
        let loads = [(1, 130), (2, 130), (3, 40)];
        let all: usize = [1, 2]
            .iter()
            .flat_map(|me| plan(*me, &loads, TOLERANCE, 1000))
            .map(|(_, n)| n)
            .sum();
        assert_eq!(all, 60);
    }

    #[test]
    fn a_member_below_tolerance_is_fed_by_those_above_the_mean() {
        // Mean 90, slack 9: 100 is within it, but 70 is not, so 100 sheds its 10.
        assert_eq!(
            plan(1, &[(1, 100), (2, 100), (3, 70)], TOLERANCE, 20),
            [(3, 10)]
        );
        // A looser tolerance (a manual request) leaves it.
        assert!(plan(1, &[(1, 100), (2, 100), (3, 70)], 0.3, 20).is_empty());
    }

    #[test]
    fn counts_that_moved_are_told_from_comings_and_goings() {
        let before = [(1, 100), (2, 100), (3, 100)];
        assert!(!moved(&before, &[(1, 101), (2, 99), (3, 102)]));
        assert!(moved(&before, &[(1, 110), (2, 90), (3, 100)]));
        assert!(moved(&before, &[(2, 100), (3, 100)]), "a member left");
        assert!(moved(&before, &[(1, 100), (2, 100), (4, 100)]), "another");
        assert!(!moved(&[], &[]));
    }

    #[test]
    fn clients_are_told_the_port_they_add_their_offset_to() {
        assert_eq!(
            redirect("127.0.0.2:9848"),
            Some(("127.0.0.2".into(), "8848".into()))
        );
        assert_eq!(redirect("[::1]:9848"), Some(("::1".into(), "8848".into())));
        assert_eq!(redirect("host:999"), None);
        assert_eq!(redirect("nonsense"), None);
    }
}
