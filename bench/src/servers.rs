//! Starting the systems under test: single nodes and three-node clusters of roster and
//! r-nacos, on free loopback ports, logs at warn, data under the bench's scratch
//! directory, no authentication. A [`Node`] kills its process when dropped.

use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::api::Api;
use crate::procs;

/// How long a node may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an r-nacos node may take to join the cluster before the bench completes the
/// membership itself (rnacos.md: concurrent joins can leave a node a non-voter).
const JOIN_TIMEOUT: Duration = Duration::from_secs(20);

/// The two systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// This project.
    Roster,
    /// The reference peer (crate `rnacos`).
    RNacos,
}

impl System {
    /// Both, in the order every metric runs them.
    pub const BOTH: [System; 2] = [System::Roster, System::RNacos];

    /// Short name for file names and JSON keys.
    pub fn key(self) -> &'static str {
        match self {
            System::Roster => "roster",
            System::RNacos => "rnacos",
        }
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            System::Roster => "roster",
            System::RNacos => "r-nacos",
        })
    }
}

/// Where the binaries are and where nodes keep their files.
#[derive(Clone, Debug)]
pub struct Setup {
    /// `target/release/roster`.
    pub roster: PathBuf,
    /// `target/bench/rnacos/bin/rnacos`.
    pub rnacos: PathBuf,
    /// Scratch directory: one subdirectory per node (data and log).
    pub scratch: PathBuf,
}

/// A running server process.
pub struct Node {
    /// Which system.
    pub system: System,
    /// Node id in its cluster (1 for a single node).
    pub id: u64,
    /// HTTP API address.
    pub http: SocketAddr,
    /// Nacos 2.x gRPC address (roster's `--grpc`, r-nacos' `RNACOS_GRPC_PORT`).
    pub grpc: SocketAddr,
    /// Process id.
    pub pid: u32,
    /// Its directory (data and `node.log`).
    pub dir: PathBuf,
    /// How it was started (program, arguments, environment), to start it again on
    /// the same data ([`Node::kill_and_restart`]).
    relaunch: Option<Relaunch>,
}

/// A node's command line, kept to start it again.
struct Relaunch {
    program: PathBuf,
    args: Vec<std::ffi::OsString>,
    envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>,
}

impl Relaunch {
    fn of(command: &Command) -> Self {
        Self {
            program: PathBuf::from(command.get_program()),
            args: command.get_args().map(|a| a.to_os_string()).collect(),
            envs: command
                .get_envs()
                .map(|(k, v)| (k.to_os_string(), v.map(|v| v.to_os_string())))
                .collect(),
        }
    }
}

impl Node {
    /// A client for its HTTP API.
    pub fn api(&self) -> Api {
        Api::new(self.http)
    }

    /// Kills the process with SIGKILL, as a crash would, and starts it again at once
    /// with the same command line and data directory (its log is appended to). Returns
    /// when the new process has been spawned.
    pub fn kill_and_restart(&mut self) -> Result<()> {
        let relaunch = self
            .relaunch
            .as_ref()
            .context("this node cannot be restarted")?;
        procs::kill(self.pid);
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.log())
            .context("opening the node's log")?;
        let mut command = Command::new(&relaunch.program);
        command
            .args(&relaunch.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        for (key, value) in &relaunch.envs {
            match value {
                Some(v) => command.env(key, v),
                None => command.env_remove(key),
            };
        }
        self.pid = procs::spawn(&mut command)?;
        Ok(())
    }

    /// Its log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join("node.log")
    }

    /// The last lines of its log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Fails with the log tail if the process has exited.
    fn check_alive(&self) -> Result<()> {
        if !procs::is_running(self.pid) {
            bail!(
                "{} node {} exited; log {}:\n{}",
                self.system,
                self.id,
                self.log().display(),
                self.log_tail()
            );
        }
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        procs::kill(self.pid);
        // Keep the log for a post-mortem, drop the data (it can be large).
        let _ = std::fs::remove_dir_all(self.dir.join("data"));
    }
}

/// A free TCP port on 127.0.0.1, below the kernel's ephemeral range (so outgoing
/// connections do not take it before the server binds it) and below the range the
/// black-box tests use (20000..31000), starting at a per-process offset.
pub fn free_port() -> Result<u16> {
    const LOW: u32 = 12_000;
    const SPAN: u32 = 8_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id() % SPAN,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::SeqCst) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port in {LOW}..{}", LOW + SPAN)
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Ports of one node.
struct Ports {
    http: u16,
    grpc: u16,
    peer: u16,
}

impl Ports {
    fn pick() -> Result<Self> {
        Ok(Self {
            http: free_port()?,
            grpc: free_port()?,
            peer: free_port()?,
        })
    }
}

/// Cluster settings of a roster node: its id, the members list and the secret.
struct RosterMembership<'a> {
    id: u64,
    /// `--members`; `None`: `--join` (wait to be added).
    members: Option<&'a str>,
    secret: &'a str,
}

/// Cluster settings of an r-nacos node: its id and, for nodes after the first, whom
/// to join.
struct RNacosMembership {
    id: u64,
    join: Option<SocketAddr>,
}

fn node_dir(setup: &Setup, name: &str) -> Result<PathBuf> {
    let dir = setup.scratch.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data"))
        .with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn log_stdio(dir: &Path) -> Result<(Stdio, Stdio)> {
    let log = std::fs::File::create(dir.join("node.log"))?;
    Ok((Stdio::from(log.try_clone()?), Stdio::from(log)))
}

fn spawn_roster(
    setup: &Setup,
    name: &str,
    ports: &Ports,
    membership: Option<RosterMembership<'_>>,
    admin_password: Option<&str>,
) -> Result<Node> {
    let dir = node_dir(setup, name)?;
    let (out, err) = log_stdio(&dir)?;
    let mut command = Command::new(&setup.roster);
    command
        .arg("--http")
        .arg(loopback(ports.http).to_string())
        .arg("--grpc")
        .arg(loopback(ports.grpc).to_string())
        .arg("--peer")
        .arg(loopback(ports.peer).to_string())
        .arg("--data-dir")
        .arg(dir.join("data"))
        // Every load comes from 127.0.0.1 (the config group's 1,000 pollers and its
        // publisher among them); real clients would come from as many hosts.
        .arg("--http-max-connections-per-ip")
        .arg("10000")
        // ROSTER_BENCH_LOG (e.g. `info`) raises roster's log level for a diagnosis.
        .arg("--log-level")
        .arg(std::env::var("ROSTER_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
        // RUST_LOG would win over --log-level.
        .env_remove("RUST_LOG")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // Every flag has a ROSTER_* variable; only the command line counts here.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ROSTER_") {
            command.env_remove(name);
        }
    }
    match admin_password {
        // Authentication on (roster's default), the admin's first password given.
        Some(password) => command.env("ROSTER_ADMIN_PASSWORD", password),
        None => command.arg("--no-auth"),
    };
    let id = match membership {
        Some(m) => {
            command
                .arg("--node-id")
                .arg(m.id.to_string())
                .env("ROSTER_CLUSTER_SECRET", m.secret);
            match m.members {
                Some(members) => command.arg("--members").arg(members),
                None => command.arg("--join"),
            };
            m.id
        }
        None => 1,
    };
    let pid = procs::spawn(&mut command)?;
    Ok(Node {
        system: System::Roster,
        id,
        http: loopback(ports.http),
        grpc: loopback(ports.grpc),
        pid,
        dir,
        relaunch: Some(Relaunch::of(&command)),
    })
}

fn spawn_rnacos(
    setup: &Setup,
    name: &str,
    ports: &Ports,
    membership: RNacosMembership,
) -> Result<Node> {
    let dir = node_dir(setup, name)?;
    let (out, err) = log_stdio(&dir)?;
    let mut command = Command::new(&setup.rnacos);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RNACOS_") {
            command.env_remove(name);
        }
    }
    // Started in its own empty directory: r-nacos reads a `.env` from the working
    // directory. Console off (port 0), open-API auth off (its default, made explicit).
    command
        .env("RUST_LOG", "warn")
        .env("RNACOS_SDK_HOST", "127.0.0.1")
        .env("RNACOS_CONSOLE_HOST", "127.0.0.1")
        .env("RNACOS_HTTP_PORT", ports.http.to_string())
        .env("RNACOS_GRPC_PORT", ports.grpc.to_string())
        .env("RNACOS_HTTP_CONSOLE_PORT", "0")
        .env("RNACOS_DATA_DIR", dir.join("data"))
        .env("RNACOS_ENABLE_OPEN_API_AUTH", "false")
        .env("RNACOS_RAFT_NODE_ID", membership.id.to_string())
        .env("RNACOS_RAFT_NODE_ADDR", loopback(ports.grpc).to_string())
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    match membership.join {
        None => command.env("RNACOS_RAFT_AUTO_INIT", "true"),
        Some(leader) => command
            .env("RNACOS_RAFT_AUTO_INIT", "false")
            .env("RNACOS_RAFT_JOIN_ADDR", leader.to_string()),
    };
    let pid = procs::spawn(&mut command)?;
    Ok(Node {
        system: System::RNacos,
        id: membership.id,
        http: loopback(ports.http),
        grpc: loopback(ports.grpc),
        pid,
        dir,
        relaunch: Some(Relaunch::of(&command)),
    })
}

/// Polls `ready` every 100 ms until it holds, the node dies or `timeout` passes.
async fn wait_until<F, Fut>(node: &Node, timeout: Duration, what: &str, ready: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        node.check_alive()?;
        if ready().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{} node {}: {what} not reached in {timeout:?}; log {}:\n{}",
                node.system,
                node.id,
                node.log().display(),
                node.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn roster_ready(node: &Node) -> Result<()> {
    let api = node.api();
    wait_until(node, READY_TIMEOUT, "/health/ready 200", || async {
        matches!(api.get("/health/ready").await, Ok(a) if a.status == 200)
    })
    .await
}

/// r-nacos' Raft view: `/nacos/v1/raft/metrics`.
async fn rnacos_metrics(api: &Api) -> Option<serde_json::Value> {
    let answer = api.get("/nacos/v1/raft/metrics").await.ok()?;
    (answer.status == 200).then(|| answer.json().ok()).flatten()
}

fn rnacos_members(metrics: &serde_json::Value) -> Vec<u64> {
    let mut members: Vec<u64> = metrics["membership_config"]["members"]
        .as_array()
        .map(|m| m.iter().filter_map(|v| v.as_u64()).collect())
        .unwrap_or_default();
    members.sort_unstable();
    members
}

/// The admin password of nodes started with authentication on.
pub(crate) const ADMIN_PASSWORD: &str = "bench-admin-pass-1";

/// Starts one roster node with authentication on, as roster runs by default, and logs
/// in as the admin: the node and an access token, which every request to it must
/// carry.
pub async fn start_roster_with_auth(setup: &Setup, name: &str) -> Result<(Node, String)> {
    let ports = Ports::pick()?;
    let node = spawn_roster(setup, name, &ports, None, Some(ADMIN_PASSWORD))?;
    roster_ready(&node).await?;
    let answer = node
        .api()
        .post_form(
            "/nacos/v1/auth/login",
            &[("username", "nacos"), ("password", ADMIN_PASSWORD)],
            &[],
        )
        .await?;
    let token = answer
        .json()
        .ok()
        .and_then(|v| v["accessToken"].as_str().map(str::to_string))
        .with_context(|| format!("login answered {} {}", answer.status, answer.text()))?;
    Ok((node, token))
}

/// Starts one node of `system` and waits until it serves.
pub async fn start(system: System, setup: &Setup, name: &str) -> Result<Node> {
    let ports = Ports::pick()?;
    match system {
        System::Roster => {
            let node = spawn_roster(setup, name, &ports, None, None)?;
            roster_ready(&node).await?;
            Ok(node)
        }
        System::RNacos => {
            let node = spawn_rnacos(setup, name, &ports, RNacosMembership { id: 1, join: None })?;
            let api = node.api();
            wait_until(&node, READY_TIMEOUT, "Raft leader", || async {
                matches!(rnacos_metrics(&api).await, Some(m) if m["state"] == "Leader")
            })
            .await?;
            Ok(node)
        }
    }
}

/// Three nodes of one system.
pub struct Cluster {
    /// The nodes, ids 1..=3 (then any added).
    pub nodes: Vec<Node>,
    /// roster's cluster secret (empty for r-nacos).
    secret: String,
}

impl Cluster {
    /// Starts roster node `id` with `--join` and adds it through node 1
    /// (`POST /api/v1/cluster/members`, what `roster cluster add` sends); returns once
    /// the membership change is committed, not once the node is ready.
    pub async fn add_roster_node(&mut self, setup: &Setup, name: &str, id: u64) -> Result<()> {
        let ports = Ports::pick()?;
        let membership = RosterMembership {
            id,
            members: None,
            secret: &self.secret,
        };
        let node = spawn_roster(
            setup,
            &format!("{name}-{id}"),
            &ports,
            Some(membership),
            None,
        )?;
        let peer = loopback(ports.peer);
        let answer = self.nodes[0]
            .api()
            .post(&format!("/api/v1/cluster/members?id={id}&peer={peer}"))
            .await?;
        if answer.status != 200 {
            anyhow::bail!("adding node {id}: {} {}", answer.status, answer.text());
        }
        self.nodes.push(node);
        Ok(())
    }

    /// The current leader's id, as the first node that answers reports it.
    pub async fn leader(&self) -> Result<u64> {
        for node in &self.nodes {
            let api = node.api();
            let leader = match node.system {
                System::Roster => api
                    .get("/api/v1/cluster")
                    .await
                    .ok()
                    .and_then(|a| a.json().ok())
                    .and_then(|v| v["leader"].as_u64()),
                System::RNacos => rnacos_metrics(&api)
                    .await
                    .and_then(|v| v["current_leader"].as_u64()),
            };
            if let Some(leader) = leader {
                return Ok(leader);
            }
        }
        bail!("no node reports a leader")
    }

    /// A node that is not the leader.
    pub async fn follower(&self) -> Result<&Node> {
        let leader = self.leader().await?;
        self.nodes
            .iter()
            .find(|n| n.id != leader)
            .context("every node is the leader")
    }
}

/// Starts a three-node cluster of `system` and waits until it has formed.
pub async fn start_cluster(system: System, setup: &Setup, name: &str) -> Result<Cluster> {
    let ports = [Ports::pick()?, Ports::pick()?, Ports::pick()?];
    match system {
        System::Roster => {
            let members: Vec<String> = ports
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{}={}", i + 1, loopback(p.peer)))
                .collect();
            let members = members.join(",");
            let secret = cluster_secret()?;
            let mut nodes = Vec::new();
            for (i, p) in ports.iter().enumerate() {
                let membership = RosterMembership {
                    id: i as u64 + 1,
                    members: Some(&members),
                    secret: &secret,
                };
                nodes.push(spawn_roster(
                    setup,
                    &format!("{name}-{}", i + 1),
                    p,
                    Some(membership),
                    None,
                )?);
            }
            for node in &nodes {
                roster_ready(node).await?;
            }
            Ok(Cluster { nodes, secret })
        }
        System::RNacos => {
            // Started one after another, each once the previous one has joined: the
            // documented back-to-back start can leave a node a non-voter (rnacos.md §6).
            let first = spawn_rnacos(
                setup,
                &format!("{name}-1"),
                &ports[0],
                RNacosMembership { id: 1, join: None },
            )?;
            let first_api = first.api();
            wait_until(&first, READY_TIMEOUT, "Raft leader", || async {
                matches!(rnacos_metrics(&first_api).await, Some(m) if m["state"] == "Leader")
            })
            .await?;
            let mut nodes = vec![first];
            for (i, p) in ports.iter().enumerate().skip(1) {
                let id = i as u64 + 1;
                let node = spawn_rnacos(
                    setup,
                    &format!("{name}-{id}"),
                    p,
                    RNacosMembership {
                        id,
                        join: Some(loopback(ports[0].grpc)),
                    },
                )?;
                let joined = wait_until(&node, JOIN_TIMEOUT, "membership", || async {
                    matches!(rnacos_metrics(&first_api).await,
                             Some(m) if rnacos_members(&m).contains(&id))
                })
                .await;
                if let Err(e) = joined {
                    node.check_alive()?;
                    eprintln!("  r-nacos node {id} did not join by itself ({e:#}); completing the membership");
                }
                nodes.push(node);
            }
            let all = [1, 2, 3];
            let formed = wait_until(&nodes[0], JOIN_TIMEOUT, "three voters", || async {
                matches!(rnacos_metrics(&first_api).await, Some(m) if rnacos_members(&m) == all)
            })
            .await;
            if formed.is_err() {
                // The fix rnacos.md used for the join race.
                let client = reqwest::Client::new();
                client
                    .post(format!(
                        "http://{}/nacos/v1/raft/change-membership",
                        nodes[0].http
                    ))
                    .header("content-type", "application/json")
                    .body("[1,2,3]")
                    .send()
                    .await
                    .context("change-membership")?;
                wait_until(&nodes[0], JOIN_TIMEOUT, "three voters", || async {
                    matches!(rnacos_metrics(&first_api).await, Some(m) if rnacos_members(&m) == all)
                })
                .await?;
            }
            for node in &nodes {
                let api = node.api();
                wait_until(node, JOIN_TIMEOUT, "knows the leader", || async {
                    matches!(rnacos_metrics(&api).await, Some(m) if m["current_leader"] == 1)
                })
                .await?;
            }
            Ok(Cluster {
                nodes,
                secret: String::new(),
            })
        }
    }
}

/// A fresh random cluster secret (hex of 24 random bytes).
fn cluster_secret() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
