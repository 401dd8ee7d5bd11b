//! Password hashing (argon2id, PHC strings) and a short-lived cache of successful
//! checks, so clients that send username and password on every request (the npm Nacos
//! client does) do not pay for a slow hash each time.

use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use dashmap::DashMap;
use sha2::{Digest, Sha256};

/// How long a successful check is remembered.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// Upper bound on remembered checks; the cache is cleared when it is reached.
const CACHE_CAPACITY: usize = 10_000;

/// Hashes `password` with argon2id and a random salt. Slow on purpose (tens of ms):
/// call it off the async runtime.
pub fn hash(password: &str) -> String {
    let salt_bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt_bytes).expect("16 bytes is a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 with default parameters cannot fail")
        .to_string()
}

/// Whether `password` matches the PHC string `hash`.
pub fn verify(password: &str, hash: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

struct Remembered {
    /// The stored hash the check succeeded against: a changed password misses.
    password_hash: String,
    expires: Instant,
}

/// Successful checks, keyed by a salted digest of username and password (the password
/// itself is never kept).
pub struct CredentialCache {
    salt: [u8; 32],
    entries: DashMap<[u8; 32], Remembered>,
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
            entries: DashMap::new(),
        }
    }

    fn digest(&self, username: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.salt);
        h.update(username.as_bytes());
        h.update([0]);
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// Whether this pair succeeded against `password_hash` within the last minute.
    pub fn hit(&self, username: &str, password: &str, password_hash: &str) -> bool {
        let key = self.digest(username, password);
        match self.entries.get(&key) {
            Some(r) => r.password_hash == password_hash && r.expires > Instant::now(),
            None => false,
        }
    }

    /// Remembers a successful check.
    pub fn remember(&self, username: &str, password: &str, password_hash: &str) {
        if self.entries.len() >= CACHE_CAPACITY {
            self.entries.clear();
        }
        self.entries.insert(
            self.digest(username, password),
            Remembered {
                password_hash: password_hash.to_string(),
                expires: Instant::now() + CACHE_TTL,
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
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("pw", &h));
        assert!(!verify("pw2", &h));
        assert!(!verify("pw", "not a hash"));
    }

    #[test]
    fn cache_is_bound_to_the_stored_hash() {
        let c = CredentialCache::new();
        c.remember("u", "p", "h1");
        assert!(c.hit("u", "p", "h1"));
        assert!(!c.hit("u", "p", "h2"));
        assert!(!c.hit("u", "q", "h1"));
    }
}
