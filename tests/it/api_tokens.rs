//! Long-lived API tokens (issue 41, item 2's credentials): an admin creates one for a
//! user (`POST /api/v1/tokens`), it is shown once, works on every node and every way
//! clients carry a token (bearer, `accessToken` header and parameter, Consul's
//! `X-Consul-Token` and `?token=`, gRPC's `accessToken`) with its user's permissions,
//! survives a restart, and stops on every node within a second of its revocation, or
//! with its user.

use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, unique, Cluster, Node, Resp};
use serde_json::json;

use crate::authz::{grant, PASSWORD};
use crate::grpc::{decode, payload, RawClient};

/// A JSON request as the admin.
fn admin_json(node: &Node, method: &str, path: &str, body: &serde_json::Value) -> Resp {
    let auth = format!("Bearer {}", node.token());
    node.raw(
        method,
        path,
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
        ],
        Some(&body.to_string()),
    )
}

/// Whether a status refuses the credentials (Nacos answers a bad token 403).
fn refused(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// A read of the public service `svc` with `headers` and `query` carrying the token.
fn read(node: &Node, svc: &str, headers: &[(&str, &str)], query: &str) -> u16 {
    node.raw(
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={svc}{query}"),
        headers,
        None,
    )
    .status
}

#[test]
fn api_tokens_act_as_their_user_everywhere_until_revoked() {
    let mut c = Cluster::start(3, &[]);
    let (user, svc) = (unique("bot"), unique("scraped"));
    c.nodes[0]
        .call_form(
            "POST",
            "/nacos/v1/auth/users",
            &format!("username={user}&password={PASSWORD}"),
        )
        .expect(200);
    grant(&c.nodes[0], &user, &format!("{user}-r"), "public:*:*", "r");

    // Bad input first: nothing is created.
    let tokens = "/api/v1/tokens";
    let no_user = admin_json(&c.nodes[0], "POST", tokens, &json!({"description": "x"}));
    assert_eq!(no_user.status, 400, "{}", no_user.body);
    assert!(no_user.body.contains("user"), "{}", no_user.body);
    let blank = admin_json(&c.nodes[0], "POST", tokens, &json!({"user": " "}));
    assert_eq!(blank.status, 400, "{}", blank.body);
    assert!(blank.body.contains("'user'"), "{}", blank.body);
    let long = admin_json(
        &c.nodes[0],
        "POST",
        tokens,
        &json!({"user": user, "description": "d".repeat(300)}),
    );
    assert_eq!(long.status, 400, "{}", long.body);
    assert!(long.body.contains("description"), "{}", long.body);
    admin_json(
        &c.nodes[0],
        "POST",
        tokens,
        &json!({"user": "nobody-at-all"}),
    )
    .expect(404);
    let listed = c.nodes[0].call("GET", tokens).expect(200).json();
    assert_eq!(listed["tokens"], json!([]), "{listed}");
    c.nodes[0]
        .call("DELETE", &format!("{tokens}?id=0123456789abcdef"))
        .expect(404);
    c.nodes[0].call("DELETE", tokens).expect(400);

    // Created once, through node 1.
    let created = admin_json(
        &c.nodes[0],
        "POST",
        tokens,
        &json!({"user": user, "description": "prometheus on host 7"}),
    )
    .expect(201)
    .json();
    let (id, token) = (
        created["id"].as_str().unwrap().to_string(),
        created["token"].as_str().unwrap().to_string(),
    );
    assert!(token.starts_with("roster_"), "{created}");
    // Listed without its secret, on another node.
    let listed = c.nodes[1].call("GET", tokens).expect(200).json();
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 1, "{listed}");
    let shown = &listed["tokens"][0];
    assert_eq!(
        (&shown["id"], &shown["user"], &shown["description"]),
        (&json!(id), &json!(user), &json!("prometheus on host 7"))
    );
    assert!(!listed.to_string().contains(&token[20..]), "{listed}");

    // Every way a client carries it, on every node: the user's reads pass, its writes
    // are refused (it has `r` only), and it cannot manage tokens.
    let bearer = format!("Bearer {token}");
    for node in &c.nodes {
        assert_eq!(read(node, &svc, &[("authorization", &bearer)], ""), 200);
        assert_eq!(read(node, &svc, &[("accessToken", &token)], ""), 200);
        assert_eq!(read(node, &svc, &[("x-consul-token", &token)], ""), 200);
        assert_eq!(
            read(node, &svc, &[], &format!("&accessToken={}", enc(&token))),
            200
        );
        assert_eq!(
            read(node, &svc, &[], &format!("&token={}", enc(&token))),
            200
        );
        let write = node.raw(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName={svc}&ip=127.43.0.1&port=80"),
            &[("authorization", &bearer)],
            None,
        );
        assert_eq!(write.status, 403, "{}", write.body);
        let manage = node.raw("GET", tokens, &[("authorization", &bearer)], None);
        assert_eq!(manage.status, 403, "{}", manage.body);
    }
    // A forged secret for the same id is refused.
    let forged = format!("roster_{id}_{}", "0".repeat(64));
    let forged = read(
        &c.nodes[2],
        &svc,
        &[("authorization", &format!("Bearer {forged}"))],
        "",
    );
    assert!(refused(forged), "{forged}");
    // gRPC: the token in the request's headers, as SDKs send theirs.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let grpc_addr = format!("127.0.0.1:{}", c.nodes[2].http_port + 1000);
    let answered = rt.block_on(async {
        let mut client = RawClient::try_set_up(&grpc_addr, Duration::from_secs(10))
            .await
            .expect("grpc");
        let body = json!({"namespace":"public","serviceName":svc,"groupName":"DEFAULT_GROUP",
                          "cluster":"","healthyOnly":false,"udpPort":0});
        decode(
            &client
                .try_unary(payload("ServiceQueryRequest", &body, Some(&token)))
                .await
                .expect("query"),
        )
    });
    // gRPC refusals keep the reply type: the result code tells.
    assert_eq!(answered.0, "QueryServiceResponse", "{answered:?}");
    assert_eq!(answered.1["resultCode"], 200, "{answered:?}");
    assert_eq!(answered.1["errorCode"], 0, "{answered:?}");

    // It survives a restart of the node asked.
    assert!(c.nodes[0].terminate().success());
    c.nodes[0].start_again();
    c.nodes[0].wait_ready();
    assert_eq!(
        read(&c.nodes[0], &svc, &[("authorization", &bearer)], ""),
        200
    );

    // Revoked through node 2: refused by every node within a second.
    c.nodes[1]
        .call("DELETE", &format!("{tokens}?id={id}"))
        .expect(200);
    let revoked = Instant::now();
    for node in &c.nodes {
        loop {
            if refused(read(node, &svc, &[("authorization", &bearer)], "")) {
                break;
            }
            assert!(
                revoked.elapsed() < Duration::from_secs(1),
                "node {} still takes the revoked token",
                node.addr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    eprintln!("revoked everywhere within {:?}", revoked.elapsed());
    c.nodes[1]
        .call("DELETE", &format!("{tokens}?id={id}"))
        .expect(404);

    // Another one ends with its user.
    let second = admin_json(&c.nodes[2], "POST", tokens, &json!({"user": user}))
        .expect(201)
        .json();
    let second = format!("Bearer {}", second["token"].as_str().unwrap());
    assert_eq!(
        read(&c.nodes[2], &svc, &[("authorization", &second)], ""),
        200
    );
    c.nodes[0]
        .call("DELETE", &format!("/nacos/v1/auth/users?username={user}"))
        .expect(200);
    for node in &c.nodes {
        eventually(Duration::from_secs(5), || {
            let status = read(node, &svc, &[("authorization", &second)], "");
            refused(status)
                .then_some(())
                .ok_or(format!("{} answers {status}", node.addr()))
        });
    }
    let listed = c.nodes[0].call("GET", tokens).expect(200).json();
    assert_eq!(listed["tokens"], json!([]), "{listed}");
}
