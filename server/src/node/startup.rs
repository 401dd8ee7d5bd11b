//! Startup, beside the HTTP server (so that `/health/live` answers meanwhile): form or
//! join the Raft cluster, catch up with the leader, bootstrap auth on the cluster's
//! first start, take the ephemeral instances the peers hold, then mark the node ready.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

use super::plan::ClusterPlan;
use crate::services::auth::{password, ADMIN_USERNAME};
use crate::services::store::command::Rejection;
use crate::services::store::{ProposeError, Store};
use crate::services::workers::Workers;
use crate::state::AppState;

/// Name of the file the generated admin password is written to, in the data dir.
pub const INITIAL_PASSWORD_FILE: &str = "initial-admin-password";
/// Environment variable that sets the admin password at first start.
pub const ADMIN_PASSWORD_ENV: &str = "ROSTER_ADMIN_PASSWORD";

/// Starts startup among `workers`; a failure is logged and reported on `failed` (the
/// node then shuts down). Startup waits as long as peers take (for ever, for a node
/// never added): shutdown does not wait for it.
pub fn spawn(
    state: &AppState,
    plan: &ClusterPlan,
    data_dir: PathBuf,
    failed: watch::Sender<Option<String>>,
    workers: &mut Workers,
) {
    let (state, plan, mut stopping) = (state.clone(), plan.clone(), workers.stopping());
    workers.spawn(async move {
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
    match crate::services::auth::writes::bootstrap(&state.store, ADMIN_USERNAME, hash).await {
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
