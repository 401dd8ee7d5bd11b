//! The HTTP port's connections: HTTP/1.1 under a [`Gate`] (in all and per IP), each
//! watched: a request head must be complete within `header_timeout` of its first byte
//! (of connecting, for a connection's first request), and a connection with no request
//! in progress is closed once no byte has moved for `idle_timeout`. A timer per
//! connection looks a few times per timeout; per request the watch costs a few counter
//! updates, one or two reference counts and no allocation (the connection's service is
//! `faces::http::Front` under one tower-http header layer, no boxing). The peer listener
//! (`faces/peer/listener.rs`) keeps the same two clocks with a lock and a clock read per
//! read; here that would be on the hot path. The looks also wake a request whose body
//! waits, which reads its own clock then (`body.rs`).
//!
//! With `--http-tls-*` the port is HTTPS only: the watch wraps the socket under TLS (raw
//! bytes count as movement), the handshake falls within the first head's timeout, and a
//! plaintext request gets a `400` naming https before the close. Plaintext serving is a
//! separate instance of the same generic code: no TLS branch per read or request.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::body::{body_timeout_answer, BodyClock, TimedBody};
use super::{accept, Gate, Permit};

/// What the HTTP listener ([`serve_http`]) counts, handles into the
/// metrics' families (`Metrics::http_listener`): cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct HttpListenerCounters {
    /// Connections closed at once: the listener was at `--http-max-connections`, or
    /// their IP at `--http-max-connections-per-ip`.
    pub refused: super::Refusals,
    /// Requests whose body went `--http-body-timeout-secs` without a byte.
    pub body_timeouts: Counter,
}

/// Limits of the HTTP listener (`--http-max-connections`, `--http-max-connections-per-ip`,
/// `--http-header-timeout-secs`, `--http-idle-timeout-secs`, `--http-body-timeout-secs`).
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most connections open at once from one IP.
    pub max_per_ip: usize,
    /// How long a request head may take from its first byte (from connecting, for a
    /// connection's first request).
    pub header_timeout: Duration,
    /// How long a connection may go without a byte moving either way.
    pub idle_timeout: Duration,
    /// How long a request body being read may go without a byte arriving.
    pub body_timeout: Duration,
}

/// A service that serves each connection as a copy told the connection's peer address
/// (`faces::http::Front` hands it to UDP push subscriptions, which go only to the address a
/// query came from): no per-request cost.
pub trait ForPeer {
    /// This service, for a connection from `peer`.
    fn for_peer(&self, peer: SocketAddr) -> Self;
}

/// Serves `service` over HTTP/1.1 on `listener` under `limits` until `shutdown`; then
/// stops accepting, lets each connection finish the request it is serving, and returns
/// once every connection has closed. With `tls` the port is HTTPS only: each connection
/// is a TLS handshake, finished within the header timeout, and a plaintext request is
/// answered `400` and closed. Refusals and body timeouts are counted in `counters`.
///
/// `service` must always be ready (`faces::http::Front` is): it is called without `poll_ready`,
/// as the hot path has no use for tower's readiness protocol.
pub async fn serve_http<S>(
    listener: TcpListener,
    service: S,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    counters: HttpListenerCounters,
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
    let gate = Gate::counted(
        "http",
        limits.max_connections,
        Some(limits.max_per_ip),
        counters.refused,
    );
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
            body_timeouts: counters.body_timeouts.clone(),
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
    /// The clock of the connection's request bodies.
    body: Arc<BodyClock>,
}

impl Activity {
    /// A new connection's activity, its bodies timed by `body`.
    fn new(body: Arc<BodyClock>) -> Self {
        Self {
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            heads: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            reads_at_answer: AtomicU64::new(0),
            body,
        }
    }
}

/// Adds one to a counter that only the caller writes (no read-modify-write needed).
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

struct Connection {
    /// The connection's place under the cap, given back when the connection ends.
    _permit: Permit,
    limits: HttpLimits,
    body_timeouts: Counter,
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
        let body = BodyClock::new(self.limits.body_timeout, self.body_timeouts.clone());
        let activity = Arc::new(Activity::new(Arc::new(body)));
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
    if first[0] == crate::services::net::tls::HANDSHAKE_RECORD {
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
            // Each look wakes the connection's task, which polls the request in
            // progress: that is when a waiting `TimedBody` looks at its own clock.
            let shortest = self
                .limits
                .header_timeout
                .min(self.limits.idle_timeout)
                .min(self.limits.body_timeout);
            let every =
                (shortest / 4).clamp(Duration::from_millis(50), Duration::from_millis(2500));
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
        // A body still to come is timed; an empty one (most requests) is not.
        let req = req.map(|body| {
            if http_body::Body::is_end_stream(&body) {
                Body::new(body)
            } else {
                Body::new(TimedBody::new(body, self.activity.body.clone()))
            }
        });
        Answer {
            response: service.call(req),
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
        let Ok(mut response) = std::task::ready!(Pin::new(&mut self.response).poll(cx));
        let activity = self.activity.take().expect("polled after completion");
        // Whatever the handler made of a body that timed out (a 413 or 400 from the
        // failed read, say), the client is told why, and the connection ends with it.
        if activity.body.take_timed_out() {
            response = body_timeout_answer();
        }
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
    fn the_watchdog_times_heads_from_their_first_byte_and_idleness_from_the_last() {
        let limits = HttpLimits {
            max_connections: 1,
            max_per_ip: 1,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(10),
        };
        let activity = Arc::new(Activity::new(Arc::default()));
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
