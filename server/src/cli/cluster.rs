//! `roster cluster status|add|remove`: the cluster's membership through a node's API,
//! printed as a table of members.

use std::io::Write as _;

use anyhow::Context;
use hyper::Method;

use super::api::Api;
use super::query;
use crate::node::args::{ClientArgs, ClusterAction, OutputFormat};
use crate::services::cluster::view::ClusterView;

/// Runs `roster cluster ...`.
pub async fn cluster(action: ClusterAction, client: ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(&client).await?;
    let request = match &action {
        ClusterAction::Status => api.request(Method::GET, "/api/v1/cluster"),
        ClusterAction::Add { id, peer } => api.request(
            Method::POST,
            &format!(
                "/api/v1/cluster/members?{}",
                query(&[("id", id.to_string()), ("peer", peer.clone())])
            ),
        ),
        ClusterAction::Remove { id } => api.request(
            Method::DELETE,
            &format!(
                "/api/v1/cluster/members?{}",
                query(&[("id", id.to_string())])
            ),
        ),
    };
    let body = api.send(request).await?;
    let view: ClusterView = serde_json::from_str(&body).context("unexpected answer")?;
    match client.output {
        OutputFormat::Json => out!("{}", serde_json::to_string_pretty(&view)?),
        OutputFormat::Text => print_view(&view)?,
    }
    Ok(())
}

fn print_view(view: &ClusterView) -> anyhow::Result<()> {
    let leader = view
        .leader
        .map(|l| l.to_string())
        .unwrap_or_else(|| "none".into());
    out!(
        "node {} ({}) term {} leader {} applied {} snapshot {}{}",
        view.node_id,
        view.state,
        view.term,
        leader,
        view.applied_index,
        view.snapshot_index,
        if view.ready { "" } else { " (not ready)" }
    );
    out!(
        "{:<4} {:<9} {:<5} {:<5} {:<22} {:<22} {:>8} {:>6}",
        "ID",
        "ROLE",
        "VOTER",
        "LIVE",
        "PEER",
        "HTTP",
        "MATCH",
        "LAG"
    );
    for m in &view.members {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        out!(
            "{:<4} {:<9} {:<5} {:<5} {:<22} {:<22} {:>8} {:>6}",
            m.id,
            m.role,
            m.voter,
            m.live,
            m.peer,
            m.http.as_deref().unwrap_or("-"),
            opt(m.match_index),
            opt(m.lag)
        );
    }
    Ok(())
}
