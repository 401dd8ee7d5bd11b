//! Building a node's parts from its flags, before anything runs: the registry, the Raft
//! store, auth, the audit trail, the peer client and members, Distro, push, the TLS
//! settings of every face, and the state the faces share ([`AppState`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::plan::ClusterPlan;
use crate::faces::grpc::connection::Connections;
use crate::faces::grpc::tls::GrpcTls;
use crate::faces::peer::listener::PeerLimits;
use crate::node::args::NodeArgs;
use crate::services::audit::{self, Audit};
use crate::services::auth::Auth;
use crate::services::channel::client::PeerClient;
use crate::services::channel::tls::PeerTls;
use crate::services::cluster::members::{Hello, Members};
use crate::services::cluster::readiness::Readiness;
use crate::services::configs;
use crate::services::distro::Distro;
use crate::services::health::deny::DenyList;
use crate::services::metrics::Metrics;
use crate::services::net::tls::ServerTls;
use crate::services::push::balance::{self, Balancer};
use crate::services::push::events::Events;
use crate::services::push::udp::UdpPush;
use crate::services::store::catalog::CatalogChanges;
use crate::services::store::machine::RegistryMachine;
use crate::services::store::tasks::SyncTasks;
use crate::services::store::Store;
use crate::state::{AppState, ConsulPlace, EurekaPlace, Limits, Shared};
use roster_registry::guard::{EvictionGuard, GuardPolicy};
use roster_registry::Registry;

/// A node's parts, built and not yet running.
pub struct Node {
    /// What the faces share.
    pub state: AppState,
    /// What only the services' workers take.
    pub services: ServiceParts,
    /// What only the faces other than HTTP take.
    pub faces: FaceParts,
    /// HTTPS, with `--http-tls-*`.
    pub http_tls: Option<ServerTls>,
    /// Turns true when the HTTP server starts its graceful shutdown: long-lived
    /// responses (event streams) end then, instead of holding the shutdown up.
    pub closing: watch::Sender<bool>,
}

/// What the services' workers take beside the state.
pub struct ServiceParts {
    /// What the state machine changes of namespaces, users and sync tasks, for the
    /// console's event streams.
    pub catalog: Arc<CatalogChanges>,
    /// The audit trail's writer.
    pub audit_writer: audit::Worker,
    /// What health checks never probe: `--health-check-deny` and this node's sockets.
    pub health_deny: DenyList,
    /// The peer channel's client (also Raft's transport), for the hellos.
    pub peer_client: PeerClient,
}

/// What the gRPC and peer faces take beside the state.
pub struct FaceParts {
    /// The gRPC connections: the gRPC server's, read by push and config listeners.
    pub connections: Connections,
    /// The `--peer` listener's limits.
    pub peer_limits: PeerLimits,
    /// gRPC over TLS, with `--grpc-tls-*`.
    pub grpc_tls: Option<GrpcTls>,
    /// The peer channel's mutual TLS, with `--peer-tls-*`.
    pub peer_tls: Option<PeerTls>,
}

impl Node {
    /// Builds the parts of the node `args` and `plan` describe: serving HTTP on
    /// `http_addr` and gRPC on `grpc_addr`, with TCP sockets bound to `own_addrs` (never
    /// health-checked) and pushing from `udp`. Opens the Raft store; runs nothing.
    pub async fn build(
        args: &NodeArgs,
        plan: &ClusterPlan,
        (http_addr, grpc_addr): (SocketAddr, SocketAddr),
        own_addrs: Vec<SocketAddr>,
        udp: UdpSocket,
    ) -> anyhow::Result<Self> {
        let grpc_tls = crate::faces::grpc::TlsFiles {
            cert: args.grpc_tls_cert.as_deref(),
            key: args.grpc_tls_key.as_deref(),
            optional: args.grpc_tls_optional,
        }
        .load()?;
        let http_tls = http_tls_config(args)?;
        let peer_tls = match (&args.peer_tls_cert, &args.peer_tls_key, &args.peer_tls_ca) {
            (Some(cert), Some(key), Some(ca)) => Some(PeerTls::load(cert, key, ca)?),
            _ => None,
        };
        let metrics = Arc::new(Metrics::new());
        watch_for_metrics(&metrics, &args.data_dir, &http_tls, &grpc_tls, &peer_tls);
        let registry = Registry::new();
        let auth = Auth::with_password_checks(
            !args.no_auth,
            args.token_ttl_secs,
            args.max_password_checks as usize,
        );
        let (audit, audit_writer) = Audit::new(&args.data_dir, metrics.audit_dropped.clone());
        let peer_limits = PeerLimits {
            max_connections: args.peer_max_connections as usize,
            header_timeout: Duration::from_secs(args.peer_header_timeout_secs),
            idle_timeout: Duration::from_secs(args.peer_idle_timeout_secs),
        };
        let peer_client = PeerClient::new(
            args.node_id,
            plan.secret.clone(),
            peer_tls.as_ref().map(|tls| tls.connector.clone()),
            peer_limits.idle_timeout,
        );
        let tasks = SyncTasks::default();
        let configs = configs::Configs::new();
        let catalog = Arc::new(CatalogChanges::default());
        let mut raft_config = roster_raft::NodeConfig::new(
            args.node_id,
            plan.advertised_peer.clone(),
            args.data_dir.join("raft"),
        );
        raft_config.snapshot_every = args.raft_snapshot_logs;
        let machine = RegistryMachine::new(
            registry.clone(),
            auth.clone(),
            tasks.clone(),
            configs.clone(),
            catalog.clone(),
            crate::services::domains::APPLIERS,
        );
        let store = Store::open(&raft_config, machine, peer_client.clone())
            .await
            .context("cannot open the raft store")?;
        // Health checks never probe `--health-check-deny` nor this node's own sockets.
        let health_deny = DenyList::new(&args.health_check_deny, own_addrs);
        let connections = Connections::new(args.node_id);
        let members = Members::new(
            Hello {
                node_id: args.node_id,
                peer_addr: plan.advertised_peer.clone(),
                http_addr: advertised(http_addr, &plan.advertised_peer),
                version: env!("CARGO_PKG_VERSION").into(),
                membership: None,
                grpc_addr: Some(advertised(grpc_addr, &plan.advertised_peer)),
                load: None,
            },
            &plan.members,
        );
        let push = UdpPush::new(
            udp,
            registry.clone(),
            metrics.clone(),
            Duration::from_secs(args.subscriber_ttl_secs),
        );
        let distro = {
            let connections = connections.clone();
            Distro::new(
                args.node_id,
                registry.clone(),
                members.clone(),
                peer_client.clone(),
                Duration::from_secs(args.distro_verify_secs),
                move |client| connections.holds(client),
            )
        };
        let (closing, closing_rx) = watch::channel(false);
        roster_registry::service::set_list_cache_budget(
            args.list_cache_mib.saturating_mul(1 << 20),
        );
        roster_registry::validate::check_namespace_id(
            "--eureka-namespace",
            &args.eureka_namespace,
        )?;
        roster_registry::validate::check_group(&args.eureka_group)?;
        roster_registry::validate::check_namespace_id(
            "--consul-namespace",
            &args.consul_namespace,
        )?;
        roster_registry::validate::check_group(&args.consul_group)?;
        let dc = &args.consul_datacenter;
        if dc.is_empty()
            || dc.len() > 64
            || !dc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            anyhow::bail!("--consul-datacenter {dc:?}: 1 to 64 letters, digits, '-' or '_'");
        }
        let state = AppState::new(Shared {
            registry,
            store,
            auth,
            push,
            metrics,
            ready: Readiness::default(),
            limits: Limits {
                max_body_bytes: args.max_body_bytes,
                max_metadata_bytes: args.max_metadata_bytes,
            },
            eureka: EurekaPlace {
                namespace: args.eureka_namespace.clone(),
                group: args.eureka_group.clone(),
            },
            consul: ConsulPlace {
                namespace: args.consul_namespace.clone(),
                group: args.consul_group.clone(),
                datacenter: args.consul_datacenter.clone(),
                blocking: Arc::new(tokio::sync::Semaphore::new(
                    args.consul_max_blocking as usize,
                )),
            },
            members,
            peers: peer_client.clone(),
            distro,
            guard: Arc::new(EvictionGuard::new(GuardPolicy {
                share: args.eviction_guard_share,
                min_count: args.eviction_guard_min,
            })),
            balancers: Default::default(),
            grpc_subscribers: Arc::new(connections.clone()),
            long_polls: Default::default(),
            grpc_listeners: Arc::new(connections.clone()),
            grpc_connections: Arc::new(connections.clone()),
            balance: Balancer::new(
                balance::Settings {
                    automatic: !args.no_grpc_rebalance,
                    batch: args.grpc_rebalance_batch as usize,
                },
                closing_rx.clone(),
            ),
            events: Events::new(closing_rx),
            tasks,
            audit,
            configs,
            config_settings: configs::Settings {
                max_content_bytes: args.config_max_content_bytes as usize,
                max_listeners: args.config_max_listeners as usize,
                retention: configs::Retention {
                    max_age_ms: args.config_history_days * 24 * 3600 * 1000,
                    max_versions: args.config_history_max,
                },
            },
        });
        Ok(Self {
            state,
            services: ServiceParts {
                catalog,
                audit_writer,
                health_deny,
                peer_client,
            },
            faces: FaceParts {
                connections,
                peer_limits,
                grpc_tls,
                peer_tls,
            },
            http_tls,
            closing,
        })
    }
}

/// Registers with `metrics` what it reads at each scrape: the data dir's filesystem and
/// the certificate of every TLS face.
fn watch_for_metrics(
    metrics: &Metrics,
    data_dir: &Path,
    http: &Option<ServerTls>,
    grpc: &Option<GrpcTls>,
    peer: &Option<PeerTls>,
) {
    metrics.watch_data_dir(data_dir);
    if let Some(tls) = http {
        metrics.watch_certificate("http", tls.cert.clone());
    }
    if let Some(tls) = grpc {
        metrics.watch_certificate("grpc", tls.certificate().clone());
    }
    if let Some(tls) = peer {
        metrics.watch_certificate("peer", tls.certificate.clone());
    }
}

/// The HTTPS settings of `--http-tls-cert` and `--http-tls-key`, checked: files that do
/// not load stop the node before it serves anything.
fn http_tls_config(args: &NodeArgs) -> anyhow::Result<Option<ServerTls>> {
    let (Some(cert), Some(key)) = (&args.http_tls_cert, &args.http_tls_key) else {
        return Ok(None);
    };
    let files = crate::services::net::tls::KeyPairFiles {
        cert: cert.clone(),
        key: key.clone(),
        cert_flag: "--http-tls-cert",
        key_flag: "--http-tls-key",
    };
    // HTTP/1.1 only, as the plaintext port (hyper serves no HTTP/2 here).
    Ok(Some(ServerTls::load(files, &[b"http/1.1"])?))
}

/// Raises the descriptor limit to the hard limit and warns when the connection caps
/// exceed it: past it, the listeners wait for descriptors to free (and Raft retries its
/// writes) instead of refusing connections cleanly.
pub fn check_descriptors(args: &NodeArgs) {
    let Some(limit) = crate::services::net::raise_descriptor_limit() else {
        return;
    };
    let caps = args.http_max_connections + args.grpc_max_connections;
    if caps >= limit {
        tracing::warn!(
            descriptors = limit,
            http_max_connections = args.http_max_connections,
            grpc_max_connections = args.grpc_max_connections,
            "the connection caps exceed the descriptor limit (ulimit -n); raise it, or lower the caps"
        );
    } else {
        tracing::debug!(descriptors = limit, "descriptor limit");
    }
}

/// Creates `dir` (and parents), readable by the owner only.
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict permissions of {}", dir.display()))?;
    }
    Ok(())
}

/// An address to tell peers (HTTP, gRPC): the bound one, with the advertised peer host
/// when it is bound to every interface.
fn advertised(bound: SocketAddr, advertised_peer: &str) -> String {
    if bound.ip().is_unspecified() {
        let host = advertised_peer
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(advertised_peer);
        format!("{host}:{}", bound.port())
    } else {
        bound.to_string()
    }
}
