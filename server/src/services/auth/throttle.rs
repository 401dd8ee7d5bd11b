//! Login throttling: after [`FREE_FAILURES`] failed password checks for one user from one
//! source address, that pair's further attempts are refused unchecked (429 with
//! `Retry-After`) for a wait that starts at [`FIRST_WAIT_MS`] and doubles with each
//! failure after it, up to [`MAX_WAIT_MS`]. A success resets the pair; a pair that has
//! not failed for [`FORGET_AFTER_MS`] starts afresh.
//!
//! Plain synchronous code that takes `now`: `Auth::check_password` asks [`Throttle::admit`]
//! before any work and records each checked outcome. The table is bounded: at most
//! [`CAPACITY`] pairs, the least recently failed one forgotten first (a flood from many
//! addresses forgets the oldest pairs rather than growing the node). An outcome counts
//! when its request gets it: the checks already running when a wait starts still
//! answer (`--max-password-checks` of them at most; the others, waiting for a permit,
//! look again before hashing), and a guess whose request went away mid-check counts
//! when it is asked again (answered from the check cache). Each node keeps its own
//! table.
//!
//! The source address reaches the check through a task-local ([`with_source`], set by
//! the HTTP front and the gRPC request handler around each request) rather than as an
//! argument, so the request authentication of every face stays as it is.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// Failures a pair may make before it has to wait.
pub const FREE_FAILURES: u32 = 5;
/// The wait after the [`FREE_FAILURES`]th failure; each later failure doubles it.
pub const FIRST_WAIT_MS: u64 = 5_000;
/// The longest wait (5 minutes).
pub const MAX_WAIT_MS: u64 = 300_000;
/// A pair whose last failure is this old is forgotten: longer than the longest wait, so
/// a pair at the cap keeps doubling from there instead of starting over.
pub const FORGET_AFTER_MS: u64 = 15 * 60_000;
/// Most pairs tracked at once (~150 bytes each: ~1.5 MiB).
pub const CAPACITY: usize = 10_000;

tokio::task_local! {
    /// The address the current request comes from.
    static SOURCE: IpAddr;
}

/// Runs `work` with `source` as the address password checks in it are throttled under.
pub async fn with_source<F: Future>(source: Option<IpAddr>, work: F) -> F::Output {
    match source {
        Some(ip) => SOURCE.scope(ip, work).await,
        None => work.await,
    }
}

/// The address the current request comes from, if the face that took it said so.
pub fn source() -> Option<IpAddr> {
    SOURCE.try_with(|ip| *ip).ok()
}

/// Who tries: a digest of the username (any length costs the table the same) and the
/// source address — an IPv6 address by its /64, the block one host usually has. Checks
/// with no known source share one address per user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attempt {
    user: [u8; 16],
    source: IpAddr,
}

impl Attempt {
    /// The attempt of `username` from `source`.
    pub fn new(username: &str, source: Option<IpAddr>) -> Self {
        let digest = Sha256::digest(username.as_bytes());
        let mut user = [0; 16];
        user.copy_from_slice(&digest[..16]);
        let source = match source {
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
            },
            Some(v4) => v4,
        };
        Self { user, source }
    }
}

/// What the table keeps of a pair.
#[derive(Clone, Copy, Debug)]
struct Record {
    /// Failures since the last success (or since the pair was forgotten).
    failures: u32,
    last_failure_ms: u64,
    /// Attempts before this are refused.
    blocked_until_ms: u64,
    /// Position in `Table::by_age`.
    age: u64,
}

/// The throttle: failed pairs and their waits. One lock guards the table; it is held
/// for a lookup or an update, never across a check.
pub struct Throttle {
    table: Mutex<Table>,
}

struct Table {
    records: HashMap<Attempt, Record>,
    /// The pairs by last failure, oldest first (keys are an increasing counter).
    by_age: BTreeMap<u64, Attempt>,
    next_age: u64,
    capacity: usize,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new()
    }
}

impl Throttle {
    /// An empty throttle of [`CAPACITY`] pairs.
    pub fn new() -> Self {
        Self::with_capacity(CAPACITY)
    }

    /// An empty throttle of at most `capacity` pairs (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            table: Mutex::new(Table {
                records: HashMap::new(),
                by_age: BTreeMap::new(),
                next_age: 0,
                capacity: capacity.max(1),
            }),
        }
    }

    /// Whether `attempt` may be checked at `now_ms`; if not, the seconds left to wait
    /// (rounded up, at least 1).
    pub fn admit(&self, attempt: &Attempt, now_ms: u64) -> Result<(), u64> {
        let table = self.table.lock();
        match table.records.get(attempt) {
            Some(r) if r.blocked_until_ms > now_ms => {
                Err((r.blocked_until_ms - now_ms).div_ceil(1000).max(1))
            }
            _ => Ok(()),
        }
    }

    /// Records a checked outcome: a success forgets the pair, a failure counts and,
    /// from the [`FREE_FAILURES`]th on, starts a wait of [`wait_after`] its count.
    pub fn record(&self, attempt: &Attempt, passed: bool, now_ms: u64) {
        let mut table = self.table.lock();
        if passed {
            table.forget(attempt);
            return;
        }
        let previous = table.forget(attempt);
        let failures = match previous {
            Some(r) if now_ms.saturating_sub(r.last_failure_ms) < FORGET_AFTER_MS => {
                r.failures.saturating_add(1)
            }
            _ => 1,
        };
        if table.records.len() >= table.capacity {
            if let Some((_, oldest)) = table.by_age.pop_first() {
                table.records.remove(&oldest);
            }
        }
        let wait = wait_after(failures);
        let age = table.next_age;
        table.next_age += 1;
        table.by_age.insert(age, *attempt);
        table.records.insert(
            *attempt,
            Record {
                failures,
                last_failure_ms: now_ms,
                blocked_until_ms: if wait > 0 { now_ms + wait } else { 0 },
                age,
            },
        );
    }

    /// How many pairs are tracked.
    pub fn len(&self) -> usize {
        self.table.lock().records.len()
    }

    /// Whether no pair is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Table {
    fn forget(&mut self, attempt: &Attempt) -> Option<Record> {
        let record = self.records.remove(attempt)?;
        self.by_age.remove(&record.age);
        Some(record)
    }
}

/// The wait after a pair's `failures`th failure, in milliseconds: none before
/// [`FREE_FAILURES`], then [`FIRST_WAIT_MS`] doubling per failure, at most
/// [`MAX_WAIT_MS`].
pub fn wait_after(failures: u32) -> u64 {
    if failures < FREE_FAILURES {
        return 0;
    }
    // 2^7 x 5 s is past the cap already: the shift never overflows.
    let doublings = (failures - FREE_FAILURES).min(16);
    (FIRST_WAIT_MS << doublings).min(MAX_WAIT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(user: &str, ip: &str) -> Attempt {
        Attempt::new(user, Some(ip.parse().unwrap()))
    }

    fn fail(t: &Throttle, a: &Attempt, times: u32, now: u64) {
        for _ in 0..times {
            t.record(a, false, now);
        }
    }

    #[test]
    fn five_failures_then_a_wait_that_doubles_up_to_five_minutes() {
        let t = Throttle::new();
        let a = from("nacos", "127.0.0.1");
        fail(&t, &a, 4, 0);
        assert_eq!(t.admit(&a, 0), Ok(()), "four failures are free");
        fail(&t, &a, 1, 1_000);
        assert_eq!(t.admit(&a, 1_000), Err(5));
        assert_eq!(t.admit(&a, 5_001), Err(1), "rounded up");
        assert_eq!(t.admit(&a, 6_000), Ok(()));
        // Each failure after the wait doubles it.
        let mut now = 6_000;
        for expected in [10, 20, 40, 80, 160, 300, 300, 300] {
            fail(&t, &a, 1, now);
            assert_eq!(t.admit(&a, now), Err(expected), "at {now}");
            now += expected * 1000;
            assert_eq!(t.admit(&a, now), Ok(()));
        }
        assert_eq!(wait_after(u32::MAX), MAX_WAIT_MS);
        assert_eq!(wait_after(4), 0);
    }

    #[test]
    fn a_success_resets_and_pairs_are_apart() {
        let t = Throttle::new();
        let a = from("nacos", "127.0.0.1");
        fail(&t, &a, 5, 0);
        assert!(t.admit(&a, 10).is_err());
        // Another user from the same address, the same user from another: free.
        assert_eq!(t.admit(&from("other", "127.0.0.1"), 10), Ok(()));
        assert_eq!(t.admit(&from("nacos", "127.0.0.2"), 10), Ok(()));
        t.record(&a, true, 6_000);
        assert!(t.is_empty());
        // Counting starts over: four more failures are free again.
        fail(&t, &a, 4, 7_000);
        assert_eq!(t.admit(&a, 7_000), Ok(()));
    }

    #[test]
    fn an_old_failure_is_forgotten() {
        let t = Throttle::new();
        let a = from("nacos", "127.0.0.1");
        fail(&t, &a, 4, 0);
        fail(&t, &a, 1, FORGET_AFTER_MS);
        assert_eq!(
            t.admit(&a, FORGET_AFTER_MS),
            Ok(()),
            "one failure, not five"
        );
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(from("u", "2001:db8::1"), from("u", "2001:db8::ffff:2"));
        assert_ne!(from("u", "2001:db8::1"), from("u", "2001:db8:0:1::1"));
        assert_eq!(from("u", "::ffff:127.0.0.1"), from("u", "127.0.0.1"));
        assert_ne!(from("u", "127.0.0.1"), Attempt::new("u", None));
    }

    #[test]
    fn memory_is_bounded_and_the_least_recently_failed_go_first() {
        let t = Throttle::with_capacity(100);
        let kept = from("victim", "127.0.0.1");
        fail(&t, &kept, 5, 0);
        for i in 0..99u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x7f00_0100 + i));
            t.record(&Attempt::new("flood", Some(ip)), false, 1);
        }
        assert_eq!(t.len(), 100);
        // The victim failed again: most recent now, so newcomers push out the flood's
        // pairs first (their names' lengths cost nothing: they are digests).
        t.record(&kept, false, 10_000);
        for i in 0..99u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x7f01_0000 + i));
            t.record(&Attempt::new(&"x".repeat(1_000), Some(ip)), false, 10_001);
        }
        assert_eq!(t.len(), 100);
        assert_eq!(t.table.lock().by_age.len(), 100);
        assert_eq!(t.admit(&kept, 10_001), Err(10), "the sixth failure's wait");
        // One more, and the victim is the least recently failed: it goes.
        t.record(&from("later", "127.0.0.3"), false, 10_002);
        assert_eq!(t.len(), 100);
        assert_eq!(t.admit(&kept, 10_002), Ok(()));
    }

    #[tokio::test]
    async fn the_source_is_known_inside_its_scope_only() {
        assert_eq!(source(), None);
        let ip: IpAddr = "127.0.0.9".parse().unwrap();
        let seen = with_source(Some(ip), async {
            tokio::task::yield_now().await;
            source()
        })
        .await;
        assert_eq!(seen, Some(ip));
        assert_eq!(with_source(None, async { source() }).await, None);
    }

    /// `Auth::check_password` through the throttle: five failures from one address,
    /// then refusals whatever the password; other addresses unaffected; unknown users
    /// hashed like known ones.
    #[tokio::test(start_paused = true)]
    async fn password_checks_are_throttled_per_source_and_unknown_users_cost_a_hash() {
        use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
        use argon2::{Algorithm, Argon2, Params, Version};

        use crate::services::auth::{Auth, AuthData, AuthError, User, DUMMY_HASH};

        // The dummy costs what roster's own hashes cost.
        let dummy = PasswordHash::new(DUMMY_HASH).unwrap();
        let (cost, ours) = (Params::try_from(&dummy).unwrap(), Params::default());
        assert_eq!(
            (cost.m_cost(), cost.t_cost(), cost.p_cost()),
            (ours.m_cost(), ours.t_cost(), ours.p_cost())
        );
        assert_eq!(dummy.hash.unwrap().len(), Params::DEFAULT_OUTPUT_LEN);
        assert_eq!(dummy.algorithm, Algorithm::Argon2id.ident());

        let auth = Auth::with_password_checks(true, 100, 1);
        let mut data = AuthData::default();
        // A light hash: the test is about counting, not cost.
        let light = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(64, 1, 1, None).unwrap(),
        )
        .hash_password(
            b"right-pass",
            &SaltString::encode_b64(b"0123456789abcdef").unwrap(),
        )
        .unwrap()
        .to_string();
        data.users.insert(
            "nacos".into(),
            User {
                password_hash: light,
                admin: true,
            },
        );
        auth.set_data(data);
        let here = Some("127.0.0.7".parse().unwrap());
        let check = |source, password: String| {
            let auth = auth.clone();
            async move { with_source(source, auth.check_password("nacos", &password)).await }
        };
        for i in 0..FREE_FAILURES {
            let e = check(here, format!("wrong-{i}")).await.unwrap_err();
            assert_eq!(e, AuthError::BadCredentials);
        }
        let throttled = AuthError::Throttled {
            retry_after_secs: FIRST_WAIT_MS / 1000,
        };
        // A wrong password repeated (cached) and the right one: both wait.
        assert_eq!(check(here, "wrong-0".into()).await.unwrap_err(), throttled);
        assert_eq!(
            check(here, "right-pass".into()).await.unwrap_err(),
            throttled
        );
        let elsewhere = Some("127.0.0.8".parse().unwrap());
        assert!(check(elsewhere, "right-pass".into()).await.unwrap().admin);

        // An unknown user needs a hash as a known one does: with the one permit held,
        // its check waits for it and gives up as a known user's would.
        let held = auth.shared.checks.permit().await.unwrap();
        let unknown = with_source(elsewhere, auth.check_password("nobody", "pw-1")).await;
        assert_eq!(unknown.unwrap_err(), AuthError::TooManyChecks);
        drop(held);
        let unknown = with_source(elsewhere, auth.check_password("nobody", "pw-1")).await;
        assert_eq!(unknown.unwrap_err(), AuthError::BadCredentials);
    }
}
