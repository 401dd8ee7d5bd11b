//! TLS for the gRPC listener (`--grpc-tls-cert`, `--grpc-tls-key`).
//!
//! roster accepts connections itself and hands tonic finished streams: a connection
//! whose first byte is a TLS handshake record (0x16) goes through rustls, any other is
//! plaintext HTTP/2 — accepted only with `--grpc-tls-optional` (Nacos' "compatibility"
//! mode, for moving clients to TLS one at a time), refused otherwise. Handshakes run on
//! their own tasks, so a slow or silent client never holds up the accept loop. The
//! certificate follows its files (`crate::services::net::tls::ReloadingCert`).

use std::io;
use std::path::Path;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::services::net::tls::{KeyPairFiles, ReloadingCert, ServerTls, HANDSHAKE_RECORD};

/// How long a new connection may take to send its first byte and finish a handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the gRPC listener accepts.
#[derive(Clone)]
pub struct GrpcTls {
    /// The acceptor, and the certificate it serves (reloaded when its files change).
    server: ServerTls,
    /// Also accept plaintext connections.
    optional: bool,
}

impl GrpcTls {
    /// Reads and checks the certificate chain and key: unreadable files, or ones that do
    /// not parse or do not belong together, are an error naming the flag.
    pub fn load(cert: &Path, key: &Path, optional: bool) -> anyhow::Result<Self> {
        let files = KeyPairFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            cert_flag: "--grpc-tls-cert",
            key_flag: "--grpc-tls-key",
        };
        // gRPC is HTTP/2 only.
        let server = ServerTls::load(files, &[b"h2"])?;
        Ok(Self { server, optional })
    }

    /// The certificate served, for its reload worker.
    pub fn certificate(&self) -> &ReloadingCert {
        &self.server.cert
    }
}

/// A connection as tonic sees it: plaintext or TLS over TCP.
pub type GrpcStream = crate::services::net::tls::MaybeTls<TcpStream, TlsStream<TcpStream>>;

impl Connected for GrpcStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Self::Plain(s) => s.connect_info(),
            Self::Tls(s) => s.get_ref().0.connect_info(),
        }
    }
}

/// Accepts connections on `listener` and yields them ready for HTTP/2: plaintext as
/// they come, or (with `tls`) after their handshake.
pub fn incoming(
    listener: TcpListener,
    tls: Option<GrpcTls>,
) -> ReceiverStream<Result<GrpcStream, io::Error>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            // Stop listening once tonic stops taking connections.
            // Out of descriptors and the like: `accept` backs off and warns at a bounded
            // rate, as every listener's loop does.
            let (stream, remote) = tokio::select! {
                accepted = crate::services::net::accept(&listener, "grpc") => accepted,
                () = tx.closed() => return,
            };
            let _ = stream.set_nodelay(true);
            let Some(tls) = tls.clone() else {
                if tx.send(Ok(GrpcStream::Plain(stream))).await.is_err() {
                    return;
                }
                continue;
            };
            let handed = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(stream, &tls)).await {
                    Ok(Ok(stream)) => {
                        let _ = handed.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(%remote, error = %e, "grpc connection refused"),
                    Err(_) => tracing::debug!(%remote, "grpc TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

async fn handshake(stream: TcpStream, tls: &GrpcTls) -> io::Result<GrpcStream> {
    let mut first = [0u8; 1];
    let n = stream.peek(&mut first).await?;
    if n == 1 && first[0] == HANDSHAKE_RECORD {
        let stream = tls.server.acceptor.accept(stream).await?;
        Ok(GrpcStream::Tls(Box::new(stream)))
    } else if tls.optional {
        Ok(GrpcStream::Plain(stream))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "plaintext connection to a TLS-only gRPC port (see --grpc-tls-optional)",
        ))
    }
}
