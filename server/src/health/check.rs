//! Server-side health checks of persistent instances: a TCP connect or an HTTP GET per
//! instance, as its cluster's settings say (`NONE` clusters are not probed). Run by the
//! Raft leader only; a result flips an instance's health after [`CHECK_TIMES`] opposite
//! results in a row, and only flips are committed through Raft.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::registry::service::{HealthChecker, ServiceKey};
use crate::state::AppState;
use crate::store::command::CommandV1;

/// Opposite results in a row before health flips (Nacos' `checkTimes`).
pub const CHECK_TIMES: u32 = 3;
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Probes in flight at once.
const CONCURRENCY: usize = 64;

/// One instance to probe.
#[derive(Clone, Debug)]
pub struct Target {
    /// The service.
    pub key: ServiceKey,
    /// The instance's IP.
    pub ip: Arc<str>,
    /// The instance's port (its identity).
    pub port: u16,
    /// The port to probe.
    pub check_port: u16,
    /// How to probe.
    pub checker: HealthChecker,
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
fn targets(state: &AppState) -> Vec<Target> {
    let mut out = Vec::new();
    for ns in state.registry.namespaces() {
        for svc in state.registry.services(&ns.id) {
            let view = svc.view();
            let settings = view.settings_or_default();
            for inst in view
                .instances
                .values()
                .filter(|i| !i.ephemeral && i.owner().is_none())
            {
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

/// Probes one target: true if it answered as its checker expects.
pub async fn probe(target: &Target) -> bool {
    let addr = format!("{}:{}", bracket_v6(&target.ip), target.check_port);
    let attempt = async {
        let mut stream = TcpStream::connect(&addr).await.ok()?;
        match &target.checker {
            HealthChecker::Tcp | HealthChecker::None => Some(true),
            HealthChecker::Http {
                path,
                headers,
                expected_code,
            } => {
                let path = if path.starts_with('/') {
                    path.clone()
                } else {
                    format!("/{path}")
                };
                let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: roster-health-check\r\n");
                for header in headers.split('|').filter(|h| h.contains(':')) {
                    request.push_str(header.trim());
                    request.push_str("\r\n");
                }
                request.push_str("\r\n");
                stream.write_all(request.as_bytes()).await.ok()?;
                let mut head = vec![0u8; 64];
                let n = stream.read(&mut head).await.ok()?;
                let status_line = String::from_utf8_lossy(&head[..n]);
                let code: u16 = status_line.split_whitespace().nth(1)?.parse().ok()?;
                Some(code == *expected_code)
            }
        }
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, attempt).await,
        Ok(Some(true))
    )
}

fn bracket_v6(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

/// Probes every checked persistent instance each `interval` while this node leads, and
/// commits health flips.
pub async fn run_checker(state: AppState, interval: Duration, mut stopping: watch::Receiver<bool>) {
    let mut tracker = Tracker::default();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        if !state.ready.is_ready() || !state.store.is_leader() {
            tracker.clear();
            continue;
        }
        let mut probes = JoinSet::new();
        for target in targets(&state) {
            let permits = permits.clone();
            probes.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let ok = probe(&target).await;
                (target, ok)
            });
        }
        while let Some(done) = probes.join_next().await {
            let Ok((target, ok)) = done else { continue };
            let Some(healthy) = tracker.record(&target, ok) else {
                continue;
            };
            tracing::info!(service = %target.key, ip = %target.ip, port = target.port, healthy, "health check flipped an instance");
            let command = CommandV1::SetHealth {
                key: target.key.clone(),
                ip: target.ip.to_string(),
                port: target.port,
                healthy,
                at_ms: now_ms(),
            };
            if let Err(e) = state.store.propose(command).await {
                tracing::warn!(service = %target.key, error = %e, "could not commit a health change");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(healthy: bool) -> Target {
        Target {
            key: ServiceKey::new("public", "g", "s"),
            ip: "127.0.0.1".into(),
            port: 1,
            check_port: 1,
            checker: HealthChecker::Tcp,
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
        let mut t = target(true);
        t.check_port = port;
        assert!(probe(&t).await);
        t.checker = HealthChecker::Http {
            path: "/ok".into(),
            headers: String::new(),
            expected_code: 200,
        };
        assert!(probe(&t).await);
        t.checker = HealthChecker::Http {
            path: "/down".into(),
            headers: String::new(),
            expected_code: 200,
        };
        assert!(!probe(&t).await);
        // A closed port fails.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        t.check_port = closed;
        t.checker = HealthChecker::Tcp;
        assert!(!probe(&t).await);
    }
}
