//! Access tokens: compact JWTs (`HS256`) with the user name as `sub` and an `exp` in
//! seconds, signed with the cluster's key. Nacos clients treat them as opaque strings.

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
}

fn sign(key: &[u8], signing_input: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(signing_input.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// A token for `username` that expires at `exp_secs` (Unix time).
pub fn issue(key: &[u8], username: &str, exp_secs: u64) -> String {
    let claims = serde_json::to_vec(&Claims {
        sub: username.to_string(),
        exp: exp_secs,
    })
    .expect("claims serialize");
    let input = format!("{HEADER}.{}", URL_SAFE_NO_PAD.encode(claims));
    let signature = URL_SAFE_NO_PAD.encode(sign(key, &input));
    format!("{input}.{signature}")
}

/// The user name in `token`, if its signature is right and it has not expired.
pub fn verify(key: &[u8], token: &str, now_secs: u64) -> Result<String, AuthError> {
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
    let claims: Claims = URL_SAFE_NO_PAD
        .decode(claims)
        .ok()
        .and_then(|c| serde_json::from_slice(&c).ok())
        .ok_or(AuthError::InvalidToken)?;
    if claims.exp <= now_secs {
        return Err(AuthError::ExpiredToken);
    }
    Ok(claims.sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let t = issue(b"key", "alice", 100);
        assert_eq!(verify(b"key", &t, 99).unwrap(), "alice");
        assert_eq!(
            verify(b"key", &t, 100).unwrap_err(),
            AuthError::ExpiredToken
        );
        assert_eq!(
            verify(b"other", &t, 0).unwrap_err(),
            AuthError::InvalidToken
        );
        let forged = issue(b"attacker", "alice", 1_000);
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
}
