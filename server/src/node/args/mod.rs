//! Command line and configuration. Every flag can also come from an environment variable
//! `ROSTER_<FLAG>` and from a TOML file given with `--config`; precedence is command
//! line, then environment, then file, then the built-in default.
//!
//! Here the command line's top ([`Cli`], [`Command`]) and its parsing with the config
//! file ([`parse`]); `run.rs` the flags of a running node ([`NodeArgs`]); `actions.rs` the
//! subcommands' actions and how the client ones reach a node ([`ClientArgs`]). The
//! offline commands' [`RecoverArgs`] and [`OutputFormat`] live with what they drive,
//! `crate::services::backup::report`, and are re-exported here.

mod actions;
mod run;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use crate::services::backup::report::{OutputFormat, RecoverArgs};
pub use actions::{
    AuthAction, ClientArgs, ClusterAction, InstanceAction, SnapshotAction, SyncAction,
};
pub use run::{LogFormat, NodeArgs};

/// roster: a clustered service registry that speaks the Nacos naming protocol.
#[derive(Debug, Parser)]
#[command(name = "roster", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// Read defaults for every flag from this TOML file (keys are flag names, e.g.
    /// `http = "0.0.0.0:8848"`, `data-dir = "/var/lib/roster"`).
    #[arg(long, env = "ROSTER_CONFIG", value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// What to do; with no subcommand, run a node.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// How to run a node.
    #[command(flatten)]
    pub node: NodeArgs,
}

/// The end of `roster --help`: what a first start needs to know beyond the flags.
const AFTER_HELP: &str = "\
First start: the admin user is `nacos`, with the password in ROSTER_ADMIN_PASSWORD if that \
is set, else a generated one written to <data-dir>/initial-admin-password (mode 0600).

Ports: HTTP --http (127.0.0.1:8848), gRPC --grpc (default: the HTTP port + 1000, 9848), \
peer channel --peer (127.0.0.1:7848), taken by a single node too. Beside a Nacos on its \
defaults: roster --http 127.0.0.1:18848 --peer 127.0.0.1:17848 (gRPC 19848).

Client subcommands (cluster, instance, sync, auth, snapshot save) log in with --password-file FILE or \
ROSTER_PASSWORD; `roster <subcommand> --help` lists their options.";

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node (the default).
    Run,
    /// Show or change the cluster's membership, through any node's HTTP API.
    Cluster {
        /// What to do.
        #[command(subcommand)]
        action: ClusterAction,
        /// How to reach the node.
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List a service's instances, with the face that registered each, through any
    /// node's HTTP API.
    Instance {
        /// What to do.
        #[command(subcommand)]
        action: InstanceAction,
        /// How to reach the node.
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Import from Nacos, Consul, Eureka, ZooKeeper or etcd: manage sync tasks through
    /// any node's HTTP API.
    Sync {
        /// What to do.
        #[command(subcommand)]
        action: SyncAction,
        /// How to reach the node.
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Manage authentication cluster-wide, through any node's HTTP API.
    Auth {
        /// What to do.
        #[command(subcommand)]
        action: AuthAction,
        /// How to reach the node.
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Back up all persistent state (namespaces, persistent instances, service settings,
    /// users and grants, sync tasks, configurations) to a file, inspect one, or restore
    /// one into an empty data dir.
    Snapshot {
        /// What to do.
        #[command(subcommand)]
        action: SnapshotAction,
    },
    /// After losing a quorum for good: make this stopped node a cluster of one that holds
    /// every entry of its Raft log (the old files are kept in
    /// <data-dir>/pre-recover-<time>/). Start it without --members, then add nodes with
    /// `roster cluster add`. Never start the lost members again with their old data.
    Recover(RecoverArgs),
}

/// Why the command line or config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag problem, or `--help` / `--version` (clap prints and exits).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// A config file problem.
    #[error("{0}")]
    File(String),
}

/// Parses the process's command line, environment and `--config` file.
pub fn parse() -> Result<Cli, ConfigError> {
    parse_from(std::env::args_os())
}

/// Like [`parse`], from explicit arguments (the environment still applies).
pub fn parse_from<I, T>(args: I) -> Result<Cli, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut command = Cli::command();
    if let Some(path) = config_path(&args) {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::File(format!("cannot read config file {}: {e}", path.display()))
        })?;
        let table: toml::Table = text
            .parse()
            .map_err(|e| ConfigError::File(format!("config file {}: {e}", path.display())))?;
        for (key, value) in table {
            let id = key.replace('-', "_");
            let known = command
                .get_arguments()
                .any(|a| a.get_id() == id.as_str() && a.get_long().is_some() && id != "config");
            if !known {
                return Err(ConfigError::File(format!(
                    "config file {}: unknown key '{key}'",
                    path.display()
                )));
            }
            let value = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(ConfigError::File(format!(
                        "config file {}: key '{key}' must be a string, number or boolean, not {}",
                        path.display(),
                        other.type_str()
                    )))
                }
            };
            // The file supplies defaults: the environment and the command line still win.
            let value: &'static str = Box::leak(value.into_boxed_str());
            command = command.mut_arg(id, |a| a.default_value(value));
        }
    }
    let matches = command.try_get_matches_from(args)?;
    Ok(Cli::from_arg_matches(&matches)?)
}

/// Finds `--config FILE` / `--config=FILE` in `args`, else `ROSTER_CONFIG`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter().skip(1);
    while let Some(arg) = iter.next() {
        let arg = arg.to_string_lossy();
        if arg == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("ROSTER_CONFIG").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_gives_defaults_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roster.toml");
        std::fs::write(
            &path,
            "http = \"127.0.0.1:9000\"\nnode-id = 3\nno_auth = true\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let cli = parse_from(["roster", "--config", p]).unwrap();
        assert_eq!(cli.node.http.port(), 9000);
        assert_eq!(cli.node.node_id, 3);
        assert!(cli.node.no_auth);
        let cli = parse_from(["roster", "--config", p, "--http", "127.0.0.1:9001"]).unwrap();
        assert_eq!(cli.node.http.port(), 9001);
    }

    #[test]
    fn config_file_rejects_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roster.toml");
        std::fs::write(&path, "htp = \"x\"\n").unwrap();
        let err = parse_from(["roster", "--config", path.to_str().unwrap()]).unwrap_err();
        assert!(err.to_string().contains("unknown key 'htp'"), "{err}");
    }
}
