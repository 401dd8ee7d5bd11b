//! The leader's history pruner. A write prunes the history it touches (`history::record`),
//! so the versions of items nobody writes any more (removed ones above all) would
//! outlive the retention; once an hour the leader proposes
//! `CommandV1::PruneConfigHistory`, and only when something is due, so an idle store
//! adds nothing to the log.

use std::time::Duration;

use tokio::sync::watch;

use super::writes::prune_history;
use super::{Configs, Retention};
use crate::services::store::Store;
use crate::services::workers::Workers;
use roster_registry::clock::now_ms;

/// How often the leader looks. Retention is counted in days: an hour late is on time.
pub const EVERY: Duration = Duration::from_secs(3600);

/// Prunes `configs`' history to `retention` through Raft every [`EVERY`] while this
/// Starts the pruning among `workers`.
pub fn spawn_workers(
    store: &Store,
    configs: &Configs,
    retention: Retention,
    workers: &mut Workers,
) {
    workers.spawn(run(
        store.clone(),
        configs.clone(),
        retention,
        workers.stopping(),
    ));
}

/// node leads, until `stopping`.
pub async fn run(
    store: Store,
    configs: Configs,
    retention: Retention,
    mut stopping: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        let at_ms = now_ms();
        if !store.is_leader() || !configs.history_due(retention, at_ms) {
            continue;
        }
        match prune_history(&store, retention, at_ms).await {
            Ok(()) => tracing::info!("configuration history pruned to its retention"),
            // The next round tries again (a new leader's, if this one lost office).
            Err(e) => tracing::warn!(error = %e, "pruning configuration history failed"),
        }
    }
}
