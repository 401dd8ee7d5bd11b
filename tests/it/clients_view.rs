//! `GET /api/v1/clients`, the console's Clients page: the naming clients of the node
//! asked, each with what it publishes and subscribes to, for admins only, filtered by
//! address prefix and application name.

use std::net::UdpSocket;
use std::time::Duration;

use roster_tests::{eventually, unique, Node, Value};

use crate::authz::login;

/// The clients of `node` as the admin, with `query`.
fn clients(node: &Node, query: &str) -> Vec<Value> {
    let answer = node
        .call("GET", &format!("/api/v1/clients?{query}"))
        .expect(200)
        .json();
    assert_eq!(answer["node"], 1, "{answer}");
    answer["clients"].as_array().expect("clients").clone()
}

fn ids(clients: &[Value]) -> Vec<&str> {
    clients
        .iter()
        .map(|c| c["clientId"].as_str().expect("an id"))
        .collect()
}

#[test]
fn an_address_client_shows_what_it_publishes_and_subscribes_to_for_admins_only() {
    let node = Node::start();
    let service = unique("clients-view");
    // A v1 ephemeral instance: the address client `ip:port`.
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.4&port=8080&ephemeral=true"
        ),
    )
    .expect(200);
    // A v1 UDP subscriber (a push-capable agent) at another address.
    let socket = UdpSocket::bind("127.0.0.5:0").unwrap();
    let udp_port = socket.local_addr().unwrap().port();
    let auth = format!("Bearer {}", node.token());
    node.raw(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName={service}&udpPort={udp_port}&clientIP=127.0.0.5&app=shop"
        ),
        &[
            ("authorization", &auth),
            ("user-agent", "Nacos-Java-Client:v1.4.8"),
        ],
        None,
    )
    .expect(200);

    let publishers = clients(&node, "ip=127.0.0.4");
    assert_eq!(ids(&publishers), ["127.0.0.4:8080#true"], "{publishers:?}");
    let publisher = &publishers[0];
    assert_eq!(publisher["clientType"], "ipPort");
    assert_eq!(publisher["clientIp"], "127.0.0.4");
    assert_eq!(publisher["clientPort"], 8080);
    // A single node is responsible for every address client.
    assert_eq!(publisher["here"], true);
    assert!(
        publisher["lastUpdatedTime"].as_u64() > Some(0),
        "{publisher}"
    );
    let published = publisher["published"].as_array().unwrap();
    assert_eq!(published.len(), 1, "{publisher}");
    assert_eq!(published[0]["namespaceId"], "public");
    assert_eq!(published[0]["groupName"], "DEFAULT_GROUP");
    assert_eq!(published[0]["serviceName"], service.as_str());
    assert_eq!(
        (&published[0]["ip"], &published[0]["port"]),
        (&Value::from("127.0.0.4"), &Value::from(8080))
    );
    assert_eq!(publisher["subscribed"], Value::Array(vec![]));

    // The subscriber, found by its application (any case) and by its address.
    let subscribers = clients(&node, "app=SHO");
    let subscriber_id = format!("127.0.0.5:{udp_port}#true");
    assert_eq!(
        ids(&subscribers),
        [subscriber_id.as_str()],
        "{subscribers:?}"
    );
    let subscriber = &subscribers[0];
    assert_eq!(subscriber["appName"], "shop");
    assert_eq!(subscriber["version"], "Nacos-Java-Client:v1.4.8");
    assert_eq!(subscriber["subscribed"][0]["serviceName"], service.as_str());
    assert_eq!(subscriber["published"], Value::Array(vec![]));
    assert_eq!(
        ids(&clients(&node, "ip=127.0.0.5")),
        [subscriber_id.as_str()]
    );
    // Both, unfiltered; neither, for an address no client has.
    let all = clients(&node, "");
    assert!(
        ids(&all).contains(&"127.0.0.4:8080#true") && ids(&all).contains(&subscriber_id.as_str()),
        "{all:?}"
    );
    assert!(clients(&node, "ip=10.").is_empty());
    // Nacos 3's view lists the same clients.
    let v3 = node
        .call("GET", "/nacos/v3/admin/ns/client/list")
        .expect(200)
        .json();
    for id in ids(&all) {
        assert!(
            v3["data"].as_array().unwrap().contains(&Value::from(id)),
            "{id}: {v3}"
        );
    }

    // Admins only.
    let user = unique("plain");
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password=plain-pass-1"),
    )
    .expect(200);
    let token = login(&node, &user, "plain-pass-1");
    let refused = node.raw(
        "GET",
        "/api/v1/clients",
        &[("authorization", &format!("Bearer {token}"))],
        None,
    );
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Refused reads are audited.
    eventually(Duration::from_secs(10), || {
        let trail = node
            .call("GET", &format!("/api/v1/audit?user={user}"))
            .expect(200)
            .json();
        let refused = trail["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "GET /api/v1/clients" && e["status"] == 403);
        refused.then_some(()).ok_or(format!("{trail}"))
    });
}
