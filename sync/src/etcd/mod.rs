//! etcd v3 as a source, through its JSON gateway, in three layouts (go-micro, go-kratos,
//! grpc-go naming; see [`layout`]).
//!
//! `list` ranges over the layout's key prefixes at one revision R and rebuilds the
//! source's own index of instances by key; `watch` keeps one watch stream open from
//! R + 1, applies each PUT/DELETE (lease expiry arrives as a DELETE) to that index and
//! returns the complete instance lists of the services touched. Compaction or any other
//! cancellation of the watch answers [`Update::Resync`].

mod gateway;
mod layout;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use self::gateway::{Event, Gateway, WatchMessage, WatchStream};
use self::layout::Layout;
use crate::keyed::Keyed;
use crate::{Filter, ServiceName, Snapshot, Source, SourceError, SourceUrl, Update};

/// How long `watch` waits for a change before answering "nothing yet".
const WATCH_WAIT: Duration = Duration::from_secs(25);
/// Lists retried at once when a compaction lands between the pages of one list.
const LIST_ATTEMPTS: usize = 3;

/// Reads services registered in etcd (`etcd://host:2379[,host...]?layout=&prefix=`).
pub struct EtcdSource {
    gateway: Gateway,
    layout: Layout,
    /// The key prefixes read and watched (never one inside another).
    prefixes: Vec<String>,
    filter: Filter,
    /// What the last list and the watch since then have read.
    keyed: Keyed,
    /// The revision the watch starts at; `None` until a list succeeded.
    watch_from: Option<i64>,
    /// The open watch stream, kept across `watch` calls.
    stream: Option<WatchStream>,
}

impl EtcdSource {
    /// A source for `url`, reading the services `filter` admits. Connects lazily.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        let (layout, prefixes) = Layout::from_url(url, filter)?;
        let credentials = match (url.param("username"), url.param("password")) {
            (Some(user), password) => Some((user.to_string(), password.unwrap_or("").to_string())),
            (None, Some(_)) => {
                return Err(SourceError::Config(
                    "etcd:// has a password but no username".into(),
                ))
            }
            (None, None) => None,
        };
        Ok(Self {
            gateway: Gateway::new(url.hosts.clone(), credentials)?,
            layout,
            prefixes,
            filter: filter.clone(),
            keyed: Keyed::default(),
            watch_from: None,
            stream: None,
        })
    }

    /// Reads every prefix at one revision; `Ok(None)` if that revision was compacted
    /// before all pages were read.
    async fn read_all(&mut self) -> Result<Option<(i64, Keyed)>, SourceError> {
        let mut keyed = Keyed::default();
        let mut revision = None;
        for prefix in self.prefixes.clone() {
            let Some((rev, kvs)) = self.gateway.range_prefix(&prefix, revision).await? else {
                return Ok(None);
            };
            revision = Some(rev);
            for kv in kvs {
                keyed.put(&kv.key, self.decode(&kv.key, &kv.value));
            }
        }
        Ok(revision.map(|r| (r, keyed)))
    }

    /// What `key` holding `value` contributes; nothing (with a warning) if unreadable.
    fn decode(&self, key: &str, value: &[u8]) -> crate::keyed::Entries {
        self.layout
            .decode(key, value, &self.filter)
            .unwrap_or_else(|e| {
                warn!(key, error = %e, "ignoring an unreadable etcd value");
                Vec::new()
            })
    }

    /// Applies one watched change; returns the services it touched.
    fn apply(&mut self, event: Event) -> BTreeSet<ServiceName> {
        match event {
            Event::Put(kv) => {
                let entries = self.decode(&kv.key, &kv.value);
                self.keyed.put(&kv.key, entries)
            }
            Event::Delete(key) => self.keyed.remove(&key),
        }
    }

    /// Forgets the watch: the next `watch` answers Resync until `list` runs again.
    fn reset(&mut self) {
        self.stream = None;
        self.watch_from = None;
    }
}

#[async_trait::async_trait]
impl Source for EtcdSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        self.reset();
        for attempt in 1..=LIST_ATTEMPTS {
            match self.read_all().await? {
                Some((revision, keyed)) => {
                    debug!(revision, keys = ?self.prefixes, "listed etcd");
                    self.keyed = keyed;
                    self.watch_from = Some(revision + 1);
                    return Ok(Snapshot {
                        services: self.keyed.snapshot(),
                        partial: false,
                        configs: None,
                    });
                }
                None => debug!(attempt, "etcd compacted the listed revision, listing again"),
            }
        }
        Err(SourceError::Unreachable(format!(
            "etcd compacted its history {LIST_ATTEMPTS} times while we listed it"
        )))
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        let Some(start) = self.watch_from else {
            return Ok(Update::Resync);
        };
        let deadline = Instant::now() + WATCH_WAIT;
        if self.stream.is_none() {
            self.stream = Some(self.gateway.watch(&self.prefixes, start).await?);
        }
        let mut touched = BTreeSet::new();
        loop {
            // Once something changed, take only what has already arrived.
            let wait_until = if touched.is_empty() {
                deadline
            } else {
                Instant::now()
            };
            let Some(stream) = self.stream.as_mut() else {
                return Ok(Update::Resync);
            };
            let message = match stream.next(wait_until).await {
                Ok(Some(message)) => message,
                Ok(None) => return Ok(Update::Services(self.keyed.services(touched))),
                Err(e) => {
                    self.reset();
                    return Err(e);
                }
            };
            match message {
                WatchMessage::Events(events) => {
                    for event in events {
                        touched.extend(self.apply(event));
                    }
                }
                WatchMessage::Canceled(reason) => {
                    warn!(%reason, "etcd canceled the watch; listing again");
                    self.reset();
                    return Ok(Update::Resync);
                }
                WatchMessage::Quiet => {}
            }
        }
    }
}
