//! TLS for the peer channel (`--peer-tls-cert`, `--peer-tls-key`, `--peer-tls-ca`):
//! mutual, TLS 1.3 only, both sides verified against the cluster's CA.
//!
//! Each node serves its certificate on `--peer` and presents the same one as a client
//! certificate when it connects to the others; a node accepts only connections whose
//! client certificate the CA signed, and connects only to peers whose certificate the
//! CA signed for the host of their `--members` address (a DNS name or IP address in the
//! certificate's subject alternative names). The sealing of messages under the cluster
//! secret (`wire.rs`) stays on inside TLS: a certificate alone does not make a member.
//! The certificate and key follow their files (`crate::services::net::tls::ReloadingCert`); the CA is
//! read at start.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{version, ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::services::net::tls::{read_certs, KeyPairFiles, ReloadingCert};

/// Both halves of a node's peer TLS. Cheap to clone.
#[derive(Clone)]
pub struct PeerTls {
    /// Accepts peers' connections (client certificate required).
    pub acceptor: TlsAcceptor,
    /// Connects to peers (presenting this node's certificate).
    pub connector: TlsConnector,
    /// This node's certificate, served and presented, for its reload worker.
    pub certificate: ReloadingCert,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls(..)")
    }
}

impl PeerTls {
    /// Reads the certificate chain, its key and the CA; an unreadable file, one that
    /// does not parse, or a key that does not fit is an error naming the flag. The
    /// certificate and key are reloaded when their files change (`crate::services::net::tls`); the CA
    /// is read once.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> anyhow::Result<Self> {
        let files = KeyPairFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            cert_flag: "--peer-tls-cert",
            key_flag: "--peer-tls-key",
        };
        let certificate = ReloadingCert::load(files)?;
        let mut roots = RootCertStore::empty();
        for ca_cert in read_certs(ca, "--peer-tls-ca")? {
            roots
                .add(ca_cert)
                .with_context(|| format!("--peer-tls-ca {}: not a usable CA", ca.display()))?;
        }
        let roots = Arc::new(roots);
        let provider = crate::services::net::tls::provider();
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .with_context(|| format!("--peer-tls-ca {}", ca.display()))?;
        // One certificate, served and presented, read from the same resolver.
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&version::TLS13])
            .context("TLS protocol versions")?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(certificate.clone()));
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&version::TLS13])
            .context("TLS protocol versions")?
            .with_root_certificates(roots)
            .with_client_cert_resolver(Arc::new(certificate.clone()));
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            certificate,
        })
    }
}

/// The name a peer's certificate must carry: the host of its address (`host:port`,
/// `[v6]:port`), as a DNS name or an IP address.
pub fn server_name(addr: &str) -> Option<ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_member_addresses() {
        assert!(matches!(
            server_name("127.0.0.1:7848"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:7848"),
            Some(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("node-b.internal:7848"),
            Some(ServerName::DnsName(_))
        ));
        assert!(server_name("bad name:7848").is_none());
    }

    #[test]
    fn unreadable_or_empty_files_name_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.pem");
        let err = PeerTls::load(&missing, &empty, &empty)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--peer-tls-cert"), "{err}");
        let err = PeerTls::load(&empty, &empty, &empty)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--peer-tls-cert") && err.contains("no PEM"),
            "{err}"
        );
    }
}
