//! The checks of the peer channel's receiving side: what the `--peer` listener
//! (`listener.rs`) does with each request before it is routed ([`super::route`]). The header is checked before any of the body is read:
//!
//! 1. protocol, sender, MAC and timestamp (`wire.rs`) — else 403;
//! 2. the declared length: at most [`MAX_MESSAGE`] sealed, and equal to
//!    `Content-Length` — else 413 / 400;
//! 3. the incarnation the message is for: each process picks a random one at start, so
//!    a message captured before a restart names another — else 409, sealed, with this
//!    incarnation, which the sender adopts and retries with (its first message to a
//!    node is such a handshake);
//! 4. the replay memory (`replay.rs`) — else 403;
//! 5. the body, `len` bytes with at most the header timeout between chunks, opened with
//!    the head as associated data — else 403; then recorded as seen and routed.
//!
//! A request refused before step 5 has at most [`REFUSED_BODY_LIMIT`] of its body read
//! (so the refusal reaches an honest sender that sent a small body), or none and the
//! connection closed. Answers from step 3 on are sealed to the request; earlier
//! refusals are plaintext and carry nothing but the reason.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use parking_lot::Mutex;

use super::PeerRoutes;
use crate::services::channel::replay::ReplayGuard;
use crate::services::channel::wire::{
    ClusterSecret, Head, HEADER_AUTH, HEADER_NODE, HEADER_PROTOCOL, HEADER_SEALED, MAX_MESSAGE,
    PROTOCOL_VERSION,
};
use roster_registry::clock::now_ms;

/// The most of a refused request's body that is read (so that its refusal reaches the
/// sender before the connection closes).
pub const REFUSED_BODY_LIMIT: u64 = 64 * 1024;

/// What the peer routes need. Cheap to clone.
#[derive(Clone)]
pub struct PeerState {
    /// The cluster secret; without one every message is refused.
    pub secret: Option<ClusterSecret>,
    /// What the routes reach.
    pub routes: PeerRoutes,
    /// This process's incarnation: random, never 0.
    pub incarnation: u64,
    /// Sequence numbers seen, per sender.
    pub replay: Arc<Mutex<ReplayGuard>>,
    /// Longest stall while reading a body.
    pub stall: Duration,
}

impl PeerState {
    /// The state of a freshly started node.
    pub fn new(secret: Option<ClusterSecret>, routes: PeerRoutes, stall: Duration) -> Self {
        Self {
            secret,
            routes,
            incarnation: rand::random::<u64>().max(1),
            replay: Arc::default(),
            stall,
        }
    }
}

type Answer = Response<Full<Bytes>>;

/// A plaintext refusal.
fn refuse(status: StatusCode, why: impl Into<String>, close: bool) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(why.into())));
    *response.status_mut() = status;
    if close {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// An answer sealed to `head`.
fn sealed(secret: &ClusterSecret, head: &Head, status: StatusCode, body: &[u8]) -> Answer {
    let bytes = secret.seal(&head.reply_aad(status.as_u16()), body);
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(HEADER_SEALED, HeaderValue::from(PROTOCOL_VERSION));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// Answers one peer request.
pub async fn handle(state: &PeerState, request: Request<Incoming>) -> Answer {
    let Some(path) = request
        .uri()
        .path()
        .strip_prefix("/peer/v1/")
        .map(str::to_string)
    else {
        return refuse(StatusCode::NOT_FOUND, "not a peer route", true);
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if parts.method != Method::POST {
        return refused(
            body,
            declared,
            state.stall,
            StatusCode::METHOD_NOT_ALLOWED,
            "peer messages are POSTs".into(),
        )
        .await;
    }
    let Some(secret) = &state.secret else {
        return refused(
            body,
            declared,
            state.stall,
            StatusCode::FORBIDDEN,
            "this node has no cluster secret".into(),
        )
        .await;
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let now = now_ms();
    let head = match secret.verify(
        header(HEADER_PROTOCOL),
        header(HEADER_NODE),
        header(HEADER_AUTH),
        &path,
        now,
    ) {
        Ok(head) => head,
        Err(why) => {
            tracing::warn!(path, why, "refused a peer message");
            return refused(body, declared, state.stall, StatusCode::FORBIDDEN, why).await;
        }
    };
    if head.len > ClusterSecret::sealed_len(MAX_MESSAGE) as u64 {
        return refused(
            body,
            declared,
            state.stall,
            StatusCode::PAYLOAD_TOO_LARGE,
            "peer message too large".into(),
        )
        .await;
    }
    if declared != Some(head.len) {
        return refused(
            body,
            declared,
            state.stall,
            StatusCode::BAD_REQUEST,
            "Content-Length differs from the signed length".into(),
        )
        .await;
    }
    if head.to != state.incarnation {
        // A first contact, or a message from before this process started.
        if head.to != 0 {
            tracing::debug!(
                path,
                sender = head.sender,
                "peer message for an earlier incarnation"
            );
        }
        let drained = drain_small(body, declared, state.stall).await;
        let mut answer = sealed(
            secret,
            &head,
            StatusCode::CONFLICT,
            &state.incarnation.to_be_bytes(),
        );
        if !drained {
            answer
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        return answer;
    }
    // The guard is a statement's temporary: never held across the awaits below.
    let seen = state
        .replay
        .lock()
        .check(head.sender, head.session, head.seq, now);
    if let Err(replay) = seen {
        tracing::warn!(path, sender = head.sender, why = %replay, "refused a peer message");
        return refused(
            body,
            declared,
            state.stall,
            StatusCode::FORBIDDEN,
            replay.to_string(),
        )
        .await;
    }
    let body = match read_body(body, head.len as usize, state.stall).await {
        Ok(body) => body,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why, true),
    };
    let Some(message) = secret.open(&head.request_aad(), body) else {
        tracing::warn!(
            path,
            sender = head.sender,
            "refused a peer message: body failed authentication"
        );
        return refuse(StatusCode::FORBIDDEN, "body failed authentication", false);
    };
    // Recorded only now, so that nobody without the secret can burn a number.
    let recorded = state
        .replay
        .lock()
        .accept(head.sender, head.session, head.seq, now);
    if let Err(replay) = recorded {
        tracing::warn!(path, sender = head.sender, why = %replay, "refused a peer message");
        return refuse(StatusCode::FORBIDDEN, replay.to_string(), false);
    }
    let (status, reply) = super::route(&state.routes, head.sender, &path, &message).await;
    sealed(secret, &head, status, &reply)
}

/// A plaintext refusal before the body was authenticated: reads at most a small body.
async fn refused(
    body: Incoming,
    declared: Option<u64>,
    stall: Duration,
    status: StatusCode,
    why: String,
) -> Answer {
    let drained = drain_small(body, declared, stall).await;
    refuse(status, why, !drained)
}

/// Reads an authenticated head's body: exactly `len` bytes, at most `stall` between
/// chunks.
async fn read_body(mut body: Incoming, len: usize, stall: Duration) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(len);
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => return Err("peer message body stalled".into()),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(format!("peer message body: {e}")),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > len {
                return Err("peer message body longer than signed".into());
            }
            out.extend_from_slice(&data);
        }
    }
    if out.len() != len {
        return Err("peer message body shorter than signed".into());
    }
    Ok(out)
}

/// Reads and drops a refused request's body when it declares at most
/// [`REFUSED_BODY_LIMIT`]; whether it did (else the connection must close).
async fn drain_small(mut body: Incoming, declared: Option<u64>, stall: Duration) -> bool {
    if declared.is_none_or(|len| len > REFUSED_BODY_LIMIT) {
        return false;
    }
    let mut read = 0u64;
    loop {
        match tokio::time::timeout(stall, body.frame()).await {
            Ok(None) => return true,
            Ok(Some(Ok(frame))) => {
                read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if read > REFUSED_BODY_LIMIT {
                    return false;
                }
            }
            _ => return false,
        }
    }
}
