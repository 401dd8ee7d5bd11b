//! Scheduled backups (`--snapshot-every`, `--snapshot-dir`, `--snapshot-keep`): a named
//! worker that writes a snapshot file of this node's state every period, named for the
//! time and the node (`roster-<UTC time>-node<ID>.rsnap`, which sorts by time), and
//! deletes this node's oldest beyond the newest `keep`. Each node writes its own, from
//! its own applied state (no leader needed); a failure is logged and the next period
//! tries again, it never stops the node.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use super::format::{file_stamp, EXTENSION};
use super::BackupError;
use crate::services::cluster::readiness::Readiness;
use crate::services::store::Store;
use crate::services::workers::Workers;
use roster_registry::clock::now_ms;

/// When and where to write scheduled snapshots.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The period.
    pub every: Duration,
    /// The directory (created if missing).
    pub dir: PathBuf,
    /// How many of this node's snapshots to keep.
    pub keep: usize,
}

impl Schedule {
    /// Starts the schedule among `workers`: snapshots of `store`, taken while `ready`.
    pub fn spawn_workers(self, store: Store, ready: Readiness, workers: &mut Workers) {
        workers.spawn(self.run(store, ready, workers.stopping()));
    }

    /// Runs until `stopping` turns true: one snapshot per period, the first one period
    /// after start, skipped while the node is not ready (its state is not complete yet).
    async fn run(self, store: Store, ready: Readiness, mut stopping: watch::Receiver<bool>) {
        tracing::info!(every = ?self.every, dir = %self.dir.display(), keep = self.keep, "scheduled snapshots on");
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = stopping.wait_for(|stop| *stop) => return,
            }
            if !ready.is_ready() {
                tracing::info!("scheduled snapshot skipped: the node is not ready");
                continue;
            }
            let store = store.clone();
            let schedule = self.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let node_id = store.id();
                take(&schedule, &store.export(), node_id, now_ms())
            })
            .await;
            match outcome {
                Ok(Ok((path, pruned))) => {
                    tracing::info!(file = %path.display(), pruned, "scheduled snapshot written")
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "scheduled snapshot failed"),
                Err(e) => tracing::warn!(error = %e, "scheduled snapshot task failed"),
            }
        }
    }
}

/// The file name of a snapshot taken at `ms` on node `node_id`.
pub fn file_name(ms: u64, node_id: u64) -> String {
    format!("roster-{}-node{node_id}.{EXTENSION}", file_stamp(ms))
}

/// Whether `name` is the name of a scheduled snapshot of node `node_id`.
fn is_own(name: &str, node_id: u64) -> bool {
    name.starts_with("roster-") && name.ends_with(&format!("-node{node_id}.{EXTENSION}"))
}

/// Writes one snapshot of `export` into the schedule's directory and prunes; answers
/// the file written and how many old ones were deleted.
fn take(
    schedule: &Schedule,
    export: &roster_raft::StateExport,
    node_id: u64,
    now: u64,
) -> Result<(PathBuf, usize), BackupError> {
    let bytes = super::encode_export(export, node_id, now)?;
    std::fs::create_dir_all(&schedule.dir).map_err(|source| BackupError::Io {
        path: schedule.dir.clone(),
        source,
    })?;
    let path = schedule.dir.join(file_name(now, node_id));
    super::write_durably(&path, &bytes)?;
    let pruned = prune(&schedule.dir, node_id, schedule.keep)?;
    Ok((path, pruned))
}

/// Deletes node `node_id`'s scheduled snapshots in `dir` but the newest `keep`; other
/// files (another node's, the operator's) are left alone. Answers how many went.
fn prune(dir: &Path, node_id: u64, keep: usize) -> Result<usize, BackupError> {
    let io = |source| BackupError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut own: Vec<String> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| is_own(name, node_id))
        .collect();
    // The names start with a fixed-width UTC time: sorted by name is sorted by age.
    own.sort();
    let excess = own.len().saturating_sub(keep);
    for name in &own[..excess] {
        std::fs::remove_file(dir.join(name)).map_err(io)?;
    }
    Ok(excess)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_this_nodes_newest_and_nothing_else_goes() {
        let dir = tempfile::tempdir().unwrap();
        let base = 1_796_212_621_000;
        for i in 0..5 {
            std::fs::write(dir.path().join(file_name(base + i * 1000, 1)), b"x").unwrap();
        }
        std::fs::write(dir.path().join(file_name(base, 2)), b"x").unwrap();
        std::fs::write(dir.path().join("mine.rsnap"), b"x").unwrap();
        assert_eq!(prune(dir.path(), 1, 2).unwrap(), 3);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![
                "mine.rsnap".to_string(),
                file_name(base, 2),
                file_name(base + 3000, 1),
                file_name(base + 4000, 1),
            ]
        );
    }
}
