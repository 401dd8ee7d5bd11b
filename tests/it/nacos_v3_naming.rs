//! Nacos 3's v3 naming API against a real node with auth on: the client API
//! (`/nacos/v3/client/ns/instance*`, `/nacos/v3/client/cs/config`) and the naming admin
//! API (`/nacos/v3/admin/ns/...`). Every route's envelope and the fields Nacos 3's
//! maintainer client reads, a 400 naming the field for bad input, and one registry
//! underneath: what v3 registers, v1 lists.

use std::net::UdpSocket;

use roster_tests::{enc, json, unique, Node, Resp, Value};

const CLIENT_INSTANCE: &str = "/nacos/v3/client/ns/instance";
const CLIENT_CONFIG: &str = "/nacos/v3/client/cs/config";
const SERVICE: &str = "/nacos/v3/admin/ns/service";
const INSTANCE: &str = "/nacos/v3/admin/ns/instance";
const BATCH: &str = "/nacos/v3/admin/ns/instance/metadata/batch";

/// The `data` of a successful answer, after checking the envelope.
#[track_caller]
fn data(r: Resp) -> Value {
    let body = r.expect(200).json();
    assert_eq!(body["code"], 0, "{body}");
    assert_eq!(body["message"], "success", "{body}");
    body["data"].clone()
}

/// A failure's body, after checking its status and code.
#[track_caller]
fn refused(r: Resp, status: u16, code: u64) -> Value {
    let body = r.expect(status).json();
    assert_eq!(body["code"], code, "{body}");
    body
}

/// A 400 whose body names `field`.
#[track_caller]
fn names_field(r: Resp, field: &str) {
    let body = r.expect(400).json();
    assert!(
        body["data"].as_str().unwrap_or("").contains(field),
        "no '{field}' in {body}"
    );
}

#[test]
fn the_client_api_registers_beats_lists_deregisters_and_reads_configs() {
    let node = Node::start();
    let svc = unique("v3client");
    let reg = format!("serviceName={svc}&groupName=G&ip=127.1.0.2&port=9000&clusterName=C1");

    // Register; data is "ok".
    let r = node.call_form("POST", CLIENT_INSTANCE, &format!("{reg}&weight=2"));
    assert_eq!(
        r.expect(200).json(),
        json!({"code": 0, "message": "success", "data": "ok"})
    );
    // A beat of a known instance is "ok"; of an unknown one, 404 with code 21003.
    assert_eq!(
        data(node.call_form("POST", CLIENT_INSTANCE, &format!("{reg}&heartBeat=true"))),
        "ok"
    );
    refused(
        node.call_form(
            "POST",
            CLIENT_INSTANCE,
            &format!("serviceName={svc}&groupName=G&ip=127.1.0.2&port=9999&heartBeat=true"),
        ),
        404,
        21003,
    );
    // Bad input names its field and registers nothing.
    names_field(
        node.call_form(
            "POST",
            CLIENT_INSTANCE,
            &format!("serviceName={svc}&groupName=G&ip=127.1.0.2&port=70000"),
        ),
        "port",
    );
    names_field(
        node.call_form(
            "POST",
            CLIENT_INSTANCE,
            &format!("serviceName={svc}&port=1"),
        ),
        "ip",
    );

    // The list is a list of Instance.
    let list = format!("{CLIENT_INSTANCE}/list?serviceName={svc}&groupName=G");
    let hosts = data(node.call("GET", &list));
    let hosts = hosts.as_array().expect("a list");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let h = &hosts[0];
    assert_eq!(h["ip"], "127.1.0.2");
    assert_eq!(h["port"], 9000);
    assert_eq!(h["clusterName"], "C1");
    assert_eq!(h["weight"], 2.0);
    assert_eq!(h["healthy"], true);
    assert_eq!(h["enabled"], true);
    assert_eq!(h["ephemeral"], true);
    assert_eq!(h["serviceName"], format!("G@@{svc}"));
    assert!(h["instanceId"].is_string(), "{h}");
    assert!(h["metadata"].is_object(), "{h}");
    assert_eq!(
        data(node.call("GET", &format!("{list}&clusterName=C2"))),
        json!([])
    );
    assert_eq!(
        data(node.call("GET", &format!("{list}&clusterName=C1&healthyOnly=true")))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    names_field(
        node.call("GET", &format!("{list}&healthyOnly=maybe")),
        "healthyOnly",
    );
    names_field(
        node.call("GET", &format!("{CLIENT_INSTANCE}/list?groupName=G")),
        "serviceName",
    );

    // One registry: v1 lists what v3 registered.
    let v1 = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={svc}&groupName=G"),
        )
        .expect(200)
        .json();
    let v1_hosts = v1["hosts"].as_array().unwrap();
    assert!(
        v1_hosts
            .iter()
            .any(|h| h["ip"] == "127.1.0.2" && h["port"] == 9000),
        "{v1}"
    );

    // Without credentials: refused in the envelope.
    let r = node.raw("GET", &list, &[], None);
    assert!(
        r.status == 401 || r.status == 403,
        "{} {}",
        r.status,
        r.body
    );

    // Deregister; the list empties.
    assert_eq!(
        data(node.call("DELETE", &format!("{CLIENT_INSTANCE}?{reg}"))),
        "ok"
    );
    assert_eq!(data(node.call("GET", &list)), json!([]));

    // A configuration item as ConfigQueryResponse.
    let data_id = unique("v3cfg");
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!("dataId={data_id}&group=G&content=hello&type=text"),
    )
    .expect(200);
    for ns in ["", "&namespaceId=public"] {
        let item = data(node.call(
            "GET",
            &format!("{CLIENT_CONFIG}?dataId={data_id}&groupName=G{ns}"),
        ));
        assert_eq!(item["content"], "hello", "{item}");
        assert_eq!(item["md5"], "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(item["contentType"], "text");
        assert!(item["lastModified"].as_u64().unwrap() > 0, "{item}");
        assert_eq!(item["beta"], false);
    }
    refused(
        node.call(
            "GET",
            &format!("{CLIENT_CONFIG}?dataId={data_id}-absent&groupName=G"),
        ),
        404,
        20004,
    );
    names_field(
        node.call("GET", &format!("{CLIENT_CONFIG}?dataId={data_id}")),
        "groupName",
    );
    names_field(
        node.call("GET", &format!("{CLIENT_CONFIG}?groupName=G")),
        "dataId",
    );
}

#[test]
fn services_are_created_read_listed_updated_and_deleted() {
    let node = Node::start();
    let group = unique("V3G");
    let svc = unique("v3svc");
    let named = format!("serviceName={svc}&groupName={group}");

    assert_eq!(
        data(node.call_form(
            "POST",
            SERVICE,
            &format!(
                "{named}&protectThreshold=0.5&metadata={}&selector={}",
                enc(r#"{"owner":"ops"}"#),
                enc(r#"{"type":"none"}"#)
            ),
        )),
        "ok"
    );
    refused(node.call_form("POST", SERVICE, &named), 400, 21007);
    names_field(
        node.call_form(
            "POST",
            SERVICE,
            &format!("serviceName={}&protectThreshold=2", unique("v3bad")),
        ),
        "protectThreshold",
    );
    names_field(
        node.call_form("POST", SERVICE, "groupName=G"),
        "serviceName",
    );

    // ServiceDetailInfo.
    let detail = data(node.call("GET", &format!("{SERVICE}?{named}")));
    assert_eq!(detail["namespaceId"], "public");
    assert_eq!(detail["groupName"], group.as_str());
    assert_eq!(detail["serviceName"], svc.as_str());
    assert_eq!(detail["protectThreshold"], 0.5);
    assert_eq!(detail["metadata"], json!({"owner": "ops"}));
    assert_eq!(detail["selector"]["type"], "none");
    assert_eq!(detail["clusterMap"], json!({}));

    // Update changes what is given.
    assert_eq!(
        data(node.call_form("PUT", SERVICE, &format!("{named}&protectThreshold=0.2"))),
        "ok"
    );
    let detail = data(node.call("GET", &format!("{SERVICE}?{named}")));
    assert_eq!(detail["protectThreshold"], 0.2);
    assert_eq!(detail["metadata"], json!({"owner": "ops"}));

    // A second service with an instance, for the list.
    let busy = unique("v3busy");
    data(node.call_form(
        "POST",
        INSTANCE,
        &format!("serviceName={busy}&groupName={group}&ip=127.1.0.3&port=7000&clusterName=A"),
    ));

    // ServiceList: Page<ServiceView>.
    let list = format!("{SERVICE}/list?groupNameParam={group}&pageNo=1&pageSize=10");
    let page = data(node.call("GET", &list));
    assert_eq!(page["totalCount"], 2, "{page}");
    assert_eq!(page["pageNumber"], 1);
    assert_eq!(page["pagesAvailable"], 1);
    let items = page["pageItems"].as_array().unwrap();
    let row = items
        .iter()
        .find(|s| s["name"] == busy.as_str())
        .expect("busy listed");
    assert_eq!(row["groupName"], group.as_str());
    assert_eq!(row["clusterCount"], 1);
    assert_eq!(row["ipCount"], 1);
    assert_eq!(row["healthyInstanceCount"], 1);
    assert_eq!(row["triggerFlag"], "false");
    // ignoreEmptyService leaves out the service without instances.
    let page = data(node.call("GET", &format!("{list}&ignoreEmptyService=true")));
    assert_eq!(page["totalCount"], 1, "{page}");
    assert_eq!(page["pageItems"][0]["name"], busy.as_str());
    // serviceNameParam filters by name.
    let page = data(node.call("GET", &format!("{list}&serviceNameParam={svc}")));
    assert_eq!(page["totalCount"], 1, "{page}");
    assert_eq!(page["pageItems"][0]["name"], svc.as_str());
    // withInstances: Page<ServiceDetailInfo> with each cluster's hosts.
    let page = data(node.call(
        "GET",
        &format!("{list}&serviceNameParam={busy}&withInstances=true"),
    ));
    let detail = &page["pageItems"][0];
    assert_eq!(detail["serviceName"], busy.as_str());
    let hosts = detail["clusterMap"]["A"]["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{detail}");
    assert_eq!(hosts[0]["port"], 7000);
    let unpaged = format!("{SERVICE}/list?groupNameParam={group}");
    names_field(
        node.call("GET", &format!("{unpaged}&pageSize=0")),
        "pageSize",
    );
    names_field(
        node.call("GET", &format!("{list}&withInstances=perhaps")),
        "withInstances",
    );

    // Subscribers: Page<SubscriberInfo>, a UDP subscriber made by a v1 list query.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = socket.local_addr().unwrap().port();
    node.raw(
        "GET",
        &format!(
            "/nacos/v1/ns/instance/list?serviceName={busy}&groupName={group}&udpPort={udp_port}&clientIP=127.0.0.1&app=shop&accessToken={}",
            node.token()
        ),
        &[("user-agent", "Nacos-Java-Client:v1.4.6")],
        None,
    )
    .expect(200);
    let subs = data(node.call(
        "GET",
        &format!("{SERVICE}/subscribers?serviceName={busy}&groupName={group}&pageNo=1&pageSize=10"),
    ));
    assert_eq!(subs["totalCount"], 1, "{subs}");
    let s = &subs["pageItems"][0];
    assert_eq!(s["namespaceId"], "public");
    assert_eq!(s["groupName"], group.as_str());
    assert_eq!(s["serviceName"], busy.as_str());
    assert_eq!(s["ip"], "127.0.0.1");
    assert_eq!(s["port"], udp_port);
    assert_eq!(s["appName"], "shop");
    assert_eq!(s["agent"], "Nacos-Java-Client:v1.4.6");
    names_field(
        node.call("GET", &format!("{SERVICE}/subscribers?groupName={group}")),
        "serviceName",
    );

    // Selector types.
    let types = data(node.call("GET", &format!("{SERVICE}/selector/types")));
    for t in ["none", "label"] {
        assert!(types.as_array().unwrap().contains(&json!(t)), "{types}");
    }

    // Delete; then it is not found (21008).
    assert_eq!(
        data(node.call("DELETE", &format!("{SERVICE}?{named}"))),
        "ok"
    );
    refused(node.call("GET", &format!("{SERVICE}?{named}")), 404, 21008);
}

#[test]
fn instances_are_managed_in_nacos_3_s_shapes() {
    let node = Node::start();
    let svc = unique("v3inst");
    let named = format!("serviceName={svc}&groupName=G1");
    let at = |port: u16, cluster: &str| {
        format!("{named}&ip=127.1.0.1&port={port}&clusterName={cluster}")
    };
    // A service holds ephemeral or persistent instances, not both (roster's rule).
    let kept = format!("serviceName={svc}-p&groupName=G1");
    let pat =
        |port: u16, cluster: &str| format!("{kept}&ip=127.1.0.1&port={port}&clusterName={cluster}");

    // Two ephemeral instances and a persistent one (through Raft).
    for (port, cluster) in [(8080, "A"), (8081, "B")] {
        let r = node.call_form(
            "POST",
            INSTANCE,
            &format!(
                "{}&metadata={}",
                at(port, cluster),
                enc(r#"{"lane":"blue"}"#)
            ),
        );
        assert_eq!(data(r), "ok");
    }
    assert_eq!(
        data(node.call_form(
            "POST",
            INSTANCE,
            &format!("{}&ephemeral=false", pat(8082, "P"))
        )),
        "ok"
    );
    names_field(
        node.call_form("POST", INSTANCE, &format!("{}&weight=-1", at(8083, "A"))),
        "weight",
    );
    names_field(
        node.call_form("POST", INSTANCE, &format!("{named}&port=1")),
        "ip",
    );

    // Detail: an Instance.
    let one = data(node.call("GET", &format!("{INSTANCE}?{}", at(8080, "A"))));
    assert_eq!(one["ip"], "127.1.0.1");
    assert_eq!(one["port"], 8080);
    assert_eq!(one["clusterName"], "A");
    assert_eq!(one["weight"], 1.0);
    assert_eq!(one["ephemeral"], true);
    assert_eq!(one["metadata"], json!({"lane": "blue"}));
    let persistent = data(node.call("GET", &format!("{INSTANCE}?{}", pat(8082, "P"))));
    assert_eq!(persistent["ephemeral"], false);
    refused(
        node.call("GET", &format!("{INSTANCE}?{}", at(9999, "A"))),
        404,
        21003,
    );
    names_field(
        node.call("GET", &format!("{INSTANCE}?{named}&ip=127.1.0.1")),
        "port",
    );

    // The admin list: every instance, by cluster.
    let list = format!("{INSTANCE}/list?{named}");
    assert_eq!(data(node.call("GET", &list)).as_array().unwrap().len(), 2);
    let only_a = data(node.call("GET", &format!("{list}&clusterName=A")));
    assert_eq!(only_a.as_array().unwrap().len(), 1);
    assert_eq!(only_a[0]["port"], 8080);
    refused(
        node.call(
            "GET",
            &format!("{INSTANCE}/list?serviceName={}", unique("none")),
        ),
        404,
        21008,
    );

    // Update: the weight; partial: only enabled, the weight stays.
    assert_eq!(
        data(node.call_form("PUT", INSTANCE, &format!("{}&weight=3", at(8080, "A")))),
        "ok"
    );
    assert_eq!(
        data(node.call_form(
            "PUT",
            &format!("{INSTANCE}/partial"),
            &format!("{}&enabled=false", at(8080, "A"))
        )),
        "ok"
    );
    let one = data(node.call("GET", &format!("{INSTANCE}?{}", at(8080, "A"))));
    assert_eq!(
        (one["weight"].as_f64(), one["enabled"].as_bool()),
        (Some(3.0), Some(false))
    );
    assert_eq!(one["metadata"], json!({"lane": "blue"}));
    names_field(
        node.call_form(
            "PUT",
            &format!("{INSTANCE}/partial"),
            &format!("{}&enabled=sometimes", at(8080, "A")),
        ),
        "enabled",
    );
    // The client list leaves the disabled instance out; the admin list keeps it.
    let client = data(node.call(
        "GET",
        &format!("{CLIENT_INSTANCE}/list?{named}&clusterName=A"),
    ));
    assert_eq!(client, json!([]));
    assert_eq!(
        data(node.call("GET", &format!("{list}&clusterName=A")))[0]["enabled"],
        false
    );

    // Batch metadata: named instances, then every ephemeral one; then keys removed.
    let instances = enc(r#"[{"ip":"127.1.0.1","port":8080,"clusterName":"A"}]"#);
    let r = data(node.call_form(
        "PUT",
        BATCH,
        &format!(
            "{named}&instances={instances}&metadata={}",
            enc(r#"{"k":"v"}"#)
        ),
    ));
    assert_eq!(
        r,
        json!({"updated": ["127.1.0.1:8080:unknown:A:ephemeral"]})
    );
    let one = data(node.call("GET", &format!("{INSTANCE}?{}", at(8080, "A"))));
    assert_eq!(one["metadata"], json!({"lane": "blue", "k": "v"}));
    let r = data(node.call_form(
        "PUT",
        BATCH,
        &format!(
            "{named}&consistencyType=ephemeral&metadata={}",
            enc(r#"{"zone":"z1"}"#)
        ),
    ));
    let mut updated: Vec<String> = r["updated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_string())
        .collect();
    updated.sort();
    assert_eq!(
        updated,
        [
            "127.1.0.1:8080:unknown:A:ephemeral",
            "127.1.0.1:8081:unknown:B:ephemeral"
        ]
    );
    let r = data(node.call_form(
        "DELETE",
        BATCH,
        &format!(
            "{named}&instances={instances}&metadata={}",
            enc(r#"{"k":"x"}"#)
        ),
    ));
    assert_eq!(r["updated"].as_array().unwrap().len(), 1);
    let one = data(node.call("GET", &format!("{INSTANCE}?{}", at(8080, "A"))));
    assert_eq!(one["metadata"], json!({"lane": "blue", "zone": "z1"}));
    names_field(
        node.call_form(
            "PUT",
            BATCH,
            &format!("{named}&instances=x&metadata={}", enc("{}")),
        ),
        "instances",
    );
    names_field(node.call_form("PUT", BATCH, &named), "metadata");
    names_field(
        node.call_form(
            "PUT",
            BATCH,
            &format!(
                "{named}&consistencyType=raft&metadata={}",
                enc(r#"{"k":"v"}"#)
            ),
        ),
        "consistencyType",
    );

    // Cluster settings: P is not checked by the server, so its health is set by hand.
    let cluster = format!(
        "{kept}&clusterName=P&checkPort=80&useInstancePort4Check=true&healthChecker={}",
        enc(r#"{"type":"NONE"}"#)
    );
    assert_eq!(
        data(node.call_form("PUT", "/nacos/v3/admin/ns/cluster", &cluster)),
        "ok"
    );
    let detail = data(node.call("GET", &format!("{SERVICE}?{kept}")));
    assert_eq!(
        detail["clusterMap"]["P"]["healthChecker"]["type"], "NONE",
        "{detail}"
    );
    assert_eq!(detail["clusterMap"]["P"]["clusterName"], "P");
    names_field(
        node.call_form(
            "PUT",
            "/nacos/v3/admin/ns/cluster",
            &format!(
                "{kept}&clusterName=P&useInstancePort4Check=true&healthChecker={}",
                enc(r#"{"type":"NONE"}"#)
            ),
        ),
        "checkPort",
    );
    let health = "/nacos/v3/admin/ns/health/instance";
    assert_eq!(
        data(node.call_form("PUT", health, &format!("{}&healthy=false", pat(8082, "P")))),
        "ok"
    );
    let healthy = data(node.call("GET", &format!("{INSTANCE}/list?{kept}&healthyOnly=true")));
    assert_eq!(healthy, json!([]), "{healthy}");
    let all = data(node.call("GET", &format!("{INSTANCE}/list?{kept}")));
    assert_eq!(all[0]["port"], 8082, "{all}");
    assert_eq!(all[0]["healthy"], false, "{all}");
    names_field(node.call_form("PUT", health, &pat(8082, "P")), "healthy");
    // An ephemeral instance's health follows its beats.
    node.call_form("PUT", health, &format!("{}&healthy=false", at(8081, "B")))
        .expect(400);

    // Deregister: ephemeral and persistent; the list empties.
    for (port, cluster, ephemeral) in [(8080, "A", true), (8081, "B", true), (8082, "P", false)] {
        let r = node.call(
            "DELETE",
            &format!("{INSTANCE}?{}&ephemeral={ephemeral}", at(port, cluster)),
        );
        assert_eq!(data(r), "ok");
    }
    assert_eq!(data(node.call("GET", &list)), json!([]));
}

#[test]
fn health_checkers_switches_and_metrics_are_read_and_the_rest_not_served() {
    let node = Node::start();
    let checkers = data(node.call("GET", "/nacos/v3/admin/ns/health/checkers"));
    for kind in ["TCP", "HTTP", "NONE"] {
        assert_eq!(checkers[kind]["type"], kind, "{checkers}");
    }
    assert_eq!(checkers["HTTP"]["expectedResponseCode"], 200);

    let switches = data(node.call("GET", "/nacos/v3/admin/ns/ops/switches"));
    assert_eq!(
        switches["name"],
        "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00"
    );
    assert_eq!(switches["pushVersionOfJava"], "0.1.0");
    assert!(switches.get("pushJavaVersion").is_none(), "{switches}");
    assert_eq!(switches["enableAuthentication"], true);
    assert_eq!(switches["defaultInstanceEphemeral"], true);
    assert_eq!(switches["clientBeatInterval"], 5000);

    let status = data(node.call("GET", "/nacos/v3/admin/ns/ops/metrics"));
    assert_eq!(status, json!({"status": "UP"}));
    let svc = unique("v3metrics");
    data(node.call_form(
        "POST",
        CLIENT_INSTANCE,
        &format!("serviceName={svc}&ip=127.1.0.4&port=6000"),
    ));
    let metrics = data(node.call("GET", "/nacos/v3/admin/ns/ops/metrics?onlyStatus=false"));
    assert_eq!(metrics["status"], "UP");
    for field in [
        "serviceCount",
        "instanceCount",
        "subscribeCount",
        "clientCount",
        "connectionBasedClientCount",
        "ephemeralIpPortClientCount",
        "persistentIpPortClientCount",
        "responsibleClientCount",
    ] {
        assert!(metrics[field].is_u64(), "{field}: {metrics}");
    }
    assert!(metrics["instanceCount"].as_u64().unwrap() >= 1, "{metrics}");
    assert!(
        metrics["ephemeralIpPortClientCount"].as_u64().unwrap() >= 1,
        "{metrics}"
    );
    names_field(
        node.call("GET", "/nacos/v3/admin/ns/ops/metrics?onlyStatus=nope"),
        "onlyStatus",
    );

    // Not served: 501 in the envelope, saying why.
    for (method, path, form) in [
        (
            "PUT",
            "/nacos/v3/admin/ns/ops/switches",
            "entry=pushEnabled&value=false",
        ),
        (
            "PUT",
            "/nacos/v3/admin/ns/ops/log",
            "logName=naming&logLevel=DEBUG",
        ),
    ] {
        let body = node.call_form(method, path, form).expect(501).json();
        assert_eq!(body["code"], 501, "{body}");
        assert!(
            body["data"].as_str().is_some_and(|why| !why.is_empty()),
            "{body}"
        );
    }
}
