//! What an anonymous or hostile caller can make a node spend, and the signing key's
//! rotation: a flood of wrong passwords keeps memory flat and is answered 429, never
//! 5xx; invented HTTP methods add no metric labels; `roster auth rotate-key` replaces
//! the token signing key on every node while tokens signed by the old one last out
//! their lifetime and no longer.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use roster_tests::{eventually, roster_bin, Cluster, Node, NodeOptions, ADMIN_PASSWORD};

/// A figure of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// What the flood's clients were answered.
#[derive(Default, Debug)]
struct Tally {
    by_status: std::collections::BTreeMap<u16, usize>,
    transport_errors: usize,
    /// The body of each status, as last seen.
    bodies: std::collections::BTreeMap<u16, String>,
}

/// 200 clients, each sending wrong passwords for up to `FLOOD_TIME` and at most
/// `PER_CLIENT` requests: logins with a password of their own every time (no cache can
/// help), list requests carrying `username`/`password` (as the npm client sends them on
/// every call) and logins with one shared wrong password (the failed-check cache's case).
#[test]
fn a_wrong_password_flood_keeps_memory_flat_and_is_answered_429_not_5xx() {
    const CLIENTS: usize = 200;
    const PER_CLIENT: usize = 40;
    const FLOOD_TIME: Duration = Duration::from_secs(8);
    // Two concurrent password checks whatever the machine's cores, so the bound below
    // holds anywhere. (Through the environment: a build without the flag ignores it,
    // so the same test measures one.)
    let node = Node::start_with(NodeOptions {
        env: vec![("ROSTER_MAX_PASSWORD_CHECKS".into(), "2".into())],
        ..Default::default()
    });
    let pid = node.pid();
    // One correct check first: the baseline includes a node that has hashed once.
    node.login();
    let baseline = proc_kib(pid, "VmRSS");

    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(Mutex::new(baseline));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let rss = proc_kib(pid, "VmRSS");
                let mut p = peak.lock().unwrap();
                *p = (*p).max(rss);
                drop(p);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + FLOOD_TIME;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (addr, tally) = (node.addr(), tally.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(20)))
                    .build()
                    .into();
                for i in 0..PER_CLIENT {
                    if Instant::now() >= deadline {
                        break;
                    }
                    // Every request names a user of its own, so that the login throttle
                    // (5 failures per user and address) never answers before the bound
                    // on password checks does: unknown users cost a full check too.
                    let (user, own) = (format!("flood-{c}-{i}"), format!("wrong-{c}-{i}"));
                    let answer = match i % 3 {
                        0 => agent
                            .post(format!(
                                "http://{addr}/nacos/v1/auth/login?username={user}&password={own}"
                            ))
                            .send_empty(),
                        1 => agent
                            .get(format!("http://{addr}/nacos/v1/ns/instance/list?serviceName=flood&username={user}&password={own}"))
                            .call(),
                        _ => agent
                            .post(format!(
                                "http://{addr}/nacos/v1/auth/login?username={user}&password=one-shared-wrong-password"
                            ))
                            .send_empty(),
                    };
                    let mut t = tally.lock().unwrap();
                    match answer {
                        Ok(mut r) => {
                            let body = r.body_mut().read_to_string().unwrap_or_default();
                            let status = r.status().as_u16();
                            *t.by_status.entry(status).or_default() += 1;
                            t.bodies.insert(status, body);
                        }
                        Err(_) => t.transport_errors += 1,
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("flood client");
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = *peak.lock().unwrap();
    let hwm = proc_kib(pid, "VmHWM");
    let after = proc_kib(pid, "VmRSS");
    let tally = tally.lock().unwrap();
    eprintln!(
        "login flood: RSS baseline {} MiB, peak {} MiB (VmHWM {} MiB), after {} MiB; answers {:?}, transport errors {}",
        baseline / 1024,
        peak / 1024,
        hwm / 1024,
        after / 1024,
        tally.by_status,
        tally.transport_errors
    );
    let served: usize = tally.by_status.values().sum();
    assert!(served > CLIENTS, "the flood hardly ran: {tally:?}");
    assert!(
        tally.by_status.keys().all(|s| *s == 403 || *s == 429),
        "wrong passwords are answered 403 or 429 only: {tally:?}"
    );
    assert!(
        tally.by_status.get(&429).is_some_and(|n| *n > 0),
        "password checks beyond the bound are refused with 429: {tally:?}"
    );
    assert_eq!(tally.transport_errors, 0, "{tally:?}");
    assert_eq!(
        tally.bodies[&429], "Too many password checks; retry shortly",
        "{tally:?}"
    );
    // Two argon2 checks hold 2 x 19 MiB; the allocator may keep a freed block per
    // thread that ran one (a few threads), and 200 open connections with their buffers
    // cost a few MiB more. Unbounded, the same flood grows the node by gigabytes.
    let grown_mib = hwm.max(peak).saturating_sub(baseline) / 1024;
    assert!(
        grown_mib < 200,
        "RSS grew by {grown_mib} MiB under the login flood"
    );
    // The node still serves a correct login, and the flood left it alive.
    eventually(Duration::from_secs(10), || {
        let r = node
            .try_request(
                "POST",
                &format!("/nacos/v1/auth/login?username=nacos&password={ADMIN_PASSWORD}"),
                &[],
                None,
            )
            .map_err(|e| e.to_string())?;
        (r.status == 200)
            .then_some(())
            .ok_or(format!("{} {}", r.status, r.body))
    });
}

/// Sends `method path` on a fresh connection; the status, or `None` when the server
/// closed the connection without an answer.
fn raw_method(node: &Node, method: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(node.addr()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        node.addr()
    );
    // A server that refuses a long request line may close before it is all written.
    let _ = stream.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let head = String::from_utf8_lossy(&answer[..answer.len().min(64)]).to_string();
    head.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
}

/// The series of a Prometheus text page: every sample's name and labels, values left
/// out.
fn series(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(series, _)| series)
                .to_string()
        })
        .collect()
}

#[test]
fn invented_http_methods_add_no_metric_labels() {
    let node = Node::start();
    // The paths anyone may call without credentials.
    let paths = [
        "/metrics",
        "/health/live",
        "/health/ready",
        "/nacos/v1/ns/operator/metrics",
        "/nacos/v1/auth/login",
    ];
    let metrics = || node.raw("GET", "/metrics", &[], None).expect(200).body;
    // Every label an invented method can reach exists after one round (`other`), and
    // `/metrics` has counted a GET of itself.
    for path in paths {
        raw_method(&node, "BREW", path);
    }
    metrics();
    let before = metrics();
    let long = "X".repeat(100_000);
    let mut answered = Vec::new();
    for method in ["FOO", "PROPFIND", "get", "M-SEARCH", "TRACE", long.as_str()] {
        for path in paths {
            let status = raw_method(&node, method, path);
            assert!(
                status.is_none_or(|s| s < 500),
                "{} {path}: {status:?}",
                &method[..method.len().min(16)]
            );
            answered.push(status);
        }
    }
    let after = metrics();
    let (was, is) = (series(&before), series(&after));
    eprintln!(
        "invented methods: answers {answered:?}; /metrics {} -> {} bytes",
        before.len(),
        after.len()
    );
    assert_eq!(
        is.difference(&was).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "invented methods added series to /metrics"
    );
    assert!(
        is.iter().any(|s| s.contains("method=\"other\"")),
        "invented methods are counted as `other`"
    );
    // Only counts and sums change: a few bytes, not a label's worth of 100 kB.
    assert!(
        after.len() < before.len() + 2_048,
        "/metrics grew from {} to {} bytes",
        before.len(),
        after.len()
    );
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The cluster's first signing key, read from a node's Raft log on disk: the
/// `Bootstrap` command is MessagePack with named fields, its key a 32-byte `bin`. Only
/// a test that plays the attacker who stole the old key needs it.
fn bootstrap_key(node: &Node) -> Vec<u8> {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
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
    let command = b"\xa9Bootstrap";
    let field = b"\xabsigning_key\xc4\x20";
    for path in paths {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Some(at) = bytes.windows(command.len()).position(|w| w == command) else {
            continue;
        };
        let rest = &bytes[at..];
        if let Some(k) = rest.windows(field.len()).take(64).position(|w| w == field) {
            let start = k + field.len();
            return rest[start..start + 32].to_vec();
        }
    }
    panic!(
        "no Bootstrap command with a signing key under {}",
        node.data_dir().display()
    );
}

/// An HS256 token for `sub` until `exp`, signed with `key` (with `openssl`, as an
/// attacker holding the key would).
fn forge(key: &[u8], sub: &str, exp: u64) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{sub}","exp":{exp}}}"#));
    let input = format!("{header}.{claims}");
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let mut child = Command::new("openssl")
        .args([
            "dgst",
            "-sha256",
            "-mac",
            "HMAC",
            "-macopt",
            &format!("hexkey:{hex}"),
            "-binary",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl is needed to forge tokens");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stdout.len() == 32, "{out:?}");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(out.stdout))
}

/// The `exp` of a token.
fn expiry(token: &str) -> u64 {
    let claims = token.split('.').nth(1).expect("a JWT");
    let json: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
    json["exp"].as_u64().expect("exp")
}

/// A list request with `token`: its status and body.
fn with_token(node: &Node, token: &str) -> (u16, String) {
    let r = node.raw(
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=rotation",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    (r.status, r.body)
}

/// Waits until every node answers `token` with `status` (and, for refusals, `body`).
fn everywhere(c: &Cluster, token: &str, status: u16, body: &str, what: &str) {
    everywhere_within(Duration::from_secs(10), c, token, status, body, what)
}

/// [`everywhere`], waiting up to `timeout` on each node.
fn everywhere_within(
    timeout: Duration,
    c: &Cluster,
    token: &str,
    status: u16,
    body: &str,
    what: &str,
) {
    for (i, node) in c.nodes.iter().enumerate() {
        eventually(timeout, || {
            let (s, b) = with_token(node, token);
            if s == status && (status == 200 || b == body) {
                Ok(())
            } else {
                Err(format!("node {}: {what}: {s} {b}", i + 1))
            }
        });
    }
}

#[test]
fn rotating_the_signing_key_keeps_old_tokens_for_their_lifetime_only() {
    const TTL: u64 = 30;
    // Snapshots every two entries: a restarted node gets both keys from its snapshot.
    let mut c = Cluster::start(
        3,
        &[
            "--token-ttl-secs",
            &TTL.to_string(),
            "--raft-snapshot-logs",
            "2",
        ],
    );
    let old_key = bootstrap_key(&c.nodes[0]);
    let before = c.nodes[0].login();
    // The forging works: the test holds the key the cluster signs with.
    let forged_early = forge(&old_key, "nacos", now_secs() + TTL);
    everywhere(&c, &forged_early, 200, "", "forged with the current key");
    everywhere(&c, &before, 200, "", "token from before the rotation");

    // Rotate through a follower, with the CLI.
    let via = c.follower();
    let out = Command::new(roster_bin())
        .args(["auth", "rotate-key", "--http", &c.nodes[via].addr()])
        .args(["--password", ADMIN_PASSWORD])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "roster auth rotate-key: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("rotated"), "{stdout}");
    let rotated_at = now_secs();

    // A token issued now is signed with the new key, and every node takes it.
    let after = eventually(Duration::from_secs(10), || {
        let t = c.nodes[(via + 1) % 3].login();
        if t == forge(&old_key, "nacos", expiry(&t)) {
            Err("a new token still signed with the old key".to_string())
        } else {
            Ok(t)
        }
    });
    everywhere(&c, &after, 200, "", "token from after the rotation");
    // The old key's tokens still work, within their lifetime only: one forged to expire
    // within a token lifetime of the rotation passes, one for a day is refused.
    everywhere(&c, &before, 200, "", "token from before the rotation");
    let within = forge(&old_key, "nacos", rotated_at + TTL - 5);
    everywhere(&c, &within, 200, "", "old key, expiring within the window");
    let long = forge(&old_key, "nacos", now_secs() + 86_400);
    everywhere(
        &c,
        &long,
        403,
        "token invalid!",
        "old key, expiring in a day",
    );

    // Only admins rotate.
    c.nodes[0]
        .call_form(
            "POST",
            "/nacos/v1/auth/users",
            "username=plain&password=plain-pass-1",
        )
        .expect(200);
    let plain = c.nodes[0]
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=plain&password=plain-pass-1",
            &[],
            None,
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    c.nodes[0]
        .raw(
            "POST",
            "/api/v1/auth/rotate-key",
            &[("authorization", &format!("Bearer {plain}"))],
            None,
        )
        .expect(403);
    c.nodes[0]
        .raw("POST", "/api/v1/auth/rotate-key", &[], None)
        .expect(401);

    // A restarted node restores both keys (from its snapshot and the log after it).
    c.nodes[2].restart();
    for token in [&before, &after, &within] {
        let (s, b) = with_token(&c.nodes[2], token);
        assert_eq!(s, 200, "after a restart: {b}");
    }

    // Past the lifetime, tokens of the old key are refused: the one issued before the
    // rotation has expired, and one forged now for a short while is invalid.
    everywhere_within(
        Duration::from_secs(2 * TTL),
        &c,
        &before,
        403,
        "token expired!",
        "token from before, expired",
    );
    eventually(Duration::from_secs(3 * TTL), || {
        let forged = forge(&old_key, "nacos", now_secs() + 2);
        let answers: Vec<_> = c.nodes.iter().map(|n| with_token(n, &forged)).collect();
        if answers
            .iter()
            .all(|(s, b)| *s == 403 && b == "token invalid!")
        {
            Ok(())
        } else {
            Err(format!("old key, forged after the window: {answers:?}"))
        }
    });
    let fresh = c.nodes[1].login();
    everywhere(&c, &fresh, 200, "", "a token of the current key");
    // The CLI's JSON output, and a second rotation that drops every older key at once.
    let out = Command::new(roster_bin())
        .args(["auth", "rotate-key", "--drop-previous", "--output", "json"])
        .args(["--http", &c.nodes[0].addr(), "--password", ADMIN_PASSWORD])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["keyId"].is_string() && v["previousValidUntil"].is_null(),
        "{v}"
    );
    everywhere(
        &c,
        &fresh,
        403,
        "token invalid!",
        "dropped with the previous key",
    );
    let newest = c.nodes[2].login();
    everywhere(&c, &newest, 200, "", "a token of the newest key");
}
