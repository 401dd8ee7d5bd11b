//! The durable Raft log: entries, vote and committed id in one redb database file.
//!
//! Every append, truncation, purge and vote is a redb write transaction committed with
//! `Durability::Immediate` (fsync) before openraft is told it happened, so an entry that
//! the leader acknowledged to a client survives `kill -9`. The committed log id is a hint
//! only (openraft re-derives it) and is written without its own fsync.
//!
//! openraft stops at the first storage error, so errors that pass (a full disk, no memory,
//! no descriptors: [`crate::retry`]) are retried for up to a minute. After an I/O error
//! redb refuses every transaction until the database is closed and opened again, so a
//! retry first reopens it (redb repairs it on open if the failed commit left it so).
//! Every write here can be repeated: entries and records are put by key, ranges removed.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError, Vote};
use redb::{
    Database, Durability, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::retry;
use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

/// Log entries by index, each an rmp-serde encoded `Entry`.
const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("logs");
/// Small records: `vote`, `committed`, `last_purged`.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_LAST_PURGED: &str = "last_purged";

/// How long a log operation retries transient errors before it fails (and Raft stops).
/// Longer would hold a leader that cannot write its log in place, and with it every write
/// of the cluster; once it stops, another node can lead.
const PATIENCE: Duration = Duration::from_secs(60);

/// Why one attempt at a log operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    #[error("{0}")]
    Db(#[from] redb::Error),
    #[error("undecodable log record: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    #[error("unencodable log record: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("log task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl LogError {
    /// Whether trying again (after a reopen, see [`Db::get`]) may succeed.
    fn transient(&self) -> bool {
        match self {
            Self::Db(redb::Error::Io(e)) => retry::is_transient(e),
            // Reopening ends both: the first once the failed handle is gone, the second
            // once the handle that failed is closed.
            Self::Db(redb::Error::PreviousIo | redb::Error::DatabaseAlreadyOpen) => true,
            _ => false,
        }
    }
}

/// Opens the database; called again after an I/O error.
type Opener = dyn Fn() -> Result<Database, redb::Error> + Send + Sync;

/// The open database, closed after an I/O error and opened again by the next user.
struct Db {
    open: Box<Opener>,
    /// `None` after a failure until the next [`Db::get`]. Users clone the `Arc` out and
    /// never hold the lock across a transaction.
    current: RwLock<Option<Arc<Database>>>,
}

impl Db {
    /// The open database, opening it first if a failure closed it.
    fn get(&self) -> Result<Arc<Database>, redb::Error> {
        if let Some(db) = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Ok(db.clone());
        }
        let mut slot = self.current.write().unwrap_or_else(|p| p.into_inner());
        if let Some(db) = slot.as_ref() {
            return Ok(db.clone());
        }
        // Fails with `DatabaseAlreadyOpen` while a reader still holds the failed handle
        // (its file lock): transient, the next attempt finds it gone.
        let db = Arc::new((self.open)()?);
        tracing::info!("raft log database reopened");
        *slot = Some(db.clone());
        Ok(db)
    }

    /// Runs `op` on the database; after an I/O error, closes it for the next attempt.
    fn run<T>(&self, op: impl FnOnce(&Database) -> Result<T, LogError>) -> Result<T, LogError> {
        let db = self.get()?;
        let result = op(&db);
        if let Err(LogError::Db(redb::Error::Io(_) | redb::Error::PreviousIo)) = &result {
            let mut slot = self.current.write().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_some_and(|d| Arc::ptr_eq(d, &db)) {
                *slot = None;
            }
        }
        result
    }
}

/// A Raft log stored in a redb file. Cheap to clone: clones share the database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
}

impl LogStore {
    /// Opens (or creates) the log database at `path`.
    pub fn open(path: &Path) -> Result<Self, redb::Error> {
        let path: PathBuf = path.to_path_buf();
        Self::open_with(Box::new(move || Ok(Database::create(&path)?)))
    }

    /// Opens the database `open` returns (again after each I/O error).
    fn open_with(open: Box<Opener>) -> Result<Self, redb::Error> {
        let db = open()?;
        let txn = db.begin_write()?;
        {
            // Create both tables up front so that readers never see them missing.
            txn.open_table(LOGS)?;
            txn.open_table(META)?;
        }
        txn.commit()?;
        Ok(Self {
            db: Arc::new(Db {
                open,
                current: RwLock::new(Some(Arc::new(db))),
            }),
        })
    }

    /// Runs a read, retrying transient errors (each attempt on the calling thread: reads
    /// are short and served from redb's cache).
    async fn read<T>(
        &self,
        what: &'static str,
        op: impl Fn(&ReadTransaction) -> Result<T, LogError>,
    ) -> Result<T, StorageError> {
        retry::with_patience(what, PATIENCE, LogError::transient, || {
            let result = self.db.run(|db| {
                let txn = db.begin_read().map_err(redb::Error::from)?;
                op(&txn)
            });
            std::future::ready(result)
        })
        .await
        .map_err(|e| StorageIOError::read_logs(&e).into())
    }

    async fn read_meta<T: DeserializeOwned>(
        &self,
        key: &'static str,
    ) -> Result<Option<T>, StorageError> {
        self.read("raft log read", move |txn| {
            let table = txn.open_table(META).map_err(redb::Error::from)?;
            match table.get(key).map_err(redb::Error::from)? {
                Some(bytes) => Ok(Some(rmp_serde::from_slice(bytes.value())?)),
                None => Ok(None),
            }
        })
        .await
    }

    /// Runs a write transaction on the blocking pool and commits it with `durability`,
    /// retrying transient errors.
    async fn write<F>(
        &self,
        what: &'static str,
        durability: Durability,
        f: F,
    ) -> Result<(), StorageError>
    where
        F: Fn(&WriteTransaction) -> Result<(), redb::Error> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        retry::with_patience(what, PATIENCE, LogError::transient, || {
            let (db, f) = (self.db.clone(), f.clone());
            async move {
                tokio::task::spawn_blocking(move || {
                    db.run(|db| {
                        let mut txn = db.begin_write().map_err(redb::Error::from)?;
                        txn.set_durability(durability);
                        f(&txn)?;
                        txn.commit().map_err(redb::Error::from)?;
                        Ok(())
                    })
                })
                .await?
            }
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn last_entry_id(&self) -> Result<Option<LogId>, StorageError> {
        self.read("raft log read", |txn| {
            let table = txn.open_table(LOGS).map_err(redb::Error::from)?;
            let last = match table.last().map_err(redb::Error::from)? {
                Some((_, bytes)) => {
                    let entry: Entry = rmp_serde::from_slice(bytes.value())?;
                    Some(entry.log_id)
                }
                None => None,
            };
            Ok(last)
        })
        .await
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StorageError> {
    rmp_serde::to_vec_named(value).map_err(|e| StorageIOError::write_logs(&e).into())
}

fn put_meta(txn: &WriteTransaction, key: &str, bytes: &[u8]) -> Result<(), redb::Error> {
    let mut table = txn.open_table(META)?;
    table.insert(key, bytes)?;
    Ok(())
}

/// Removes every entry whose index is in `range`.
fn remove_range(txn: &WriteTransaction, range: impl RangeBounds<u64>) -> Result<(), redb::Error> {
    let mut table = txn.open_table(LOGS)?;
    let (start, end) = (range.start_bound().cloned(), range.end_bound().cloned());
    table.retain_in::<u64, _>((start, end), |_, _| false)?;
    Ok(())
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        self.read("raft log read", move |txn| {
            let table = txn.open_table(LOGS).map_err(redb::Error::from)?;
            let mut entries = Vec::new();
            for item in table.range::<u64>(bounds).map_err(redb::Error::from)? {
                let (_, bytes) = item.map_err(redb::Error::from)?;
                entries.push(rmp_serde::from_slice(bytes.value())?);
            }
            Ok(entries)
        })
        .await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId> = self.read_meta(KEY_LAST_PURGED).await?;
        let last = self.last_entry_id().await?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let bytes = encode(vote)?;
        self.write("raft vote write", Durability::Immediate, move |txn| {
            put_meta(txn, KEY_VOTE, &bytes)
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.read_meta(KEY_VOTE).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // A hint for faster replay after restart; losing it only delays re-application
        // until the leader commits again, so it rides along with the next fsync.
        let bytes = encode(&committed)?;
        self.write("raft log write", Durability::None, move |txn| {
            put_meta(txn, KEY_COMMITTED, &bytes)
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self
            .read_meta::<Option<LogId>>(KEY_COMMITTED)
            .await?
            .flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let encoded = entries
            .into_iter()
            .map(|e| Ok((e.log_id.index, encode(&e)?)))
            .collect::<Result<Vec<_>, StorageError>>()?;
        let result = self
            .write("raft log append", Durability::Immediate, move |txn| {
                let mut table = txn.open_table(LOGS)?;
                for (index, bytes) in &encoded {
                    table.insert(*index, bytes.as_slice())?;
                }
                Ok(())
            })
            .await;
        // Tell openraft the entries are on disk only after the fsync returned.
        callback.log_io_completed(
            result
                .clone()
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        result
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.write("raft log truncate", Durability::Immediate, move |txn| {
            remove_range(txn, log_id.index..)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let bytes = encode(&log_id)?;
        self.write("raft log purge", Durability::Immediate, move |txn| {
            put_meta(txn, KEY_LAST_PURGED, &bytes)?;
            remove_range(txn, ..=log_id.index)
        })
        .await
    }
}

/// Everything a log database holds, read with the node stopped ([`crate::offline`]).
pub(crate) struct LogContents {
    /// The last vote saved.
    pub(crate) vote: Option<Vote<NodeId>>,
    /// The committed hint (written lazily: the true commit point may be later).
    pub(crate) committed: Option<LogId>,
    /// The last entry removed by compaction.
    pub(crate) last_purged: Option<LogId>,
    /// Every entry still in the log, in index order.
    pub(crate) entries: Vec<Entry>,
}

fn meta_of<T: DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<T>, LogError> {
    match table.get(key).map_err(redb::Error::from)? {
        Some(bytes) => Ok(Some(rmp_serde::from_slice(bytes.value())?)),
        None => Ok(None),
    }
}

/// Reads the whole log database at `path` (which must exist) without changing it.
pub(crate) fn read_offline(path: &Path) -> Result<LogContents, LogError> {
    let db = Database::open(path).map_err(redb::Error::from)?;
    let txn = db.begin_read().map_err(redb::Error::from)?;
    let meta = txn.open_table(META).map_err(redb::Error::from)?;
    let logs = txn.open_table(LOGS).map_err(redb::Error::from)?;
    let mut entries = Vec::new();
    for item in logs.iter().map_err(redb::Error::from)? {
        let (_, bytes) = item.map_err(redb::Error::from)?;
        entries.push(rmp_serde::from_slice(bytes.value())?);
    }
    Ok(LogContents {
        vote: meta_of(&meta, KEY_VOTE)?,
        committed: meta_of::<Option<LogId>>(&meta, KEY_COMMITTED)?.flatten(),
        last_purged: meta_of(&meta, KEY_LAST_PURGED)?,
        entries,
    })
}

/// Creates a log database at `path` (which must not exist) holding no entry, with
/// `vote` saved and everything up to `start` marked purged and committed: the log of a
/// node whose state is a snapshot at `start`. Fsynced before it returns.
pub(crate) fn create_offline(
    path: &Path,
    vote: &Vote<NodeId>,
    start: Option<LogId>,
) -> Result<(), LogError> {
    let vote_bytes = rmp_serde::to_vec_named(vote)?;
    let committed_bytes = rmp_serde::to_vec_named(&start)?;
    let db = Database::create(path).map_err(redb::Error::from)?;
    let mut txn = db.begin_write().map_err(redb::Error::from)?;
    txn.set_durability(Durability::Immediate);
    {
        txn.open_table(LOGS).map_err(redb::Error::from)?;
        put_meta(&txn, KEY_VOTE, &vote_bytes)?;
        put_meta(&txn, KEY_COMMITTED, &committed_bytes)?;
        if let Some(start) = start {
            put_meta(&txn, KEY_LAST_PURGED, &rmp_serde::to_vec_named(&start)?)?;
        }
    }
    txn.commit().map_err(redb::Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    use openraft::CommittedLeaderId;
    use redb::backends::InMemoryBackend;
    use redb::StorageBackend;

    /// An in-memory file whose syncs fail while `failures` is above zero, with ENFILE,
    /// as a full descriptor table would make them.
    #[derive(Debug)]
    struct Flaky {
        file: Arc<InMemoryBackend>,
        failures: Arc<AtomicU32>,
    }

    impl StorageBackend for Flaky {
        fn len(&self) -> Result<u64, std::io::Error> {
            self.file.len()
        }
        fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, std::io::Error> {
            self.file.read(offset, len)
        }
        fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
            self.file.set_len(len)
        }
        fn sync_data(&self, eventual: bool) -> Result<(), std::io::Error> {
            let failing = self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failing {
                return Err(std::io::Error::from_raw_os_error(23));
            }
            self.file.sync_data(eventual)
        }
        fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
            self.file.write(offset, data)
        }
    }

    #[tokio::test]
    async fn log_writes_outlast_transient_io_errors_by_reopening_the_database() {
        let file = Arc::new(InMemoryBackend::new());
        let failures = Arc::new(AtomicU32::new(0));
        let (f, n) = (file.clone(), failures.clone());
        let mut log = LogStore::open_with(Box::new(move || {
            let backend = Flaky {
                file: f.clone(),
                failures: n.clone(),
            };
            Ok(redb::Builder::new().create_with_backend(backend)?)
        }))
        .expect("open");
        log.save_vote(&Vote::new(1, 1)).await.expect("vote");

        // Three failed syncs: the first commit fails, redb refuses the database until it
        // is reopened, and the reopen (whose repair syncs) fails twice more.
        failures.store(3, Ordering::SeqCst);
        let first = LogId::new(CommittedLeaderId::new(1, 1), 1);
        log.truncate(first)
            .await
            .expect("truncate outlasts the errors");
        assert_eq!(failures.load(Ordering::SeqCst), 0);
        assert_eq!(log.read_vote().await.expect("read"), Some(Vote::new(1, 1)));

        failures.store(5, Ordering::SeqCst);
        log.save_vote(&Vote::new(2, 1))
            .await
            .expect("vote after errors");
        assert_eq!(log.read_vote().await.expect("read"), Some(Vote::new(2, 1)));
        let mut reader = log.get_log_reader().await;
        assert!(reader
            .try_get_log_entries(0..10)
            .await
            .expect("entries")
            .is_empty());
    }
}
