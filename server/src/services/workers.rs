//! The node's background work: [`Workers`] holds the tasks each component starts for
//! itself (`spawn_workers` on Distro, push, the event streams, the audit trail, health
//! checks, the store's watchers, the faces' servers) and the signal that stops them.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// The node's background tasks, and the signal they stop on.
pub struct Workers {
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
    stopping: watch::Receiver<bool>,
}

impl Default for Workers {
    fn default() -> Self {
        let (stop, stopping) = watch::channel(false);
        Self {
            tasks: JoinSet::new(),
            stop,
            stopping,
        }
    }
}

impl Workers {
    /// Runs `task` until it returns; it should return once [`Workers::stopping`] turns
    /// true.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
    }

    /// The signal every task watches: true once the node stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.clone()
    }

    /// Tells every task to stop and waits up to `within` for them; a task still running
    /// then (a client holding a connection open) is aborted: it does not get to hold the
    /// node up.
    pub async fn stop(mut self, within: Duration) {
        self.stop.send_replace(true);
        let drained = tokio::time::timeout(within, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "some workers did not stop within {} s; aborting them",
                within.as_secs()
            );
            self.tasks.abort_all();
        }
    }
}
