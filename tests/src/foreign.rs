//! Real foreign registries for the sync tests: etcd and ZooKeeper from their Debian
//! packages (`etcd-server`; `zookeeper` with a Java runtime), each on free loopback
//! ports with its own temp dir and log file, started in the foreground by the test,
//! waited on until it answers, killed on drop, and stoppable and restartable (same
//! ports, same data) so a test can take the registry away and bring it back.
//!
//! And a real Prometheus (Debian's `prometheus`) given a configuration, to check the
//! service discovery roster serves to it.
//!
//! Also the small clients tests need to change them: etcd puts (optionally under a
//! lease), deletes, compaction and authentication through the JSON gateway; ZooKeeper
//! node creation and deletion, and an ephemeral node whose session can be made to
//! *expire* (not close) by cutting the TCP proxy its client goes through.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use zookeeper_client as zk;

use crate::free_port;

/// The etcd server binary (Debian package `etcd-server`).
const ETCD_BIN: &str = "/usr/bin/etcd";
/// The ZooKeeper server jar (Debian package `zookeeper` / `libzookeeper-java`); its
/// manifest's class path names the jars it needs.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// A logging backend for ZooKeeper's slf4j (Debian package `libslf4j-java`).
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// The Java runtime (Debian package `default-jre-headless`).
const JAVA_BIN: &str = "/usr/bin/java";
/// The Prometheus server binary (Debian package `prometheus`).
const PROMETHEUS_BIN: &str = "/usr/bin/prometheus";
/// How long a server may take to answer after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Panics unless `path` exists, naming the Debian package that provides it.
fn require(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} not found: install the Debian package '{package}' (apt-get install {package})"
    );
}

/// A child process with a log file per start, killed on drop.
struct Process {
    child: Option<Child>,
    dir: tempfile::TempDir,
    starts: usize,
    name: &'static str,
}

impl Process {
    fn new(name: &'static str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("roster-{name}-"))
            .tempdir()
            .expect("tempdir");
        Self {
            child: None,
            dir,
            starts: 0,
            name,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log_path(&self) -> PathBuf {
        self.path(&format!("{}-{}.log", self.name, self.starts))
    }

    fn spawn(&mut self, mut command: Command) {
        assert!(self.child.is_none(), "{} is running", self.name);
        self.starts += 1;
        let log = File::create(self.log_path()).expect("log file");
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.name));
        self.child = Some(child);
    }

    /// Waits until `ready` holds, failing early if the process exits.
    fn wait(&mut self, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "{} exited with {status} while starting:\n{}",
                    self.name,
                    self.log()
                );
            }
            if ready() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready in {READY_TIMEOUT:?}:\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(self.log_path()) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::thread::panicking() && self.child.is_some() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "---- {} log ({}) last lines ----\n{}",
                self.name,
                self.log_path().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        self.kill();
    }
}

/// A real single-member etcd 3.4 on loopback, with its JSON gateway.
pub struct Etcd {
    process: Process,
    /// The client (and gateway) port.
    pub client_port: u16,
    /// The peer port.
    pub peer_port: u16,
    agent: ureq::Agent,
    /// The token the helpers send, once [`Etcd::login`] got one.
    token: std::sync::Mutex<Option<String>>,
    /// Extra command-line flags, given on every start.
    flags: Vec<String>,
}

impl Etcd {
    /// Starts etcd on free ports and waits until `/health` says it is healthy.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts etcd with extra command-line `flags` (e.g. `--auth-token-ttl=1`).
    pub fn start_with(flags: &[&str]) -> Self {
        require(ETCD_BIN, "etcd-server");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let mut etcd = Self {
            process: Process::new("etcd"),
            client_port: free_port(),
            peer_port: free_port(),
            agent,
            token: std::sync::Mutex::new(None),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        };
        etcd.start_again();
        etcd
    }

    /// `127.0.0.1:<client port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Kills the server (SIGKILL); its data stays.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same ports and data dir, and waits until healthy.
    pub fn start_again(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = Command::new(ETCD_BIN);
        command
            .arg("--name=roster-test")
            .arg(format!(
                "--data-dir={}",
                self.process.path("data").display()
            ))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=roster-test={peer}"))
            // A single member elects itself faster with short timeouts (ms).
            .arg("--heartbeat-interval=50")
            .arg("--election-timeout=300")
            .args(&self.flags)
            .env_remove("ETCDCTL_API");
        self.process.spawn(command);
        let agent = self.agent.clone();
        let health = format!("{client}/health");
        self.process.wait(|| {
            agent
                .get(&health)
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .is_some_and(|body| body.contains("\"health\":\"true\""))
        });
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// POSTs `body` to a gateway endpoint and returns the answer (panics on an error).
    pub fn call(&self, path: &str, body: Value) -> Value {
        self.try_call(path, body)
            .unwrap_or_else(|e| panic!("etcd {path}: {e}"))
    }

    /// POSTs `body` to a gateway endpoint: the answer, or the error answer as text.
    pub fn try_call(&self, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("http://{}{path}", self.addr());
        let mut request = self
            .agent
            .post(&url)
            .header("content-type", "application/json");
        if let Some(token) = self.token.lock().expect("token lock").clone() {
            request = request.header("authorization", token);
        }
        let mut response = request.send(body.to_string()).map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("HTTP {status}: {text}"));
        }
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {text}"))
    }

    /// Puts `value` at `key`; returns the new revision.
    pub fn put(&self, key: &str, value: &str) -> i64 {
        let body = json!({"key": BASE64.encode(key), "value": BASE64.encode(value)});
        revision_of(&self.call("/v3/kv/put", body))
    }

    /// Grants a lease of `ttl_secs` (never kept alive); returns its id.
    pub fn grant_lease(&self, ttl_secs: u64) -> i64 {
        let answer = self.call("/v3/lease/grant", json!({"TTL": ttl_secs.to_string()}));
        int64(&answer["ID"])
    }

    /// Puts `value` at `key` under a new lease of `ttl_secs` that nobody keeps alive, so
    /// the key vanishes when it expires; returns the lease id.
    pub fn put_with_lease(&self, key: &str, value: &str, ttl_secs: u64) -> i64 {
        let lease = self.grant_lease(ttl_secs);
        let body = json!({
            "key": BASE64.encode(key),
            "value": BASE64.encode(value),
            "lease": lease.to_string(),
        });
        self.call("/v3/kv/put", body);
        lease
    }

    /// Deletes `key`; returns the new revision.
    pub fn delete(&self, key: &str) -> i64 {
        let body = json!({"key": BASE64.encode(key)});
        revision_of(&self.call("/v3/kv/deleterange", body))
    }

    /// The current revision.
    pub fn revision(&self) -> i64 {
        let body = json!({"key": BASE64.encode("\0"), "count_only": true});
        revision_of(&self.call("/v3/kv/range", body))
    }

    /// Compacts the history up to `revision` (watches from before it get canceled).
    pub fn compact(&self, revision: i64) {
        let body = json!({"revision": revision.to_string(), "physical": true});
        self.call("/v3/kv/compaction", body);
    }

    /// Turns authentication on with user `root` (password `password`) as the only user.
    pub fn enable_auth(&self, password: &str) {
        self.call(
            "/v3/auth/user/add",
            json!({"name": "root", "password": password}),
        );
        self.call("/v3/auth/role/add", json!({"name": "root"}));
        self.call(
            "/v3/auth/user/grant",
            json!({"user": "root", "role": "root"}),
        );
        self.call("/v3/auth/enable", json!({}));
    }

    /// Authenticates the helpers as `name` (after [`Etcd::enable_auth`]).
    pub fn login(&self, name: &str, password: &str) {
        // etcd rejects an authenticate request that carries a stale token.
        *self.token.lock().expect("token lock") = None;
        let answer = self.call(
            "/v3/auth/authenticate",
            json!({"name": name, "password": password}),
        );
        let token = answer["token"].as_str().expect("token").to_string();
        *self.token.lock().expect("token lock") = Some(token);
    }
}

/// `header.revision` of a gateway answer.
fn revision_of(answer: &Value) -> i64 {
    int64(&answer["header"]["revision"])
}

/// An int64 the gateway wrote as a string.
fn int64(value: &Value) -> i64 {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| value.as_i64())
        .unwrap_or_else(|| panic!("not an int64: {value}"))
}

/// A real standalone ZooKeeper 3.8 on loopback, run in the foreground with its Java
/// main class.
pub struct ZooKeeper {
    process: Process,
    /// The client port.
    pub port: u16,
}

impl ZooKeeper {
    /// Starts ZooKeeper on a free port and waits until it answers `ruok`.
    pub fn start() -> Self {
        require(JAVA_BIN, "default-jre-headless");
        require(ZOOKEEPER_JAR, "zookeeper");
        let mut zookeeper = Self {
            process: Process::new("zookeeper"),
            port: free_port(),
        };
        zookeeper.write_config();
        zookeeper.start_again();
        zookeeper
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn write_config(&self) {
        // Sessions may be as short as 1 s, so an expiry test takes seconds.
        let config = format!(
            "tickTime=500\n\
             minSessionTimeout=1000\n\
             maxSessionTimeout=60000\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             dataDir={data}\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr\n",
            port = self.port,
            data = self.process.path("data").display(),
        );
        std::fs::write(self.process.path("zoo.cfg"), config).expect("write zoo.cfg");
    }

    /// Kills the server (SIGKILL); its data stays.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same port and data dir, and waits until it answers.
    pub fn start_again(&mut self) {
        let mut classpath = ZOOKEEPER_JAR.to_string();
        if Path::new(SLF4J_SIMPLE_JAR).exists() {
            classpath.push(':');
            classpath.push_str(SLF4J_SIMPLE_JAR);
        }
        let mut command = Command::new(JAVA_BIN);
        command
            .args([
                "-Xms32m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ])
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(self.process.path("zoo.cfg"));
        self.process.spawn(command);
        let port = self.port;
        self.process
            .wait(|| four_letter_word(port, "ruok").is_some_and(|a| a == "imok"));
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// A new client session (6 s session timeout).
    pub async fn client(&self) -> zk::Client {
        zk::Client::connect(&self.addr())
            .await
            .unwrap_or_else(|e| panic!("connect to ZooKeeper at {}: {e}", self.addr()))
    }
}

/// Sends a four-letter command and returns the answer.
fn four_letter_word(port: u16, word: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// Creates `path` holding `data` as a node of `mode`, and any missing parents as
/// persistent nodes (panics on failure).
pub async fn zk_create(client: &zk::Client, path: &str, data: &[u8], mode: zk::CreateMode) {
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    if let Some((parent, _)) = path.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
        client
            .mkdir(parent, &persistent)
            .await
            .unwrap_or_else(|e| panic!("mkdir {parent}: {e}"));
    }
    client
        .create(path, data, &mode.with_acls(zk::Acls::anyone_all()))
        .await
        .unwrap_or_else(|e| panic!("create {path}: {e}"));
}

/// Deletes the node at `path` (panics on failure).
pub async fn zk_delete(client: &zk::Client, path: &str) {
    client
        .delete(path, None)
        .await
        .unwrap_or_else(|e| panic!("delete {path}: {e}"));
}

/// A ZooKeeper session whose connection goes through a TCP proxy in this process, so a
/// test can cut it and let the server expire the session (and its ephemeral nodes)
/// after the session timeout, as when a provider's host drops off the network.
pub struct ExpiringSession {
    client: zk::Client,
    proxy: TcpProxy,
}

impl ExpiringSession {
    /// Opens a session with `timeout` (at least 1 s) to `zookeeper` through a new proxy.
    pub async fn open(zookeeper: &ZooKeeper, timeout: Duration) -> Self {
        let proxy = TcpProxy::start(zookeeper.port).await;
        let client = zk::Client::connector()
            .with_session_timeout(timeout)
            .connect(&format!("127.0.0.1:{}", proxy.port))
            .await
            .unwrap_or_else(|e| panic!("connect to ZooKeeper through the proxy: {e}"));
        Self { client, proxy }
    }

    /// The session's client.
    pub fn client(&self) -> &zk::Client {
        &self.client
    }

    /// Creates an ephemeral node of this session (missing parents as persistent nodes).
    pub async fn create_ephemeral(&self, path: &str, data: &[u8]) {
        zk_create(&self.client, path, data, zk::CreateMode::Ephemeral).await;
    }

    /// Cuts the connection for good: the client cannot reach the server any more, so the
    /// server expires the session once its timeout passes.
    pub fn cut(&self) {
        self.proxy.cut();
    }
}

/// A loopback TCP proxy to a local port; [`TcpProxy::cut`] closes every connection and
/// stops accepting new ones.
pub struct TcpProxy {
    /// The port it listens on.
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    /// Starts proxying a new loopback port to `target` (needs a tokio runtime).
    pub async fn start(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let task = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every connection.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { port, task }
    }

    /// Closes every proxied connection and the listening socket.
    pub fn cut(&self) {
        self.task.abort();
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A real Prometheus server on a free loopback port, with the configuration the test
/// gives (YAML), its data in a temp dir.
pub struct Prometheus {
    process: Process,
    /// The web (API) port.
    pub port: u16,
    agent: ureq::Agent,
}

impl Prometheus {
    /// Starts Prometheus with `config` and waits until it is ready.
    pub fn start(config: &str) -> Self {
        require(PROMETHEUS_BIN, "prometheus");
        let mut prometheus = Self {
            process: Process::new("prometheus"),
            port: free_port(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(10)))
                .build()
                .into(),
        };
        let config_path = prometheus.process.path("prometheus.yml");
        std::fs::write(&config_path, config).expect("prometheus.yml");
        let mut command = Command::new(PROMETHEUS_BIN);
        command
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                prometheus.process.path("data").display()
            ))
            .arg(format!(
                "--web.listen-address=127.0.0.1:{}",
                prometheus.port
            ));
        prometheus.process.spawn(command);
        let (agent, ready) = (
            prometheus.agent.clone(),
            format!("http://127.0.0.1:{}/-/ready", prometheus.port),
        );
        prometheus
            .process
            .wait(|| agent.get(&ready).call().is_ok_and(|r| r.status() == 200));
        prometheus
    }

    /// `GET /api/v1/<path>`'s `data` (panics unless it answers `success`).
    pub fn api(&self, path: &str) -> Value {
        let url = format!("http://127.0.0.1:{}/api/v1/{path}", self.port);
        let body: Value = self
            .agent
            .get(&url)
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .body_mut()
            .read_json()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(body["status"], "success", "{url}: {body}");
        body["data"].clone()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// Prometheus' own Consul service discovery (`discovery/consul` of the Prometheus module,
/// with `model/relabel`), the program in `tests/clients/go-promsd` that `scripts/test`
/// builds to `target/roster-promsd` (or `ROSTER_PROMSD`): Debian's `prometheus` is built
/// without `consul_sd_configs`. A missing binary fails the test: it never skips.
pub fn promsd_bin() -> PathBuf {
    let path = std::env::var_os("ROSTER_PROMSD")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target/roster-promsd"));
    assert!(
        path.exists(),
        "Prometheus' Consul discovery program is not built at {} (scripts/test builds it \
         from tests/clients/go-promsd; or set ROSTER_PROMSD)",
        path.display()
    );
    path
}
