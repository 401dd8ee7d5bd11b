//! The `--peer` listener: accepts connections up to a cap, runs the TLS handshake when
//! peer TLS is on, and serves HTTP/1.1 with the peer routes (`server.rs`) under two
//! clocks:
//! - **header timeout** (`--peer-header-timeout-secs`): a new connection must finish
//!   its TLS handshake and its first request head within it, and a request head that
//!   has begun must be complete within it (a slow sender of headers holds nothing for
//!   long); `server.rs` applies it to every stall while reading a body too;
//! - **idle timeout** (`--peer-idle-timeout-secs`): a connection with no request in
//!   progress and no byte read or written for that long is closed. Senders keep idle
//!   connections for less ([`crate::services::channel::client::POOL_IDLE`]), so they seldom meet a closed
//!   one.
//!
//! Beyond `--peer-max-connections` open connections, a new one is closed at once (the
//! gate and accept loop of `services/net`, which the HTTP and gRPC listeners use). hyper
//! buffers at most [`READ_BUFFER`] of a connection ahead of the handler, so a refused
//! request costs at most that much reading.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::server::PeerState;
use crate::services::net::{accept, Gate};

/// hyper's read buffer per connection: request heads and what arrives with them.
pub const READ_BUFFER: usize = 64 * 1024;
/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// The listener's limits (flags).
#[derive(Clone, Copy, Debug)]
pub struct PeerLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// TLS handshake, first request head, any request head, any body stall.
    pub header_timeout: Duration,
    /// A connection between requests, silent for this long, is closed.
    pub idle_timeout: Duration,
}

/// Serves the peer routes on `listener` until `stopping`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: PeerLimits,
    state: PeerState,
    mut stopping: watch::Receiver<bool>,
) {
    // The same gate and accept loop as the HTTP and gRPC listeners (`services/net`):
    // connections over the cap are closed at once, refusals and descriptor exhaustion
    // logged once per 10 s.
    let gate = Gate::new("peer", limits.max_connections, None);
    let mut connections = JoinSet::new();
    loop {
        let (stream, remote) = tokio::select! {
            accepted = accept(&listener, "peer") => accepted,
            _ = stopping.changed() => break,
        };
        while connections.try_join_next().is_some() {}
        let Some(permit) = gate.admit(remote.ip()) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let tls = tls.clone();
        let stopping = stopping.clone();
        connections.spawn(async move {
            connection(stream, tls, limits, state, stopping).await;
            drop(permit);
        });
    }
    // Requests in flight finish (each connection saw `stopping`); then the rest go.
    let drained = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

/// One connection: handshake, then requests until the peer closes, a clock runs out or
/// the node stops.
async fn connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    limits: PeerLimits,
    state: PeerState,
    mut stopping: watch::Receiver<bool>,
) {
    let remote = stream.peer_addr().ok();
    let activity = Arc::new(Activity::new());
    let watched = Watched {
        inner: stream,
        activity: activity.clone(),
    };
    let io = match tls {
        None => PeerIo::Plain(watched),
        Some(acceptor) => {
            match tokio::time::timeout(limits.header_timeout, acceptor.accept(watched)).await {
                Ok(Ok(stream)) => PeerIo::Tls(Box::new(stream)),
                Ok(Err(e)) => {
                    tracing::warn!(?remote, error = %e, "refused a peer connection: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(?remote, "peer TLS handshake timed out");
                    return;
                }
            }
        }
    };
    let service = {
        let activity = activity.clone();
        service_fn(move |request: Request<Incoming>| {
            let state = state.clone();
            let busy = activity.begin();
            async move {
                let response = super::server::handle(&state, request).await;
                drop(busy);
                Ok::<_, std::convert::Infallible>(response)
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The watchdog below does this, and does not take an idle connection for a slow one.
        .header_read_timeout(None)
        .max_buf_size(READ_BUFFER)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut stopping_seen = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(?remote, error = %e, "peer connection ended");
                }
                return;
            }
            why = activity.expired(limits) => {
                tracing::debug!(?remote, why, "closed a peer connection");
                return;
            }
            _ = stopping.changed(), if !stopping_seen => {
                stopping_seen = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// What the watchdog knows of a connection. Its lock is held for a few instructions,
/// never across an await.
struct Activity {
    state: Mutex<Clock>,
}

struct Clock {
    /// Requests being handled (0 or 1 on HTTP/1.1).
    busy: usize,
    /// When the head being read began (a new connection counts as one).
    head_since: Option<Instant>,
    /// The last byte read or written.
    last: Instant,
}

/// Marks a request in progress while it lives.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut clock = self.0.state.lock();
        clock.busy -= 1;
        clock.last = Instant::now();
    }
}

impl Activity {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            state: Mutex::new(Clock {
                busy: 0,
                head_since: Some(now),
                last: now,
            }),
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        let mut clock = self.state.lock();
        clock.busy += 1;
        clock.head_since = None;
        Busy(self.clone())
    }

    fn read(&self) {
        let now = Instant::now();
        let mut clock = self.state.lock();
        clock.last = now;
        if clock.busy == 0 && clock.head_since.is_none() {
            clock.head_since = Some(now);
        }
    }

    fn wrote(&self) {
        self.state.lock().last = Instant::now();
    }

    /// Completes when a clock runs out, with which. Looks at least once a second, so a
    /// head that begins while it sleeps is timed from when it began.
    async fn expired(&self, limits: PeerLimits) -> &'static str {
        loop {
            let now = Instant::now();
            let due = {
                let clock = self.state.lock();
                if clock.busy > 0 {
                    // The handler bounds its own reads.
                    None
                } else if let Some(since) = clock.head_since {
                    Some((
                        since + limits.header_timeout,
                        "request head not complete in time",
                    ))
                } else {
                    Some((clock.last + limits.idle_timeout, "idle"))
                }
            };
            let next = now + Duration::from_secs(1);
            match due {
                Some((deadline, why)) if deadline <= now => return why,
                Some((deadline, _)) => tokio::time::sleep_until(deadline.min(next)).await,
                None => tokio::time::sleep_until(next).await,
            }
        }
    }
}

/// A TCP stream that tells [`Activity`] about its reads and writes.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read();
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.wrote();
        }
        poll
    }

    // Passed through, so that hyper queues answer bodies instead of copying them into
    // a per-connection buffer that keeps its largest size (see `tls::MaybeTls`).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.wrote();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A served connection: plaintext or TLS.
type PeerIo = crate::services::net::tls::MaybeTls<Watched, TlsStream<Watched>>;
