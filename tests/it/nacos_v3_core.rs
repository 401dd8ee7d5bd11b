//! Nacos 3's v3 API, core and auth areas, against a real node with auth on: the state
//! probes (public), the login at the v3 path and its token as an `accessToken` header,
//! namespaces, the cluster's members, users, roles and permissions, and the view of
//! naming clients and gRPC connections after a gRPC client registers and subscribes
//! (and is asked to move). Bad input is a 400 naming the field.

use std::time::Duration;

use roster_tests::{json, unique, Node, Resp, Value, ADMIN_PASSWORD};

use crate::grpc::{decode, payload, RawClient};

/// `{code: 0, message: "success", data}`: the data.
#[track_caller]
fn data(r: Resp) -> Value {
    let body = r.expect(200).json();
    assert_eq!(body["code"], 0, "{body}");
    body["data"].clone()
}

/// A 400 whose message names `field`.
#[track_caller]
fn names_field(r: Resp, field: &str) {
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains(&format!("'{field}'")), "{}", r.body);
}

/// Logs in at the v3 path; the bare v1 answer's token.
fn v3_login(node: &Node, user: &str, password: &str) -> String {
    let r = node
        .raw(
            "POST",
            &format!("/nacos/v3/auth/user/login?username={user}"),
            &[],
            Some(&format!("password={password}")),
        )
        .expect(200);
    let body = r.json();
    assert_eq!(body["username"], user, "{body}");
    assert!(body["tokenTtl"].as_u64().is_some_and(|t| t > 0), "{body}");
    body["accessToken"].as_str().expect("token").to_string()
}

#[test]
fn probes_are_public_and_the_v3_login_gives_a_token_for_the_access_token_header() {
    let node = Node::start();
    for path in [
        "/nacos/v3/admin/core/state/liveness",
        "/nacos/v3/admin/core/state/readiness",
        "/nacos/v3/admin/core/ops/readiness",
    ] {
        assert_eq!(data(node.raw("GET", path, &[], None)), "ok", "{path}");
    }
    let state = data(node.raw("GET", "/nacos/v3/admin/core/state", &[], None));
    assert_eq!(state["auth_enabled"], "true", "{state}");
    assert_eq!(state["startup_mode"], "standalone", "{state}");
    assert_eq!(state["auth_system_type"], "nacos", "{state}");
    assert!(state["version"].as_str().is_some_and(|v| !v.is_empty()));

    // The login answers v1's bare JSON, as Nacos 3 does (the Java client reads it so).
    let r = node.raw(
        "POST",
        "/nacos/v3/auth/user/login?username=nacos",
        &[],
        Some(&format!("password={ADMIN_PASSWORD}")),
    );
    let body = r.clone().expect(200).json();
    assert_eq!(body["globalAdmin"], true, "{body}");
    assert!(r
        .header("authorization")
        .is_some_and(|h| h.starts_with("Bearer ")));
    let token = v3_login(&node, "nacos", ADMIN_PASSWORD);
    let wrong = node.raw(
        "POST",
        "/nacos/v3/auth/user/login?username=nacos",
        &[],
        Some("password=nope"),
    );
    assert_eq!(wrong.status, 403, "{}", wrong.body);
    names_field(
        node.raw("POST", "/nacos/v3/auth/user/login", &[], Some("password=x")),
        "username",
    );

    // The token as Nacos 3's maintainer client sends it.
    let path = "/nacos/v3/admin/core/namespace/list";
    let listed = data(node.raw("GET", path, &[("accessToken", &token)], None));
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["namespace"] == "public"));
    node.raw("GET", path, &[], None).expect(401);
}

#[test]
fn namespaces_are_created_read_changed_and_deleted() {
    let node = Node::start();
    let id = unique("v3ns");
    let base = "/nacos/v3/admin/core/namespace";
    let created = node.call_form(
        "POST",
        base,
        &format!("namespaceId={id}&namespaceName=Dev&namespaceDesc=for%20dev"),
    );
    assert_eq!(data(created), true);
    assert_eq!(
        data(node.call("GET", &format!("{base}/check?namespaceId={id}"))),
        1
    );
    assert_eq!(
        data(node.call("GET", &format!("{base}/check?namespaceId={id}-not"))),
        0
    );
    let one = data(node.call("GET", &format!("{base}?namespaceId={id}")));
    assert_eq!(one["namespace"], id.as_str());
    assert_eq!(one["namespaceShowName"], "Dev");
    assert_eq!(one["namespaceDesc"], "for dev");
    assert_eq!(one["type"], 2);
    assert_eq!(one["configCount"], 0);

    // The same id again is refused; an absent id gets a generated one.
    let again = node.call_form("POST", base, &format!("namespaceId={id}&namespaceName=Dev"));
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(
        data(node.call_form("POST", base, "namespaceName=Generated")),
        true
    );
    let all = data(node.call("GET", &format!("{base}/list")));
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["namespaceShowName"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Dev") && names.contains(&"Generated"),
        "{all}"
    );
    assert!(all
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["namespace"] == "public" && n["type"] == 0));

    // Bad input names the field and changes nothing.
    names_field(
        node.call_form("POST", base, &format!("namespaceId={id}x")),
        "namespaceName",
    );
    names_field(
        node.call_form("POST", base, "namespaceId=bad%20id&namespaceName=x"),
        "namespaceId",
    );
    names_field(
        node.call_form(
            "PUT",
            base,
            &format!("namespaceId={id}&namespaceName=a%23b"),
        ),
        "namespaceName",
    );
    names_field(node.call("GET", base), "namespaceId");
    assert_eq!(
        data(node.call("GET", &format!("{base}/check?namespaceId={id}x"))),
        0
    );

    let updated = node.call_form(
        "PUT",
        base,
        &format!("namespaceId={id}&namespaceName=Dev2&namespaceDesc=d2"),
    );
    assert_eq!(data(updated), true);
    let one = data(node.call("GET", &format!("{base}?namespaceId={id}")));
    assert_eq!(one["namespaceShowName"], "Dev2");
    assert_eq!(one["namespaceDesc"], "d2");

    assert_eq!(
        data(node.call("DELETE", &format!("{base}?namespaceId={id}"))),
        true
    );
    let gone = node.call("GET", &format!("{base}?namespaceId={id}"));
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(
        data(node.call("GET", &format!("{base}/check?namespaceId={id}"))),
        0
    );
}

#[test]
fn the_members_and_what_roster_does_not_serve() {
    let node = Node::start();
    let base = "/nacos/v3/admin/core/cluster";
    let nodes = data(node.call("GET", &format!("{base}/node/list")));
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["address"], node.addr());
    assert_eq!(nodes[0]["state"], "UP");
    assert_eq!(nodes[0]["port"], node.http_port);
    let me = data(node.call("GET", &format!("{base}/node/self")));
    assert_eq!(me["address"], node.addr());
    let up = data(node.call(
        "GET",
        &format!("{base}/node/list?state=up&address=127.0.0.1"),
    ));
    assert_eq!(up.as_array().unwrap().len(), 1);
    let down = data(node.call("GET", &format!("{base}/node/list?state=DOWN")));
    assert_eq!(down, json!([]));
    let elsewhere = data(node.call("GET", &format!("{base}/node/list?address=10.")));
    assert_eq!(elsewhere, json!([]));
    names_field(
        node.call("GET", &format!("{base}/node/list?state=sleepy")),
        "state",
    );

    // Membership is Raft's; roster's own operations are elsewhere.
    for (method, path) in [
        ("PUT", "/nacos/v3/admin/core/cluster/node/list"),
        ("PUT", "/nacos/v3/admin/core/cluster/lookup?type=file"),
        ("POST", "/nacos/v3/admin/core/ops/raft"),
        ("GET", "/nacos/v3/admin/core/ops/ids"),
        ("PUT", "/nacos/v3/admin/core/ops/log"),
        ("POST", "/nacos/v3/auth/user/admin"),
    ] {
        let r = node.call(method, path);
        let expected = if path.ends_with("/user/admin") {
            409
        } else {
            501
        };
        assert_eq!(r.status, expected, "{method} {path}: {}", r.body);
    }
}

#[test]
fn users_roles_and_permissions_round_trip() {
    let node = Node::start();
    let user = "/nacos/v3/auth/user";
    assert_eq!(
        data(node.call_form("POST", user, "username=alice&password=alice-pass-1")),
        "create user ok!"
    );
    let again = node.call_form("POST", user, "username=alice&password=alice-pass-1");
    assert_eq!(again.status, 409, "{}", again.body);
    names_field(
        node.call_form("POST", user, "username=bob&password=short"),
        "password",
    );
    names_field(
        node.call_form("POST", user, "password=long-enough-1"),
        "username",
    );

    let page = data(node.call("GET", &format!("{user}/list?pageNo=1&pageSize=10")));
    assert_eq!(page["totalCount"], 2, "{page}");
    assert!(
        !page.to_string().contains("argon2"),
        "hashes are never shown: {page}"
    );
    assert!(page["pageItems"][0].get("password").is_none(), "{page}");
    // `search` is accurate unless told otherwise.
    let exact = data(node.call(
        "GET",
        &format!("{user}/list?pageNo=1&pageSize=10&username=ali"),
    ));
    assert_eq!(exact["totalCount"], 0, "{exact}");
    let blur = data(node.call(
        "GET",
        &format!("{user}/list?pageNo=1&pageSize=10&username=ali&search=blur"),
    ));
    assert_eq!(blur["totalCount"], 1, "{blur}");
    names_field(
        node.call("GET", &format!("{user}/list?pageNo=0&pageSize=10")),
        "pageNo",
    );
    names_field(
        node.call("GET", &format!("{user}/list?search=fuzzy")),
        "search",
    );
    assert_eq!(
        data(node.call("GET", &format!("{user}/search?username=ali"))),
        json!(["alice"])
    );
    names_field(node.call("GET", &format!("{user}/search")), "username");

    // Roles.
    let role = "/nacos/v3/auth/role";
    assert_eq!(
        data(node.call_form("POST", role, "role=team&username=alice")),
        "add role ok!"
    );
    names_field(node.call_form("POST", role, "username=alice"), "role");
    let roles = data(node.call(
        "GET",
        &format!("{role}/list?pageNo=1&pageSize=10&role=team"),
    ));
    assert_eq!(roles["totalCount"], 1, "{roles}");
    assert_eq!(roles["pageItems"][0]["username"], "alice");
    assert_eq!(
        data(node.call("GET", &format!("{role}/search?role=te"))),
        json!(["team"])
    );

    // Permissions.
    let perm = "/nacos/v3/auth/permission";
    let grant = "role=team&resource=%3A*%3A*&action=rw";
    assert_eq!(
        data(node.call_form("POST", perm, grant)),
        "add permission ok!"
    );
    assert_eq!(data(node.call("GET", &format!("{perm}?{grant}"))), true);
    assert_eq!(
        data(node.call(
            "GET",
            &format!("{perm}?role=team&resource=%3A*%3A*&action=r")
        )),
        false
    );
    names_field(
        node.call("GET", &format!("{perm}?role=team&resource=%3A*%3A*")),
        "action",
    );
    names_field(
        node.call_form("POST", perm, "role=team&resource=%3A*%3A*&action=x"),
        "action",
    );
    let perms = data(node.call(
        "GET",
        &format!("{perm}/list?pageNo=1&pageSize=10&role=team"),
    ));
    assert_eq!(perms["totalCount"], 1, "{perms}");
    assert_eq!(perms["pageItems"][0]["action"], "rw");

    // alice, with her v3 token: not an admin; her own password only, giving the old.
    let alice = v3_login(&node, "alice", "alice-pass-1");
    let as_alice = [("accessToken", alice.as_str())];
    node.raw(
        "GET",
        &format!("{user}/list?pageNo=1&pageSize=10"),
        &as_alice,
        None,
    )
    .expect(403);
    node.raw(
        "PUT",
        user,
        &as_alice,
        Some("username=nacos&newPassword=stolen-pass-1"),
    )
    .expect(403);
    let changed = node.raw(
        "PUT",
        user,
        &as_alice,
        Some("username=alice&newPassword=alice-pass-2&oldPassword=alice-pass-1"),
    );
    assert_eq!(data(changed), "update user ok!");
    v3_login(&node, "alice", "alice-pass-2");

    // Taken back, unbound, deleted.
    assert_eq!(
        data(node.call("DELETE", &format!("{perm}?{grant}"))),
        "delete permission ok!"
    );
    let none = data(node.call(
        "GET",
        &format!("{perm}/list?pageNo=1&pageSize=10&role=team"),
    ));
    assert_eq!(none["totalCount"], 0);
    data(node.call("DELETE", &format!("{role}?role=team&username=alice")));
    assert_eq!(
        data(node.call("DELETE", &format!("{user}?username=alice"))),
        "delete user ok!"
    );
    node.call("DELETE", &format!("{user}?username=alice"))
        .expect(404);
    names_field(node.call("DELETE", user), "username");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_clients_and_connections_of_a_grpc_client_that_registers_and_subscribes() {
    let node = Node::start();
    let token = node.token();
    let svc = unique("v3clients");
    let rt = runtime();
    let grpc = format!("127.0.0.1:{}", node.http_port + 1000);
    let mut client = rt.block_on(async {
        let mut c = RawClient::try_set_up(&grpc, Duration::from_secs(10))
            .await
            .expect("grpc client set up");
        let register = json!({"headers":{},"requestId":null,"namespace":"public","serviceName":svc,
            "groupName":"DEFAULT_GROUP","type":"registerInstance","instance":{"ip":"127.0.0.7","port":7070,
            "weight":1.0,"healthy":true,"enabled":true,"ephemeral":true,"clusterName":"C1","metadata":{}},
            "module":"naming"});
        let (kind, body) = decode(&c.try_unary(payload("InstanceRequest", &register, Some(&token))).await.unwrap());
        assert_eq!((kind.as_str(), body["success"].clone()), ("InstanceResponse", json!(true)), "{body}");
        let subscribe = json!({"namespace":"public","serviceName":svc,"groupName":"DEFAULT_GROUP",
            "subscribe":true,"clusters":""});
        let (kind, _) = decode(&c.try_unary(payload("SubscribeServiceRequest", &subscribe, Some(&token))).await.unwrap());
        assert_eq!(kind, "SubscribeServiceResponse");
        c
    });
    // An address client beside it (HTTP v1).
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName={svc}&ip=127.0.0.8&port=8080&ephemeral=true"),
    )
    .expect(200);

    // The loader: this node's one connection.
    let current = data(node.call("GET", "/nacos/v3/admin/core/loader/current"));
    let current = current.as_object().unwrap();
    assert_eq!(current.len(), 1, "{current:?}");
    let (conn_id, conn) = current.iter().next().unwrap();
    assert_eq!(conn["metaInfo"]["connectionId"], conn_id.as_str());
    assert_eq!(conn["metaInfo"]["version"], "Roster-Test:v1");
    assert_eq!(conn["metaInfo"]["connectType"], "GRPC");
    let loaded = data(node.call("GET", "/nacos/v3/admin/core/loader/cluster"));
    assert_eq!(loaded["total"], 1, "{loaded}");
    assert_eq!(loaded["memberCount"], 1);
    assert_eq!(loaded["completed"], true);
    assert_eq!(loaded["detail"][0]["address"], node.addr());
    assert_eq!(loaded["detail"][0]["sdkConCount"], 1);

    // The clients: the connection by its id, the address client as Nacos names it.
    let ns = "/nacos/v3/admin/ns/client";
    let ids = data(node.call("GET", &format!("{ns}/list")));
    let address_client = "127.0.0.8:8080#true";
    assert!(
        ids.as_array().unwrap().contains(&json!(conn_id))
            && ids.as_array().unwrap().contains(&json!(address_client)),
        "{ids}"
    );
    let detail = data(node.call("GET", &format!("{ns}?clientId={conn_id}")));
    assert_eq!(detail["clientType"], "connection");
    assert_eq!(detail["connectType"], "GRPC");
    assert_eq!(detail["version"], "Roster-Test:v1");
    assert_eq!(detail["ephemeral"], true);
    let detail = data(node.call("GET", &format!("{ns}?clientId=127.0.0.8:8080%23true")));
    assert_eq!(detail["clientType"], "ipPort");
    let missing = node.call("GET", &format!("{ns}?clientId=nobody"));
    assert_eq!(missing.status, 404, "{}", missing.body);
    names_field(node.call("GET", ns), "clientId");

    let published = data(node.call("GET", &format!("{ns}/publish/list?clientId={conn_id}")));
    assert_eq!(published[0]["serviceName"], svc.as_str(), "{published}");
    assert_eq!(published[0]["groupName"], "DEFAULT_GROUP");
    assert_eq!(published[0]["publisherInfo"]["ip"], "127.0.0.7");
    assert_eq!(published[0]["publisherInfo"]["port"], 7070);
    assert_eq!(published[0]["publisherInfo"]["clusterName"], "C1");
    let subscribed = data(node.call("GET", &format!("{ns}/subscribe/list?clientId={conn_id}")));
    assert_eq!(subscribed[0]["serviceName"], svc.as_str(), "{subscribed}");
    assert_eq!(subscribed[0]["subscriberInfo"]["agent"], "Roster-Test:v1");

    let publishers = data(node.call(
        "GET",
        &format!("{ns}/service/publisher/list?serviceName={svc}"),
    ));
    let publishers = publishers.as_array().unwrap();
    assert_eq!(publishers.len(), 2, "{publishers:?}");
    assert!(publishers
        .iter()
        .any(|p| p["clientId"] == conn_id.as_str() && p["port"] == 7070));
    assert!(publishers.iter().any(|p| p["clientId"] == address_client));
    let filtered = data(node.call(
        "GET",
        &format!("{ns}/service/publisher/list?serviceName={svc}&ip=127.0.0.8&port=8080"),
    ));
    assert_eq!(filtered.as_array().unwrap().len(), 1, "{filtered}");
    names_field(
        node.call("GET", &format!("{ns}/service/publisher/list")),
        "serviceName",
    );
    names_field(
        node.call(
            "GET",
            &format!("{ns}/service/publisher/list?serviceName={svc}&port=x"),
        ),
        "port",
    );
    let subscribers = data(node.call(
        "GET",
        &format!("{ns}/service/subscriber/list?serviceName={svc}"),
    ));
    assert_eq!(
        subscribers[0]["clientId"],
        conn_id.as_str(),
        "{subscribers}"
    );

    let distro = data(node.call("GET", &format!("{ns}/distro?ip=127.0.0.8&port=8080")));
    assert_eq!(distro["responsibleServer"], node.addr());
    names_field(
        node.call("GET", &format!("{ns}/distro?ip=127.0.0.8")),
        "port",
    );

    // Moving clients: bad input first, then the one connection, which is asked to go.
    let loader = "/nacos/v3/admin/core/loader";
    names_field(
        node.call("POST", &format!("{loader}/reloadCurrent?count=x")),
        "count",
    );
    names_field(
        node.call("POST", &format!("{loader}/reloadClient")),
        "connectionId",
    );
    names_field(
        node.call(
            "POST",
            &format!("{loader}/smartReloadCluster?loaderFactor=lots"),
        ),
        "loaderFactor",
    );
    names_field(
        node.call(
            "POST",
            &format!("{loader}/reloadClient?connectionId={conn_id}&redirectAddress=nowhere"),
        ),
        "redirectAddress",
    );
    node.call(
        "POST",
        &format!("{loader}/reloadClient?connectionId=nobody"),
    )
    .expect(404);
    let kept = data(node.call("POST", &format!("{loader}/reloadCurrent?count=5")));
    assert!(kept.as_str().unwrap().starts_with('0'), "{kept}");
    node.call(
        "POST",
        &format!("{loader}/reloadClient?connectionId={conn_id}&redirectAddress=127.0.0.1:8848"),
    )
    .expect(200);
    rt.block_on(async {
        let reset = client
            .expect("ConnectResetRequest", Duration::from_secs(5))
            .await;
        assert_eq!(reset["serverIp"], "127.0.0.1", "{reset}");
        assert_eq!(reset["serverPort"], "8848", "{reset}");
        assert_eq!(reset["connectionId"], conn_id.as_str(), "{reset}");
    });
}
