//! The gRPC port's transports (TCP connections), tracked from accept to close: one that
//! has no set-up connection — none yet (no `ConnectionSetupRequest` on a bi-stream), or
//! no longer (its stream ended) — is closed by [`SetupDeadline`] once that has lasted
//! `--grpc-setup-timeout-secs`. Without it, anyone could hold the port's connections
//! (and the node's descriptors) without ever saying who they are.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Sleep;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

use super::connection::Connections;
use super::tls::{GrpcStream, GrpcTls};
use crate::services::net::{accept, Gate, Permit};

impl Connections {
    /// Tracks a transport accepted from `remote` (holding `permit`, its place under the
    /// listener's cap) and closes it unless a connection is set up over it within
    /// `timeout` (and again within `timeout` whenever it has none).
    pub fn admit<S>(
        &self,
        stream: S,
        remote: SocketAddr,
        permit: Permit,
        timeout: Duration,
    ) -> SetupDeadline<S> {
        let transport = Arc::new(Transport {
            set_up: AtomicBool::new(false),
        });
        self.shared.transports.insert(remote, transport.clone());
        SetupDeadline {
            stream,
            timeout,
            deadline: None,
            transport,
            remote,
            connections: self.clone(),
            _permit: permit,
        }
    }

    /// How many transports are open.
    pub fn transports(&self) -> usize {
        self.shared.transports.len()
    }

    /// The transports for tonic to serve from `listener`: under `gate`'s caps, each
    /// closed when it goes `setup_timeout` without a set-up connection. Plaintext ones
    /// are capped as they are accepted (by [`accept`], which waits out descriptor
    /// exhaustion); TLS ones as `tls::incoming` hands them over, handshake done.
    pub fn incoming(
        &self,
        listener: TcpListener,
        tls: Option<GrpcTls>,
        gate: Arc<Gate>,
        setup_timeout: Duration,
    ) -> Incoming {
        let connections = self.clone();
        if tls.is_some() {
            return Box::pin(
                super::tls::incoming(listener, tls).filter_map(move |accepted| {
                    let stream = match accepted {
                        Ok(stream) => stream,
                        Err(e) => return Some(Err(e)),
                    };
                    let remote = stream.connect_info().remote_addr()?;
                    let permit = gate.admit(remote.ip())?;
                    Some(Ok(connections.admit(stream, remote, permit, setup_timeout)))
                }),
            );
        }
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                // Stop listening once tonic stops taking connections.
                let (stream, remote) = tokio::select! {
                    accepted = accept(&listener, "grpc") => accepted,
                    () = tx.closed() => return,
                };
                let Some(permit) = gate.admit(remote.ip()) else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let admitted =
                    connections.admit(GrpcStream::Plain(stream), remote, permit, setup_timeout);
                if tx.send(Ok(admitted)).await.is_err() {
                    return;
                }
            }
        });
        Box::pin(ReceiverStream::new(rx))
    }
}

/// What [`Connections::incoming`] yields.
pub type Incoming =
    Pin<Box<dyn Stream<Item = io::Result<SetupDeadline<GrpcStream>>> + Send + 'static>>;

/// A transport on the gRPC port, from accept to close.
pub(super) struct Transport {
    /// Whether a connection over it is set up (`ConnectionSetupRequest` received, stream
    /// still open).
    pub(super) set_up: AtomicBool,
}

/// A gRPC transport's stream, failed (and so closed by the HTTP/2 server) once it has
/// had no set-up connection for the setup timeout. The deadline is looked at whenever
/// the server reads, which it always waits to do: its timer wakes the read.
pub struct SetupDeadline<S> {
    stream: S,
    timeout: Duration,
    /// Running while the transport has no set-up connection.
    deadline: Option<Pin<Box<Sleep>>>,
    transport: Arc<Transport>,
    remote: SocketAddr,
    connections: Connections,
    _permit: Permit,
}

impl<S> SetupDeadline<S> {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.transport.set_up.load(Ordering::Acquire) {
            self.deadline = None;
            return Ok(());
        }
        let timeout = self.timeout;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(()) => {
                tracing::debug!(remote = %self.remote, "grpc transport without a set-up connection in time; closing");
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no ConnectionSetupRequest in time",
                ))
            }
        }
    }
}

impl<S> Drop for SetupDeadline<S> {
    fn drop(&mut self) {
        let transports = &self.connections.shared.transports;
        transports.remove_if(&self.remote, |_, t| Arc::ptr_eq(t, &self.transport));
    }
}

impl<S: Connected> Connected for SetupDeadline<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SetupDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SetupDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
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
