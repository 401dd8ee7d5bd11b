//! Runs one sync task: list, then watch; debounce bursts per service; reconcile the
//! source's state against the instances the task owns; hold deletions back when the
//! source errors or too much of a service vanishes at once; report status.
//!
//! The source is read by a pump task that never sees the sink, so a slow write never
//! stalls a watch, and a source error never reaches a write: the runner only ever acts
//! on complete lists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::time::{sleep, sleep_until, timeout_at, Instant};

use crate::{
    is_copy, ConfigTarget, ConfigTargetKey, DryRunReport, Filter, Owned, ServiceName, Services,
    Sink, Snapshot, Source, SourceConfig, SourceError, SourceUrl, Target, TargetKey, TaskSpec,
    TaskState, TaskStatus, Update, SOURCE_CLUSTER_ID_KEY, SOURCE_INSTANCE_ID_KEY, SYNC_SOURCE_KEY,
    TASK_KEY,
};

/// How long changes to a service are gathered before they are applied.
const DEBOUNCE: Duration = Duration::from_millis(200);
/// Writes per sink call.
const BATCH: usize = 500;
/// Configuration items per sink call.
const CONFIG_BATCH: usize = 50;
/// A status that has not changed is still reported this often (its times move on).
const REPORT_EVERY: Duration = Duration::from_secs(30);
/// Longest wait between attempts to read a failing source.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Namespace used when neither the task nor the source names one.
pub const DEFAULT_NAMESPACE: &str = "public";
/// Group used when neither the task nor the source names one.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

/// A service in roster: namespace, group, name.
type TargetService = (String, String, String);

/// What the pump tells the runner.
enum Event {
    /// The whole source.
    Full(Snapshot),
    /// Some services' complete lists.
    Changes(Services),
    /// Every configuration item, changed since the last report.
    Configs(Vec<SourceConfig>),
    /// The source could not be read.
    Failed(SourceError),
}

/// Runs `spec` until the future is dropped (the supervisor aborts it when this node
/// stops being the leader, or the task is paused or deleted). `node` is reported as the
/// runner.
pub async fn run(spec: TaskSpec, sink: Arc<dyn Sink>, node: Option<u64>) {
    run_with(spec, sink, node, Box::new(crate::open)).await
}

/// Opens a source; [`run`] uses [`crate::open`], tests a scripted source.
pub type Opener =
    Box<dyn Fn(&SourceUrl, &Filter) -> Result<Box<dyn Source>, SourceError> + Send + Sync>;

/// [`run`] with the given way of opening the source.
pub async fn run_with(spec: TaskSpec, sink: Arc<dyn Sink>, node: Option<u64>, opener: Opener) {
    let parsed = spec
        .source
        .parse::<SourceUrl>()
        .and_then(|url| Filter::parse(spec.services.as_deref()).map(|f| (url, f)));
    let (url, filter) = match parsed {
        Ok(p) => p,
        Err(message) => {
            // The spec was validated when stored; this only happens if a newer build
            // stopped accepting it. Report and idle.
            let status = TaskStatus {
                state: TaskState::Error,
                last_error: Some(message),
                runner: node,
                ..TaskStatus::default()
            };
            let _ = sink.report(&spec.name, &status).await;
            std::future::pending::<()>().await;
            return;
        }
    };
    Runner::new(spec, sink, node, url, filter).run(opener).await;
}

struct Runner {
    spec: TaskSpec,
    url: SourceUrl,
    filter: Filter,
    sink: Arc<dyn Sink>,
    status: TaskStatus,
    /// The last status written, and when.
    reported: Option<(TaskStatus, Instant)>,
    /// Services whose deletions are held, since when (ms).
    holds: HashMap<TargetService, u64>,
    /// Deletions of instances held by the last service pass, and why.
    service_holds: (usize, Vec<String>),
    /// Deletions of configuration items held by the last config pass, and why.
    config_holds: (usize, Vec<String>),
    /// Since when configuration deletions are held (ms).
    config_hold_since: Option<u64>,
    cluster_id: String,
}

impl Runner {
    fn new(
        spec: TaskSpec,
        sink: Arc<dyn Sink>,
        node: Option<u64>,
        url: SourceUrl,
        filter: Filter,
    ) -> Self {
        Self {
            cluster_id: url.cluster_id(),
            status: TaskStatus {
                state: TaskState::Starting,
                runner: node,
                ..TaskStatus::default()
            },
            spec,
            url,
            filter,
            sink,
            reported: None,
            holds: HashMap::new(),
            service_holds: (0, Vec::new()),
            config_holds: (0, Vec::new()),
            config_hold_since: None,
        }
    }

    async fn run(&mut self, opener: Opener) {
        self.report().await;
        let (tx, mut rx) = mpsc::channel(64);
        let pump = tokio::spawn(pump(
            opener,
            self.url.clone(),
            self.filter.clone(),
            Duration::from_secs(self.spec.reconcile_secs.max(1)),
            tx,
        ));
        let _pump = AbortOnDrop(pump);
        let mut pending = Services::new();
        let mut deadline: Option<Instant> = None;
        loop {
            let event = tokio::select! {
                e = rx.recv() => match e {
                    Some(e) => e,
                    None => return,
                },
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    deadline = None;
                    let changes = std::mem::take(&mut pending);
                    self.reconcile(&changes, false, false).await;
                    continue;
                }
                _ = sleep(REPORT_EVERY) => {
                    self.report().await;
                    continue;
                }
            };
            match event {
                Event::Full(snapshot) => {
                    pending.clear();
                    deadline = None;
                    self.status.services = snapshot
                        .services
                        .keys()
                        .filter(|s| self.filter.admits(&s.name))
                        .count();
                    self.reconcile(&snapshot.services, true, snapshot.partial)
                        .await;
                    if let Some(configs) = snapshot.configs {
                        self.reconcile_configs(configs).await;
                    }
                }
                Event::Configs(configs) => self.reconcile_configs(configs).await,
                Event::Changes(changes) => {
                    pending.extend(changes);
                    deadline.get_or_insert_with(|| Instant::now() + DEBOUNCE);
                }
                Event::Failed(error) => {
                    tracing::warn!(task = %self.spec.name, %error, "sync source failed");
                    self.status.state = TaskState::Error;
                    self.status.last_error = Some(error.to_string());
                    self.status.hold_reasons =
                        vec!["source error: nothing is deleted until it answers".into()];
                    self.report().await;
                }
            }
        }
    }

    /// Maps source services onto roster services and instances, dropping what the
    /// filter excludes and copies made by syncers.
    fn desired(&self, services: &Services) -> (BTreeMap<TargetService, Vec<Target>>, usize) {
        let mut out: BTreeMap<TargetService, Vec<Target>> = BTreeMap::new();
        let mut copies = 0;
        for (name, instances) in services {
            if !self.filter.admits(&name.name) {
                continue;
            }
            let key = self.target_service(name);
            let list = out.entry(key.clone()).or_default();
            let mut seen = BTreeSet::new();
            for inst in instances {
                if is_copy(&inst.metadata) {
                    copies += 1;
                    continue;
                }
                if inst.ip.is_empty()
                    || inst.port == 0
                    || !seen.insert((inst.ip.clone(), inst.port))
                {
                    continue;
                }
                let mut instance = inst.clone();
                instance.weight = if instance.weight.is_finite() {
                    instance.weight.clamp(0.0, 10_000.0)
                } else {
                    1.0
                };
                if instance.cluster.is_empty() {
                    instance.cluster = "DEFAULT".into();
                }
                let m = &mut instance.metadata;
                m.insert(SYNC_SOURCE_KEY.into(), self.url.kind.sync_source().into());
                m.insert(SOURCE_CLUSTER_ID_KEY.into(), self.cluster_id.clone());
                m.insert(TASK_KEY.into(), self.spec.name.clone());
                m.insert(SOURCE_INSTANCE_ID_KEY.into(), inst.source_id.clone());
                list.push(Target {
                    namespace: key.0.clone(),
                    group: key.1.clone(),
                    service: key.2.clone(),
                    instance,
                });
            }
        }
        (out, copies)
    }

    fn target_service(&self, name: &ServiceName) -> TargetService {
        let pick = |task: &Option<String>, source: &Option<String>, default: &str| {
            task.clone()
                .or_else(|| source.clone())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        (
            pick(&self.spec.namespace, &name.namespace, DEFAULT_NAMESPACE),
            pick(&self.spec.group, &name.group, DEFAULT_GROUP),
            name.name.clone(),
        )
    }

    /// Brings the owned instances of the services in `services` (of every service, when
    /// `full`) to the source's state.
    async fn reconcile(&mut self, services: &Services, full: bool, partial: bool) {
        let (desired, copies) = self.desired(services);
        let owned = match self.sink.owned(&self.spec.name).await {
            Ok(o) => o,
            Err(e) => {
                self.write_failed(e.to_string()).await;
                return;
            }
        };
        let mut owned_by: BTreeMap<TargetService, BTreeMap<(String, u16), Owned>> = BTreeMap::new();
        for o in owned {
            let t = &o.target;
            owned_by
                .entry((t.namespace.clone(), t.group.clone(), t.service.clone()))
                .or_default()
                .insert((t.instance.ip.clone(), t.instance.port), o);
        }
        // The services this pass decides: those reported, and on a full pass also those
        // that vanished from the source.
        let mut scope: BTreeSet<TargetService> = desired.keys().cloned().collect();
        if full {
            scope.extend(owned_by.keys().cloned());
        }
        let now = now_ms();
        let mut upserts = Vec::new();
        let mut removals = Vec::new();
        let mut held = 0;
        let mut reasons = Vec::new();
        let mut report = DryRunReport::default();
        let empty = BTreeMap::new();
        for svc in &scope {
            let want = desired.get(svc).map(Vec::as_slice).unwrap_or(&[]);
            let have = owned_by.get(svc).unwrap_or(&empty);
            let mut wanted = BTreeSet::new();
            for t in want {
                let addr = (t.instance.ip.clone(), t.instance.port);
                match have.get(&addr) {
                    None => {
                        report.would_add += 1;
                        upserts.push(t.clone());
                    }
                    Some(o) if differs(o, t) => {
                        report.would_update += 1;
                        upserts.push(t.clone());
                    }
                    Some(_) => {}
                }
                if report.sample.len() < 100 {
                    report.sample.push(format!(
                        "{}/{}/{} {}:{}",
                        svc.0, svc.1, svc.2, t.instance.ip, t.instance.port
                    ));
                }
                wanted.insert(addr);
            }
            let gone: Vec<TargetKey> = have
                .iter()
                .filter(|(addr, _)| !wanted.contains(*addr))
                .map(|(_, o)| o.target.key())
                .collect();
            if gone.is_empty() {
                self.holds.remove(svc);
                continue;
            }
            if partial {
                held += gone.len();
                reasons.push(format!(
                    "{}: source answer incomplete (ACL-filtered)",
                    svc.2
                ));
                continue;
            }
            let share = gone.len() as f64 / have.len() as f64;
            if gone.len() >= self.spec.hold_min.max(1) && share >= self.spec.hold_share {
                let since = *self.holds.entry(svc.clone()).or_insert(now);
                let expired = now.saturating_sub(since) >= self.spec.hold_secs * 1000;
                if !expired {
                    held += gone.len();
                    reasons.push(format!(
                        "{}: {} of {} instances vanished at once",
                        svc.2,
                        gone.len(),
                        have.len()
                    ));
                    continue;
                }
            }
            self.holds.remove(svc);
            report.would_remove += gone.len();
            removals.extend(gone);
        }
        let owned_total: usize = owned_by.values().map(BTreeMap::len).sum();
        self.status.copies_ignored = copies;
        self.service_holds = (held, reasons);
        self.set_holds();
        if self.spec.dry_run {
            self.status.instances = owned_total + report.would_add - report.would_remove;
            self.status.dry_run = Some(report);
        } else {
            let changed = !upserts.is_empty() || !removals.is_empty();
            let added = report.would_add;
            let removed = removals.len();
            match self.apply(upserts, removals).await {
                Ok(skipped) => {
                    self.status.skipped = skipped;
                    self.status.instances = (owned_total + added).saturating_sub(removed + skipped);
                    if changed {
                        self.status.last_change_ms = Some(now);
                    }
                }
                Err(e) => {
                    self.write_failed(e).await;
                    return;
                }
            }
        }
        self.succeeded();
        if full {
            self.status.last_sync_ms = Some(now_ms());
        }
        self.report().await;
    }

    /// The held deletions of both passes (instances and configuration items) in the
    /// status.
    fn set_holds(&mut self) {
        let (services, configs) = (&self.service_holds, &self.config_holds);
        self.status.held_deletions = services.0 + configs.0;
        self.status.hold_reasons = services.1.iter().chain(&configs.1).cloned().collect();
    }

    /// After a pass that wrote what it decided: running, or holding deletions back.
    fn succeeded(&mut self) {
        self.status.last_error = None;
        self.set_holds();
        self.status.state = if self.status.held_deletions > 0 {
            TaskState::Holding
        } else {
            TaskState::Running
        };
    }

    /// Brings the configuration items the task owns to the source's: `configs` is every
    /// item the source has. Items held by roster itself (published through its API)
    /// are left alone and counted as skipped; a mass vanishing is held back like
    /// instances' (`hold_share`, `hold_min`, `hold_secs`).
    async fn reconcile_configs(&mut self, configs: Vec<SourceConfig>) {
        let desired: BTreeMap<ConfigTargetKey, ConfigTarget> = configs
            .into_iter()
            .map(|c| {
                let namespace = self
                    .spec
                    .namespace
                    .clone()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(c.namespace);
                let key = ConfigTargetKey {
                    namespace,
                    group: c.group,
                    data_id: c.data_id,
                };
                let target = ConfigTarget {
                    key: key.clone(),
                    content: c.content,
                    r#type: c.r#type,
                    app_name: c.app_name,
                };
                (key, target)
            })
            .collect();
        let owned = match self.sink.owned_configs(&self.spec.name).await {
            Ok(o) => o,
            Err(e) => {
                self.write_failed(e.to_string()).await;
                return;
            }
        };
        let owned: BTreeMap<ConfigTargetKey, ConfigTarget> =
            owned.into_iter().map(|t| (t.key.clone(), t)).collect();
        let upserts: Vec<ConfigTarget> = desired
            .values()
            .filter(|t| owned.get(&t.key) != Some(*t))
            .cloned()
            .collect();
        let added = desired.keys().filter(|k| !owned.contains_key(*k)).count();
        let mut removals: Vec<ConfigTargetKey> = owned
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .cloned()
            .collect();
        let now = now_ms();
        self.config_holds = (0, Vec::new());
        let share = removals.len() as f64 / owned.len().max(1) as f64;
        if removals.len() >= self.spec.hold_min.max(1) && share >= self.spec.hold_share {
            let since = *self.config_hold_since.get_or_insert(now);
            if now.saturating_sub(since) < self.spec.hold_secs * 1000 {
                self.config_holds = (
                    removals.len(),
                    vec![format!(
                        "configurations: {} of {} vanished at once",
                        removals.len(),
                        owned.len()
                    )],
                );
                removals.clear();
            } else {
                self.config_hold_since = None;
            }
        } else {
            self.config_hold_since = None;
        }
        let removed = removals.len();
        if self.spec.dry_run {
            self.status.configs = Some((owned.len() + added).saturating_sub(removed));
        } else {
            let changed = !upserts.is_empty() || removed > 0;
            match self.apply_configs(upserts, removals).await {
                Ok(skipped) => {
                    self.status.configs_skipped = skipped;
                    self.status.configs =
                        Some((owned.len() + added).saturating_sub(removed + skipped));
                    if changed {
                        self.status.last_change_ms = Some(now);
                    }
                }
                Err(e) => {
                    self.write_failed(e).await;
                    return;
                }
            }
        }
        self.succeeded();
        self.report().await;
    }

    /// Writes configuration items in batches; returns how many upserts were skipped.
    async fn apply_configs(
        &self,
        upserts: Vec<ConfigTarget>,
        removals: Vec<ConfigTargetKey>,
    ) -> Result<usize, String> {
        let mut skipped = 0;
        let mut upserts = upserts.into_iter().peekable();
        let mut removals = removals.into_iter().peekable();
        while upserts.peek().is_some() || removals.peek().is_some() {
            // Items can be large: fewer per call than instances.
            let up: Vec<ConfigTarget> = upserts.by_ref().take(CONFIG_BATCH).collect();
            let rm: Vec<ConfigTargetKey> =
                removals.by_ref().take(CONFIG_BATCH - up.len()).collect();
            let applied = self
                .sink
                .apply_configs(&self.spec.name, up, rm)
                .await
                .map_err(|e| e.to_string())?;
            skipped += applied.skipped;
        }
        Ok(skipped)
    }

    /// Writes in batches; returns how many upserts were skipped (native addresses).
    async fn apply(&self, upserts: Vec<Target>, removals: Vec<TargetKey>) -> Result<usize, String> {
        let mut skipped = 0;
        let mut upserts = upserts.into_iter().peekable();
        let mut removals = removals.into_iter().peekable();
        while upserts.peek().is_some() || removals.peek().is_some() {
            let up: Vec<Target> = upserts.by_ref().take(BATCH).collect();
            let rm: Vec<TargetKey> = removals.by_ref().take(BATCH - up.len()).collect();
            let applied = self
                .sink
                .apply(&self.spec.name, up, rm)
                .await
                .map_err(|e| e.to_string())?;
            skipped += applied.skipped;
        }
        Ok(skipped)
    }

    async fn write_failed(&mut self, error: String) {
        tracing::warn!(task = %self.spec.name, %error, "sync write failed");
        self.status.state = TaskState::Error;
        self.status.last_error = Some(format!("cannot write to roster: {error}"));
        self.report().await;
    }

    /// Reports the status if it changed, or if the last report is getting old.
    async fn report(&mut self) {
        let due = match &self.reported {
            None => true,
            Some((last, at)) => !same_status(last, &self.status) || at.elapsed() >= REPORT_EVERY,
        };
        if !due {
            return;
        }
        match self.sink.report(&self.spec.name, &self.status).await {
            Ok(()) => self.reported = Some((self.status.clone(), Instant::now())),
            Err(e) => tracing::debug!(task = %self.spec.name, error = %e, "status report failed"),
        }
    }
}

/// Whether the owned copy differs from what the source wants, ignoring the fields an
/// operator pinned.
fn differs(owned: &Owned, want: &Target) -> bool {
    let (o, w) = (&owned.target.instance, &want.instance);
    o.cluster != w.cluster
        || o.healthy != w.healthy
        || (!owned.pinned_weight && o.weight != w.weight)
        || (!owned.pinned_enabled && o.enabled != w.enabled)
        || (!owned.pinned_metadata && o.metadata != w.metadata)
}

/// Statuses equal apart from their clocks.
fn same_status(a: &TaskStatus, b: &TaskStatus) -> bool {
    let strip = |s: &TaskStatus| TaskStatus {
        last_sync_ms: None,
        last_change_ms: None,
        ..s.clone()
    };
    strip(a) == strip(b)
}

/// Reads the source: list, then watch until the reconcile timer, a resync or an error;
/// then list again. Errors back off up to [`MAX_BACKOFF`].
async fn pump(
    opener: Opener,
    url: SourceUrl,
    filter: Filter,
    reconcile: Duration,
    tx: mpsc::Sender<Event>,
) {
    let mut backoff = Duration::from_secs(1);
    let mut source: Option<Box<dyn Source>> = None;
    // Reports a failure and waits out the backoff; false once the runner is gone.
    async fn failed(tx: &mpsc::Sender<Event>, e: SourceError, backoff: &mut Duration) -> bool {
        if tx.send(Event::Failed(e)).await.is_err() {
            return false;
        }
        sleep(*backoff).await;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        true
    }
    loop {
        let src = match source.as_mut() {
            Some(s) => s,
            None => match opener(&url, &filter) {
                Ok(s) => source.insert(s),
                Err(e) => {
                    if !failed(&tx, e, &mut backoff).await {
                        return;
                    }
                    continue;
                }
            },
        };
        match src.list().await {
            Ok(snapshot) => {
                backoff = Duration::from_secs(1);
                if tx.send(Event::Full(snapshot)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                if !failed(&tx, e, &mut backoff).await {
                    return;
                }
                continue;
            }
        }
        let next_full = Instant::now() + reconcile;
        loop {
            match timeout_at(next_full, src.watch()).await {
                Err(_) | Ok(Ok(Update::Resync)) => break,
                Ok(Ok(Update::Services(changes))) => {
                    if !changes.is_empty() && tx.send(Event::Changes(changes)).await.is_err() {
                        return;
                    }
                }
                Ok(Ok(Update::Configs(configs))) => {
                    if tx.send(Event::Configs(configs)).await.is_err() {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    if !failed(&tx, e, &mut backoff).await {
                        return;
                    }
                    break;
                }
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
