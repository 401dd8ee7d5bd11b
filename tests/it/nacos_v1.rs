//! The Nacos v1 naming API against a real node: the reference's section-6 exchanges,
//! service and namespace management, and bad inputs (4xx with a message, nothing
//! created).

use roster_tests::{enc, json, Node, Value};

fn list(node: &Node, query: &str) -> Value {
    node.call("GET", &format!("/nacos/v1/ns/instance/list?{query}"))
        .expect(200)
        .json()
}

fn ports(v: &Value) -> Vec<u64> {
    v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["port"].as_u64().unwrap())
        .collect()
}

#[test]
fn section_6_exchanges() {
    let node = Node::start();
    // Python legacy registration: clusterName=None lands in cluster "None".
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1&port=8080&enable=True&healthy=True&clusterName=None&ephemeral=True&groupName=DEFAULT_GROUP&weight=1.0",
    )
    .expect(200);
    let v = list(&node, "serviceName=demo");
    assert_eq!(v["hosts"][0]["clusterName"], "None");

    // Full beat for a known instance → 10200.
    let beat = enc(
        r#"{"serviceName":"DEFAULT_GROUP@@demo","ip":"127.0.0.1","port":8080,"weight":1.0,"ephemeral":true,"cluster":"None"}"#,
    );
    let r = node
        .call("PUT", &format!("/nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40demo&groupName=DEFAULT_GROUP&beat={beat}"))
        .expect(200);
    assert_eq!(
        r.json(),
        json!({"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true})
    );

    // Light beat for an unknown instance → 20404.
    let r = node
        .call("PUT", "/nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40nope&ip=127.2.3.4&port=1&clusterName=DEFAULT")
        .expect(200);
    assert_eq!(
        r.json(),
        json!({"clientBeatInterval":5000,"code":20404,"lightBeatEnabled":true})
    );

    // The list shape, with clusters echoed verbatim.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.2&port=8080",
    )
    .expect(200);
    let v = node
        .raw(
            "GET",
            &format!(
                "/nacos/v1/ns/instance/list?serviceName=DEFAULT_GROUP%40%40demo&clusters=DEFAULT&healthyOnly=false&accessToken={}",
                node.token()
            ),
            &[("user-agent", "Nacos-Java-Client:v1.0.0")],
            None,
        )
        .expect(200)
        .json();
    assert_eq!(v["name"], "DEFAULT_GROUP@@demo");
    assert_eq!(v["groupName"], "DEFAULT_GROUP");
    assert_eq!(v["clusters"], "DEFAULT");
    assert_eq!(v["cacheMillis"], 10000);
    assert_eq!(v["checksum"], "");
    assert_eq!(v["allIPs"], false);
    assert_eq!(v["reachProtectionThreshold"], false);
    assert_eq!(v["valid"], true);
    assert!(v["lastRefTime"].as_u64().unwrap() > 1_600_000_000_000);
    let host = &v["hosts"][0];
    assert_eq!(
        v["hosts"].as_array().unwrap().len(),
        1,
        "only cluster DEFAULT: {v}"
    );
    assert_eq!(
        host["instanceId"],
        "127.0.0.2#8080#DEFAULT#DEFAULT_GROUP@@demo"
    );
    assert_eq!(host["ip"], "127.0.0.2");
    assert_eq!(host["weight"].to_string(), "1.0", "weight is a JSON double");
    assert_eq!(host["healthy"], true);
    assert_eq!(host["enabled"], true);
    assert_eq!(host["ephemeral"], true);
    assert_eq!(host["serviceName"], "DEFAULT_GROUP@@demo");
    assert_eq!(host["metadata"], json!({}));
    assert_eq!(host["instanceHeartBeatInterval"], 5000);
    assert_eq!(host["instanceHeartBeatTimeOut"], 15000);
    assert_eq!(host["ipDeleteTimeout"], 30000);
    assert_eq!(host["instanceIdGenerator"], "simple");

    // Unknown service: 200 with an empty host list.
    let v = list(&node, "serviceName=never-registered");
    assert_eq!(v["hosts"], json!([]));

    // Errors, word for word.
    let cases = [
        (
            "POST",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1",
            400,
            "Param 'port' is required.",
        ),
        (
            "POST",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1&port=99999",
            400,
            "Param 'port' is illegal, the value should be between 0 and 65535.",
        ),
        (
            "POST",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1&port=80&weight=20000",
            400,
            "instance format invalid: The weights range from 0.0 to 10000.0",
        ),
        (
            "POST",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1&port=80&clusterName=a_b",
            400,
            "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: a_b)",
        ),
        // Nacos answers 500 here (its param filter throws); roster never answers 500 for bad input.
        (
            "POST",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.0.0.1&port=80&metadata=a=b=c",
            400,
            "metadata format incorrect:a=b=c",
        ),
        (
            "GET",
            "/nacos/v1/ns/instance?serviceName=empty-one&ip=127.9.9.9&port=1",
            404,
            "no ips found for cluster DEFAULT in service DEFAULT_GROUP@@empty-one",
        ),
        (
            "GET",
            "/nacos/v1/ns/instance?serviceName=demo&ip=127.9.9.9&port=1",
            404,
            "no matched ip found!",
        ),
        (
            "GET",
            "/nacos/v1/ns/service/list?pageSize=10",
            400,
            "Param 'pageNo' is required.",
        ),
    ];
    node.call("POST", "/nacos/v1/ns/service?serviceName=empty-one")
        .expect(200);
    for (method, path, status, body) in cases {
        let r = node.call(method, path);
        assert_eq!(
            (r.status, r.body.as_str()),
            (status, body),
            "{method} {path}"
        );
    }
    node.call("POST", "/nacos/v1/ns/service?serviceName=svc6")
        .expect(200);
    let r = node.call("POST", "/nacos/v1/ns/service?serviceName=svc6");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "specified service DEFAULT_GROUP@@svc6 already exists!")
    );
    let r = node.call("DELETE", "/nacos/v1/ns/service?serviceName=demo");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Service DEFAULT_GROUP@@demo is not empty, can't be delete. Please unregister instance first")
    );
    let r = node.raw(
        "POST",
        "/nacos/v1/auth/login?username=nacos&password=wrong",
        &[],
        None,
    );
    assert_eq!((r.status, r.body.as_str()), (403, "user not found!"));
}

#[test]
fn params_come_from_query_and_form_body_on_every_method() {
    let node = Node::start();
    // Java 1.x style: everything in a form body.
    node.call_form(
        "POST",
        "/nacos/v1/ns/instance",
        "serviceName=formsvc&ip=127.1.0.1&port=81&enabled=false&weight=2",
    )
    .expect(200);
    let r = node
        .call(
            "GET",
            "/nacos/v1/ns/instance?serviceName=formsvc&ip=127.1.0.1&port=81",
        )
        .expect(200);
    assert_eq!(r.json()["weight"].as_f64(), Some(2.0));
    assert_eq!(r.json()["enabled"], false);
    // A beat with its JSON in the form body and the rest in the query.
    let beat = format!(
        "beat={}",
        enc(r#"{"ip":"127.1.0.1","port":81,"serviceName":"DEFAULT_GROUP@@formsvc"}"#)
    );
    let r = node
        .call_form(
            "PUT",
            "/nacos/v1/ns/instance/beat?serviceName=formsvc",
            &beat,
        )
        .expect(200);
    assert_eq!(r.json()["code"], 10200);
    node.call_form(
        "PUT",
        "/nacos/v1/ns/instance",
        "serviceName=formsvc&ip=127.1.0.1&port=81&enable=true",
    )
    .expect(200);
    // Disabled instances are not listed; enabled again, it is.
    assert_eq!(ports(&list(&node, "serviceName=formsvc")), [81]);
    node.call_form(
        "DELETE",
        "/nacos/v1/ns/instance",
        "serviceName=formsvc&ip=127.1.0.1&port=81",
    )
    .expect(200);
    assert!(ports(&list(&node, "serviceName=formsvc")).is_empty());
}

#[test]
fn groups_namespaces_and_clusters() {
    let node = Node::start();
    node.call("POST", "/nacos/v1/ns/instance?serviceName=g1%40%40s&groupName=ignored&ip=127.2.0.1&port=1&clusterName=c1")
        .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=s&groupName=g1&ip=127.2.0.2&port=1&cluster=c2",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=s&namespaceId=dev&ip=127.2.0.3&port=1",
    )
    .expect(200);
    let v = list(&node, "serviceName=s&groupName=g1");
    assert_eq!(v["name"], "g1@@s");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 2);
    let v = list(&node, "serviceName=g1%40%40s&clusters=c2");
    assert_eq!(v["hosts"][0]["ip"], "127.2.0.2");
    let v = list(&node, "serviceName=s&namespaceId=dev");
    assert_eq!(v["hosts"][0]["ip"], "127.2.0.3");
    assert_eq!(
        list(&node, "serviceName=s")["hosts"],
        json!([]),
        "public/DEFAULT_GROUP is another service"
    );
    let page = node
        .call(
            "GET",
            "/nacos/v1/ns/service/list?pageNo=1&pageSize=10&groupName=g1",
        )
        .expect(200)
        .json();
    assert_eq!(page, json!({"count":1,"doms":["s"]}));
    // Re-registering an address in another cluster moves it (one instance per address).
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=s&groupName=g1&ip=127.2.0.2&port=1&clusterName=c3",
    )
    .expect(200);
    let v = list(&node, "serviceName=s&groupName=g1&clusters=c2");
    assert_eq!(v["hosts"], json!([]));
}

#[test]
fn service_settings_and_protection_threshold() {
    let node = Node::start();
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/service?serviceName=ps&protectThreshold=0.6&metadata={}",
            enc(r#"{"team":"core"}"#)
        ),
    )
    .expect(200);
    let v = node
        .call("GET", "/nacos/v1/ns/service?serviceName=ps")
        .expect(200)
        .json();
    assert_eq!(v["protectThreshold"], 0.6);
    assert_eq!(v["metadata"], json!({"team":"core"}));
    assert_eq!(v["selector"]["type"], "none");
    // Two persistent instances; one turns unhealthy through the API (checker NONE).
    node.call(
        "PUT",
        &format!("/nacos/v1/ns/cluster?serviceName=ps&clusterName=DEFAULT&checkPort=80&useInstancePort4Check=true&healthChecker={}", enc(r#"{"type":"NONE"}"#)),
    )
    .expect(200);
    for ip in ["127.3.0.1", "127.3.0.2"] {
        node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=ps&ip={ip}&port=80&ephemeral=false"),
        )
        .expect(200);
    }
    node.call(
        "PUT",
        "/nacos/v1/ns/health/instance?serviceName=ps&ip=127.3.0.1&port=80&healthy=false",
    )
    .expect(200);
    // healthy/total = 0.5 <= 0.6: everything comes back, marked healthy, even healthyOnly.
    let v = list(&node, "serviceName=ps&healthyOnly=true");
    assert_eq!(v["reachProtectionThreshold"], true);
    assert_eq!(v["hosts"].as_array().unwrap().len(), 2);
    assert!(v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["healthy"] == true));
    // Below the threshold's reach: healthyOnly filters as usual.
    node.call(
        "PUT",
        "/nacos/v1/ns/service?serviceName=ps&protectThreshold=0.4",
    )
    .expect(200);
    let v = list(&node, "serviceName=ps&healthyOnly=true");
    assert_eq!(v["reachProtectionThreshold"], false);
    assert_eq!(v["hosts"].as_array().unwrap().len(), 1);
    let v = list(&node, "serviceName=ps");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 2);
    // The catalog says the same.
    let c = node
        .call(
            "GET",
            "/nacos/v1/ns/catalog/services?pageNo=1&pageSize=10&serviceNameParam=ps",
        )
        .expect(200)
        .json();
    assert_eq!(c["serviceList"][0]["ipCount"], 2);
    assert_eq!(c["serviceList"][0]["healthyInstanceCount"], 1);
    assert_eq!(c["serviceList"][0]["triggerFlag"], "false");
    // Manual health needs checker NONE and a persistent instance.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=eph&ip=127.3.1.1&port=80",
    )
    .expect(200);
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/health/instance?serviceName=eph&ip=127.3.1.1&port=80&healthy=false",
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/health/instance?serviceName=ps&ip=127.3.0.1&port=80",
    );
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'healthy' is required.")
    );
    // PUT changes only what it is given, and must be given something.
    let r = node.call("PUT", "/nacos/v1/ns/service?serviceName=ps");
    assert_eq!(
        (r.status, r.body.as_str()),
        (
            400,
            "nothing to change: give protectThreshold, metadata, selector or laneKey."
        )
    );
    node.call(
        "PUT",
        "/nacos/v1/ns/service?serviceName=ps&metadata=team%3Dx",
    )
    .expect(200);
    node.call(
        "PUT",
        "/nacos/v1/ns/service?serviceName=ps&protectThreshold=0.3",
    )
    .expect(200);
    let d = node
        .call("GET", "/nacos/v1/ns/service?serviceName=ps")
        .expect(200)
        .json();
    assert_eq!(
        (d["protectThreshold"].clone(), d["metadata"]["team"].clone()),
        (json!(0.3), json!("x")),
        "the threshold change kept the metadata: {d}"
    );
    for ip in ["127.3.0.1", "127.3.0.2"] {
        node.call(
            "DELETE",
            &format!("/nacos/v1/ns/instance?serviceName=ps&ip={ip}&port=80"),
        )
        .expect(200);
    }
    node.call("DELETE", "/nacos/v1/ns/service?serviceName=ps")
        .expect(200);
    node.call("GET", "/nacos/v1/ns/service?serviceName=ps")
        .expect(404);
}

#[test]
fn kinds_do_not_mix_and_deregister_finds_either() {
    let node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=kind&ip=127.4.0.1&port=80&ephemeral=false",
    )
    .expect(200);
    let r = node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=kind&ip=127.4.0.2&port=80",
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("persistent"), "{}", r.body);
    // Deregistering without ephemeral=false still removes the persistent instance.
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=kind&ip=127.4.0.1&port=80",
    )
    .expect(200);
    assert!(ports(&list(&node, "serviceName=kind")).is_empty());
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=kind&ip=127.4.0.2&port=80",
    )
    .expect(200);
}

#[test]
fn operator_updates_are_kept_over_re_registration() {
    let node = Node::start();
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=pin&ip=127.5.0.1&port=80&weight=1",
    )
    .expect(200);
    node.call(
        "PUT",
        "/nacos/v1/ns/instance?serviceName=pin&ip=127.5.0.1&port=80&weight=7&metadata=k%3Dv",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=pin&ip=127.5.0.1&port=80&weight=1",
    )
    .expect(200);
    let v = node
        .call(
            "GET",
            "/nacos/v1/ns/instance?serviceName=pin&ip=127.5.0.1&port=80",
        )
        .expect(200)
        .json();
    assert_eq!(v["weight"].as_f64(), Some(7.0));
    assert_eq!(v["metadata"], json!({"k":"v"}));
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/instance?serviceName=pin&ip=127.5.0.9&port=80&weight=2",
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let r = node.call(
        "PUT",
        "/nacos/v1/ns/instance?serviceName=nosuch&ip=127.5.0.9&port=80&weight=2",
    );
    assert_eq!(r.status, 404, "{}", r.body);
}

/// The first bytes the server answers on `s` (its status line), waiting at most 10 s.
fn status_line(s: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut answer = [0u8; 64];
    let n = s.read(&mut answer).unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

#[test]
fn bad_inputs_get_4xx_naming_the_field_and_change_nothing() {
    let node = Node::start();
    let big = "x".repeat(20_000);
    let cases: Vec<(String, &str)> = vec![
        ("ip=127.0.0.1".into(), "'port'"),
        ("ip=127.0.0.1&port=abc".into(), "'port'"),
        ("ip=127.0.0.1&port=-1".into(), "'port'"),
        ("ip=127.0.0.1&port=65536".into(), "'port'"),
        ("ip=127.0.0.1&port=80&weight=-1".into(), "weights range"),
        ("ip=127.0.0.1&port=80&weight=abc".into(), "'weight'"),
        ("port=80".into(), "'ip'"),
        ("ip=not%20an%20ip&port=80".into(), "'ip'"),
        ("ip=127.0.0.1%3B&port=80".into(), "'ip'"),
        ("ip=127.0.0.1&port=80&clusterName=a_b".into(), "clusterName"),
        (
            "ip=127.0.0.1&port=80&clusterName=a%20b".into(),
            "clusterName",
        ),
        (
            format!("ip=127.0.0.1&port=80&metadata={}", enc("{not json")),
            "'metadata'",
        ),
        (
            format!(
                "ip=127.0.0.1&port=80&metadata={}",
                enc(&format!(r#"{{"k":"{big}"}}"#))
            ),
            "'metadata'",
        ),
        ("ip=127.0.0.1&port=80&healthy=maybe".into(), "'healthy'"),
        (
            "ip=127.0.0.1&port=80&ephemeral=perhaps".into(),
            "'ephemeral'",
        ),
        (
            "ip=127.0.0.1&port=80&namespaceId=bad%20ns".into(),
            "'namespaceId'",
        ),
        (
            "ip=127.0.0.1&port=80&groupName=bad%20group".into(),
            "'groupName'",
        ),
    ];
    for (query, needle) in &cases {
        let path = format!("/nacos/v1/ns/instance?serviceName=bad&{query}");
        let r = node.call("POST", &path);
        assert!(
            (400..500).contains(&r.status),
            "{path}: {} {}",
            r.status,
            r.body
        );
        assert!(
            r.body.contains(needle),
            "{path}: body {:?} lacks {needle}",
            r.body
        );
    }
    // Service names: missing, blank group, whitespace, '@@' in the name, too long.
    let long = "s".repeat(600);
    for name in ["", "%40%40svc", "a%20b", "a%40%40b%40%40c", long.as_str()] {
        let r = node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName={name}&ip=127.0.0.1&port=80"),
        );
        assert!(
            (400..500).contains(&r.status),
            "{name}: {} {}",
            r.status,
            r.body
        );
        assert!(r.body.contains("serviceName"), "{name}: {}", r.body);
    }
    // Nothing was created by any of them.
    let services = node
        .call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(services["count"], 0, "{services}");
    let dev = node
        .call(
            "GET",
            "/nacos/v1/ns/service/list?pageNo=1&pageSize=100&namespaceId=dev",
        )
        .expect(200)
        .json();
    assert_eq!(dev["count"], 0);
    // Service settings.
    for q in [
        "protectThreshold=abc",
        "protectThreshold=1.5",
        "selector=%7B%22type%22%3A%22weird%22%7D",
        "metadata=a%3Db%3Dc",
    ] {
        let r = node.call(
            "POST",
            &format!("/nacos/v1/ns/service?serviceName=badsvc&{q}"),
        );
        assert_eq!(r.status, 400, "{q}: {}", r.body);
    }
    node.call("GET", "/nacos/v1/ns/service?serviceName=badsvc")
        .expect(404);
    // Oversized bodies are refused before any handler, on their announced length: the
    // server answers without reading them (a client still sending may see the
    // connection close, so this speaks HTTP by hand and sends only the head).
    {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
        let head = format!(
            "POST /nacos/v1/ns/instance?serviceName=huge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
            node.token(),
            2 * 1024 * 1024
        );
        s.write_all(head.as_bytes()).unwrap();
        let status = status_line(&mut s);
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    }
    // A body that announces no length is cut at the limit as it is read: a chunked
    // JSON body of 2 MiB to an API that reads raw bodies is refused, and creates nothing.
    {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
        let head = format!(
            "POST /api/v1/sync/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            node.token()
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut writer = s.try_clone().unwrap();
        // The server may answer and close while this is still sending.
        let sending = std::thread::spawn(move || {
            let chunk = vec![b' '; 64 * 1024];
            for _ in 0..32 {
                if writer
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .is_err()
                    || writer.write_all(&chunk).is_err()
                    || writer.write_all(b"\r\n").is_err()
                {
                    return;
                }
            }
            let _ = writer.write_all(b"0\r\n\r\n");
        });
        let status = status_line(&mut s);
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");
        drop(s);
        let _ = sending.join();
        let tasks = node.call("GET", "/api/v1/sync/tasks").expect(200).json();
        assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(0), "{tasks}");
    }
    // A large body within the limit but with metadata over its own limit is a 400.
    let big = format!(
        "serviceName=huge&ip=127.0.0.1&port=80&metadata=k%3D{}",
        "a".repeat(64 * 1024)
    );
    let r = node.call_form("POST", "/nacos/v1/ns/instance", &big);
    assert!(
        r.status == 400 && r.body.contains("'metadata'"),
        "{}",
        r.body
    );
    node.call("GET", "/nacos/v1/ns/service?serviceName=huge")
        .expect(404);
    // Unknown paths.
    let r = node.call("GET", "/nacos/v1/ns/nope");
    assert_eq!(
        (r.status, r.body.as_str()),
        (404, "no such api:GET:/nacos/v1/ns/nope")
    );
}

#[test]
fn namespaces_lifecycle() {
    let node = Node::start();
    let v = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    assert_eq!(v["code"], 200);
    assert_eq!(v["data"][0]["namespace"], "public");
    assert_eq!(v["data"][0]["type"], 0);
    node.call("POST", "/nacos/v1/console/namespaces?customNamespaceId=team-a&namespaceName=Team%20A&namespaceDesc=first")
        .expect(200);
    let r = node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=team-a&namespaceName=again",
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let r = node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=bad%20id&namespaceName=x",
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("customNamespaceId"), "{}", r.body);
    let r = node.call(
        "POST",
        "/nacos/v1/console/namespaces?customNamespaceId=x1&namespaceName=a%23b",
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("namespaceName"), "{}", r.body);
    let r = node.call("POST", "/nacos/v1/console/namespaces?customNamespaceId=x2");
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'namespaceName' is required.")
    );
    // A random id when none is given.
    node.call("POST", "/nacos/v1/console/namespaces?namespaceName=Random")
        .expect(200);
    let v = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    assert_eq!(v["data"].as_array().unwrap().len(), 3, "{v}");
    node.call("PUT", "/nacos/v1/console/namespaces?namespace=team-a&namespaceShowName=Team%20A2&namespaceDesc=second")
        .expect(200);
    let one = node
        .call(
            "GET",
            "/nacos/v1/console/namespaces?show=all&namespaceId=team-a",
        )
        .expect(200)
        .json();
    assert_eq!(one["namespaceShowName"], "Team A2");
    assert_eq!(one["namespaceDesc"], "second");
    let exists = node
        .call(
            "GET",
            "/nacos/v1/console/namespaces?checkNamespaceIdExist=true&customNamespaceId=team-a",
        )
        .expect(200);
    assert_eq!(exists.body, "true");
    // A namespace that holds services is refused; so is public.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=s&namespaceId=team-a&ip=127.6.0.1&port=80",
    )
    .expect(200);
    let r = node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=team-a");
    assert_eq!(r.status, 409);
    assert!(
        r.body.contains("team-a") && r.body.contains("service"),
        "{}",
        r.body
    );
    let r = node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=public");
    assert_eq!(r.status, 400, "{}", r.body);
    let r = node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=missing");
    assert_eq!(r.status, 404, "{}", r.body);
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=s&namespaceId=team-a&ip=127.6.0.1&port=80",
    )
    .expect(200);
    node.call(
        "DELETE",
        "/nacos/v1/ns/service?serviceName=s&namespaceId=team-a",
    )
    .expect(200);
    node.call("DELETE", "/nacos/v1/console/namespaces?namespaceId=team-a")
        .expect(200);
    let v = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn operator_endpoints() {
    let node = Node::start();
    // The selector types the console offers: Nacos' two and roster's metadata selector.
    let r = node
        .call("GET", "/nacos/v1/ns/service/selector/types")
        .expect(200);
    assert_eq!(
        r.json(),
        json!({"code":200,"message":null,"data":["none","label","metadata"]})
    );
    // The status probe answers without credentials (clients probe it).
    let r = node
        .raw("GET", "/nacos/v1/ns/operator/metrics", &[], None)
        .expect(200);
    assert_eq!(r.json(), json!({"status":"UP"}));
    node.raw(
        "GET",
        "/nacos/v1/ns/operator/metrics?onlyStatus=false",
        &[],
        None,
    )
    .expect(401);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=op&ip=127.7.0.1&port=80",
    )
    .expect(200);
    let v = node
        .call("GET", "/nacos/v1/ns/operator/metrics?onlyStatus=false")
        .expect(200)
        .json();
    assert_eq!(v["instanceCount"], 1);
    let s = node
        .call("GET", "/nacos/v1/ns/operator/switches")
        .expect(200)
        .json();
    assert_eq!(s["clientBeatInterval"], 5000);
    assert_eq!(s["enableAuthentication"], true);
    let cat = node
        .call("GET", "/nacos/v1/ns/catalog/service?serviceName=op")
        .expect(200)
        .json();
    assert_eq!(cat["clusters"][0]["name"], "DEFAULT");
    let inst = node
        .call(
            "GET",
            "/nacos/v1/ns/catalog/instances?serviceName=op&clusterName=DEFAULT",
        )
        .expect(200)
        .json();
    assert_eq!(inst["count"], 1);
}

#[test]
fn parameters_that_are_not_utf8_are_refused_by_name_and_change_nothing() {
    let node = Node::start();
    let base = "ip=127.0.0.1&port=80";
    // (method, path and query, urlencoded body, what the answer must name). The hot
    // routes (register, beat, list) and routed ones alike; query and body alike.
    let cases: Vec<(&str, String, Option<String>, &str)> = vec![
        (
            "POST",
            format!("/nacos/v1/ns/instance?serviceName=bad%FF%FE&{base}"),
            None,
            "'serviceName'",
        ),
        (
            "POST",
            format!("/nacos/v1/ns/instance?serviceName=utf&{base}&clusterName=%FF"),
            None,
            "'clusterName'",
        ),
        (
            "POST",
            format!(
                "/nacos/v1/ns/instance?serviceName=utf&{base}&metadata=%7B%22k%22%3A%22%FF%22%7D"
            ),
            None,
            "'metadata'",
        ),
        (
            "POST",
            format!("/nacos/v1/ns/instance?serviceName=utf&{base}&na%FFme=1"),
            None,
            "'na%FFme'",
        ),
        (
            "POST",
            "/nacos/v1/ns/instance".into(),
            Some(format!("serviceName=utf&{base}&metadata=k%3D%C3")),
            "'metadata'",
        ),
        (
            "POST",
            "/nacos/v1/ns/instance".into(),
            Some(format!("serviceName=utf&{base}&k%E9y=1")),
            "'k%E9y'",
        ),
        (
            "PUT",
            format!("/nacos/v1/ns/instance/beat?serviceName=utf&{base}&cluster=%FE"),
            None,
            "'cluster'",
        ),
        (
            "GET",
            "/nacos/v1/ns/instance/list?serviceName=utf%C0%AF".into(),
            None,
            "'serviceName'",
        ),
        (
            "PUT",
            format!("/nacos/v1/ns/instance?serviceName=utf&{base}&metadata=k%3D%FF"),
            None,
            "'metadata'",
        ),
        (
            "POST",
            "/nacos/v1/ns/service?serviceName=utf&metadata=k%3D%ED%A0%80".into(),
            None,
            "'metadata'",
        ),
        (
            "POST",
            "/nacos/v1/console/namespaces?customNamespaceId=utf&namespaceName=%FF".into(),
            None,
            "'namespaceName'",
        ),
        (
            "POST",
            format!("/nacos/v2/ns/instance?serviceName=utf&{base}&clusterName=%FF"),
            None,
            "'clusterName'",
        ),
    ];
    for (method, path, form, needle) in &cases {
        let r = match form {
            Some(body) => node.call_form(method, path, body),
            None => node.call(method, path),
        };
        assert_eq!(r.status, 400, "{method} {path} {form:?}: {}", r.body);
        assert!(
            r.body.contains(needle),
            "{method} {path} {form:?}: {:?} lacks {needle}",
            r.body
        );
        assert!(r.body.contains("UTF-8"), "{method} {path}: {}", r.body);
    }
    // Nothing was created: no service, no namespace, no instance.
    let services = node
        .call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(services["count"], 0, "{services}");
    node.call("GET", "/nacos/v1/ns/service?serviceName=utf")
        .expect(404);
    let namespaces = node
        .call("GET", "/nacos/v1/console/namespaces")
        .expect(200)
        .body;
    assert!(!namespaces.contains("\"utf\""), "{namespaces}");
    // The same request in clean UTF-8 goes through.
    node.call(
        "POST",
        &format!("/nacos/v1/ns/instance?serviceName=utf&{base}&metadata=k%3D%C3%A9"),
    )
    .expect(200);
    assert_eq!(
        list(&node, "serviceName=utf")["hosts"][0]["metadata"]["k"],
        "\u{e9}"
    );
}

/// Sends one request by hand on its own connection and returns its status: for
/// addresses the harness's address check cannot read, such as the IPv4-mapped IPv6
/// spelling of a loopback address (`::ffff:127.0.0.1` is 127.0.0.1, but the check
/// takes every IPv6 address but `::1` for a foreign one).
fn by_hand(node: &Node, method: &str, path_and_query: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "{method} {path_and_query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        node.token()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    (status, answer)
}

#[test]
fn instance_addresses_are_canonical_ipv4_normal_ipv6_or_host_names() {
    let node = Node::start();
    // Leading zeros are tried on a loopback address: 127.000.000.001 is 127.0.0.1 read
    // as decimal and as octal alike, so it would go nowhere if accepted by mistake.
    // `1.1.1`, which `inet_aton` reads as an address off this machine, is never
    // registered persistent: a mistaken acceptance would have the leader probe it.
    for bad in ["999.1.1.1", "1.1.1", "127.000.000.001"] {
        let refused = |method: &str, path: String, needle: &str| {
            let r = node.call(method, &path);
            assert!(
                r.status == 400 && r.body.contains(needle) && r.body.contains(bad),
                "{method} {path}: {} {}",
                r.status,
                r.body
            );
        };
        refused(
            "POST",
            format!("/nacos/v1/ns/instance?serviceName=addr&ip={bad}&port=80"),
            "'ip'",
        );
        if bad != "1.1.1" {
            refused(
                "POST",
                format!("/nacos/v1/ns/instance?serviceName=addr&ip={bad}&port=80&ephemeral=false"),
                "'ip'",
            );
        }
        refused(
            "POST",
            format!("/nacos/v2/ns/instance?serviceName=addr&ip={bad}&port=80"),
            "'ip'",
        );
        refused(
            "PUT",
            format!("/nacos/v1/ns/instance/beat?serviceName=addr&ip={bad}&port=80"),
            "'ip'",
        );
        let beat = enc(&format!(
            r#"{{"ip":"{bad}","port":80,"cluster":"DEFAULT"}}"#
        ));
        refused(
            "PUT",
            format!("/nacos/v1/ns/instance/beat?serviceName=addr&beat={beat}"),
            "'beat.ip'",
        );
        refused(
            "PUT",
            format!("/nacos/v2/ns/instance/beat?serviceName=addr&beat={beat}"),
            "'beat.ip'",
        );
    }
    let services = node
        .call("GET", "/nacos/v1/ns/service/list?pageNo=1&pageSize=100")
        .expect(200)
        .json();
    assert_eq!(services["count"], 0, "{services}");

    // IPv6 is kept in one spelling: the uncompressed form registers "::1", and any
    // spelling finds and removes it.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=six&ip=0:0:0:0:0:0:0:1&port=81",
    )
    .expect(200);
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=six&ip=0000:0000:0000:0000:0000:0000:0000:0001&port=81",
    )
    .expect(200);
    let v = list(&node, "serviceName=six");
    assert_eq!(v["hosts"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["hosts"][0]["ip"], "::1");
    node.call(
        "GET",
        "/nacos/v1/ns/instance?serviceName=six&ip=0:0::1&port=81",
    )
    .expect(200);
    // An IPv4-mapped address is the IPv4 address it maps.
    let (status, answer) = by_hand(
        &node,
        "POST",
        "/nacos/v1/ns/instance?serviceName=six&ip=::FFFF:127.0.0.1&port=82",
    );
    assert_eq!(status, 200, "{answer}");
    let v = list(&node, "serviceName=six");
    let mut ips: Vec<String> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]))
        .collect();
    ips.sort();
    assert_eq!(ips, ["127.0.0.1:82", "::1:81"]);
    let (status, answer) = by_hand(
        &node,
        "PUT",
        "/nacos/v1/ns/instance/beat?serviceName=six&ip=::ffff:7f00:1&port=82",
    );
    assert!(status == 200 && answer.contains("10200"), "{answer}");
    node.call(
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=six&ip=0:0:0:0:0:0:0:1&port=81",
    )
    .expect(200);
    let (status, _) = by_hand(
        &node,
        "DELETE",
        "/nacos/v1/ns/instance?serviceName=six&ip=::ffff:127.0.0.1&port=82",
    );
    assert_eq!(status, 200);
    assert_eq!(list(&node, "serviceName=six")["hosts"], json!([]));

    // Host names stay, when no resolver could take them for an address.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=named&ip=localhost&port=83",
    )
    .expect(200);
    assert_eq!(
        list(&node, "serviceName=named")["hosts"][0]["ip"],
        "localhost"
    );
    for bad in ["host.123", "0x7f000001", "under_score.local"] {
        let r = node.call(
            "POST",
            &format!("/nacos/v1/ns/instance?serviceName=named&ip={bad}&port=84"),
        );
        assert!(
            r.status == 400 && r.body.contains("'ip'"),
            "{bad}: {}",
            r.body
        );
    }
}
