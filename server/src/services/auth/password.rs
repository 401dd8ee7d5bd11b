//! Password hashing (argon2id, PHC strings), the bound on how many hashes run at once,
//! and a short-lived cache of check outcomes.
//!
//! An argon2 check holds 19 MiB (the crate's default cost, OWASP's minimum) for tens of
//! milliseconds. Unbounded, a flood of wrong logins — or of requests carrying a wrong
//! `username`/`password`, which the npm Nacos client sends on every call — took a node
//! from 15 MiB to 2.3 GiB within seconds (debug build, 200 clients for 8 s: 47 MiB to
//! 6.3 GiB). So every hash and check takes a permit of [`PasswordChecks`] first (as
//! many as cores by default), waits at most [`CHECK_WAIT`] for one (then the caller is
//! answered 429), and runs on one of as many dedicated threads, holding the permit to
//! the end even when the caller has gone.
//!
//! Dedicated threads with memory of their own, because bounding was not enough: the
//! argon2 crate allocates its 19 MiB afresh per call (64-byte aligned), and a small
//! allocation the thread made after freeing it (a cache entry, say) took a piece of
//! the freed block, so the next block needed new memory, which glibc's per-thread
//! arenas then kept. With two permits on tokio's blocking pool (a new thread, so a new
//! arena, for nearly every check) the same flood still reached 2.8 GiB; on two threads
//! of its own with a fresh allocation per check, 1.6 GiB. Each check thread instead
//! keeps one [`Scratch`] for good: memory stays at `--max-password-checks` x 19 MiB at
//! most (the flood: 46 to 70 MiB).
//!
//! The [`CredentialCache`] stands in front of the permits: a pair that passed within a
//! minute, or failed within [`FAILED_TTL`], is answered from it. Failures are cached
//! so that a flood repeating one wrong password costs one hash rather than one per
//! request; a flood of ever-new passwords meets the permits instead.

use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use dashmap::DashMap;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::AuthError;

/// How long a successful check is remembered.
const PASSED_TTL: Duration = Duration::from_secs(60);
/// How long a failed check is remembered. Short: it only has to outlast a burst of
/// retries of one wrong pair; a later correct password is another pair anyway.
pub const FAILED_TTL: Duration = Duration::from_secs(10);
/// Upper bound on each table of remembered outcomes; a table is cleared when it is
/// reached (~130 bytes an entry: at most ~1.3 MiB each).
const CACHE_CAPACITY: usize = 10_000;
/// How long a check waits for a permit before the caller is answered 429.
pub const CHECK_WAIT: Duration = Duration::from_secs(2);

/// Most memory a stored hash may ask a check for, in 1 KiB blocks (64 MiB; roster's
/// own hashes take 19,456). A hash asking more is refused rather than computed.
const MAX_BLOCKS: usize = 64 * 1024;

/// A check thread's argon2 memory, allocated at its first hash and kept.
#[derive(Default)]
pub struct Scratch {
    blocks: Vec<Block>,
}

impl Scratch {
    /// `count` blocks of it, grown (once, for roster's own hashes) if it is smaller.
    fn blocks(&mut self, count: usize) -> &mut [Block] {
        if self.blocks.len() < count {
            // Free the old memory before taking the new.
            self.blocks = Vec::new();
            self.blocks = vec![Block::new(); count];
        }
        &mut self.blocks[..count]
    }
}

/// Hashes `password` with argon2id (the crate's default cost) and a random salt into a
/// PHC string. Slow on purpose (tens of ms): call it through a [`Permit`] (bootstrap,
/// once, is the exception).
pub fn hash(password: &str) -> String {
    hash_in(&mut Scratch::default(), password)
}

/// [`hash`] in `scratch`.
pub fn hash_in(scratch: &mut Scratch, password: &str) -> String {
    let salt =
        SaltString::encode_b64(&rand::random::<[u8; 16]>()).expect("16 bytes is a valid salt");
    let params = Params::default();
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    let mut salt_bytes = [0u8; 64];
    let salt_bytes = salt
        .as_salt()
        .decode_b64(&mut salt_bytes)
        .expect("a salt just encoded decodes");
    let output = Output::init_with(Params::DEFAULT_OUTPUT_LEN, |out| {
        argon
            .hash_password_into_with_memory(
                password.as_bytes(),
                salt_bytes,
                out,
                scratch.blocks(params.block_count()),
            )
            .map_err(Into::into)
    })
    .expect("argon2 with default parameters cannot fail");
    PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).expect("default parameters encode"),
        salt: Some(salt.as_salt()),
        hash: Some(output),
    }
    .to_string()
}

/// Whether `password` matches the PHC string `hash`. As slow as [`hash`].
pub fn verify(password: &str, hash: &str) -> bool {
    verify_in(&mut Scratch::default(), password, hash)
}

/// [`verify`] in `scratch`: what `argon2`'s `PasswordVerifier` does, with the
/// thread's memory instead of a fresh allocation.
pub fn verify_in(scratch: &mut Scratch, password: &str, hash: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(params)) = (
        Algorithm::try_from(parsed.algorithm),
        Params::try_from(&parsed),
    ) else {
        return false;
    };
    let version = match parsed.version.map(Version::try_from).transpose() {
        Ok(v) => v.unwrap_or_default(),
        Err(_) => return false,
    };
    if params.block_count() > MAX_BLOCKS {
        return false;
    }
    let mut salt_bytes = [0u8; 64];
    let Ok(salt_bytes) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let argon = Argon2::new(algorithm, version, params.clone());
    let computed = Output::init_with(expected.len(), |out| {
        argon
            .hash_password_into_with_memory(
                password.as_bytes(),
                salt_bytes,
                out,
                scratch.blocks(params.block_count()),
            )
            .map_err(Into::into)
    });
    // `Output`'s equality is constant-time.
    computed.is_ok_and(|computed| computed == expected)
}

/// A password computation, run on a check thread with the thread's memory.
type Job = Box<dyn FnOnce(&mut Scratch) + Send>;

/// The bound on concurrent argon2 computations: a semaphore with one permit per check
/// that may run at once (`--max-password-checks`), and as many threads to run them.
/// The threads wait on the job queue and end when this is dropped (the node stops).
pub struct PasswordChecks {
    permits: Arc<Semaphore>,
    jobs: mpsc::Sender<Job>,
}

impl PasswordChecks {
    /// At most `max` checks at once (at least one), on `max` threads.
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        // One receiver shared by the threads: the one holding the lock waits for the
        // next job, the others for the lock.
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..max {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("password-check-{i}"))
                .spawn(move || {
                    let mut scratch = Scratch::default();
                    loop {
                        let next = queue.lock().recv();
                        let Ok(job) = next else {
                            return;
                        };
                        // A panicking job answers nothing (its caller sees
                        // `Interrupted`) and leaves the thread serving.
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut scratch)));
                    }
                })
                .expect("cannot start a password-check thread");
        }
        Self {
            permits: Arc::new(Semaphore::new(max)),
            jobs,
        }
    }

    /// The default bound: one check per core.
    pub fn default_max() -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }

    /// A permit to hash, waiting at most [`CHECK_WAIT`] for one.
    pub async fn permit(&self) -> Result<Permit, AuthError> {
        match tokio::time::timeout(CHECK_WAIT, self.permits.clone().acquire_owned()).await {
            Ok(Ok(held)) => Ok(Permit {
                held,
                jobs: self.jobs.clone(),
            }),
            // Never closed: a closed semaphore would be a bug, not a busy node.
            Ok(Err(_)) => Err(AuthError::Interrupted),
            Err(_) => Err(AuthError::TooManyChecks),
        }
    }
}

/// The right to run one argon2 computation; released when dropped.
pub struct Permit {
    held: OwnedSemaphorePermit,
    jobs: mpsc::Sender<Job>,
}

impl Permit {
    /// Runs `work` on a check thread; the permit is released when `work` ends, not
    /// when the caller stops waiting, so abandoned requests cannot pile up hashes. As
    /// many threads as permits: the job never waits for a thread.
    pub async fn run<T: Send + 'static>(
        self,
        work: impl FnOnce(&mut Scratch) -> T + Send + 'static,
    ) -> Result<T, AuthError> {
        let (answer, answered) = oneshot::channel();
        let Permit { held, jobs } = self;
        let job: Job = Box::new(move |scratch| {
            // Declared first, dropped last (also when `work` panics): the caller hears
            // back only once the permit is free again.
            let answer = answer;
            let held = held;
            let value = work(scratch);
            drop(held);
            let _ = answer.send(value);
        });
        jobs.send(job).map_err(|_| AuthError::Interrupted)?;
        answered.await.map_err(|_| AuthError::Interrupted)
    }
}

/// A salted digest of a username and password: what the cache keys on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairDigest([u8; 32]);

struct Remembered {
    /// The stored hash the check ran against: after a password change it misses.
    password_hash: String,
    expires: Instant,
}

/// Outcomes of recent checks, keyed by a salted digest of username and password (the
/// password itself is never kept), each bound to the stored hash it was checked
/// against. Filled by every completed check; an entry stops counting when the user's
/// stored hash changes (a lookup against another hash misses), when it ages out
/// (passes after 60 s, failures after [`FAILED_TTL`]), and with its whole table when
/// the table reaches its capacity.
pub struct CredentialCache {
    salt: [u8; 32],
    passed: DashMap<PairDigest, Remembered>,
    failed: DashMap<PairDigest, Remembered>,
}

impl Default for CredentialCache {
    fn default() -> Self {
        Self::new()
    }
}

impl CredentialCache {
    /// An empty cache with a fresh salt.
    pub fn new() -> Self {
        Self {
            salt: rand::random(),
            passed: DashMap::new(),
            failed: DashMap::new(),
        }
    }

    /// The cache key of a pair.
    pub fn digest(&self, username: &str, password: &str) -> PairDigest {
        let mut h = Sha256::new();
        h.update(self.salt);
        h.update(username.as_bytes());
        h.update([0]);
        h.update(password.as_bytes());
        PairDigest(h.finalize().into())
    }

    /// Whether the pair passed (`Some(true)`) or failed (`Some(false)`) against
    /// `password_hash` recently; `None` when it must be checked.
    pub fn outcome(&self, pair: &PairDigest, password_hash: &str) -> Option<bool> {
        let fresh = |table: &DashMap<PairDigest, Remembered>| {
            table
                .get(pair)
                .is_some_and(|r| r.password_hash == password_hash && r.expires > Instant::now())
        };
        if fresh(&self.passed) {
            Some(true)
        } else if fresh(&self.failed) {
            Some(false)
        } else {
            None
        }
    }

    /// Remembers the outcome of a check of the pair against `password_hash`.
    pub fn remember(&self, pair: PairDigest, password_hash: &str, passed: bool) {
        let (table, ttl) = if passed {
            // A pair that passes now cannot be remembered as failing too.
            self.failed.remove(&pair);
            (&self.passed, PASSED_TTL)
        } else {
            (&self.failed, FAILED_TTL)
        };
        if table.len() >= CACHE_CAPACITY {
            table.clear();
        }
        table.insert(
            pair,
            Remembered {
                password_hash: password_hash.to_string(),
                expires: Instant::now() + ttl,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verifies_only_the_same_password() {
        let h = hash("pw");
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify("pw", &h));
        assert!(!verify("pw2", &h));
        assert!(!verify("pw", "not a hash"));
    }

    #[test]
    fn hashes_agree_with_the_argon2_crate_both_ways() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let mut scratch = Scratch::default();
        // Stored by builds before the scratch memory (and by the crate's defaults).
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let theirs = Argon2::default()
            .hash_password(b"secret", &salt)
            .unwrap()
            .to_string();
        assert!(verify_in(&mut scratch, "secret", &theirs));
        assert!(!verify_in(&mut scratch, "secreT", &theirs));
        let ours = hash_in(&mut scratch, "secret");
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(Argon2::default()
            .verify_password(b"secret", &parsed)
            .is_ok());
        // Other costs and algorithms verify as the crate does; absurd costs are refused.
        let light = Argon2::new(
            Algorithm::Argon2i,
            Version::V0x10,
            Params::new(64, 1, 1, Some(16)).unwrap(),
        )
        .hash_password(b"pw", &salt)
        .unwrap()
        .to_string();
        assert!(verify_in(&mut scratch, "pw", &light));
        assert!(!verify_in(&mut scratch, "pw!", &light));
        let heavy = light.replace("m=64", "m=1048576");
        assert!(!verify_in(&mut scratch, "pw", &heavy));
        assert_eq!(scratch.blocks.len(), Params::DEFAULT_M_COST as usize);
    }

    #[test]
    fn cache_is_bound_to_the_stored_hash_and_keeps_failures_apart() {
        let c = CredentialCache::new();
        let (p, q) = (c.digest("u", "p"), c.digest("u", "q"));
        c.remember(p, "h1", true);
        c.remember(q, "h1", false);
        assert_eq!(c.outcome(&p, "h1"), Some(true));
        assert_eq!(c.outcome(&q, "h1"), Some(false));
        // A changed password (another stored hash) is checked afresh, both ways.
        assert_eq!(c.outcome(&p, "h2"), None);
        assert_eq!(c.outcome(&q, "h2"), None);
        assert_eq!(c.outcome(&c.digest("v", "p"), "h1"), None);
        // Passing after a failure (against the new hash) forgets the failure.
        c.remember(q, "h1", true);
        assert_eq!(c.outcome(&q, "h1"), Some(true));
    }

    #[test]
    fn each_table_is_bounded() {
        let c = CredentialCache::new();
        let kept = c.digest("u", "right");
        c.remember(kept, "h", true);
        for i in 0..CACHE_CAPACITY + 10 {
            c.remember(c.digest("u", &format!("wrong-{i}")), "h", false);
        }
        assert!(c.failed.len() <= CACHE_CAPACITY);
        // Floods of failures do not push out the successes.
        assert_eq!(c.outcome(&kept, "h"), Some(true));
    }

    #[tokio::test(start_paused = true)]
    async fn permits_bound_the_checks_and_a_caller_waits_two_seconds_at_most() {
        let checks = PasswordChecks::new(1);
        let held = checks.permit().await.unwrap();
        let started = tokio::time::Instant::now();
        assert_eq!(checks.permit().await.err(), Some(AuthError::TooManyChecks));
        assert_eq!(started.elapsed(), CHECK_WAIT);
        drop(held);
        let permit = checks.permit().await.unwrap();
        assert_eq!(permit.run(|_| 7).await.unwrap(), 7);
        // A panicking job answers nothing, frees its permit and keeps the thread.
        let permit = checks.permit().await.unwrap();
        let panicked = permit.run(|_| -> u8 { panic!("in a check") }).await;
        assert_eq!(panicked.err(), Some(AuthError::Interrupted));
        let permit = checks.permit().await.unwrap();
        assert_eq!(permit.run(|_| 8).await.unwrap(), 8);
        // Released once the work is done.
        checks.permit().await.unwrap();
    }
}
