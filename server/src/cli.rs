//! Client subcommands: `roster cluster status|add|remove` talk to a node's HTTP API with
//! the given credentials and print text or JSON.

use anyhow::{bail, Context};

use crate::api::cluster::ClusterView;
use crate::config::{ClientArgs, ClusterAction, OutputFormat};

/// Runs `roster cluster ...`.
pub async fn cluster(action: ClusterAction, client: ClientArgs) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let base = format!("http://{}", client.http);
    let token = match &client.password {
        Some(password) => Some(login(&http, &base, &client.username, password).await?),
        None => None,
    };
    let query = |pairs: &[(&str, String)]| {
        let mut s = form_urlencoded::Serializer::new(String::new());
        for (k, v) in pairs {
            s.append_pair(k, v);
        }
        s.finish()
    };
    let request = match &action {
        ClusterAction::Status => http.get(format!("{base}/api/v1/cluster")),
        ClusterAction::Add { id, peer } => http.post(format!(
            "{base}/api/v1/cluster/members?{}",
            query(&[("id", id.to_string()), ("peer", peer.clone())])
        )),
        ClusterAction::Remove { id } => http.delete(format!(
            "{base}/api/v1/cluster/members?{}",
            query(&[("id", id.to_string())])
        )),
    };
    let request = match &token {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach roster at {}", client.http))?;
    let status = response.status();
    let body = response.text().await.context("reading the answer")?;
    if !status.is_success() {
        if status.as_u16() == 401 && token.is_none() {
            bail!("{status}: {body} (give --password or set ROSTER_PASSWORD)");
        }
        bail!("{status}: {body}");
    }
    let view: ClusterView = serde_json::from_str(&body).context("unexpected answer")?;
    match client.output {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&view)?),
        OutputFormat::Text => print_view(&view),
    }
    Ok(())
}

async fn login(
    http: &reqwest::Client,
    base: &str,
    username: &str,
    password: &str,
) -> anyhow::Result<String> {
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("username", username)
        .append_pair("password", password)
        .finish();
    let response = http
        .post(format!("{base}/nacos/v1/auth/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach roster at {base}"))?;
    let status = response.status();
    let text = response.text().await?;
    if !status.is_success() {
        bail!("login failed: {status}: {text}");
    }
    let v: serde_json::Value = serde_json::from_str(&text).context("unexpected login answer")?;
    v["accessToken"]
        .as_str()
        .map(str::to_string)
        .context("login answer without accessToken")
}

fn print_view(view: &ClusterView) {
    let leader = view
        .leader
        .map(|l| l.to_string())
        .unwrap_or_else(|| "none".into());
    println!(
        "node {} ({}) term {} leader {} applied {} snapshot {}{}",
        view.node_id,
        view.state,
        view.term,
        leader,
        view.applied_index,
        view.snapshot_index,
        if view.ready { "" } else { " (not ready)" }
    );
    println!(
        "{:<4} {:<9} {:<5} {:<5} {:<22} {:<22} {:>8} {:>6}",
        "ID", "ROLE", "VOTER", "LIVE", "PEER", "HTTP", "MATCH", "LAG"
    );
    for m in &view.members {
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        println!(
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
}
