//! How a client subcommand reaches a node: [`Api`], its HTTP API over one kept-alive
//! connection, logged in with the given credentials.
//!
//! The node is reached over plaintext HTTP (`HOST:PORT`, `http://...`) or HTTPS
//! (`https://...`, trusting `--cacert` or the system's CAs), one kept-alive connection
//! with hyper and rustls (ring) directly. Not reqwest: its only ring-compatible TLS
//! feature (`rustls-no-provider`) makes every reqwest client panic unless a process-wide
//! crypto provider is installed, and features unify across the workspace, so the sync
//! sources' clients (in the node and in the tests' process) would have to install one.

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

use crate::node::args::ClientArgs;

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
pub(super) struct Call {
    method: Method,
    path: String,
    json: Option<String>,
    form: Option<String>,
}

impl Call {
    /// With a JSON body.
    pub(super) fn json(mut self, body: String) -> Self {
        self.json = Some(body);
        self
    }
}

/// A node's HTTP API over one kept-alive connection (opened again if the node closes
/// it), logged in when a password is given.
pub(super) struct Api {
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
    /// The node of `--http`, logged in when a password is given; the connection opens
    /// with the first call.
    pub(super) async fn connect(client: &ClientArgs) -> anyhow::Result<Self> {
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

    /// A call to `path` (after the target's prefix), without a body.
    pub(super) fn request(&self, method: Method, path: &str) -> Call {
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
    pub(super) async fn exchange_bytes(
        &mut self,
        call: Call,
    ) -> anyhow::Result<(hyper::StatusCode, Bytes)> {
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
    pub(super) async fn send(&mut self, call: Call) -> anyhow::Result<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::args::OutputFormat;

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
