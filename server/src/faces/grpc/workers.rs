//! Starting the gRPC face: its server on the listener, and the workers beside it —
//! naming pushes, config pushes, and the upkeep of connections.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::tls::GrpcTls;
use super::{serve, GrpcLimits, GrpcServer};
use crate::services::workers::Workers;
use roster_registry::changes::ChangeSet;

/// Starts the gRPC face among `workers`: `server` on `listener` (over TLS with `tls`,
/// whose certificate is reloaded when its files change), pushing the services `changes`
/// marks.
pub fn spawn_workers(
    server: Arc<GrpcServer>,
    listener: TcpListener,
    tls: Option<GrpcTls>,
    limits: GrpcLimits,
    changes: Arc<ChangeSet>,
    workers: &mut Workers,
) {
    tracing::info!(
        addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        tls = tls.is_some(),
        "serving the Nacos gRPC API"
    );
    if let Some(tls) = &tls {
        workers.spawn(tls.certificate().clone().watch(
            "grpc",
            crate::services::net::tls::RELOAD_EVERY,
            workers.stopping(),
        ));
    }
    workers.spawn(server.clone().run_push(changes, workers.stopping()));
    workers.spawn(server.clone().run_config_push(workers.stopping()));
    workers.spawn(server.clone().run_upkeep(workers.stopping()));
    workers.spawn(serve(server, listener, tls, limits, workers.stopping()));
}
