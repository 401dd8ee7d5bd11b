//! The node's wiring, the one module that knows every part. [`run`] is its script:
//! build the node's parts ([`build`]), start the services' workers and startup, then
//! the faces ([`start`]; each component starts its own workers), serve HTTP until
//! shutdown, and stop. The flags are [`args`]; the sockets and the node's place in the
//! cluster, [`plan`]; forming or joining the cluster and bootstrapping, [`startup`].

pub mod args;
pub mod build;
pub mod plan;
pub mod start;
pub mod startup;

use std::future::Future;
use std::time::Duration;

use crate::node::args::NodeArgs;
use crate::services::net::tls::RELOAD_EVERY;
use crate::services::net::HttpLimits;
use crate::services::workers::Workers;
use build::Node;
pub use plan::{ClusterPlan, Listeners};

/// How long stopping workers may take before they are aborted.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// Runs a node until `shutdown` completes or Raft fails, then stops its workers and Raft.
pub async fn run(
    args: NodeArgs,
    plan: ClusterPlan,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    build::create_private_dir(&args.data_dir)?;
    build::check_descriptors(&args);
    let own_addrs = listeners.own_addrs();
    let Listeners {
        http,
        peer,
        grpc,
        udp,
        dns,
        consul,
    } = listeners;
    let addrs = (http.local_addr()?, grpc.local_addr()?);
    let node = Node::build(&args, &plan, addrs, own_addrs, udp).await?;
    let state = node.state;
    let mut workers = Workers::default();
    let mut failure = start::services(&state, node.services, &args, &plan, &mut workers);
    start::faces(
        &state,
        node.faces,
        (peer, grpc, dns),
        &args,
        &plan,
        &mut workers,
    )?;
    if let Some(tls) = &node.http_tls {
        workers.spawn(
            tls.cert
                .clone()
                .watch("http", RELOAD_EVERY, workers.stopping()),
        );
    }
    tracing::info!(
        http = %addrs.0,
        https = node.http_tls.is_some(),
        peer = %args.peer,
        data_dir = %args.data_dir.display(),
        node_id = args.node_id,
        members = plan.members.len(),
        "roster node starting"
    );

    let limits = HttpLimits {
        max_connections: args.http_max_connections as usize,
        max_per_ip: args.http_max_connections_per_ip as usize,
        header_timeout: Duration::from_secs(args.http_header_timeout_secs),
        idle_timeout: Duration::from_secs(args.http_idle_timeout_secs),
        body_timeout: Duration::from_secs(args.http_body_timeout_secs),
    };
    let https = node.http_tls.is_some();
    let api = crate::faces::http::service(state.clone(), args.console_dir.clone(), https);
    let counters = state.metrics.http_listener.clone();
    let (mut failed, closing) = (failure.clone(), node.closing);
    let stopped = async move {
        tokio::select! {
            _ = shutdown => tracing::info!("shutting down"),
            _ = failed.wait_for(|f| f.is_some()) => {}
        }
        closing.send_replace(true);
    };
    let acceptor = node.http_tls.map(|tls| tls.acceptor);
    // Consul's port serves the same API, under caps of its own, and stops with it.
    let consul = consul.map(|listener| {
        let (api, acceptor, counters) = (api.clone(), acceptor.clone(), counters.clone());
        let mut closing = state.events.closing();
        let stopped = async move {
            let _ = closing.wait_for(|c| *c).await;
        };
        tracing::info!(consul_http = ?listener.local_addr().ok(), "serving the HTTP API on Consul's port too");
        tokio::spawn(crate::services::net::serve_http(
            listener, api, limits, acceptor, counters, stopped,
        ))
    });
    crate::services::net::serve_http(http, api, limits, acceptor, counters, stopped).await;
    if let Some(consul) = consul {
        let _ = consul.await;
    }

    workers.stop(STOP_WITHIN).await;
    state.store.shutdown().await;
    let failure = failure.borrow_and_update().clone();
    match failure {
        Some(reason) => anyhow::bail!(reason),
        None => Ok(()),
    }
}
