//! What the HTTP and gRPC listeners admit, and how long a connection may stay.
//!
//! - [`Gate`]: a cap on a listener's open connections (and per client IP). A connection
//!   over the cap is accepted and closed at once, so that its client fails fast (and a
//!   Nacos client moves on to another server) instead of waiting in the kernel's backlog,
//!   and the refusal can be counted and logged.
//! - [`accept`]: accepts that wait out descriptor exhaustion (EMFILE, ENFILE) with
//!   backoff and one warning per 10 s per listener, instead of spinning or logging a
//!   line per attempt (axum's loop logs an error per failure, once a second).
//! - [`serve_http`]: HTTP/1.1 connections under a [`Gate`], each watched: a request head
//!   must be complete within `header_timeout` of its first byte (of connecting, for a
//!   connection's first request), and a connection with no request in progress is closed
//!   once no byte has moved for `idle_timeout`. A timer per connection looks a few times
//!   per timeout; per request the watch costs a few counter updates, one reference count
//!   and no allocation (the connection's service is `api::Front` under one tower-http
//!   header layer, no boxing). The peer listener (`cluster/listener.rs`) keeps the same two
//!   clocks with a lock and a clock read per read; here that would be on the hot path.
//!   With `--http-tls-*` the port is HTTPS only: the watch wraps the socket under TLS
//!   (raw bytes count as movement), the handshake falls within the first head's
//!   timeout, and a plaintext request gets a `400` naming https before the close.
//!   Plaintext serving is a separate instance of the same generic code: no TLS branch
//!   per read or request.
//! - [`raise_descriptor_limit`]: the soft descriptor limit raised to the hard one at start.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

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
}

/// A connection's place under a [`Gate`], given back when dropped (with the connection).
pub struct Permit {
    gate: Arc<Gate>,
    ip: IpAddr,
}

impl Gate {
    /// A gate for `listener` admitting `max` connections, `max_per_ip` from one IP.
    pub fn new(listener: &'static str, max: usize, max_per_ip: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            listener,
            max,
            max_per_ip: max_per_ip.unwrap_or(usize::MAX),
            open: AtomicUsize::new(0),
            by_ip: Mutex::new(HashMap::new()),
            refusals: Throttle::new(),
        })
    }

    /// A permit for a connection from `ip`, or `None` (logged, now and then) when the
    /// listener or the IP is at its cap.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Permit> {
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.refused(ip, "the listener");
            return None;
        }
        if self.max_per_ip != usize::MAX {
            let mut by_ip = self.by_ip.lock();
            let count = by_ip.entry(ip).or_default();
            if *count >= self.max_per_ip {
                drop(by_ip);
                self.open.fetch_sub(1, Ordering::AcqRel);
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

/// Limits of the HTTP listener (`--max-http-connections`, `--http-header-timeout-secs`,
/// `--http-idle-timeout-secs`).
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// How long a request head may take from its first byte (from connecting, for a
    /// connection's first request).
    pub header_timeout: Duration,
    /// How long a connection may go without a byte moving either way.
    pub idle_timeout: Duration,
}

/// A service that serves each connection as a copy told the connection's peer address
/// (`api::Front` hands it to UDP push subscriptions, which go only to the address a
/// query came from): no per-request cost.
pub trait ForPeer {
    /// This service, for a connection from `peer`.
    fn for_peer(&self, peer: SocketAddr) -> Self;
}

/// Serves `service` over HTTP/1.1 on `listener` under `limits` until `shutdown`; then
/// stops accepting, lets each connection finish the request it is serving, and returns
/// once every connection has closed. With `tls` the port is HTTPS only: each connection
/// is a TLS handshake, finished within the header timeout, and a plaintext request is
/// answered `400` and closed.
///
/// `service` must always be ready (`api::Front` is): it is called without `poll_ready`,
/// as the hot path has no use for tower's readiness protocol.
pub async fn serve_http<S>(
    listener: TcpListener,
    service: S,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) where
    S: tower::Service<Request<Body>, Response = Response, Error = Infallible>
        + ForPeer
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + Unpin + 'static,
{
    let gate = Gate::new("http", limits.max_connections, None);
    let mut http = hyper::server::conn::http1::Builder::new();
    // The watchdog below times heads and idleness; hyper's own head timeout would start
    // at the end of each response and so close idle keep-alive connections too early.
    http.header_read_timeout(None::<Duration>);
    let http = Arc::new(http);
    // Connections see `stopping` turn true; the server waits for `open` to lose its last
    // receiver (each connection holds one).
    let (stop, stopping) = watch::channel(false);
    let (open, _) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = accept(&listener, "http") => accepted,
            () = &mut shutdown => break,
        };
        let Some(permit) = gate.admit(remote.ip()) else {
            continue;
        };
        let connection = Connection {
            _permit: permit,
            limits,
            stopping: stopping.clone(),
            _open: open.subscribe(),
        };
        let service = service.for_peer(remote);
        tokio::spawn(connection.serve(stream, remote, service, http.clone(), tls.clone()));
    }
    drop(listener);
    stop.send_replace(true);
    open.closed().await;
}

/// What one connection's IO, requests and watchdog share. Each counter has one writer:
/// the IO wrapper, the service or the response future, all on the connection's task.
#[derive(Default)]
struct Activity {
    /// Reads that returned bytes.
    reads: AtomicU64,
    /// Writes that took bytes.
    writes: AtomicU64,
    /// Request heads hyper completed and handed over.
    heads: AtomicU64,
    /// Responses sent (requests no longer in progress).
    answered: AtomicU64,
    /// `reads` when the last response was sent: more means a new head has begun.
    reads_at_answer: AtomicU64,
}

/// Adds one to a counter that only the caller writes (no read-modify-write needed).
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

struct Connection {
    /// The connection's place under the cap, given back when the connection ends.
    _permit: Permit,
    limits: HttpLimits,
    stopping: watch::Receiver<bool>,
    /// Dropped with the connection: the server waits for every one at shutdown.
    _open: watch::Receiver<()>,
}

impl Connection {
    async fn serve<S>(
        mut self,
        stream: TcpStream,
        remote: SocketAddr,
        service: S,
        http: Arc<hyper::server::conn::http1::Builder>,
        tls: Option<TlsAcceptor>,
    ) where
        S: tower::Service<Request<Body>, Response = Response, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + Unpin + 'static,
    {
        let activity = Arc::new(Activity::default());
        let mut watchdog = Watchdog::new(activity.clone(), self.limits);
        let watched = Watched {
            stream,
            activity: activity.clone(),
        };
        let service = Tracked { service, activity };
        let Some(acceptor) = tls else {
            return self
                .serve_io(watched, remote, service, &http, &mut watchdog)
                .await;
        };
        // The handshake counts as part of the first head: both within the header
        // timeout of connecting.
        let handshake = tokio::select! {
            done = handshake(watched, &acceptor) => done,
            reason = watchdog.expired() => {
                tracing::debug!(%remote, reason, "closing https connection in its handshake");
                return;
            }
            _ = self.stopping.wait_for(|s| *s) => return,
        };
        match handshake {
            Ok(stream) => {
                self.serve_io(stream, remote, service, &http, &mut watchdog)
                    .await
            }
            Err(e) => tracing::debug!(%remote, error = %e, "https connection refused"),
        }
    }

    /// Serves HTTP/1.1 over `io` (the socket, or TLS over it) until the connection ends,
    /// the watchdog closes it or the server stops.
    async fn serve_io<I, S>(
        &mut self,
        io: I,
        remote: SocketAddr,
        service: Tracked<S>,
        http: &hyper::server::conn::http1::Builder,
        watchdog: &mut Watchdog,
    ) where
        I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
        S: tower::Service<Request<Body>, Response = Response, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + Unpin + 'static,
    {
        let conn = http.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        let mut closing = false;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(%remote, error = %e, "http connection ended");
                    }
                    break;
                }
                reason = watchdog.expired() => {
                    // Dropping the connection closes the socket.
                    tracing::debug!(%remote, reason, "closing http connection");
                    break;
                }
                _ = self.stopping.wait_for(|s| *s), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The longest plaintext request head read on an HTTPS port before it is answered.
const PLAINTEXT_HEAD_LIMIT: usize = 8 * 1024;

/// A new connection to an HTTPS port: its TLS handshake; or, when its first byte is not a
/// TLS handshake record (plaintext HTTP), a `400` that says to use https, then closed.
async fn handshake(
    mut watched: Watched,
    acceptor: &TlsAcceptor,
) -> io::Result<tokio_rustls::server::TlsStream<Watched>> {
    let mut first = [0u8; 1];
    if watched.stream.peek(&mut first).await? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if first[0] == crate::tls::HANDSHAKE_RECORD {
        return acceptor.accept(watched).await;
    }
    refuse_plaintext(&mut watched).await;
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "plaintext request on the HTTPS port",
    ))
}

/// Answers a plaintext request on an HTTPS port with a `400` naming https (as nginx
/// does), then closes. Its head is read first (at most 8 KiB; the caller's watchdog
/// bounds the time) and whatever follows the answer is drained until the client
/// closes: a socket closed with unread bytes is reset, and the client would see the
/// reset instead of the answer.
async fn refuse_plaintext(watched: &mut Watched) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while head.len() < PLAINTEXT_HEAD_LIMIT && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match watched.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let body = "this port serves HTTPS only: use https:// to reach it\n";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if watched.write_all(answer.as_bytes()).await.is_err() || watched.shutdown().await.is_err() {
        return;
    }
    let mut drained = 0;
    while drained < 64 * 1024 {
        match watched.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// Decides when a connection has taken too long over a head or sat idle, from its
/// [`Activity`], looked at a few times per timeout.
struct Watchdog {
    activity: Arc<Activity>,
    limits: HttpLimits,
    /// When to look; made by the first [`Watchdog::expired`] (the rest is plain code).
    tick: Option<tokio::time::Interval>,
    /// `reads + writes` when last looked at, and since when it has not changed.
    moved: (u64, Instant),
    /// The head being waited for (the number of responses before it) and since when.
    head: Option<(u64, Instant)>,
}

impl Watchdog {
    fn new(activity: Arc<Activity>, limits: HttpLimits) -> Self {
        let now = Instant::now();
        Self {
            activity,
            limits,
            tick: None,
            moved: (0, now),
            // The first head is due `header_timeout` after connecting.
            head: Some((0, now)),
        }
    }

    /// Completes with the reason once the connection is to be closed.
    async fn expired(&mut self) -> &'static str {
        if self.tick.is_none() {
            // Four looks per shortest timeout: a connection is closed at most a quarter
            // of it late (plus one look: a head's start is seen at the first look after).
            let every = (self.limits.header_timeout.min(self.limits.idle_timeout) / 4)
                .clamp(Duration::from_millis(50), Duration::from_millis(2500));
            let mut tick = tokio::time::interval_at(Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            self.tick = Some(tick);
        }
        loop {
            self.tick.as_mut().expect("made above").tick().await;
            if let Some(reason) = self.look(Instant::now()) {
                return reason;
            }
        }
    }

    fn look(&mut self, now: Instant) -> Option<&'static str> {
        let a = &self.activity;
        let reads = a.reads.load(Ordering::Relaxed);
        let moved = reads + a.writes.load(Ordering::Relaxed);
        let heads = a.heads.load(Ordering::Relaxed);
        let answered = a.answered.load(Ordering::Relaxed);
        // A request in progress is the handler's to bound (an event stream lasts).
        let between = heads == answered;
        if moved != self.moved.0 {
            self.moved = (moved, now);
        } else if between && now.duration_since(self.moved.1) >= self.limits.idle_timeout {
            return Some("idle timeout");
        }
        // A head is awaited between requests once bytes arrived since the last answer,
        // and on a new connection from the start.
        let awaited = between && (heads == 0 || reads > a.reads_at_answer.load(Ordering::Relaxed));
        if !awaited {
            self.head = None;
            return None;
        }
        match self.head {
            Some((n, since)) if n == answered => (now.duration_since(since)
                >= self.limits.header_timeout)
                .then_some("request head timeout"),
            _ => {
                self.head = Some((answered, now));
                None
            }
        }
    }
}

/// The connection's socket, counting the reads and writes that moved bytes.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            bump(&self.activity.reads);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            bump(&self.activity.writes);
        }
        polled
    }

    // Vectored writes are what sends a cached list as three frames in one `writev`.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            bump(&self.activity.writes);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The service as hyper calls it: counts heads handed over, and answers finished.
struct Tracked<S> {
    service: S,
    activity: Arc<Activity>,
}

impl<S> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: tower::Service<Request<Body>, Response = Response, Error = Infallible> + Clone,
    S::Future: Unpin,
{
    type Response = Response<Finished>;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        bump(&self.activity.heads);
        let mut service = self.service.clone();
        Answer {
            response: service.call(req.map(Body::new)),
            activity: Some(self.activity.clone()),
        }
    }
}

/// A response being made; its body carries the activity on.
struct Answer<F> {
    response: F,
    activity: Option<Arc<Activity>>,
}

impl<F: Future<Output = Result<Response, Infallible>> + Unpin> Future for Answer<F> {
    type Output = Result<Response<Finished>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(response) = std::task::ready!(Pin::new(&mut self.response).poll(cx));
        let activity = self.activity.take().expect("polled after completion");
        Poll::Ready(Ok(response.map(|body| Finished { body, activity })))
    }
}

/// A response body; the request is in progress until hyper has sent it (or given up)
/// and drops it. An event stream is in progress as long as it streams.
struct Finished {
    body: Body,
    activity: Arc<Activity>,
}

impl http_body::Body for Finished {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        let a = &self.activity;
        a.reads_at_answer
            .store(a.reads.load(Ordering::Relaxed), Ordering::Relaxed);
        bump(&a.answered);
    }
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
    fn a_throttle_lets_one_line_through_per_period_with_the_count() {
        let throttle = Throttle::new();
        assert_eq!(throttle.hit(), Some(1));
        assert_eq!(throttle.hit(), None);
        assert_eq!(throttle.hit(), None);
        throttle.state.lock().0 = Some(Instant::now() - WARN_EVERY);
        assert_eq!(throttle.hit(), Some(3));
    }

    #[test]
    fn the_watchdog_times_heads_from_their_first_byte_and_idleness_from_the_last() {
        let limits = HttpLimits {
            max_connections: 1,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        };
        let activity = Arc::new(Activity::default());
        let mut dog = Watchdog::new(activity.clone(), limits);
        let t0 = dog.moved.1;
        let at = |s: u64| t0 + Duration::from_secs(s);
        // A silent new connection: its first head is due 10 s after connecting.
        assert_eq!(dog.look(at(9)), None);
        assert_eq!(dog.look(at(10)), Some("request head timeout"));

        let mut dog = Watchdog::new(activity.clone(), limits);
        // A request arrives and is answered at once.
        bump(&activity.reads);
        bump(&activity.heads);
        assert_eq!(dog.look(at(1)), None);
        activity.reads_at_answer.store(1, Ordering::Relaxed);
        bump(&activity.answered);
        bump(&activity.writes);
        // Idle keep-alive: no head is awaited, however long, until the idle timeout.
        assert_eq!(dog.look(at(2)), None);
        assert_eq!(dog.look(at(50)), None);
        // Half a head arrives at 55 s: 10 s from there, not from the answer.
        bump(&activity.reads);
        assert_eq!(dog.look(at(55)), None);
        assert_eq!(dog.look(at(64)), None);
        assert_eq!(dog.look(at(65)), Some("request head timeout"));

        // A request in progress (an event stream, say) is neither a head awaited nor
        // idle; once answered, idleness counts from its last byte.
        let mut dog = Watchdog::new(activity.clone(), limits);
        bump(&activity.heads);
        assert_eq!(dog.look(at(1)), None);
        assert_eq!(dog.look(at(100)), None);
        activity.reads_at_answer.store(2, Ordering::Relaxed);
        bump(&activity.answered);
        bump(&activity.writes);
        assert_eq!(dog.look(at(101)), None);
        assert_eq!(dog.look(at(160)), None);
        assert_eq!(dog.look(at(161)), Some("idle timeout"));
    }
}
