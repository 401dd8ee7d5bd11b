//! The `roster` binary: parses flags, sets up logging, binds listeners and runs a node.

use std::process::ExitCode;

use roster::node::args::{self, Cli, Command, LogFormat, NodeArgs};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    fix_mmap_threshold();
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(args::ConfigError::Clap(e)) => e.exit(),
        Err(e) => {
            eprintln!("roster: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&cli.node);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("roster: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let node = matches!(cli.command, None | Some(Command::Run));
    match runtime.block_on(dispatch(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // `roster sync list | head -1`: the reader has what it wanted.
        Err(e) if !node && roster::cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Said once: a node in its log (which may be JSON, or a file), a client
            // subcommand on the terminal.
            if node {
                tracing::error!(error = %format!("{e:#}"), "roster stopped");
            } else {
                eprintln!("roster: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Fixes glibc's mmap threshold at its default, 128 KiB, unless the environment sets it.
///
/// glibc raises the threshold each time a block above it is freed (up to 32 MiB), so
/// after the first large transient buffer (a Distro batch, a verification round over
/// every client, a snapshot) such buffers come from the heap between long-lived
/// instances, and the heap cannot shrink past them: on three nodes at 100,000 instances
/// that was ~130 bytes per instance of RSS holding nothing (README, "Memory"). Above a
/// fixed threshold they are mapped and unmapped whole; a few such buffers per second
/// cost nothing measurable.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_mmap_threshold() {
    let tuned = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold"));
    if !tuned {
        // SAFETY: mallopt only sets a malloc parameter; it runs before any other thread
        // exists and takes no pointers.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_mmap_threshold() {}

async fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None | Some(Command::Run) => run_node(cli.node).await,
        Some(Command::Cluster { action, client }) => roster::cli::cluster(action, client).await,
        Some(Command::Instance { action, client }) => roster::cli::instance(action, client).await,
        Some(Command::Sync { action, client }) => roster::cli::sync(action, client).await,
        Some(Command::Auth { action, client }) => roster::cli::auth(action, client).await,
        Some(Command::Snapshot { action }) => roster::cli::snapshot(action).await,
        Some(Command::Recover(args)) => roster::services::backup::report::recover(args),
    }
}

async fn run_node(args: NodeArgs) -> anyhow::Result<()> {
    if args.no_auth {
        tracing::warn!("AUTHENTICATION IS OFF (--no-auth): anyone who reaches {} can read and change everything; use this for local development only", args.http);
    }
    // Check the cluster settings before taking any port.
    let plan = roster::node::ClusterPlan::from_args(&args)?;
    let listeners = roster::Listeners::bind(&args).await?;
    roster::run(args, plan, listeners, shutdown_signal()).await
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

fn init_logging(args: &NodeArgs) {
    // RUST_LOG wins over --log-level, as operators expect.
    // openraft narrates every election at info; its core warns of every vote or
    // replication answer that arrives after the vote moved on ("A message will be
    // ignored because vote changed": each election, each membership change) and logs at
    // error every vote or leadership check a peer did not answer; its replication logs
    // every failed RPC (several a second while a peer is down) at error. roster logs what
    // an operator needs itself: cluster::watch the leader elected and the membership
    // changed, cluster::members peers going down and coming back, app's raft watchdog
    // a core that stopped on a fatal error (which openraft's core logs once, too). So the
    // default silences openraft's core and replication and keeps its other warnings.
    // `--log-level` at debug or trace, or naming openraft, or RUST_LOG, drops these.
    let quiet = "openraft=warn,openraft::core::raft_core=off,openraft::replication=off,openraft::engine::handler::replication_handler=error";
    let level = args.log_level.trim();
    let raised = level.contains("openraft")
        || ["debug", "trace"].contains(&level.to_ascii_lowercase().as_str());
    let directives = if raised {
        level.to_string()
    } else {
        format!("{quiet},{level}")
    };
    // An empty RUST_LOG counts as unset (EnvFilter would read it as "errors only").
    let filter = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(EnvFilter::try_new)
        .unwrap_or_else(|| EnvFilter::try_new(directives))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a terminal: log files and journald get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
