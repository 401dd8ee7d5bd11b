//! Backups of all persistent state and the ways back from the worst days: [`format`] the
//! checksummed snapshot file (served to admins by `faces/http/snapshot.rs`), [`schedule`]
//! the worker that writes them on a timer ([`duration`] its period's parser), [`report`]
//! what the offline commands take and print, and here the offline operations on a stopped
//! node's data dir: [`restore`] a snapshot into an empty one, [`recover`] one whose
//! cluster lost its quorum for good. See `docs/snapshots.md`.
//!
//! Both offline operations leave a data dir whose node founds a cluster of one (its Raft
//! membership names only itself; `roster_raft::offline` says what the directory holds),
//! started as usual without `--members` and grown with `roster cluster add`.

pub mod duration;
pub mod format;
pub mod report;
pub mod schedule;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roster_raft::offline::{OfflineError, Recovery};
use roster_raft::types::log_id;
use roster_raft::{StateExport, StateMachine};

use crate::services::store::machine::{RegistryMachine, StateCounts};
use format::{FormatError, Meta, SnapshotFile};

/// The Raft directory inside a node's data dir (as `node::run` lays it out).
pub const RAFT_DIR: &str = "raft";

/// Why a backup, restore or recovery did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The file is not a usable snapshot.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: FormatError,
    },
    /// The snapshot's state cannot be restored by this build.
    #[error("the snapshot's state cannot be restored: {0}")]
    State(String),
    /// The node has applied nothing yet: there is nothing to back up.
    #[error("this node has applied nothing yet; retry once it has joined its cluster")]
    Empty,
    /// The target data dir is not empty.
    #[error("{0} is not empty: a restore writes only into an empty or new data dir")]
    NotEmpty(PathBuf),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The Raft directory could not be read or written.
    #[error(transparent)]
    Raft(#[from] OfflineError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Encodes `export`, taken on node `node_id` at `now_ms`, as a snapshot file.
pub fn encode_export(
    export: &StateExport,
    node_id: u64,
    now_ms: u64,
) -> Result<Vec<u8>, BackupError> {
    let at = export.last_applied.ok_or(BackupError::Empty)?;
    let counts = StateCounts::of(&export.data).map_err(BackupError::State)?;
    let meta = Meta {
        created_at_ms: now_ms,
        created_at: format::rfc3339(now_ms),
        node_id,
        roster_version: env!("CARGO_PKG_VERSION").into(),
        last_applied_index: at.index,
        last_applied_term: at.leader_id.term,
        members: export
            .membership
            .nodes()
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect(),
        counts,
    };
    Ok(format::encode(&meta, &export.data))
}

/// Reads and verifies the snapshot file at `path`, and checks that this build can
/// restore its state (by restoring it into a machine of its own).
pub fn read_file(path: &Path) -> Result<SnapshotFile, BackupError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let file = format::decode(&bytes).map_err(|source| BackupError::Format {
        path: path.to_path_buf(),
        source,
    })?;
    RegistryMachine::detached(crate::services::domains::APPLIERS)
        .restore(&file.state)
        .map_err(BackupError::State)?;
    Ok(file)
}

/// Writes `bytes` to `path` durably ([`roster_raft::machine::write_durably`]).
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    roster_raft::machine::write_durably(path, bytes).map_err(io_err(path))
}

/// What [`restore`] wrote.
#[derive(Clone, Debug)]
pub struct Restored {
    /// The snapshot's metadata.
    pub meta: Meta,
    /// The node id the data dir belongs to.
    pub node_id: u64,
    /// The peer address stored as the node's.
    pub peer: String,
}

/// Makes `data_dir` (absent or empty) the data dir of node `node_id`, reached by peers
/// at `peer`, founding a new cluster of one that holds the state of the snapshot file
/// at `file`, at the snapshot's log position.
pub fn restore(
    file: &Path,
    data_dir: &Path,
    node_id: u64,
    peer: &str,
) -> Result<Restored, BackupError> {
    let snapshot = read_file(file)?;
    check_empty(data_dir)?;
    create_private_dir(data_dir)?;
    let at = log_id(
        snapshot.meta.last_applied_term,
        snapshot.meta.last_applied_index,
    );
    roster_raft::offline::seed(&data_dir.join(RAFT_DIR), node_id, peer, at, snapshot.state)?;
    Ok(Restored {
        meta: snapshot.meta,
        node_id,
        peer: peer.to_string(),
    })
}

fn check_empty(dir: &Path) -> Result<(), BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(BackupError::NotEmpty(dir.to_path_buf())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(dir)(e)),
    }
}

/// Creates `dir` readable by this user only, as a node does its data dir.
fn create_private_dir(dir: &Path) -> Result<(), BackupError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err(dir))?;
    }
    Ok(())
}

/// What [`recover`] found and did.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// What the Raft directory held and where the state is now.
    pub recovery: Recovery,
    /// Where the old Raft directory went (`None` for a dry run).
    pub backup: Option<PathBuf>,
}

/// Recovers the stopped node `node_id` whose data dir is `data_dir` after its cluster
/// lost a quorum for good: applies every entry of its log on top of its snapshot and
/// makes the data dir that of a cluster of only this node at its last entry. The old
/// Raft directory is kept, renamed into `<data_dir>/pre-recover-<time>/`. With
/// `dry_run`, only reads and reports.
pub fn recover(
    data_dir: &Path,
    node_id: u64,
    peer: Option<&str>,
    dry_run: bool,
    now_ms: u64,
) -> Result<Recovered, BackupError> {
    let raft = data_dir.join(RAFT_DIR);
    let machine = RegistryMachine::detached(crate::services::domains::APPLIERS);
    if dry_run {
        let recovery = roster_raft::offline::recover(&raft, None, node_id, peer, machine)?;
        return Ok(Recovered {
            recovery,
            backup: None,
        });
    }
    // Build the new directory beside the old one, which stays untouched until the new
    // one is complete: a failure anywhere leaves the data dir as it was.
    let staging = data_dir.join("raft.recovering");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err(&staging))?;
    }
    let recovery =
        match roster_raft::offline::recover(&raft, Some(&staging), node_id, peer, machine) {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(e.into());
            }
        };
    let backup = data_dir.join(format!("pre-recover-{}", format::file_stamp(now_ms)));
    std::fs::create_dir(&backup).map_err(io_err(&backup))?;
    std::fs::rename(&raft, backup.join(RAFT_DIR)).map_err(io_err(&raft))?;
    std::fs::rename(&staging, &raft).map_err(io_err(&staging))?;
    std::fs::File::open(data_dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(data_dir))?;
    Ok(Recovered {
        recovery,
        backup: Some(backup),
    })
}

/// `1=host:port,2=...`, or `none`.
pub fn describe_members(members: &BTreeMap<u64, String>) -> String {
    roster_raft::offline::describe(members)
}
