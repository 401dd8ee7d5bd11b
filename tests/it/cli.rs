//! The `roster` client subcommands as a person meets them: errors said once and in plain
//! words, a closed stdout (`roster ... | head -1`) ended quietly, `--help` that names
//! what a first start needs, `sync list` in aligned columns, `sync apply`.

use std::process::{Command, Output, Stdio};

use roster_tests::{roster_bin, unique, Node, ADMIN_PASSWORD};

/// Runs `roster ARGS --http NODE` with `password` (none: no password at all).
fn roster(node: &Node, password: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(roster_bin());
    cmd.args(args)
        .args(["--http", &node.addr()])
        .env_remove("ROSTER_PASSWORD")
        .env_remove("ROSTER_PASSWORD_FILE");
    if let Some(p) = password {
        cmd.env("ROSTER_PASSWORD", p);
    }
    cmd.output().expect("run roster")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `roster ARGS` as the admin; stdout, panics on failure.
fn roster_ok(node: &Node, args: &[&str]) -> String {
    let out = roster(node, Some(ADMIN_PASSWORD), args);
    assert!(
        out.status.success(),
        "roster {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn cli_says_an_error_once_in_plain_words_and_ends_quietly_on_a_closed_pipe() {
    let node = Node::start();

    // A wrong password: "wrong username or password", once, and no log line about it.
    let out = roster(&node, Some("not-the-password"), &["cluster", "status"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("wrong username or password").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("user not found"), "{err}");
    assert!(!err.contains("roster stopped"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // stdout closed before the answer is printed (`| head -0`): no panic, success.
    let mut child = Command::new(roster_bin())
        .args(["cluster", "status", "--http", &node.addr()])
        .env("ROSTER_PASSWORD", ADMIN_PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run roster");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{:?}: {err}", out.status);

    // What a first start needs is in --help.
    let help = Command::new(roster_bin())
        .arg("--help")
        .output()
        .expect("run roster --help");
    let help = text(&help.stdout);
    assert!(help.contains("ROSTER_ADMIN_PASSWORD"), "{help}");
    assert!(help.contains("initial-admin-password"), "{help}");
    // `sync add --help` keeps its own options apart from the connection's.
    let help = Command::new(roster_bin())
        .args(["sync", "add", "--help"])
        .output()
        .expect("run roster sync add --help");
    let help = text(&help.stdout);
    let heading = help.find("Connection options:").expect(&help);
    let own = help.find("--dry-run").expect(&help);
    let http = help.find("--http").expect(&help);
    assert!(own < heading && heading < http, "{help}");
}

#[test]
fn cli_lists_tasks_aligned_with_their_targets_and_applies_a_dry_run() {
    let node = Node::start();
    // Sources nobody serves: the tasks exist, report errors, import nothing.
    let short = "a";
    let long = unique("a-much-longer-task-name-than-the-column");
    for name in [short, long.as_str()] {
        roster_ok(
            &node,
            &[
                "sync",
                "add",
                "--name",
                name,
                "--from",
                "etcd://127.0.0.1:1",
                "--dry-run",
            ],
        );
    }
    let list = roster_ok(&node, &["sync", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    // Every column starts where its header does.
    for column in ["STATE", "NAMESPACE", "GROUP", "SOURCE"] {
        let at = lines[0].find(column).expect(column);
        for line in &lines[1..] {
            assert_ne!(line.as_bytes()[at], b' ', "{column}: {list}");
            assert_eq!(&line[at - 2..at], "  ", "{column} starts at {at}: {list}");
        }
    }
    for line in &lines[1..] {
        assert!(line.contains("  public  "), "{list}");
        assert!(line.contains("  DEFAULT_GROUP  "), "{list}");
        assert!(line.contains("(dry run)"), "{list}");
    }

    // Apply: no longer a dry run; a second apply is refused.
    let out = roster_ok(&node, &["sync", "apply", short]);
    assert!(out.contains("state:      "), "{out}");
    assert!(!out.contains("dry run"), "{out}");
    assert!(
        out.contains("target:     namespace public group DEFAULT_GROUP services all"),
        "{out}"
    );
    let out = roster(&node, Some(ADMIN_PASSWORD), &["sync", "apply", short]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("409") && err.contains("not a dry run"),
        "{err}"
    );
}

#[test]
fn cli_creates_lists_and_revokes_api_tokens() {
    let node = Node::start();
    let user = unique("scraper");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password=scraper-pass-1"),
    )
    .expect(200);
    let created = roster_ok(
        &node,
        &[
            "auth",
            "token-create",
            "--user",
            &user,
            "--description",
            "host 7",
        ],
    );
    let mut lines = created.lines();
    let said = lines.next().unwrap_or_default();
    assert!(
        said.contains(&user) && said.contains("shown this once"),
        "{created}"
    );
    let token = lines.next().unwrap_or_default().trim().to_string();
    assert!(token.starts_with("roster_"), "{created}");
    let id = token["roster_".len()..][..16].to_string();
    // The token works as its user.
    let r = node.raw(
        "GET",
        "/nacos/v1/ns/catalog/services?namespaceId=public",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_ne!(r.status, 401, "{}", r.body);
    // Listed in columns, without the secret.
    let listed = roster_ok(&node, &["auth", "tokens", "--user", &user]);
    let rows: Vec<&str> = listed.lines().collect();
    assert_eq!(rows.len(), 2, "{listed}");
    assert!(
        rows[0].starts_with("ID") && rows[0].contains("USER"),
        "{listed}"
    );
    assert!(
        rows[1].starts_with(&id) && rows[1].contains("host 7"),
        "{listed}"
    );
    assert!(!listed.contains(&token), "{listed}");
    let revoked = roster_ok(&node, &["auth", "token-revoke", &id]);
    assert!(revoked.contains(&id), "{revoked}");
    let r = node.raw(
        "GET",
        "/nacos/v1/ns/catalog/services?namespaceId=public",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    assert!([401, 403].contains(&r.status), "{} {}", r.status, r.body);
    // Revoking it again fails, said once.
    let again = roster(&node, Some(ADMIN_PASSWORD), &["auth", "token-revoke", &id]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("not found"),
        "{}",
        text(&again.stderr)
    );
}
