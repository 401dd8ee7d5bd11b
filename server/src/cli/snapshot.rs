//! `roster snapshot save|inspect|restore`: `save` fetches a snapshot through a node's API
//! and writes it, the others work on files offline (`crate::services::backup::report`).

use std::io::Write as _;
use std::path::Path;

use anyhow::{bail, Context};
use hyper::Method;

use super::api::Api;
use super::query;
use crate::node::args::{ClientArgs, OutputFormat, SnapshotAction};

/// Runs `roster snapshot ...`: `save` through the node's API, the others offline
/// (`crate::services::backup::report`).
pub async fn snapshot(action: SnapshotAction) -> anyhow::Result<()> {
    match action {
        SnapshotAction::Save {
            file,
            force,
            stale,
            client,
        } => save_snapshot(&file, force, stale, &client).await,
        SnapshotAction::Inspect { file, output } => {
            crate::services::backup::report::inspect(&file, output)
        }
        SnapshotAction::Restore {
            file,
            data_dir,
            node_id,
            peer,
            output,
        } => crate::services::backup::report::restore(&file, &data_dir, node_id, &peer, output),
    }
}

/// `roster snapshot save FILE`: fetches the snapshot, verifies it, writes it durably.
async fn save_snapshot(
    file: &Path,
    force: bool,
    stale: bool,
    client: &ClientArgs,
) -> anyhow::Result<()> {
    if file.exists() && !force {
        bail!("{} exists; give --force to overwrite it", file.display());
    }
    let mut api = Api::connect(client).await?;
    let path = format!(
        "/api/v1/snapshot?{}",
        query(&[("stale", stale.to_string())])
    );
    let call = api.request(Method::GET, &path);
    let (status, body) = api.exchange_bytes(call).await?;
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&body));
    }
    // Checked before it is written: a file saved is a file that restores.
    let snapshot = crate::services::backup::format::decode(&body)
        .with_context(|| format!("the node at {} sent an unusable snapshot", client.http))?;
    crate::services::backup::write_durably(file, &body)?;
    if client.output == OutputFormat::Json {
        return crate::services::backup::report::print_snapshot(&snapshot, OutputFormat::Json);
    }
    let m = &snapshot.meta;
    out!(
        "saved {} ({} bytes): node {} at index {} term {}, {}",
        file.display(),
        body.len(),
        m.node_id,
        m.last_applied_index,
        m.last_applied_term,
        crate::services::backup::report::summary(&m.counts)
    );
    Ok(())
}
