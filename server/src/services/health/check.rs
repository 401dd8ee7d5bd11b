//! Server-side health checks of persistent instances: a TCP connect or an HTTP GET per
//! instance, as its cluster's settings say (`NONE` clusters are not probed). Run by the
//! Raft leader only; a result flips an instance's health after [`CHECK_TIMES`] opposite
//! results in a row, and only flips are committed through Raft.
//!
//! A target is resolved first (an instance may be a host name) and connected to by the
//! address found, once it is clear of the [`DenyList`]; a denied target is skipped and
//! keeps its health. An HTTP probe is written only from a path and headers that pass
//! `validate::check_health_checker` (checked when stored, and here again: settings
//! stored by an older build may not have been).
//!
//! A connect that fails for want of this node's own resources — out of descriptors,
//! file slots, buffers, memory or local ports ([`is_local_failure`]) — says nothing of
//! the instance: that round is skipped for it, and its streak is left as it was. A
//! leader out of descriptors would otherwise mark every live persistent instance down.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::deny::DenyList;
use crate::services::cluster::readiness::Readiness;
use crate::services::naming::writes::record_health;
use crate::services::store::Store;
use crate::services::workers::Workers;
use roster_registry::instance::Instance;
use roster_registry::service::{HealthChecker, ServiceKey};
use roster_registry::validate::{check_health_check_path, health_check_headers, Invalid};
use roster_registry::Registry;

/// Opposite results in a row before health flips (Nacos' `checkTimes`).
pub const CHECK_TIMES: u32 = 3;
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Probes in flight at once.
const CONCURRENCY: usize = 64;
/// One warning per this long while this node cannot make probes itself.
const LOCAL_FAILURE_WARN_EVERY: Duration = Duration::from_secs(10);

/// The metadata key naming an instance's own check — `http`, `tcp`, or another word for
/// none — which replaces its cluster's (the Consul face's registrations carry one).
pub const OWN_CHECK_KEY: &str = "consul.check";
/// What an instance's own check probes: an `http://` URL or `host:port`.
pub const OWN_CHECK_TARGET_KEY: &str = "consul.check.target";

/// One instance to probe.
#[derive(Clone, Debug)]
pub struct Target {
    /// The service.
    pub key: ServiceKey,
    /// The instance's IP.
    pub ip: Arc<str>,
    /// The instance's port (its identity).
    pub port: u16,
    /// The host probed: the instance's IP, or its own check's host.
    pub host: Arc<str>,
    /// The port to probe.
    pub check_port: u16,
    /// How to probe.
    pub checker: HealthChecker,
    /// Whether any 2xx passes an HTTP probe (an instance's own check, as Consul's), not
    /// only the checker's expected code.
    pub any_2xx: bool,
    /// Its current health.
    pub healthy: bool,
}

impl Target {
    fn id(&self) -> (ServiceKey, Arc<str>, u16) {
        (self.key.clone(), self.ip.clone(), self.port)
    }
}

/// Streaks of results that disagree with each instance's current health.
#[derive(Default)]
pub struct Tracker {
    streaks: HashMap<(ServiceKey, Arc<str>, u16), u32>,
}

impl Tracker {
    /// Records a probe result; returns the new health when it should flip.
    pub fn record(&mut self, target: &Target, ok: bool) -> Option<bool> {
        let id = target.id();
        if ok == target.healthy {
            self.streaks.remove(&id);
            return None;
        }
        let streak = self.streaks.entry(id.clone()).or_insert(0);
        *streak += 1;
        if *streak >= CHECK_TIMES {
            self.streaks.remove(&id);
            Some(ok)
        } else {
            None
        }
    }

    /// Forgets everything (when leadership is lost).
    pub fn clear(&mut self) {
        self.streaks.clear();
    }
}

/// Every persistent instance whose cluster is checked. Scans services, which is cheap
/// next to the probes themselves.
fn targets(registry: &Registry) -> Vec<Target> {
    let mut out = Vec::new();
    for ns in registry.namespaces() {
        for svc in registry.services(&ns.id) {
            let view = svc.view();
            let settings = view.settings_or_default();
            for inst in view
                .instances
                .values()
                .filter(|i| !i.ephemeral && i.owner().is_none())
            {
                if let Some(kind) = inst.metadata.get(OWN_CHECK_KEY) {
                    out.extend(own_target(&svc.key, inst, kind));
                    continue;
                }
                let cluster = settings
                    .clusters
                    .get(&*inst.cluster)
                    .cloned()
                    .unwrap_or_default();
                if cluster.health_checker == HealthChecker::None {
                    continue;
                }
                out.push(Target {
                    key: ServiceKey::clone(&svc.key),
                    ip: Arc::from(inst.ip()),
                    port: inst.port,
                    host: Arc::from(inst.ip()),
                    any_2xx: false,
                    check_port: if cluster.use_instance_port {
                        inst.port
                    } else {
                        cluster.check_port
                    },
                    checker: cluster.health_checker,
                    healthy: inst.healthy,
                });
            }
        }
    }
    out
}

/// The target of an instance's own check of `kind`; `None` for no check (or a target
/// that does not parse: stored by a face that checked it, so never in practice).
fn own_target(key: &ServiceKey, inst: &Instance, kind: &str) -> Option<Target> {
    let target = inst.metadata.get(OWN_CHECK_TARGET_KEY)?;
    let (host, port, checker) = match kind {
        "http" => {
            let (host, port, path) = http_target(target).ok()?;
            let checker = HealthChecker::Http {
                path,
                headers: String::new(),
                expected_code: 200,
            };
            (host, port, checker)
        }
        "tcp" => {
            let (host, port) = tcp_target(target).ok()?;
            (host, port, HealthChecker::Tcp)
        }
        _ => return None,
    };
    Some(Target {
        key: key.clone(),
        ip: Arc::from(inst.ip()),
        port: inst.port,
        host: Arc::from(host),
        check_port: port,
        checker,
        any_2xx: true,
        healthy: inst.healthy,
    })
}

/// What an `http://` check URL probes: host, port (80 when unsaid) and the path with
/// its query. Plain HTTP only: the prober speaks no TLS.
pub fn http_target(url: &str) -> Result<(String, u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("'{url}' is not an http:// URL (roster's checks speak plain HTTP).")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = host_port(authority, 80)?;
    check_health_check_path(path).map_err(|e| e.message)?;
    Ok((host, port, path.to_string()))
}

/// What a `host:port` TCP check connects to.
pub fn tcp_target(target: &str) -> Result<(String, u16), String> {
    let (host, port) = host_port(target, 0)?;
    if port == 0 {
        return Err(format!("'{target}' has no port."));
    }
    Ok((host, port))
}

/// `host:port` (`[v6]:port`); `default` when the port is left out.
fn host_port(authority: &str, default: u16) -> Result<(String, u16), String> {
    let bad = || format!("'{authority}' is not host:port.");
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']').ok_or_else(bad)?;
            (host, rest.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port = match port {
        None => default,
        Some(p) => p.parse().map_err(|_| bad())?,
    };
    let fits = |b: u8| b.is_ascii_alphanumeric() || b"-._:".contains(&b);
    if host.is_empty() || host.len() > 253 || !host.bytes().all(fits) {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It answered as its checker expects.
    Up,
    /// It did not (refused, timed out, wrong status, or its name did not resolve).
    Down,
    /// It was not probed, for this reason; its health stays as it is.
    Skipped(String),
    /// This node could not make the probe (out of descriptors, say: the error given);
    /// nothing is known of the instance this round.
    LocalFailure(String),
}

/// Whether a failure to connect to (or to look up) an instance is this node's own: out
/// of descriptors (EMFILE), the system out of open files (ENFILE), out of buffers
/// (ENOBUFS) or memory, or out of local ports (EADDRNOTAVAIL, on a connect). Refused,
/// unreachable, reset or timed out are the instance's (or its network's).
pub fn is_local_failure(e: &io::Error) -> bool {
    if matches!(
        e.kind(),
        io::ErrorKind::AddrNotAvailable | io::ErrorKind::OutOfMemory
    ) {
        return true;
    }
    // std gives these no `ErrorKind` of their own, and ENOBUFS differs between systems.
    #[cfg(unix)]
    if let Some(code) = e.raw_os_error() {
        use rustix::io::Errno;
        return matches!(
            Errno::from_raw_os_error(code),
            Errno::MFILE | Errno::NFILE | Errno::NOBUFS
        );
    }
    false
}

/// Probes one target, unless the deny list or its checker's settings forbid it.
pub async fn probe(target: &Target, deny: &DenyList) -> Outcome {
    let request = match &target.checker {
        HealthChecker::Http { path, headers, .. } => {
            match http_request(path, headers, &host_header(target)) {
                Ok(request) => Some(request),
                Err(e) => return Outcome::Skipped(format!("unsafe HTTP check: {e}")),
            }
        }
        HealthChecker::Tcp | HealthChecker::None => None,
    };
    let attempt = async {
        let addrs = match resolve(&target.host, target.check_port).await {
            Ok(addrs) if !addrs.is_empty() => addrs,
            Err(e) if is_local_failure(&e) => return Outcome::LocalFailure(e.to_string()),
            Ok(_) | Err(_) => return Outcome::Down,
        };
        let allowed: Vec<SocketAddr> = addrs.into_iter().filter(|a| !deny.denies(*a)).collect();
        if allowed.is_empty() {
            return Outcome::Skipped("the address is on the health-check deny list".into());
        }
        connect_and_check(
            &allowed,
            request.as_deref(),
            &target.checker,
            target.any_2xx,
        )
        .await
    };
    tokio::time::timeout(PROBE_TIMEOUT, attempt)
        .await
        .unwrap_or(Outcome::Down)
}

/// The addresses of `host` (an IP, or a name to look up) at `port`; none when the name
/// has none.
async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    Ok(tokio::net::lookup_host((host, port)).await?.collect())
}

/// Connects to the first of `addrs` that accepts and, for HTTP, sends `request` and
/// compares the status. A connect that fails for want of this node's resources ends the
/// probe as a [`Outcome::LocalFailure`].
async fn connect_and_check(
    addrs: &[SocketAddr],
    request: Option<&str>,
    checker: &HealthChecker,
    any_2xx: bool,
) -> Outcome {
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) if is_local_failure(&e) => return Outcome::LocalFailure(e.to_string()),
            Err(_) => {}
        }
    }
    let Some(stream) = stream else {
        return Outcome::Down;
    };
    let (Some(request), HealthChecker::Http { expected_code, .. }) = (request, checker) else {
        return Outcome::Up;
    };
    match http_status(stream, request).await {
        Some(code) if code == *expected_code => Outcome::Up,
        Some(code) if any_2xx && (200..300).contains(&code) => Outcome::Up,
        _ => Outcome::Down,
    }
}

/// Sends `request` on `stream` and reads the status code of the answer.
async fn http_status(mut stream: TcpStream, request: &str) -> Option<u16> {
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await.ok()?;
    let status_line = String::from_utf8_lossy(&head[..n]);
    status_line.split_whitespace().nth(1)?.parse().ok()
}

/// The `Host` an HTTP probe names unless its headers give one: the instance's address
/// and the port probed.
fn host_header(target: &Target) -> String {
    format!("{}:{}", bracket_v6(&target.host), target.check_port)
}

fn bracket_v6(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

/// The bytes of an HTTP probe: one GET of `path` with `headers` (Nacos' `Name:value|...`;
/// a `Host` or `User-Agent` among them replaces the prober's own). Refused unless the
/// path and headers pass the rules they were stored under, so that no stored value can
/// add a header line or a second request.
fn http_request(path: &str, headers: &str, host: &str) -> Result<String, Invalid> {
    check_health_check_path(path)?;
    let headers = health_check_headers(headers)?;
    let path = if path.is_empty() { "/" } else { path };
    let given = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !given("host") {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    if !given("user-agent") {
        request.push_str("User-Agent: roster-health-check\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    Ok(request)
}

/// The health checker: what it probes and where its verdicts go.
pub struct HealthChecks {
    /// Where the targets are read (persistent instances of checked clusters).
    pub registry: Registry,
    /// Where health flips are committed; the checker runs only while it leads.
    pub store: Store,
    /// No probes before the node is ready.
    pub ready: Readiness,
    /// Time between rounds.
    pub interval: Duration,
    /// What is never probed.
    pub deny: DenyList,
}

impl HealthChecks {
    /// Starts the checker among `workers`.
    pub fn spawn_workers(self, workers: &mut Workers) {
        workers.spawn(run_checker(self, workers.stopping()));
    }
}

/// Probes every checked persistent instance each `interval` while this node leads, and
/// commits health flips. Targets `deny` names are never connected to.
async fn run_checker(checks: HealthChecks, mut stopping: watch::Receiver<bool>) {
    let HealthChecks {
        registry,
        store,
        ready,
        interval,
        deny,
    } = checks;
    let deny = Arc::new(deny);
    let mut tracker = Tracker::default();
    // Targets skipped and already logged: each is logged once, not every round.
    let mut skipped: HashSet<(ServiceKey, Arc<str>, u16)> = HashSet::new();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    // When this node last warned that it could not make probes itself.
    let mut local_warned: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        if !ready.is_ready() || !store.is_leader() {
            tracker.clear();
            skipped.clear();
            continue;
        }
        let mut probes = JoinSet::new();
        for target in targets(&registry) {
            let (permits, deny) = (permits.clone(), deny.clone());
            probes.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let outcome = probe(&target, &deny).await;
                (target, outcome)
            });
        }
        // Probes this node could not make this round, and the last reason.
        let mut local_failures = (0usize, String::new());
        while let Some(done) = probes.join_next().await {
            let Ok((target, outcome)) = done else {
                continue;
            };
            let ok = match outcome {
                Outcome::Up => true,
                Outcome::Down => false,
                Outcome::Skipped(reason) => {
                    if skipped.insert(target.id()) {
                        tracing::warn!(service = %target.key, ip = %target.ip, port = target.check_port, reason, "health check skipped; the instance keeps its health");
                    }
                    continue;
                }
                Outcome::LocalFailure(error) => {
                    local_failures = (local_failures.0 + 1, error);
                    continue;
                }
            };
            let Some(healthy) = tracker.record(&target, ok) else {
                continue;
            };
            tracing::info!(service = %target.key, ip = %target.ip, port = target.port, healthy, "health check flipped an instance");
            let flipped =
                record_health(&store, target.key.clone(), &target.ip, target.port, healthy);
            if let Err(e) = flipped.await {
                tracing::warn!(service = %target.key, error = %e, "could not commit a health change");
            }
        }
        let (instances, error) = local_failures;
        let due = local_warned.is_none_or(|at| at.elapsed() >= LOCAL_FAILURE_WARN_EVERY);
        if instances > 0 && due {
            local_warned = Some(Instant::now());
            tracing::warn!(
                instances,
                error,
                "this node cannot open health-check connections (out of descriptors?); \
                 those instances keep their health this round"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::deny::DenyNets;
    use super::*;

    fn target(healthy: bool) -> Target {
        Target {
            key: ServiceKey::new("public", "g", "s"),
            ip: "127.0.0.1".into(),
            port: 1,
            host: "127.0.0.1".into(),
            check_port: 1,
            checker: HealthChecker::Tcp,
            any_2xx: false,
            healthy,
        }
    }

    #[test]
    fn flips_after_three_opposite_results_in_a_row() {
        let mut t = Tracker::default();
        let up = target(true);
        assert_eq!(t.record(&up, false), None);
        assert_eq!(t.record(&up, false), None);
        // A success in between resets the streak.
        assert_eq!(t.record(&up, true), None);
        assert_eq!(t.record(&up, false), None);
        assert_eq!(t.record(&up, false), None);
        assert_eq!(t.record(&up, false), Some(false));
        let down = target(false);
        assert_eq!(t.record(&down, true), None);
        assert_eq!(t.record(&down, true), None);
        assert_eq!(t.record(&down, true), Some(true));
    }

    #[tokio::test]
    async fn probes_tcp_and_http() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let status = if req.starts_with("GET /ok ") {
                    "200 OK"
                } else {
                    "503 Unavailable"
                };
                let _ = s
                    .write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let open = DenyList::default();
        let mut t = target(true);
        t.check_port = port;
        assert_eq!(probe(&t, &open).await, Outcome::Up);
        t.checker = HealthChecker::Http {
            path: "/ok".into(),
            headers: String::new(),
            expected_code: 200,
        };
        assert_eq!(probe(&t, &open).await, Outcome::Up);
        t.checker = HealthChecker::Http {
            path: "/down".into(),
            headers: String::new(),
            expected_code: 200,
        };
        assert_eq!(probe(&t, &open).await, Outcome::Down);
        // A host name is resolved and probed.
        t.ip = "localhost".into();
        t.checker = HealthChecker::Tcp;
        assert_eq!(probe(&t, &open).await, Outcome::Up);
        // Denied, by network or as this node's own socket: skipped, never connected to.
        let nets: DenyNets = "127.0.0.0/8,::1".parse().unwrap();
        assert!(matches!(
            probe(&t, &DenyList::new(&nets, [])).await,
            Outcome::Skipped(_)
        ));
        t.ip = "127.0.0.1".into();
        let own = DenyList::new(
            &DenyNets::default(),
            [SocketAddr::from(([127, 0, 0, 1], port))],
        );
        assert!(matches!(probe(&t, &own).await, Outcome::Skipped(_)));
        // A closed port fails.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        t.check_port = closed;
        t.checker = HealthChecker::Tcp;
        assert_eq!(probe(&t, &open).await, Outcome::Down);
    }

    #[test]
    fn failures_of_this_node_are_told_from_failures_of_the_instance() {
        use rustix::io::Errno;
        let os = |errno: Errno| io::Error::from_raw_os_error(errno.raw_os_error());
        for local in [
            os(Errno::MFILE),
            os(Errno::NFILE),
            os(Errno::NOBUFS),
            os(Errno::NOMEM),
            os(Errno::ADDRNOTAVAIL),
            io::ErrorKind::AddrNotAvailable.into(),
            io::ErrorKind::OutOfMemory.into(),
        ] {
            assert!(is_local_failure(&local), "{local:?}");
        }
        for instance in [
            os(Errno::CONNREFUSED),
            os(Errno::HOSTUNREACH),
            os(Errno::NETUNREACH),
            os(Errno::TIMEDOUT),
            os(Errno::CONNRESET),
            os(Errno::INVAL),
            io::ErrorKind::ConnectionRefused.into(),
            io::ErrorKind::TimedOut.into(),
            io::Error::other("failed to lookup address information"),
        ] {
            assert!(!is_local_failure(&instance), "{instance:?}");
        }
    }

    #[test]
    fn http_probes_are_one_request_or_none() {
        let request = http_request("", "X-Probe: 1|Host: svc.local", "127.0.0.1:80").unwrap();
        assert_eq!(
            request,
            "GET / HTTP/1.1\r\nConnection: close\r\nUser-Agent: roster-health-check\r\nX-Probe: 1\r\nHost: svc.local\r\n\r\n"
        );
        // Values stored before paths and headers were checked are not sent.
        for (path, headers) in [
            ("/a\r\nX-Evil: 1", ""),
            ("/a HTTP/1.1\r\n\r\nGET /b", ""),
            ("/", "X: 1\r\nX-Evil: 2"),
            ("/", "X: 1\n\nGET /admin HTTP/1.1"),
        ] {
            assert!(
                http_request(path, headers, "h").is_err(),
                "{path:?} {headers:?}"
            );
        }
    }

    #[tokio::test]
    async fn unsafe_stored_checks_are_skipped_before_connecting() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut t = target(true);
        t.check_port = listener.local_addr().unwrap().port();
        t.checker = HealthChecker::Http {
            path: "/x\r\nX-Evil: 1".into(),
            headers: String::new(),
            expected_code: 200,
        };
        assert!(matches!(
            probe(&t, &DenyList::default()).await,
            Outcome::Skipped(_)
        ));
        // Nothing connected.
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err());
    }
}
