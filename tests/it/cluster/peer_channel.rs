//! The peer channel under attack: captured messages replayed (also after the receiver
//! restarts), unauthenticated bodies, slow and idle connections, the connection cap,
//! what the wire shows (a recording proxy sits between the nodes) in both modes, and a
//! three-node cluster over mutual TLS that refuses another CA's certificate.
//!
//! The tests speak the peer format themselves (`Wire`, from the cluster secret), as an
//! attacker who knows the secret would; the recording proxy plays one who does not.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use roster_tests::{eventually, free_port, Cluster, Node, NodeOptions, CLUSTER_SECRET};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------
// The peer format, protocol 2 (server/src/services/cluster/wire.rs), as a test speaks it.

/// A message's head.
#[derive(Clone, Debug)]
struct TestHead {
    sender: u64,
    session: u64,
    seq: u64,
    to: u64,
    ts: u64,
    path: String,
}

struct Wire {
    header: [u8; 32],
    seal: XChaCha20Poly1305,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl Wire {
    fn new(secret: &str) -> Self {
        let hkdf = Hkdf::<Sha256>::new(Some(b"roster-peer/2"), secret.as_bytes());
        let (mut header, mut seal) = ([0u8; 32], [0u8; 32]);
        hkdf.expand(b"header-mac", &mut header).unwrap();
        hkdf.expand(b"body-seal", &mut seal).unwrap();
        Self {
            header,
            seal: XChaCha20Poly1305::new(Key::from_slice(&seal)),
        }
    }

    fn canonical(kind: &str, h: &TestHead, len: usize) -> Vec<u8> {
        format!(
            "roster-peer/2\n{kind}\n{}\n{:016x}\n{}\n{:016x}\n{}\n{len}\n{}",
            h.sender, h.session, h.seq, h.to, h.ts, h.path
        )
        .into_bytes()
    }

    /// A complete HTTP request carrying `message` sealed under `h`.
    fn request(&self, h: &TestHead, message: &[u8]) -> Vec<u8> {
        static N: AtomicU64 = AtomicU64::new(0);
        let len = message.len() + 40;
        // A nonce never used before: a hash of a counter, the time and the process.
        let seed = format!(
            "{}-{}-{}",
            N.fetch_add(1, Ordering::Relaxed),
            now_ms(),
            std::process::id()
        );
        let nonce: [u8; 24] = Sha256::digest(seed.as_bytes())[..24].try_into().unwrap();
        let mut body = nonce.to_vec();
        body.extend_from_slice(message);
        let tag = self
            .seal
            .encrypt_in_place_detached(
                XNonce::from_slice(&nonce),
                &Self::canonical("request", h, len),
                &mut body[24..],
            )
            .unwrap();
        body.extend_from_slice(&tag);
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.header).unwrap();
        mac.update(&Self::canonical("head", h, len));
        let tag: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let auth = format!(
            "{:016x}.{}.{:016x}.{}.{len}.{tag}",
            h.session, h.seq, h.to, h.ts
        );
        let mut out = format!(
            "POST /peer/v1/{} HTTP/1.1\r\nhost: peer\r\nx-roster-protocol: 2\r\n\
             x-roster-node: {}\r\nx-roster-auth: {auth}\r\ncontent-length: {}\r\n\r\n",
            h.path,
            h.sender,
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        out
    }

    /// Opens a sealed answer to `h`.
    fn open(&self, h: &TestHead, len: usize, status: u16, mut body: Vec<u8>) -> Option<Vec<u8>> {
        if body.len() < 40 {
            return None;
        }
        let tag_at = body.len() - 16;
        let tag = *Tag::from_slice(&body[tag_at..]);
        let (nonce, rest) = body[..tag_at].split_at_mut(24);
        self.seal
            .decrypt_in_place_detached(
                XNonce::from_slice(nonce),
                &Self::canonical(&format!("reply {status}"), h, len),
                rest,
                &tag,
            )
            .ok()?;
        Some(body[24..tag_at].to_vec())
    }
}

/// An HTTP answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn sealed(&self) -> bool {
        self.headers.iter().any(|(k, _)| k == "x-roster-sealed")
    }
}

/// Sends raw request bytes on a new connection to `port` and reads one answer.
fn exchange(port: u16, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request).unwrap();
    read_answer(&mut stream).expect("an answer")
}

fn read_answer(stream: &mut TcpStream) -> Option<Answer> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some(Answer {
        status,
        headers,
        body,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The incarnation of the node whose peer port is `port`, by handshake as `sender`.
fn incarnation(wire: &Wire, port: u16, sender: u64, session: u64) -> u64 {
    let h = TestHead {
        sender,
        session,
        seq: 1,
        to: 0,
        ts: now_ms(),
        path: "session".into(),
    };
    let a = exchange(port, &wire.request(&h, b""));
    assert_eq!(a.status, 409, "{}", String::from_utf8_lossy(&a.body));
    let body = wire.open(&h, 40, 409, a.body).expect("a sealed 409");
    u64::from_be_bytes(body.try_into().unwrap())
}

// ---------------------------------------------------------------------------------
// A recording TCP proxy between nodes.

/// Bytes recorded one way of one connection.
type Recording = Arc<Mutex<Vec<u8>>>;

/// Forwards connections on `port` to a node's peer port, keeping every byte each way.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    /// Per connection: bytes towards the node, bytes back.
    conns: Arc<Mutex<Vec<(Recording, Recording)>>>,
}

impl Proxy {
    fn start(target: u16) -> Self {
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<_>>> = Arc::default();
        {
            let (stop, conns) = (stop.clone(), conns.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                        continue;
                    };
                    let (up, down): (Recording, Recording) = (Arc::default(), Arc::default());
                    conns.lock().unwrap().push((up.clone(), down.clone()));
                    pipe(client.try_clone().unwrap(), server.try_clone().unwrap(), up);
                    pipe(server, client, down);
                }
            });
        }
        Self { port, stop, conns }
    }

    /// How far each connection's stream towards the node has got.
    fn mark(&self) -> Vec<usize> {
        let conns = self.conns.lock().unwrap();
        conns
            .iter()
            .map(|(up, _)| up.lock().unwrap().len())
            .collect()
    }

    /// Complete requests towards the node, up to `mark`, each as raw bytes.
    fn requests(&self, mark: &[usize]) -> Vec<Vec<u8>> {
        let conns = self.conns.lock().unwrap();
        let mut out = Vec::new();
        for ((up, _), end) in conns.iter().zip(mark) {
            let bytes = up.lock().unwrap()[..*end].to_vec();
            let mut at = 0;
            while let Some(head) = find(&bytes[at..], b"\r\n\r\n") {
                let head_text = String::from_utf8_lossy(&bytes[at..at + head]).to_lowercase();
                let len: usize = head_text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                let end = at + head + 4 + len;
                if end > bytes.len() {
                    break;
                }
                out.push(bytes[at..end].to_vec());
                at = end;
            }
        }
        out
    }

    /// Every byte seen either way.
    fn all_bytes(&self) -> Vec<u8> {
        let conns = self.conns.lock().unwrap();
        let mut out = Vec::new();
        for (up, down) in conns.iter() {
            out.extend_from_slice(&up.lock().unwrap());
            out.extend_from_slice(&down.lock().unwrap());
        }
        out
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` on a thread, recording the bytes.
fn pipe(mut from: TcpStream, mut to: TcpStream, record: Recording) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    record.lock().unwrap().extend_from_slice(&buf[..n]);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// A three-node cluster whose members reach each other only through recording proxies.
fn start_proxied(extra: &[String]) -> (Cluster, Vec<Proxy>) {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let proxies: Vec<Proxy> = ports.iter().map(|(_, peer)| Proxy::start(*peer)).collect();
    let members = proxies
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}=127.0.0.1:{}", i + 1, p.port))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, ports)| {
            let mut args = vec![
                "--node-id".to_string(),
                (i + 1).to_string(),
                "--members".into(),
                members.clone(),
            ];
            args.extend(extra.iter().cloned());
            Node::start_with(NodeOptions {
                args,
                env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
                ports: Some(*ports),
                wait_ready: false,
                ..Default::default()
            })
        })
        .collect();
    for node in &mut nodes {
        node.wait_ready();
    }
    (Cluster { nodes, members }, proxies)
}

/// The token signing key, read from the Raft log in `node`'s data dir (the bootstrap
/// command holds it as `signing_key` followed by a 32-byte MessagePack bin).
fn signing_key(node: &Node) -> Vec<u8> {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    files(&node.data_dir(), &mut paths);
    let marker = b"\xabsigning_key\xc4\x20";
    for path in paths {
        let bytes = std::fs::read(&path).unwrap_or_default();
        if let Some(at) = find(&bytes, marker) {
            let start = at + marker.len();
            return bytes[start..start + 32].to_vec();
        }
    }
    panic!("no signing key in {}", node.data_dir().display());
}

/// Asserts that the recorded traffic shows neither the signing key nor the command
/// that carries it.
fn assert_no_key_on_the_wire(c: &Cluster, proxies: &[Proxy]) -> Vec<u8> {
    let key = signing_key(&c.nodes[0]);
    let wire: Vec<u8> = proxies.iter().flat_map(|p| p.all_bytes()).collect();
    assert!(
        wire.len() > 10_000,
        "the proxies saw the traffic ({} bytes)",
        wire.len()
    );
    assert!(
        find(&wire, &key).is_none(),
        "the signing key crossed the wire"
    );
    assert!(
        find(&wire, b"signing_key").is_none(),
        "a bootstrap command crossed the wire in plaintext"
    );
    assert!(
        find(&wire, b"password_hash").is_none(),
        "a user record crossed the wire in plaintext"
    );
    wire
}

// ---------------------------------------------------------------------------------

#[test]
fn a_peer_message_is_accepted_once_and_never_after_a_restart() {
    let mut c = Cluster::start(3, &[]);
    let wire = Wire::new(CLUSTER_SECRET);
    let port = c.nodes[0].peer_port;
    // Not a member's id: a second session of a member's would replace the member's own.
    let session = 0x5e55_1011_u64 ^ now_ms();
    let to = incarnation(&wire, port, 9, session);
    let h = TestHead {
        sender: 9,
        session,
        seq: 2,
        to,
        ts: now_ms(),
        path: "session".into(),
    };
    let captured = wire.request(&h, b"");
    let first = exchange(port, &captured);
    assert_eq!(first.status, 200);
    assert_eq!(
        wire.open(&h, 40, 200, first.body),
        Some(vec![]),
        "a sealed answer to it"
    );
    // The same bytes again.
    let again = exchange(port, &captured);
    assert_eq!(again.status, 403);
    assert!(String::from_utf8_lossy(&again.body).contains("replayed"));
    // A message sealed under another secret, and one too old, with fresh numbers.
    let other = Wire::new("another-secret-0123456789");
    let fresh = TestHead {
        seq: 3,
        ts: now_ms(),
        ..h.clone()
    };
    assert_eq!(exchange(port, &other.request(&fresh, b"")).status, 403);
    let stale = TestHead {
        seq: 4,
        ts: now_ms() - 120_000,
        ..h.clone()
    };
    assert_eq!(exchange(port, &wire.request(&stale, b"")).status, 403);
    // After a restart the node's memory is empty, but the message names the old
    // incarnation: refused, before anything reads its body.
    c.nodes[0].restart();
    let after = exchange(port, &captured);
    assert_eq!(
        after.status,
        409,
        "{}",
        String::from_utf8_lossy(&after.body)
    );
    let new_to = wire.open(&h, 40, 409, after.body).expect("a sealed 409");
    assert_ne!(new_to, to.to_be_bytes().to_vec(), "a new incarnation");
    // And the cluster talks to the restarted node again (it is ready: it caught up).
    let leader = c.leader();
    c.nodes[leader]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=after-restart&ip=127.20.1.1&port=1&ephemeral=false",
        )
        .expect(200);
    eventually(Duration::from_secs(10), || {
        let v = c.nodes[0]
            .call(
                "GET",
                "/nacos/v1/ns/instance/list?serviceName=after-restart",
            )
            .expect(200)
            .json();
        (v["hosts"].as_array().unwrap().len() == 1)
            .then_some(())
            .ok_or(format!("{v}"))
    });
}

#[test]
fn captured_registrations_replayed_are_refused_and_the_key_never_crosses_the_wire() {
    let (c, proxies) = start_proxied(&[]);
    let service = roster_tests::unique("replayed");
    let ports: Vec<u16> = (1..=12).collect();
    for port in &ports {
        c.nodes[0]
            .call(
                "POST",
                &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.20.2.1&port={port}"),
            )
            .expect(200);
    }
    let marks: Vec<Vec<usize>> = proxies.iter().map(Proxy::mark).collect();
    for port in &ports {
        c.nodes[0]
            .call(
                "DELETE",
                &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.20.2.1&port={port}"),
            )
            .expect(200);
    }
    let count = |node: &Node| {
        let v = node
            .call(
                "GET",
                &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
            )
            .expect(200)
            .json();
        v["hosts"].as_array().map_or(0, Vec::len)
    };
    for node in &c.nodes {
        eventually(Duration::from_secs(10), || {
            (count(node) == 0)
                .then_some(())
                .ok_or("not gone yet".to_string())
        });
    }
    // The forwarded registrations, as captured, sent again to their owners.
    let mut replayed = 0;
    for (i, (proxy, mark)) in proxies.iter().zip(&marks).enumerate() {
        for request in proxy.requests(mark) {
            if !request.starts_with(b"POST /peer/v1/distro/forward2 ") {
                continue;
            }
            let answer = exchange(c.nodes[i].peer_port, &request);
            assert_eq!(answer.status, 403, "replay to node {}", i + 1);
            assert!(!answer.sealed());
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "some registrations were forwarded to their owners"
    );
    std::thread::sleep(Duration::from_millis(500));
    for node in &c.nodes {
        assert_eq!(count(node), 0, "no replayed registration came back");
    }
    let wire = assert_no_key_on_the_wire(&c, &proxies);
    assert!(
        find(&wire, b"POST /peer/v1/raft/append").is_some(),
        "the proxies saw replication"
    );
}

#[test]
fn an_unauthenticated_body_is_not_read() {
    let node = Node::start_with(NodeOptions {
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        ..Default::default()
    });
    let mut stream = TcpStream::connect(("127.0.0.1", node.peer_port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let declared: usize = 64 * 1024 * 1024;
    let forged = format!(
        "POST /peer/v1/raft/append HTTP/1.1\r\nhost: peer\r\nx-roster-protocol: 2\r\n\
         x-roster-node: 2\r\nx-roster-auth: 0000000000000001.1.0000000000000000.{}.{}.{}\r\n\
         content-length: {declared}\r\n\r\n",
        now_ms(),
        declared,
        "00".repeat(32)
    );
    stream.write_all(forged.as_bytes()).unwrap();
    // The body goes out on its own thread until the node stops taking it.
    let sent = Arc::new(AtomicU64::new(0));
    let writer = {
        let (mut stream, sent) = (stream.try_clone().unwrap(), sent.clone());
        std::thread::spawn(move || {
            let chunk = vec![0u8; 64 * 1024];
            while (sent.load(Ordering::SeqCst) as usize) < declared {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
                sent.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        })
    };
    let started = Instant::now();
    let answer = read_answer(&mut stream).expect("a refusal");
    assert_eq!(answer.status, 403);
    assert!(started.elapsed() < Duration::from_secs(5));
    writer.join().unwrap();
    let sent = sent.load(Ordering::SeqCst) as usize;
    eprintln!("{sent} bytes of a {declared}-byte body went out before the node closed");
    // What the socket buffers held is all that went: the node closed the connection.
    assert!(
        sent < 16 * 1024 * 1024,
        "{sent} bytes of the body were taken"
    );
    // The node is fine.
    node.raw("GET", "/health/ready", &[], None).expect(200);
}

#[test]
fn the_peer_port_caps_connections_and_closes_slow_and_idle_ones() {
    let node = Node::start_with(NodeOptions {
        args: [
            "--peer-max-connections",
            "2",
            "--peer-header-timeout-secs",
            "1",
            "--peer-idle-timeout-secs",
            "2",
        ]
        .map(String::from)
        .to_vec(),
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        ..Default::default()
    });
    let connect = || {
        let s = TcpStream::connect(("127.0.0.1", node.peer_port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    /// How long until the node closes `s`.
    fn closed_after(mut s: TcpStream) -> Duration {
        let started = Instant::now();
        let mut buf = [0u8; 1024];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        started.elapsed()
    }
    // A head that never ends, and a connection that never sends: both gone after the
    // header timeout (the watchdog looks every second).
    let mut slow = connect();
    slow.write_all(b"POST /peer/v1/hello HTTP/1.1\r\nx-roster-protocol: 2\r\n")
        .unwrap();
    let silent = connect();
    // A third connection is over the cap: closed at once.
    let third = connect();
    assert!(
        closed_after(third) < Duration::from_millis(900),
        "over the cap"
    );
    let slow = std::thread::spawn(move || closed_after(slow));
    let silent = closed_after(silent);
    let slow = slow.join().unwrap();
    for (what, after) in [("slow head", slow), ("silent", silent)] {
        assert!(
            after >= Duration::from_millis(500) && after < Duration::from_secs(4),
            "{what}: closed after {after:?}"
        );
    }
    // An idle connection after a request: closed after the idle timeout.
    let mut idle = connect();
    idle.write_all(b"POST /peer/v1/session HTTP/1.1\r\nhost: peer\r\ncontent-length: 0\r\n\r\n")
        .unwrap();
    let answer = read_answer(&mut idle).expect("an answer");
    assert_eq!(answer.status, 403);
    let after = closed_after(idle);
    assert!(
        after < Duration::from_secs(5),
        "idle closed after {after:?}"
    );
}

/// A CA, and a certificate for 127.0.0.1 signed by it, written as PEM files in `dir`:
/// (ca, cert, key).
fn tls_files(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} CA"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.signed_by(&key, &ca).unwrap();
    let paths = (
        dir.join(format!("{name}-ca.pem")),
        dir.join(format!("{name}-cert.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

fn tls_args(files: &(PathBuf, PathBuf, PathBuf)) -> Vec<String> {
    vec![
        "--peer-tls-ca".into(),
        files.0.display().to_string(),
        "--peer-tls-cert".into(),
        files.1.display().to_string(),
        "--peer-tls-key".into(),
        files.2.display().to_string(),
    ]
}

#[test]
fn a_cluster_over_mutual_tls_works_shows_nothing_and_refuses_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_tls = tls_files(dir.path(), "cluster");
    let (c, proxies) = start_proxied(&tls_args(&cluster_tls));
    assert!(
        c.nodes[0].log().contains("tls=true"),
        "the node says it serves TLS"
    );
    // Persistent writes through a follower (forwarded to the leader), read everywhere.
    let follower = c.follower();
    c.nodes[follower]
        .call(
            "POST",
            "/nacos/v1/ns/instance?serviceName=over-tls&ip=127.20.3.1&port=7&ephemeral=false",
        )
        .expect(200);
    // Ephemeral ones, forwarded to their owners by Distro.
    for port in 1..=6 {
        c.nodes[0]
            .call(
                "POST",
                &format!(
                    "/nacos/v1/ns/instance?serviceName=over-tls-eph&ip=127.20.3.2&port={port}"
                ),
            )
            .expect(200);
    }
    for node in &c.nodes {
        let persistent = super::persistent_ports(node, "over-tls");
        assert_eq!(persistent, BTreeSet::from([7]));
        eventually(Duration::from_secs(10), || {
            let v = node
                .call("GET", "/nacos/v1/ns/instance/list?serviceName=over-tls-eph")
                .expect(200)
                .json();
            let n = v["hosts"].as_array().map_or(0, Vec::len);
            (n == 6).then_some(()).ok_or(format!("{n} of 6"))
        });
    }
    let wire = assert_no_key_on_the_wire(&c, &proxies);
    assert!(
        find(&wire, b"/peer/v1/").is_none(),
        "no request head in the clear"
    );
    // A plaintext request to a TLS peer port gets no HTTP answer.
    let mut plain = TcpStream::connect(("127.0.0.1", c.nodes[0].peer_port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    plain
        .write_all(b"POST /peer/v1/session HTTP/1.1\r\nhost: peer\r\ncontent-length: 0\r\n\r\n")
        .unwrap();
    assert!(read_answer(&mut plain).is_none());
    // A node with the cluster secret, trusting the cluster's CA, but with a certificate
    // from another CA: the nodes refuse its connections, and it never joins.
    let other = tls_files(dir.path(), "intruder");
    let intruder_tls = (cluster_tls.0.clone(), other.1, other.2);
    let (http, peer_port) = (free_port(), free_port());
    let mut args = vec![
        "--node-id".to_string(),
        "7".into(),
        "--members".into(),
        format!("{},7=127.0.0.1:{peer_port}", c.members),
    ];
    args.extend(tls_args(&intruder_tls));
    let intruder = Node::start_with(NodeOptions {
        args,
        env: vec![("ROSTER_CLUSTER_SECRET".into(), CLUSTER_SECRET.into())],
        ports: Some((http, peer_port)),
        wait_ready: false,
        ..Default::default()
    });
    eventually(Duration::from_secs(10), || {
        let log = c.nodes[0].log();
        log.lines()
            .any(|l| l.contains("TLS handshake failed") && l.contains("UnknownIssuer"))
            .then_some(())
            .ok_or("no refused handshake yet".to_string())
    });
    let status = eventually(Duration::from_secs(10), || {
        intruder
            .try_request("GET", "/health/ready", &[], None)
            .map(|r| r.status)
    });
    assert_eq!(status, 503, "the intruder never joins");
}
