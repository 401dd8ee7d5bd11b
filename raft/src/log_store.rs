//! The durable Raft log: entries, vote and committed id in one redb database file.
//!
//! Every append, truncation, purge and vote is a redb write transaction committed with
//! `Durability::Immediate` (fsync) before openraft is told it happened, so an entry that
//! the leader acknowledged to a client survives `kill -9`. The committed log id is a hint
//! only (openraft re-derives it) and is written without its own fsync.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError, Vote};
use redb::{Database, Durability, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::{Entry, LogId, NodeId, StorageError, TypeConfig};

/// Log entries by index, each an rmp-serde encoded `Entry`.
const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("logs");
/// Small records: `vote`, `committed`, `last_purged`.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_LAST_PURGED: &str = "last_purged";

/// A Raft log stored in a redb file. Cheap to clone: clones share the database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    /// Opens (or creates) the log database at `path`.
    pub fn open(path: &Path) -> Result<Self, redb::Error> {
        let db = Database::create(path)?;
        let txn = db.begin_write()?;
        {
            // Create both tables up front so that readers never see them missing.
            txn.open_table(LOGS)?;
            txn.open_table(META)?;
        }
        txn.commit()?;
        Ok(Self { db: Arc::new(db) })
    }

    fn read_meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StorageError> {
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = txn.open_table(META).map_err(read_err)?;
        match table.get(key).map_err(read_err)? {
            Some(bytes) => Ok(Some(
                rmp_serde::from_slice(bytes.value()).map_err(read_err)?,
            )),
            None => Ok(None),
        }
    }

    /// Runs a write transaction on the blocking pool and commits it with `durability`.
    async fn write<F>(&self, durability: Durability, f: F) -> Result<(), StorageError>
    where
        F: FnOnce(&redb::WriteTransaction) -> Result<(), StorageError> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || {
            let mut txn = db.begin_write().map_err(write_err)?;
            txn.set_durability(durability);
            f(&txn)?;
            txn.commit().map_err(write_err)
        })
        .await
        .map_err(write_err)?
    }

    fn last_entry_id(&self) -> Result<Option<LogId>, StorageError> {
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = txn.open_table(LOGS).map_err(read_err)?;
        let last = match table.last().map_err(read_err)? {
            Some((_, bytes)) => {
                let entry: Entry = rmp_serde::from_slice(bytes.value()).map_err(read_err)?;
                Some(entry.log_id)
            }
            None => None,
        };
        Ok(last)
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StorageError> {
    rmp_serde::to_vec_named(value).map_err(write_err)
}

fn put_meta<T: Serialize>(
    txn: &redb::WriteTransaction,
    key: &str,
    value: &T,
) -> Result<(), StorageError> {
    let bytes = encode(value)?;
    let mut table = txn.open_table(META).map_err(write_err)?;
    table.insert(key, bytes.as_slice()).map_err(write_err)?;
    Ok(())
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(&e).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

/// Removes every entry whose index is in `range`.
fn remove_range(
    txn: &redb::WriteTransaction,
    range: impl RangeBounds<u64>,
) -> Result<(), StorageError> {
    let mut table = txn.open_table(LOGS).map_err(write_err)?;
    let (start, end) = (range.start_bound().cloned(), range.end_bound().cloned());
    table
        .retain_in::<u64, _>((start, end), |_, _| false)
        .map_err(write_err)?;
    Ok(())
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let txn = self.db.begin_read().map_err(read_err)?;
        let table = txn.open_table(LOGS).map_err(read_err)?;
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        let mut entries = Vec::new();
        for item in table.range::<u64>(bounds).map_err(read_err)? {
            let (_, bytes) = item.map_err(read_err)?;
            entries.push(rmp_serde::from_slice(bytes.value()).map_err(read_err)?);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId> = self.read_meta(KEY_LAST_PURGED)?;
        let last = self.last_entry_id()?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let vote = *vote;
        self.write(Durability::Immediate, move |txn| {
            put_meta(txn, KEY_VOTE, &vote)
        })
        .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        self.read_meta(KEY_VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // A hint for faster replay after restart; losing it only delays re-application
        // until the leader commits again, so it rides along with the next fsync.
        self.write(Durability::None, move |txn| {
            put_meta(txn, KEY_COMMITTED, &committed)
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.read_meta::<Option<LogId>>(KEY_COMMITTED)?.flatten())
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
            .write(Durability::Immediate, move |txn| {
                let mut table = txn.open_table(LOGS).map_err(write_err)?;
                for (index, bytes) in &encoded {
                    table.insert(*index, bytes.as_slice()).map_err(write_err)?;
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
        self.write(Durability::Immediate, move |txn| {
            remove_range(txn, log_id.index..)
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.write(Durability::Immediate, move |txn| {
            put_meta(txn, KEY_LAST_PURGED, &log_id)?;
            remove_range(txn, ..=log_id.index)
        })
        .await
    }
}
