//! The authenticated peer channel: HTTP on `--peer`, MessagePack bodies, and an HMAC of
//! every message under the cluster secret.
//!
//! A message is `POST /peer/v1/<path>` with headers `x-roster-protocol` (the protocol
//! version), `x-roster-node` (the sender's id) and `x-roster-auth: <unix ms>.<hex>`, the
//! HMAC-SHA256 of `roster-peer/<version>\n<ms>\n<sender>\n<path>\n<body>`. A receiver
//! refuses a wrong version, a wrong MAC, or a timestamp more than a minute off.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use roster_raft::{NodeId, Rpc, Transport, TransportError};
use sha2::Sha256;

use crate::clock::now_ms;

/// The peer protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Header: protocol version.
pub const HEADER_PROTOCOL: &str = "x-roster-protocol";
/// Header: the sender's node id.
pub const HEADER_NODE: &str = "x-roster-node";
/// Header: timestamp and MAC.
pub const HEADER_AUTH: &str = "x-roster-auth";
/// How far a message's timestamp may be from the receiver's clock.
const MAX_SKEW_MS: u64 = 60_000;

type HmacSha256 = Hmac<Sha256>;

/// The cluster secret every peer message is signed with.
#[derive(Clone)]
pub struct ClusterSecret(Arc<Vec<u8>>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

impl ClusterSecret {
    /// A secret from its bytes (at least 16).
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < 16 {
            return Err("the cluster secret must be at least 16 bytes".into());
        }
        Ok(Self(Arc::new(bytes)))
    }

    fn mac(&self, ts: u64, sender: NodeId, path: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("roster-peer/{PROTOCOL_VERSION}\n{ts}\n{sender}\n{path}\n").as_bytes());
        mac.update(body);
        mac
    }

    /// The `x-roster-auth` value for a message.
    pub fn sign(&self, ts: u64, sender: NodeId, path: &str, body: &[u8]) -> String {
        let tag = self.mac(ts, sender, path, body).finalize().into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("{ts}.{hex}")
    }

    /// Checks a message's headers against its path and body.
    pub fn verify(
        &self,
        protocol: Option<&str>,
        sender: Option<&str>,
        auth: Option<&str>,
        path: &str,
        body: &[u8],
        now: u64,
    ) -> Result<NodeId, String> {
        let protocol = protocol.ok_or("missing protocol version")?;
        if protocol != PROTOCOL_VERSION.to_string() {
            return Err(format!(
                "protocol version {protocol} is not {PROTOCOL_VERSION}"
            ));
        }
        let sender: NodeId = sender
            .and_then(|s| s.parse().ok())
            .ok_or("missing or bad sender id")?;
        let (ts, hex) = auth
            .and_then(|a| a.split_once('.'))
            .ok_or("missing authentication")?;
        let ts: u64 = ts.parse().map_err(|_| "bad timestamp")?;
        if ts.abs_diff(now) > MAX_SKEW_MS {
            return Err("timestamp too far from this node's clock".into());
        }
        let tag = decode_hex(hex).ok_or("bad authentication tag")?;
        self.mac(ts, sender, path, body)
            .verify_slice(&tag)
            .map_err(|_| "authentication failed (wrong cluster secret?)".to_string())?;
        Ok(sender)
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Sends messages to peers. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    secret: Option<ClusterSecret>,
    self_id: NodeId,
}

impl PeerClient {
    /// A client signing as `self_id`. Without a secret every call fails: a node started
    /// without one has no peers.
    pub fn new(self_id: NodeId, secret: Option<ClusterSecret>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTP client without TLS always builds");
        Self {
            http,
            secret,
            self_id,
        }
    }

    /// Posts `body` to `path` (e.g. `raft/append`) on the peer at `addr`.
    pub async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let secret = self.secret.as_ref().ok_or_else(|| {
            TransportError::Refused(addr.into(), "this node has no cluster secret".into())
        })?;
        let auth = secret.sign(now_ms(), self.self_id, path, &body);
        let response = self
            .http
            .post(format!("http://{addr}/peer/v1/{path}"))
            .header(HEADER_PROTOCOL, PROTOCOL_VERSION.to_string())
            .header(HEADER_NODE, self.self_id.to_string())
            .header(HEADER_AUTH, auth)
            .header("content-type", "application/msgpack")
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    TransportError::Unreachable(addr.into(), e.to_string())
                } else {
                    TransportError::NoReply(addr.into(), e.to_string())
                }
            })?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| TransportError::NoReply(addr.into(), e.to_string()))?;
        if !status.is_success() {
            return Err(TransportError::Refused(
                addr.into(),
                format!("{status}: {}", String::from_utf8_lossy(&bytes)),
            ));
        }
        Ok(bytes.to_vec())
    }
}

impl Transport for PeerClient {
    async fn call(
        &self,
        _target: NodeId,
        addr: &str,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        self.post(addr, &format!("raft/{}", rpc.name()), body, timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_secret_path_body_and_time() {
        let s = ClusterSecret::new(b"0123456789abcdef".to_vec()).unwrap();
        let auth = s.sign(1_000_000, 2, "raft/vote", b"body");
        let check = |secret: &ClusterSecret,
                     protocol: &str,
                     sender: &str,
                     path: &str,
                     body: &[u8],
                     now: u64| {
            secret.verify(Some(protocol), Some(sender), Some(&auth), path, body, now)
        };
        assert_eq!(check(&s, "1", "2", "raft/vote", b"body", 1_000_500), Ok(2));
        assert!(
            check(&s, "1", "2", "raft/append", b"body", 1_000_500).is_err(),
            "another path"
        );
        assert!(
            check(&s, "1", "2", "raft/vote", b"other", 1_000_500).is_err(),
            "another body"
        );
        assert!(
            check(&s, "1", "3", "raft/vote", b"body", 1_000_500).is_err(),
            "another sender"
        );
        assert!(
            check(&s, "2", "2", "raft/vote", b"body", 1_000_500).is_err(),
            "another protocol"
        );
        assert!(
            check(&s, "1", "2", "raft/vote", b"body", 1_100_001).is_err(),
            "too old"
        );
        let other = ClusterSecret::new(b"fedcba9876543210".to_vec()).unwrap();
        assert!(
            check(&other, "1", "2", "raft/vote", b"body", 1_000_500).is_err(),
            "another secret"
        );
        assert!(ClusterSecret::new(b"short".to_vec()).is_err());
    }
}
