//! `roster sync add|list|status|pause|resume|apply|delete`: sync tasks through a node's
//! API, printed as a table of tasks or one task in detail.

use std::io::Write as _;

use anyhow::Context;
use hyper::Method;

use super::api::Api;
use crate::node::args::{ClientArgs, OutputFormat, SyncAction};

/// Runs `roster sync ...`.
pub async fn sync(action: SyncAction, client: ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(&client).await?;
    let task_path = |name: &str, tail: &str| {
        let name: String = form_urlencoded::byte_serialize(name.as_bytes()).collect();
        format!("/api/v1/sync/tasks/{name}{tail}")
    };
    let request = match &action {
        SyncAction::Add {
            name,
            from,
            target_namespace,
            group,
            services,
            dry_run,
            reconcile_secs,
            hold_share,
            hold_min,
            hold_secs,
        } => {
            let mut body = serde_json::json!({
                "name": name,
                "source": from,
                "namespace": target_namespace,
                "group": group,
                "services": services,
                "dryRun": dry_run,
            });
            let extra = [
                ("reconcileSecs", reconcile_secs.map(serde_json::Value::from)),
                ("holdShare", hold_share.map(serde_json::Value::from)),
                ("holdMin", hold_min.map(serde_json::Value::from)),
                ("holdSecs", hold_secs.map(serde_json::Value::from)),
            ];
            for (key, value) in extra {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            api.request(Method::POST, "/api/v1/sync/tasks")
                .json(body.to_string())
        }
        SyncAction::List => api.request(Method::GET, "/api/v1/sync/tasks"),
        SyncAction::Status { name } => api.request(Method::GET, &task_path(name, "")),
        SyncAction::Pause { name } => api.request(Method::POST, &task_path(name, "/pause")),
        SyncAction::Resume { name } => api.request(Method::POST, &task_path(name, "/resume")),
        SyncAction::Apply { name } => api.request(Method::POST, &task_path(name, "/apply")),
        SyncAction::Delete { name } => api.request(Method::DELETE, &task_path(name, "")),
    };
    let body = api.send(request).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    match &action {
        SyncAction::List => print_tasks(&value)?,
        SyncAction::Delete { .. } => out!(
            "deleted {} and its {} imported instance(s)",
            value["deleted"].as_str().unwrap_or("?"),
            value["removedInstances"]
        ),
        _ => print_task(&value)?,
    }
    Ok(())
}

fn print_tasks(value: &serde_json::Value) -> anyhow::Result<()> {
    let rows: Vec<Vec<String>> = value["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let s = &t["status"];
            vec![
                t["name"].as_str().unwrap_or("?").to_string(),
                state_label(t),
                s["services"].to_string(),
                s["instances"].to_string(),
                s["heldDeletions"].to_string(),
                s["skipped"].to_string(),
                age(&s["lastSyncMs"]),
                target(t, "namespace", roster_sync::runner::DEFAULT_NAMESPACE),
                target(t, "group", roster_sync::runner::DEFAULT_GROUP),
                t["source"].as_str().unwrap_or("?").to_string(),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "STATE",
        "SERVICES",
        "INSTANCES",
        "HELD",
        "SKIPPED",
        "LAST SYNC",
        "NAMESPACE",
        "GROUP",
        "SOURCE",
    ];
    // Counts are right-aligned, text left.
    let numeric = [
        false, false, true, true, true, true, false, false, false, false,
    ];
    write!(
        std::io::stdout().lock(),
        "{}",
        table(&header, &rows, &numeric)
    )?;
    Ok(())
}

/// Rows under a header, each column as wide as its widest cell, two spaces apart; the
/// last column is not padded (no trailing blanks).
pub(super) fn table(header: &[&str], rows: &[Vec<String>], right_aligned: &[bool]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if right_aligned.get(i) == Some(&true) {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if i < last {
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A task's target namespace or group as it takes effect: the one it names, else the
/// default — for a Nacos source the source's own, else `fallback`.
fn target(t: &serde_json::Value, field: &str, fallback: &str) -> String {
    if let Some(v) = t[field].as_str().filter(|v| !v.is_empty()) {
        return v.to_string();
    }
    let source = t["source"].as_str().unwrap_or("");
    if source.starts_with("nacos://") {
        format!("(source's, else {fallback})")
    } else {
        fallback.to_string()
    }
}

fn print_task(t: &serde_json::Value) -> anyhow::Result<()> {
    let s = &t["status"];
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string).unwrap_or_else(|| "-".into());
    out!("name:       {}", text(&t["name"]));
    out!("source:     {}", text(&t["source"]));
    out!(
        "target:     namespace {} group {} services {}",
        target(t, "namespace", roster_sync::runner::DEFAULT_NAMESPACE),
        target(t, "group", roster_sync::runner::DEFAULT_GROUP),
        t["services"].as_str().unwrap_or("all")
    );
    out!("state:      {}", state_label(t));
    out!(
        "counts:     {} service(s), {} instance(s), {} held deletion(s), {} skipped, {} copies ignored",
        s["services"], s["instances"], s["heldDeletions"], s["skipped"], s["copiesIgnored"]
    );
    if let Some(configs) = s["configs"].as_u64() {
        out!(
            "configs:    {configs} configuration item(s), {} skipped (roster's own)",
            s["configsSkipped"]
        );
    }
    for reason in s["holdReasons"].as_array().into_iter().flatten() {
        out!("held:       {}", reason.as_str().unwrap_or("?"));
    }
    out!("last sync:  {}", age(&s["lastSyncMs"]));
    out!("last error: {}", text(&s["lastError"]));
    out!(
        "runner:     {}",
        s["runner"]
            .as_u64()
            .map(|n| format!("node {n}"))
            .unwrap_or_else(|| "-".into())
    );
    if let Some(report) = s["dryRun"].as_object() {
        out!(
            "dry run:    would add {}, update {}, remove {}",
            report["wouldAdd"],
            report["wouldUpdate"],
            report["wouldRemove"]
        );
        for line in report["sample"].as_array().into_iter().flatten() {
            out!("            {}", line.as_str().unwrap_or("?"));
        }
        if t["dryRun"].as_bool() == Some(true) {
            out!(
                "            to import for real: roster sync apply {}",
                text(&t["name"])
            );
        }
    }
    Ok(())
}

fn state_label(t: &serde_json::Value) -> String {
    let state = t["status"]["state"].as_str().unwrap_or("?");
    if t["dryRun"].as_bool() == Some(true) {
        format!("{state} (dry run)")
    } else {
        state.to_string()
    }
}

/// `12s ago` from a millisecond timestamp, `-` for none.
fn age(ms: &serde_json::Value) -> String {
    let Some(ms) = ms.as_u64() else {
        return "-".into();
    };
    let secs = roster_registry::clock::now_ms().saturating_sub(ms) / 1000;
    format!("{secs}s ago")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_fit_their_widest_cell() {
        let rows = vec![
            vec![
                "a-long-task-name".to_string(),
                "7".into(),
                "etcd://h:1".into(),
            ],
            vec!["b".to_string(), "12345".into(), "x".into()],
        ];
        let out = table(&["NAME", "N", "SOURCE"], &rows, &[false, true, false]);
        assert_eq!(
            out,
            "NAME                  N  SOURCE\n\
             a-long-task-name      7  etcd://h:1\n\
             b                 12345  x\n"
        );
    }
}
