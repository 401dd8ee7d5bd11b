//! The nemesis: faults injected into a three-node cluster running in the test's own
//! network namespaces, one at a time, in a schedule drawn from the run's seed — `kill -9`
//! of one node or of the leader (restarted after a while), SIGSTOP/SIGCONT, partitions
//! (one follower cut off, the leader cut off, a bridge where two nodes reach each other
//! only through the third, and no majority anywhere), and the whole cluster killed and
//! started again at once. Each fault is held for a few seconds, healed, and the cluster
//! is waited for (every node ready) before the next quiet spell.

use std::time::{Duration, Instant};

use roster_tests::netlab::NetLab;
use roster_tests::Cluster;

use super::history::History;
use super::rng::Rng;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `kill -9` of a random node, started again after a while.
    KillOne,
    /// `kill -9` of the leader, started again after a while.
    KillLeader,
    /// SIGSTOP of a random node, SIGCONT after a while.
    Pause,
    /// A follower cut off from both peers (a minority of one; the majority goes on).
    IsolateFollower,
    /// The leader cut off from both peers (the majority elects another).
    IsolateLeader,
    /// Two nodes cut off from each other, each still reaching the third (the bridge).
    Bridge,
    /// Every node cut off from every other: no majority anywhere.
    NoMajority,
    /// Every node killed at once, and all started again at once.
    RestartAll,
}

impl Fault {
    /// Every kind, in the order of [`WEIGHTS`].
    pub const ALL: [Fault; 8] = [
        Fault::KillOne,
        Fault::KillLeader,
        Fault::Pause,
        Fault::IsolateFollower,
        Fault::IsolateLeader,
        Fault::Bridge,
        Fault::NoMajority,
        Fault::RestartAll,
    ];

    /// The name in the history and the summary.
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillOne => "kill",
            Fault::KillLeader => "kill-leader",
            Fault::Pause => "pause",
            Fault::IsolateFollower => "isolate-follower",
            Fault::IsolateLeader => "isolate-leader",
            Fault::Bridge => "bridge",
            Fault::NoMajority => "no-majority",
            Fault::RestartAll => "restart-all",
        }
    }
}

/// How often each kind is drawn, as [`Fault::ALL`].
const WEIGHTS: [u32; 8] = [3, 3, 3, 2, 2, 2, 1, 2];

/// One fault as it happened.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Its kind.
    pub fault: Fault,
    /// The nodes it hit (from 1): killed, paused, or on the cut side.
    pub nodes: Vec<usize>,
    /// When it began, µs of the history's clock.
    pub from_us: u64,
    /// When it was healed (processes started or resumed, paths restored), µs.
    pub healed_us: u64,
    /// When every node was ready again after the heal, µs.
    pub ready_us: u64,
}

/// When the faults stop, and how long each is given to heal.
pub struct Pace {
    /// No fault begins after this.
    pub until: Instant,
    /// How long after every node is ready again its reads may still be stale.
    pub catch_up: Duration,
    /// The longest the nodes may take to list every live client again after a heal.
    pub recovery: Duration,
}

/// Faults one after another until `pace.until`, each recorded in `history` for the
/// nodes whose reads it may leave stale, from its start until `pace.catch_up` after
/// every node was ready again. After each, the next quiet spell begins once
/// `recovered(since_us)` says every node lists every live client again in a sample
/// taken after `since_us`, or `pace.recovery` after the heal (the check that follows
/// the run fails then): faults come one at a time, and a client's own reconnection
/// backoff does not build up over several.
pub fn run(
    c: &mut Cluster,
    lab: &NetLab,
    rng: &mut Rng,
    history: &History,
    pace: Pace,
    recovered: &dyn Fn(u64) -> bool,
) -> Vec<Injected> {
    let Pace {
        until,
        catch_up,
        recovery,
    } = pace;
    let mut injected = Vec::new();
    let n = c.nodes.len();
    while Instant::now() < until {
        std::thread::sleep(rng.between_ms(1500, 3500));
        if Instant::now() >= until {
            break;
        }
        let fault = Fault::ALL[rng.weighted(&WEIGHTS)];
        // Which node leads as the fault begins: a fault that takes it away leaves every
        // node without word of new commits until another leads.
        let leader = c.leader() + 1;
        let hold = match fault {
            Fault::RestartAll => rng.between_ms(300, 2000),
            _ => rng.between_ms(1000, 6000),
        };
        let from_us = history.now_us();
        let nodes: Vec<usize> = match fault {
            Fault::KillOne | Fault::KillLeader => {
                let victim = match fault {
                    Fault::KillLeader => c.leader(),
                    _ => rng.below(n),
                };
                c.nodes[victim].kill();
                std::thread::sleep(hold);
                c.nodes[victim].start_again();
                vec![victim + 1]
            }
            Fault::Pause => {
                let victim = rng.below(n);
                c.nodes[victim].pause();
                std::thread::sleep(hold);
                c.nodes[victim].resume();
                vec![victim + 1]
            }
            Fault::IsolateFollower | Fault::IsolateLeader => {
                let victim = match fault {
                    Fault::IsolateLeader => c.leader(),
                    _ => c.follower(),
                } + 1;
                for other in (1..=n).filter(|o| *o != victim) {
                    lab.cut_between(victim, other);
                }
                std::thread::sleep(hold);
                lab.heal_everything();
                vec![victim]
            }
            Fault::Bridge => {
                let bridge = rng.below(n) + 1;
                let ends: Vec<usize> = (1..=n).filter(|o| *o != bridge).collect();
                lab.cut_between(ends[0], ends[1]);
                std::thread::sleep(hold);
                lab.heal_everything();
                ends
            }
            Fault::NoMajority => {
                for i in 1..=n {
                    for j in i + 1..=n {
                        lab.cut_between(i, j);
                    }
                }
                std::thread::sleep(hold);
                lab.heal_everything();
                (1..=n).collect()
            }
            Fault::RestartAll => {
                for node in &mut c.nodes {
                    node.kill();
                }
                std::thread::sleep(hold);
                for node in &mut c.nodes {
                    node.start_again();
                }
                (1..=n).collect()
            }
        };
        let healed_us = history.now_us();
        for node in &mut c.nodes {
            node.wait_ready();
        }
        let ready_us = history.now_us();
        let healed_at = Instant::now() - Duration::from_micros(ready_us - healed_us);
        while !recovered(ready_us) && healed_at.elapsed() < recovery {
            std::thread::sleep(Duration::from_millis(200));
        }
        eprintln!(
            "nemesis: {} on {:?} at {:.1} s, held {:.1} s, ready {:.1} s after the heal",
            fault.name(),
            nodes,
            from_us as f64 / 1e6,
            (healed_us - from_us) as f64 / 1e6,
            (ready_us - healed_us) as f64 / 1e6,
        );
        // Reads may be stale on the nodes the fault hit, and on every node while no
        // leader is reachable: after the leader is killed, frozen or cut off, a follower
        // hears of nothing new until another leads (an election: 1-2 s).
        let leaderless = matches!(
            fault,
            Fault::KillLeader | Fault::IsolateLeader | Fault::NoMajority | Fault::RestartAll
        ) || nodes.contains(&leader);
        let stale: Vec<usize> = if leaderless {
            (1..=n).collect()
        } else {
            nodes.clone()
        };
        history.fault(
            &stale,
            fault.name(),
            from_us,
            ready_us + catch_up.as_micros() as u64,
        );
        injected.push(Injected {
            fault,
            nodes,
            from_us,
            healed_us,
            ready_us,
        });
    }
    injected
}
