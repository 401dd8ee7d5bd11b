//! The sending side of the peer channel: [`PeerClient::post`] seals a message under the
//! cluster secret (`wire.rs`), sends it as `POST /peer/v1/<path>` over a pooled
//! connection — TLS with the cluster CA when `--peer-tls-*` is given (`tls.rs`) — and
//! opens the sealed answer. Raft's `Transport` and Distro's go through it.
//!
//! Each message carries this process's session, the next sequence number, and the
//! receiver's incarnation. A node learns a peer's incarnation from its first answer:
//! a message to a peer whose incarnation it does not know is preceded by an empty
//! `session` message, whose sealed 409 answer names it; a 409 to any message (the peer
//! restarted) updates it, and the message goes again once. A failed connection forgets
//! it, so a large message is not the one that finds out about a restart.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use roster_raft::{NodeId, Rpc, Transport, TransportError};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

pub use super::wire::{ClusterSecret, PROTOCOL_VERSION};
use super::wire::{Head, HEADER_AUTH, HEADER_NODE, HEADER_PROTOCOL, HEADER_SEALED, MAX_MESSAGE};
use roster_registry::clock::now_ms;

/// How long an idle pooled connection is kept at most: below the listeners' idle
/// timeout (half of it, when that is shorter), so a sender seldom picks a connection
/// the peer is closing.
pub const POOL_IDLE: Duration = Duration::from_secs(20);
/// How long a TCP connect (and TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Sends messages to peers. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct PeerClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: Client<PeerConnector, Full<Bytes>>,
    secret: Option<ClusterSecret>,
    self_id: NodeId,
    /// This process's session: random, so that a restarted node's sequence numbers
    /// are its own.
    session: u64,
    /// The last sequence number used, across all peers.
    seq: AtomicU64,
    /// Peers' incarnations by address, as their answers said; short critical sections.
    incarnations: Mutex<HashMap<String, u64>>,
}

/// One answer, opened.
struct Answer {
    status: StatusCode,
    body: Vec<u8>,
}

impl PeerClient {
    /// A client sending as `self_id`, over TLS when `tls` is given, to peers that close
    /// connections idle for `peer_idle` (`--peer-idle-timeout-secs`). Without a secret
    /// every call fails: a node started without one has no peers.
    pub fn new(
        self_id: NodeId,
        secret: Option<ClusterSecret>,
        tls: Option<TlsConnector>,
        peer_idle: Duration,
    ) -> Self {
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE.min(peer_idle / 2))
            .pool_timer(TokioTimer::new())
            .build(PeerConnector { tls });
        Self {
            inner: Arc::new(Inner {
                http,
                secret,
                self_id,
                session: rand::random(),
                seq: AtomicU64::new(0),
                incarnations: Mutex::default(),
            }),
        }
    }

    /// Posts `body` to `path` (e.g. `raft/append`) on the peer at `addr`; returns the
    /// answer's body. `timeout` bounds the whole exchange, handshake included.
    pub async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let secret = self.inner.secret.as_ref().ok_or_else(|| {
            TransportError::Refused(addr.into(), "this node has no cluster secret".into())
        })?;
        if body.len() > MAX_MESSAGE {
            return Err(TransportError::Refused(
                addr.into(),
                "message too large".into(),
            ));
        }
        let exchange = async {
            let known = self.inner.incarnations.lock().get(addr).copied();
            let mut to = match known {
                Some(to) => to,
                None => self.handshake(secret, addr).await?,
            };
            for attempt in 0..2 {
                let answer = self.send(secret, addr, path, to, &body).await?;
                if answer.status == StatusCode::CONFLICT && attempt == 0 {
                    // The peer restarted since: adopt its incarnation, send again.
                    to = self.adopt(addr, &answer)?;
                    continue;
                }
                return if answer.status.is_success() {
                    Ok(answer.body)
                } else {
                    Err(TransportError::Refused(
                        addr.into(),
                        format!(
                            "{}: {}",
                            answer.status,
                            String::from_utf8_lossy(&answer.body)
                        ),
                    ))
                };
            }
            Err(TransportError::Refused(
                addr.into(),
                "the peer keeps changing incarnation".into(),
            ))
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::NoReply(addr.into(), "timed out".into())),
        };
        if matches!(
            result,
            Err(TransportError::Unreachable(..) | TransportError::NoReply(..))
        ) {
            // Perhaps it restarted: learn its incarnation again before the next message.
            self.inner.incarnations.lock().remove(addr);
        }
        result
    }

    /// Learns the incarnation of the peer at `addr` with an empty message.
    async fn handshake(&self, secret: &ClusterSecret, addr: &str) -> Result<u64, TransportError> {
        let answer = self.send(secret, addr, "session", 0, &[]).await?;
        if answer.status != StatusCode::CONFLICT {
            return Err(TransportError::Refused(
                addr.into(),
                format!("handshake answered {}", answer.status),
            ));
        }
        self.adopt(addr, &answer)
    }

    fn adopt(&self, addr: &str, answer: &Answer) -> Result<u64, TransportError> {
        let to = <[u8; 8]>::try_from(answer.body.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| TransportError::Refused(addr.into(), "malformed incarnation".into()))?;
        self.inner.incarnations.lock().insert(addr.to_string(), to);
        Ok(to)
    }

    /// Sends one sealed message and opens the answer. A plaintext answer is the peer's
    /// refusal before it authenticated the message (or someone else's): never a success.
    async fn send(
        &self,
        secret: &ClusterSecret,
        addr: &str,
        path: &str,
        to: u64,
        message: &[u8],
    ) -> Result<Answer, TransportError> {
        let head = Head {
            sender: self.inner.self_id,
            session: self.inner.session,
            seq: self.inner.seq.fetch_add(1, Ordering::Relaxed) + 1,
            to,
            ts: now_ms(),
            len: ClusterSecret::sealed_len(message.len()) as u64,
            path: path.to_string(),
        };
        let sealed = secret.seal(&head.request_aad(), message);
        let request = Request::post(format!("http://{addr}/peer/v1/{path}"))
            .header(HEADER_PROTOCOL, PROTOCOL_VERSION)
            .header(HEADER_NODE, head.sender)
            .header(HEADER_AUTH, secret.sign(&head))
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(CONTENT_LENGTH, sealed.len())
            .body(Full::new(Bytes::from(sealed)))
            .map_err(|e| TransportError::Refused(addr.into(), format!("bad peer address: {e}")))?;
        let response = self.inner.http.request(request).await.map_err(|e| {
            if e.is_connect() {
                TransportError::Unreachable(addr.into(), format!("{e:?}"))
            } else {
                TransportError::NoReply(addr.into(), format!("{e:?}"))
            }
        })?;
        let status = response.status();
        let is_sealed = response.headers().contains_key(HEADER_SEALED);
        let limit = ClusterSecret::sealed_len(MAX_MESSAGE);
        let bytes = Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| TransportError::NoReply(addr.into(), e.to_string()))?
            .to_bytes();
        if !is_sealed {
            return Err(TransportError::Refused(
                addr.into(),
                format!("{status}: {}", String::from_utf8_lossy(&bytes)),
            ));
        }
        let body = secret
            .open(&head.reply_aad(status.as_u16()), bytes.to_vec())
            .ok_or_else(|| {
                TransportError::NoReply(addr.into(), "the answer failed authentication".into())
            })?;
        Ok(Answer { status, body })
    }
}

impl Transport for PeerClient {
    async fn call(
        &self,
        _target: NodeId,
        addr: &str,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        self.post(addr, &format!("raft/{}", rpc.name()), body, timeout)
            .await
    }
}

/// Opens connections for the pool: TCP, then TLS when configured.
#[derive(Clone)]
struct PeerConnector {
    tls: Option<TlsConnector>,
}

impl tower::Service<Uri> for PeerConnector {
    type Response = TokioIo<PeerStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move {
            let addr = uri
                .authority()
                .map(|a| a.as_str().to_string())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no peer address"))?;
            let connect = async {
                let tcp = TcpStream::connect(&addr).await?;
                let _ = tcp.set_nodelay(true);
                let Some(tls) = tls else {
                    return Ok(PeerStream::Plain(tcp));
                };
                let name = super::tls::server_name(&addr).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("no TLS name in {addr}"),
                    )
                })?;
                Ok(PeerStream::Tls(Box::new(tls.connect(name, tcp).await?)))
            };
            match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
                Ok(stream) => stream.map(TokioIo::new),
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            }
        })
    }
}

/// A connection to a peer: plaintext or TLS.
type PeerStream = crate::services::net::tls::MaybeTls<TcpStream, TlsStream<TcpStream>>;

impl Connection for PeerStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}
