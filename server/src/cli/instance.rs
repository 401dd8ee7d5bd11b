//! `roster instance list`: a service's instances through a node's console views
//! (`/nacos/v1/ns/catalog/service` for its clusters, `/catalog/instances` for each
//! cluster's instances, page by page), printed as a table with the face that registered
//! each instance, or as the rows themselves in JSON.

use std::io::Write as _;

use anyhow::Context;
use hyper::Method;

use super::api::Api;
use super::query;
use super::sync::table;
use crate::node::args::{ClientArgs, InstanceAction, OutputFormat};

/// Rows asked for per page of one cluster.
const PAGE_SIZE: usize = 500;

/// Runs `roster instance ...`.
pub async fn instance(action: InstanceAction, client: ClientArgs) -> anyhow::Result<()> {
    let InstanceAction::List {
        service,
        namespace,
        group,
    } = action;
    let mut api = Api::connect(&client).await?;
    let ids = [
        ("namespaceId", namespace),
        ("groupName", group),
        ("serviceName", service),
    ];
    let with = |extra: &[(&str, String)]| {
        let mut pairs: Vec<(&str, String)> = ids.to_vec();
        pairs.extend_from_slice(extra);
        query(&pairs)
    };
    let body = api
        .send(api.request(
            Method::GET,
            &format!("/nacos/v1/ns/catalog/service?{}", with(&[])),
        ))
        .await?;
    let detail: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    let clusters: Vec<String> = detail["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let mut rows = Vec::new();
    for cluster in &clusters {
        for page_no in 1.. {
            let path = format!(
                "/nacos/v1/ns/catalog/instances?{}",
                with(&[
                    ("clusterName", cluster.clone()),
                    ("pageNo", page_no.to_string()),
                    ("pageSize", PAGE_SIZE.to_string()),
                ])
            );
            let body = api.send(api.request(Method::GET, &path)).await?;
            let page: serde_json::Value =
                serde_json::from_str(&body).context("unexpected answer")?;
            let list = page["list"].as_array().cloned().unwrap_or_default();
            let last = list.len() < PAGE_SIZE;
            rows.extend(list);
            if last {
                break;
            }
        }
    }
    if client.output == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    print_instances(&rows)
}

fn print_instances(rows: &[serde_json::Value]) -> anyhow::Result<()> {
    let yes_no = |v: &serde_json::Value| if v == true { "yes" } else { "no" }.to_string();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|i| {
            vec![
                i["clusterName"].as_str().unwrap_or("?").to_string(),
                format!("{}:{}", i["ip"].as_str().unwrap_or("?"), i["port"]),
                yes_no(&i["healthy"]),
                yes_no(&i["enabled"]),
                if i["ephemeral"] == true {
                    "ephemeral"
                } else {
                    "persistent"
                }
                .to_string(),
                i["weight"].to_string(),
                registered_by(i),
            ]
        })
        .collect();
    let header = [
        "CLUSTER",
        "ADDRESS",
        "HEALTHY",
        "ENABLED",
        "KIND",
        "WEIGHT",
        "REGISTERED BY",
    ];
    let numeric = [false, false, false, false, false, true, false];
    write!(
        std::io::stdout().lock(),
        "{}",
        table(&header, &cells, &numeric)
    )?;
    Ok(())
}

/// The face column: `registeredBy`, with the task folded in for a sync task's
/// instances (`sync:TASK`, one word, so that the column splits on blanks).
fn registered_by(row: &serde_json::Value) -> String {
    let face = row["registeredBy"].as_str().unwrap_or("?");
    match row["registeredByTask"].as_str() {
        Some(task) => format!("{face}:{task}"),
        None => face.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::registered_by;
    use serde_json::json;

    #[test]
    fn the_face_column_folds_in_a_sync_task() {
        assert_eq!(registered_by(&json!({"registeredBy": "consul"})), "consul");
        assert_eq!(
            registered_by(&json!({"registeredBy": "sync", "registeredByTask": "dc2"})),
            "sync:dc2"
        );
        assert_eq!(registered_by(&json!({})), "?");
    }
}
