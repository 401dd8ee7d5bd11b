//! Authentication is on by default: every route but login, health and metrics needs a
//! token or username/password; no header opens a door.

use roster_tests::{Node, NodeOptions, ADMIN_PASSWORD};

#[test]
fn requests_without_valid_credentials_are_refused() {
    let node = Node::start();
    let path = "/nacos/v1/ns/instance/list?serviceName=x";
    let r = node.raw("GET", path, &[], None);
    assert_eq!(r.status, 401, "{}", r.body);
    // A peer's User-Agent grants nothing.
    let r = node.raw("GET", path, &[("user-agent", "Nacos-Server:v2.5.1")], None);
    assert_eq!(r.status, 401, "{}", r.body);
    // Unknown routes are checked before routing too.
    node.raw("GET", "/nacos/v1/ns/whatever", &[], None)
        .expect(401);
    node.raw("GET", "/secret", &[], None).expect(401);
    // Wrong password, as login and as parameters.
    let r = node.raw(
        "POST",
        "/nacos/v1/auth/login?username=nacos&password=nope",
        &[],
        None,
    );
    assert_eq!((r.status, r.body.as_str()), (403, "user not found!"));
    let r = node.raw(
        "GET",
        &format!("{path}&username=nacos&password=nope"),
        &[],
        None,
    );
    assert_eq!(r.status, 403);
    // Forged and garbage tokens.
    let r = node.raw("GET", &format!("{path}&accessToken=abc.def.ghi"), &[], None);
    assert_eq!((r.status, r.body.as_str()), (403, "token invalid!"));
    let r = node.raw("GET", path, &[("authorization", "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJuYWNvcyIsImV4cCI6OTk5OTk5OTk5OX0.AAAA")], None);
    assert_eq!(r.status, 403);
    // Nothing was written by refused writes.
    node.raw(
        "POST",
        "/nacos/v1/ns/instance?serviceName=x&ip=127.0.0.1&port=80",
        &[("user-agent", "Nacos-Server")],
        None,
    )
    .expect(401);
    let v = node.call("GET", path).expect(200).json();
    assert_eq!(v["hosts"].as_array().unwrap().len(), 0);
}

#[test]
fn tokens_and_passwords_are_accepted_everywhere() {
    let node = Node::start();
    let login = node
        .raw(
            "POST",
            &format!("/nacos/v1/auth/users/login?username=nacos&password={ADMIN_PASSWORD}"),
            &[],
            None,
        )
        .expect(200);
    let v = login.json();
    assert_eq!(v["tokenTtl"], 18000);
    assert_eq!(v["globalAdmin"], true);
    assert_eq!(v["username"], "nacos");
    let token = v["accessToken"].as_str().unwrap().to_string();
    assert_eq!(
        login.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
    let path = "/nacos/v1/ns/instance/list?serviceName=x";
    node.raw("GET", &format!("{path}&accessToken={token}"), &[], None)
        .expect(200);
    node.raw(
        "GET",
        path,
        &[("authorization", &format!("Bearer {token}"))],
        None,
    )
    .expect(200);
    node.raw(
        "GET",
        &format!("{path}&username=nacos&password={ADMIN_PASSWORD}"),
        &[],
        None,
    )
    .expect(200);
    // Login with a form body (Java client style).
    node.raw(
        "POST",
        "/nacos/v1/auth/login",
        &[],
        Some(&format!("username=nacos&password={ADMIN_PASSWORD}")),
    )
    .expect(200);
    // Ops endpoints are open.
    node.raw("GET", "/health/live", &[], None).expect(200);
    node.raw("GET", "/metrics", &[], None).expect(200);
}

#[test]
fn user_management_is_for_admins() {
    let node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/auth/users?username=alice&password=alice-pass-1",
    )
    .expect(200);
    let r = node.call(
        "POST",
        "/nacos/v1/auth/users?username=alice&password=alice-pass-1",
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let r = node.call("POST", "/nacos/v1/auth/users?username=bob&password=short");
    assert_eq!(r.status, 400);
    assert!(r.body.contains("'password'"), "{}", r.body);
    let r = node.call(
        "POST",
        "/nacos/v1/auth/users?username=bad%20name&password=long-enough-1",
    );
    assert!(
        r.body.contains("'username'") && r.status == 400,
        "{}",
        r.body
    );
    let users = node
        .call("GET", "/nacos/v1/auth/users?pageNo=1&pageSize=10")
        .expect(200)
        .json();
    assert_eq!(users["totalCount"], 2);
    assert!(
        !users.to_string().contains("argon2"),
        "hashes are never shown: {users}"
    );

    // alice, granted every namespace read-write, can use the registry but not manage
    // users or namespaces.
    node.call("POST", "/nacos/v1/auth/roles?role=team&username=alice")
        .expect(200);
    node.call(
        "POST",
        "/nacos/v1/auth/permissions?role=team&resource=%3A*%3A*&action=rw",
    )
    .expect(200);
    let alice = "username=alice&password=alice-pass-1";
    node.raw(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName=a&ip=127.8.0.1&port=80&{alice}"),
        &[],
        None,
    )
    .expect(200);
    node.raw("GET", &format!("/nacos/v1/auth/users?{alice}"), &[], None)
        .expect(403);
    node.raw(
        "POST",
        &format!("/nacos/v1/auth/users?username=eve&password=eve-pass-123&{alice}"),
        &[],
        None,
    )
    .expect(403);
    node.raw(
        "POST",
        &format!("/nacos/v1/console/namespaces?customNamespaceId=x&namespaceName=x&{alice}"),
        &[],
        None,
    )
    .expect(403);
    // ... but may change her own password, giving the old one, after which the old one
    // stops working.
    node.raw(
        "PUT",
        &format!("/nacos/v1/auth/users?username=alice&newPassword=alice-pass-2&oldPassword=alice-pass-1&{alice}"),
        &[],
        None,
    )
    .expect(200);
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName=a&{alice}"),
        &[],
        None,
    )
    .expect(403);
    node.raw(
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=a&username=alice&password=alice-pass-2",
        &[],
        None,
    )
    .expect(200);
    // Admins cannot be deleted; deleting alice revokes her token.
    let token = node
        .raw(
            "POST",
            "/nacos/v1/auth/login?username=alice&password=alice-pass-2",
            &[],
            None,
        )
        .expect(200)
        .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string();
    node.call("DELETE", "/nacos/v1/auth/users?username=nacos")
        .expect(400);
    node.call("DELETE", "/nacos/v1/auth/users?username=alice")
        .expect(200);
    node.call("DELETE", "/nacos/v1/auth/users?username=alice")
        .expect(404);
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName=a&accessToken={token}"),
        &[],
        None,
    )
    .expect(403);
}

#[test]
fn generated_admin_password_is_written_once_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let mut node = Node::start_with(NodeOptions {
        admin_password: None,
        ..Default::default()
    });
    let file = node.data_dir().join("initial-admin-password");
    let password = std::fs::read_to_string(&file)
        .expect("password file")
        .trim()
        .to_string();
    assert!(password.len() >= 20, "a strong password: {password:?}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The log says where the password is, never the password itself.
    assert!(
        !node.log().contains(&password),
        "the password is not logged"
    );
    assert!(
        node.log().contains("initial-admin-password"),
        "the log names the file"
    );
    let login = format!("/nacos/v1/auth/login?username=nacos&password={password}");
    node.raw("POST", &login, &[], None).expect(200);
    // A restart neither regenerates nor logs it.
    node.restart();
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), password);
    assert!(!node.log().contains(&password));
    node.raw("POST", &login, &[], None).expect(200);
}

#[test]
fn no_auth_opens_everything_and_says_so() {
    let node = Node::start_with(NodeOptions {
        args: vec!["--no-auth".into()],
        ..Default::default()
    });
    node.raw(
        "POST",
        "/nacos/v1/ns/instance?serviceName=open&ip=127.9.0.1&port=80",
        &[],
        None,
    )
    .expect(200);
    node.raw(
        "GET",
        "/nacos/v1/ns/instance/list?serviceName=open",
        &[],
        None,
    )
    .expect(200);
    assert!(
        node.log().contains("AUTHENTICATION IS OFF"),
        "a loud warning"
    );
}
