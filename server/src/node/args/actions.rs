//! What the subcommands do: the actions of `roster cluster`, `instance`, `sync`, `auth`
//! and `snapshot`, and how the client ones reach a node ([`ClientArgs`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::OutputFormat;

/// `roster snapshot` actions.
#[derive(Debug, Subcommand)]
pub enum SnapshotAction {
    /// Take a snapshot through a node's HTTP API (admins) and write it to FILE.
    Save {
        /// Where to write it (through FILE.tmp, fsynced, then renamed).
        file: PathBuf,
        /// Overwrite FILE if it exists.
        #[arg(long)]
        force: bool,
        /// Do not first catch up with the leader: for a node that has lost its leader
        /// (the snapshot is still consistent, as of what this node has applied).
        #[arg(long)]
        stale: bool,
        /// How to reach the node.
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Verify a snapshot file and summarize it (offline).
    Inspect {
        /// The snapshot file.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        output: OutputFormat,
    },
    /// Make an empty (or new) data dir the data of a new cluster founded by one node,
    /// holding the snapshot's state (offline). Start the node on it as usual, without
    /// --members, and grow the cluster with `roster cluster add`.
    Restore {
        /// The snapshot file.
        file: PathBuf,
        /// The data dir to create; it must be empty or absent.
        #[arg(long, env = "ROSTER_DATA_DIR", value_name = "DIR")]
        data_dir: PathBuf,
        /// The id of the node that will run on it (its --node-id).
        #[arg(long, env = "ROSTER_NODE_ID", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        node_id: u64,
        /// The address peers will reach that node at (its --peer, or its entry in
        /// --members): stored in the new cluster's membership.
        #[arg(
            long,
            env = "ROSTER_PEER",
            default_value = "127.0.0.1:7848",
            value_name = "HOST:PORT"
        )]
        peer: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        output: OutputFormat,
    },
}

/// `roster auth` actions.
#[derive(Debug, Subcommand)]
pub enum AuthAction {
    /// Replace the token signing key on every node. Tokens signed by the old key keep
    /// working until they expire (at most a token lifetime); new tokens use the new key.
    RotateKey {
        /// Stop accepting every token signed by an older key at once (when a key may
        /// have leaked); every client logs in again.
        #[arg(long)]
        drop_previous: bool,
    },
    /// Create a long-lived API token for a user (for clients that hold one static
    /// credential: Prometheus, Consul clients, scripts). It acts with the user's
    /// permissions until revoked or the user is deleted; it is printed once.
    TokenCreate {
        /// The user it acts as.
        #[arg(long)]
        user: String,
        /// What it is for.
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List the API tokens (never their secrets).
    Tokens {
        /// Only this user's.
        #[arg(long)]
        user: Option<String>,
    },
    /// Revoke an API token on every node.
    TokenRevoke {
        /// Its id (from `roster auth tokens`).
        id: String,
    },
}

/// `roster sync` actions.
#[derive(Debug, Subcommand)]
pub enum SyncAction {
    /// Create a task that imports a whole source registry (or the services a filter
    /// admits) and keeps it in step.
    Add {
        /// Task name (letters, digits, '-', '_', '.').
        #[arg(long)]
        name: String,
        /// The source, e.g. etcd://127.0.0.1:2379?layout=go-micro,
        /// zookeeper://127.0.0.1:2181?layout=dubbo, consul://127.0.0.1:8500?dc=dc1,
        /// eureka://127.0.0.1:8761/eureka, nacos://127.0.0.1:8848?namespace=prod.
        #[arg(long, value_name = "URL")]
        from: String,
        /// Target namespace (default: the source's for Nacos, else public).
        #[arg(long = "namespace", value_name = "NS")]
        target_namespace: Option<String>,
        /// Target group (default: the source's for Nacos, else DEFAULT_GROUP).
        #[arg(long)]
        group: Option<String>,
        /// Services to import: comma-separated globs, '!' excludes (default: all).
        #[arg(long, value_name = "FILTER")]
        services: Option<String>,
        /// Report what would be imported; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Seconds between full reconciles (default 60).
        #[arg(long, value_name = "SECS")]
        reconcile_secs: Option<u64>,
        /// Share of a service's instances that, vanishing at once, holds deletions (default 0.5).
        #[arg(long, value_name = "SHARE")]
        hold_share: Option<f64>,
        /// Fewest vanishing instances that can hold deletions (default 3).
        #[arg(long, value_name = "N")]
        hold_min: Option<usize>,
        /// Seconds a hold lasts while the source keeps saying they are gone (default 300).
        #[arg(long, value_name = "SECS")]
        hold_secs: Option<u64>,
    },
    /// Every task with its state and counts.
    List,
    /// One task in detail.
    Status {
        /// Task name.
        name: String,
    },
    /// Stop a task; its imported instances stay as they are.
    Pause {
        /// Task name.
        name: String,
    },
    /// Start a paused task again (a dry run stays a dry run: see `apply`).
    Resume {
        /// Task name.
        name: String,
    },
    /// Turn a dry-run task into a real one: it imports what its dry run reported, and
    /// keeps in step from then on.
    Apply {
        /// Task name.
        name: String,
    },
    /// Delete a task and every instance it imported.
    Delete {
        /// Task name.
        name: String,
    },
}

/// `roster instance` actions.
#[derive(Debug, Subcommand)]
pub enum InstanceAction {
    /// A service's instances in every cluster, disabled and unhealthy ones included,
    /// with the face that registered each (consul, eureka, grpc, http or sync:TASK).
    List {
        /// Service name (or GROUP@@NAME).
        service: String,
        /// Namespace id.
        #[arg(long, default_value = "public", value_name = "NS")]
        namespace: String,
        /// Group.
        #[arg(long, default_value = "DEFAULT_GROUP")]
        group: String,
    },
}

/// `roster cluster` actions.
#[derive(Debug, Subcommand)]
pub enum ClusterAction {
    /// Members, their roles, Raft positions and health.
    Status,
    /// Add a node: it joins as a learner, catches up, then becomes a voter. Start the
    /// new node first (with the cluster secret and `--join`).
    Add {
        /// The new node's id.
        id: u64,
        /// The new node's peer address (HOST:PORT).
        peer: String,
    },
    /// Remove a node from the cluster.
    Remove {
        /// The node's id.
        id: u64,
    },
}

/// How a client subcommand reaches a node. Listed under their own heading in `--help`,
/// apart from the subcommand's options.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Connection options")]
pub struct ClientArgs {
    /// The node's HTTP address: `HOST:PORT` or `http://HOST:PORT` (plaintext),
    /// `https://HOST:PORT` (TLS).
    #[arg(
        id = "target_http",
        long = "http",
        env = "ROSTER_HTTP",
        default_value = "127.0.0.1:8848",
        value_name = "ADDR",
        global = true
    )]
    pub http: String,
    /// User name.
    #[arg(long, env = "ROSTER_USERNAME", default_value = "nacos", global = true)]
    pub username: String,
    /// Password (visible to other users in the process list: prefer `ROSTER_PASSWORD`
    /// or `--password-file`).
    #[arg(long, env = "ROSTER_PASSWORD", hide_env_values = true, global = true)]
    pub password: Option<String>,
    /// Read the password from this file (its first line); wins over `--password`.
    #[arg(long, env = "ROSTER_PASSWORD_FILE", value_name = "FILE", global = true)]
    pub password_file: Option<PathBuf>,
    /// Trust the CA certificates (PEM) in this file for an `https://` address, instead
    /// of the system's.
    #[arg(long, env = "ROSTER_CACERT", value_name = "FILE", global = true)]
    pub cacert: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, global = true)]
    pub output: OutputFormat,
}

#[cfg(test)]
mod tests {
    use super::SnapshotAction;
    use crate::node::args::{parse_from, Command};

    #[test]
    fn clients_take_a_ca_and_a_password_file() {
        let cli = parse_from([
            "roster",
            "cluster",
            "status",
            "--http",
            "https://127.0.0.1:8848",
            "--cacert",
            "ca.pem",
            "--password-file",
            "pw",
        ])
        .unwrap();
        let Some(Command::Cluster { client, .. }) = cli.command else {
            panic!("a cluster command");
        };
        assert_eq!(client.http, "https://127.0.0.1:8848");
        assert_eq!(client.cacert.unwrap().to_str(), Some("ca.pem"));
        assert_eq!(client.password_file.unwrap().to_str(), Some("pw"));
    }

    #[test]
    fn recover_needs_a_node_id_and_restore_defaults_to_node_1() {
        assert!(parse_from(["roster", "recover", "--data-dir", "d"]).is_err());
        let cli = parse_from(["roster", "recover", "--data-dir", "d", "--node-id", "3"]).unwrap();
        let Some(Command::Recover(args)) = cli.command else {
            panic!("recover");
        };
        assert_eq!(args.node_id, 3);
        let cli = parse_from(["roster", "snapshot", "restore", "f", "--data-dir", "d"]).unwrap();
        let Some(Command::Snapshot {
            action: SnapshotAction::Restore { node_id, peer, .. },
        }) = cli.command
        else {
            panic!("restore");
        };
        assert_eq!((node_id, peer.as_str()), (1, "127.0.0.1:7848"));
    }
}
