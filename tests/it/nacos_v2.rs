//! The Nacos v2 Open API (`/nacos/v2/ns/...`) against a real node: the
//! `{code, message, data}` envelope, v2's error codes with matching HTTP statuses, the
//! ungrouped `serviceName`, `clusterName` on lists, and `service/list`'s shape.

use roster_tests::{json, unique, Node};

#[test]
fn instances_and_services_round_trip_in_the_envelope() {
    let node = Node::start();
    let svc = unique("v2svc");

    // Register two instances in two clusters; data is "ok".
    for (port, cluster) in [(8080, "A"), (8081, "B")] {
        let r = node
            .call_form(
                "POST",
                "/nacos/v2/ns/instance",
                &format!("serviceName={svc}&groupName=G1&ip=127.1.0.1&port={port}&clusterName={cluster}&weight=2&metadata=%7B%22lane%22%3A%22blue%22%7D"),
            )
            .expect(200);
        assert_eq!(
            r.json(),
            json!({"code": 0, "message": "success", "data": "ok"})
        );
    }

    // The list is the v1 ServiceInfo inside the envelope; clusterName filters.
    let all = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance/list?serviceName={svc}&groupName=G1"),
        )
        .expect(200)
        .json();
    assert_eq!(all["code"], 0);
    assert_eq!(all["data"]["name"], format!("G1@@{svc}"));
    assert_eq!(all["data"]["hosts"].as_array().unwrap().len(), 2);
    let only_b = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance/list?serviceName={svc}&groupName=G1&clusterName=B"),
        )
        .expect(200)
        .json();
    let hosts = only_b["data"]["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0]["port"], 8081);
    assert_eq!(hosts[0]["weight"], 2.0);
    assert_eq!(hosts[0]["metadata"]["lane"], "blue");

    // Detail of one instance.
    let detail = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance?serviceName={svc}&groupName=G1&ip=127.1.0.1&port=8080&clusterName=A"),
        )
        .expect(200)
        .json();
    assert_eq!(detail["code"], 0);
    assert_eq!(detail["data"]["port"], 8080);

    // Update (PUT) changes the weight.
    node.call_form(
        "PUT",
        "/nacos/v2/ns/instance",
        &format!("serviceName={svc}&groupName=G1&ip=127.1.0.1&port=8080&clusterName=A&weight=5"),
    )
    .expect(200);
    let a = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance/list?serviceName={svc}&groupName=G1&clusterName=A"),
        )
        .expect(200)
        .json();
    assert_eq!(a["data"]["hosts"][0]["weight"], 5.0);

    // service/list: {count, services} of the group.
    let list = node
        .call(
            "GET",
            "/nacos/v2/ns/service/list?groupName=G1&pageNo=1&pageSize=10",
        )
        .expect(200)
        .json();
    assert_eq!(list["code"], 0);
    assert_eq!(list["data"]["count"], 1);
    assert_eq!(list["data"]["services"], json!([svc]));
    let other = node
        .call("GET", "/nacos/v2/ns/service/list?groupName=G2")
        .expect(200)
        .json();
    assert_eq!(other["data"], json!({"count": 0, "services": []}));

    // Deregister both; the list empties.
    for (port, cluster) in [(8080, "A"), (8081, "B")] {
        node.call(
            "DELETE",
            &format!("/nacos/v2/ns/instance?serviceName={svc}&groupName=G1&ip=127.1.0.1&port={port}&clusterName={cluster}"),
        )
        .expect(200);
    }
    let empty = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance/list?serviceName={svc}&groupName=G1"),
        )
        .expect(200)
        .json();
    assert_eq!(empty["data"]["hosts"], json!([]));

    // Service create / detail / duplicate / delete.
    let managed = unique("v2managed");
    node.call_form(
        "POST",
        "/nacos/v2/ns/service",
        &format!("serviceName={managed}&protectThreshold=0.5"),
    )
    .expect(200);
    let d = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/service?serviceName={managed}"),
        )
        .expect(200)
        .json();
    assert_eq!(d["code"], 0);
    assert_eq!(d["data"]["protectThreshold"], 0.5);
    let dup = node
        .call_form(
            "POST",
            "/nacos/v2/ns/service",
            &format!("serviceName={managed}"),
        )
        .expect(400)
        .json();
    assert_eq!(dup["code"], 21007, "{dup}");
    node.call(
        "DELETE",
        &format!("/nacos/v2/ns/service?serviceName={managed}"),
    )
    .expect(200);
    let gone = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/service?serviceName={managed}"),
        )
        .expect(404)
        .json();
    assert_eq!(gone["code"], 21008, "{gone}");
}

#[test]
fn errors_carry_v2_codes_and_change_nothing() {
    let node = Node::start();
    let svc = unique("v2bad");

    // Missing ip: 400, code 10000, the field named in data.
    let r = node
        .call_form(
            "POST",
            "/nacos/v2/ns/instance",
            &format!("serviceName={svc}&port=80"),
        )
        .expect(400)
        .json();
    assert_eq!(r["code"], 10000, "{r}");
    assert_eq!(r["message"], "parameter missing");
    assert!(r["data"].as_str().unwrap().contains("ip"), "{r}");

    // Weight out of range: 21001.
    let r = node
        .call_form(
            "POST",
            "/nacos/v2/ns/instance",
            &format!("serviceName={svc}&ip=127.0.0.1&port=80&weight=100000"),
        )
        .expect(400)
        .json();
    assert_eq!(r["code"], 21001, "{r}");

    // Bad metadata: 21002.
    let r = node
        .call_form(
            "POST",
            "/nacos/v2/ns/instance",
            &format!("serviceName={svc}&ip=127.0.0.1&port=80&metadata=no-equals-sign"),
        )
        .expect(400)
        .json();
    assert_eq!(r["code"], 21002, "{r}");

    // A bad port: 20002 parameter validate error.
    let r = node
        .call_form(
            "POST",
            "/nacos/v2/ns/instance",
            &format!("serviceName={svc}&ip=127.0.0.1&port=99999"),
        )
        .expect(400)
        .json();
    assert_eq!(r["code"], 20002, "{r}");
    assert!(r["data"].as_str().unwrap().contains("port"), "{r}");

    // None of it created anything.
    let list = node
        .call(
            "GET",
            &format!("/nacos/v2/ns/instance/list?serviceName={svc}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["data"]["hosts"], json!([]));

    // Without credentials: 401/403 with code 10001.
    let r = node.raw(
        "GET",
        &format!("/nacos/v2/ns/instance/list?serviceName={svc}"),
        &[],
        None,
    );
    assert!(r.status == 401 || r.status == 403, "status {}", r.status);
    let body = r.json();
    assert_eq!(body["code"], 10001, "{body}");
}

#[test]
fn bad_addresses_and_bytes_that_are_not_utf8_get_v2_errors() {
    let node = Node::start();
    for bad in ["999.1.1.1", "1.1.1", "127.000.000.001"] {
        let r = node
            .call_form(
                "POST",
                "/nacos/v2/ns/instance",
                &format!("serviceName=v2addr&ip={bad}&port=80"),
            )
            .expect(400)
            .json();
        assert_eq!(r["code"], 20002, "{r}");
        assert!(r["data"].as_str().unwrap().contains("'ip'"), "{r}");
    }
    let r = node
        .call_form(
            "POST",
            "/nacos/v2/ns/instance",
            "serviceName=v2%FFaddr&ip=127.0.0.1&port=80",
        )
        .expect(400)
        .json();
    assert!(r["data"].as_str().unwrap().contains("'serviceName'"), "{r}");
    let list = node
        .call("GET", "/nacos/v2/ns/service/list?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(list["data"]["count"], 0, "{list}");
    // IPv6 is kept in one spelling.
    node.call_form(
        "POST",
        "/nacos/v2/ns/instance",
        "serviceName=v2six&ip=0%3A0%3A0%3A0%3A0%3A0%3A0%3A1&port=80",
    )
    .expect(200);
    let v = node
        .call("GET", "/nacos/v2/ns/instance/list?serviceName=v2six")
        .expect(200)
        .json();
    assert_eq!(v["data"]["hosts"][0]["ip"], "::1", "{v}");
}
