//! Client subcommands: `roster cluster status|add|remove`, `roster sync
//! add|list|status|pause|resume|delete` and `roster auth rotate-key` talk to a node's
//! HTTP API with the given credentials and print text or JSON.

use anyhow::{bail, Context};

use crate::cluster::view::ClusterView;
use crate::config::{AuthAction, ClientArgs, ClusterAction, OutputFormat, SyncAction};

/// A node's HTTP API, logged in when a password is given.
struct Api {
    http: reqwest::Client,
    base: String,
    target: String,
    token: Option<String>,
}

impl Api {
    async fn connect(client: &ClientArgs) -> anyhow::Result<Self> {
        let http = reqwest::Client::new();
        let base = format!("http://{}", client.http);
        let token = match &client.password {
            Some(password) => Some(login(&http, &base, &client.username, password).await?),
            None => None,
        };
        Ok(Self {
            http,
            base,
            target: client.http.clone(),
            token,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        }
    }

    /// Sends the request; the body of a 2xx answer, else an error with the node's words.
    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<String> {
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach roster at {}", self.target))?;
        let status = response.status();
        let body = response.text().await.context("reading the answer")?;
        if !status.is_success() {
            if status.as_u16() == 401 && self.token.is_none() {
                bail!("{status}: {body} (give --password or set ROSTER_PASSWORD)");
            }
            bail!("{status}: {body}");
        }
        Ok(body)
    }
}

fn query(pairs: &[(&str, String)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

/// Runs `roster cluster ...`.
pub async fn cluster(action: ClusterAction, client: ClientArgs) -> anyhow::Result<()> {
    use reqwest::Method;
    let api = Api::connect(&client).await?;
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
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&view)?),
        OutputFormat::Text => print_view(&view),
    }
    Ok(())
}

/// Runs `roster sync ...`.
pub async fn sync(action: SyncAction, client: ClientArgs) -> anyhow::Result<()> {
    use reqwest::Method;
    let api = Api::connect(&client).await?;
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
                .header("content-type", "application/json")
                .body(body.to_string())
        }
        SyncAction::List => api.request(Method::GET, "/api/v1/sync/tasks"),
        SyncAction::Status { name } => api.request(Method::GET, &task_path(name, "")),
        SyncAction::Pause { name } => api.request(Method::POST, &task_path(name, "/pause")),
        SyncAction::Resume { name } => api.request(Method::POST, &task_path(name, "/resume")),
        SyncAction::Delete { name } => api.request(Method::DELETE, &task_path(name, "")),
    };
    let body = api.send(request).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    match &action {
        SyncAction::List => print_tasks(&value),
        SyncAction::Delete { .. } => println!(
            "deleted {} and its {} imported instance(s)",
            value["deleted"].as_str().unwrap_or("?"),
            value["removedInstances"]
        ),
        _ => print_task(&value),
    }
    Ok(())
}

/// Runs `roster auth ...`.
pub async fn auth(action: AuthAction, client: ClientArgs) -> anyhow::Result<()> {
    let api = Api::connect(&client).await?;
    let AuthAction::RotateKey { drop_previous } = action;
    let path = format!(
        "/api/v1/auth/rotate-key?{}",
        query(&[("dropPrevious", drop_previous.to_string())])
    );
    let body = api.send(api.request(reqwest::Method::POST, &path)).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!(
        "rotated the token signing key: new key {}",
        value["keyId"].as_str().unwrap_or("?")
    );
    let previous = value["previousKeyId"].as_str().unwrap_or("-");
    match value["previousValidUntil"].as_u64() {
        Some(until) => {
            let left = until.saturating_sub(crate::clock::now_ms() / 1000);
            println!(
                "tokens signed by key {previous} are accepted for {left} s more, until they expire"
            );
        }
        None => println!("tokens signed by key {previous} or older are no longer accepted"),
    }
    Ok(())
}

fn print_tasks(value: &serde_json::Value) {
    println!(
        "{:<20} {:<9} {:>8} {:>9} {:>5} {:>7}  {:<20} SOURCE",
        "NAME", "STATE", "SERVICES", "INSTANCES", "HELD", "SKIPPED", "LAST SYNC"
    );
    for t in value["tasks"].as_array().into_iter().flatten() {
        let s = &t["status"];
        println!(
            "{:<20} {:<9} {:>8} {:>9} {:>5} {:>7}  {:<20} {}",
            t["name"].as_str().unwrap_or("?"),
            state_label(t),
            s["services"],
            s["instances"],
            s["heldDeletions"],
            s["skipped"],
            age(&s["lastSyncMs"]),
            t["source"].as_str().unwrap_or("?"),
        );
    }
}

fn print_task(t: &serde_json::Value) {
    let s = &t["status"];
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string).unwrap_or_else(|| "-".into());
    println!("name:       {}", text(&t["name"]));
    println!("source:     {}", text(&t["source"]));
    println!(
        "target:     namespace {} group {} services {}",
        text(&t["namespace"]),
        text(&t["group"]),
        text(&t["services"])
    );
    println!("state:      {}", state_label(t));
    println!(
        "counts:     {} service(s), {} instance(s), {} held deletion(s), {} skipped, {} copies ignored",
        s["services"], s["instances"], s["heldDeletions"], s["skipped"], s["copiesIgnored"]
    );
    for reason in s["holdReasons"].as_array().into_iter().flatten() {
        println!("held:       {}", reason.as_str().unwrap_or("?"));
    }
    println!("last sync:  {}", age(&s["lastSyncMs"]));
    println!("last error: {}", text(&s["lastError"]));
    println!(
        "runner:     {}",
        s["runner"]
            .as_u64()
            .map(|n| format!("node {n}"))
            .unwrap_or_else(|| "-".into())
    );
    if let Some(report) = s["dryRun"].as_object() {
        println!(
            "dry run:    would add {}, update {}, remove {}",
            report["wouldAdd"], report["wouldUpdate"], report["wouldRemove"]
        );
        for line in report["sample"].as_array().into_iter().flatten() {
            println!("            {}", line.as_str().unwrap_or("?"));
        }
    }
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
    let secs = crate::clock::now_ms().saturating_sub(ms) / 1000;
    format!("{secs}s ago")
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
