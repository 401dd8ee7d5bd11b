//! Eureka's server API on roster's HTTP port (`/eureka/...`, `/nacos/eureka/...`): the
//! real Java Eureka client (Spring Cloud Netflix 2025.0.0's `DiscoveryClient`, Jersey 3
//! transport; `tests/clients/java/eureka/`, `EurekaInstances`) registers, renews, changes
//! status and cancels through it with HTTP Basic credentials in its `defaultZone`, and a
//! second, fetching client of the same program discovers through it (full fetch, then
//! deltas checked against `apps__hashcode`); what roster then holds is judged through
//! Nacos v1. Plain HTTP covers the answers' shapes, bad input, credentials and grants,
//! the audit, and the namespace and group flags.

use std::time::Duration;

use base64::Engine;
use roster_tests::{
    enc, eventually, json, unique, Cluster, Node, NodeOptions, Resp, Value, ADMIN_PASSWORD,
};

use crate::authz::grant;
use crate::java_clients::{java, Running};

/// A JVM with Spring's Eureka client gets this long to start on a loaded 2-core machine.
const START: Duration = Duration::from_secs(90);
/// How long a command of the instance program may take (it waits for the server).
const COMMAND: Duration = Duration::from_secs(40);

/// `Authorization: Basic` for `user:password`.
fn basic(user: &str, password: &str) -> String {
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// The admin's Basic credentials.
fn admin() -> String {
    basic("nacos", ADMIN_PASSWORD)
}

/// A request to the Eureka API with `auth` (an `Authorization` value, or none) and a
/// JSON body (or none), answered as JSON is asked for.
fn eureka(node: &Node, method: &str, path: &str, auth: Option<&str>, body: Option<&Value>) -> Resp {
    let Some(body) = body else {
        let mut headers = vec![("accept", "application/json")];
        if let Some(a) = auth {
            headers.push(("authorization", a));
        }
        return node.raw(method, path, &headers, None);
    };
    // Every address registered here is loopback.
    let ip = body["instance"]["ipAddr"].as_str().unwrap_or("127.0.0.1");
    assert!(ip.starts_with("127."), "not loopback: {ip}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut req = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", node.addr()))
        .header("content-type", "application/json")
        .header("accept", "application/json");
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let req = req.body(body.to_string()).expect("request");
    let mut resp = agent
        .run(req)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    Resp {
        status: resp.status().as_u16(),
        body: resp.body_mut().read_to_string().unwrap_or_default(),
        headers: resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
    }
}

/// A registration body as the Java client sends it, with a `lease` of seconds renewed
/// every `renew` seconds.
fn instance(app: &str, id: &str, ip: &str, port: u16, renew: u64, lease: u64) -> Value {
    json!({"instance": {
        "instanceId": id, "app": app, "ipAddr": ip, "hostName": ip,
        "status": "UP", "overriddenStatus": "UNKNOWN",
        "port": {"$": port, "@enabled": "true"},
        "securePort": {"$": 443, "@enabled": "false"},
        "countryId": 1,
        "dataCenterInfo": {"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
        "leaseInfo": {"renewalIntervalInSecs": renew, "durationInSecs": lease},
        "metadata": {"version": "1.2", "@class": "java.util.Collections$EmptyMap"},
        "vipAddress": app.to_lowercase(), "secureVipAddress": app.to_lowercase(),
        "lastDirtyTimestamp": "1700000000000",
    }})
}

/// The hosts of Nacos v1's list of `service` (namespace `ns`, group `group`).
fn nacos_hosts(node: &Node, ns: &str, group: &str, service: &str) -> Vec<Value> {
    let path = format!(
        "/nacos/v1/ns/instance/list?namespaceId={ns}&groupName={group}&serviceName={service}"
    );
    let list = node.call("GET", &path).expect(200).json();
    list["hosts"].as_array().cloned().unwrap_or_default()
}

/// Nacos v1's view of the instance at `ip:port` of `service` in `public`.
fn nacos_instance(node: &Node, service: &str, ip: &str, port: u16) -> Option<Value> {
    let path = format!("/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port={port}");
    let r = node.call("GET", &path);
    (r.status == 200).then(|| r.json())
}

/// Sends `command` to the instance program and waits for its `step` about `id`, printed
/// after the command (a scenario repeats steps: `discover` of one id more than once).
fn act(program: &mut Running, command: &str, step: &str, id: &str) -> Value {
    let before = program.drain().len();
    program.send(command);
    // `wait_for` offers every line once, in order: the count is the line's index.
    let offered = std::cell::Cell::new(0);
    let line = program.wait_for(&format!("{step} {id}"), COMMAND, |v| {
        let index = offered.replace(offered.get() + 1);
        index >= before && (v["ok"] == false || (v["step"] == step && v["id"] == id))
    });
    assert_eq!(line["ok"], true, "{command}: {line}");
    line
}

#[test]
fn eureka_face_real_java_client_registers_renews_changes_and_discovers() {
    let node = Node::start();
    let server = format!(
        "http://nacos:{ADMIN_PASSWORD}@127.0.0.1:{}/eureka/",
        node.http_port
    );
    let mut cmd = java("eureka", "org.roster.clients.eureka.EurekaInstances");
    cmd.args(["--server", &server, "--seconds", "240"]);
    let mut program = Running::start(cmd, "Eureka instances");
    program.wait_step("started", START);

    // The client's app name is upper-cased by Eureka; roster holds it lower-cased.
    act(
        &mut program,
        "register ORDER-SERVICE 127.41.0.1 8080 order-1 zone=az1 version=1.2",
        "registered",
        "order-1",
    );
    let hosts = nacos_hosts(&node, "public", "DEFAULT_GROUP", "order-service");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let h = &hosts[0];
    assert_eq!(
        (h["ip"].as_str(), h["port"].as_u64()),
        (Some("127.41.0.1"), Some(8080))
    );
    assert_eq!(h["healthy"], true, "{h}");
    assert_eq!(h["enabled"], true, "{h}");
    assert_eq!(h["clusterName"], "az1", "metadata.zone is the cluster: {h}");
    let m = &h["metadata"];
    assert_eq!(m["version"], "1.2", "{h}");
    assert_eq!(m["eureka.instanceId"], "order-1", "{h}");
    assert_eq!(m["eureka.status"], "UP", "{h}");
    // The lease the client asked for (1 s renewals, 3 s lease) is the beat timing.
    assert_eq!(m["preserved.heart.beat.interval"], "1000", "{h}");
    assert_eq!(m["preserved.ip.delete.timeout"], "3000", "{h}");

    // The fetching client sees it, metadata and all.
    let seen = act(
        &mut program,
        "discover ORDER-SERVICE order-1 UP",
        "discovered",
        "order-1",
    );
    assert_eq!(seen["ip"], "127.41.0.1", "{seen}");
    assert_eq!(seen["port"], 8080, "{seen}");
    assert_eq!(seen["metadata"]["version"], "1.2", "{seen}");
    assert!(
        seen["metadata"].get("eureka.instanceId").is_none(),
        "{seen}"
    );

    // Renewals keep it: well past its 3 s lease it is still held, renewed lately.
    let registered = eureka(
        &node,
        "GET",
        "/eureka/apps/ORDER-SERVICE/order-1",
        Some(&admin()),
        None,
    )
    .expect(200)
    .json()["instance"]["leaseInfo"]["registrationTimestamp"]
        .as_u64()
        .unwrap();
    eventually(Duration::from_secs(20), || {
        let r = eureka(
            &node,
            "GET",
            "/eureka/apps/ORDER-SERVICE/order-1",
            Some(&admin()),
            None,
        );
        let lease = &r.expect(200).json()["instance"]["leaseInfo"];
        let renewed = lease["lastRenewalTimestamp"].as_u64().unwrap_or(0);
        (renewed > registered + 6_000)
            .then_some(())
            .ok_or_else(|| format!("last renewal {renewed}, registered {registered}"))
    });
    let held = nacos_instance(&node, "order-service", "127.41.0.1", 8080).expect("held");
    assert_eq!(held["healthy"], true, "{held}");

    // The client's own DOWN: out of consumers' lists (disabled), DOWN to Eureka.
    act(&mut program, "status order-1 DOWN", "status", "order-1");
    let held = nacos_instance(&node, "order-service", "127.41.0.1", 8080).expect("held");
    assert_eq!(held["enabled"], false, "DOWN is not served: {held}");
    assert_eq!(held["metadata"]["eureka.status"], "DOWN", "{held}");
    act(
        &mut program,
        "discover ORDER-SERVICE order-1 DOWN",
        "discovered",
        "order-1",
    );
    act(&mut program, "status order-1 UP", "status", "order-1");
    let held = nacos_instance(&node, "order-service", "127.41.0.1", 8080).expect("held");
    assert_eq!(held["enabled"], true, "{held}");

    // An operator's override (the program PUTs .../status with Basic credentials), kept
    // over the client's renewals and registrations, then removed.
    act(
        &mut program,
        "override order-1 OUT_OF_SERVICE",
        "override",
        "order-1",
    );
    let held = nacos_instance(&node, "order-service", "127.41.0.1", 8080).expect("held");
    assert_eq!(held["enabled"], false, "{held}");
    act(
        &mut program,
        "discover ORDER-SERVICE order-1 OUT_OF_SERVICE",
        "discovered",
        "order-1",
    );
    eureka(
        &node,
        "DELETE",
        "/eureka/apps/ORDER-SERVICE/order-1/status",
        Some(&admin()),
        None,
    )
    .expect(200);
    act(
        &mut program,
        "discover ORDER-SERVICE order-1 UP",
        "discovered",
        "order-1",
    );

    // A client that stops renewing: removed once its 3 s lease lapses.
    act(
        &mut program,
        "register ORDER-SERVICE 127.41.0.2 8080 order-2",
        "registered",
        "order-2",
    );
    act(
        &mut program,
        "discover ORDER-SERVICE order-2 UP",
        "discovered",
        "order-2",
    );
    act(
        &mut program,
        "stop-renewing order-2",
        "stopped-renewing",
        "order-2",
    );
    let started = std::time::Instant::now();
    eventually(Duration::from_secs(20), || {
        let hosts = nacos_hosts(&node, "public", "DEFAULT_GROUP", "order-service");
        let left = hosts.iter().any(|h| h["ip"] == "127.41.0.2");
        (!left)
            .then_some(())
            .ok_or_else(|| format!("still held: {hosts:?}"))
    });
    // 3 s lease, a sweep every second, room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    eureka(
        &node,
        "GET",
        "/eureka/apps/ORDER-SERVICE/order-2",
        Some(&admin()),
        None,
    )
    .expect(404);
    act(
        &mut program,
        "discover ORDER-SERVICE order-2 absent",
        "discovered",
        "order-2",
    );

    // A cancel: gone from both faces.
    act(&mut program, "cancel order-1", "cancelled", "order-1");
    assert!(nacos_instance(&node, "order-service", "127.41.0.1", 8080).is_none());
    act(
        &mut program,
        "discover ORDER-SERVICE order-1 absent",
        "discovered",
        "order-1",
    );
    program.close_stdin();
    program.wait_step("stopped", COMMAND);
}

/// The Python client's venv (`scripts/test` makes it).
fn python() -> std::path::PathBuf {
    let python = roster_tests::workspace_root().join("tests/clients/python/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    python
}

#[test]
fn eureka_face_py_eureka_client_registers_discovers_and_cancels() {
    let node = Node::start();
    // Another application, registered through Nacos: the Python client must find it.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?serviceName=inventory&ip=127.41.7.1&port=9000",
    )
    .expect(200);
    let script = roster_tests::workspace_root().join("tests/clients/python/eureka_flow.py");
    let mut cmd = std::process::Command::new(python());
    cmd.arg(script).args([
        "--server",
        &format!(
            "http://nacos:{ADMIN_PASSWORD}@127.0.0.1:{}/eureka/",
            node.http_port
        ),
        "--app",
        "py-service",
        "--ip",
        "127.41.7.2",
        "--port",
        "8080",
        "--other",
        "INVENTORY",
    ]);
    let mut program = Running::start(cmd, "py_eureka_client");
    let seen = program.wait_step("discovered", COMMAND);
    let own = &seen["own"][0];
    assert_eq!(own["ip"], "127.41.7.2", "{seen}");
    assert_eq!(own["status"], "UP", "{seen}");
    assert_eq!(own["metadata"]["lang"], "python", "{seen}");
    let other = &seen["other"][0];
    assert_eq!(
        (&other["ip"], &other["port"]),
        (&json!("127.41.7.1"), &json!(9000))
    );
    // Held as the lower-cased service, with the lease it asked for, kept by its renewals.
    let hosts = nacos_hosts(&node, "public", "DEFAULT_GROUP", "py-service");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(hosts[0]["metadata"]["preserved.ip.delete.timeout"], "3000");
    let since = std::time::Instant::now();
    eventually(Duration::from_secs(20), || {
        let held = nacos_instance(&node, "py-service", "127.41.7.2", 8080)
            .ok_or_else(|| "the renewing instance is gone".to_string())?;
        let alive = held["healthy"] == true && since.elapsed() > Duration::from_secs(5);
        alive.then_some(()).ok_or_else(|| held.to_string())
    });
    // Stopping cancels its lease.
    program.send("stop");
    program.wait_step("stopped", COMMAND);
    assert!(nacos_hosts(&node, "public", "DEFAULT_GROUP", "py-service").is_empty());
}

#[test]
fn eureka_face_http_shapes_renewals_bad_input_and_nacos_instances() {
    let node = Node::start();
    let auth = admin();
    let a = Some(auth.as_str());
    // A Nacos v1 instance shows in Eureka's registry, its service upper-cased.
    node.call(
        "POST",
        &format!(
            "/nacos/v1/ns/instance?serviceName=stock-service&ip=127.41.1.1&port=9090&metadata={}",
            enc(r#"{"tier":"gold"}"#)
        ),
    )
    .expect(200);
    let apps = eureka(&node, "GET", "/eureka/apps/", a, None)
        .expect(200)
        .json();
    let doc = &apps["applications"];
    let version = doc["versions__delta"].as_str().unwrap_or_default();
    assert!(version.parse::<u64>().is_ok_and(|v| v > 0), "{apps}");
    assert_eq!(doc["apps__hashcode"], "UP_1_", "{apps}");
    let app = &doc["application"][0];
    assert_eq!(app["name"], "STOCK-SERVICE", "{apps}");
    let i = &app["instance"][0];
    assert_eq!(i["instanceId"], "127.41.1.1:9090", "{i}");
    assert_eq!(i["app"], "STOCK-SERVICE", "{i}");
    assert_eq!(i["ipAddr"], "127.41.1.1", "{i}");
    assert_eq!(i["status"], "UP", "{i}");
    assert_eq!(i["overriddenStatus"], "UNKNOWN", "{i}");
    assert_eq!(i["port"], json!({"$": 9090, "@enabled": "true"}), "{i}");
    assert_eq!(i["securePort"]["@enabled"], "false", "{i}");
    assert_eq!(i["dataCenterInfo"]["name"], "MyOwn", "{i}");
    assert_eq!(i["metadata"], json!({"tier": "gold"}), "{i}");
    assert_eq!(i["vipAddress"], "stock-service", "{i}");
    assert_eq!(i["leaseInfo"]["renewalIntervalInSecs"], 5, "{i}");
    assert_eq!(i["isCoordinatingDiscoveryServer"], "false", "{i}");
    for key in [
        "lastUpdatedTimestamp",
        "lastDirtyTimestamp",
        "actionType",
        "healthCheckUrl",
    ] {
        assert!(i[key].is_string(), "{key}: {i}");
    }
    // Eureka's XML unless JSON is asked for (py_eureka_client asks for nothing).
    for accept in [None, Some("*/*"), Some("application/xml")] {
        let mut headers = vec![("authorization", auth.as_str())];
        if let Some(accept) = accept {
            headers.push(("accept", accept));
        }
        let xml = node.raw("GET", "/eureka/apps/", &headers, None).expect(200);
        assert_eq!(
            xml.header("content-type"),
            Some("application/xml"),
            "{accept:?}"
        );
        for part in [
            "<applications>",
            "<name>STOCK-SERVICE</name>",
            r#"<port enabled="true">9090</port>"#,
            "<overriddenstatus>UNKNOWN</overriddenstatus>",
            "<metadata><tier>gold</tier></metadata>",
            "<apps__hashcode>UP_1_</apps__hashcode>",
        ] {
            assert!(xml.body.contains(part), "{part}: {}", xml.body);
        }
    }
    // The same under /nacos/eureka/, by VIP, by id, in the delta.
    let mse = eureka(&node, "GET", "/nacos/eureka/apps", a, None)
        .expect(200)
        .json();
    assert_eq!(
        mse["applications"]["application"][0]["name"],
        "STOCK-SERVICE"
    );
    let vip = eureka(&node, "GET", "/eureka/vips/stock-service", a, None)
        .expect(200)
        .json();
    assert_eq!(
        vip["applications"]["application"][0]["instance"][0]["ipAddr"],
        "127.41.1.1"
    );
    let svip = eureka(&node, "GET", "/eureka/svips/nothing-here", a, None)
        .expect(200)
        .json();
    assert_eq!(svip["applications"]["application"], json!([]), "{svip}");
    let by_id = eureka(&node, "GET", "/eureka/instances/127.41.1.1:9090", a, None).expect(200);
    assert_eq!(by_id.json()["instance"]["app"], "STOCK-SERVICE");
    let delta = eureka(&node, "GET", "/eureka/apps/delta", a, None)
        .expect(200)
        .json();
    let changed = &delta["applications"]["application"][0]["instance"][0];
    assert_eq!(changed["actionType"], "MODIFIED", "{delta}");
    assert_eq!(delta["applications"]["apps__hashcode"], "UP_1_", "{delta}");

    // Register over plain HTTP: 204; renewals 200; an unknown instance's renewal 404 (the
    // client registers again); a newer lastDirtyTimestamp too.
    let body = instance("PAY", "pay-1", "127.41.1.2", 7070, 30, 90);
    eureka(&node, "POST", "/eureka/apps/PAY", a, Some(&body)).expect(204);
    eureka(
        &node,
        "PUT",
        "/eureka/apps/PAY/pay-1?status=UP&lastDirtyTimestamp=1700000000000",
        a,
        None,
    )
    .expect(200);
    eureka(&node, "PUT", "/eureka/apps/PAY/pay-9?status=UP", a, None).expect(404);
    eureka(
        &node,
        "PUT",
        "/eureka/apps/PAY/pay-1?lastDirtyTimestamp=1800000000000",
        a,
        None,
    )
    .expect(404);
    let one = eureka(&node, "GET", "/eureka/apps/pay", a, None)
        .expect(200)
        .json();
    assert_eq!(one["application"]["name"], "PAY", "{one}");
    let shown = &one["application"]["instance"][0];
    assert_eq!(shown["metadata"], json!({"version": "1.2"}), "{shown}");
    assert_eq!(shown["leaseInfo"]["durationInSecs"], 90, "{shown}");
    assert_eq!(shown["lastDirtyTimestamp"], "1700000000000", "{shown}");
    eureka(&node, "GET", "/eureka/apps/NOPE", a, None).expect(404);
    // Metadata updates add keys; reserved keys are refused.
    eureka(
        &node,
        "PUT",
        "/eureka/apps/PAY/pay-1/metadata?owner=team-a",
        a,
        None,
    )
    .expect(200);
    let held = nacos_instance(&node, "pay", "127.41.1.2", 7070).expect("held");
    assert_eq!(held["metadata"]["owner"], "team-a", "{held}");
    let r = eureka(
        &node,
        "PUT",
        "/eureka/apps/PAY/pay-1/metadata?eureka.status=UP",
        a,
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    // A status override needs a status.
    let r = eureka(
        &node,
        "PUT",
        "/eureka/apps/PAY/pay-1/status?value=SIDEWAYS",
        a,
        None,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("'value'"), "{}", r.body);

    // Bad bodies: 400 naming the field, nothing registered.
    let mut no_ip = instance("PAY", "pay-2", "127.41.1.3", 7070, 30, 90);
    no_ip["instance"].as_object_mut().unwrap().remove("ipAddr");
    let mut bad_port = instance("PAY", "pay-2", "127.41.1.3", 7070, 30, 90);
    bad_port["instance"]["port"]["$"] = json!(70000);
    let refused = [
        (json!({"app": "PAY"}), "'instance'"),
        (no_ip, "'instance.ipAddr'"),
        (
            instance("OTHER", "pay-2", "127.41.1.3", 7070, 30, 90),
            "'instance.app'",
        ),
        (bad_port, "'instance.port'"),
    ];
    for (body, field) in refused {
        let r = eureka(&node, "POST", "/eureka/apps/PAY", a, Some(&body));
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(r.body.contains(field), "{field}: {}", r.body);
    }
    assert!(nacos_instance(&node, "pay", "127.41.1.3", 7070).is_none());
    // The body limit of every route (--max-body-bytes, 1 MiB), by hand (the server
    // answers without reading on, so a client still sending may see the connection
    // close): an announced oversized body, then a chunked one cut as it is read.
    for chunked in [false, true] {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(node.addr()).unwrap();
        let length = if chunked {
            "Transfer-Encoding: chunked".to_string()
        } else {
            format!("Content-Length: {}", 2 * 1024 * 1024)
        };
        let head = format!(
            "POST /eureka/apps/PAY HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n{length}\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut writer = s.try_clone().unwrap();
        let sending = std::thread::spawn(move || {
            let chunk = vec![b' '; 64 * 1024];
            for _ in 0..32 {
                let sent = if chunked {
                    writer.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                } else {
                    Ok(())
                };
                if sent.is_err() || writer.write_all(&chunk).is_err() {
                    return;
                }
                if chunked && writer.write_all(b"\r\n").is_err() {
                    return;
                }
            }
            let _ = writer.write_all(b"0\r\n\r\n");
        });
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut answer = [0u8; 64];
        let n = s.read(&mut answer).unwrap();
        let status = String::from_utf8_lossy(&answer[..n]).into_owned();
        assert!(
            status.starts_with("HTTP/1.1 413"),
            "chunked {chunked}: {status}"
        );
        drop(s);
        let _ = sending.join();
    }
    // A method a path does not answer: 405.
    assert_eq!(eureka(&node, "POST", "/eureka/apps", a, None).status, 405);

    // Cancel: 200, then 404.
    eureka(&node, "DELETE", "/eureka/apps/PAY/pay-1", a, None).expect(200);
    eureka(&node, "DELETE", "/eureka/apps/PAY/pay-1", a, None).expect(404);
    assert!(nacos_instance(&node, "pay", "127.41.1.2", 7070).is_none());
}

#[test]
fn eureka_face_an_instance_that_stops_renewing_is_removed_on_time() {
    let node = Node::start();
    let auth = admin();
    let body = instance("LAPSE", "lapse-1", "127.41.2.1", 8080, 1, 2);
    eureka(
        &node,
        "POST",
        "/eureka/apps/LAPSE",
        Some(&auth),
        Some(&body),
    )
    .expect(204);
    let registered = std::time::Instant::now();
    eventually(Duration::from_secs(15), || {
        let r = eureka(
            &node,
            "GET",
            "/eureka/apps/LAPSE/lapse-1",
            Some(&auth),
            None,
        );
        (r.status == 404)
            .then_some(())
            .ok_or_else(|| format!("{} {}", r.status, r.body))
    });
    // A 2 s lease, swept every second; never before the lease lapsed.
    let took = registered.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert!(nacos_hosts(&node, "public", "DEFAULT_GROUP", "lapse").is_empty());
}

#[test]
fn eureka_face_authz_basic_credentials_and_grants() {
    let node = Node::start();
    let body = instance("GRANTED", "g-1", "127.41.3.1", 8080, 30, 90);
    // No credentials: 401, asking for Basic; a wrong password: refused.
    let r = eureka(&node, "POST", "/eureka/apps/GRANTED", None, Some(&body));
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Basic")));
    assert_eq!(eureka(&node, "GET", "/eureka/apps", None, None).status, 401);
    let wrong = basic("nacos", "not-the-password");
    let r = eureka(&node, "GET", "/eureka/apps", Some(&wrong), None);
    assert!(matches!(r.status, 401 | 403), "{} {}", r.status, r.body);

    // A reader of `granted` may read it and nothing else, and write nothing.
    let user = unique("eureka-reader");
    let password = "reader-pass-1";
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={password}"),
    )
    .expect(200);
    grant(
        &node,
        &user,
        &format!("{user}-r"),
        ":DEFAULT_GROUP:naming/granted",
        "r",
    );
    let reader = basic(&user, password);
    eureka(
        &node,
        "POST",
        "/eureka/apps/GRANTED",
        Some(&admin()),
        Some(&body),
    )
    .expect(204);
    let other = instance("HIDDEN", "h-1", "127.41.3.2", 8080, 30, 90);
    eureka(
        &node,
        "POST",
        "/eureka/apps/HIDDEN",
        Some(&admin()),
        Some(&other),
    )
    .expect(204);
    let r = eureka(
        &node,
        "POST",
        "/eureka/apps/GRANTED",
        Some(&reader),
        Some(&body),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    eureka(
        &node,
        "PUT",
        "/eureka/apps/GRANTED/g-1",
        Some(&reader),
        None,
    )
    .expect(403);
    eureka(
        &node,
        "DELETE",
        "/eureka/apps/GRANTED/g-1",
        Some(&reader),
        None,
    )
    .expect(403);
    eureka(
        &node,
        "GET",
        "/eureka/apps/GRANTED/g-1",
        Some(&reader),
        None,
    )
    .expect(200);
    eureka(&node, "GET", "/eureka/apps/HIDDEN", Some(&reader), None).expect(403);
    // The registry and the VIP lookups list only what the reader may read.
    let apps = eureka(&node, "GET", "/eureka/apps", Some(&reader), None)
        .expect(200)
        .json();
    let names: Vec<&str> = apps["applications"]["application"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["GRANTED"], "{apps}");
    assert_eq!(apps["applications"]["apps__hashcode"], "UP_1_", "{apps}");
    let admins = eureka(&node, "GET", "/eureka/apps", Some(&admin()), None)
        .expect(200)
        .json();
    assert_eq!(
        admins["applications"]["apps__hashcode"], "UP_2_",
        "{admins}"
    );
    let hidden = eureka(&node, "GET", "/eureka/vips/hidden", Some(&reader), None)
        .expect(200)
        .json();
    assert_eq!(hidden["applications"]["application"], json!([]), "{hidden}");
}

#[test]
fn eureka_face_audit_records_writes_not_renewals() {
    let node = Node::start();
    let auth = admin();
    let body = instance("AUDITED", "a-1", "127.41.4.1", 8080, 30, 90);
    eureka(
        &node,
        "POST",
        "/eureka/apps/AUDITED",
        Some(&auth),
        Some(&body),
    )
    .expect(204);
    eureka(&node, "PUT", "/eureka/apps/AUDITED/a-1", Some(&auth), None).expect(200);
    eureka(&node, "GET", "/eureka/apps", Some(&auth), None).expect(200);
    eureka(
        &node,
        "DELETE",
        "/eureka/apps/AUDITED/a-1",
        Some(&auth),
        None,
    )
    .expect(200);
    let entries = eventually(Duration::from_secs(10), || {
        let trail = node
            .call("GET", "/api/v1/audit?user=nacos")
            .expect(200)
            .json();
        let eureka: Vec<Value> = trail["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["face"] == "eureka")
            .cloned()
            .collect();
        (eureka.len() >= 2)
            .then_some(eureka)
            .ok_or_else(|| trail.to_string())
    });
    let actions: Vec<(&str, u64)> = entries
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["status"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        actions,
        [
            ("DELETE /eureka/apps/{app}/{id}", 200),
            ("POST /eureka/apps/{app}", 204)
        ],
        "{entries:?}"
    );
    assert_eq!(entries[1]["resource"], "eureka:apps/AUDITED", "{entries:?}");
}

#[test]
fn eureka_face_namespace_and_group_flags() {
    let node = Node::start_with(NodeOptions {
        args: [
            "--eureka-namespace",
            "eureka-dev",
            "--eureka-group",
            "EUREKA",
        ]
        .map(String::from)
        .to_vec(),
        ..NodeOptions::default()
    });
    let auth = admin();
    let body = instance("PLACED", "p-1", "127.41.5.1", 8080, 30, 90);
    eureka(
        &node,
        "POST",
        "/eureka/apps/PLACED",
        Some(&auth),
        Some(&body),
    )
    .expect(204);
    let hosts = nacos_hosts(&node, "eureka-dev", "EUREKA", "placed");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert!(nacos_hosts(&node, "public", "DEFAULT_GROUP", "placed").is_empty());
    // A Nacos instance of another group is not Eureka's.
    node.call(
        "POST",
        "/nacos/v1/ns/instance?namespaceId=eureka-dev&serviceName=elsewhere&ip=127.41.5.2&port=1",
    )
    .expect(200);
    let apps = eureka(&node, "GET", "/eureka/apps", Some(&auth), None)
        .expect(200)
        .json();
    assert_eq!(
        apps["applications"]["application"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{apps}"
    );
}

#[test]
fn eureka_face_on_three_nodes_renewals_anywhere_keep_an_instance_everywhere() {
    let c = Cluster::start(3, &[]);
    let auth = admin();
    let a = Some(auth.as_str());
    let path = "/eureka/apps/CLUSTERED/c-1";
    let body = instance("CLUSTERED", "c-1", "127.41.8.1", 8080, 1, 3);
    eureka(
        &c.nodes[0],
        "POST",
        "/eureka/apps/CLUSTERED",
        a,
        Some(&body),
    )
    .expect(204);
    // Replicated by Distro to every member.
    for node in &c.nodes {
        eventually(Duration::from_secs(10), || {
            let r = eureka(node, "GET", path, a, None);
            (r.status == 200).then_some(()).ok_or(r.body)
        });
    }
    // Renewed through each member in turn (the non-owners forward the beat to the
    // address's owner) well past the 3 s lease: held everywhere, healthy.
    let until = std::time::Instant::now() + Duration::from_secs(7);
    let mut turn = 0;
    while std::time::Instant::now() < until {
        eureka(&c.nodes[turn % 3], "PUT", path, a, None).expect(200);
        turn += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    for node in &c.nodes {
        let shown = eureka(node, "GET", path, a, None).expect(200).json();
        assert_eq!(shown["instance"]["status"], "UP", "{shown}");
    }
    // Unrenewed, it is removed from every member.
    for node in &c.nodes {
        eventually(Duration::from_secs(20), || {
            let r = eureka(node, "GET", path, a, None);
            (r.status == 404).then_some(()).ok_or(r.body)
        });
    }
}
