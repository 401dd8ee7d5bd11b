//! One case's service ([`Spec`]): its namespace, name and addresses, registration and
//! beats; and the [`Beater`] that keeps its instances alive until told to stop.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use roster_tests::{enc, unique, Node};

use super::views::State;
use super::{now_ms, Timeouts, KEEPALIVE};

/// A case's service: its own namespace, name and loopback addresses.
pub(super) struct Spec {
    pub(super) case: &'static str,
    pub(super) ns: String,
    pub(super) service: String,
    pub(super) addrs: Vec<String>,
    threshold: f64,
    pub(super) timeouts: Timeouts,
}

impl Spec {
    pub(super) fn new(
        case: &'static str,
        net: &str,
        count: u8,
        threshold: f64,
        timeouts: Timeouts,
    ) -> Self {
        let addrs = (1..=count).map(|i| format!("{net}.{i}:8080")).collect();
        Self {
            case,
            ns: unique("obs-ns"),
            service: unique("obs"),
            addrs,
            threshold,
            timeouts,
        }
    }

    pub(super) fn addr(&self, i: usize) -> &str {
        &self.addrs[i]
    }

    pub(super) fn all_healthy(&self) -> State {
        State {
            hosts: self.addrs.iter().map(|a| (a.clone(), true)).collect(),
            threshold: self.threshold,
        }
    }

    pub(super) fn query(&self) -> String {
        format!("serviceName={}&namespaceId={}", self.service, self.ns)
    }

    /// Creates the service (with its threshold) and registers every instance.
    pub(super) fn register(&self, via: &Node) {
        if self.threshold > 0.0 {
            via.call(
                "POST",
                &format!(
                    "/nacos/v1/ns/service?{}&protectThreshold={}",
                    self.query(),
                    self.threshold
                ),
            )
            .expect(200);
        }
        let metadata = enc(&format!(
            r#"{{"preserved.heart.beat.interval":"1000","preserved.heart.beat.timeout":"{}","preserved.ip.delete.timeout":"{}"}}"#,
            self.timeouts.beat, self.timeouts.delete
        ));
        for addr in &self.addrs {
            let (ip, port) = addr.split_once(':').unwrap();
            via.call(
                "POST",
                &format!(
                    "/nacos/v1/ns/instance?{}&ip={ip}&port={port}&ephemeral=true&metadata={metadata}",
                    self.query()
                ),
            )
            .expect(200);
        }
    }

    /// One beat for `addr` through `via`, as `PUT /nacos/v1/ns/instance/beat`.
    fn beat_one(&self, via: &Node, addr: &str) -> Result<(), String> {
        let (ip, port) = addr.split_once(':').unwrap();
        let auth = format!("Bearer {}", via.token());
        let r = request(
            via,
            "PUT",
            &format!(
                "/nacos/v1/ns/instance/beat?{}&ip={ip}&port={port}",
                self.query()
            ),
            &auth,
        )?;
        if r.status == 200 && r.body.contains("10200") {
            Ok(())
        } else {
            Err(format!("beat {addr}: {} {}", r.status, r.body))
        }
    }

    /// Beats `addrs` once; returns (sent, acknowledged) wall-clock ms.
    pub(super) fn beat(&self, via: &Node, addrs: &[&str]) -> (u64, u64) {
        let sent = now_ms();
        for a in addrs {
            self.beat_one(via, a)
                .unwrap_or_else(|e| panic!("{}: {e}", self.case));
        }
        (sent, now_ms())
    }
}

/// A request as the admin. A pooled keep-alive connection the server closed meanwhile
/// is retried once on a fresh one, as HTTP clients do (and `Node::raw`).
pub(super) fn request(
    node: &Node,
    method: &str,
    path_and_query: &str,
    auth: &str,
) -> Result<roster_tests::Resp, String> {
    let headers = [("authorization", auth)];
    match node.try_request(method, path_and_query, &headers, None) {
        Err(e) if e.contains("Peer disconnected") || e.contains("reset") => {
            node.try_request(method, path_and_query, &headers, None)
        }
        other => other,
    }
}

/// Keeps a case's instances beating every [`KEEPALIVE`] until told to stop, one by one.
pub(super) struct Beater<'a> {
    pub(super) spec: &'a Spec,
    via: &'a Node,
    /// Addresses still beaten. Held during a round, so once `silence` returns no beat for
    /// a silenced address is in flight.
    alive: Mutex<BTreeSet<String>>,
    pub(super) stop: AtomicBool,
    pub(super) failures: Mutex<Vec<String>>,
}

impl<'a> Beater<'a> {
    pub(super) fn new(spec: &'a Spec, via: &'a Node) -> Self {
        Self {
            spec,
            via,
            alive: Mutex::new(spec.addrs.iter().cloned().collect()),
            stop: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn run(&self) {
        while !self.stop.load(Ordering::Relaxed) {
            {
                let alive = self.alive.lock().unwrap();
                for a in alive.iter() {
                    if let Err(e) = self.spec.beat_one(self.via, a) {
                        self.failures.lock().unwrap().push(e);
                    }
                }
            }
            std::thread::sleep(KEEPALIVE);
        }
    }

    pub(super) fn silence(&self, addrs: &[&str]) {
        let mut alive = self.alive.lock().unwrap();
        for a in addrs {
            alive.remove(*a);
        }
    }
}
