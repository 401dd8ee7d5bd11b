//! A small seeded random source (splitmix64) for the workload and the nemesis: the same
//! seed makes the same choices, so a failing run's schedule replays.

use std::time::Duration;

/// splitmix64: tiny, fast, and good enough to pick operations and faults.
pub struct Rng(u64);

impl Rng {
    /// A source from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// An independent source for sub-task `n` of this seed (a worker, a client).
    pub fn fork(seed: u64, n: u64) -> Self {
        let mut r = Self(seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        r.next_u64();
        r
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A duration between `lo_ms` and `hi_ms`.
    pub fn between_ms(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(lo_ms + self.next_u64() % (hi_ms - lo_ms + 1))
    }

    /// An index into `weights`, each chosen in proportion to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut at = (self.next_u64() % u64::from(total)) as u32;
        for (i, w) in weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        unreachable!("weights sum to total")
    }
}

#[test]
fn the_same_seed_makes_the_same_choices_and_weights_are_kept() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    let mut counts = [0u32; 3];
    for _ in 0..3000 {
        let x = a.weighted(&[1, 2, 0]);
        assert_eq!(x, b.weighted(&[1, 2, 0]));
        counts[x] += 1;
    }
    assert_eq!(counts[2], 0, "a zero weight is never chosen");
    assert!(counts[1] > counts[0] * 3 / 2, "{counts:?}");
    assert_ne!(Rng::fork(7, 1).next_u64(), Rng::fork(7, 2).next_u64());
}
