//! Real Nacos SDKs, unmodified, against a real node with auth on: the Python
//! `nacos-sdk-python==0.1.16` (HTTP v1), `nacos-sdk-python==3.2.0` (gRPC, asyncio) and the
//! npm `nacos-naming` client (HTTP v1 with UDP push). The Rust `nacos-sdk` is driven
//! in-process by `grpc.rs`. The scripts live in `tests/clients/`; `scripts/test` installs their
//! packages. A missing interpreter or package fails the test: it never skips.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use roster_tests::{eventually, workspace_root, Node, NodeOptions, ADMIN_PASSWORD};

fn clients_dir() -> PathBuf {
    workspace_root().join("tests/clients")
}

fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run the {what} client ({e}); run scripts/test to install it")
    });
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} client failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("{what} client:\n{stdout}");
    stdout
}

#[test]
fn python_sdk_registers_lists_subscribes_modifies_and_beats() {
    let node = Node::start();
    let python = clients_dir().join("python/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    let mut cmd = Command::new(&python);
    cmd.arg(clients_dir().join("python/sdk_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "py-orders", "--hold-seconds", "20"]);
    let out = run(cmd, "python");
    assert!(out.contains("\"step\""), "the script reports its steps");
    // The server agrees: both instances came and went, beats arrived.
    let beats = node.metric("roster_beats_total").unwrap_or(0.0);
    assert!(
        beats >= 3.0,
        "the SDK's own beats reached the server ({beats})"
    );
    let v = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=py-orders")
        .expect(200)
        .json();
    assert_eq!(
        v["hosts"].as_array().unwrap().len(),
        0,
        "removed at the end: {v}"
    );
}

#[test]
fn python_3_sdk_over_grpc_registers_batches_subscribes_and_lists() {
    let node = Node::start();
    let python = clients_dir().join("python3/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    let mut cmd = Command::new(&python);
    cmd.arg(clients_dir().join("python3/grpc_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "py3-orders"]);
    let out = run(cmd, "python3 gRPC");
    for step in [
        "connect",
        "auth_required",
        "push_added",
        "batch_register",
        "list_services",
        "shutdown",
    ] {
        assert!(
            out.contains(&format!("\"step\": \"{step}\""))
                || out.contains(&format!("\"step\":\"{step}\"")),
            "the script ran step {step}:\n{out}"
        );
    }
    // The server saw it over gRPC, and the connection's instances went with it.
    let requests = node
        .metric("roster_grpc_requests_total{kind=\"InstanceRequest\"}")
        .unwrap_or(0.0);
    assert!(
        requests >= 1.0,
        "InstanceRequests reached the server ({requests})"
    );
    // The script removes its HTTP instance; the lingering one left with the connection.
    for name in ["py3-orders", "py3-orders-batch", "py3-orders-linger"] {
        let v = node
            .call(
                "GET",
                &format!("/nacos/v1/ns/instance/list?serviceName={name}"),
            )
            .expect(200)
            .json();
        assert_eq!(v["hosts"], roster_tests::json!([]), "{name} emptied: {v}");
    }
}

/// A CA, and a certificate for 127.0.0.1 signed by it, written as PEM files in `dir`:
/// (ca, cert, key).
fn tls_files(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "roster test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

#[test]
fn python_3_sdk_speaks_grpc_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(dir.path());
    let node = Node::start_with(NodeOptions {
        args: vec![
            "--grpc-tls-cert".into(),
            cert.display().to_string(),
            "--grpc-tls-key".into(),
            key.display().to_string(),
        ],
        ..Default::default()
    });
    assert!(
        node.log().contains("tls=true"),
        "the node says it serves TLS"
    );
    let python = clients_dir().join("python3/.venv/bin/python");
    let mut cmd = Command::new(&python);
    cmd.arg(clients_dir().join("python3/grpc_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "py3-tls"])
        .arg("--tls-ca")
        .arg(&ca)
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key);
    let out = run(cmd, "python3 gRPC over TLS");
    assert!(
        out.contains("push_added"),
        "the flow ran to the push:\n{out}"
    );

    // The same client without TLS cannot talk to the TLS port.
    let mut cmd = Command::new(&python);
    cmd.arg(clients_dir().join("python3/grpc_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "py3-plain", "--watchdog-seconds", "40"]);
    let plain = cmd.output().unwrap();
    assert!(
        !plain.status.success(),
        "a plaintext client must fail against a TLS port:\n{}",
        String::from_utf8_lossy(&plain.stdout)
    );
    let v = node
        .call("GET", "/nacos/v1/ns/instance/list?serviceName=py3-plain")
        .expect(200)
        .json();
    assert_eq!(
        v["hosts"],
        roster_tests::json!([]),
        "nothing registered in plain text: {v}"
    );

    // With --grpc-tls-optional the same port takes both, for moving clients one by one.
    let mixed = Node::start_with(NodeOptions {
        args: vec![
            "--grpc-tls-cert".into(),
            cert.display().to_string(),
            "--grpc-tls-key".into(),
            key.display().to_string(),
            "--grpc-tls-optional".into(),
        ],
        ..Default::default()
    });
    let mut cmd = Command::new(&python);
    cmd.arg(clients_dir().join("python3/grpc_flow.py"))
        .args(["--server", &mixed.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "py3-mixed"]);
    let out = run(cmd, "python3 plaintext gRPC on an optional-TLS port");
    assert!(
        out.contains("push_added"),
        "the flow ran to the push:\n{out}"
    );
}

#[test]
fn a_node_refuses_to_start_with_a_bad_grpc_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let out = Command::new(roster_tests::roster_bin())
        .args([
            "--http",
            "127.0.0.1:0",
            "--peer",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--grpc-tls-cert")
        .arg(&junk)
        .arg("--grpc-tls-key")
        .arg(&junk)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it must not start: {stderr}");
    assert!(
        stderr.contains("--grpc-tls-cert"),
        "the flag is named: {stderr}"
    );
    // One of the pair alone is a usage error.
    let out = Command::new(roster_tests::roster_bin())
        .arg("--grpc-tls-cert")
        .arg(&junk)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--grpc-tls-key"),
        "the missing flag is named: {stderr}"
    );
}

#[test]
fn npm_client_gets_changes_by_udp_push() {
    let node = Node::start();
    let script = clients_dir().join("node/sdk_flow.js");
    assert!(
        clients_dir()
            .join("node/node_modules/nacos-naming")
            .exists(),
        "nacos-naming not installed: run scripts/test"
    );
    let mut cmd = Command::new("node");
    cmd.arg(&script)
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--service", "node-orders"]);
    let out = run(cmd, "node");
    assert!(out.contains("\"step\""), "the script reports its steps");
    // The change reached it by UDP and the client acked it.
    eventually(Duration::from_secs(5), || {
        let acked = node
            .metric("roster_udp_pushes_total{outcome=\"acked\"}")
            .unwrap_or(0.0);
        if acked >= 1.0 {
            Ok(())
        } else {
            Err(format!("acked pushes: {acked}"))
        }
    });
}
