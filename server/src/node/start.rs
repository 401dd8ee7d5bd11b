//! Starting a built node: each component starts its own workers; this file only says
//! which, with what.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;

use super::args::NodeArgs;
use super::build::{FaceParts, ServiceParts};
use super::plan::ClusterPlan;
use super::startup;
use crate::faces::dns::DnsConfig;
use crate::faces::grpc::fuzzy::{Bounds, FuzzyLimits};
use crate::faces::grpc::{GrpcLimits, GrpcServer};
use crate::faces::peer::PeerRoutes;
use crate::services::backup::schedule::Schedule;
use crate::services::health::check::HealthChecks;
use crate::services::health::expiry::BeatExpiry;
use crate::services::workers::Workers;
use crate::state::AppState;

/// Starts the services' workers and startup. The receiver turns `Some` with the reason
/// when startup or Raft fails.
pub fn services(
    state: &AppState,
    parts: ServiceParts,
    args: &NodeArgs,
    plan: &ClusterPlan,
    workers: &mut Workers,
) -> watch::Receiver<Option<String>> {
    let (registry, store) = (&state.registry, &state.store);
    state.distro.spawn_workers(workers);
    state.push.spawn_workers(registry.watch(), workers);
    state
        .events
        .spawn_workers(registry.watch(), parts.catalog, workers);
    state
        .members
        .spawn_workers(parts.peer_client, store.clone(), workers);
    state.balance.spawn_workers(
        state.members.clone(),
        state.grpc_connections.clone(),
        state.ready.clone(),
        workers,
    );
    parts.audit_writer.spawn_workers(workers);
    BeatExpiry {
        registry: registry.clone(),
        distro: state.distro.clone(),
        members: state.members.clone(),
        guard: state.guard.clone(),
        metrics: state.metrics.clone(),
        empty_service_ttl: (args.empty_service_ttl_secs > 0)
            .then(|| Duration::from_secs(args.empty_service_ttl_secs)),
    }
    .spawn_workers(workers);
    HealthChecks {
        registry: registry.clone(),
        store: store.clone(),
        ready: state.ready.clone(),
        interval: Duration::from_secs(args.health_check_interval_secs),
        deny: parts.health_deny,
    }
    .spawn_workers(workers);
    let retention = state.config_settings.retention;
    crate::services::configs::prune::spawn_workers(store, &state.configs, retention, workers);
    if let Some(every) = args.snapshot_every {
        let schedule = Schedule {
            every,
            dir: args
                .snapshot_dir
                .clone()
                .unwrap_or_else(|| args.data_dir.join("backups")),
            keep: args.snapshot_keep as usize,
        };
        schedule.spawn_workers(store.clone(), state.ready.clone(), workers);
    }
    let sampled = state.clone();
    let read = move || {
        let engaged = sampled.guard.engaged();
        (
            sampled.figures(),
            engaged.iter().map(|n| n.to_string()).collect(),
        )
    };
    crate::services::metrics::spawn_sampler(state.metrics.clone(), read, workers);
    let (failed, failure) = watch::channel(None::<String>);
    let (members, ready) = (&state.members, &state.ready);
    crate::services::cluster::watch::spawn_workers(
        store,
        members,
        ready,
        plan.join,
        failed.clone(),
        workers,
    );
    startup::spawn(state, plan, args.data_dir.clone(), failed, workers);
    failure
}

/// Starts the faces other than HTTP: the peer channel on `peer`, gRPC on `grpc`, DNS on
/// `dns` (with `--dns`), and the sync task runner.
pub fn faces(
    state: &AppState,
    parts: FaceParts,
    (peer, grpc, dns): (TcpListener, TcpListener, Option<(UdpSocket, TcpListener)>),
    args: &NodeArgs,
    plan: &ClusterPlan,
    workers: &mut Workers,
) -> anyhow::Result<()> {
    let viewed = state.clone();
    let routes = PeerRoutes {
        distro: state.distro.clone(),
        store: state.store.clone(),
        members: state.members.clone(),
        balance: state.balance.clone(),
        view: Arc::new(move || viewed.cluster_view()),
    };
    let (tls, limits, secret) = (parts.peer_tls, parts.peer_limits, plan.secret.clone());
    crate::faces::peer::spawn_workers(peer, tls, limits, secret, routes, workers);
    if let Some(sockets) = dns {
        let config = DnsConfig::new(&args.dns_domain, args.dns_ttl)
            .and_then(|c| c.with_namespaces(&args.dns_namespaces))
            .map_err(anyhow::Error::msg)?;
        crate::faces::dns::spawn_workers(sockets, &state.registry, config, &state.ready, workers);
    }
    let limits = GrpcLimits {
        max_connections: args.grpc_max_connections as usize,
        max_per_ip: args.grpc_max_connections_per_ip as usize,
        setup_timeout: Duration::from_secs(args.grpc_setup_timeout_secs),
    };
    let fuzzy = FuzzyLimits {
        naming: Bounds {
            max_patterns: args.naming_fuzzy_watch_max_patterns as usize,
            max_matches: args.naming_fuzzy_watch_max_services as usize,
        },
        config: Bounds {
            max_patterns: args.config_fuzzy_watch_max_patterns as usize,
            max_matches: args.config_fuzzy_watch_max_items as usize,
        },
    };
    let server = GrpcServer::new(state.clone(), parts.connections, fuzzy);
    let changes = state.registry.watch();
    crate::faces::grpc::workers::spawn_workers(
        server,
        grpc,
        parts.grpc_tls,
        limits,
        changes,
        workers,
    );
    crate::faces::sync::spawn_workers(state, workers);
    Ok(())
}
