//! What sources report, what sinks store, and what a task is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Instance metadata, ordered for stable comparison and output.
pub type Metadata = BTreeMap<String, String>;

/// Metadata key (Nacos-Sync's): the source registry's type, e.g. `CONSUL`.
pub const SYNC_SOURCE_KEY: &str = "syncSource";
/// Metadata key (Nacos-Sync's): a stable id of the source registry.
pub const SOURCE_CLUSTER_ID_KEY: &str = "sourceClusterId";
/// Metadata key (Nacos-Sync's Nacos→Nacos marker).
pub const SYNC_INSTANCE_TAG_KEY: &str = "sync.instance.tag";
/// Metadata key: the roster sync task that imported the instance.
pub const TASK_KEY: &str = "sync.taskId";
/// Metadata key: the instance's id at the source.
pub const SOURCE_INSTANCE_ID_KEY: &str = "sync.sourceInstanceId";

/// Whether an instance with this metadata is itself a copy made by a syncer (ours or
/// Nacos-Sync's). Copies are never imported again, so two registries syncing each other
/// do not loop.
pub fn is_copy(metadata: &Metadata) -> bool {
    [SOURCE_CLUSTER_ID_KEY, SYNC_INSTANCE_TAG_KEY, TASK_KEY]
        .iter()
        .any(|k| metadata.get(*k).is_some_and(|v| !v.is_empty()))
}

/// One instance as a source reports it, mapped onto roster's model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceInstance {
    /// Cluster name (`DEFAULT` unless the source has one).
    pub cluster: String,
    /// IP address or host name.
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Relative weight, 0 to 10000.
    pub weight: f64,
    /// Health as the source sees it.
    pub healthy: bool,
    /// Whether consumers should get it.
    pub enabled: bool,
    /// Metadata (provenance keys are added by the runner).
    pub metadata: Metadata,
    /// The instance's id at the source: Consul `Node/ServiceID`, Eureka `instanceId`,
    /// the etcd key, the znode path, the Nacos `instanceId`.
    pub source_id: String,
}

/// A service at the source. `namespace` and `group` are set by sources that have them
/// (Nacos); the task's target namespace and group apply otherwise.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ServiceName {
    /// Source namespace id, if the source has namespaces.
    pub namespace: Option<String>,
    /// Source group, if the source has groups.
    pub group: Option<String>,
    /// Service name.
    pub name: String,
}

impl ServiceName {
    /// A service of a source without namespaces or groups.
    pub fn plain(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            group: None,
            name: name.into(),
        }
    }
}

/// Services and their complete instance lists.
pub type Services = BTreeMap<ServiceName, Vec<SourceInstance>>;

/// A configuration item as a source reports it (Nacos' config API).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConfig {
    /// Source namespace id (`public` for Nacos' empty tenant).
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Data id.
    pub data_id: String,
    /// Content.
    pub content: String,
    /// Content type (`text`, `yaml`, ...); empty when the source says none.
    pub r#type: String,
    /// Application.
    pub app_name: String,
}

/// Where an imported configuration item lives in roster.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConfigTargetKey {
    /// Namespace id.
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Data id.
    pub data_id: String,
}

/// An imported configuration item as roster should hold it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigTarget {
    /// Where.
    pub key: ConfigTargetKey,
    /// Content.
    pub content: String,
    /// Content type; empty: roster's default.
    pub r#type: String,
    /// Application.
    pub app_name: String,
}

/// The whole state of a source.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Every service the source has (an empty list: a service without instances).
    pub services: Services,
    /// The source said this may be incomplete (e.g. Consul filtered it by ACL): nothing
    /// missing from it may be deleted.
    pub partial: bool,
    /// Every configuration item, when the task imports them (`configs=true` on a Nacos
    /// source); `None` otherwise.
    pub configs: Option<Vec<SourceConfig>>,
}

/// What changed at the source.
#[derive(Clone, Debug)]
pub enum Update {
    /// These services now have exactly these instances (an empty list: none left).
    /// Services not named are unchanged. An empty map: nothing changed yet.
    Services(Services),
    /// The source cannot say what changed (Eureka hash mismatch, etcd compaction): list.
    Resync,
    /// The configuration items changed: these are all of them now.
    Configs(Vec<SourceConfig>),
}

/// Why a source could not be read. Every error holds deletions back until the next
/// successful list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The source is unreachable or answered with a server error.
    #[error("source unreachable: {0}")]
    Unreachable(String),
    /// The source refused us (credentials, permissions, a 4xx).
    #[error("source refused: {0}")]
    Refused(String),
    /// The source answered something we cannot read.
    #[error("unreadable answer from source: {0}")]
    Invalid(String),
    /// The task's configuration cannot work with this source.
    #[error("{0}")]
    Config(String),
}

/// A foreign registry being read.
#[async_trait::async_trait]
pub trait Source: Send {
    /// The whole current state. Called first, after every error, after a
    /// [`Update::Resync`] and on the full-reconcile timer. Resets any watch state.
    async fn list(&mut self) -> Result<Snapshot, SourceError>;

    /// Waits for changes since the last `list` or `watch` and returns them. May return
    /// an empty [`Update::Services`] after waiting a while (about 30 s at most) with
    /// nothing changed. Cancelling it is allowed; the runner lists again afterwards.
    async fn watch(&mut self) -> Result<Update, SourceError>;
}

/// Where an imported instance lives in roster, and what it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Namespace id.
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Service name.
    pub service: String,
    /// The instance, with provenance metadata.
    pub instance: SourceInstance,
}

impl Target {
    /// The key of the instance in roster.
    pub fn key(&self) -> TargetKey {
        TargetKey {
            namespace: self.namespace.clone(),
            group: self.group.clone(),
            service: self.service.clone(),
            ip: self.instance.ip.clone(),
            port: self.instance.port,
        }
    }
}

/// An instance's key in roster: its service and address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TargetKey {
    /// Namespace id.
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Service name.
    pub service: String,
    /// IP or host.
    pub ip: String,
    /// Port.
    pub port: u16,
}

/// An instance a task owns in roster, with the fields an operator pinned (those are
/// not compared, so an operator's override does not cause a write on every reconcile).
#[derive(Clone, Debug)]
pub struct Owned {
    /// What roster holds.
    pub target: Target,
    /// Weight set by an operator.
    pub pinned_weight: bool,
    /// Enabled flag set by an operator.
    pub pinned_enabled: bool,
    /// Metadata set by an operator.
    pub pinned_metadata: bool,
}

/// What a sink did with a batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Upserts skipped because a native instance (or another task's) holds the address.
    pub skipped: usize,
}

/// Why a sink could not take a batch (e.g. this node is no longer the leader).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// Where imported instances go: roster's registry. Implemented by the server.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Every instance task `task` owns.
    async fn owned(&self, task: &str) -> Result<Vec<Owned>, SinkError>;
    /// Creates or updates `upserts` and removes `removals`, all owned by `task`.
    /// Addresses held by instances the task does not own are left alone and counted.
    async fn apply(
        &self,
        task: &str,
        upserts: Vec<Target>,
        removals: Vec<TargetKey>,
    ) -> Result<Applied, SinkError>;
    /// Records the task's status where every node can read it.
    async fn report(&self, task: &str, status: &TaskStatus) -> Result<(), SinkError>;
    /// Every configuration item task `task` owns.
    async fn owned_configs(&self, _task: &str) -> Result<Vec<ConfigTarget>, SinkError> {
        Err(SinkError(
            "this roster cannot import configuration items".into(),
        ))
    }
    /// Creates or updates `upserts` and removes `removals`, all owned by `task`. Items
    /// held by others (published through the API, or another task's) are left alone
    /// and counted as skipped.
    async fn apply_configs(
        &self,
        _task: &str,
        _upserts: Vec<ConfigTarget>,
        _removals: Vec<ConfigTargetKey>,
    ) -> Result<Applied, SinkError> {
        Err(SinkError(
            "this roster cannot import configuration items".into(),
        ))
    }
}

/// A sync task as stored (through Raft) and shown by the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    /// Unique name, also the owner id of its instances.
    pub name: String,
    /// The source URL (credentials included; the API shows it redacted).
    pub source: String,
    /// Target namespace; `None`: the source's (Nacos) or `public`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Target group; `None`: the source's (Nacos) or `DEFAULT_GROUP`.
    #[serde(default)]
    pub group: Option<String>,
    /// Service filter (see [`Filter`]); `None`: every service.
    #[serde(default)]
    pub services: Option<String>,
    /// Report what would be imported, write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Paused tasks do not run; their instances stay as they are.
    #[serde(default)]
    pub paused: bool,
    /// Seconds between full reconciles.
    #[serde(default = "default_reconcile_secs")]
    pub reconcile_secs: u64,
    /// Share (0..=1) of a service's instances that, vanishing in one step, holds the
    /// deletions back.
    #[serde(default = "default_hold_share")]
    pub hold_share: f64,
    /// Fewest vanished instances that can trigger a hold.
    #[serde(default = "default_hold_min")]
    pub hold_min: usize,
    /// Seconds a hold lasts while the source keeps saying the instances are gone;
    /// after that they are removed.
    #[serde(default = "default_hold_secs")]
    pub hold_secs: u64,
    /// When the task was created (ms since the epoch).
    #[serde(default)]
    pub created_ms: u64,
}

/// Default seconds between full reconciles.
pub fn default_reconcile_secs() -> u64 {
    60
}
/// Default share of vanishing instances that holds deletions.
pub fn default_hold_share() -> f64 {
    0.5
}
/// Default fewest vanishing instances that can hold deletions.
pub fn default_hold_min() -> usize {
    3
}
/// Default seconds a hold lasts.
pub fn default_hold_secs() -> u64 {
    300
}

/// What a task is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Not started yet, or waiting for a leader.
    #[default]
    Pending,
    /// Listing the source for the first time.
    Starting,
    /// Imported and watching.
    Running,
    /// Running, with deletions held back.
    Holding,
    /// The source cannot be read; nothing is deleted until it can.
    Error,
    /// Paused by an operator.
    Paused,
}

/// A dry run's findings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRunReport {
    /// Instances that would be created.
    pub would_add: usize,
    /// Instances that would be changed.
    pub would_update: usize,
    /// Instances that would be removed.
    pub would_remove: usize,
    /// Up to 100 of the instances that would exist, as `namespace/group/service ip:port`.
    pub sample: Vec<String>,
}

/// A task's status, as the runner reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// What it is doing.
    pub state: TaskState,
    /// Services seen at the source (after the filter).
    pub services: usize,
    /// Instances the task owns in roster (or would, in a dry run).
    pub instances: usize,
    /// Deletions held back.
    pub held_deletions: usize,
    /// Why they are held, e.g. `source error` or `order-service: 4 of 6 vanished`.
    #[serde(default)]
    pub hold_reasons: Vec<String>,
    /// Source instances not imported because a native instance holds the address.
    pub skipped: usize,
    /// Source instances not imported because they are copies made by a syncer.
    pub copies_ignored: usize,
    /// The last error, if the last attempt failed.
    pub last_error: Option<String>,
    /// When the last full reconcile finished (ms since the epoch).
    pub last_sync_ms: Option<u64>,
    /// When the last change was applied (ms since the epoch).
    pub last_change_ms: Option<u64>,
    /// The node running the task.
    pub runner: Option<u64>,
    /// Findings of a dry run.
    pub dry_run: Option<DryRunReport>,
    /// Configuration items the task owns in roster (or would, in a dry run); absent
    /// when it imports none.
    #[serde(default)]
    pub configs: Option<usize>,
    /// Source configuration items not imported because roster holds its own at that
    /// key.
    #[serde(default)]
    pub configs_skipped: usize,
}
