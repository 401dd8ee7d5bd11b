//! The layers HTTP answers pass (issue 24, item 9): `nosniff` on every answer, the hot
//! routes' and the guard's refusals' too; no framing and no referrer on console files
//! and routed API answers; the page's Content-Security-Policy on HTML only; console
//! assets gzipped when asked; request tracing of routed requests at debug level only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use roster_tests::{eventually, Node, NodeOptions, Resp};

/// The header every answer carries.
const NOSNIFF: (&str, &str) = ("x-content-type-options", "nosniff");
/// The headers of console files and routed API answers.
const FRAMED: [(&str, &str); 3] = [
    NOSNIFF,
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
];

#[track_caller]
fn assert_framed(what: &str, resp: &Resp) {
    assert_headers(what, resp, &FRAMED);
}

/// The hot routes and the guard's refusals: `nosniff` (the other two would cost every
/// list request; see `api::Framed`).
#[track_caller]
fn assert_nosniff(what: &str, resp: &Resp) {
    assert_headers(what, resp, &[NOSNIFF]);
}

#[track_caller]
fn assert_headers(what: &str, resp: &Resp, expected: &[(&str, &str)]) {
    for &(name, value) in expected {
        assert_eq!(
            resp.header(name),
            Some(value),
            "{what}: {name} ({} {:?})",
            resp.status,
            resp.headers
        );
    }
}

#[test]
fn answers_carry_the_security_headers() {
    let node = Node::start();
    // The console's page, with its policy: its own scripts only, the component
    // library's inline styles allowed, never framed.
    let page = node.raw("GET", "/", &[], None).expect(200);
    assert_framed("console page", &page);
    let csp = page
        .header("content-security-policy")
        .expect("the page has a policy");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("style-src 'self' 'unsafe-inline'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");

    // A script: the headers, no policy (HTML only).
    let js = script_path(&page.body);
    let script = node.raw("GET", &js, &[], None).expect(200);
    assert_framed("console script", &script);
    assert_eq!(script.header("content-security-policy"), None);

    // A routed API answer, a hot route's and the guard's refusal.
    let routed = node
        .call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=10")
        .expect(200);
    assert_framed("routed API", &routed);
    assert_eq!(routed.header("content-security-policy"), None);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=hdr&ip=127.0.0.1&port=80",
    )
    .expect(200);
    let hot = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=hdr")
        .expect(200);
    assert_eq!(hot.json()["hosts"].as_array().map(Vec::len), Some(1));
    assert_nosniff("hot list route", &hot);
    let refused = node
        .raw(
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=hdr",
            &[],
            None,
        )
        .expect(401);
    assert_nosniff("guard refusal", &refused);
    let unknown = node.call("GET", "/nacos/v1/no/such/api");
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_framed("unknown route", &unknown);
}

#[test]
fn console_assets_are_gzipped_when_asked() {
    let node = Node::start();
    let page = node.raw("GET", "/", &[], None).expect(200);
    let js = script_path(&page.body);
    let (head, body) = raw_get(&node, &js, "gzip, deflate");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
    assert!(head.contains("vary: accept-encoding\r\n"), "{head}");
    assert!(
        head.contains("x-content-type-options: nosniff\r\n"),
        "{head}"
    );
    assert_eq!(&body[..2], [0x1f, 0x8b], "a gzip stream");
    // Served again from the bytes compressed once: the same bytes.
    let (_, again) = raw_get(&node, &js, "gzip");
    assert_eq!(body, again);
    // Not asked, or refused: the plain file.
    let (head, body) = raw_get(&node, &js, "gzip;q=0, identity");
    assert!(!head.contains("content-encoding"), "{head}");
    assert_ne!(&body[..2], [0x1f, 0x8b]);
}

#[test]
fn routed_requests_are_traced_at_debug_level_only() {
    let path = "/nacos/v1/ns/service/list";
    let query = "?pageNo=1&pageSize=10";
    // The harness logs roster at debug through RUST_LOG; an empty one counts as unset,
    // so `--log-level` decides (its default: info).
    let with_level = |level: &str| {
        Node::start_with(NodeOptions {
            args: vec!["--log-level".into(), level.into()],
            env: vec![("RUST_LOG".into(), String::new())],
            ..NodeOptions::default()
        })
    };
    let quiet = with_level("info");
    let traced = with_level("roster=debug,info");
    for node in [&quiet, &traced] {
        node.call("GET", &format!("{path}{query}")).expect(200);
    }
    // The span's fields end with the path: no query, so credentials passed as
    // parameters stay out of the log.
    let line = eventually(Duration::from_secs(10), || {
        traced
            .log()
            .lines()
            .find(|l| l.contains(&format!("method=GET path={path}}}")) && l.contains("answered"))
            .map(str::to_string)
            .ok_or_else(|| "no trace of the request yet".to_string())
    });
    assert!(line.contains("status=200"), "{line}");
    assert!(line.contains("latency_us="), "{line}");
    // At the default level, nothing per request.
    assert!(
        !quiet.log().contains("answered"),
        "traced at info:\n{}",
        quiet.log()
    );
}

/// The first script the page loads.
fn script_path(page: &str) -> String {
    page.match_indices("/assets/")
        .find_map(|(i, _)| {
            let end = i + page[i..].find('"')?;
            page[i..end]
                .ends_with(".js")
                .then(|| page[i..end].to_string())
        })
        .unwrap_or_else(|| panic!("the page loads a script: {page}"))
}

/// A GET with `accept-encoding`, by hand (ureq would decode gzip itself): the head,
/// lower-cased, and the body's bytes.
fn raw_get(node: &Node, path: &str, encoding: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: {}\r\naccept-encoding: {encoding}\r\nconnection: close\r\n\r\n",
        node.addr()
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line.to_lowercase());
    }
    let mut body = Vec::new();
    reader.read_to_end(&mut body).unwrap();
    (head, body)
}
