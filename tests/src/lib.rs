//! The black-box harness: real `roster` processes on free loopback ports with their own
//! temp dirs and log files, readiness polling, kill on drop, kill/restart for fault tests,
//! an HTTP helper and `eventually` in place of sleeps.
//!
//! The binary is `$ROSTER_BIN`, else `target/debug/roster` of this workspace; the test
//! command (`scripts/test`) builds it first.

use std::fs::File;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use serde_json::{self, json, Value};

pub mod addresses;
pub mod fixtures;
pub mod foreign;
pub mod netlab;
pub mod scenario;

/// The admin password test nodes start with.
pub const ADMIN_PASSWORD: &str = "test-admin-pass-1";

/// Path of the `roster` binary under test.
pub fn roster_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("ROSTER_BIN") {
        return PathBuf::from(p);
    }
    let root = workspace_root();
    let debug = root.join("target/debug/roster");
    assert!(
        debug.exists(),
        "roster binary not found at {}: run scripts/test, or set ROSTER_BIN",
        debug.display()
    );
    debug
}

/// The workspace root (parent of `tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A free port on 127.0.0.1 (TCP and UDP), never handed out twice by this process.
///
/// Ports come from 20000-30999 (and their gRPC companions, port + 1000, from
/// 21000-31999), below Linux's ephemeral range (32768+), so neither the kernel's choice
/// of source ports for outgoing connections nor another test can take a port that a
/// killed node will bind again on restart.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 11_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    // Start at a per-process offset, so concurrent test runs rarely meet.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id() % SPAN,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::SeqCst) % SPAN) as u16;
        // port + 1000 is where a node on `port` serves gRPC.
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 1000)).is_ok()
        {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN);
}

/// Polls `check` until it returns `Ok`, or panics with its last error after `timeout`.
pub fn eventually<T>(timeout: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(20);
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if Instant::now() >= deadline => {
                panic!("condition not met within {timeout:?}: {e}")
            }
            Err(_) => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(250));
            }
        }
    }
}

/// An HTTP response: status and body text.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Body as text.
    pub body: String,
    /// Response headers, lower-case names.
    pub headers: Vec<(String, String)>,
}

impl Resp {
    /// The body parsed as JSON (panics with the body if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the status, showing the body when it differs.
    #[track_caller]
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        self
    }
}

/// How to start a node.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Extra command-line arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Set `ROSTER_ADMIN_PASSWORD` (else the node generates one).
    pub admin_password: Option<String>,
    /// Ports to use (else free ones are picked): HTTP and peer.
    pub ports: Option<(u16, u16)>,
    /// Wait for `/health/ready` before returning.
    pub wait_ready: bool,
    /// A command the node runs under (e.g. `ip netns exec NAME`).
    pub wrapper: Vec<String>,
    /// The IP the HTTP API binds (and the tests reach).
    pub http_host: String,
    /// The IP the peer channel binds.
    pub peer_host: String,
    /// The roster binary to run (else [`roster_bin`]): an earlier build, for the
    /// mixed-version tests.
    pub bin: Option<PathBuf>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            args: Vec::new(),
            env: Vec::new(),
            admin_password: Some(ADMIN_PASSWORD.into()),
            ports: None,
            wait_ready: true,
            wrapper: Vec::new(),
            http_host: "127.0.0.1".into(),
            peer_host: "127.0.0.1".into(),
            bin: None,
        }
    }
}

/// A running roster node. Killed when dropped; its log is printed if the test failed.
pub struct Node {
    child: Option<Child>,
    /// The HTTP port.
    pub http_port: u16,
    /// The peer port.
    pub peer_port: u16,
    dir: tempfile::TempDir,
    options: NodeOptions,
    starts: usize,
    agent: ureq::Agent,
    /// The admin's token, fetched once (tokens survive restarts).
    token: std::sync::OnceLock<String>,
}

impl Node {
    /// Starts a node with default options and waits until it is ready.
    pub fn start() -> Self {
        Self::start_with(NodeOptions::default())
    }

    /// Starts a node and waits until it is ready.
    pub fn start_with(options: NodeOptions) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("roster-test-")
            .tempdir()
            .expect("tempdir");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let (http_port, peer_port) = options.ports.unwrap_or_else(|| (free_port(), free_port()));
        let wait = options.wait_ready;
        let mut node = Self {
            child: None,
            http_port,
            peer_port,
            dir,
            options,
            starts: 0,
            agent,
            token: std::sync::OnceLock::new(),
        };
        node.spawn();
        if wait {
            node.wait_ready();
        }
        node
    }

    /// The node's data dir.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The current log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("roster-{}.log", self.starts))
    }

    /// Every log file of the node, one per start, oldest first.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        (1..=self.starts)
            .map(|i| self.dir.path().join(format!("roster-{i}.log")))
            .filter(|p| p.exists())
            .collect()
    }

    /// `<http host>:<http port>`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.options.http_host, self.http_port)
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = File::create(self.log_path()).expect("log file");
        let bin = self.options.bin.clone().unwrap_or_else(roster_bin);
        let mut cmd = match self.options.wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(bin);
                cmd
            }
            None => Command::new(bin),
        };
        cmd.arg("--http")
            .arg(self.addr())
            .arg("--peer")
            .arg(format!("{}:{}", self.options.peer_host, self.peer_port))
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(&self.options.args)
            .env_remove("ROSTER_ADMIN_PASSWORD")
            .env("RUST_LOG", "info,roster=debug,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        if let Some(p) = &self.options.admin_password {
            cmd.env("ROSTER_ADMIN_PASSWORD", p);
        }
        for (k, v) in &self.options.env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("spawn roster"));
    }

    /// Waits for `/health/ready`, failing early if the process exits.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "roster exited with {status} while starting:\n{}",
                    self.log()
                );
            }
            if let Ok(r) = self.try_request("GET", "/health/ready", &[], None) {
                if r.status == 200 {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "roster not ready in 60 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the process with SIGKILL (no chance to flush anything).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("node is running");
        let pid = child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "roster did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the node (SIGKILL) and starts it again on the same ports and data dir.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_ready();
    }

    /// Starts the node again after [`Node::kill`], without waiting for readiness.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "node is running");
        self.spawn();
    }

    /// Whether the process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process id of the running node (for `/proc/<pid>/status` and the like).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("node is running").id()
    }

    /// Freezes the process (SIGSTOP): it keeps its sockets but answers nothing.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self
            .child
            .as_ref()
            .expect("node is running")
            .id()
            .to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }

    /// The current log contents.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(self.log_path()) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// A request without credentials; `body` is sent urlencoded. Panics if it names an
    /// instance address or push target off this machine ([`addresses`]).
    #[track_caller]
    pub fn try_request(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        form: Option<&str>,
    ) -> Result<Resp, String> {
        addresses::check_request(path_and_query, form);
        let url = format!("http://{}{}", self.addr(), path_and_query);
        let mut builder = ureq::http::Request::builder().method(method).uri(&url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let result = match form {
            Some(body) => {
                let req = builder
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body.to_string())
                    .map_err(|e| e.to_string())?;
                self.agent.run(req)
            }
            None => {
                let req = builder.body(()).map_err(|e| e.to_string())?;
                self.agent.run(req)
            }
        };
        let mut resp = result.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Resp {
            status,
            body,
            headers,
        })
    }

    /// A request with the admin's token and a binary body (`content_type`, or none),
    /// answered with the status and the raw body bytes: archives go both ways.
    pub fn binary(
        &self,
        method: &str,
        path_and_query: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>) {
        let sep = if path_and_query.contains('?') {
            '&'
        } else {
            '?'
        };
        let path = format!("{path_and_query}{sep}accessToken={}", self.token());
        addresses::check_request(&path, None);
        let url = format!("http://{}{}", self.addr(), path);
        let mut builder = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(ct) = content_type {
            builder = builder.header("content-type", ct);
        }
        let req = builder.body(body).expect("request");
        let mut resp = self
            .agent
            .run(req)
            .unwrap_or_else(|e| panic!("{method} {path_and_query}: {e}"));
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_vec()
            .unwrap_or_else(|e| panic!("{method} {path_and_query}: {e}"));
        (status, bytes)
    }

    /// A request without credentials (panics on transport errors). A pooled keep-alive
    /// connection found closed is retried once on a fresh one, as HTTP clients do.
    pub fn raw(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        form: Option<&str>,
    ) -> Resp {
        match self.try_request(method, path_and_query, headers, form) {
            Err(e) if e.contains("Peer disconnected") || e.contains("reset") => {
                eprintln!("retrying {method} {path_and_query} after a closed connection: {e}");
                self.try_request(method, path_and_query, headers, form)
            }
            other => other,
        }
        .unwrap_or_else(|e| panic!("{method} {path_and_query}: {e}"))
    }

    /// The admin's token (logs in on first use).
    pub fn token(&self) -> String {
        self.token.get_or_init(|| self.login()).clone()
    }

    /// Logs in as the admin and returns a fresh token.
    pub fn login(&self) -> String {
        let r = self
            .raw(
                "POST",
                &format!("/nacos/v1/auth/login?username=nacos&password={ADMIN_PASSWORD}"),
                &[],
                None,
            )
            .expect(200);
        r.json()["accessToken"].as_str().expect("token").to_string()
    }

    /// A request as the admin (bearer token).
    pub fn call(&self, method: &str, path_and_query: &str) -> Resp {
        let token = self.token();
        let auth = format!("Bearer {token}");
        self.raw(method, path_and_query, &[("authorization", &auth)], None)
    }

    /// A request as the admin with a urlencoded body.
    pub fn call_form(&self, method: &str, path: &str, form: &str) -> Resp {
        let token = self.token();
        let auth = format!("Bearer {token}");
        self.raw(method, path, &[("authorization", &auth)], Some(form))
    }

    /// Reads a metric's value from `/metrics` (first sample whose name and labels start
    /// with `prefix`).
    pub fn metric(&self, prefix: &str) -> Option<f64> {
        let text = self.raw("GET", "/metrics", &[], None).expect(200).body;
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            eprintln!(
                "---- roster log ({}) last lines ----\n{}",
                self.log_path().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        self.kill();
        // `ROSTER_TEST_KEEP=1` keeps a failed test's node directories (logs, data) for a
        // closer look; their paths are in the log tails above.
        if std::thread::panicking() && std::env::var_os("ROSTER_TEST_KEEP").is_some() {
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"));
            eprintln!("kept {}", dir.keep().display());
        }
    }
}

/// Percent-encodes a query value.
pub fn enc(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A unique name for a test's service, so tests sharing a node do not collide.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The cluster secret test clusters share.
pub const CLUSTER_SECRET: &str = "test-cluster-secret-0123456789";

/// A cluster of real nodes on loopback, all started with one command line each.
pub struct Cluster {
    /// The nodes, by position (node id = position + 1).
    pub nodes: Vec<Node>,
    /// The `--members` value.
    pub members: String,
}

impl Cluster {
    /// Starts `n` nodes with `extra` arguments each and waits until all are ready.
    pub fn start(n: usize, extra: &[&str]) -> Self {
        Self::start_on(n, extra, None)
    }

    /// Starts one node per namespace of `lab`.
    pub fn start_in(lab: &netlab::NetLab, n: usize, extra: &[&str]) -> Self {
        Self::start_on(n, extra, Some(lab))
    }

    /// Starts `n` nodes with `extra` arguments each, every one also serving DNS
    /// (`--dns`) on a port of its own; returns the cluster and the DNS ports, in node
    /// order.
    pub fn start_with_dns(n: usize, extra: &[&str]) -> (Self, Vec<u16>) {
        let dns: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let cluster = Self::start_each(n, None, |i| {
            let mut args = vec!["--dns".to_string(), format!("127.0.0.1:{}", dns[i])];
            args.extend(extra.iter().map(|a| a.to_string()));
            args
        });
        (cluster, dns)
    }

    fn start_on(n: usize, extra: &[&str], lab: Option<&netlab::NetLab>) -> Self {
        Self::start_each(n, lab, |_| extra.iter().map(|a| a.to_string()).collect())
    }

    /// Starts `n` nodes, node `i` (from 0) running the binary `bin(i)` (`None`: this
    /// build's), and waits until all are ready.
    pub fn start_mixed(n: usize, bin: impl Fn(usize) -> Option<PathBuf>) -> Self {
        Self::start_each_with(n, None, |_| Vec::new(), bin)
    }

    /// Starts `n` nodes, node `i` (from 0) with the arguments `extra(i)`.
    fn start_each(
        n: usize,
        lab: Option<&netlab::NetLab>,
        extra: impl Fn(usize) -> Vec<String>,
    ) -> Self {
        Self::start_each_with(n, lab, extra, |_| None)
    }

    /// [`Cluster::start_each`], node `i` running the binary `bin(i)`.
    fn start_each_with(
        n: usize,
        lab: Option<&netlab::NetLab>,
        extra: impl Fn(usize) -> Vec<String>,
        bin: impl Fn(usize) -> Option<PathBuf>,
    ) -> Self {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let peer_host = |i: usize| {
            lab.map(|l| l.peer_host(i + 1))
                .unwrap_or_else(|| "127.0.0.1".into())
        };
        let members = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("{}={}:{peer}", i + 1, peer_host(i)))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<Node> = ports
            .iter()
            .enumerate()
            .map(|(i, ports)| {
                let mut args = vec![
                    "--node-id".to_string(),
                    (i + 1).to_string(),
                    "--members".into(),
                    members.clone(),
                ];
                args.extend(extra(i));
                let mut options = NodeOptions {
                    args,
                    env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
                    ports: Some(*ports),
                    wait_ready: false,
                    bin: bin(i),
                    ..Default::default()
                };
                if let Some(lab) = lab {
                    options.wrapper = lab.wrapper(i + 1);
                    options.http_host = lab.http_host(i + 1);
                    options.peer_host = lab.peer_host(i + 1);
                }
                Node::start_with(options)
            })
            .collect();
        for node in &mut nodes {
            node.wait_ready();
        }
        Self { nodes, members }
    }

    /// Every node's HTTP address, comma-separated: the server list Nacos SDKs take.
    pub fn server_list(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.addr())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The `/api/v1/cluster` view of node `i`.
    pub fn view(&self, i: usize) -> Value {
        self.nodes[i]
            .call("GET", "/api/v1/cluster")
            .expect(200)
            .json()
    }

    /// Index of the node that leads, as a running node sees it (waits for one).
    pub fn leader(&self) -> usize {
        eventually(Duration::from_secs(20), || {
            for node in &self.nodes {
                if !node.is_running() {
                    continue;
                }
                if let Ok(r) = node.try_request(
                    "GET",
                    &format!("/api/v1/cluster?accessToken={}", node.token()),
                    &[],
                    None,
                ) {
                    if r.status == 200 {
                        let v = r.json();
                        if let Some(l) = v["leader"].as_u64() {
                            let idx = (l - 1) as usize;
                            if self.nodes.get(idx).is_some_and(|n| n.is_running()) {
                                return Ok(idx);
                            }
                        }
                    }
                }
            }
            Err("no leader".into())
        })
    }

    /// Index of a running node that does not lead.
    pub fn follower(&self) -> usize {
        let leader = self.leader();
        (0..self.nodes.len())
            .find(|i| *i != leader && self.nodes[*i].is_running())
            .expect("a running follower")
    }
}

/// `ip:port` of each instance a sync source reported, sorted.
pub fn source_addrs(instances: &[roster_sync::SourceInstance]) -> Vec<String> {
    let mut out: Vec<String> = instances
        .iter()
        .map(|i| format!("{}:{}", i.ip, i.port))
        .collect();
    out.sort();
    out
}

/// A client of a node's HTTPS port (`--http-tls-cert`), trusting only the CA
/// certificates in a PEM file: the same requests as [`Node`]'s, over TLS.
pub struct Https {
    agent: ureq::Agent,
    /// `HOST:PORT`.
    pub addr: String,
    /// The admin's token, fetched once.
    token: std::sync::OnceLock<String>,
}

impl Https {
    /// A client of `addr` (`127.0.0.1:PORT`) trusting the CA in `ca_pem`.
    pub fn new(addr: &str, ca_pem: &Path) -> Self {
        let pem = std::fs::read(ca_pem).expect("CA file");
        let roots: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
                _ => None,
            })
            .collect();
        assert!(!roots.is_empty(), "no certificate in {}", ca_pem.display());
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
            .unversioned_rustls_crypto_provider(std::sync::Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .tls_config(tls)
            .build()
            .into();
        Self {
            agent,
            addr: addr.to_string(),
            token: std::sync::OnceLock::new(),
        }
    }

    /// A request without credentials; `form` is sent urlencoded.
    #[track_caller]
    pub fn try_request(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &[(&str, &str)],
        form: Option<&str>,
    ) -> Result<Resp, String> {
        addresses::check_request(path_and_query, form);
        let url = format!("https://{}{}", self.addr, path_and_query);
        let mut builder = ureq::http::Request::builder().method(method).uri(&url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let body = match form {
            Some(body) => {
                builder = builder.header("content-type", "application/x-www-form-urlencoded");
                body.to_string()
            }
            None => String::new(),
        };
        let req = builder.body(body).map_err(|e| e.to_string())?;
        let mut resp = self.agent.run(req).map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let body = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok(Resp {
            status,
            body,
            headers,
        })
    }

    /// Waits (at most 60 s) for `/health/ready` over HTTPS.
    pub fn wait_ready(&self) {
        eventually(Duration::from_secs(60), || {
            let r = self.try_request("GET", "/health/ready", &[], None)?;
            (r.status == 200)
                .then_some(())
                .ok_or(format!("{} {}", r.status, r.body))
        });
    }

    /// The admin's token (logs in on first use).
    pub fn token(&self) -> String {
        self.token
            .get_or_init(|| {
                let form = format!("username=nacos&password={ADMIN_PASSWORD}");
                let r = self
                    .try_request("POST", "/nacos/v1/auth/login", &[], Some(&form))
                    .expect("login over https")
                    .expect(200);
                r.json()["accessToken"].as_str().expect("token").to_string()
            })
            .clone()
    }

    /// A request as the admin (bearer token), with an optional urlencoded body.
    pub fn call(&self, method: &str, path_and_query: &str, form: Option<&str>) -> Resp {
        let auth = format!("Bearer {}", self.token());
        self.try_request(method, path_and_query, &[("authorization", &auth)], form)
            .unwrap_or_else(|e| panic!("{method} {path_and_query} over https: {e}"))
    }
}

/// The certificate chain (DER, leaf first) a TLS server at `addr` presents, once the
/// client has checked it against the CA in `ca_pem`: a handshake and nothing more, so
/// it also reads the certificate of a port that then wants a client certificate.
pub fn served_chain(addr: &str, ca_pem: &Path) -> Result<Vec<Vec<u8>>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_pem).map_err(|e| e.to_string())? {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| e.to_string())?;
    let mut socket = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    while tls.is_handshaking() {
        tls.complete_io(&mut socket).map_err(|e| e.to_string())?;
    }
    Ok(tls
        .peer_certificates()
        .unwrap_or_default()
        .iter()
        .map(|c| c.to_vec())
        .collect())
}
