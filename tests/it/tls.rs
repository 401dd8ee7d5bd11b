//! HTTPS on the HTTP API (`--http-tls-cert`, `--http-tls-key`), certificates reloaded
//! from their files without a restart (HTTP, gRPC and the peer channel), the CLI over
//! HTTPS (`--cacert`, `--password-file`), and the generated admin password kept out of
//! the log. Certificates come from a test CA made with rcgen.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use roster_tests::{
    enc, eventually, roster_bin, served_chain, unique, Https, Node, NodeOptions, ADMIN_PASSWORD,
};

/// A test CA.
struct Ca {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

/// A certificate for 127.0.0.1 and its key, as PEM, and the certificate as DER.
struct Issued {
    cert_pem: String,
    key_pem: String,
    der: Vec<u8>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        Self {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// Writes the CA's certificate to `dir/file` and returns the path.
    fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, self.issuer.pem()).unwrap();
        path
    }

    /// A fresh key and a certificate for 127.0.0.1 signed by this CA.
    fn issue(&self) -> Issued {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// The certificate and key files a node is started with.
struct KeyFiles {
    cert: PathBuf,
    key: PathBuf,
}

impl KeyFiles {
    fn write(dir: &Path, issued: &Issued) -> Self {
        let files = Self {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        files.replace(issued);
        files
    }

    /// Overwrites both files in place, the certificate first (as `cp` would).
    fn replace(&self, issued: &Issued) {
        std::fs::write(&self.cert, &issued.cert_pem).unwrap();
        std::fs::write(&self.key, &issued.key_pem).unwrap();
    }

    /// The flags serving the HTTP API over TLS with these files.
    fn http_flags(&self) -> Vec<String> {
        vec![
            "--http-tls-cert".into(),
            self.cert.display().to_string(),
            "--http-tls-key".into(),
            self.key.display().to_string(),
        ]
    }
}

/// Runs the `roster` CLI with `args`, without any `ROSTER_*` setting from outside but
/// those in `env`.
fn cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(roster_bin());
    cmd.args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("ROSTER_") {
            cmd.env_remove(key);
        }
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("run roster")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Connects to `addr`, sends `first`, then waits for the node to close the connection;
/// how long that took (panics after 15 s).
fn closed_after(addr: &str, first: &[u8]) -> Duration {
    let started = Instant::now();
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.write_all(first).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut buf = [0u8; 256];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return started.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return started.elapsed(),
            Err(e) => panic!("the node kept a silent connection open: {e}"),
        }
    }
}

#[test]
fn https_serves_the_api_and_answers_plaintext_with_a_400() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("roster test CA");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let files = KeyFiles::write(dir.path(), &ca.issue());
    let mut args = files.http_flags();
    args.extend(["--http-header-timeout-secs".into(), "2".into()]);
    let node = Node::start_with(NodeOptions {
        args,
        wait_ready: false,
        ..Default::default()
    });
    let https = Https::new(&node.addr(), &ca_pem);
    https.wait_ready();
    assert!(
        node.log().contains("https=true"),
        "the node says it serves HTTPS"
    );

    // Log in, register, list: the Nacos API as over plaintext.
    let form = format!("username=nacos&password={}", enc(ADMIN_PASSWORD));
    let login = https
        .try_request("POST", "/nacos/v1/auth/login", &[], Some(&form))
        .unwrap()
        .expect(200)
        .json();
    assert!(login["accessToken"].is_string(), "{login}");
    let service = unique("https-svc");
    https
        .call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port=9001"),
            None,
        )
        .expect(200);
    let list = https
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
            None,
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"][0]["port"], 9001, "{list}");

    // Plaintext on the same port: a 400 that says to use https, and nothing served.
    let plain = node
        .try_request(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
            &[],
            None,
        )
        .expect("a plaintext request gets an answer");
    assert_eq!(plain.status, 400, "{plain:?}");
    assert!(plain.body.contains("https://"), "{plain:?}");
    assert!(!plain.body.contains("9001"), "{plain:?}");

    // The header timeout (2 s) bounds a silent connection and a stalled handshake.
    for (what, first) in [
        ("silent", &b""[..]),
        ("half a TLS record", &[0x16, 0x03, 0x01][..]),
    ] {
        let took = closed_after(&node.addr(), first);
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(8),
            "a {what} connection closed after {took:?}"
        );
    }
}

#[test]
fn replaced_certificate_files_are_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("roster test CA");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let first = ca.issue();
    let files = KeyFiles::write(dir.path(), &first);
    // One certificate for all three TLS faces.
    let mut args = files.http_flags();
    for (flag, path) in [
        ("--grpc-tls-cert", &files.cert),
        ("--grpc-tls-key", &files.key),
        ("--peer-tls-cert", &files.cert),
        ("--peer-tls-key", &files.key),
        ("--peer-tls-ca", &ca_pem),
    ] {
        args.extend([flag.to_string(), path.display().to_string()]);
    }
    let node = Node::start_with(NodeOptions {
        args,
        wait_ready: false,
        ..Default::default()
    });
    let https = Https::new(&node.addr(), &ca_pem);
    https.wait_ready();
    let pid = node.pid();
    let faces = [
        ("http", node.addr()),
        ("grpc", format!("127.0.0.1:{}", node.http_port + 1000)),
        ("peer", format!("127.0.0.1:{}", node.peer_port)),
    ];
    let leaf = |addr: &str| -> Result<Vec<u8>, String> {
        served_chain(addr, &ca_pem)?
            .into_iter()
            .next()
            .ok_or_else(|| "no certificate served".to_string())
    };
    for (face, addr) in &faces {
        assert_eq!(
            leaf(addr).unwrap(),
            first.der,
            "{face} serves the first certificate"
        );
    }

    // New files in place: every face serves the new certificate within a few looks
    // (one every 2 s), and the API keeps working.
    let second = ca.issue();
    files.replace(&second);
    for (face, addr) in &faces {
        eventually(Duration::from_secs(20), || {
            let served = leaf(addr)?;
            (served == second.der)
                .then_some(())
                .ok_or(format!("{face} still serves the old certificate"))
        });
    }
    https
        .call(
            "GET",
            "/nacos/v1/ns/service/list?pageNo=1&pageSize=10",
            None,
        )
        .expect(200);
    assert!(node.log().contains("reloaded the TLS certificate"));

    // A broken replacement is reported and the certificate in service stays.
    std::fs::write(&files.cert, "not a certificate").unwrap();
    eventually(Duration::from_secs(20), || {
        node.log()
            .contains("do not load")
            .then_some(())
            .ok_or("no warning about the broken certificate file".to_string())
    });
    for (face, addr) in &faces {
        assert_eq!(
            leaf(addr).unwrap(),
            second.der,
            "{face} keeps the good certificate"
        );
    }
    assert_eq!(node.pid(), pid, "the same process all along");
}

#[test]
fn the_cli_speaks_https_with_a_ca_file_and_a_password_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("roster test CA");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let other_ca = Ca::new("another CA").write(dir.path(), "other-ca.pem");
    let files = KeyFiles::write(dir.path(), &ca.issue());
    let node = Node::start_with(NodeOptions {
        args: files.http_flags(),
        wait_ready: false,
        ..Default::default()
    });
    Https::new(&node.addr(), &ca_pem).wait_ready();
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, format!("{ADMIN_PASSWORD}\n")).unwrap();
    let url = format!("https://{}", node.addr());
    let ca_arg = ca_pem.display().to_string();
    let pw_arg = password_file.display().to_string();

    let ok = cli(
        &[
            "cluster",
            "status",
            "--http",
            &url,
            "--cacert",
            &ca_arg,
            "--password-file",
            &pw_arg,
        ],
        &[],
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(
        text(&ok.stdout).contains("node 1 (leader)"),
        "{}",
        text(&ok.stdout)
    );

    // The same through the environment (ROSTER_PASSWORD, ROSTER_CACERT), for `sync`.
    let ok = cli(
        &["sync", "list", "--http", &url],
        &[
            ("ROSTER_PASSWORD", ADMIN_PASSWORD),
            ("ROSTER_CACERT", &ca_arg),
        ],
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("NAME"), "{}", text(&ok.stdout));

    // A CA that did not sign the node's certificate: a clear refusal.
    let bad_ca = other_ca.display().to_string();
    let refused = cli(
        &[
            "cluster",
            "status",
            "--http",
            &url,
            "--cacert",
            &bad_ca,
            "--password-file",
            &pw_arg,
        ],
        &[],
    );
    let err = text(&refused.stderr);
    assert!(!refused.status.success(), "a wrong CA must fail");
    assert!(
        err.contains("TLS handshake") && err.contains("certificate") && err.contains("--cacert"),
        "{err}"
    );

    // Plaintext to the HTTPS port: the node's answer says to use https.
    let plain = cli(
        &[
            "cluster",
            "status",
            "--http",
            &node.addr(),
            "--password-file",
            &pw_arg,
        ],
        &[],
    );
    let err = text(&plain.stderr);
    assert!(!plain.status.success());
    assert!(err.contains("400") && err.contains("https://"), "{err}");

    // A wrong password from the file is refused by the node.
    std::fs::write(&password_file, "not-the-password\n").unwrap();
    let wrong = cli(
        &[
            "cluster",
            "status",
            "--http",
            &url,
            "--cacert",
            &ca_arg,
            "--password-file",
            &pw_arg,
        ],
        &[],
    );
    assert!(!wrong.status.success());
    assert!(
        text(&wrong.stderr).contains("login failed"),
        "{}",
        text(&wrong.stderr)
    );
}

#[test]
fn the_generated_admin_password_is_only_in_its_file() {
    let node = Node::start_with(NodeOptions {
        admin_password: None,
        ..Default::default()
    });
    let file = node.data_dir().join("initial-admin-password");
    let password = std::fs::read_to_string(&file).unwrap();
    let password = password.trim();
    assert!(password.len() >= 16, "a generated password: {password:?}");
    let log = node.log();
    assert!(
        !log.contains(password),
        "the password is in the log:\n{log}"
    );
    assert!(
        log.contains(&file.display().to_string()),
        "the log says where the password is:\n{log}"
    );

    // The file is what `--password-file` takes; a bare HOST:PORT is plaintext HTTP.
    let ok = cli(
        &[
            "cluster",
            "status",
            "--http",
            &node.addr(),
            "--password-file",
            &file.display().to_string(),
        ],
        &[],
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("node 1"), "{}", text(&ok.stdout));
}
