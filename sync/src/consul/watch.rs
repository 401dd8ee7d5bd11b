//! The blocking queries behind `watch`: one background task on the service list, which
//! starts and stops the others, and one per admitted service, all feeding one channel
//! that [`Watch::apply`] folds into changes. Each task paces itself with a token
//! [`Bucket`] and reports only when its mapped answer really changed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::admitted;
use super::api::{next_index, Api};
use super::entry::map_entries;
use crate::{Filter, ServiceName, Services, SourceError, SourceInstance};

/// Watch events queued before the watch tasks wait for `watch` to take them.
const EVENT_QUEUE: usize = 1024;
/// Each blocking-query loop runs on a token bucket: this many back-to-back queries...
const LOOP_BURST: f64 = 2.0;
/// ...then one more per this interval, so a server that answers at once (index reset,
/// a flapping service) does not make the loop spin.
const LOOP_REFILL: Duration = Duration::from_secs(1);

/// What a watch task reports.
#[derive(Debug)]
pub(super) enum Event {
    /// The admitted service names changed.
    Catalog {
        names: BTreeSet<String>,
        partial: bool,
    },
    /// A service's instances changed.
    Instances {
        service: String,
        instances: Vec<SourceInstance>,
        partial: bool,
    },
    /// A blocking query failed; the task has stopped.
    Failed(SourceError),
}

/// What `watch` does after an event.
pub(super) enum Flow {
    Continue,
    /// The change cannot be reported as complete lists: list again.
    Resync,
}

/// The running blocking queries. Dropping it stops them.
pub(super) struct Watch {
    api: Api,
    filter: Filter,
    /// What the tasks report, taken by `watch`.
    pub(super) events: mpsc::Receiver<Event>,
    /// Handed to each new task.
    sender: mpsc::Sender<Event>,
    catalog: JoinHandle<()>,
    /// One task per admitted service.
    services: BTreeMap<String, JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.catalog.abort();
        for task in self.services.values() {
            task.abort();
        }
    }
}

/// A service to watch: name, index to block on, what was last reported (`None`: not
/// reported yet).
type Watched = (String, u64, Option<Vec<SourceInstance>>);

impl Watch {
    /// Starts the catalog query at `catalog` (index and known names) and one query per
    /// `services` entry.
    pub(super) fn start(
        api: Api,
        filter: Filter,
        catalog: (u64, BTreeSet<String>),
        services: Vec<Watched>,
    ) -> Self {
        let (sender, events) = mpsc::channel(EVENT_QUEUE);
        let catalog = tokio::spawn(watch_catalog(
            api.clone(),
            filter.clone(),
            catalog,
            sender.clone(),
        ));
        let mut watch = Self {
            api,
            filter,
            events,
            sender,
            catalog,
            services: BTreeMap::new(),
        };
        for service in services {
            watch.start_service(service);
        }
        watch
    }

    fn start_service(&mut self, (name, index, last): Watched) {
        let task = tokio::spawn(watch_service(
            self.api.clone(),
            name.clone(),
            index,
            last,
            self.sender.clone(),
        ));
        if let Some(old) = self.services.insert(name, task) {
            old.abort();
        }
    }

    /// Folds `event` into `changes`.
    pub(super) fn apply(
        &mut self,
        event: Event,
        changes: &mut Services,
    ) -> Result<Flow, SourceError> {
        match event {
            Event::Failed(e) => Err(e),
            Event::Catalog { partial: true, .. } | Event::Instances { partial: true, .. } => {
                // A name or instance missing from a filtered answer may be hidden, not
                // gone: only a (partial) list can say what to keep.
                Ok(Flow::Resync)
            }
            Event::Catalog { names, .. } => {
                let gone: Vec<String> = self
                    .services
                    .keys()
                    .filter(|n| !names.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    if let Some(task) = self.services.remove(&name) {
                        task.abort();
                    }
                    changes.insert(ServiceName::plain(name), Vec::new());
                }
                for name in names {
                    if !self.services.contains_key(&name) && self.filter.admits(&name) {
                        // Index 0: the first answer comes at once and is reported.
                        self.start_service((name, 0, None));
                    }
                }
                Ok(Flow::Continue)
            }
            Event::Instances {
                service, instances, ..
            } => {
                // An answer of a task stopped since is stale.
                if self.services.contains_key(&service) {
                    changes.insert(ServiceName::plain(service), instances);
                }
                Ok(Flow::Continue)
            }
        }
    }
}

/// Blocks on the service list; reports when the admitted names change.
async fn watch_catalog(
    api: Api,
    filter: Filter,
    (mut index, mut last): (u64, BTreeSet<String>),
    events: mpsc::Sender<Event>,
) {
    let mut bucket = Bucket::new(Instant::now());
    loop {
        sleep(bucket.take(Instant::now())).await;
        let answer = match api.services(index).await {
            Ok(a) => a,
            Err(e) => {
                let _ = events.send(Event::Failed(e)).await;
                return;
            }
        };
        index = next_index(index, answer.index);
        let names = admitted(&filter, answer.body);
        if names == last {
            continue;
        }
        last = names.clone();
        let event = Event::Catalog {
            names,
            partial: answer.partial,
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// Blocks on one service's health; reports when its mapped instances change.
async fn watch_service(
    api: Api,
    service: String,
    mut index: u64,
    mut last: Option<Vec<SourceInstance>>,
    events: mpsc::Sender<Event>,
) {
    let mut bucket = Bucket::new(Instant::now());
    loop {
        sleep(bucket.take(Instant::now())).await;
        let answer = match api.health(&service, index).await {
            Ok(a) => a,
            Err(e) => {
                let _ = events.send(Event::Failed(e)).await;
                return;
            }
        };
        index = next_index(index, answer.index);
        let mapped = map_entries(&answer.body);
        let changed = match &last {
            // A service of proxies only is not reported until it has plain instances.
            None => !mapped.proxy_only,
            Some(previous) => *previous != mapped.instances,
        };
        if !changed {
            continue;
        }
        last = Some(mapped.instances.clone());
        let event = Event::Instances {
            service: service.clone(),
            instances: mapped.instances,
            partial: answer.partial,
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
}

/// A token bucket for one blocking-query loop ([`LOOP_BURST`], [`LOOP_REFILL`]). Tokens
/// may go negative: that is a debt the caller sleeps off.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(now: Instant) -> Self {
        Self {
            tokens: LOOP_BURST,
            at: now,
        }
    }

    /// Takes a token at `now`; returns how long to wait before using it.
    fn take(&mut self, now: Instant) -> Duration {
        let earned =
            now.saturating_duration_since(self.at).as_secs_f64() / LOOP_REFILL.as_secs_f64();
        self.tokens = (self.tokens + earned).min(LOOP_BURST) - 1.0;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            LOOP_REFILL.mul_f64(-self.tokens)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SourceUrl;

    #[test]
    fn bucket_allows_a_burst_then_one_per_refill() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), Duration::ZERO);
        assert_eq!(b.take(t0), LOOP_REFILL);
        // After sleeping that off, the next one waits a full interval again.
        assert_eq!(b.take(t0 + LOOP_REFILL), LOOP_REFILL);
        // A quiet spell refills the burst, no further.
        let later = t0 + LOOP_REFILL * 10;
        assert_eq!(b.take(later), Duration::ZERO);
        assert_eq!(b.take(later), Duration::ZERO);
        assert!(b.take(later) > Duration::ZERO);
    }

    #[test]
    fn watch_events_fold_into_changes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let url: SourceUrl = "consul://127.0.0.1:1".parse().unwrap();
            let api = Api::new(&url).unwrap();
            let mut watch = Watch::start(
                api,
                Filter::all(),
                (1, BTreeSet::from(["a".to_string()])),
                vec![("a".into(), 1, Some(Vec::new()))],
            );
            let mut changes = Services::new();
            // Service `a` vanished from the catalog: reported empty.
            let flow = watch.apply(
                Event::Catalog {
                    names: BTreeSet::new(),
                    partial: false,
                },
                &mut changes,
            );
            assert!(matches!(flow, Ok(Flow::Continue)));
            assert_eq!(changes.get(&ServiceName::plain("a")), Some(&Vec::new()));
            // A late answer of its stopped task is ignored.
            changes.clear();
            let late = Event::Instances {
                service: "a".into(),
                instances: Vec::new(),
                partial: false,
            };
            assert!(matches!(
                watch.apply(late, &mut changes),
                Ok(Flow::Continue)
            ));
            assert!(changes.is_empty());
            // A filtered answer means: list again.
            let filtered = Event::Catalog {
                names: BTreeSet::new(),
                partial: true,
            };
            assert!(matches!(
                watch.apply(filtered, &mut changes),
                Ok(Flow::Resync)
            ));
        });
    }
}
