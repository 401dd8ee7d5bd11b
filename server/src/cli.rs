//! Client subcommands: `roster cluster status|add|remove`, `roster sync
//! add|list|status|pause|resume|apply|delete`, `roster auth rotate-key` and `roster
//! snapshot save` talk to a node's HTTP API with the given credentials and print text or
//! JSON; `roster snapshot inspect|restore` and `roster recover` work on files offline
//! (`crate::services::backup`).
//!
//! The node is reached over plaintext HTTP (`HOST:PORT`, `http://...`) or HTTPS
//! (`https://...`, trusting `--cacert` or the system's CAs), one kept-alive connection
//! with hyper and rustls (ring) directly. Not reqwest: its only ring-compatible TLS
//! feature (`rustls-no-provider`) makes every reqwest client panic unless a process-wide
//! crypto provider is installed, and features unify across the workspace, so the sync
//! sources' clients (in the node and in the tests' process) would have to install one.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::node::args::{
    AuthAction, ClientArgs, ClusterAction, OutputFormat, SnapshotAction, SyncAction,
};
use crate::services::cluster::view::ClusterView;

/// Writes a line to stdout, returning the error instead of panicking as `println!`
/// does: stdout may be a pipe its reader closed (`roster sync list | head -1`).
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)?
    };
}

/// Whether `e` is a write to a closed pipe (the reader, e.g. `head`, has what it
/// wanted): the command ends quietly.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// How long one exchange with the node may take, connecting included.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the node's HTTP API is, from `--http`: `HOST:PORT` and `http://HOST:PORT` are
/// plaintext, `https://HOST:PORT` is TLS; a path after the port prefixes every request
/// (a node behind a proxy's path).
#[derive(Debug, PartialEq)]
struct Target {
    tls: bool,
    /// The host to connect to and, with TLS, the name its certificate must carry.
    host: String,
    port: u16,
    /// `host:port` as written, for the `Host` header.
    authority: String,
    /// The path prefix, without a trailing `/`.
    prefix: String,
}

impl Target {
    fn parse(addr: &str) -> anyhow::Result<Self> {
        let full = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let uri: Uri = full.parse().with_context(|| {
            format!("--http {addr}: not an address (HOST:PORT or https://HOST:PORT)")
        })?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            other => bail!(
                "--http {addr}: unknown scheme {}; use http:// or https://",
                other.unwrap_or("")
            ),
        };
        let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
            bail!("--http {addr}: no host");
        };
        if uri.query().is_some() || authority.as_str().contains('@') {
            bail!("--http {addr}: give only scheme, host, port and path");
        }
        Ok(Self {
            tls,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: authority.as_str().to_string(),
            prefix: uri.path().trim_end_matches('/').to_string(),
        })
    }
}

/// A connection's byte stream: plaintext or TLS.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// The client side of TLS: the CA certificates of `--cacert`, else the system's.
fn tls_connector(cacert: Option<&Path>) -> anyhow::Result<TlsConnector> {
    let mut roots = RootCertStore::empty();
    match cacert {
        Some(path) => {
            for cert in crate::services::net::tls::read_certs(path, "--cacert")? {
                roots
                    .add(cert)
                    .with_context(|| format!("--cacert {}: not a usable CA", path.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                bail!("found no CA certificates on this system to check the node's certificate against; give --cacert FILE");
            }
        }
    }
    let mut config = ClientConfig::builder_with_provider(crate::services::net::tls::provider())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// A request to the node: method, path (after the target's prefix), JSON body.
struct Call {
    method: Method,
    path: String,
    json: Option<String>,
    form: Option<String>,
}

impl Call {
    /// With a JSON body.
    fn json(mut self, body: String) -> Self {
        self.json = Some(body);
        self
    }
}

/// A node's HTTP API over one kept-alive connection (opened again if the node closes
/// it), logged in when a password is given.
struct Api {
    target: Target,
    /// `--http` as given, for messages.
    shown: String,
    /// `--cacert`, for messages.
    cacert: Option<std::path::PathBuf>,
    tls: Option<TlsConnector>,
    sender: Option<SendRequest<Full<Bytes>>>,
    token: Option<String>,
}

impl Api {
    async fn connect(client: &ClientArgs) -> anyhow::Result<Self> {
        let target = Target::parse(&client.http)?;
        let tls = match target.tls {
            true => Some(tls_connector(client.cacert.as_deref())?),
            false => None,
        };
        let mut api = Self {
            target,
            shown: client.http.clone(),
            cacert: client.cacert.clone(),
            tls,
            sender: None,
            token: None,
        };
        if let Some(password) = password(client)? {
            api.token = Some(api.login(&client.username, &password).await?);
        }
        Ok(api)
    }

    fn request(&self, method: Method, path: &str) -> Call {
        Call {
            method,
            path: path.to_string(),
            json: None,
            form: None,
        }
    }

    /// Opens the connection (TCP, then TLS for https) and hands it to hyper.
    async fn open(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let shown = &self.shown;
        let tcp = TcpStream::connect((self.target.host.as_str(), self.target.port))
            .await
            .with_context(|| format!("cannot reach roster at {shown}"))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(connector) => {
                let name = ServerName::try_from(self.target.host.clone())
                    .with_context(|| format!("--http {shown}: not a host name for TLS"))?;
                let stream = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| self.handshake_error(e))?;
                Box::new(stream)
            }
        };
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .with_context(|| format!("cannot talk HTTP to {shown}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// A failed TLS handshake, explained: most often a certificate the CA did not sign,
    /// or a port that does not speak TLS.
    fn handshake_error(&self, e: std::io::Error) -> anyhow::Error {
        use tokio_rustls::rustls::Error as TlsError;
        let certificate = matches!(
            e.get_ref()
                .and_then(|inner| inner.downcast_ref::<TlsError>()),
            Some(TlsError::InvalidCertificate(_))
        );
        let hint = match (&self.cacert, certificate) {
            (Some(ca), true) => format!(
                "the node's certificate is not signed by a CA in --cacert {}, or does not name {}",
                ca.display(),
                self.target.host
            ),
            (None, true) => format!(
                "the node's certificate is not signed by a CA this system trusts, or does not name {}; give --cacert FILE with its CA",
                self.target.host
            ),
            (_, false) => "does the node serve HTTPS on this port?".to_string(),
        };
        anyhow::anyhow!("TLS handshake with {} failed: {e} ({hint})", self.shown)
    }

    /// Sends the call; the status and body of the answer, as text.
    async fn exchange(&mut self, call: Call) -> anyhow::Result<(hyper::StatusCode, String)> {
        let (status, body) = self.exchange_bytes(call).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// Sends the call; the status and body of the answer.
    async fn exchange_bytes(&mut self, call: Call) -> anyhow::Result<(hyper::StatusCode, Bytes)> {
        let mut request = Request::builder()
            .method(call.method)
            .uri(format!("{}{}", self.target.prefix, call.path))
            .header(hyper::header::HOST, &self.target.authority);
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match (call.json, call.form) {
            (Some(json), _) => {
                request = request.header(hyper::header::CONTENT_TYPE, "application/json");
                json
            }
            (None, Some(form)) => {
                request = request.header(
                    hyper::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                );
                form
            }
            (None, None) => String::new(),
        };
        let request = request
            .body(Full::new(Bytes::from(body)))
            .context("building the request")?;
        let exchange = async {
            let mut sender = match self.sender.take() {
                Some(sender) if !sender.is_closed() => sender,
                _ => self.open().await?,
            };
            sender
                .ready()
                .await
                .with_context(|| format!("lost the connection to {}", self.shown))?;
            let response = sender
                .send_request(request)
                .await
                .with_context(|| format!("no answer from {}", self.shown))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .context("reading the answer")?
                .to_bytes();
            self.sender = Some(sender);
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .with_context(|| format!("no answer from {} within {EXCHANGE_TIMEOUT:?}", self.shown))?
    }

    /// Sends the call; the body of a 2xx answer, else an error with the node's words.
    async fn send(&mut self, call: Call) -> anyhow::Result<String> {
        let (status, body) = self.exchange(call).await?;
        if !status.is_success() {
            if status.as_u16() == 401 && self.token.is_none() {
                bail!("{status}: {body} (give --password-file or set ROSTER_PASSWORD)");
            }
            bail!("{status}: {body}");
        }
        Ok(body)
    }

    async fn login(&mut self, username: &str, password: &str) -> anyhow::Result<String> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("username", username)
            .append_pair("password", password)
            .finish();
        let mut call = self.request(Method::POST, "/nacos/v1/auth/login");
        call.form = Some(form);
        let (status, text) = self.exchange(call).await?;
        // Nacos answers a bad user and a bad password alike, in words that name only the
        // first ("user not found!"); the wire keeps them, the CLI says what it means.
        if matches!(status.as_u16(), 401 | 403) && text.contains("user not found") {
            bail!("login failed: wrong username or password (user {username})");
        }
        if !status.is_success() {
            bail!("login failed: {status}: {text}");
        }
        let v: serde_json::Value =
            serde_json::from_str(&text).context("unexpected login answer")?;
        v["accessToken"]
            .as_str()
            .map(str::to_string)
            .context("login answer without accessToken")
    }
}

/// The password: the first line of `--password-file`, else `--password` /
/// `ROSTER_PASSWORD`.
fn password(client: &ClientArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &client.password_file else {
        return Ok(client.password.clone());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --password-file {}", path.display()))?;
    match text.lines().next() {
        Some(line) if !line.is_empty() => Ok(Some(line.to_string())),
        _ => bail!(
            "--password-file {}: the first line is empty",
            path.display()
        ),
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

/// Runs `roster auth ...`.
pub async fn auth(action: AuthAction, client: ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(&client).await?;
    let AuthAction::RotateKey { drop_previous } = action;
    let path = format!(
        "/api/v1/auth/rotate-key?{}",
        query(&[("dropPrevious", drop_previous.to_string())])
    );
    let call = api.request(Method::POST, &path);
    let body = api.send(call).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    out!(
        "rotated the token signing key: new key {}",
        value["keyId"].as_str().unwrap_or("?")
    );
    let previous = value["previousKeyId"].as_str().unwrap_or("-");
    match value["previousValidUntil"].as_u64() {
        Some(until) => {
            let left = until.saturating_sub(roster_registry::clock::now_ms() / 1000);
            out!(
                "tokens signed by key {previous} are accepted for {left} s more, until they expire"
            );
        }
        None => out!("tokens signed by key {previous} or older are no longer accepted"),
    }
    Ok(())
}

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
fn table(header: &[&str], rows: &[Vec<String>], right_aligned: &[bool]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_plaintext_unless_https() {
        let t = Target::parse("127.0.0.1:8848").unwrap();
        assert!(!t.tls);
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 8848));
        assert_eq!(
            (t.authority.as_str(), t.prefix.as_str()),
            ("127.0.0.1:8848", "")
        );
        assert!(!Target::parse("http://127.0.0.1:8848").unwrap().tls);
        let t = Target::parse("https://[::1]:9443/roster/").unwrap();
        assert!(t.tls);
        assert_eq!((t.host.as_str(), t.port), ("::1", 9443));
        assert_eq!(
            (t.authority.as_str(), t.prefix.as_str()),
            ("[::1]:9443", "/roster")
        );
        assert_eq!(
            Target::parse("https://registry.internal").unwrap().port,
            443
        );
        for bad in [
            "ftp://host:1",
            "https://user:pw@host:1",
            "https://host:1/?a=b",
            "https://",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

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

    #[test]
    fn a_password_file_gives_its_first_line_and_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pw");
        let args = |file: Option<&Path>| ClientArgs {
            http: "127.0.0.1:8848".into(),
            username: "nacos".into(),
            password: Some("from-flag".into()),
            password_file: file.map(Path::to_path_buf),
            cacert: None,
            output: OutputFormat::Text,
        };
        assert_eq!(password(&args(None)).unwrap().as_deref(), Some("from-flag"));
        std::fs::write(&path, "s3cret word\r\nignored\n").unwrap();
        assert_eq!(
            password(&args(Some(&path))).unwrap().as_deref(),
            Some("s3cret word")
        );
        std::fs::write(&path, "\n").unwrap();
        let e = password(&args(Some(&path))).unwrap_err().to_string();
        assert!(e.contains("--password-file") && e.contains("empty"), "{e}");
        let e = password(&args(Some(&dir.path().join("missing")))).unwrap_err();
        assert!(e.to_string().contains("cannot read --password-file"), "{e}");
    }
}
