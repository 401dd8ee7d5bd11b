//! Refusing replayed peer messages: what a receiver remembers of each sender's sequence
//! numbers. Plain synchronous code; the caller passes the time.
//!
//! Every message names the sender's session (random per process), a sequence number
//! and the receiver's incarnation (random per process, see `server.rs`), all under the
//! header MAC. So:
//! - within one receiver process, a sender's session keeps a sliding window of the last
//!   [`WINDOW`] sequence numbers: one seen before, or one older than the window, is
//!   refused (messages to one receiver overtake each other only by the few in flight);
//! - a sender that restarts starts a new session; the receiver then retires the old
//!   one and refuses it from then on. A retired session is forgotten after
//!   [`RETIRED_FOR_MS`], when the timestamp check (at most [`MAX_SKEW_MS`] off) refuses
//!   everything it ever sent anyway;
//! - a receiver that restarts has a new incarnation: a message captured before names the
//!   old one and is refused without looking at this memory, which starts empty.
//!
//! Only messages whose body was authenticated are recorded, so nobody without the
//! secret can fill the memory, burn sequence numbers or retire a session.

use std::collections::HashMap;

use roster_raft::NodeId;

use super::wire::MAX_SKEW_MS;

/// Sequence numbers remembered per sender session, a multiple of 64.
pub const WINDOW: u64 = 1 << 16;
/// How long a retired session is refused by name.
pub const RETIRED_FOR_MS: u64 = 2 * MAX_SKEW_MS + 10_000;
/// Retired sessions remembered per sender at most (a sender restarting more often than
/// this in [`RETIRED_FOR_MS`] loses the oldest).
const MAX_RETIRED: usize = 64;
const WORDS: usize = (WINDOW / 64) as usize;

/// Why a message is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Replay {
    /// This sequence number was accepted before.
    #[error("replayed message (sequence number seen before)")]
    Seen,
    /// Older than the window: cannot be told apart from a replay.
    #[error("message too old for the replay window")]
    TooOld,
    /// From a session the sender has replaced (it restarted since).
    #[error("message from a session the sender has since replaced")]
    Retired,
}

/// Per-sender memory. Guarded by the caller's lock; every call is short.
#[derive(Default)]
pub struct ReplayGuard {
    senders: HashMap<NodeId, Sender>,
}

struct Sender {
    current: Window,
    /// Replaced sessions and when they were replaced (receiver clock, ms).
    retired: Vec<(u64, u64)>,
}

struct Window {
    session: u64,
    /// The highest sequence number accepted (0: none yet).
    top: u64,
    /// Bit `seq % WINDOW` is set when `seq` (within the window below `top`) was seen.
    bits: Box<[u64; WORDS]>,
}

impl Window {
    fn new(session: u64) -> Self {
        Self {
            session,
            top: 0,
            bits: Box::new([0; WORDS]),
        }
    }

    fn check(&self, seq: u64) -> Result<(), Replay> {
        if seq > self.top {
            return Ok(());
        }
        // The top word is shared with numbers above `top`, hence `- 64`.
        if self.top - seq >= WINDOW - 64 || seq == 0 {
            return Err(Replay::TooOld);
        }
        let (word, bit) = Self::slot(seq);
        if self.bits[word] & bit != 0 {
            return Err(Replay::Seen);
        }
        Ok(())
    }

    fn record(&mut self, seq: u64) {
        if seq > self.top {
            // Clear the words between the old top's and the new one's.
            let (old, new) = (self.top / 64, seq / 64);
            if new - old >= WORDS as u64 {
                self.bits.fill(0);
            } else {
                for w in old + 1..=new {
                    self.bits[(w % WORDS as u64) as usize] = 0;
                }
            }
            self.top = seq;
        }
        let (word, bit) = Self::slot(seq);
        self.bits[word] |= bit;
    }

    fn slot(seq: u64) -> (usize, u64) {
        let index = seq % WINDOW;
        ((index / 64) as usize, 1 << (index % 64))
    }
}

impl ReplayGuard {
    /// Whether a message would be accepted, without recording it: run on the header,
    /// before the body is read.
    pub fn check(&self, sender: NodeId, session: u64, seq: u64, now_ms: u64) -> Result<(), Replay> {
        let Some(known) = self.senders.get(&sender) else {
            return Ok(());
        };
        if known.current.session == session {
            return known.current.check(seq);
        }
        if known.is_retired(session, now_ms) {
            return Err(Replay::Retired);
        }
        Ok(())
    }

    /// Checks and records a message whose body was authenticated. A new session of a
    /// known sender retires the one before.
    pub fn accept(
        &mut self,
        sender: NodeId,
        session: u64,
        seq: u64,
        now_ms: u64,
    ) -> Result<(), Replay> {
        let known = self.senders.entry(sender).or_insert_with(|| Sender {
            current: Window::new(session),
            retired: Vec::new(),
        });
        if known.current.session != session {
            if known.is_retired(session, now_ms) {
                return Err(Replay::Retired);
            }
            known
                .retired
                .retain(|(_, at)| now_ms.saturating_sub(*at) < RETIRED_FOR_MS);
            if known.retired.len() >= MAX_RETIRED {
                known.retired.remove(0);
            }
            let old = std::mem::replace(&mut known.current, Window::new(session));
            known.retired.push((old.session, now_ms));
        }
        known.current.check(seq)?;
        known.current.record(seq);
        Ok(())
    }
}

impl Sender {
    fn is_retired(&self, session: u64, now_ms: u64) -> bool {
        self.retired
            .iter()
            .any(|(s, at)| *s == session && now_ms.saturating_sub(*at) < RETIRED_FOR_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_accepted_once() {
        let mut g = ReplayGuard::default();
        assert_eq!(g.check(1, 10, 1, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 1, 0), Ok(()));
        assert_eq!(g.check(1, 10, 1, 0), Err(Replay::Seen));
        assert_eq!(g.accept(1, 10, 1, 0), Err(Replay::Seen));
        // Another sender's numbers are its own.
        assert_eq!(g.accept(2, 10, 1, 0), Ok(()));
        // Sequence number 0 is never sent.
        assert_eq!(g.accept(1, 10, 0, 0), Err(Replay::TooOld));
    }

    #[test]
    fn messages_may_overtake_each_other_within_the_window() {
        let mut g = ReplayGuard::default();
        for seq in [5, 3, 9, 4, 1, 2, 8, 6, 7] {
            assert_eq!(g.accept(1, 10, seq, 0), Ok(()), "{seq}");
        }
        for seq in 1..=9 {
            assert_eq!(g.accept(1, 10, seq, 0), Err(Replay::Seen), "{seq}");
        }
        // A jump ahead; what was skipped is still accepted, once.
        assert_eq!(g.accept(1, 10, 5_000, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 4_000, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 4_000, 0), Err(Replay::Seen));
        assert_eq!(g.accept(1, 10, 9, 0), Err(Replay::Seen));
        // Beyond the window nothing can be told: refused.
        assert_eq!(g.accept(1, 10, 5_000 + WINDOW, 0), Ok(()));
        assert_eq!(g.check(1, 10, 5_001, 0), Err(Replay::TooOld));
        assert_eq!(g.accept(1, 10, 5_000 + WINDOW - 100, 0), Ok(()));
        // A jump of more than the whole window clears it.
        assert_eq!(g.accept(1, 10, 10 * WINDOW, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 10 * WINDOW - 1, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 10 * WINDOW - 1, 0), Err(Replay::Seen));
    }

    #[test]
    fn the_window_forgets_nothing_it_covers_over_a_long_run() {
        // Every number once, in blocks of 64 delivered backwards: every one accepted
        // once, every repeat within the window refused.
        let mut g = ReplayGuard::default();
        for block in 0..3 * WINDOW / 64 {
            for seq in (block * 64 + 1..=block * 64 + 64).rev() {
                assert_eq!(g.accept(1, 10, seq, 0), Ok(()), "{seq}");
            }
            let repeat = (block * 64).saturating_sub(WINDOW / 2).max(1);
            assert_eq!(g.accept(1, 10, repeat, 0), Err(Replay::Seen), "{repeat}");
        }
    }

    #[test]
    fn a_restarted_sender_replaces_its_session_and_the_old_one_stays_refused() {
        let mut g = ReplayGuard::default();
        g.accept(1, 10, 1, 0).unwrap();
        g.accept(1, 10, 2, 0).unwrap();
        // The sender restarts: new session, numbers from 1 again.
        assert_eq!(g.accept(1, 11, 1, 1_000), Ok(()));
        assert_eq!(g.accept(1, 11, 2, 1_000), Ok(()));
        // Old session's messages, replayed: refused, seen or not.
        assert_eq!(g.check(1, 10, 3, 2_000), Err(Replay::Retired));
        assert_eq!(g.accept(1, 10, 1, 2_000), Err(Replay::Retired));
        assert_eq!(g.accept(1, 10, 3, 2_000), Err(Replay::Retired));
        // ... and they did not disturb the new one.
        assert_eq!(g.accept(1, 11, 3, 2_000), Ok(()));
        // Long after, the timestamp check refuses them; the name is forgotten.
        assert_eq!(g.check(1, 10, 3, 1_000 + RETIRED_FOR_MS), Ok(()));
    }

    #[test]
    fn checking_records_nothing() {
        let mut g = ReplayGuard::default();
        assert_eq!(g.check(1, 10, 1, 0), Ok(()));
        assert_eq!(g.check(1, 10, 1, 0), Ok(()));
        g.accept(1, 10, 1, 0).unwrap();
        // A header of a new session does not retire the current one until accepted.
        assert_eq!(g.check(1, 11, 1, 0), Ok(()));
        assert_eq!(g.accept(1, 10, 2, 0), Ok(()));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 500,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Messages from two sessions of one sender, delivered in any order and any
            /// number of times: each accepted at most once, and never once its session
            /// was replaced.
            #[test]
            fn nothing_is_accepted_twice(
                deliveries in proptest::collection::vec((0u64..2, 1u64..200), 0..400),
            ) {
                let mut g = ReplayGuard::default();
                let mut accepted = std::collections::HashSet::new();
                let (mut current, mut retired) = (None, std::collections::HashSet::new());
                for (session, seq) in deliveries {
                    if g.accept(1, session, seq, 0).is_ok() {
                        prop_assert!(accepted.insert((session, seq)), "{}/{} twice", session, seq);
                        prop_assert!(!retired.contains(&session), "{} after its replacement", session);
                        if current != Some(session) {
                            retired.extend(current);
                            current = Some(session);
                        }
                    }
                }
            }
        }
    }
}
