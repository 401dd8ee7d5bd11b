//! Access tokens: compact JWTs (`HS256`) with the user name as `sub`, an `exp` in
//! seconds and the user's token generation as `gen`, signed with the cluster's key.
//! Nacos clients treat them as opaque strings. A token counts only while its `gen` is
//! the user's current one: changing the password, the roles or deleting the user moves
//! it on and so ends every token issued before (`AuthData::token_generations`).
//! After a rotation, a retired key still verifies the tokens it signed that expire
//! within its window ([`verify_retired`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::AuthError;

type HmacSha256 = Hmac<Sha256>;

/// `{"alg":"HS256","typ":"JWT"}`, base64url-encoded.
const HEADER: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";

#[derive(Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    /// Absent in tokens of builds before revocation: generation 0.
    #[serde(default)]
    gen: u64,
}

/// What a verified token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The user name.
    pub username: String,
    /// The user's token generation when it was issued.
    pub generation: u64,
}

impl From<Claims> for Verified {
    fn from(c: Claims) -> Self {
        Self {
            username: c.sub,
            generation: c.gen,
        }
    }
}

fn sign(key: &[u8], signing_input: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// A token for `username` in its token generation `generation`, expiring at
/// `exp_secs` (Unix time).
pub fn issue(key: &[u8], username: &str, exp_secs: u64, generation: u64) -> String {
    let claims = serde_json::to_vec(&Claims {
        sub: username.to_string(),
        exp: exp_secs,
        gen: generation,
    })
    .expect("claims serialize");
    let input = format!("{HEADER}.{}", URL_SAFE_NO_PAD.encode(claims));
    let signature = URL_SAFE_NO_PAD.encode(sign(key, &input));
    format!("{input}.{signature}")
}

/// What `token` says, if its signature is right and it has not expired.
pub fn verify(key: &[u8], token: &str, now_secs: u64) -> Result<Verified, AuthError> {
    let claims = decode(key, token)?;
    if claims.exp <= now_secs {
        return Err(AuthError::ExpiredToken);
    }
    Ok(claims.into())
}

/// Like [`verify`] with a key retired by a rotation, whose tokens count only if they
/// expire by `valid_until_secs`: those are the ones it could have signed before it was
/// retired (a token lives at most a token lifetime); a later expiry means a forgery
/// with a key that may have leaked.
pub fn verify_retired(
    key: &[u8],
    token: &str,
    now_secs: u64,
    valid_until_secs: u64,
) -> Result<Verified, AuthError> {
    let claims = decode(key, token)?;
    if claims.exp > valid_until_secs {
        return Err(AuthError::InvalidToken);
    }
    if claims.exp <= now_secs {
        return Err(AuthError::ExpiredToken);
    }
    Ok(claims.into())
}

/// A short, public name for a key: the first four bytes of its SHA-256, in hex. Tells
/// keys apart in answers and logs without revealing them.
pub fn key_id(key: &[u8]) -> String {
    use sha2::Digest;
    Sha256::digest(key)[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The claims of `token` if `key` signed it; `InvalidToken` otherwise.
fn decode(key: &[u8], token: &str) -> Result<Claims, AuthError> {
    let (input, signature) = token.rsplit_once('.').ok_or(AuthError::InvalidToken)?;
    let (header, claims) = input.split_once('.').ok_or(AuthError::InvalidToken)?;
    if header != HEADER {
        return Err(AuthError::InvalidToken);
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| AuthError::InvalidToken)?;
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(input.as_bytes());
    // Constant-time comparison.
    mac.verify_slice(&signature)
        .map_err(|_| AuthError::InvalidToken)?;
    URL_SAFE_NO_PAD
        .decode(claims)
        .ok()
        .and_then(|c| serde_json::from_slice(&c).ok())
        .ok_or(AuthError::InvalidToken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let t = issue(b"key", "alice", 100, 3);
        assert_eq!(
            verify(b"key", &t, 99).unwrap(),
            Verified {
                username: "alice".into(),
                generation: 3
            }
        );
        assert_eq!(
            verify(b"key", &t, 100).unwrap_err(),
            AuthError::ExpiredToken
        );
        assert_eq!(
            verify(b"other", &t, 0).unwrap_err(),
            AuthError::InvalidToken
        );
        let forged = issue(b"attacker", "alice", 1_000, 0);
        assert_eq!(
            verify(b"key", &forged, 0).unwrap_err(),
            AuthError::InvalidToken
        );
        assert_eq!(
            verify(b"key", "garbage", 0).unwrap_err(),
            AuthError::InvalidToken
        );
        let header_json = URL_SAFE_NO_PAD.decode(HEADER).unwrap();
        assert_eq!(header_json, br#"{"alg":"HS256","typ":"JWT"}"#);
    }

    #[test]
    fn a_retired_key_verifies_only_tokens_expiring_within_its_window() {
        let issued = issue(b"old", "alice", 150, 0);
        assert_eq!(
            verify_retired(b"old", &issued, 100, 160).unwrap().username,
            "alice"
        );
        assert_eq!(
            verify_retired(b"old", &issued, 150, 160).unwrap_err(),
            AuthError::ExpiredToken
        );
        // Signed later than its window allows: a forgery.
        let forged = issue(b"old", "alice", 1_000, 0);
        assert_eq!(
            verify_retired(b"old", &forged, 100, 160).unwrap_err(),
            AuthError::InvalidToken
        );
        assert_eq!(
            verify_retired(b"new", &issued, 100, 160).unwrap_err(),
            AuthError::InvalidToken
        );
        assert_eq!(key_id(b"old").len(), 8);
        assert_ne!(key_id(b"old"), key_id(b"new"));
    }

    #[test]
    fn a_token_without_a_generation_is_of_generation_zero() {
        // What builds before revocation issued: `{"sub","exp"}` only.
        let claims = URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","exp":100}"#);
        let input = format!("{HEADER}.{claims}");
        let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(sign(b"key", &input)));
        assert_eq!(verify(b"key", &token, 50).unwrap().generation, 0);
    }
}
