//! The node's broadcast of changes, for streams that follow them (the console's event
//! stream, `faces::http::events`). One worker drains the registry's [`ChangeSet`] (service
//! changes) and the store's [`CatalogChanges`] (namespaces, users and sync tasks,
//! recorded when the Raft state machine applies them — on every node), lets changes
//! gather for [`COALESCE`] and broadcasts them; each stream filters what it receives.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::services::store::catalog::{CatalogChange, CatalogChanges};
use crate::services::workers::Workers;
use roster_registry::changes::ChangeSet;
use roster_registry::service::ServiceKey;

/// How long changes gather before they are sent.
const COALESCE: Duration = Duration::from_millis(100);
/// Events a slow stream may fall behind by before it is told to resync.
const BACKLOG: usize = 1024;

/// One broadcast change.
#[derive(Clone)]
pub enum Change {
    /// A service, its settings or its instances.
    Service(Arc<ServiceKey>),
    /// A namespace, the users, a sync task, or everything (a snapshot was loaded).
    Catalog(Arc<CatalogChange>),
}

/// The broadcast of changes, and the signal that ends every stream.
#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Change>,
    closing: watch::Receiver<bool>,
}

impl Events {
    /// Streams end when `closing` turns true.
    pub fn new(closing: watch::Receiver<bool>) -> Self {
        let (tx, _) = broadcast::channel(BACKLOG);
        Self { tx, closing }
    }

    /// A receiver of every change broadcast from now on. One that falls more than
    /// [`BACKLOG`] changes behind is told it lagged (then refetch everything).
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    /// Turns true when the node starts shutting down: streams end then.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.clone()
    }

    /// Starts the broadcast among `workers`.
    pub fn spawn_workers(
        &self,
        services: Arc<ChangeSet>,
        catalog: Arc<CatalogChanges>,
        workers: &mut Workers,
    ) {
        workers.spawn(self.clone().run(services, catalog, workers.stopping()));
    }

    /// The worker: broadcasts every change `services` and `catalog` see until
    /// `stopping`.
    pub async fn run(
        self,
        services: Arc<ChangeSet>,
        catalog: Arc<CatalogChanges>,
        mut stopping: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = services.changed() => {}
                _ = catalog.changed() => {}
                _ = stopping.changed() => return,
            }
            tokio::time::sleep(COALESCE).await;
            // Drained even with nobody listening, so that the sets stay small.
            let catalog_changes = catalog.drain();
            let service_changes = services.drain();
            if self.tx.receiver_count() == 0 {
                continue;
            }
            // Catalog first: a page that shows a new namespace's services finds it.
            // A stream that closed meanwhile is fine.
            for change in catalog_changes {
                let _ = self.tx.send(Change::Catalog(Arc::new(change)));
            }
            for key in service_changes {
                let _ = self.tx.send(Change::Service(Arc::new(key)));
            }
        }
    }
}
