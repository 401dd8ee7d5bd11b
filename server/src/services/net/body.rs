//! The HTTP port's request body clock: a body that goes `--http-body-timeout-secs`
//! without a byte while its handler waits for one fails ([`TimedBody`]), and its request
//! is answered `408` with the connection closed ([`body_timeout_answer`]), whatever the
//! handler made of the failed read. The clock runs only while the body is awaited and
//! starts again with every chunk, so an upload that keeps coming is never cut however
//! slow (its size is bounded by the body limits, the connections it can hold by the
//! caps). It is read on the connection watchdog's looks, with no timer per body; an
//! empty body is not wrapped (`http::Tracked`).
//!
//! tower-http's `RequestBodyTimeoutLayer` times the waits between chunks alike, but
//! leaves the answer to the handler that reads the body (a 400 or 413 for a failed
//! read) and the connection open, and wraps every body, empty ones included, with a
//! timer each.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

/// Why a request body failed: it went the body timeout without a byte.
#[derive(Debug, thiserror::Error)]
#[error("request body timed out: no bytes arrived in time")]
pub struct BodyTimeout;

/// Whether `e`, or an error it wraps, is a [`BodyTimeout`] (the guard answers it as such
/// rather than as a body too large).
pub fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.is::<BodyTimeout>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The answer to a request whose body timed out: `408`, and the connection closed
/// after it (the rest of the body may still come, and would be taken for a request).
pub fn body_timeout_answer() -> Response {
    let mut response = Response::new(Body::from(
        "request body timed out: no bytes arrived for --http-body-timeout-secs\n",
    ));
    *response.status_mut() = axum::http::StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// What a connection's request bodies share with it: their timeout, the mark a body
/// that timed out leaves for its request's answer, and the count for `/metrics`. One
/// request at a time on HTTP/1.1, so one mark.
#[derive(Debug, Default)]
pub(super) struct BodyClock {
    /// How long a body may wait for its next chunk.
    timeout: Duration,
    /// Set by a body that timed out; taken by its request's answer.
    timed_out: AtomicBool,
    /// Bodies that timed out.
    timeouts: Counter,
}

impl BodyClock {
    /// The clock of a connection's bodies: `timeout` per wait, timeouts counted in
    /// `timeouts`.
    pub(super) fn new(timeout: Duration, timeouts: Counter) -> Self {
        Self {
            timeout,
            timed_out: AtomicBool::new(false),
            timeouts,
        }
    }

    /// Whether the body of the request being answered timed out (taking the mark).
    pub(super) fn take_timed_out(&self) -> bool {
        // A load first: the store is needed only on the rare timeout.
        let timed_out = self.timed_out.load(Ordering::Relaxed);
        if timed_out {
            self.timed_out.store(false, Ordering::Relaxed);
        }
        timed_out
    }
}

/// A request body whose every wait for the next chunk is bounded by its connection's
/// body timeout. The clock starts when a read finds nothing to take and stops at the
/// next chunk; time the handler spends elsewhere between reads is not the client's.
/// No timer of its own (no allocation, no timer-wheel entry per body): nothing wakes a
/// waiting body but its next chunk or the connection's task, which the connection's
/// watchdog wakes at least four times per body timeout (`http::Watchdog`); each wake
/// polls the request in progress and, through it, this body, which then reads the
/// clock. A body times out at most a quarter of its timeout late.
pub(super) struct TimedBody<B> {
    body: B,
    clock: Arc<BodyClock>,
    /// Since when the body has been waiting for its next chunk.
    waiting_since: Option<Instant>,
    /// Whether the body timed out: it fails from then on.
    timed_out: bool,
}

impl<B> TimedBody<B> {
    /// `body`, timed by `clock`.
    pub(super) fn new(body: B, clock: Arc<BodyClock>) -> Self {
        Self {
            body,
            clock,
            waiting_since: None,
            timed_out: false,
        }
    }
}

impl<B> http_body::Body for TimedBody<B>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Some(Err(BodyTimeout.into())));
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            this.waiting_since = None;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let now = Instant::now();
        let since = *this.waiting_since.get_or_insert(now);
        if now.duration_since(since) < this.clock.timeout {
            return Poll::Pending;
        }
        this.timed_out = true;
        this.clock.timed_out.store(true, Ordering::Relaxed);
        this.clock.timeouts.inc();
        Poll::Ready(Some(Err(BodyTimeout.into())))
    }

    fn is_end_stream(&self) -> bool {
        !self.timed_out && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use tokio::sync::mpsc::Sender;

    use super::*;

    /// A request body fed by hand: chunks sent on the channel, the end when it closes.
    struct Fed(tokio::sync::mpsc::Receiver<bytes::Bytes>);

    impl http_body::Body for Fed {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
            self.0
                .poll_recv(cx)
                .map(|chunk| chunk.map(|c| Ok(http_body::Frame::data(c))))
        }
    }

    /// A body fed by hand under a clock of `timeout_secs`, and the clock.
    fn timed(timeout_secs: u64) -> (Sender<bytes::Bytes>, Body, Arc<BodyClock>) {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let clock = Arc::new(BodyClock::new(
            Duration::from_secs(timeout_secs),
            Counter::default(),
        ));
        (tx, Body::new(TimedBody::new(Fed(rx), clock.clone())), clock)
    }

    /// Runs `handler` while its task is woken every 2.5 s, as the connection's
    /// watchdog does with a 10 s timeout.
    async fn watched<F: Future>(handler: F) -> F::Output {
        tokio::pin!(handler);
        let every = Duration::from_millis(2500);
        let mut looks = tokio::time::interval_at(Instant::now() + every, every);
        loop {
            tokio::select! {
                done = &mut handler => return done,
                _ = looks.tick() => {}
            }
        }
    }

    /// Reads `body` whole as the guard does, watched.
    async fn read_watched(body: Body) -> Result<bytes::Bytes, axum::Error> {
        watched(axum::body::to_bytes(body, 1024)).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_coming_slowly_is_read_whole() {
        let (tx, body, clock) = timed(10);
        // 20 chunks 9 s apart: three minutes, never 10 s without a byte.
        tokio::spawn(async move {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_secs(9)).await;
                tx.send(bytes::Bytes::from_static(b"abcde")).await.unwrap();
            }
        });
        let read = read_watched(body).await.expect("read whole");
        assert_eq!(read.len(), 100);
        assert!(!clock.take_timed_out());
        assert_eq!(clock.timeouts.get(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_fails_after_the_timeout_and_says_so() {
        let (tx, body, clock) = timed(10);
        tx.send(bytes::Bytes::from_static(b"half a bo"))
            .await
            .unwrap();
        let started = Instant::now();
        // The guard's read: a timeout, not a body too large, at the first look from
        // 10 s on.
        let e = read_watched(body).await.unwrap_err();
        assert!(is_body_timeout(&e), "{e:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(10_000));
        // The mark for the answer, taken once, and the count.
        assert!(clock.take_timed_out());
        assert!(!clock.take_timed_out());
        assert_eq!(clock.timeouts.get(), 1);
        drop(tx);
        // A body over the limit is not a timeout.
        let (tx, body, _) = timed(10);
        tx.send(bytes::Bytes::from(vec![0; 2048])).await.unwrap();
        let e = read_watched(body).await.unwrap_err();
        assert!(!is_body_timeout(&e), "{e:?}");
        let answer = body_timeout_answer();
        assert_eq!(answer.status(), 408);
        assert_eq!(answer.headers()["connection"], "close");
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_handler_spends_elsewhere_is_not_the_bodys() {
        use http_body_util::BodyExt;
        let (tx, mut body, _) = timed(10);
        // The first read waits 4 s for its chunk.
        let sender = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            sender.send(bytes::Bytes::from_static(b"first")).await
        });
        let first = watched(body.frame()).await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "first");
        // The handler is busy for a minute; the rest arrived meanwhile.
        tx.send(bytes::Bytes::from_static(b"rest")).await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        let rest = watched(body.frame()).await.unwrap().unwrap();
        assert_eq!(rest.into_data().unwrap(), "rest");
        // Then it waits: 10 s from this wait's start, not from the first.
        let started = Instant::now();
        assert!(watched(body.frame()).await.unwrap().is_err());
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }
}
