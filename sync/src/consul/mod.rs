//! Consul as a source, through its HTTP API v1.
//!
//! `list` reads `/v1/catalog/services`, then `/v1/health/service/<name>` for every
//! admitted service (never the built-in `consul` service, never entries of another kind
//! such as `connect-proxy`). `watch` runs blocking queries (`index` + `wait`) as
//! background tasks feeding one channel: one on the service list, which starts and stops
//! the others, and one per service. Each task reports only when its mapped answer really
//! changed, since a blocking query may return without a change. The tasks end on the next
//! `list` and when the source is dropped.
//!
//! Mapping: address `Service.Address`, else `Node.Address`; weight `Weights.Passing`, or
//! `Weights.Warning` while a check warns; unhealthy when a check is critical; disabled
//! under node or service maintenance; metadata `Service.Meta` plus `k=v` tags plus
//! `consul.*` keys; source id `Node/ServiceID`; cluster `DEFAULT`. An answer Consul
//! filtered by ACL (`X-Consul-Results-Filtered-By-ACLs: true`) makes the snapshot partial.
//!
//! URL: `consul://host:8500[,host:8500]?dc=dc1&ns=team&token=secret`.
//!
//! Files: `api` makes the HTTP calls and holds Consul's blocking-index rules, `watch`
//! runs the blocking queries behind `watch`, `entry` maps health entries onto
//! [`SourceInstance`](crate::SourceInstance)s.

mod api;
mod entry;
mod watch;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::{timeout_at, Instant};

use self::api::{next_index, Api};
use self::entry::map_entries;
use self::watch::{Flow, Watch};
use crate::rest::fetch_all;
use crate::{Filter, ServiceName, Services, Snapshot, Source, SourceError, SourceUrl, Update};

/// How long `watch` waits before answering "nothing changed".
const IDLE: Duration = Duration::from_secs(30);
/// Health reads in flight at once during `list`.
const CONCURRENCY: usize = 16;
/// Consul's own service, never imported.
const BUILTIN_SERVICE: &str = "consul";

/// Reads a Consul datacenter.
pub struct ConsulSource {
    api: Api,
    filter: Filter,
    /// The blocking queries started by the last `list`; `None` before it and after a
    /// watch failed.
    watch: Option<Watch>,
}

impl ConsulSource {
    /// A source for `url` (`dc`, `ns` and `token` parameters), reading the services
    /// `filter` admits. Connects on the first `list`.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        Ok(Self {
            api: Api::new(url)?,
            filter: filter.clone(),
            watch: None,
        })
    }
}

#[async_trait::async_trait]
impl Source for ConsulSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        // Stop the old blocking queries first: their answers belong to the old state.
        self.watch = None;
        let catalog = self.api.services(0).await?;
        let names = admitted(&self.filter, catalog.body);
        let api = self.api.clone();
        let answers = fetch_all(names.iter().cloned().collect(), CONCURRENCY, move |name| {
            let api = api.clone();
            async move { api.health(&name, 0).await }
        })
        .await?;
        let mut snapshot = Snapshot {
            partial: catalog.partial,
            ..Snapshot::default()
        };
        let mut watched = Vec::new();
        for (name, answer) in answers {
            snapshot.partial |= answer.partial;
            let mapped = map_entries(&answer.body);
            let reported = (!mapped.proxy_only).then(|| {
                snapshot
                    .services
                    .insert(ServiceName::plain(&name), mapped.instances.clone());
                mapped.instances
            });
            watched.push((name, next_index(0, answer.index), reported));
        }
        let catalog_index = next_index(0, catalog.index);
        self.watch = Some(Watch::start(
            self.api.clone(),
            self.filter.clone(),
            (catalog_index, names),
            watched,
        ));
        Ok(snapshot)
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        let deadline = Instant::now() + IDLE;
        let mut changes = Services::new();
        loop {
            let Some(watch) = self.watch.as_mut() else {
                return Ok(Update::Resync);
            };
            let first = match timeout_at(deadline, watch.events.recv()).await {
                Err(_) => return Ok(Update::Services(changes)),
                // Unreachable while `watch` holds a sender; list again to be safe.
                Ok(None) => return Ok(Update::Resync),
                Ok(Some(event)) => event,
            };
            // Take whatever else is queued, so a burst comes back as one update.
            let mut batch = vec![first];
            while let Ok(event) = watch.events.try_recv() {
                batch.push(event);
            }
            for event in batch {
                match watch.apply(event, &mut changes) {
                    Ok(Flow::Continue) => {}
                    Ok(Flow::Resync) => {
                        self.watch = None;
                        return Ok(Update::Resync);
                    }
                    Err(e) => {
                        self.watch = None;
                        return Err(e);
                    }
                }
            }
            if !changes.is_empty() {
                return Ok(Update::Services(changes));
            }
        }
    }
}

/// The names among `names` that are imported: admitted by `filter`, not Consul's own.
fn admitted(filter: &Filter, names: BTreeSet<String>) -> BTreeSet<String> {
    names
        .into_iter()
        .filter(|n| n != BUILTIN_SERVICE && filter.admits(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;

    /// The catalog example of the reference (§2.2).
    const SERVICES: &str = r#"{
      "consul": [],
      "order-service": ["secure=false", "v1"],
      "payment-service": []
    }"#;

    #[test]
    fn catalog_example_skips_consul_itself() {
        let map: BTreeMap<String, Value> = serde_json::from_str(SERVICES).unwrap();
        let names = admitted(&Filter::all(), map.into_keys().collect());
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            vec!["order-service", "payment-service"]
        );
        let only_pay = Filter::parse(Some("pay*")).unwrap();
        let map: BTreeMap<String, Value> = serde_json::from_str(SERVICES).unwrap();
        assert_eq!(admitted(&only_pay, map.into_keys().collect()).len(), 1);
    }
}
