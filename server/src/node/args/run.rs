//! The flags of a running node (`roster`, `roster run`): its listeners and their limits,
//! TLS, the cluster, data, logs, auth, limits on what clients send, health checks,
//! Distro, the eviction guard, DNS, scheduled snapshots and push.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The default of `--max-password-checks`: one per core.
fn default_password_checks() -> u32 {
    crate::services::auth::password::PasswordChecks::default_max() as u32
}

/// Flags of a running node.
#[derive(Clone, Debug, Args)]
pub struct NodeArgs {
    /// Address of the HTTP API (Nacos v1 API, roster API, metrics, health).
    #[arg(
        long,
        env = "ROSTER_HTTP",
        default_value = "127.0.0.1:8848",
        value_name = "ADDR"
    )]
    pub http: SocketAddr,

    /// Address of the Nacos 2.x gRPC API (default: the `--http` IP and port + 1000, where
    /// Nacos clients look for it).
    #[arg(long, env = "ROSTER_GRPC", value_name = "ADDR")]
    pub grpc: Option<SocketAddr>,

    /// Serve the HTTP API over HTTPS only with this certificate chain (PEM); needs
    /// `--http-tls-key`. Reloaded when the file changes.
    #[arg(
        long,
        env = "ROSTER_HTTP_TLS_CERT",
        value_name = "FILE",
        requires = "http_tls_key"
    )]
    pub http_tls_cert: Option<PathBuf>,

    /// The private key (PEM) of `--http-tls-cert`.
    #[arg(
        long,
        env = "ROSTER_HTTP_TLS_KEY",
        value_name = "FILE",
        requires = "http_tls_cert"
    )]
    pub http_tls_key: Option<PathBuf>,

    /// Serve gRPC over TLS with this certificate chain (PEM); needs `--grpc-tls-key`.
    #[arg(
        long,
        env = "ROSTER_GRPC_TLS_CERT",
        value_name = "FILE",
        requires = "grpc_tls_key"
    )]
    pub grpc_tls_cert: Option<PathBuf>,

    /// The private key (PEM) of `--grpc-tls-cert`.
    #[arg(
        long,
        env = "ROSTER_GRPC_TLS_KEY",
        value_name = "FILE",
        requires = "grpc_tls_cert"
    )]
    pub grpc_tls_key: Option<PathBuf>,

    /// With TLS on, also accept plaintext gRPC on the same port (Nacos' compatibility
    /// mode), to move clients to TLS one at a time.
    #[arg(long, env = "ROSTER_GRPC_TLS_OPTIONAL", requires = "grpc_tls_cert")]
    pub grpc_tls_optional: bool,

    /// Most HTTP connections open at once; a new one beyond is closed at once.
    #[arg(long, env = "ROSTER_HTTP_MAX_CONNECTIONS", default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_max_connections: u64,

    /// Seconds an HTTP request head may take from its first byte (a new connection's
    /// first head, from connecting); the connection is closed when it runs out.
    #[arg(long, env = "ROSTER_HTTP_HEADER_TIMEOUT_SECS", default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_header_timeout_secs: u64,

    /// Seconds an HTTP keep-alive connection may sit idle between requests.
    #[arg(long, env = "ROSTER_HTTP_IDLE_TIMEOUT_SECS", default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_idle_timeout_secs: u64,

    /// Most HTTP connections open at once from one client IP (an IPv6 client by its
    /// address); a new one beyond is closed at once. Behind a proxy that funnels clients
    /// through one address, raise it to `--http-max-connections`.
    #[arg(long, env = "ROSTER_HTTP_MAX_CONNECTIONS_PER_IP", default_value_t = 1_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_max_connections_per_ip: u64,

    /// Seconds a request body may go without a byte arriving while it is read; the
    /// request is answered 408 and its connection closed. A slow body that keeps
    /// arriving is not cut, however long it takes.
    #[arg(long, env = "ROSTER_HTTP_BODY_TIMEOUT_SECS", default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_body_timeout_secs: u64,

    /// Most gRPC connections open at once; a new one beyond is closed at once.
    #[arg(long, env = "ROSTER_GRPC_MAX_CONNECTIONS", default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub grpc_max_connections: u64,

    /// Most gRPC connections open at once from one client IP.
    #[arg(long, env = "ROSTER_GRPC_MAX_CONNECTIONS_PER_IP", default_value_t = 500, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub grpc_max_connections_per_ip: u64,

    /// Seconds a gRPC connection may go without a set-up client (Nacos'
    /// `ConnectionSetupRequest`): from connecting, and after its stream ends.
    #[arg(long, env = "ROSTER_GRPC_SETUP_TIMEOUT_SECS", default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub grpc_setup_timeout_secs: u64,

    /// Do not move gRPC clients between members by itself. By default a node whose
    /// share of the ready members' gRPC clients is more than 10 % (and 5 clients) above
    /// the mean while another's is below asks some of its clients (connected over a
    /// minute ago) to reconnect to the members below the mean; Nacos' manual
    /// `loader/smartReloadCluster`, `reloadCurrent` and `reloadClient` work either way.
    #[arg(long, env = "ROSTER_NO_GRPC_REBALANCE")]
    pub no_grpc_rebalance: bool,

    /// Most gRPC clients a node asks to move at a time; it then waits 5 s for the
    /// members' counts to show the move before it moves more.
    #[arg(long, env = "ROSTER_GRPC_REBALANCE_BATCH", default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub grpc_rebalance_batch: u64,

    /// Serve the web console from this directory (a `console-ui/dist` build) instead of
    /// the one built into the binary: for console development.
    #[arg(long, env = "ROSTER_CONSOLE_DIR", value_name = "DIR")]
    pub console_dir: Option<PathBuf>,

    /// Address of the node-to-node channel (Raft); this node's identity in the cluster.
    #[arg(
        long,
        env = "ROSTER_PEER",
        default_value = "127.0.0.1:7848",
        value_name = "ADDR"
    )]
    pub peer: SocketAddr,

    /// Serve and speak the peer channel over mutual TLS with this certificate chain
    /// (PEM), which must name this node's `--members` host; needs `--peer-tls-key` and
    /// `--peer-tls-ca`. Without it, messages are still encrypted under the cluster secret.
    #[arg(
        long,
        env = "ROSTER_PEER_TLS_CERT",
        value_name = "FILE",
        requires_all = ["peer_tls_key", "peer_tls_ca"]
    )]
    pub peer_tls_cert: Option<PathBuf>,

    /// The private key (PEM) of `--peer-tls-cert`.
    #[arg(
        long,
        env = "ROSTER_PEER_TLS_KEY",
        value_name = "FILE",
        requires = "peer_tls_cert"
    )]
    pub peer_tls_key: Option<PathBuf>,

    /// The cluster's CA (PEM): peers' certificates, server and client, must be signed by it.
    #[arg(
        long,
        env = "ROSTER_PEER_TLS_CA",
        value_name = "FILE",
        requires = "peer_tls_cert"
    )]
    pub peer_tls_ca: Option<PathBuf>,

    /// Most connections the peer listener keeps open at once; more are closed at once.
    #[arg(long, env = "ROSTER_PEER_MAX_CONNECTIONS", default_value_t = 1024, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub peer_max_connections: u64,

    /// Seconds a peer connection gets for its TLS handshake and each request head (and
    /// for any stall in a message body).
    #[arg(long, env = "ROSTER_PEER_HEADER_TIMEOUT_SECS", default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub peer_header_timeout_secs: u64,

    /// Seconds a peer connection may sit idle between requests before it is closed.
    #[arg(long, env = "ROSTER_PEER_IDLE_TIMEOUT_SECS", default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub peer_idle_timeout_secs: u64,

    /// Directory for the Raft log, snapshots and the initial admin password.
    #[arg(
        long,
        env = "ROSTER_DATA_DIR",
        default_value = "./roster-data",
        value_name = "DIR"
    )]
    pub data_dir: PathBuf,

    /// This node's id in the cluster (a positive integer).
    #[arg(long, env = "ROSTER_NODE_ID", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub node_id: u64,

    /// The cluster's members, `ID=HOST:PORT,...` (peer addresses, this node included).
    /// The lowest id forms the cluster once a majority is reachable. Without it the node
    /// is a cluster of one.
    #[arg(long, env = "ROSTER_MEMBERS", value_name = "LIST")]
    pub members: Option<String>,

    /// Start as a node to be added to a running cluster (`roster cluster add`): never
    /// form a cluster of its own.
    #[arg(long, env = "ROSTER_JOIN")]
    pub join: bool,

    /// File holding the cluster secret that authenticates peer messages (required when
    /// `--members` names more than one node). `ROSTER_CLUSTER_SECRET` gives it directly.
    #[arg(long, env = "ROSTER_CLUSTER_SECRET_FILE", value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,

    /// Log filter, e.g. `info` or `roster=debug,info`; `RUST_LOG` wins when set.
    #[arg(
        long,
        env = "ROSTER_LOG_LEVEL",
        default_value = "info",
        value_name = "FILTER"
    )]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "ROSTER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Turn authentication off. For local development only: anyone who reaches the
    /// HTTP port can then read and change everything.
    #[arg(long, env = "ROSTER_NO_AUTH")]
    pub no_auth: bool,

    /// Lifetime of access tokens, in seconds.
    #[arg(
        long,
        env = "ROSTER_TOKEN_TTL_SECS",
        default_value_t = 18_000,
        value_name = "SECS"
    )]
    pub token_ttl_secs: u64,

    /// Most argon2 password checks (and hashes) running at once, ~19 MiB each. A check
    /// that waits 2 s for a turn is answered 429. Default: one per core.
    #[arg(long, env = "ROSTER_MAX_PASSWORD_CHECKS", default_value_t = default_password_checks(), value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_password_checks: u32,

    /// Remove services that have no instances and no stored settings after this many
    /// seconds (0 keeps them; Nacos removes them after 60 s without a way to stop it).
    #[arg(
        long,
        env = "ROSTER_EMPTY_SERVICE_TTL_SECS",
        default_value_t = 0,
        value_name = "SECS"
    )]
    pub empty_service_ttl_secs: u64,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "ROSTER_MAX_BODY_BYTES", default_value_t = 1024 * 1024, value_name = "BYTES")]
    pub max_body_bytes: usize,

    /// Largest configuration content accepted (the Nacos config API), in bytes. Requests
    /// to the config API may be up to three times this plus 64 KiB (percent-encoded
    /// content), whatever --max-body-bytes says.
    #[arg(long, env = "ROSTER_CONFIG_MAX_CONTENT_BYTES", default_value_t = 1024 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..=64 * 1024 * 1024))]
    pub config_max_content_bytes: u64,

    /// Most configuration items one listener may listen to: one HTTP long poll, or one
    /// gRPC connection (its listens added up).
    #[arg(long, env = "ROSTER_CONFIG_MAX_LISTENERS", default_value_t = 10_000, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub config_max_listeners: u64,

    /// Most distinct service patterns fuzzy watched (Nacos 3) on this node at once; a
    /// watch of one more is refused (errorCode 50310). Nacos: 20.
    #[arg(long, env = "ROSTER_NAMING_FUZZY_WATCH_MAX_PATTERNS", default_value_t = 20, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub naming_fuzzy_watch_max_patterns: u64,

    /// Most services one fuzzy watched pattern keeps and tells of; past it, a watch
    /// answers errorCode 50311 and new services are not told. Nacos: 500.
    #[arg(long, env = "ROSTER_NAMING_FUZZY_WATCH_MAX_SERVICES", default_value_t = 500, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub naming_fuzzy_watch_max_services: u64,

    /// Most distinct configuration patterns fuzzy watched on this node at once; a watch
    /// of one more is refused (errorCode 50310). Nacos: 20.
    #[arg(long, env = "ROSTER_CONFIG_FUZZY_WATCH_MAX_PATTERNS", default_value_t = 20, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub config_fuzzy_watch_max_patterns: u64,

    /// Most configuration items one fuzzy watched pattern keeps and tells of; past it,
    /// a watch answers errorCode 50311 and new items are not told. Nacos: 500.
    #[arg(long, env = "ROSTER_CONFIG_FUZZY_WATCH_MAX_ITEMS", default_value_t = 500, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub config_fuzzy_watch_max_items: u64,

    /// Days a configuration item's previous versions are kept.
    #[arg(long, env = "ROSTER_CONFIG_HISTORY_DAYS", default_value_t = 30, value_name = "DAYS", value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub config_history_days: u64,

    /// Most versions kept per configuration item (the current one among them).
    #[arg(long, env = "ROSTER_CONFIG_HISTORY_MAX", default_value_t = 100, value_name = "COUNT", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub config_history_max: u32,

    /// Largest instance or service metadata accepted (keys plus values), in bytes.
    /// Nacos' 1024 breaks Dubbo 2 registrations; roster allows more by default.
    #[arg(long, env = "ROSTER_MAX_METADATA_BYTES", default_value_t = 16 * 1024, value_name = "BYTES")]
    pub max_metadata_bytes: usize,

    /// Most MiB of serialized instance lists kept cached between changes (a list over
    /// the budget is served and not kept).
    #[arg(
        long,
        env = "ROSTER_LIST_CACHE_MIB",
        default_value_t = 64,
        value_name = "MIB"
    )]
    pub list_cache_mib: usize,

    /// Build a Raft snapshot (and compact the log) after this many log entries.
    #[arg(long, env = "ROSTER_RAFT_SNAPSHOT_LOGS", default_value_t = 5000, value_name = "ENTRIES", value_parser = clap::value_parser!(u64).range(1..))]
    pub raft_snapshot_logs: u64,

    /// Seconds between health checks of persistent instances (TCP or HTTP, per cluster).
    #[arg(long, env = "ROSTER_HEALTH_CHECK_INTERVAL_SECS", default_value_t = 5, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub health_check_interval_secs: u64,

    /// Networks health checks never connect to, comma-separated CIDRs (empty: none).
    /// This node's own listening sockets are never probed either, whatever this says.
    #[arg(
        long,
        env = "ROSTER_HEALTH_CHECK_DENY",
        default_value = crate::services::health::deny::DEFAULT_DENY,
        value_name = "CIDRS"
    )]
    pub health_check_deny: crate::services::health::deny::DenyNets,

    /// Seconds between Distro verification rounds (owners confirm their clients to
    /// peers; a copy unconfirmed for three rounds is dropped).
    #[arg(long, env = "ROSTER_DISTRO_VERIFY_SECS", default_value_t = 5, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub distro_verify_secs: u64,

    /// Eviction guard: hold removals in a namespace when more than this share of its
    /// ephemeral instances is silent at once (1 turns the guard off).
    #[arg(
        long,
        env = "ROSTER_EVICTION_GUARD_SHARE",
        default_value_t = 0.5,
        value_name = "SHARE"
    )]
    pub eviction_guard_share: f64,

    /// Eviction guard: ... and at least this many are.
    #[arg(
        long,
        env = "ROSTER_EVICTION_GUARD_MIN",
        default_value_t = 10,
        value_name = "COUNT"
    )]
    pub eviction_guard_min: usize,

    /// Serve DNS (UDP and TCP) on this address, e.g. `127.0.0.1:8600`. Off by default.
    #[arg(long, env = "ROSTER_DNS", value_name = "ADDR")]
    pub dns: Option<SocketAddr>,

    /// The namespace Eureka clients' applications live in (the Eureka API at `/eureka/`
    /// registers into and lists it).
    #[arg(
        long,
        env = "ROSTER_EUREKA_NAMESPACE",
        default_value = "public",
        value_name = "NAMESPACE"
    )]
    pub eureka_namespace: String,

    /// The group Eureka clients' applications live in.
    #[arg(
        long,
        env = "ROSTER_EUREKA_GROUP",
        default_value = "DEFAULT_GROUP",
        value_name = "GROUP"
    )]
    pub eureka_group: String,

    /// The namespace Consul clients' services live in (the Consul API at `/v1/`
    /// registers into and lists it).
    #[arg(
        long,
        env = "ROSTER_CONSUL_NAMESPACE",
        default_value = "public",
        value_name = "NAMESPACE"
    )]
    pub consul_namespace: String,

    /// The group Consul clients' services live in.
    #[arg(
        long,
        env = "ROSTER_CONSUL_GROUP",
        default_value = "DEFAULT_GROUP",
        value_name = "GROUP"
    )]
    pub consul_group: String,

    /// The datacenter the Consul API answers for (`/v1/agent/self`,
    /// `/v1/catalog/datacenters`; a `dc` other than it is refused).
    #[arg(
        long,
        env = "ROSTER_CONSUL_DATACENTER",
        default_value = "dc1",
        value_name = "NAME"
    )]
    pub consul_datacenter: String,

    /// Also serve the HTTP API (Consul's `/v1/` among it) on this address, e.g.
    /// `127.0.0.1:8500`, where Consul clients look by default. Off by default.
    #[arg(long, env = "ROSTER_CONSUL_HTTP", value_name = "ADDR")]
    pub consul_http: Option<SocketAddr>,

    /// Most Consul blocking queries waiting at once on this node; one more is answered
    /// 429.
    #[arg(
        long,
        env = "ROSTER_CONSUL_MAX_BLOCKING",
        default_value_t = 4096,
        value_name = "COUNT",
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub consul_max_blocking: u64,

    /// The DNS zone roster answers for.
    #[arg(
        long,
        env = "ROSTER_DNS_DOMAIN",
        default_value = "roster",
        value_name = "DOMAIN"
    )]
    pub dns_domain: String,

    /// TTL of DNS answers, seconds.
    #[arg(long, env = "ROSTER_DNS_TTL", default_value_t = 5, value_name = "SECS")]
    pub dns_ttl: u32,

    /// The namespaces DNS answers for, comma-separated (`*`: all). DNS carries no
    /// identity, so names in any other namespace are NXDOMAIN.
    #[arg(
        long,
        env = "ROSTER_DNS_NAMESPACES",
        default_value = "public",
        value_delimiter = ',',
        value_name = "IDS"
    )]
    pub dns_namespaces: Vec<String>,

    /// Write a backup snapshot of all persistent state this often (e.g. `1h`, `30m`,
    /// `1h30m`, `90s`); off by default. Same file format as `roster snapshot save`.
    #[arg(long, env = "ROSTER_SNAPSHOT_EVERY", value_name = "DURATION", value_parser = crate::services::backup::duration::parse)]
    pub snapshot_every: Option<Duration>,

    /// Directory of scheduled snapshots (default: <data-dir>/backups). Files are named
    /// roster-<UTC time>-node<ID>.rsnap, so nodes may share one.
    #[arg(long, env = "ROSTER_SNAPSHOT_DIR", value_name = "DIR")]
    pub snapshot_dir: Option<PathBuf>,

    /// How many of this node's scheduled snapshots to keep; older ones are deleted.
    #[arg(long, env = "ROSTER_SNAPSHOT_KEEP", default_value_t = 24, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_keep: u64,

    /// Seconds a UDP push subscriber stays registered after its last list query.
    #[arg(
        long,
        env = "ROSTER_SUBSCRIBER_TTL_SECS",
        default_value_t = 30,
        value_name = "SECS"
    )]
    pub subscriber_ttl_secs: u64,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::node::args::parse_from;

    #[test]
    fn defaults() {
        let cli = parse_from(["roster"]).unwrap();
        assert_eq!(cli.node.http.to_string(), "127.0.0.1:8848");
        assert_eq!(cli.node.peer.to_string(), "127.0.0.1:7848");
        assert_eq!(cli.node.node_id, 1);
        assert!(!cli.node.no_auth);
    }

    #[test]
    fn health_check_deny_takes_networks() {
        let cli = parse_from(["roster"]).unwrap();
        assert_eq!(
            cli.node.health_check_deny.to_string(),
            "169.254.0.0/16,fe80::/10"
        );
        let cli = parse_from(["roster", "--health-check-deny", "10.0.0.0/8, 127.0.0.2"]).unwrap();
        assert_eq!(
            cli.node.health_check_deny.to_string(),
            "10.0.0.0/8,127.0.0.2/32"
        );
        let cli = parse_from(["roster", "--health-check-deny", ""]).unwrap();
        assert!(cli.node.health_check_deny.0.is_empty());
        let err = parse_from(["roster", "--health-check-deny", "10.0.0.0/99"]).unwrap_err();
        assert!(err.to_string().contains("10.0.0.0/99"), "{err}");
    }

    #[test]
    fn peer_tls_takes_all_three_files_and_peer_limits_have_defaults() {
        let cli = parse_from(["roster"]).unwrap();
        assert!(cli.node.peer_tls_cert.is_none());
        assert_eq!(cli.node.peer_max_connections, 1024);
        assert_eq!(cli.node.peer_header_timeout_secs, 10);
        assert_eq!(cli.node.peer_idle_timeout_secs, 60);
        let all = [
            "roster",
            "--peer-tls-cert",
            "c.pem",
            "--peer-tls-key",
            "k.pem",
            "--peer-tls-ca",
            "ca.pem",
        ];
        assert!(parse_from(all).unwrap().node.peer_tls_ca.is_some());
        assert!(parse_from(&all[..5]).is_err(), "no CA");
        assert!(parse_from(&all[..3]).is_err(), "no key, no CA");
        assert!(parse_from(["roster", "--peer-tls-ca", "ca.pem"]).is_err());
        assert!(parse_from(["roster", "--peer-idle-timeout-secs", "0"]).is_err());
    }

    #[test]
    fn http_tls_takes_cert_and_key() {
        assert!(parse_from(["roster"]).unwrap().node.http_tls_cert.is_none());
        let both = [
            "roster",
            "--http-tls-cert",
            "c.pem",
            "--http-tls-key",
            "k.pem",
        ];
        assert!(parse_from(both).unwrap().node.http_tls_key.is_some());
        assert!(parse_from(&both[..3]).is_err(), "no key");
        assert!(parse_from(["roster", "--http-tls-key", "k.pem"]).is_err());
    }

    #[test]
    fn scheduled_snapshots_take_a_duration() {
        let cli = parse_from(["roster", "--snapshot-every", "1h", "--snapshot-keep", "3"]).unwrap();
        assert_eq!(cli.node.snapshot_every, Some(Duration::from_secs(3600)));
        assert_eq!(cli.node.snapshot_keep, 3);
        assert!(parse_from(["roster"])
            .unwrap()
            .node
            .snapshot_every
            .is_none());
        let err = parse_from(["roster", "--snapshot-every", "soon"]).unwrap_err();
        assert!(err.to_string().contains("--snapshot-every"), "{err}");
    }
}
