//! Long-lived API tokens ([`ApiToken`]): what clients that hold one static credential
//! need (Consul's ACL token, Prometheus' `authorization`, scripts), where a login token
//! expires. An admin creates one for a user; its secret is shown once and only its
//! SHA-256 is kept, through Raft like every user, so a revocation is applied by every
//! node as the log reaches it. A token acts as its user, with the user's permissions at
//! the time of each request; it ends when revoked or when its user is deleted, and a
//! password change leaves it alone (it is a credential of its own).
//!
//! A token reads `roster_<id>_<secret>`: the id (16 hex digits) finds it, the secret
//! (64 hex digits, 256 random bits) proves it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What every API token starts with: login tokens never do.
pub const PREFIX: &str = "roster_";

/// One API token, as the auth data keeps it (by id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    /// Whose it is.
    pub user: String,
    /// What it is for, as its creator said.
    pub description: String,
    /// SHA-256 of its secret.
    #[serde(with = "serde_bytes")]
    pub secret_sha256: Vec<u8>,
    /// When it was created, wall-clock ms.
    pub created_ms: u64,
}

/// A new token: its id, the token to hand out once, and the secret's hash to keep.
pub fn generate() -> (String, String, Vec<u8>) {
    let id: [u8; 8] = rand::random();
    let secret: [u8; 32] = rand::random();
    let (id, secret) = (hex(&id), hex(&secret));
    let token = format!("{PREFIX}{id}_{secret}");
    let hash = Sha256::digest(secret.as_bytes()).to_vec();
    (id, token, hash)
}

/// The id and secret of `token`, if it reads as an API token.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.strip_prefix(PREFIX)?.split_once('_')?;
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_of(id, 16) && hex_of(secret, 64)).then_some((id, secret))
}

/// Whether `secret` is the one `token` was made with (compared in constant time).
pub fn proves(token: &ApiToken, secret: &str) -> bool {
    let hash = Sha256::digest(secret.as_bytes());
    token.secret_sha256.len() == hash.len()
        && token
            .secret_sha256
            .iter()
            .zip(hash.iter())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_parses_and_proves_itself_alone() {
        let (id, token, hash) = generate();
        let kept = ApiToken {
            user: "ann".into(),
            description: String::new(),
            secret_sha256: hash,
            created_ms: 0,
        };
        let (parsed_id, secret) = parse(&token).expect("parses");
        assert_eq!(parsed_id, id);
        assert!(proves(&kept, secret));
        let (_, other, _) = generate();
        assert!(!proves(&kept, parse(&other).unwrap().1));
        assert_ne!(generate().1, token, "random");
    }

    #[test]
    fn other_strings_are_not_api_tokens() {
        for s in [
            "",
            "eyJhbGciOi.x.y",
            "roster_",
            "roster_0123456789abcdef",
            "roster_0123456789abcdef_short",
            "roster_0123456789abcdeg_0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            assert!(parse(s).is_none(), "{s}");
        }
    }
}
