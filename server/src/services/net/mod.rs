//! What the HTTP and gRPC listeners admit, and how long a connection may stay.
//!
//! - [`Gate`]: a cap on a listener's open connections (and per client IP). A connection
//!   over the cap is accepted and closed at once, so that its client fails fast (and a
//!   Nacos client moves on to another server) instead of waiting in the kernel's backlog,
//!   and the refusal can be counted and logged.
//! - [`accept`]: accepts that wait out descriptor exhaustion (EMFILE, ENFILE) with
//!   backoff and one warning per 10 s per listener, instead of spinning or logging a
//!   line per attempt (axum's loop logs an error per failure, once a second).
//! - [`raise_descriptor_limit`]: the soft descriptor limit raised to the hard one at start.
//! - [`http`]: the HTTP port's connections ([`serve_http`]), each under a head and an
//!   idle clock; [`body`]: the clock of their request bodies (`408` for a body that
//!   stalls).

pub mod body;
pub mod http;
pub mod tls;

pub use body::{body_timeout_answer, is_body_timeout, BodyTimeout};
pub use http::{serve_http, ForPeer, HttpLimits, HttpListenerCounters};

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// One warning per this long about the same trouble (refusals, accept errors).
const WARN_EVERY: Duration = Duration::from_secs(10);
/// The first wait after a failed accept; doubles up to [`ACCEPT_MAX_DELAY`].
const ACCEPT_FIRST_DELAY: Duration = Duration::from_millis(10);
/// The longest wait between accepts while they fail: a descriptor freed meanwhile is
/// taken within a second.
const ACCEPT_MAX_DELAY: Duration = Duration::from_secs(1);

/// Counts events and says when one is worth a log line: the first, then one per period,
/// with how many happened since the last line.
struct Throttle {
    /// When the last line was logged, and events since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    fn new() -> Self {
        Self {
            state: Mutex::new((None, 0)),
        }
    }

    /// Records an event; `Some(n)` when a line is due, `n` counting this one and those
    /// not logged since the last line.
    fn hit(&self) -> Option<u64> {
        let mut state = self.state.lock();
        state.1 += 1;
        let now = Instant::now();
        if state
            .0
            .is_some_and(|at| now.duration_since(at) < WARN_EVERY)
        {
            return None;
        }
        let n = std::mem::take(&mut state.1);
        state.0 = Some(now);
        Some(n)
    }
}

/// The cap on one listener's connections. Shared by its accept loop and its permits.
pub struct Gate {
    /// `http` or `grpc`, for the logs.
    listener: &'static str,
    /// Most connections open at once.
    max: usize,
    /// Most connections open at once from one IP (`usize::MAX`: no cap).
    max_per_ip: usize,
    /// Connections open now.
    open: AtomicUsize,
    /// Connections open now per IP, only when `max_per_ip` is set; an IP leaves the map
    /// with its last connection.
    by_ip: Mutex<HashMap<IpAddr, usize>>,
    refusals: Throttle,
    /// Refusals for `/metrics`, by cap (counters no one reads, for listeners that do not
    /// export them).
    counted: Refusals,
}

/// Counters of the connections a [`Gate`] refused, by the cap they met.
#[derive(Clone, Debug, Default)]
pub struct Refusals {
    /// The listener was full.
    pub total: Counter,
    /// The connection's IP had its share.
    pub per_ip: Counter,
}

/// A connection's place under a [`Gate`], given back when dropped (with the connection).
pub struct Permit {
    gate: Arc<Gate>,
    ip: IpAddr,
}

impl Gate {
    /// A gate for `listener` admitting `max` connections, `max_per_ip` from one IP.
    pub fn new(listener: &'static str, max: usize, max_per_ip: Option<usize>) -> Arc<Self> {
        Self::counted(listener, max, max_per_ip, Refusals::default())
    }

    /// [`Gate::new`], counting its refusals in `counted`.
    pub fn counted(
        listener: &'static str,
        max: usize,
        max_per_ip: Option<usize>,
        counted: Refusals,
    ) -> Arc<Self> {
        Arc::new(Self {
            listener,
            max,
            max_per_ip: max_per_ip.unwrap_or(usize::MAX),
            open: AtomicUsize::new(0),
            by_ip: Mutex::new(HashMap::new()),
            refusals: Throttle::new(),
            counted,
        })
    }

    /// A permit for a connection from `ip`, or `None` (logged, now and then) when the
    /// listener or the IP is at its cap.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Permit> {
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.counted.total.inc();
            self.refused(ip, "the listener");
            return None;
        }
        if self.max_per_ip != usize::MAX {
            let mut by_ip = self.by_ip.lock();
            let count = by_ip.entry(ip).or_default();
            if *count >= self.max_per_ip {
                drop(by_ip);
                self.open.fetch_sub(1, Ordering::AcqRel);
                self.counted.per_ip.inc();
                self.refused(ip, "one IP");
                return None;
            }
            *count += 1;
        }
        Some(Permit {
            gate: self.clone(),
            ip,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    fn refused(&self, ip: IpAddr, whose: &str) {
        if let Some(refused) = self.refusals.hit() {
            tracing::warn!(listener = self.listener, %ip, refused, open = self.open(), max = self.max,
                max_per_ip = self.max_per_ip, "connection limit of {whose} reached; closing new connections at once");
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.gate.max_per_ip != usize::MAX {
            let mut by_ip = self.gate.by_ip.lock();
            if let Some(count) = by_ip.get_mut(&self.ip) {
                *count -= 1;
                if *count == 0 {
                    by_ip.remove(&self.ip);
                }
            }
        }
        self.gate.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether an accept error means this process or system is out of something (descriptors,
/// buffers, memory) rather than that one connection went away before it was taken.
fn is_exhaustion(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// Accepts the next connection on `listener`, called `name` in the logs. Out of
/// descriptors (or any other failure that is not one connection's), it waits 10 ms,
/// doubling up to 1 s: the pending connection stays in the backlog, and an accept loop
/// that did not wait would spin on it. Warns once per 10 s per listener name, however
/// often accepts fail and succeed in between. Cancel-safe.
pub async fn accept(listener: &TcpListener, name: &'static str) -> (TcpStream, SocketAddr) {
    let mut delay = ACCEPT_FIRST_DELAY;
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) if !is_exhaustion(&e) => continue,
            Err(e) => {
                if let Some(failures) = accept_failures(name).hit() {
                    tracing::warn!(listener = name, error = %e, failures,
                        "cannot accept connections (out of descriptors?); waiting");
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(ACCEPT_MAX_DELAY);
            }
        }
    }
}

/// The throttle of accept failure warnings of the listener called `name`.
fn accept_failures(name: &'static str) -> Arc<Throttle> {
    static BY_NAME: std::sync::OnceLock<Mutex<HashMap<&'static str, Arc<Throttle>>>> =
        std::sync::OnceLock::new();
    let by_name = BY_NAME.get_or_init(Default::default);
    by_name
        .lock()
        .entry(name)
        .or_insert_with(|| Arc::new(Throttle::new()))
        .clone()
}

/// Raises this process's soft limit of open descriptors to its hard limit (as Go's
/// runtime does): a soft limit of 1024 under a hard limit of 524288 is systemd's default,
/// and far below the connection caps. Returns the limit in force.
pub fn raise_descriptor_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum {
            let raised = rustix::process::Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => limit.current = limit.maximum,
                Err(e) => tracing::debug!(error = %e, "cannot raise the descriptor limit"),
            }
        }
        limit.current
    }
    #[cfg(not(unix))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_caps_connections_in_all_and_per_ip() {
        let gate = Gate::new("test", 3, Some(2));
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = gate.admit(a).expect("first from a");
        let a2 = gate.admit(a).expect("second from a");
        assert!(gate.admit(a).is_none(), "a third from one IP");
        let b1 = gate.admit(b).expect("first from b");
        assert!(gate.admit(b).is_none(), "a fourth in all");
        assert_eq!(gate.open(), 3);
        drop(a1);
        let a3 = gate.admit(a).expect("a's place is free again");
        drop((a2, a3, b1));
        assert_eq!(gate.open(), 0);
        assert!(gate.by_ip.lock().is_empty());
    }

    #[test]
    fn a_counted_gate_counts_refusals_by_cap() {
        let counted = Refusals::default();
        let gate = Gate::counted("test", 2, Some(1), counted.clone());
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let c: IpAddr = "127.0.0.3".parse().unwrap();
        let _a1 = gate.admit(a).unwrap();
        assert!(gate.admit(a).is_none());
        assert!(gate.admit(a).is_none());
        let _b1 = gate.admit(b).unwrap();
        assert!(gate.admit(c).is_none());
        assert_eq!((counted.total.get(), counted.per_ip.get()), (1, 2));
    }

    #[test]
    fn a_throttle_lets_one_line_through_per_period_with_the_count() {
        let throttle = Throttle::new();
        assert_eq!(throttle.hit(), Some(1));
        assert_eq!(throttle.hit(), None);
        assert_eq!(throttle.hit(), None);
        throttle.state.lock().0 = Some(Instant::now() - WARN_EVERY);
        assert_eq!(throttle.hit(), Some(3));
    }
}
