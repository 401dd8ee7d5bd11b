//! Beat expiry for ephemeral instances: a queue of deadlines and the rule that judges an
//! instance when its deadline comes due.
//!
//! Beats never touch the queue: they only move the instance's [`BeatClock`]. Each clock
//! has exactly one live entry; when it pops, the instance is judged against its clock and
//! either acted on or rescheduled at its next possible deadline. The cost per tick is the
//! number of entries due, not the number of instances.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::registry::instance::{BeatClock, Heartbeat};
use crate::registry::service::Service;

/// One scheduled check of one instance.
#[derive(Clone)]
pub struct Due {
    /// When to check, wall-clock milliseconds.
    pub at_ms: u64,
    /// The service holding the instance.
    pub service: Arc<Service>,
    /// The instance's `ip:port`.
    pub addr: Arc<str>,
    /// The clock this entry was scheduled for; a re-registered instance has a new one.
    pub clock: Arc<BeatClock>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at_ms == other.at_ms
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at_ms.cmp(&other.at_ms)
    }
}

/// Deadlines of ephemeral instances, earliest first.
#[derive(Default)]
pub struct ExpiryQueue {
    /// Min-heap of deadlines. Held only to push or pop, never while judging.
    heap: Mutex<BinaryHeap<Reverse<Due>>>,
}

impl ExpiryQueue {
    /// Schedules a check of `addr` at `at_ms`, replacing the clock's earlier entry.
    pub fn schedule(
        &self,
        at_ms: u64,
        service: Arc<Service>,
        addr: Arc<str>,
        clock: Arc<BeatClock>,
    ) {
        clock.set_scheduled(at_ms);
        self.heap.lock().push(Reverse(Due {
            at_ms,
            service,
            addr,
            clock,
        }));
    }

    /// Removes and returns up to `max` live entries due at `now_ms`; stale entries
    /// (superseded by a later schedule of the same clock) are dropped on the way.
    pub fn pop_due(&self, now_ms: u64, max: usize) -> Vec<Due> {
        let mut heap = self.heap.lock();
        let mut due = Vec::new();
        while due.len() < max {
            match heap.peek() {
                Some(Reverse(d)) if d.at_ms <= now_ms => {}
                _ => break,
            }
            let Reverse(d) = heap.pop().expect("peeked");
            if d.clock.scheduled_ms() == d.at_ms {
                due.push(d);
            }
        }
        due
    }

    /// Number of entries, stale ones included.
    pub fn len(&self) -> usize {
        self.heap.lock().len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a due check finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Beats are recent: check again at `recheck_at`.
    Alive {
        /// Next deadline.
        recheck_at: u64,
    },
    /// Silent for longer than the beat timeout: unhealthy; check again at `recheck_at`.
    Silent {
        /// When the instance would be removed.
        recheck_at: u64,
    },
    /// Silent for longer than the delete timeout: remove it.
    Expired,
}

/// Judges an instance last heard from at `last_beat_ms`. Nacos compares with `>`: an
/// instance is unhealthy once silence exceeds the timeout, so deadlines are timeout + 1.
pub fn judge(last_beat_ms: u64, heartbeat: &Heartbeat, now_ms: u64) -> Verdict {
    let silence = now_ms.saturating_sub(last_beat_ms);
    if silence > heartbeat.delete_ms {
        Verdict::Expired
    } else if silence > heartbeat.timeout_ms {
        Verdict::Silent {
            recheck_at: last_beat_ms + heartbeat.delete_ms + 1,
        }
    } else {
        Verdict::Alive {
            recheck_at: last_beat_ms + heartbeat.timeout_ms.min(heartbeat.delete_ms) + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::service::ServiceKey;

    const HB: Heartbeat = Heartbeat {
        interval_ms: 5_000,
        timeout_ms: 15_000,
        delete_ms: 30_000,
    };

    #[test]
    fn judge_follows_the_timeouts() {
        assert_eq!(
            judge(1_000, &HB, 16_000),
            Verdict::Alive { recheck_at: 16_001 }
        );
        assert_eq!(
            judge(1_000, &HB, 16_001),
            Verdict::Silent { recheck_at: 31_001 }
        );
        assert_eq!(
            judge(1_000, &HB, 31_000),
            Verdict::Silent { recheck_at: 31_001 }
        );
        assert_eq!(judge(1_000, &HB, 31_001), Verdict::Expired);
        // A clock ahead of now (a beat that raced the check) is simply alive.
        assert_eq!(
            judge(20_000, &HB, 10_000),
            Verdict::Alive { recheck_at: 35_001 }
        );
    }

    #[test]
    fn pops_only_due_and_live_entries() {
        let q = ExpiryQueue::default();
        let svc = Arc::new(Service::new(ServiceKey::new("public", "g", "s"), 0));
        let a = Arc::new(BeatClock::new(0));
        let b = Arc::new(BeatClock::new(0));
        q.schedule(100, svc.clone(), "a:1".into(), a.clone());
        q.schedule(50, svc.clone(), "b:1".into(), b.clone());
        // Rescheduling `a` makes its first entry stale.
        q.schedule(80, svc.clone(), "a:1".into(), a.clone());
        assert_eq!(q.len(), 3);
        let due = q.pop_due(60, 10);
        assert_eq!(due.iter().map(|d| d.at_ms).collect::<Vec<_>>(), [50]);
        let due = q.pop_due(1_000, 10);
        assert_eq!(due.iter().map(|d| &*d.addr).collect::<Vec<_>>(), ["a:1"]);
        assert!(q.is_empty());
    }

    #[test]
    fn pop_respects_the_batch_limit() {
        let q = ExpiryQueue::default();
        let svc = Arc::new(Service::new(ServiceKey::new("public", "g", "s"), 0));
        for i in 0..5 {
            q.schedule(
                i,
                svc.clone(),
                format!("h:{i}").into(),
                Arc::new(BeatClock::new(0)),
            );
        }
        assert_eq!(q.pop_due(10, 2).len(), 2);
        assert_eq!(q.pop_due(10, 10).len(), 3);
    }
}
