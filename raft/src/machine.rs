//! The application's state machine and the adapter that runs it under openraft.
//!
//! [`StateMachine`] is what an application implements: plain synchronous `apply`,
//! `snapshot` and `restore`. [`MachineStore`] adapts it to openraft: it decodes commands,
//! tracks the last applied log id and membership, and keeps the latest snapshot in one
//! file in the data dir (written to a temp file, fsynced, renamed), so a restart resumes
//! from snapshot + log.
//!
//! Writing that file opens descriptors, so it is where a node out of descriptors failed
//! first — and openraft stopped Raft, and the node, over it. Transient errors
//! ([`crate::retry`]) are retried for up to ten minutes instead: nothing waits on a
//! snapshot, and the log keeps every entry until one is written.

use std::fs;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::batch;
use crate::retry;
use crate::types::{Entry, LogId, NodeId, Payload, StorageError, StoredMembership, TypeConfig};

/// A deterministic state machine replicated by Raft.
///
/// `apply` must depend only on the machine's state and the command (take time from the
/// command, never from the clock), so every node reaches the same state.
pub trait StateMachine: Send + Sync + 'static {
    /// A replicated command. Encode it as a versioned enum so old logs stay readable.
    type Command: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// What applying a command returns to the proposer.
    type Response: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Applies one committed command.
    fn apply(&mut self, command: Self::Command) -> Self::Response;

    /// Serializes the whole state.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a snapshot made by [`StateMachine::snapshot`].
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;
}

/// What the snapshot file holds (also written by [`crate::offline`]).
#[derive(Serialize, Deserialize)]
pub(crate) struct SnapshotFile {
    pub(crate) meta: SnapshotMeta<NodeId, openraft::BasicNode>,
    #[serde(with = "serde_bytes")]
    pub(crate) data: Vec<u8>,
}

/// The state guarded by [`MachineStore::applied`].
pub(crate) struct Applied<S> {
    pub(crate) machine: S,
    pub(crate) last_applied: Option<LogId>,
    pub(crate) last_membership: StoredMembership,
}

/// The whole state of a machine at one point of the log, read under one lock: what a
/// backup holds.
#[derive(Clone, Debug)]
pub struct StateExport {
    /// The last log entry applied to it (`None`: nothing applied yet).
    pub last_applied: Option<LogId>,
    /// The membership in effect at that point: voters and every member's peer address.
    pub membership: StoredMembership,
    /// [`StateMachine::snapshot`] of the machine.
    pub data: Vec<u8>,
}

/// Runs a [`StateMachine`] for openraft. Cheap to clone; clones share the machine.
pub struct MachineStore<S> {
    /// The machine and its position in the log; held only for the duration of one apply
    /// batch or one snapshot serialization, never across an await.
    applied: Arc<Mutex<Applied<S>>>,
    /// The latest snapshot (metadata and bytes), as stored on disk.
    current: Arc<Mutex<Option<Arc<SnapshotFile>>>>,
    dir: PathBuf,
    /// Makes snapshot ids unique within this process.
    snapshot_seq: Arc<AtomicU64>,
}

impl<S> Clone for MachineStore<S> {
    fn clone(&self) -> Self {
        Self {
            applied: self.applied.clone(),
            current: self.current.clone(),
            dir: self.dir.clone(),
            snapshot_seq: self.snapshot_seq.clone(),
        }
    }
}

/// The snapshot file's name in the snapshot directory.
pub(crate) const SNAPSHOT_FILE: &str = "snapshot.bin";

/// How long writing a snapshot retries transient errors before it fails (and Raft stops).
const PATIENCE: Duration = Duration::from_secs(600);

impl<S: StateMachine> MachineStore<S> {
    /// Wraps `machine`, restoring it from the snapshot in `dir` if there is one.
    pub fn open(dir: &Path, mut machine: S) -> Result<Self, std::io::Error> {
        fs::create_dir_all(dir)?;
        let path = dir.join(SNAPSHOT_FILE);
        let mut applied_state = (None, StoredMembership::default());
        let current = match read_snapshot_file(dir)? {
            Some(file) => {
                machine.restore(&file.data).map_err(|e| {
                    std::io::Error::other(format!("restore {}: {e}", path.display()))
                })?;
                applied_state = (file.meta.last_log_id, file.meta.last_membership.clone());
                Some(Arc::new(file))
            }
            None => None,
        };
        Ok(Self {
            applied: Arc::new(Mutex::new(Applied {
                machine,
                last_applied: applied_state.0,
                last_membership: applied_state.1,
            })),
            current: Arc::new(Mutex::new(current)),
            dir: dir.to_path_buf(),
            snapshot_seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Writes `file` atomically (temp file, fsync, rename, fsync of the directory) on the
    /// blocking pool, retrying transient errors; each attempt starts the temp file afresh.
    async fn persist(&self, file: &SnapshotFile) -> Result<(), StorageError> {
        let bytes = Arc::new(rmp_serde::to_vec_named(file).map_err(snapshot_err)?);
        retry::with_patience("raft snapshot write", PATIENCE, retry::is_transient, || {
            let (dir, bytes) = (self.dir.clone(), bytes.clone());
            async move {
                tokio::task::spawn_blocking(move || write_snapshot_file(&dir, &bytes))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            }
        })
        .await
        .map_err(snapshot_err)
    }

    /// The machine's state with its position in the log, taken under the lock that
    /// applying holds: consistent, at exactly one applied index.
    pub fn export(&self) -> StateExport {
        let applied = self.lock();
        StateExport {
            last_applied: applied.last_applied,
            membership: applied.last_membership.clone(),
            data: applied.machine.snapshot(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Applied<S>> {
        // A panic while applying leaves the machine unusable either way; keep going with
        // the poisoned guard so the error surfaces where it happened, not here.
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads the snapshot file in `dir`, if there is one.
pub(crate) fn read_snapshot_file(dir: &Path) -> std::io::Result<Option<SnapshotFile>> {
    let path = dir.join(SNAPSHOT_FILE);
    match fs::read(&path) {
        Ok(bytes) => rmp_serde::from_slice(&bytes)
            .map(Some)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes the snapshot file in `dir` ([`write_durably`]).
pub(crate) fn write_snapshot_file(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_durably(&dir.join(SNAPSHOT_FILE), bytes)
}

/// Writes `bytes` to `path` durably: to `path.tmp` (removed if that fails), fsync,
/// rename, fsync of the directory. A crash leaves the old file or the new one, never
/// half of one.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::File::open(dir)?.sync_all()
}

/// Decodes one command. A command this build cannot decode was written by a newer
/// version: stop there rather than skip it and diverge from the other nodes.
fn decode_command<S: StateMachine>(
    log_id: LogId,
    bytes: &[u8],
) -> Result<S::Command, StorageError> {
    rmp_serde::from_slice(bytes).map_err(|e| {
        tracing::error!(index = log_id.index, error = %e, "unknown replicated command; stopping");
        StorageError::from(StorageIOError::apply(log_id, &e))
    })
}

fn encode_response<S: StateMachine>(
    log_id: LogId,
    response: &S::Response,
) -> Result<Vec<u8>, StorageError> {
    rmp_serde::to_vec_named(response)
        .map_err(|e| StorageError::from(StorageIOError::apply(log_id, &e)))
}

/// Decodes, applies and encodes the response of one command.
fn apply_one<S: StateMachine>(
    machine: &mut S,
    log_id: LogId,
    bytes: &[u8],
) -> Result<Vec<u8>, StorageError> {
    let command = decode_command::<S>(log_id, bytes)?;
    encode_response::<S>(log_id, &machine.apply(command))
}

/// Applies `entries` in order: commands to the machine, memberships to the recorded one;
/// answers one response per entry. Used by Raft and by offline recovery alike.
pub(crate) fn apply_entries<S: StateMachine>(
    applied: &mut Applied<S>,
    entries: impl IntoIterator<Item = Entry>,
) -> Result<Vec<Payload>, StorageError> {
    let mut responses = Vec::new();
    for entry in entries {
        let log_id = entry.log_id;
        let response = match entry.payload {
            EntryPayload::Blank => Payload::default(),
            EntryPayload::Membership(m) => {
                applied.last_membership = StoredMembership::new(Some(log_id), m);
                Payload::default()
            }
            EntryPayload::Normal(Payload(bytes)) => match batch::decode_batch(&bytes) {
                None => Payload(apply_one(&mut applied.machine, log_id, &bytes)?),
                Some(commands) => {
                    // Decode the whole batch before applying any of it, so that an
                    // entry this build cannot read stops Raft with nothing applied.
                    let commands = commands
                        .iter()
                        .map(|bytes| decode_command::<S>(log_id, bytes))
                        .collect::<Result<Vec<_>, _>>()?;
                    let responses = commands
                        .into_iter()
                        .map(|command| {
                            encode_response::<S>(log_id, &applied.machine.apply(command))
                                .map(ByteBuf::from)
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    batch::encode_batch(&responses).map_err(|e| {
                        StorageError::from(StorageIOError::apply(
                            log_id,
                            &std::io::Error::other(e.to_string()),
                        ))
                    })?
                }
            },
        };
        applied.last_applied = Some(log_id);
        responses.push(response);
    }
    Ok(responses)
}

fn snapshot_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl<S: StateMachine> RaftSnapshotBuilder<TypeConfig> for MachineStore<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let file = {
            let applied = self.lock();
            let seq = self.snapshot_seq.fetch_add(1, Ordering::Relaxed);
            let snapshot_id = match applied.last_applied {
                Some(id) => format!("{}-{}-{seq}", id.leader_id, id.index),
                None => format!("none-{seq}"),
            };
            SnapshotFile {
                meta: SnapshotMeta {
                    last_log_id: applied.last_applied,
                    last_membership: applied.last_membership.clone(),
                    snapshot_id,
                },
                data: applied.machine.snapshot(),
            }
        };
        self.persist(&file).await?;
        let snapshot = Snapshot {
            meta: file.meta.clone(),
            snapshot: Box::new(Cursor::new(file.data.clone())),
        };
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(file));
        Ok(snapshot)
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for MachineStore<S> {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = self.lock();
        Ok((applied.last_applied, applied.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Payload>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        apply_entries(&mut self.lock(), entries)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let file = SnapshotFile {
            meta: meta.clone(),
            data: snapshot.into_inner(),
        };
        {
            let mut applied = self.lock();
            applied.machine.restore(&file.data).map_err(|e| {
                StorageError::from(StorageIOError::read_snapshot(
                    Some(meta.signature()),
                    &std::io::Error::other(e),
                ))
            })?;
            applied.last_applied = meta.last_log_id;
            applied.last_membership = meta.last_membership.clone();
        }
        self.persist(&file).await?;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(file));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Ok(current.map(|file| Snapshot {
            meta: file.meta.clone(),
            snapshot: Box::new(Cursor::new(file.data.clone())),
        }))
    }
}
