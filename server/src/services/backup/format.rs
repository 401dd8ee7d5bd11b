//! The backup snapshot file: all persistent state at one applied log index, framed so
//! that a file cut short, damaged, or written by a newer roster is refused with a
//! message that says which.
//!
//! ```text
//! offset      size  field
//! 0           8     magic: the ASCII bytes "RSTRSNAP"
//! 8           2     format version, big-endian u16 (this build writes 1, reads <= 1)
//! 10          4     metadata length M, big-endian u32
//! 14          M     metadata: a JSON object (UTF-8), see `Meta`
//! 14+M        8     state length S, big-endian u64
//! 22+M        S     state: the Raft state machine's snapshot (MessagePack, itself a
//!                   versioned enum: `SnapshotData::V1` in store/machine.rs)
//! 22+M+S      32    SHA-256 of every byte before it
//! ```
//!
//! The metadata is JSON so that `roster snapshot inspect` and people with `head -c` can
//! read it, and so that later versions add fields (readers ignore unknown ones). The
//! state bytes are exactly what Raft snapshots hold: a restore hands them to the state
//! machine unchanged, and a format of the state that a build can restore from its Raft
//! directory it can restore from a backup. A new framing bumps [`VERSION`]; a reader
//! keeps reading every older version (the fixture in `tests/fixtures/` is a version 1
//! file, restored by the tests).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::services::store::machine::StateCounts;

/// The first bytes of every snapshot file.
pub const MAGIC: &[u8; 8] = b"RSTRSNAP";
/// The format version this build writes (and the newest it reads).
pub const VERSION: u16 = 1;
/// The file name extension of snapshot files.
pub const EXTENSION: &str = "rsnap";

const CHECKSUM_LEN: usize = 32;
/// Bytes before the metadata: magic, version, metadata length.
const HEAD_LEN: usize = 8 + 2 + 4;
/// Metadata larger than this is refused unread (it is a few hundred bytes).
const MAX_META_LEN: usize = 1 << 20;

/// What a snapshot says of itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// When it was taken, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The same, as an RFC 3339 UTC time, for people.
    pub created_at: String,
    /// The node that took it.
    pub node_id: u64,
    /// The roster version that took it.
    pub roster_version: String,
    /// The last Raft log entry the state includes.
    pub last_applied_index: u64,
    /// The term of that entry.
    pub last_applied_term: u64,
    /// The cluster's members at that entry (id → peer address), for the record: a
    /// restore founds a new cluster of one.
    #[serde(default)]
    pub members: BTreeMap<u64, String>,
    /// How many items of each kind the state holds.
    #[serde(default)]
    pub counts: StateCounts,
}

/// A decoded, verified snapshot file.
#[derive(Clone, Debug)]
pub struct SnapshotFile {
    /// The format version it was written in.
    pub version: u16,
    /// Its metadata.
    pub meta: Meta,
    /// The state machine's state.
    pub state: Vec<u8>,
    /// Its SHA-256, hex: what `inspect` shows, to compare copies.
    pub checksum: String,
}

/// Why bytes are not a usable snapshot file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FormatError {
    /// Not a roster snapshot at all.
    #[error(
        "not a roster snapshot file (it does not start with {:?})",
        String::from_utf8_lossy(MAGIC)
    )]
    NotASnapshot,
    /// Written by a newer roster.
    #[error("snapshot format version {0} is newer than this roster reads (up to {VERSION}); use a newer roster")]
    NewerVersion(u16),
    /// Shorter than its lengths say: cut short while copied or written.
    #[error("the snapshot file is truncated: {actual} bytes where its header says {expected}")]
    Truncated {
        /// What the header announces.
        expected: u64,
        /// What there is.
        actual: u64,
    },
    /// Longer than its lengths say.
    #[error("the snapshot file is corrupted: {actual} bytes where its header says {expected}")]
    WrongLength {
        /// What the header announces.
        expected: u64,
        /// What there is.
        actual: u64,
    },
    /// The content does not match its checksum.
    #[error("the snapshot file is corrupted: its SHA-256 checksum does not match its content")]
    Checksum,
    /// The metadata is not what this format says.
    #[error("the snapshot file's metadata is unreadable: {0}")]
    Meta(String),
}

/// Encodes a snapshot file of version [`VERSION`].
pub fn encode(meta: &Meta, state: &[u8]) -> Vec<u8> {
    let meta = serde_json::to_vec(meta).expect("snapshot metadata serializes");
    let mut out = Vec::with_capacity(HEAD_LEN + meta.len() + 8 + state.len() + CHECKSUM_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(meta.len() as u32).to_be_bytes());
    out.extend_from_slice(&meta);
    out.extend_from_slice(&(state.len() as u64).to_be_bytes());
    out.extend_from_slice(state);
    let checksum = Sha256::digest(&out);
    out.extend_from_slice(&checksum);
    out
}

/// Decodes and verifies a snapshot file: magic, version, lengths, checksum, metadata.
pub fn decode(bytes: &[u8]) -> Result<SnapshotFile, FormatError> {
    let truncated = |expected: usize| FormatError::Truncated {
        expected: expected as u64,
        actual: bytes.len() as u64,
    };
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        // A file cut within the magic is still recognizably ours.
        if !bytes.is_empty() && MAGIC.starts_with(bytes) {
            return Err(truncated(HEAD_LEN));
        }
        return Err(FormatError::NotASnapshot);
    }
    if bytes.len() < HEAD_LEN {
        return Err(truncated(HEAD_LEN));
    }
    let version = u16::from_be_bytes([bytes[8], bytes[9]]);
    if version > VERSION {
        return Err(FormatError::NewerVersion(version));
    }
    let meta_len = u32::from_be_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]) as usize;
    if meta_len > MAX_META_LEN {
        return Err(FormatError::Meta(format!("{meta_len} bytes long")));
    }
    let state_at = HEAD_LEN + meta_len + 8;
    if bytes.len() < state_at {
        return Err(truncated(state_at + CHECKSUM_LEN));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[state_at - 8..state_at]);
    let state_len = u64::from_be_bytes(len);
    let expected = (state_at as u64)
        .saturating_add(state_len)
        .saturating_add(CHECKSUM_LEN as u64);
    let actual = bytes.len() as u64;
    if actual < expected {
        return Err(FormatError::Truncated { expected, actual });
    }
    if actual > expected {
        return Err(FormatError::WrongLength { expected, actual });
    }
    let (content, checksum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
    if Sha256::digest(content).as_slice() != checksum {
        return Err(FormatError::Checksum);
    }
    let meta: Meta = serde_json::from_slice(&bytes[HEAD_LEN..HEAD_LEN + meta_len])
        .map_err(|e| FormatError::Meta(e.to_string()))?;
    Ok(SnapshotFile {
        version,
        meta,
        state: content[state_at..].to_vec(),
        checksum: hex(checksum),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ms` since the epoch as an RFC 3339 UTC time with milliseconds
/// (`2026-12-02T11:57:01.123Z`).
pub fn rfc3339(ms: u64) -> String {
    let (date, time, millis) = split_time(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// `ms` since the epoch as a compact UTC stamp that sorts as it reads
/// (`20261202T115701.123Z`), for file names.
pub fn file_stamp(ms: u64) -> String {
    let (date, time, millis) = split_time(ms);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}.{millis:03}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

type Date = (u64, u64, u64);
type Time = (u64, u64, u64);

fn split_time(ms: u64) -> (Date, Time, u64) {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    (
        roster_registry::clock::civil(days),
        (rest / 3600, rest % 3600 / 60, rest % 60),
        ms % 1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            created_at_ms: 1_796_212_621_123,
            created_at: rfc3339(1_796_212_621_123),
            node_id: 2,
            roster_version: "0.1.0".into(),
            last_applied_index: 42,
            last_applied_term: 3,
            members: BTreeMap::from([(2, "127.0.0.1:7848".into())]),
            counts: StateCounts {
                users: 1,
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_file_reads_back_as_written() {
        let bytes = encode(&meta(), b"state bytes");
        let file = decode(&bytes).expect("decode");
        assert_eq!(file.version, VERSION);
        assert_eq!(file.meta, meta());
        assert_eq!(file.state, b"state bytes");
        assert_eq!(file.checksum.len(), 64);
        assert_eq!(file.meta.created_at, "2026-12-02T11:57:01.123Z");
        assert_eq!(file_stamp(1_796_212_621_123), "20261202T115701.123Z");
    }

    #[test]
    fn cut_damaged_foreign_and_newer_files_are_refused_by_name() {
        let bytes = encode(&meta(), &[7u8; 1000]);
        for cut in [1, 5, 12, 30, bytes.len() - 1] {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(err, FormatError::Truncated { .. }),
                "cut at {cut}: {err}"
            );
            assert!(err.to_string().contains("truncated"), "{err}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode(&longer),
            Err(FormatError::WrongLength { .. })
        ));
        let mut flipped = bytes.clone();
        flipped[500] ^= 1;
        assert_eq!(decode(&flipped).unwrap_err(), FormatError::Checksum);
        assert_eq!(
            decode(b"{\"not\": \"ours\"}").unwrap_err(),
            FormatError::NotASnapshot
        );
        let mut newer = bytes.clone();
        newer[8..10].copy_from_slice(&(VERSION + 1).to_be_bytes());
        let err = decode(&newer).unwrap_err();
        assert_eq!(err, FormatError::NewerVersion(VERSION + 1));
        assert!(err.to_string().contains("newer roster"), "{err}");
    }
}
