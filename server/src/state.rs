//! The node's shared state, [`AppState`]: the handles every protocol face reads through
//! (the services' workers get only the handles they use). Each field's type lives where its data lives (the registry, the
//! store, the cluster, push); this module only gathers them, and the wiring
//! (`node/build.rs`) builds it.

use std::sync::Arc;

use crate::services::audit::Audit;
use crate::services::auth::{self, Auth};
use crate::services::channel::client::PeerClient;
use crate::services::cluster::members::Members;
use crate::services::cluster::readiness::Readiness;
use crate::services::cluster::view::{self, ClusterView};
use crate::services::configs::{self, Configs};
use crate::services::distro::Distro;
use crate::services::metrics::{Metrics, NodeFigures};
use crate::services::naming::writes::Writes;
use crate::services::push::balance::Balancer;
use crate::services::push::connections::ConnectionList;
use crate::services::push::events::Events;
use crate::services::push::udp::UdpPush;
use crate::services::push::SubscriberList;
use crate::services::store::tasks::{self, SyncTasks};
use crate::services::store::Store;
use roster_registry::balance::Balancers;
use roster_registry::guard::EvictionGuard;
use roster_registry::Registry;

/// Size limits applied to requests.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Largest metadata map (keys plus values), bytes.
    pub max_metadata_bytes: usize,
}

/// Where Eureka clients' applications live (`--eureka-namespace`, `--eureka-group`).
#[derive(Clone, Debug)]
pub struct EurekaPlace {
    /// The namespace.
    pub namespace: String,
    /// The group.
    pub group: String,
}

/// Where Consul clients' services live, and what its blocking queries may hold
/// (`--consul-namespace`, `--consul-group`, `--consul-datacenter`,
/// `--consul-max-blocking`).
#[derive(Clone, Debug)]
pub struct ConsulPlace {
    /// The namespace.
    pub namespace: String,
    /// The group.
    pub group: String,
    /// The one datacenter the Consul API answers for.
    pub datacenter: String,
    /// Permits of blocking queries waiting at once on this node; one more is refused
    /// (429) rather than held.
    pub blocking: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Everything request handlers share. Cheap to clone: one reference count, however
/// many parts it has (axum clones the state for every extractor and middleware, and
/// cloning each part's handle showed up as a tenth of a list request's CPU).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    /// The in-memory registry every read is served from.
    pub registry: Registry,
    /// The Raft store persistent writes are proposed to.
    pub store: Store,
    /// Users, tokens and credential checks.
    pub auth: Auth,
    /// UDP push subscribers.
    pub push: UdpPush,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Set once startup finished.
    pub ready: Readiness,
    /// Request size limits.
    pub limits: Limits,
    /// The namespace and group of the Eureka API's applications.
    pub eureka: EurekaPlace,
    /// The namespace and group of the Consul API's services, its datacenter, and the
    /// cap on its blocking queries.
    pub consul: ConsulPlace,
    /// Cluster members and their liveness.
    pub members: Members,
    /// The authenticated client of the peer channel.
    pub peers: PeerClient,
    /// Ephemeral replication and ownership.
    pub distro: Distro,
    /// Holds mass removals.
    pub guard: Arc<EvictionGuard>,
    /// Round-robin positions of `/api/v1/pick`.
    pub balancers: Balancers,
    /// The subscribers of the gRPC connections on this node (the connections themselves
    /// belong to the gRPC server).
    pub grpc_subscribers: Arc<dyn SubscriberList>,
    /// Service, namespace, user and sync task changes for the console's event streams.
    pub events: Events,
    /// Sync tasks (Raft-held).
    pub tasks: SyncTasks,
    /// The audit trail: the faces record writes and admin actions, `/api/v1/audit`
    /// reads them.
    pub audit: Audit,
    /// Configuration items (Raft-held), read locally.
    pub configs: Configs,
    /// The configuration API's limits and history retention.
    pub config_settings: configs::Settings,
    /// The HTTP long polls this node holds.
    pub long_polls: configs::listeners::LongPolls,
    /// The gRPC connections' listens (the connections belong to the gRPC server).
    pub grpc_listeners: Arc<dyn configs::listeners::ListenerList>,
    /// The gRPC connections on this node, as the admin API lists and moves them.
    pub grpc_connections: Arc<dyn ConnectionList>,
    /// Spreads those connections over the members (`loader/smartReloadCluster` asks).
    pub balance: Balancer,
}

impl AppState {
    /// The state of a node made of `parts`.
    pub fn new(parts: Shared) -> Self {
        Self(Arc::new(parts))
    }

    /// Where naming writes go (every protocol face writes through it).
    pub fn writes(&self) -> Writes<'_> {
        Writes {
            registry: &self.registry,
            store: &self.store,
            distro: &self.distro,
        }
    }

    /// Where configuration writes go (every face writes through it).
    pub fn config_writes(&self) -> configs::writes::Writes<'_> {
        configs::writes::Writes {
            store: &self.store,
            settings: self.config_settings,
        }
    }

    /// Where user, role, permission and signing key writes go.
    pub fn auth_writes(&self) -> auth::writes::Writes<'_> {
        auth::writes::Writes::new(&self.store, &self.auth)
    }

    /// Where sync task writes go.
    pub fn task_writes(&self) -> tasks::writes::Writes<'_> {
        tasks::writes::Writes::new(&self.store, &self.tasks)
    }

    /// The node's figures for `/metrics`.
    pub fn figures(&self) -> NodeFigures {
        NodeFigures {
            ready: self.ready.is_ready(),
            members: self.members.peers().len() + 1,
            members_live: self.members.live().len(),
            owned_by: self.distro.ownership_counts(),
            guard_engaged: self.guard.engaged().len(),
            totals: self.registry.totals(),
            udp_subscribers: self.push.subscriber_count(),
            configs: self.configs.len(),
            config_long_polls: self.long_polls.count(),
            list_cache_bytes: roster_registry::service::list_cache_held(),
            raft: self.store.status(),
            sync_tasks: crate::services::metrics::task_state_labels(
                self.tasks.all().into_iter().map(|t| t.status.state),
            ),
        }
    }

    /// The cluster as this node sees it.
    pub fn cluster_view(&self) -> ClusterView {
        view::view(view::Sources {
            store: &self.store,
            members: &self.members,
            ready: &self.ready,
            guard: &self.guard,
            distro_owned: self.distro.ownership_counts(),
        })
    }

    /// [`AppState::cluster_view`], with replication figures from the leader when this
    /// node is a follower.
    pub async fn cluster_view_with_leader(&self) -> ClusterView {
        view::with_leader(self.cluster_view(), &self.members, &self.peers).await
    }
}
