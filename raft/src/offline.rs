//! A node's directory edited while the node is stopped: [`seed`] makes it the directory
//! of a new cluster of one holding a given state (restoring a backup), [`recover`] turns
//! the directory of a cluster that lost its quorum for good into one (every entry its
//! log holds applied).
//!
//! Both leave what openraft reads at start for a node that compacted its whole log into
//! a snapshot: the snapshot file with the state, its log id and a membership naming only
//! this node; a log with no entry, marked purged and committed up to that log id; and a
//! vote in that log id's term, not committed. The node starts as a follower of a cluster
//! of one, elects itself in the next term (one above every entry it holds, so its first
//! entry sorts after them), and never runs `initialize`: its log is not empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use openraft::{BasicNode, Membership, SnapshotMeta, Vote};

use crate::log_store::{self, LogContents};
use crate::machine::{self, Applied, SnapshotFile, StateMachine};
use crate::node::{LOG_FILE, SNAPSHOT_DIR};
use crate::types::{Entry, LogId, NodeId, StoredMembership};

/// Why a directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The directory already holds Raft data, which would be overwritten.
    #[error("{0} already holds raft data; give an empty directory")]
    NotEmpty(PathBuf),
    /// The directory holds no Raft data.
    #[error("{0} holds no raft data (no {LOG_FILE} and no snapshot)")]
    NoData(PathBuf),
    /// Reading or writing failed.
    #[error("{path}: {message}")]
    Io {
        /// The file in question.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The data cannot be used: undecodable, not contiguous, or refused by the machine.
    #[error("{0}")]
    Invalid(String),
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> OfflineError {
    OfflineError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Whether `dir` holds a Raft log or snapshot.
pub fn holds_data(dir: &Path) -> bool {
    dir.join(LOG_FILE).exists() || dir.join(SNAPSHOT_DIR).join(machine::SNAPSHOT_FILE).exists()
}

/// Makes `dir` (created if missing; it must hold no Raft data) the directory of node
/// `node_id`, reachable by peers at `peer_addr`, founding a cluster of one whose state
/// is `data` (a [`StateMachine::snapshot`]) as of log entry `at`.
pub fn seed(
    dir: &Path,
    node_id: NodeId,
    peer_addr: &str,
    at: LogId,
    data: Vec<u8>,
) -> Result<(), OfflineError> {
    seed_with_vote(dir, node_id, peer_addr, at, at.leader_id.term, data)
}

/// [`seed`], with the vote's term: at least `at`'s, higher when the node had voted in a
/// later term (a term must never go back).
fn seed_with_vote(
    dir: &Path,
    node_id: NodeId,
    peer_addr: &str,
    at: LogId,
    term: u64,
    data: Vec<u8>,
) -> Result<(), OfflineError> {
    if holds_data(dir) {
        return Err(OfflineError::NotEmpty(dir.to_path_buf()));
    }
    let snapshot_dir = dir.join(SNAPSHOT_DIR);
    std::fs::create_dir_all(&snapshot_dir).map_err(|e| io_err(&snapshot_dir, e))?;
    let membership = Membership::new(
        vec![BTreeSet::from([node_id])],
        BTreeMap::from([(node_id, BasicNode::new(peer_addr))]),
    );
    let file = SnapshotFile {
        meta: SnapshotMeta {
            last_log_id: Some(at),
            last_membership: StoredMembership::new(Some(at), membership),
            snapshot_id: format!("seeded-{}-{}", at.leader_id.term, at.index),
        },
        data,
    };
    let bytes = rmp_serde::to_vec_named(&file).map_err(|e| io_err(&snapshot_dir, e))?;
    // The snapshot first: a directory with a snapshot and no log is refused again by
    // `holds_data`, and the node would not start on it without the log's vote.
    machine::write_snapshot_file(&snapshot_dir, &bytes).map_err(|e| io_err(&snapshot_dir, e))?;
    let log = dir.join(LOG_FILE);
    log_store::create_offline(
        &log,
        &Vote::new(term.max(at.leader_id.term), node_id),
        Some(at),
    )
    .map_err(|e| io_err(&log, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

/// What [`recover`] found and did.
#[derive(Clone, Debug)]
pub struct Recovery {
    /// Where the stored snapshot was.
    pub snapshot: Option<LogId>,
    /// The log's committed hint: entries up to it were known committed. It is written
    /// lazily, so entries after it may have been committed too.
    pub committed_hint: Option<LogId>,
    /// Where the state is now: every entry of the log applied (the log's last entry,
    /// or the snapshot's with an empty log).
    pub last_applied: Option<LogId>,
    /// Entries applied on top of the snapshot.
    pub applied_entries: u64,
    /// Of those, entries after the committed hint: perhaps never committed by the lost
    /// cluster, perhaps committed and not yet known here.
    pub beyond_hint: u64,
    /// The membership the log ended with (id → peer address).
    pub previous_members: BTreeMap<NodeId, String>,
    /// The peer address the node keeps.
    pub peer_addr: String,
}

/// Reads the directory `from` of node `node_id` (not changed), applies every entry of its
/// log on top of its snapshot into `machine`, and unless `to` is `None`, [`seed`]s `to`
/// with the result: a cluster of only this node, at its last entry. The node keeps its
/// address in the old membership unless `peer_addr` gives another.
pub fn recover<S: StateMachine>(
    from: &Path,
    to: Option<&Path>,
    node_id: NodeId,
    peer_addr: Option<&str>,
    mut machine: S,
) -> Result<Recovery, OfflineError> {
    if !holds_data(from) {
        return Err(OfflineError::NoData(from.to_path_buf()));
    }
    let snapshot_dir = from.join(SNAPSHOT_DIR);
    let snapshot =
        machine::read_snapshot_file(&snapshot_dir).map_err(|e| io_err(&snapshot_dir, e))?;
    let log_path = from.join(LOG_FILE);
    let log = match log_path.exists() {
        true => log_store::read_offline(&log_path).map_err(|e| match e {
            log_store::LogError::Db(redb::Error::DatabaseAlreadyOpen) => {
                io_err(&log_path, "in use by another process: stop the node first")
            }
            other => io_err(&log_path, other),
        })?,
        false => LogContents {
            vote: None,
            committed: None,
            last_purged: None,
            entries: Vec::new(),
        },
    };
    let mut applied = match &snapshot {
        Some(file) => {
            machine
                .restore(&file.data)
                .map_err(|e| OfflineError::Invalid(format!("the stored snapshot: {e}")))?;
            Applied {
                machine,
                last_applied: file.meta.last_log_id,
                last_membership: file.meta.last_membership.clone(),
            }
        }
        None => Applied {
            machine,
            last_applied: None,
            last_membership: StoredMembership::default(),
        },
    };
    let snapshot_at = applied.last_applied;
    let entries = entries_after(log.entries, snapshot_at, log.last_purged)?;
    let applied_entries = entries.len() as u64;
    let beyond_hint = entries
        .iter()
        .filter(|e| Some(e.log_id) > log.committed)
        .count() as u64;
    machine::apply_entries(&mut applied, entries)
        .map_err(|e| OfflineError::Invalid(format!("applying the log: {e}")))?;
    let previous_members: BTreeMap<NodeId, String> = applied
        .last_membership
        .nodes()
        .map(|(id, node)| (*id, node.addr.clone()))
        .collect();
    let peer_addr = match peer_addr {
        Some(addr) => addr.to_string(),
        None => previous_members.get(&node_id).cloned().ok_or_else(|| {
            OfflineError::Invalid(format!(
                "node {node_id} is not in the stored membership ({}); check the node id, or give its peer address with --peer",
                describe(&previous_members)
            ))
        })?,
    };
    let report = Recovery {
        snapshot: snapshot_at,
        committed_hint: log.committed,
        last_applied: applied.last_applied,
        applied_entries,
        beyond_hint,
        previous_members,
        peer_addr,
    };
    if let Some(to) = to {
        let at = report
            .last_applied
            .ok_or_else(|| OfflineError::Invalid("the log holds nothing to recover".into()))?;
        let voted = log.vote.map(|v| v.leader_id.term).unwrap_or(0);
        let data = applied.machine.snapshot();
        seed_with_vote(to, node_id, &report.peer_addr, at, voted, data)?;
    }
    Ok(report)
}

/// The entries after the snapshot at `snapshot`, checked to follow on from it without a
/// gap (a gap would mean a damaged log: applying past it would corrupt the state).
fn entries_after(
    entries: Vec<Entry>,
    snapshot: Option<LogId>,
    last_purged: Option<LogId>,
) -> Result<Vec<Entry>, OfflineError> {
    let after: Vec<_> = entries
        .into_iter()
        .filter(|e| snapshot.is_none_or(|s| e.log_id.index > s.index))
        .collect();
    if let (None, Some(purged)) = (snapshot, last_purged) {
        return Err(OfflineError::Invalid(format!(
            "the log was compacted up to entry {} but there is no snapshot to hold those entries",
            purged.index
        )));
    }
    let base = snapshot;
    let mut expected = base.map(|l| l.index + 1).unwrap_or(0);
    if let (None, Some(first)) = (base, after.first()) {
        // A log never compacted starts at its first entry (openraft's is index 0).
        expected = first.log_id.index;
    }
    for entry in &after {
        if entry.log_id.index != expected {
            return Err(OfflineError::Invalid(format!(
                "the log has a gap: entry {} follows {}",
                entry.log_id.index,
                expected.saturating_sub(1)
            )));
        }
        expected += 1;
    }
    Ok(after)
}

/// `1=host:port,2=...`, or `none`.
pub fn describe(members: &BTreeMap<NodeId, String>) -> String {
    if members.is_empty() {
        return "none".into();
    }
    members
        .iter()
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect::<Vec<_>>()
        .join(",")
}
