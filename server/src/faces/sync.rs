//! Sync tasks on a node: the [`Sink`] that writes a task's imports through Raft, and the
//! [`supervise`] worker that runs every unpaused task while this node is the Raft leader — so exactly one runner per task in
//! the cluster, taken over by the next leader, which reconciles against the imports the
//! old one committed (they are Raft state), so nothing is duplicated or lost.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use roster_sync::{
    Applied, ConfigTarget, ConfigTargetKey, Owned, Sink, SinkError, SourceInstance, Target,
    TargetKey, TaskSpec, TaskStatus, SOURCE_INSTANCE_ID_KEY,
};

use crate::services::configs::validate::{
    check_config_group, check_content, check_data_id, check_tenant, check_text, check_type,
};
use crate::services::configs::{ConfigKey, Configs, Imported, Settings};
use crate::services::store::tasks::writes::{import_configs, import_instances, report};
use crate::services::store::tasks::{redacted, SyncTasks};
use crate::services::store::Store;
use crate::services::workers::Workers;
use crate::state::AppState;
use roster_registry::service::ServiceKey;
use roster_registry::validate::{check_group, check_namespace_id, check_service_name, Invalid};
use roster_registry::validate::{registration, Origin};
use roster_registry::{Registration, Registry};

/// Writes a task's imports through Raft, from the leader only.
pub struct RaftSink {
    registry: Registry,
    store: Store,
    max_metadata_bytes: usize,
    configs: Configs,
    config_settings: Settings,
}

impl RaftSink {
    /// A sink over this node's registry, configuration store and Raft store; imports
    /// meet the API's limits (metadata, configuration content).
    pub fn new(
        registry: Registry,
        store: Store,
        max_metadata_bytes: usize,
        configs: Configs,
        config_settings: Settings,
    ) -> Self {
        Self {
            registry,
            store,
            max_metadata_bytes,
            configs,
            config_settings,
        }
    }

    /// Why roster's API would refuse this configuration item, if it would.
    fn config_refusal(&self, t: &ConfigTarget) -> Option<Invalid> {
        let k = &t.key;
        check_tenant("tenant", &k.namespace)
            .and_then(|_| check_config_group("group", &k.group))
            .and_then(|_| check_data_id("dataId", &k.data_id))
            .and_then(|_| {
                check_content(
                    "content",
                    &t.content,
                    self.config_settings.max_content_bytes,
                )
            })
            .and_then(|_| check_type("type", &t.r#type))
            .and_then(|_| {
                check_text(
                    "appName",
                    &t.app_name,
                    crate::services::configs::validate::MAX_APP_NAME,
                )
            })
            .err()
    }

    /// Why roster's API would refuse the service `t` names, if it would: imports meet
    /// the same rules as registrations (the instance's: `roster_registry::validate::registration`).
    fn service_refusal(&self, t: &Target) -> Option<Invalid> {
        check_namespace_id("namespaceId", &t.namespace)
            .and_then(|_| check_group(&t.group))
            .and_then(|_| check_service_name(&t.service))
            .err()
    }

    fn check_leader(&self) -> Result<(), SinkError> {
        if self.store.is_leader() {
            Ok(())
        } else {
            Err(SinkError("this node is no longer the Raft leader".into()))
        }
    }
}

#[async_trait::async_trait]
impl Sink for RaftSink {
    async fn owned(&self, task: &str) -> Result<Vec<Owned>, SinkError> {
        Ok(self
            .registry
            .owned_by(task)
            .into_iter()
            .map(|(key, inst)| Owned {
                target: Target {
                    namespace: key.namespace.to_string(),
                    group: key.group.to_string(),
                    service: key.name.to_string(),
                    instance: SourceInstance {
                        cluster: inst.cluster.to_string(),
                        ip: inst.ip().to_string(),
                        port: inst.port,
                        weight: inst.weight,
                        healthy: inst.healthy,
                        enabled: inst.enabled,
                        source_id: inst
                            .metadata
                            .get(SOURCE_INSTANCE_ID_KEY)
                            .unwrap_or_default()
                            .to_string(),
                        metadata: inst.metadata.to_map(),
                    },
                },
                pinned_weight: inst.pinned.weight,
                pinned_enabled: inst.pinned.enabled,
                pinned_metadata: inst.pinned.metadata,
            })
            .collect())
    }

    async fn apply(
        &self,
        task: &str,
        upserts: Vec<Target>,
        removals: Vec<TargetKey>,
    ) -> Result<Applied, SinkError> {
        self.check_leader()?;
        let mut applied = Applied::default();
        let mut regs = Vec::with_capacity(upserts.len());
        for t in upserts {
            let refused_service = self.service_refusal(&t);
            let i = t.instance;
            let mut reg = Registration {
                ip: i.ip,
                port: i.port,
                cluster: i.cluster,
                weight: i.weight,
                healthy: i.healthy,
                enabled: i.enabled,
                ephemeral: false,
                metadata: i.metadata,
                instance_id: None,
                client: None,
                owner: Some(task.to_string()),
            };
            let refusal = refused_service
                .or_else(|| registration(&mut reg, Origin::Import, self.max_metadata_bytes).err());
            if let Some(refusal) = refusal {
                tracing::debug!(task, service = %t.service, ip = %reg.ip, refusal = %refusal.message, "import skipped");
                applied.skipped += 1;
                continue;
            }
            let key = ServiceKey::new(&t.namespace, &t.group, &t.service);
            // A native instance (or another task's) holds the address: it stays.
            let held_by_other = self
                .registry
                .instance(&key, &reg.ip, reg.port)
                .is_some_and(|i| i.owner().map(|o| &**o) != Some(task));
            if held_by_other {
                applied.skipped += 1;
                continue;
            }
            regs.push((key, reg));
        }
        let removals: Vec<(ServiceKey, String, u16)> = removals
            .into_iter()
            .map(|k| {
                (
                    ServiceKey::new(&k.namespace, &k.group, &k.service),
                    k.ip,
                    k.port,
                )
            })
            .collect();
        if regs.is_empty() && removals.is_empty() {
            return Ok(applied);
        }
        import_instances(&self.store, task, regs, removals)
            .await
            .map_err(sink_error)?;
        Ok(applied)
    }

    async fn owned_configs(&self, task: &str) -> Result<Vec<ConfigTarget>, SinkError> {
        Ok(self
            .configs
            .owned_by(task)
            .into_iter()
            .map(|(key, item)| ConfigTarget {
                key: ConfigTargetKey {
                    namespace: key.namespace,
                    group: key.group,
                    data_id: key.data_id,
                },
                content: item.content.to_string(),
                r#type: item.r#type,
                app_name: item.app_name,
            })
            .collect())
    }

    async fn apply_configs(
        &self,
        task: &str,
        upserts: Vec<ConfigTarget>,
        removals: Vec<ConfigTargetKey>,
    ) -> Result<Applied, SinkError> {
        self.check_leader()?;
        let mut applied = Applied::default();
        let key_of = |k: ConfigTargetKey| ConfigKey {
            namespace: k.namespace,
            group: k.group,
            data_id: k.data_id,
        };
        let mut writes = Vec::with_capacity(upserts.len());
        for t in upserts {
            if let Some(refusal) = self.config_refusal(&t) {
                tracing::debug!(task, data_id = %t.key.data_id, refusal = %refusal.message, "configuration import skipped");
                applied.skipped += 1;
                continue;
            }
            let key = key_of(t.key);
            // Roster's own item (or another task's) holds the key: it stays. Decided
            // again when applied.
            if self.configs.held_by_other(&key, task) {
                applied.skipped += 1;
                continue;
            }
            writes.push((
                key,
                Imported {
                    content: t.content,
                    r#type: t.r#type,
                    app_name: t.app_name,
                },
            ));
        }
        let removals: Vec<ConfigKey> = removals.into_iter().map(key_of).collect();
        if writes.is_empty() && removals.is_empty() {
            return Ok(applied);
        }
        let retention = self.config_settings.retention;
        import_configs(&self.store, task, writes, removals, retention)
            .await
            .map_err(sink_error)?;
        Ok(applied)
    }

    async fn report(&self, task: &str, status: &TaskStatus) -> Result<(), SinkError> {
        self.check_leader()?;
        report(&self.store, task, status.clone())
            .await
            .map_err(sink_error)
    }
}

/// A write the store did not take, as a runner reports it.
fn sink_error(e: crate::services::store::ProposeError) -> SinkError {
    SinkError(e.to_string())
}

/// Runs every unpaused sync task while this node is the ready Raft leader; stops them
/// Starts the runner among `workers`.
pub fn spawn_workers(state: &AppState, workers: &mut Workers) {
    workers.spawn(supervise(
        state.clone(),
        state.tasks.clone(),
        workers.stopping(),
    ));
}

/// when it is not, or when a task is paused, changed or deleted.
pub async fn supervise(state: AppState, tasks: SyncTasks, mut stopping: watch::Receiver<bool>) {
    let sink: Arc<dyn Sink> = Arc::new(RaftSink::new(
        state.registry.clone(),
        state.store.clone(),
        state.limits.max_metadata_bytes,
        state.configs.clone(),
        state.config_settings,
    ));
    let node = state.store.id();
    let mut running: HashMap<String, (TaskSpec, JoinHandle<()>)> = HashMap::new();
    loop {
        let changed = tasks.changed();
        let leading = state.ready.is_ready() && state.store.is_leader();
        let wanted = if leading {
            tasks.runnable()
        } else {
            BTreeMap::new()
        };
        running.retain(|name, (spec, handle)| {
            let keep = wanted.get(name) == Some(spec) && !handle.is_finished();
            if !keep {
                tracing::info!(task = %name, "sync task stopped here");
                handle.abort();
            }
            keep
        });
        for (name, spec) in wanted {
            if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(name) {
                tracing::info!(task = %slot.key(), source = %redacted(&spec.source), "sync task starting here");
                let run = roster_sync::runner::run(spec.clone(), sink.clone(), Some(node));
                slot.insert((spec, tokio::spawn(run)));
            }
        }
        tokio::select! {
            _ = changed => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stopping.changed() => break,
        }
    }
    for (_, (_, handle)) in running {
        handle.abort();
    }
}
