//! What a node starts from: the sockets it serves on ([`Listeners`], bound before it
//! starts so that tests can bind port 0) and its place in the cluster ([`ClusterPlan`]).

use std::collections::BTreeMap;

use anyhow::Context;
use roster_raft::NodeId;
use tokio::net::{TcpListener, UdpSocket};

use crate::node::args::NodeArgs;
use crate::services::channel::client::ClusterSecret;
use crate::services::cluster::parse_members;

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
    /// The HTTP API again, on Consul's port, with `--consul-http`.
    pub consul: Option<TcpListener>,
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
        let consul = match args.consul_http {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on --consul-http {addr}"))?,
            ),
            None => None,
        };
        Ok(Self {
            http,
            peer,
            grpc,
            udp,
            dns,
            consul,
        })
    }

    /// The addresses this node's TCP sockets are bound to.
    pub fn own_addrs(&self) -> Vec<std::net::SocketAddr> {
        let dns = self.dns.as_ref().map(|(_, tcp)| tcp);
        [
            Some(&self.http),
            Some(&self.grpc),
            Some(&self.peer),
            dns,
            self.consul.as_ref(),
        ]
        .into_iter()
        .flatten()
        .filter_map(|l| l.local_addr().ok())
        .collect()
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
