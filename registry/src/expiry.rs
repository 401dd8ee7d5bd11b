//! Beat expiry for ephemeral instances: the rule that judges an instance against its
//! beat clock, and the deadline it sets. The registry's sweep (`Registry::expire_due`, in
//! `sweep.rs`) applies it to the services whose earliest deadline passed, and every write
//! of a beating instance asks it when the sweep must look next; beats only move clocks.

use super::instance::{Heartbeat, Instance};

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

/// When the expiry sweep must next judge `instance`, if it beats: now, if it is already
/// silent but still marked healthy (a Distro copy can arrive so, carrying its owner's
/// last beat) or expired.
pub(super) fn beat_deadline(instance: &Instance, now_ms: u64) -> Option<u64> {
    let clock = instance.clock()?;
    Some(
        match judge(clock.last_beat_ms(), &instance.heartbeat(), now_ms) {
            Verdict::Silent { .. } if instance.healthy => now_ms,
            Verdict::Alive { recheck_at } | Verdict::Silent { recheck_at } => recheck_at,
            Verdict::Expired => now_ms,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
