//! Certificates for every TLS face (HTTP, gRPC, the peer channel): reading a PEM chain
//! and key, with errors that name the flag, and [`ReloadingCert`], a certificate that
//! follows its files.
//!
//! A listener's rustls config holds a [`ReloadingCert`] as its certificate resolver, so a
//! handshake reads the current certificate from an `ArcSwap` (one atomic load) and a
//! reload swaps it without touching the config or the connections already open. The
//! reload worker ([`ReloadingCert::watch`]) looks at the files' modification time, size
//! and inode every [`RELOAD_EVERY`] (no watcher crate: two `stat`s per look); when they
//! change it reads both files again, and a pair that does not load (half written, a key
//! that does not fit) keeps the old certificate in service, with a warning.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_rustls::rustls::client::ResolvesClientCert;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{ServerConfig, SignatureScheme};
use tokio_rustls::TlsAcceptor;

/// How often the reload worker looks at the certificate files.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The first byte of a TLS connection (a handshake record): how a port that serves TLS
/// tells a plaintext client.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// The crypto every TLS face uses: ring (no C toolchain, as for the rest of roster).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Where a certificate chain and its key live, and the flags that named them.
#[derive(Clone, Debug)]
pub struct KeyPairFiles {
    /// The PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// The PEM private key.
    pub key: PathBuf,
    /// The flag that gave `cert` (e.g. `--http-tls-cert`), for messages.
    pub cert_flag: &'static str,
    /// The flag that gave `key`.
    pub key_flag: &'static str,
}

impl KeyPairFiles {
    /// Reads both files and checks that the key fits the certificate: an unreadable
    /// file, one that does not parse, or a key of another certificate is an error
    /// naming the flag.
    pub fn load(&self, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
        let chain = read_certs(&self.cert, self.cert_flag)?;
        let key = read_key(&self.key, self.key_flag)?;
        CertifiedKey::from_der(chain, key, provider).with_context(|| {
            format!(
                "{} {} / {} {}: the key does not fit the certificate",
                self.cert_flag,
                self.cert.display(),
                self.key_flag,
                self.key.display()
            )
        })
    }

    /// What the files look like now, to tell a change.
    fn stamp(&self) -> Stamp {
        [file_stamp(&self.cert), file_stamp(&self.key)]
    }
}

/// Every PEM certificate in the file at `path`, given by `flag`; none is an error.
pub fn read_certs(path: &Path, flag: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem =
        std::fs::read(path).with_context(|| format!("cannot read {flag} {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{flag} {}: no PEM certificate in the file", path.display());
    }
    Ok(certs)
}

/// The PEM private key (PKCS#8, PKCS#1 or SEC1) in the file at `path`, given by `flag`.
pub fn read_key(path: &Path, flag: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    let pem =
        std::fs::read(path).with_context(|| format!("cannot read {flag} {}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}

/// A file's modification time, size and inode; `None` while it cannot be read.
type FileStamp = Option<(SystemTime, u64, u64)>;
/// The certificate's and the key's stamps.
type Stamp = [FileStamp; 2];

fn file_stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.modified().ok()?, meta.len(), inode))
}

/// What one look at the files found.
#[derive(Debug)]
pub enum Reload {
    /// The files have not changed since the last look.
    Unchanged,
    /// They changed and the new certificate is in service.
    Reloaded,
    /// They changed but do not load; the certificate in service stays.
    Failed(anyhow::Error),
}

/// A certificate and key that follow their files: the resolver of a TLS config, for
/// servers and (the peer channel) clients. Cheap to clone; clones share the certificate.
#[derive(Clone)]
pub struct ReloadingCert {
    inner: Arc<Inner>,
}

struct Inner {
    files: KeyPairFiles,
    provider: Arc<CryptoProvider>,
    /// The certificate in service; handshakes load it, reloads store it.
    current: ArcSwap<CertifiedKey>,
    /// The files' stamp when last read; only the reload worker takes the lock.
    read_at: Mutex<Stamp>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.inner.files.cert)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the certificate and key; at start a pair that does not load is an error.
    pub fn load(files: KeyPairFiles) -> anyhow::Result<Self> {
        let provider = provider();
        // The stamp before the contents: a write in between is seen at the next look.
        let stamp = files.stamp();
        let key = files.load(&provider)?;
        Ok(Self {
            inner: Arc::new(Inner {
                files,
                provider,
                current: ArcSwap::from_pointee(key),
                read_at: Mutex::new(stamp),
            }),
        })
    }

    /// The certificate in service.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.inner.current.load_full()
    }

    /// The files this certificate follows.
    pub fn files(&self) -> &KeyPairFiles {
        &self.inner.files
    }

    /// Reads the files again if they changed since the last look, and puts the new
    /// certificate in service if they load. A failed pair is not tried again until the
    /// files change once more (so a broken file is reported once, not every look).
    pub fn reload_if_changed(&self) -> Reload {
        let inner = &self.inner;
        let stamp = inner.files.stamp();
        {
            let mut read_at = inner.read_at.lock();
            if *read_at == stamp {
                return Reload::Unchanged;
            }
            *read_at = stamp;
        }
        match inner.files.load(&inner.provider) {
            Ok(key) => {
                inner.current.store(Arc::new(key));
                Reload::Reloaded
            }
            Err(e) => Reload::Failed(e),
        }
    }

    /// The reload worker of the listener called `face`: looks at the files every
    /// `every` until `stopping`, logging each reload and each failed one.
    pub async fn watch(
        self,
        face: &'static str,
        every: Duration,
        mut stopping: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.changed() => return,
            }
            // `stat` and small reads, off the runtime's threads (a hung network mount
            // must not stall requests).
            let cert = self.clone();
            let Ok(outcome) = tokio::task::spawn_blocking(move || cert.reload_if_changed()).await
            else {
                continue;
            };
            let files = &self.inner.files;
            match outcome {
                Reload::Unchanged => {}
                Reload::Reloaded => tracing::info!(
                    face,
                    cert = %files.cert.display(),
                    "reloaded the TLS certificate; new connections get it"
                ),
                Reload::Failed(e) => tracing::warn!(
                    face,
                    cert = %files.cert.display(),
                    error = %format!("{e:#}"),
                    "the TLS certificate files changed but do not load; keeping the one in service"
                ),
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl ResolvesClientCert for ReloadingCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A server face's TLS: the acceptor, and the certificate it serves (for its reload
/// worker). Cheap to clone.
#[derive(Clone)]
pub struct ServerTls {
    /// Accepts connections: TLS 1.2 and 1.3, no client certificate.
    pub acceptor: TlsAcceptor,
    /// The certificate handshakes get.
    pub cert: ReloadingCert,
}

impl ServerTls {
    /// Loads `files` and makes a server config offering the `alpn` protocols.
    pub fn load(files: KeyPairFiles, alpn: &[&[u8]]) -> anyhow::Result<Self> {
        let cert = ReloadingCert::load(files)?;
        let mut config = ServerConfig::builder_with_provider(cert.inner.provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(cert.clone()));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert,
        })
    }
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// A connection that is plaintext or TLS — the peer channel's both ends and the gRPC
/// listener share it; `T` is the TLS stream over `P` (server or client side).
///
/// It passes vectored writes through, and says whether its stream takes them: hyper
/// asks `is_write_vectored` once per connection, and on `false` copies every body into
/// the connection's write buffer, which keeps its largest size for as long as the
/// connection is pooled. A node that forwards writes sent ~250 KB Distro batches over
/// a dozen pooled peer connections, and held ~5 MB of such buffers at 65,000 instances
/// (2.6 MB on a node that took no writes).
pub enum MaybeTls<P, T> {
    /// Plaintext.
    Plain(P),
    /// TLS (boxed: its state is large).
    Tls(Box<T>),
}

impl<P: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for MaybeTls<P, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<P: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for MaybeTls<P, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for 127.0.0.1 and its key, as PEM.
    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn files(dir: &Path) -> KeyPairFiles {
        KeyPairFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            cert_flag: "--test-cert",
            key_flag: "--test-key",
        }
    }

    /// Writes `contents` with the modification time `at` seconds after the epoch: two
    /// writes within one tick of the kernel's coarse clock would share a time.
    fn write(path: &Path, contents: &str, at: u64) {
        std::fs::write(path, contents).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(at))
            .unwrap();
    }

    fn leaf(cert: &ReloadingCert) -> Vec<u8> {
        cert.current().cert[0].to_vec()
    }

    #[test]
    fn a_changed_pair_replaces_the_certificate_and_a_broken_one_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let (cert_a, key_a) = self_signed();
        write(&files.cert, &cert_a, 1);
        write(&files.key, &key_a, 1);
        let cert = ReloadingCert::load(files.clone()).unwrap();
        let first = leaf(&cert);
        assert!(matches!(cert.reload_if_changed(), Reload::Unchanged));

        // Half a replacement (a new certificate, the old key): refused, kept, reported once.
        let (cert_b, key_b) = self_signed();
        write(&files.cert, &cert_b, 2);
        let e = match cert.reload_if_changed() {
            Reload::Failed(e) => e.to_string(),
            other => panic!("{other:?}"),
        };
        assert!(
            e.contains("--test-cert") && e.contains("does not fit"),
            "{e}"
        );
        assert_eq!(leaf(&cert), first);
        assert!(matches!(cert.reload_if_changed(), Reload::Unchanged));

        // The key follows: the pair loads.
        write(&files.key, &key_b, 3);
        assert!(matches!(cert.reload_if_changed(), Reload::Reloaded));
        assert_ne!(leaf(&cert), first);

        // A file that went missing, or garbage: the certificate in service stays.
        let served = leaf(&cert);
        std::fs::remove_file(&files.key).unwrap();
        assert!(matches!(cert.reload_if_changed(), Reload::Failed(_)));
        write(&files.key, "not a key", 4);
        assert!(matches!(cert.reload_if_changed(), Reload::Failed(_)));
        assert_eq!(leaf(&cert), served);
    }

    #[test]
    fn loading_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let e = ReloadingCert::load(files.clone()).unwrap_err().to_string();
        assert!(e.contains("cannot read --test-cert"), "{e}");
        std::fs::write(&files.cert, "").unwrap();
        let e = ReloadingCert::load(files.clone()).unwrap_err().to_string();
        assert!(e.contains("no PEM certificate"), "{e}");
        let (cert, _) = self_signed();
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, "").unwrap();
        let e = ReloadingCert::load(files).unwrap_err().to_string();
        assert!(e.contains("--test-key"), "{e}");
    }

    #[tokio::test]
    async fn a_plain_connection_takes_vectored_writes() {
        // hyper flattens bodies into a buffer that never shrinks unless the stream says
        // it takes vectored writes.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let stream: MaybeTls<_, tokio_rustls::client::TlsStream<tokio::net::TcpStream>> =
            MaybeTls::Plain(tcp);
        assert!(stream.is_write_vectored());
    }
}
