//! What the offline commands print: `roster snapshot inspect` and `restore`, `roster
//! recover` (and the summary `roster snapshot save` ends with), as text for people or
//! JSON (`--output json`) for programs; and what they take from the command line:
//! [`OutputFormat`] (the client subcommands share it) and [`RecoverArgs`], which
//! `node::args` places in the command line.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use roster_raft::LogId;

use super::format::SnapshotFile;
use super::Recovered;
use crate::services::store::machine::StateCounts;

/// Writes a line to stdout, returning the error instead of panicking as `println!`
/// does: stdout may be a pipe its reader closed.
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)?
    };
}

/// Output format (`--output`) of the client and offline subcommands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// For programs.
    Json,
}

/// `roster recover` options.
#[derive(Clone, Debug, Args)]
pub struct RecoverArgs {
    /// The stopped node's data dir.
    #[arg(long, env = "ROSTER_DATA_DIR", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The node's id (its --node-id): required, a data dir does not say whose it is.
    #[arg(long, env = "ROSTER_NODE_ID", value_parser = clap::value_parser!(u64).range(1..))]
    pub node_id: u64,
    /// The node's peer address in the new cluster (default: its address in the old
    /// membership).
    #[arg(long, value_name = "HOST:PORT")]
    pub peer: Option<String>,
    /// Only read and report what a recovery would keep; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// `roster snapshot inspect FILE`: verifies the file and prints what it holds.
pub fn inspect(file: &Path, output: OutputFormat) -> anyhow::Result<()> {
    let snapshot = super::read_file(file)?;
    print_snapshot(&snapshot, output)
}

/// `roster snapshot restore FILE --data-dir DIR`: restores and says how to start.
pub fn restore(
    file: &Path,
    data_dir: &Path,
    node_id: u64,
    peer: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    crate::services::cluster::parse_members(&format!("{node_id}={peer}"))
        .map_err(|e| anyhow::anyhow!("--peer {peer}: {e}"))?;
    let restored = super::restore(file, data_dir, node_id, peer)?;
    if output == OutputFormat::Json {
        out!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "dataDir": data_dir,
                "nodeId": node_id,
                "peer": peer,
                "snapshot": restored.meta,
            }))?
        );
        return Ok(());
    }
    let m = &restored.meta;
    out!(
        "restored the snapshot taken {} on node {} (index {} term {}) into {}",
        m.created_at,
        m.node_id,
        m.last_applied_index,
        m.last_applied_term,
        data_dir.display()
    );
    out!("it is now the data of a new cluster of one: node {node_id} at {peer}");
    out!(
        "start it: roster --data-dir {} --node-id {node_id} --peer {peer} (no --members)",
        data_dir.display()
    );
    out!("then add nodes: start each with --join and an empty data dir, and run roster cluster add ID HOST:PORT");
    Ok(())
}

/// One line of counts: `2 namespace(s), 3 persistent instance(s), ...`.
pub fn summary(c: &StateCounts) -> String {
    format!(
        "{} namespace(s), {} service setting(s), {} persistent instance(s), {} user(s), {} role binding(s), {} grant(s), {} sync task(s), {} config(s)",
        c.namespaces,
        c.services,
        c.persistent_instances,
        c.users,
        c.role_bindings,
        c.grants,
        c.sync_tasks,
        c.configs
    )
}

/// Prints a verified snapshot file's metadata and checksum.
pub fn print_snapshot(snapshot: &SnapshotFile, output: OutputFormat) -> anyhow::Result<()> {
    let m = &snapshot.meta;
    if output == OutputFormat::Json {
        out!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "formatVersion": snapshot.version,
                "sha256": snapshot.checksum,
                "stateBytes": snapshot.state.len(),
                "meta": m,
            }))?
        );
        return Ok(());
    }
    let c = &m.counts;
    out!("format:     roster snapshot version {}", snapshot.version);
    out!(
        "taken:      {} on node {} (roster {})",
        m.created_at,
        m.node_id,
        m.roster_version
    );
    out!(
        "log:        index {} term {}",
        m.last_applied_index,
        m.last_applied_term
    );
    out!("members:    {}", super::describe_members(&m.members));
    out!(
        "state:      {} bytes, sha256 {}",
        snapshot.state.len(),
        snapshot.checksum
    );
    out!("namespaces:           {}", c.namespaces);
    out!("service settings:     {}", c.services);
    out!("persistent instances: {}", c.persistent_instances);
    out!("users:                {}", c.users);
    out!("role bindings:        {}", c.role_bindings);
    out!("grants:               {}", c.grants);
    out!("sync tasks:           {}", c.sync_tasks);
    out!(
        "configs:              {} ({} versions in history)",
        c.configs,
        c.config_versions
    );
    Ok(())
}

/// Runs `roster recover`.
pub fn recover(args: RecoverArgs) -> anyhow::Result<()> {
    let done = super::recover(
        &args.data_dir,
        args.node_id,
        args.peer.as_deref(),
        args.dry_run,
        roster_registry::clock::now_ms(),
    )?;
    match args.output {
        OutputFormat::Json => print_recovery_json(&args, &done),
        OutputFormat::Text => print_recovery(&args, &done),
    }
}

/// `index N term T`, or `none`.
fn position(l: Option<LogId>) -> String {
    match l {
        Some(l) => format!("index {} term {}", l.index, l.leader_id.term),
        None => "none".into(),
    }
}

fn print_recovery_json(args: &RecoverArgs, done: &Recovered) -> anyhow::Result<()> {
    let r = &done.recovery;
    let json_pos = |l: Option<LogId>| {
        l.map(|l| serde_json::json!({"index": l.index, "term": l.leader_id.term}))
    };
    out!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "dryRun": args.dry_run,
            "nodeId": args.node_id,
            "peer": r.peer_addr,
            "snapshot": json_pos(r.snapshot),
            "committedHint": json_pos(r.committed_hint),
            "lastApplied": json_pos(r.last_applied),
            "appliedFromLog": r.applied_entries,
            "beyondCommittedHint": r.beyond_hint,
            "previousMembers": r.previous_members,
            "backup": done.backup,
        }))?
    );
    Ok(())
}

fn print_recovery(args: &RecoverArgs, done: &Recovered) -> anyhow::Result<()> {
    let r = &done.recovery;
    match &done.backup {
        None => out!("dry run: nothing changed in {}", args.data_dir.display()),
        Some(backup) => out!(
            "recovered node {} in {} as a cluster of one at {}; the old raft data is in {}",
            args.node_id,
            args.data_dir.display(),
            r.peer_addr,
            backup.display()
        ),
    }
    out!("last applied:     {}", position(r.last_applied));
    out!("snapshot:         {}", position(r.snapshot));
    out!("committed hint:   {}", position(r.committed_hint));
    out!("applied from log: {} entries", r.applied_entries);
    if r.beyond_hint > 0 {
        out!(
            "beyond the hint:  {} entries after the committed hint, kept: the lost members may or may not have committed them (the hint is written lazily)",
            r.beyond_hint
        );
    }
    out!(
        "previous members: {}",
        super::describe_members(&r.previous_members)
    );
    out!(
        "anything the lost members committed after {} was never in this node's log: it is lost",
        position(r.last_applied)
    );
    if done.backup.is_some() {
        out!(
            "next: start node {} without --members (never start the lost members on their old data), then grow the cluster with roster cluster add ID HOST:PORT",
            args.node_id
        );
    }
    Ok(())
}
