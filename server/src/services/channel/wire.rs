//! The peer channel's message format, protocol 2: every message and every answer is
//! sealed (encrypted and authenticated) under keys derived from the cluster secret, and
//! a request's header is authenticated on its own, so that a receiver refuses a message
//! before it reads any of its body.
//!
//! A request is `POST /peer/v1/<path>` with
//! - `x-roster-protocol: 2` and `x-roster-node: <sender id>`;
//! - `x-roster-auth: <session>.<seq>.<to>.<ms>.<len>.<mac>`: the sender's session (a
//!   random id per process, 16 hex digits), its sequence number (decimal, from 1), the
//!   receiver's incarnation it is meant for (16 hex digits, 0 when not known yet), the
//!   sender's clock (Unix ms), the body's length in bytes, and the HMAC-SHA256 (64 hex
//!   digits) of the [`Head`] — all of the above plus the path;
//! - a body of exactly `len` bytes: a [sealed](ClusterSecret::seal) box, a random
//!   24-byte nonce, then the MessagePack message encrypted with XChaCha20-Poly1305 and
//!   its 16-byte tag, with the head as associated data.
//!
//! An answer that comes from a receiver that authenticated the request carries
//! `x-roster-sealed: 2`, and its body is sealed the same way with the head and the
//! status as associated data: the sender knows that the answer is fresh, is the answer
//! to this request, and that its status was not changed on the way. Any other answer is
//! a plaintext refusal, never taken for a success.
//!
//! Keys: HKDF-SHA256 over the cluster secret (salt `roster-peer/2`) gives the header key
//! (`info` "header-mac") and the sealing key ("body-seal"); the secret itself is not
//! kept. Random 24-byte nonces (XChaCha) never repeat in practice, whatever the number
//! of nodes, restarts and messages under one secret.

use std::fmt::Write as _;
use std::sync::Arc;

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use roster_raft::NodeId;
use sha2::Sha256;

/// The peer protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 2;
/// Header: protocol version.
pub const HEADER_PROTOCOL: &str = "x-roster-protocol";
/// Header: the sender's node id.
pub const HEADER_NODE: &str = "x-roster-node";
/// Header: the rest of the head and its MAC.
pub const HEADER_AUTH: &str = "x-roster-auth";
/// Header of an answer whose body is sealed.
pub const HEADER_SEALED: &str = "x-roster-sealed";
/// How far a message's timestamp may be from the receiver's clock.
pub const MAX_SKEW_MS: u64 = 60_000;
/// Largest message body, before sealing (snapshot chunks and Distro snapshots are the
/// biggest).
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// What sealing adds to a message: nonce and tag.
pub const SEAL_OVERHEAD: usize = NONCE_LEN + TAG_LEN;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// The cluster secret, as the two keys derived from it. Cheap to clone.
#[derive(Clone)]
pub struct ClusterSecret(Arc<Keys>);

struct Keys {
    header: [u8; 32],
    seal: XChaCha20Poly1305,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// What a request's header says. Authenticated by its MAC before any of the body is
/// read; the body is then bound to it as associated data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The sender's node id.
    pub sender: NodeId,
    /// The sender's session: random per process, so that sequence numbers restart
    /// safely when the sender does.
    pub session: u64,
    /// The sender's sequence number, from 1.
    pub seq: u64,
    /// The receiver incarnation this message is for (0: not known yet).
    pub to: u64,
    /// The sender's clock, Unix ms.
    pub ts: u64,
    /// Length of the sealed body.
    pub len: u64,
    /// The route, e.g. `raft/append`.
    pub path: String,
}

impl Head {
    /// Everything the MAC and the seals cover, one field a line (the path, last, is the
    /// only free text).
    fn canonical(&self, kind: &str) -> Vec<u8> {
        format!(
            "roster-peer/{PROTOCOL_VERSION}\n{kind}\n{}\n{:016x}\n{}\n{:016x}\n{}\n{}\n{}",
            self.sender, self.session, self.seq, self.to, self.ts, self.len, self.path
        )
        .into_bytes()
    }

    /// Associated data of the request's body.
    pub fn request_aad(&self) -> Vec<u8> {
        self.canonical("request")
    }

    /// Associated data of the answer's body, which binds its status.
    pub fn reply_aad(&self, status: u16) -> Vec<u8> {
        self.canonical(&format!("reply {status}"))
    }
}

impl ClusterSecret {
    /// Derives the keys from a secret of at least 16 bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() < 16 {
            return Err("the cluster secret must be at least 16 bytes".into());
        }
        let hkdf = Hkdf::<Sha256>::new(Some(b"roster-peer/2"), &bytes);
        let mut header = [0u8; 32];
        let mut seal = [0u8; 32];
        hkdf.expand(b"header-mac", &mut header)
            .expect("32 bytes is a valid HKDF length");
        hkdf.expand(b"body-seal", &mut seal)
            .expect("32 bytes is a valid HKDF length");
        Ok(Self(Arc::new(Keys {
            header,
            seal: XChaCha20Poly1305::new(Key::from_slice(&seal)),
        })))
    }

    fn mac(&self, head: &Head) -> HmacSha256 {
        let mut mac =
            <HmacSha256 as Mac>::new_from_slice(&self.0.header).expect("HMAC takes any key length");
        mac.update(&head.canonical("head"));
        mac
    }

    /// The `x-roster-auth` value of a request.
    pub fn sign(&self, head: &Head) -> String {
        let tag = self.mac(head).finalize().into_bytes();
        let mut out = format!(
            "{:016x}.{}.{:016x}.{}.{}.",
            head.session, head.seq, head.to, head.ts, head.len
        );
        for b in tag {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// Checks a request's headers for `path` at `now` (Unix ms): protocol, sender,
    /// MAC and timestamp. Never reads the body; the error says why, for the log and the
    /// plaintext refusal.
    pub fn verify(
        &self,
        protocol: Option<&str>,
        sender: Option<&str>,
        auth: Option<&str>,
        path: &str,
        now: u64,
    ) -> Result<Head, String> {
        let protocol = protocol.ok_or("missing protocol version")?;
        if protocol != PROTOCOL_VERSION.to_string() {
            return Err(format!(
                "the peer speaks protocol {protocol:.8}, this node {PROTOCOL_VERSION}: \
                 upgrade every node of the cluster together"
            ));
        }
        let sender: NodeId = sender
            .and_then(|s| s.parse().ok())
            .ok_or("missing or bad sender id")?;
        let (head, tag) = parse_auth(sender, auth.ok_or("missing authentication")?, path)
            .ok_or("malformed authentication header")?;
        self.mac(&head)
            .verify_slice(&tag)
            .map_err(|_| "authentication failed (wrong cluster secret?)".to_string())?;
        if head.ts.abs_diff(now) > MAX_SKEW_MS {
            return Err("timestamp too far from this node's clock".into());
        }
        Ok(head)
    }

    /// Encrypts `plaintext` with `aad`: nonce, ciphertext, tag.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut out = Vec::with_capacity(plaintext.len() + SEAL_OVERHEAD);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = self
            .0
            .seal
            .encrypt_in_place_detached(XNonce::from_slice(&nonce), aad, &mut out[NONCE_LEN..])
            .expect("messages are far below XChaCha20's length limit");
        out.extend_from_slice(&tag);
        out
    }

    /// Decrypts and authenticates a [sealed](Self::seal) box in place; `None` when it was
    /// not sealed under this secret with this `aad`, or was changed.
    pub fn open(&self, aad: &[u8], mut sealed: Vec<u8>) -> Option<Vec<u8>> {
        if sealed.len() < SEAL_OVERHEAD {
            return None;
        }
        let tag_at = sealed.len() - TAG_LEN;
        let tag = *Tag::from_slice(&sealed[tag_at..]);
        let (nonce, rest) = sealed[..tag_at].split_at_mut(NONCE_LEN);
        self.0
            .seal
            .decrypt_in_place_detached(XNonce::from_slice(nonce), aad, rest, &tag)
            .ok()?;
        sealed.truncate(tag_at);
        sealed.drain(..NONCE_LEN);
        Some(sealed)
    }

    /// The sealed length of a `len`-byte message.
    pub fn sealed_len(len: usize) -> usize {
        len + SEAL_OVERHEAD
    }
}

/// Splits `x-roster-auth`: strict widths, decimal or hex digits only.
fn parse_auth(sender: NodeId, auth: &str, path: &str) -> Option<(Head, Vec<u8>)> {
    let mut parts = auth.split('.');
    let mut next = || parts.next();
    let hex64 = |s: &str| {
        (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    // Canonical decimal: no leading zero, so a header has one spelling per value.
    let dec = |s: &str| {
        let canonical = s == "0" || !s.starts_with('0');
        (!s.is_empty() && s.len() <= 20 && canonical && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let session = hex64(next()?)?;
    let seq = dec(next()?)?;
    let to = hex64(next()?)?;
    let ts = dec(next()?)?;
    let len = dec(next()?)?;
    let tag = decode_hex(next()?)?;
    if next().is_some() || tag.len() != 32 {
        return None;
    }
    Some((
        Head {
            sender,
            session,
            seq,
            to,
            ts,
            len,
            path: path.to_string(),
        },
        tag,
    ))
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> ClusterSecret {
        ClusterSecret::new(b"0123456789abcdef".to_vec()).unwrap()
    }

    fn head() -> Head {
        Head {
            sender: 2,
            session: 0xfeed,
            seq: 7,
            to: 0xbeef,
            ts: 1_000_000,
            len: 100,
            path: "raft/vote".into(),
        }
    }

    fn check(
        s: &ClusterSecret,
        auth: &str,
        protocol: &str,
        sender: &str,
        path: &str,
        now: u64,
    ) -> Result<Head, String> {
        s.verify(Some(protocol), Some(sender), Some(auth), path, now)
    }

    #[test]
    fn the_header_mac_binds_every_field_and_the_secret() {
        let s = secret();
        let auth = s.sign(&head());
        assert_eq!(
            check(&s, &auth, "2", "2", "raft/vote", 1_000_500),
            Ok(head())
        );
        assert!(
            check(&s, &auth, "2", "2", "raft/append", 1_000_500).is_err(),
            "path"
        );
        assert!(
            check(&s, &auth, "2", "3", "raft/vote", 1_000_500).is_err(),
            "sender"
        );
        let old = check(&s, &auth, "1", "2", "raft/vote", 1_000_500).unwrap_err();
        assert!(old.contains("upgrade every node"), "{old}");
        assert!(
            check(&s, &auth, "2", "2", "raft/vote", 1_060_001).is_err(),
            "too old"
        );
        assert!(
            check(&s, &auth, "2", "2", "raft/vote", 939_999).is_err(),
            "too new"
        );
        let other = ClusterSecret::new(b"fedcba9876543210".to_vec()).unwrap();
        assert!(check(&other, &auth, "2", "2", "raft/vote", 1_000_500).is_err());
        // Any field changed in the header itself.
        let fields: Vec<&str> = auth.split('.').collect();
        for i in 0..5 {
            let mut changed = fields.clone();
            let bumped = if i == 0 || i == 2 {
                format!("{:016x}", u64::from_str_radix(fields[i], 16).unwrap() ^ 1)
            } else {
                (fields[i].parse::<u64>().unwrap() + 1).to_string()
            };
            changed[i] = &bumped;
            let forged = changed.join(".");
            assert!(
                check(&s, &forged, "2", "2", "raft/vote", 1_000_500).is_err(),
                "field {i}"
            );
        }
        assert!(ClusterSecret::new(b"short".to_vec()).is_err());
    }

    #[test]
    fn malformed_headers_are_refused() {
        let s = secret();
        let good = s.sign(&head());
        for bad in [
            String::new(),
            "x".into(),
            good.replacen('.', "", 1),
            format!("{good}.00"),
            good[..good.len() - 2].to_string(),
            good.replace(&good[..16], "000000000000feeg"),
            format!("+{}", &good[1..]),
            good.replacen(".7.", ".+7.", 1),
        ] {
            assert!(
                check(&s, &bad, "2", "2", "raft/vote", 1_000_500).is_err(),
                "{bad}"
            );
        }
        assert!(s
            .verify(None, Some("2"), Some(&good), "raft/vote", 1_000_500)
            .is_err());
        assert!(s
            .verify(Some("2"), None, Some(&good), "raft/vote", 1_000_500)
            .is_err());
        assert!(s
            .verify(Some("2"), Some("2"), None, "raft/vote", 1_000_500)
            .is_err());
    }

    #[test]
    fn sealed_bodies_open_only_with_their_secret_and_head() {
        let s = secret();
        let h = head();
        let plaintext = b"signing key: not on the wire".to_vec();
        let sealed = s.seal(&h.request_aad(), &plaintext);
        assert_eq!(sealed.len(), ClusterSecret::sealed_len(plaintext.len()));
        assert!(
            !sealed.windows(11).any(|w| w == b"signing key"),
            "the plaintext does not show"
        );
        assert_eq!(
            s.open(&h.request_aad(), sealed.clone()),
            Some(plaintext.clone())
        );
        // Two seals of one message differ (fresh nonces).
        assert_ne!(s.seal(&h.request_aad(), &plaintext), sealed);
        // Another head, another kind, another status, another secret, a flipped bit.
        let other_head = Head {
            seq: 8,
            ..h.clone()
        };
        assert_eq!(s.open(&other_head.request_aad(), sealed.clone()), None);
        assert_eq!(s.open(&h.reply_aad(200), sealed.clone()), None);
        let reply = s.seal(&h.reply_aad(200), b"ok");
        assert_eq!(s.open(&h.reply_aad(400), reply.clone()), None);
        assert_eq!(s.open(&h.reply_aad(200), reply), Some(b"ok".to_vec()));
        let other = ClusterSecret::new(b"fedcba9876543210".to_vec()).unwrap();
        assert_eq!(other.open(&h.request_aad(), sealed.clone()), None);
        for i in [0, 24, sealed.len() - 1] {
            let mut flipped = sealed.clone();
            flipped[i] ^= 1;
            assert_eq!(s.open(&h.request_aad(), flipped), None, "bit at {i}");
        }
        assert_eq!(s.open(&h.request_aad(), sealed[..39].to_vec()), None);
        assert_eq!(
            s.open(&h.request_aad(), s.seal(&h.request_aad(), b"")),
            Some(vec![])
        );
    }

    mod fuzz {
        //! Fuzzing of what anyone who reaches `--peer` controls: the three headers, the
        //! path and the body. Nothing panics, and nothing without the secret passes.

        use proptest::prelude::*;

        use super::*;

        const NOW: u64 = 1_000_500;

        /// Header-shaped values: the six fields with any numbers and a random tag.
        fn auth_shaped() -> impl Strategy<Value = String> {
            (
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                prop_oneof![Just(NOW), any::<u64>()],
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..40),
            )
                .prop_map(|(session, seq, to, ts, len, tag)| {
                    let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{session:016x}.{seq}.{to:016x}.{ts}.{len}.{tag}")
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 2_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Arbitrary header values, path and body: refused, never a panic.
            #[test]
            fn arbitrary_frames_are_refused(
                protocol in prop_oneof![Just("2".to_string()), any::<String>()],
                sender in prop_oneof![Just("2".to_string()), any::<String>()],
                auth in prop_oneof![auth_shaped(), any::<String>()],
                path in any::<String>(),
                body in proptest::collection::vec(any::<u8>(), 0..256),
            ) {
                let s = secret();
                prop_assert!(s.verify(Some(&protocol), Some(&sender), Some(&auth), &path, NOW).is_err());
                prop_assert!(s.open(&head().request_aad(), body.clone()).is_none());
                prop_assert!(s.open(&head().reply_aad(200), body).is_none());
            }

            /// A genuine header with bytes changed, cut or added: refused unless it is
            /// the same header.
            #[test]
            fn changed_headers_are_refused(
                at in any::<prop::sample::Index>(),
                cut in 0usize..4,
                insert in proptest::collection::vec(any::<u8>(), 0..4),
            ) {
                let s = secret();
                let good = s.sign(&head());
                let mut bytes = good.clone().into_bytes();
                let i = at.index(bytes.len());
                let end = (i + cut).min(bytes.len());
                bytes.splice(i..end, insert);
                let changed = String::from_utf8_lossy(&bytes).into_owned();
                let verdict = s.verify(Some("2"), Some("2"), Some(&changed), "raft/vote", NOW);
                if changed.eq_ignore_ascii_case(&good) && verdict.is_ok() {
                    // Hex digits read the same in either case.
                    prop_assert_eq!(verdict.unwrap(), head());
                } else {
                    prop_assert!(verdict.is_err(), "{} passed", changed);
                }
            }

            /// A genuine sealed body with bytes changed: refused.
            #[test]
            fn changed_bodies_are_refused(
                message in proptest::collection::vec(any::<u8>(), 0..128),
                at in any::<prop::sample::Index>(),
                flip in 1u8..=255,
            ) {
                let s = secret();
                let mut sealed = s.seal(&head().request_aad(), &message);
                let i = at.index(sealed.len());
                sealed[i] ^= flip;
                prop_assert!(s.open(&head().request_aad(), sealed).is_none());
            }
        }
    }
}
