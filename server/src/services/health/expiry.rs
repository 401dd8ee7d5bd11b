//! Beat expiry as a worker: every 250 ms this node sweeps the ephemeral instances it
//! owns (Distro's judgement) whose beats stopped — unhealthy first, then removed — under
//! the eviction guard, and counts what it did. The rule itself and the sweep are the
//! registry's (`roster_registry::expiry`, `sweep`); a change of live members rechecks
//! every service, since ownership moved. With `--empty-service-ttl-secs`, a second
//! worker removes services that stayed empty that long.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::services::cluster::members::Members;
use crate::services::distro::Distro;
use crate::services::metrics::Metrics;
use crate::services::workers::Workers;
use roster_registry::clock::now_ms;
use roster_registry::guard::EvictionGuard;
use roster_registry::Registry;

/// Time between sweeps.
const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// Time between sweeps of empty services.
const EMPTY_SWEEP_EVERY: Duration = Duration::from_secs(5);

/// What beat expiry tends and reads.
pub struct BeatExpiry {
    /// The instances swept.
    pub registry: Registry,
    /// Who owns which client: only the owner expires it.
    pub distro: Distro,
    /// Live members: a change moves ownership.
    pub members: Members,
    /// Holds mass removals.
    pub guard: Arc<EvictionGuard>,
    /// Counts what was made unhealthy, removed and held.
    pub metrics: Arc<Metrics>,
    /// How long a service may stay empty before it is removed; `None` keeps them.
    pub empty_service_ttl: Option<Duration>,
}

impl BeatExpiry {
    /// Starts the sweeps among `workers`.
    pub fn spawn_workers(self, workers: &mut Workers) {
        if let Some(ttl) = self.empty_service_ttl {
            workers.spawn(sweep_empty(
                self.registry.clone(),
                ttl.as_millis() as u64,
                workers.stopping(),
            ));
        }
        workers.spawn(Arc::new(self).run(workers.stopping()));
    }

    async fn run(self: Arc<Self>, mut stopping: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut live = self.members.live_ids();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => return,
            }
            let now_live = self.members.live_ids();
            if now_live != live {
                self.registry.recheck_all();
                live = now_live;
            }
            let now = now_ms();
            let sweeping = self.clone();
            let swept = tokio::task::spawn_blocking(move || {
                let owns = sweeping.distro.judgement();
                sweeping.registry.expire_due(now, &owns, &sweeping.guard)
            })
            .await;
            let report = match swept {
                Ok(report) => report,
                Err(e) => {
                    tracing::error!(error = %e, "beat expiry sweep failed");
                    continue;
                }
            };
            let metrics = &self.metrics;
            metrics.expired_unhealthy.inc_by(report.unhealthy as u64);
            metrics.expired_removed.inc_by(report.removed as u64);
            metrics.eviction_held.inc_by(report.held as u64);
            if report.unhealthy > 0 || report.removed > 0 {
                tracing::debug!(
                    unhealthy = report.unhealthy,
                    removed = report.removed,
                    "beat expiry"
                );
            }
            let guard = &self.guard;
            for ns in &report.engaged {
                tracing::warn!(namespace = %ns, share = guard.policy.share, min = guard.policy.min_count,
                    "eviction guard engaged: too many instances fell silent at once; keeping them (unhealthy) instead of removing them");
            }
            for ns in report.released.iter().chain(guard.release_idle(now).iter()) {
                tracing::info!(namespace = %ns, "eviction guard released");
            }
        }
    }
}

/// Removes services that stayed empty for `ttl_ms`.
async fn sweep_empty(registry: Registry, ttl_ms: u64, mut stopping: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EMPTY_SWEEP_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        for key in registry.sweep_empty(ttl_ms, now_ms()) {
            tracing::info!(service = %key, "removed empty service");
        }
    }
}
