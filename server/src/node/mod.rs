//! The node's wiring: [`run`] binds the protocol faces (HTTP API, gRPC, DNS, peer
//! channel) to the shared state ([`crate::state::AppState`]), starts the background
//! workers and serves until shutdown. The one module that knows every face.

pub mod args;

use std::future::Future;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;

use std::collections::BTreeMap;

use roster_raft::NodeId;

use crate::faces::dns::DnsConfig;
use crate::faces::grpc::connection::Connections;
use crate::faces::grpc::GrpcServer;
use crate::node::args::NodeArgs;
use crate::services::auth::{password, Auth, ADMIN_USERNAME};
use crate::services::cluster::listener::PeerLimits;
use crate::services::cluster::members::{Hello, Members};
use crate::services::cluster::parse_members;
use crate::services::cluster::peer::{ClusterSecret, PeerClient};
use crate::services::cluster::server::PeerState;
use crate::services::cluster::tls::PeerTls;
use crate::services::distro::Distro;
use crate::services::metrics::Metrics;
use crate::services::net::HttpLimits;
use crate::services::push::events::Events;
use crate::services::push::udp::UdpPush;
use crate::services::store::command::{CommandV1, Rejection};
use crate::services::store::tasks::SyncTasks;
use crate::services::store::{ProposeError, Store};
use crate::state::{AppState, Limits, Readiness, Shared};
use roster_registry::clock::now_ms;
use roster_registry::guard::{EvictionGuard, GuardPolicy};
use roster_registry::Registry;

/// Name of the file the generated admin password is written to, in the data dir.
pub const INITIAL_PASSWORD_FILE: &str = "initial-admin-password";
/// Environment variable that sets the admin password at first start.
pub const ADMIN_PASSWORD_ENV: &str = "ROSTER_ADMIN_PASSWORD";
/// Environment variable that gives the cluster secret directly.
pub const CLUSTER_SECRET_ENV: &str = "ROSTER_CLUSTER_SECRET";

/// The sockets a node serves on, bound by the caller (so tests can bind port 0).
pub struct Listeners {
    /// The HTTP API.
    pub http: TcpListener,
    /// The node-to-node channel.
    pub peer: TcpListener,
    /// The Nacos 2.x gRPC API.
    pub grpc: TcpListener,
    /// The socket UDP pushes are sent from and acks arrive at.
    pub udp: UdpSocket,
    /// DNS over UDP and TCP, with `--dns`.
    pub dns: Option<(UdpSocket, TcpListener)>,
}

impl Listeners {
    /// Binds `--http`, `--peer`, and the push socket on the HTTP IP.
    pub async fn bind(args: &NodeArgs) -> anyhow::Result<Self> {
        let http = TcpListener::bind(args.http)
            .await
            .with_context(|| format!("cannot listen on --http {}", args.http))?;
        let peer = TcpListener::bind(args.peer)
            .await
            .with_context(|| format!("cannot listen on --peer {}", args.peer))?;
        let grpc_addr = args.grpc.unwrap_or_else(|| {
            let mut addr = args.http;
            addr.set_port(args.http.port().wrapping_add(1000));
            addr
        });
        let grpc = TcpListener::bind(grpc_addr).await.with_context(|| {
            format!("cannot listen on --grpc {grpc_addr} (default: the HTTP port + 1000)")
        })?;
        let udp = UdpSocket::bind((args.http.ip(), 0))
            .await
            .with_context(|| format!("cannot bind a UDP push socket on {}", args.http.ip()))?;
        let dns = match args.dns {
            Some(addr) => Some((
                UdpSocket::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on --dns {addr} (UDP)"))?,
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on --dns {addr} (TCP)"))?,
            )),
            None => None,
        };
        Ok(Self {
            http,
            peer,
            grpc,
            udp,
            dns,
        })
    }
}

/// Who this node is in the cluster, from `--node-id`, `--members`, `--join` and the
/// cluster secret.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    /// The members this node starts with (id → peer address), itself included.
    pub members: BTreeMap<NodeId, String>,
    /// The peer address other nodes reach this one at.
    pub advertised_peer: String,
    /// The cluster secret, if configured.
    pub secret: Option<ClusterSecret>,
    /// Whether this node waits to be added instead of forming a cluster.
    pub join: bool,
}

impl ClusterPlan {
    /// Works out and checks the plan; refuses a multi-node cluster without a secret.
    pub fn from_args(args: &NodeArgs) -> anyhow::Result<Self> {
        let secret = match (
            std::env::var(CLUSTER_SECRET_ENV)
                .ok()
                .filter(|s| !s.is_empty()),
            &args.cluster_secret_file,
        ) {
            (Some(s), _) => Some(s.trim().as_bytes().to_vec()),
            (None, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| {
                        format!("cannot read --cluster-secret-file {}", path.display())
                    })?
                    .trim()
                    .as_bytes()
                    .to_vec(),
            ),
            (None, None) => None,
        }
        .map(ClusterSecret::new)
        .transpose()
        .map_err(anyhow::Error::msg)?;
        let members = match &args.members {
            Some(raw) => parse_members(raw).map_err(anyhow::Error::msg)?,
            None => BTreeMap::from([(args.node_id, args.peer.to_string())]),
        };
        let advertised_peer = members.get(&args.node_id).cloned().ok_or_else(|| {
            anyhow::anyhow!(
                "--members does not name this node's id {} (--node-id)",
                args.node_id
            )
        })?;
        if (members.len() > 1 || args.join) && secret.is_none() {
            anyhow::bail!(
                "a cluster of several nodes needs a cluster secret: give --cluster-secret-file or set {CLUSTER_SECRET_ENV} (the same on every node)"
            );
        }
        Ok(Self {
            members,
            advertised_peer,
            secret,
            join: args.join,
        })
    }

    /// The node that forms the cluster: the lowest id.
    pub fn founder(&self) -> NodeId {
        *self.members.keys().next().expect("members are never empty")
    }
}

/// Runs a node until `shutdown` completes or Raft fails, then stops its workers and Raft.
pub async fn run(
    args: NodeArgs,
    plan: ClusterPlan,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    create_private_dir(&args.data_dir)?;
    check_descriptors(&args);
    let grpc_tls = crate::faces::grpc::tls_config(&args)?;
    let http_tls = http_tls_config(&args)?;
    let registry = Registry::new();
    let auth = Auth::with_password_checks(
        !args.no_auth,
        args.token_ttl_secs,
        args.max_password_checks as usize,
    );
    let metrics = Arc::new(Metrics::new());
    let (audit, audit_worker) =
        crate::services::audit::Audit::new(&args.data_dir, metrics.audit_dropped.clone());
    let mut raft_config = roster_raft::NodeConfig::new(
        args.node_id,
        plan.advertised_peer.clone(),
        args.data_dir.join("raft"),
    );
    raft_config.snapshot_every = args.raft_snapshot_logs;
    let peer_tls = match (&args.peer_tls_cert, &args.peer_tls_key, &args.peer_tls_ca) {
        (Some(cert), Some(key), Some(ca)) => Some(PeerTls::load(cert, key, ca)?),
        _ => None,
    };
    watch_for_metrics(&metrics, &args.data_dir, &http_tls, &grpc_tls, &peer_tls);
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
    let configs = crate::services::configs::Configs::new();
    // What the state machine changes of namespaces, users and sync tasks, for the
    // console's event streams.
    let catalog = Arc::new(crate::services::store::catalog::CatalogChanges::default());
    let store = Store::open(
        &raft_config,
        registry.clone(),
        auth.clone(),
        tasks.clone(),
        configs.clone(),
        catalog.clone(),
        peer_client.clone(),
    )
    .await
    .context("cannot open the raft store")?;
    let http_addr = listeners.http.local_addr()?;
    // Health checks never probe `--health-check-deny` nor this node's own sockets.
    let own_sockets = [
        Some(http_addr),
        listeners.grpc.local_addr().ok(),
        listeners.peer.local_addr().ok(),
        listeners
            .dns
            .as_ref()
            .and_then(|(_, tcp)| tcp.local_addr().ok()),
    ];
    let health_deny = crate::services::health::deny::DenyList::new(
        &args.health_check_deny,
        own_sockets.into_iter().flatten(),
    );
    let connections = Connections::new(args.node_id);
    let members = Members::new(
        Hello {
            node_id: args.node_id,
            peer_addr: plan.advertised_peer.clone(),
            http_addr: advertised_http(http_addr, &plan.advertised_peer),
            version: env!("CARGO_PKG_VERSION").into(),
            membership: None,
        },
        &plan.members,
    );
    let push = UdpPush::new(
        listeners.udp,
        registry.clone(),
        metrics.clone(),
        Duration::from_secs(args.subscriber_ttl_secs),
    );
    // Turns true when the HTTP server starts its graceful shutdown: long-lived responses
    // (event streams) end then, instead of holding the shutdown up.
    let (closing, closing_rx) = watch::channel(false);
    roster_registry::service::set_list_cache_budget(args.list_cache_mib.saturating_mul(1 << 20));
    let state = AppState::new(Shared {
        registry: registry.clone(),
        store: store.clone(),
        auth,
        push: push.clone(),
        metrics,
        ready: Readiness::default(),
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_metadata_bytes: args.max_metadata_bytes,
        },
        members: members.clone(),
        peers: peer_client.clone(),
        distro: {
            let connections = connections.clone();
            Distro::new(
                args.node_id,
                registry.clone(),
                members.clone(),
                peer_client.clone(),
                Duration::from_secs(args.distro_verify_secs),
                move |client| connections.holds(client),
            )
        },
        guard: Arc::new(EvictionGuard::new(GuardPolicy {
            share: args.eviction_guard_share,
            min_count: args.eviction_guard_min,
        })),
        balancers: Default::default(),
        grpc_subscribers: Arc::new(connections.clone()),
        long_polls: Default::default(),
        grpc_listeners: Arc::new(connections.clone()),
        events: Events::new(closing_rx),
        tasks: tasks.clone(),
        audit,
        configs: configs.clone(),
        config_settings: crate::services::configs::Settings {
            max_content_bytes: args.config_max_content_bytes as usize,
            max_listeners: args.config_max_listeners as usize,
            retention: crate::services::configs::Retention {
                max_age_ms: args.config_history_days * 24 * 3600 * 1000,
                max_versions: args.config_history_max,
            },
        },
    });

    let (stop, stopping) = watch::channel(false);
    let mut workers = JoinSet::new();
    {
        let peer_state = PeerState::new(
            plan.secret.clone(),
            state.clone(),
            peer_limits.header_timeout,
        );
        tracing::info!(
            addr = %listeners.peer.local_addr()?,
            tls = peer_tls.is_some(),
            max_connections = peer_limits.max_connections,
            "serving the peer channel"
        );
        if let Some(tls) = &peer_tls {
            workers.spawn(tls.certificate.clone().watch(
                "peer",
                crate::services::net::tls::RELOAD_EVERY,
                stopping.clone(),
            ));
        }
        workers.spawn(crate::services::cluster::listener::serve(
            listeners.peer,
            peer_tls.map(|tls| tls.acceptor),
            peer_limits,
            peer_state,
            stopping.clone(),
        ));
    }
    workers.spawn(
        members
            .clone()
            .run(peer_client, store.clone(), stopping.clone()),
    );
    if let Some((udp, tcp)) = listeners.dns {
        let config = DnsConfig::new(&args.dns_domain, args.dns_ttl)
            .and_then(|c| c.with_namespaces(&args.dns_namespaces))
            .map_err(anyhow::Error::msg)?;
        tracing::info!(addr = %udp.local_addr()?, domain = %config.domain, "serving DNS");
        workers.spawn(crate::faces::dns::serve_udp(
            udp,
            registry.clone(),
            config.clone(),
            state.ready.clone(),
            stopping.clone(),
        ));
        workers.spawn(crate::faces::dns::serve_tcp(
            tcp,
            registry.clone(),
            config,
            state.ready.clone(),
            stopping.clone(),
        ));
    }
    {
        let grpc = GrpcServer::new(state.clone(), connections.clone());
        tracing::info!(
            addr = %listeners.grpc.local_addr()?,
            tls = grpc_tls.is_some(),
            "serving the Nacos gRPC API"
        );
        if let Some(tls) = &grpc_tls {
            workers.spawn(tls.certificate().clone().watch(
                "grpc",
                crate::services::net::tls::RELOAD_EVERY,
                stopping.clone(),
            ));
        }
        workers.spawn(grpc.clone().run_push(registry.watch(), stopping.clone()));
        workers.spawn(grpc.clone().run_config_push(stopping.clone()));
        workers.spawn(grpc.clone().run_upkeep(stopping.clone()));
        workers.spawn(crate::faces::grpc::serve(
            grpc,
            listeners.grpc,
            grpc_tls,
            crate::faces::grpc::GrpcLimits {
                max_connections: args.grpc_max_connections as usize,
                max_per_ip: args.grpc_max_connections_per_ip as usize,
                setup_timeout: Duration::from_secs(args.grpc_setup_timeout_secs),
            },
            stopping.clone(),
        ));
    }
    workers.spawn(state.distro.clone().run_propagation(stopping.clone()));
    workers.spawn(state.distro.clone().run_verification(stopping.clone()));
    workers.spawn(push.clone().run_pusher(registry.watch(), stopping.clone()));
    workers.spawn(
        state
            .events
            .clone()
            .run(registry.watch(), catalog, stopping.clone()),
    );
    workers.spawn(push.clone().run_acks(stopping.clone()));
    workers.spawn(audit_worker.run(stopping.clone()));
    workers.spawn(push.run_maintenance(stopping.clone()));
    workers.spawn(expiry_worker(state.clone(), stopping.clone()));
    workers.spawn(crate::services::metrics::sampler(
        state.clone(),
        stopping.clone(),
    ));
    workers.spawn(crate::faces::sync::supervise(
        state.clone(),
        tasks,
        stopping.clone(),
    ));
    workers.spawn(crate::services::health::check::run_checker(
        state.clone(),
        Duration::from_secs(args.health_check_interval_secs),
        health_deny,
        stopping.clone(),
    ));
    workers.spawn(crate::services::configs::prune::run(
        store.clone(),
        configs.clone(),
        state.config_settings.retention,
        stopping.clone(),
    ));
    if let Some(schedule) = crate::services::backup::schedule::Schedule::from_args(&args) {
        workers.spawn(schedule.run(state.clone(), stopping.clone()));
    }
    if args.empty_service_ttl_secs > 0 {
        workers.spawn(empty_service_worker(
            registry.clone(),
            args.empty_service_ttl_secs * 1000,
            stopping.clone(),
        ));
    }
    // Startup runs beside the HTTP server so that /health/live answers meanwhile.
    let (failed, mut failure) = watch::channel(None::<String>);
    {
        let state = state.clone();
        let data_dir = args.data_dir.clone();
        let failed = failed.clone();
        let plan = plan.clone();
        let mut stopping = stopping.clone();
        workers.spawn(async move {
            // Startup waits as long as peers take (for ever, for a node never added):
            // shutdown must not wait for it.
            let outcome = tokio::select! {
                outcome = start_up(&state, &plan, &data_dir) => outcome,
                _ = stopping.wait_for(|stop| *stop) => return,
            };
            if let Err(e) = outcome {
                tracing::error!(error = %format!("{e:#}"), "startup failed");
                failed.send_replace(Some(format!("{e:#}")));
            }
        });
    }
    workers.spawn(raft_watchdog(store.clone(), failed, stopping.clone()));
    workers.spawn(crate::services::cluster::watch::run(
        store.clone(),
        members.clone(),
        state.ready.clone(),
        plan.join,
        stopping.clone(),
    ));

    if let Some(tls) = &http_tls {
        workers.spawn(tls.cert.clone().watch(
            "http",
            crate::services::net::tls::RELOAD_EVERY,
            stopping.clone(),
        ));
    }
    tracing::info!(http = %http_addr, https = http_tls.is_some(), peer = %args.peer, data_dir = %args.data_dir.display(), node_id = args.node_id, members = plan.members.len(), "roster node starting");
    let mut failure_rx = failure.clone();
    let http_limits = HttpLimits {
        max_connections: args.http_max_connections as usize,
        max_per_ip: args.http_max_connections_per_ip as usize,
        header_timeout: Duration::from_secs(args.http_header_timeout_secs),
        idle_timeout: Duration::from_secs(args.http_idle_timeout_secs),
        body_timeout: Duration::from_secs(args.http_body_timeout_secs),
    };
    let http_counters = state.metrics.http_listener.clone();
    crate::services::net::serve_http(
        listeners.http,
        crate::faces::http::service(state, args.console_dir.clone(), http_tls.is_some()),
        http_limits,
        http_tls.map(|tls| tls.acceptor),
        http_counters,
        async move {
            tokio::select! {
                _ = shutdown => tracing::info!("shutting down"),
                _ = failure_rx.wait_for(|f| f.is_some()) => {}
            }
            closing.send_replace(true);
        },
    )
    .await;

    stop.send_replace(true);
    // Workers see `stop` and return; a client that holds a connection open does not get
    // to hold the node up.
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("some workers did not stop within 10 s; aborting them");
        workers.abort_all();
    }
    store.shutdown().await;
    let failure = failure.borrow_and_update().clone();
    match failure {
        Some(reason) => anyhow::bail!(reason),
        None => Ok(()),
    }
}

/// Registers with `metrics` what it reads at each scrape: the data dir's filesystem and
/// the certificate of every TLS face.
fn watch_for_metrics(
    metrics: &Metrics,
    data_dir: &Path,
    http: &Option<crate::services::net::tls::ServerTls>,
    grpc: &Option<crate::faces::grpc::tls::GrpcTls>,
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
fn http_tls_config(
    args: &NodeArgs,
) -> anyhow::Result<Option<crate::services::net::tls::ServerTls>> {
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
    Ok(Some(crate::services::net::tls::ServerTls::load(
        files,
        &[b"http/1.1"],
    )?))
}

/// Raises the descriptor limit to the hard limit and warns when the connection caps
/// exceed it: past it, the listeners wait for descriptors to free (and Raft retries its
/// writes) instead of refusing connections cleanly.
fn check_descriptors(args: &NodeArgs) {
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
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
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

/// The HTTP address to tell peers: the bound one, with the advertised peer host when it
/// is bound to every interface.
fn advertised_http(bound: std::net::SocketAddr, advertised_peer: &str) -> String {
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

/// Forms or joins the Raft cluster, catches up with the leader, bootstraps auth on the
/// cluster's first start, then marks the node ready. Waits as long as it takes for
/// peers (logging now and then); only storage failures end it.
async fn start_up(state: &AppState, plan: &ClusterPlan, data_dir: &Path) -> anyhow::Result<()> {
    let store = &state.store;
    let me = store.id();
    if store.is_initialized().await? {
        warn_of_changed_addresses(store, plan);
    }
    if !plan.join && plan.founder() == me && !store.is_initialized().await? {
        // Form the cluster once a majority answers, so that it can elect at once.
        let majority = plan.members.len() / 2 + 1;
        let mut waited = 0u64;
        loop {
            let live = state
                .members
                .live()
                .into_iter()
                .filter(|id| plan.members.contains_key(id))
                .count();
            if live >= majority {
                break;
            }
            if waited.is_multiple_of(10) {
                tracing::info!(
                    live,
                    majority,
                    "waiting for a majority of --members to form the cluster"
                );
            }
            waited += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        store.initialize(&plan.members).await?;
        tracing::info!(members = ?plan.members, "formed the cluster");
    }
    while !store.wait_for_leader(Duration::from_secs(10)).await {
        tracing::info!("waiting for a raft leader");
    }
    // Catch up with everything committed so far: reads are complete from here on.
    while let Err(e) = store.read_barrier().await {
        tracing::info!(error = %e, "waiting to catch up with the raft leader");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if !state.auth.bootstrapped() {
        if !plan.join && plan.founder() == me {
            bootstrap(state, data_dir).await?;
        } else {
            while !state.auth.bootstrapped() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    // Ephemeral instances live on the other nodes: take them before serving reads. A
    // node that joined learns its peers from the membership it has just caught up with:
    // follow it now rather than at the next hello round, or it takes itself for a
    // cluster of one and serves no ephemeral instance until verification brings them.
    state.members.follow(&store.status().members);
    state.distro.load_snapshot(Duration::from_secs(5)).await;
    state.ready.set();
    tracing::info!(
        raft_index = store.status().last_applied,
        "roster node ready"
    );
    Ok(())
}

/// Warns, loudly, when the command line gives a member (this node's `--peer`, or an
/// entry of `--members`) another address than the stored Raft membership. Decided: warn
/// and keep the stored address rather than refuse to start. The stored one is what the
/// other members dial, and the node may well still be reachable there (a bind address
/// changed to `0.0.0.0`, say); refusing would turn a restart into an outage. Changing a
/// member's address is a membership change: remove it, wipe its data dir, and add it
/// again with the new address.
fn warn_of_changed_addresses(store: &Store, plan: &ClusterPlan) {
    let stored = store.status().members;
    for (id, stored, given) in crate::services::cluster::changed_addresses(&stored, &plan.members) {
        tracing::warn!(
            node_id = id,
            stored = %stored,
            given = %given,
            "the command line gives member {id} another peer address than the stored cluster membership; \
             the stored {stored} stays in use (peers dial it). To change a member's address, remove it \
             (roster cluster remove {id}), delete its data dir, and add it with the new address \
             (roster cluster add {id} {given})"
        );
    }
}

/// First start of a cluster: generates the token signing key and creates the admin,
/// whose password comes from `ROSTER_ADMIN_PASSWORD` or is generated and written to
/// `<data-dir>/initial-admin-password` (mode 0600); the log names the file, never the
/// password.
async fn bootstrap(state: &AppState, data_dir: &Path) -> anyhow::Result<()> {
    let given = std::env::var(ADMIN_PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty());
    let generated = given.is_none();
    let admin_password = match given {
        Some(p) => p,
        None => {
            let p = random_password();
            // On disk before it is committed: the password must never be unknowable.
            write_private_file(&data_dir.join(INITIAL_PASSWORD_FILE), &p)?;
            p
        }
    };
    let hash = {
        let p = admin_password.clone();
        tokio::task::spawn_blocking(move || password::hash(&p)).await?
    };
    let signing_key: [u8; 32] = rand::random();
    let command = CommandV1::Bootstrap {
        signing_key: signing_key.to_vec(),
        admin: ADMIN_USERNAME.into(),
        password_hash: hash,
    };
    match state.store.propose(command).await {
        Ok(()) => {
            if generated {
                // The password stays in its file (mode 0600): logs are read by more
                // people and kept longer.
                tracing::warn!(
                    username = ADMIN_USERNAME,
                    file = %data_dir.join(INITIAL_PASSWORD_FILE).display(),
                    "generated the admin password; it is in the file, readable by this user only"
                );
            } else {
                tracing::info!(
                    username = ADMIN_USERNAME,
                    "admin password set from {ADMIN_PASSWORD_ENV}"
                );
            }
            Ok(())
        }
        Err(ProposeError::Rejected(Rejection::AlreadyBootstrapped)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn random_password() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    (0..24)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn write_private_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    Ok(())
}

/// Marks silent ephemeral instances unhealthy and removes expired ones, checking four
/// times a second: each instance is acted on within ~250 ms of its deadline. The sweep
/// runs on a blocking thread: after a mass silence it judges many instances at once.
///
/// When the live members change, clients change owners (and this node may gain or lose
/// the right to judge at all): every service is then judged at this tick, so that an
/// instance inherited from a dead node turns unhealthy on time.
async fn expiry_worker(state: AppState, mut stopping: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut live = state.members.live_ids();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        let now_live = state.members.live_ids();
        if now_live != live {
            state.registry.recheck_all();
            live = now_live;
        }
        let now = now_ms();
        let sweeping = state.clone();
        let swept = tokio::task::spawn_blocking(move || {
            let state = sweeping;
            let owns = state.distro.judgement();
            state.registry.expire_due(now, &owns, &state.guard)
        })
        .await;
        let report = match swept {
            Ok(report) => report,
            Err(e) => {
                tracing::error!(error = %e, "beat expiry sweep failed");
                continue;
            }
        };
        state
            .metrics
            .expired_unhealthy
            .inc_by(report.unhealthy as u64);
        state.metrics.expired_removed.inc_by(report.removed as u64);
        state.metrics.eviction_held.inc_by(report.held as u64);
        if report.unhealthy > 0 || report.removed > 0 {
            tracing::debug!(
                unhealthy = report.unhealthy,
                removed = report.removed,
                "beat expiry"
            );
        }
        for ns in &report.engaged {
            tracing::warn!(namespace = %ns, share = state.guard.policy.share, min = state.guard.policy.min_count,
                "eviction guard engaged: too many instances fell silent at once; keeping them (unhealthy) instead of removing them");
        }
        for ns in report
            .released
            .iter()
            .chain(state.guard.release_idle(now).iter())
        {
            tracing::info!(namespace = %ns, "eviction guard released");
        }
    }
}

/// Removes idle empty services (only when `--empty-service-ttl-secs` is set).
async fn empty_service_worker(
    registry: Registry,
    ttl_ms: u64,
    mut stopping: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        for key in registry.sweep_empty(ttl_ms, now_ms()) {
            tracing::info!(service = %key, "removed empty service");
        }
    }
}

/// Stops the node when Raft hits a fatal error (storage failure, unknown command).
async fn raft_watchdog(
    store: Store,
    failed: watch::Sender<Option<String>>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        if let Some(fatal) = store.status().fatal {
            tracing::error!(error = %fatal, "raft stopped; shutting the node down");
            failed.send_replace(Some(format!("raft stopped: {fatal}")));
            return;
        }
    }
}
