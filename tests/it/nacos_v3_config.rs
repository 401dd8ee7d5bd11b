//! Nacos 3's configuration admin API (`/nacos/v3/admin/cs/...`) against a real node with
//! auth on: the `{code, message, data}` envelope and Nacos 3's field names
//! (`groupName`, `namespaceId` with `public` spelled out), one store with v1, history,
//! listeners, export, import, clone and batch delete, bad input refused by field, what
//! roster does not serve (beta publishing, log levels), and a reader's grants.

use std::thread;
use std::time::Duration;

use roster_tests::{enc, eventually, json, unique, Node, Resp, Value};

const CONFIG: &str = "/nacos/v3/admin/cs/config";
const HISTORY: &str = "/nacos/v3/admin/cs/history";
const LISTENER: &str = "/nacos/v3/admin/cs/listener";
const V1: &str = "/nacos/v1/cs/configs";
/// Content with characters a form must encode.
const CONTENT: &str = "greeting: hello\nsymbols: a&b=c+d%20 中文\n";

/// `dataId`, `groupName` and `namespaceId` as a query or form.
fn item(data_id: &str, group: &str, namespace: &str) -> String {
    format!("dataId={data_id}&groupName={group}&namespaceId={namespace}")
}

/// `data` of a successful answer (code 0, "success").
#[track_caller]
fn data(r: Resp) -> Value {
    let body = r.expect(200).json();
    assert_eq!(
        (&body["code"], &body["message"]),
        (&json!(0), &json!("success")),
        "{body}"
    );
    body["data"].clone()
}

/// Publishes `content` to the item as the admin, through v3.
fn publish(node: &Node, key: &str, content: &str, extra: &str) {
    let form = format!("{key}&content={}{extra}", enc(content));
    assert_eq!(data(node.call_form("POST", CONFIG, &form)), true);
}

/// The v1 content of an item (`None`: 404).
fn v1_read(node: &Node, data_id: &str, group: &str, tenant: &str) -> Option<String> {
    let r = node.call(
        "GET",
        &format!("{V1}?dataId={data_id}&group={group}&tenant={tenant}"),
    );
    match r.status {
        200 => Some(r.body),
        404 => None,
        other => panic!("v1 read: {other} {}", r.body),
    }
}

/// The `dataId`s of a page's items.
fn data_ids(page: &Value) -> Vec<String> {
    page["pageItems"]
        .as_array()
        .unwrap_or_else(|| panic!("a page: {page}"))
        .iter()
        .map(|i| i["dataId"].as_str().unwrap().to_string())
        .collect()
}

/// A failed answer's status, code and `data`.
#[track_caller]
fn failure(r: Resp) -> (u16, Value, String) {
    let body = r.json();
    let detail = body["data"].as_str().unwrap_or_default().to_string();
    (r.status, body["code"].clone(), detail)
}

#[test]
fn an_item_published_through_v3_reads_in_nacos_3_s_shape_and_through_v1() {
    let node = Node::start();
    let (ns, id) = (unique("v3ns"), unique("app.yaml"));
    let key = item(&id, "G", &ns);
    publish(
        &node,
        &key,
        CONTENT,
        "&type=yaml&appName=shop&desc=the%20shop&configTags=a,b",
    );

    let detail = data(node.call("GET", &format!("{CONFIG}?{key}")));
    for (field, want) in [
        ("namespaceId", json!(ns)),
        ("groupName", json!("G")),
        ("dataId", json!(id)),
        ("content", json!(CONTENT)),
        ("type", json!("yaml")),
        ("appName", json!("shop")),
        ("desc", json!("the shop")),
        ("configTags", json!("a,b")),
        ("createUser", json!("nacos")),
        ("encryptedDataKey", json!("")),
    ] {
        assert_eq!(detail[field], want, "{field}: {detail}");
    }
    assert!(
        detail["id"].as_str().unwrap().parse::<u64>().is_ok(),
        "{detail}"
    );
    assert!(detail["createTime"].as_u64().unwrap() > 0, "{detail}");
    assert!(detail["modifyTime"].as_u64() >= detail["createTime"].as_u64());
    assert_eq!(detail["md5"].as_str().unwrap().len(), 32, "{detail}");

    // The same item through v1, md5 and all.
    assert_eq!(v1_read(&node, &id, "G", &ns).as_deref(), Some(CONTENT));
    let v1 = node
        .call(
            "GET",
            &format!("{V1}?dataId={id}&group=G&tenant={ns}&show=all"),
        )
        .expect(200)
        .json();
    assert_eq!((&v1["md5"], &v1["id"]), (&detail["md5"], &detail["id"]));

    // An item v1 published reads through v3; the public namespace is spelled out, and
    // blank is the same namespace.
    let public = unique("pub.properties");
    node.call_form(
        "POST",
        V1,
        &format!("dataId={public}&group=G&content=k%3Dv&type=properties"),
    )
    .expect(200);
    for namespace in ["public", ""] {
        let got = data(node.call(
            "GET",
            &format!("{CONFIG}?{}", item(&public, "G", namespace)),
        ));
        assert_eq!(
            (&got["content"], &got["namespaceId"], &got["type"]),
            (&json!("k=v"), &json!("public"), &json!("properties"))
        );
    }

    // Removed through v3: gone for v1 too, and v3 answers 404 with code 20004.
    assert_eq!(data(node.call("DELETE", &format!("{CONFIG}?{key}"))), true);
    assert_eq!(v1_read(&node, &id, "G", &ns), None);
    let (status, code, _) = failure(node.call("GET", &format!("{CONFIG}?{key}")));
    assert_eq!((status, code), (404, json!(20004)));
    // Removing what is not there is no error.
    assert_eq!(data(node.call("DELETE", &format!("{CONFIG}?{key}"))), true);
}

#[test]
fn listings_search_blurred_or_exact_and_answer_nacos_3_s_page() {
    let node = Node::start();
    let ns = unique("v3list");
    for (id, group, content, kind) in [
        ("shop.yaml", "G", "port: 80\n", "yaml"),
        ("shop-db.yaml", "G", "url: db\n", "yaml"),
        ("cart.json", "H", "{\"port\": 81}", "json"),
    ] {
        publish(
            &node,
            &item(id, group, &ns),
            content,
            &format!("&type={kind}&appName=shop"),
        );
    }
    let list =
        |query: &str| data(node.call("GET", &format!("{CONFIG}/list?namespaceId={ns}&{query}")));

    // Blur is the default: dataId as a pattern (a part without `*`).
    let page = list("dataId=shop&pageNo=1&pageSize=1");
    assert_eq!(
        (
            &page["totalCount"],
            &page["pageNumber"],
            &page["pagesAvailable"]
        ),
        (&json!(2), &json!(1), &json!(2)),
        "{page}"
    );
    let row = &page["pageItems"][0];
    assert_eq!(
        (&row["namespaceId"], &row["groupName"], &row["appName"]),
        (&json!(ns), &json!("G"), &json!("shop"))
    );
    assert!(
        row.get("content").is_none(),
        "no content in a listing: {row}"
    );
    assert!(row["id"].is_string() && row["md5"].is_string(), "{row}");
    assert_eq!(
        data_ids(&list("dataId=shop*")),
        ["shop-db.yaml", "shop.yaml"]
    );
    // Exact.
    assert_eq!(
        data_ids(&list("search=accurate&dataId=shop.yaml&groupName=G")),
        ["shop.yaml"]
    );
    assert!(data_ids(&list("search=accurate&dataId=shop")).is_empty());
    // By type, by content, by group.
    assert_eq!(data_ids(&list("type=json")), ["cart.json"]);
    assert_eq!(
        data_ids(&list("configDetail=port")),
        ["shop.yaml", "cart.json"],
        "ordered by group, then dataId"
    );
    assert_eq!(data_ids(&list("groupName=H")), ["cart.json"]);
    assert_eq!(list("appName=other")["totalCount"], 0);
    // A search that is neither: 400 naming it.
    let (status, code, detail) = failure(node.call(
        "GET",
        &format!("{CONFIG}/list?namespaceId={ns}&search=fuzzy"),
    ));
    assert_eq!((status, code), (400, json!(20002)));
    assert!(detail.contains("'search'"), "{detail}");
}

#[test]
fn bad_input_is_refused_by_field_and_changes_nothing() {
    let node = Node::start();
    let id = unique("bad");
    for (form, field, code) in [
        ("groupName=G&content=x".to_string(), "dataId", 10000),
        (
            "dataId=a%20b&groupName=G&content=x".to_string(),
            "dataId",
            20002,
        ),
        (
            format!("dataId={id}&groupName=G%2FH&content=x"),
            "groupName",
            20002,
        ),
        (
            format!("dataId={id}&namespaceId=..%2Fx&content=x"),
            "namespaceId",
            20002,
        ),
        (format!("dataId={id}&groupName=G"), "content", 10000),
        (
            format!("dataId={id}&groupName=G&content=x&type=a%20b"),
            "type",
            20002,
        ),
    ] {
        let (status, got, detail) = failure(node.call_form("POST", CONFIG, &form));
        assert_eq!((status, got), (400, json!(code)), "{form}: {detail}");
        assert!(detail.contains(&format!("'{field}'")), "{form}: {detail}");
    }
    assert_eq!(v1_read(&node, &id, "G", ""), None, "nothing published");
    for (path, field) in [
        (format!("{HISTORY}?{}&nid=x", item(&id, "G", "")), "nid"),
        (format!("{HISTORY}/previous?{}", item(&id, "G", "")), "id"),
        (format!("{LISTENER}?all=true"), "ip"),
        (format!("{CONFIG}/list?pageNo=0"), "pageNo"),
    ] {
        let (status, _, detail) = failure(node.call("GET", &path));
        assert_eq!(status, 400, "{path}: {detail}");
        assert!(detail.contains(&format!("'{field}'")), "{path}: {detail}");
    }
    let (status, _, detail) = failure(node.call("DELETE", &format!("{CONFIG}/batch?ids=1,x")));
    assert_eq!(status, 400, "{detail}");
    assert!(detail.contains("'ids'"), "{detail}");
}

#[test]
fn a_beta_is_read_by_its_addresses_shown_and_stopped_and_log_levels_are_not_served() {
    let node = Node::start();
    let id = unique("beta");
    let key = item(&id, "G", "");
    let token = node.token();
    let auth = format!("Bearer {token}");
    let beta = |ips: &str, content: &str| {
        node.raw(
            "POST",
            CONFIG,
            &[("authorization", &auth), ("betaIps", ips)],
            Some(&format!("{key}&content={content}")),
        )
    };

    // A beta before any formal content: its addresses read it, the others nothing.
    assert_eq!(
        beta("127.0.0.9", "beta-elsewhere").expect(200).json()["data"],
        true
    );
    assert_eq!(v1_read(&node, &id, "G", ""), None);
    publish(&node, &key, "formal", "");
    assert_eq!(v1_read(&node, &id, "G", "").as_deref(), Some("formal"));
    // A beta to this test's address: read here, through v1 and the v3 client API.
    assert_eq!(
        beta("127.0.0.1,127.0.0.9", "beta-here").expect(200).json()["data"],
        true
    );
    assert_eq!(v1_read(&node, &id, "G", "").as_deref(), Some("beta-here"));
    let v2 = node
        .call("GET", &format!("/nacos/v2/cs/config?dataId={id}&group=G"))
        .expect(200)
        .json();
    assert_eq!(v2["data"], "beta-here", "v2: {v2}");
    let client = data(node.call("GET", &format!("/nacos/v3/client/cs/config?{key}")));
    assert_eq!(
        (&client["content"], &client["beta"]),
        (&json!("beta-here"), &json!(true))
    );
    // The beta as ConfigGrayInfo.
    let shown = data(node.call("GET", &format!("{CONFIG}/beta?{key}")));
    assert_eq!(shown["content"], "beta-here", "{shown}");
    assert_eq!(shown["grayName"], "beta", "{shown}");
    let rule: Value = serde_json::from_str(shown["grayRule"].as_str().unwrap()).unwrap();
    assert_eq!(
        (&rule["type"], &rule["expr"]),
        (&json!("beta"), &json!("127.0.0.1,127.0.0.9"))
    );
    // The formal content is the formal one still.
    assert_eq!(
        data(node.call("GET", &format!("{CONFIG}?{key}")))["content"],
        "formal"
    );
    // A bad address is refused by name and changes nothing.
    let (status, _, detail) = failure(beta("127.0.0.1,nowhere", "x"));
    assert_eq!(status, 400, "{detail}");
    assert!(detail.contains("'betaIps'"), "{detail}");
    // Stopped: the formal content for everyone; no beta to show.
    assert_eq!(
        data(node.call("DELETE", &format!("{CONFIG}/beta?{key}"))),
        true
    );
    assert_eq!(v1_read(&node, &id, "G", "").as_deref(), Some("formal"));
    let (status, code, detail) = failure(node.call("GET", &format!("{CONFIG}/beta?{key}")));
    assert_eq!((status, code), (404, json!(20004)), "{detail}");
    // Each gray publication and the stop are in the history, named.
    let history = data(node.call(
        "GET",
        &format!("/nacos/v3/admin/cs/history/list?{key}&pageNo=1&pageSize=10"),
    ));
    let kinds: Vec<(String, String)> = history["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["publishType"].as_str().unwrap().to_string(),
                v["grayName"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let gray = |n: &str| ("gray".to_string(), n.to_string());
    let formal = ("formal".to_string(), String::new());
    assert_eq!(
        kinds,
        [gray("beta"), gray("beta"), formal, gray("beta")],
        "{history}"
    );

    // Every gray version at once (roster's `grays=true`), the beta first; removing the
    // item removes them.
    beta("127.0.0.9", "beta-again").expect(200);
    node.call_form("POST", CONFIG, &format!("{key}&tag=canary&content=tagged"))
        .expect(200);
    let grays_of = || {
        node.call(
            "GET",
            &format!("/nacos/v1/cs/configs?dataId={id}&group=G&grays=true"),
        )
        .expect(200)
        .json()["data"]
            .clone()
    };
    let grays = grays_of();
    let names: Vec<&str> = grays
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["grayName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beta", "tag_canary"], "{grays}");
    assert_eq!(
        (&grays[1]["type"], &grays[1]["expr"], &grays[1]["content"]),
        (&json!("tag"), &json!("canary"), &json!("tagged"))
    );
    node.call("DELETE", &format!("{CONFIG}?{key}")).expect(200);
    assert_eq!(grays_of(), json!([]));

    // Log levels are set at start.
    let r = node.call_form(
        "PUT",
        "/nacos/v3/admin/cs/ops/log",
        "logName=config-server&logLevel=debug",
    );
    assert_eq!(r.status, 501, "{}", r.body);
    assert!(r.json()["data"].as_str().unwrap().contains("RUST_LOG"));
    // Nothing to reload.
    let said = data(node.call_form("POST", "/nacos/v3/admin/cs/ops/localCache", ""));
    assert!(
        said.as_str().unwrap().contains("Nothing to reload"),
        "{said}"
    );
}

#[test]
fn history_lists_each_version_newest_first_with_details_and_the_one_before() {
    let node = Node::start();
    let (ns, id) = (unique("v3hist"), unique("hist.yaml"));
    let key = item(&id, "G", &ns);
    publish(&node, &key, "one", "&type=yaml");
    publish(&node, &key, "two", "");

    let page = data(node.call("GET", &format!("{HISTORY}/list?{key}")));
    assert_eq!(page["totalCount"], 2, "{page}");
    let items = page["pageItems"].as_array().unwrap();
    let ops: Vec<&str> = items
        .iter()
        .map(|v| v["opType"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["U", "I"]);
    for v in items {
        assert_eq!(
            (
                &v["namespaceId"],
                &v["groupName"],
                &v["srcUser"],
                &v["publishType"]
            ),
            (&json!(ns), &json!("G"), &json!("nacos"), &json!("formal")),
            "{v}"
        );
        assert!(v.get("content").is_none(), "no content in a listing: {v}");
        assert!(v["createTime"].as_u64().unwrap() > 0, "{v}");
    }
    let newest = items[0]["id"].as_str().unwrap().to_string();
    let oldest = items[1]["id"].as_str().unwrap().to_string();

    let v = data(node.call("GET", &format!("{HISTORY}?{key}&nid={newest}")));
    assert_eq!((&v["content"], &v["opType"]), (&json!("two"), &json!("U")));
    let v = data(node.call("GET", &format!("{HISTORY}/previous?{key}&id={newest}")));
    assert_eq!((&v["content"], &v["id"]), (&json!("one"), &json!(oldest)));
    assert_eq!(v["type"], "yaml");
    for path in [
        format!("{HISTORY}?{key}&nid=999999999"),
        format!("{HISTORY}/previous?{key}&id={oldest}"),
    ] {
        let (status, code, _) = failure(node.call("GET", &path));
        assert_eq!((status, code), (404, json!(20004)), "{path}");
    }

    // A version published through v1 is in the same history.
    node.call_form(
        "POST",
        V1,
        &format!("dataId={id}&group=G&tenant={ns}&content=three"),
    )
    .expect(200);
    let page = data(node.call("GET", &format!("{HISTORY}/list?{key}&pageSize=1")));
    assert_eq!(
        (&page["totalCount"], &page["pagesAvailable"]),
        (&json!(3), &json!(3))
    );

    // The items of the namespace with history, removed ones among them.
    node.call("DELETE", &format!("{CONFIG}?{key}")).expect(200);
    let configs = data(node.call("GET", &format!("{HISTORY}/configs?namespaceId={ns}")));
    let configs = configs.as_array().unwrap();
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(
        (
            &configs[0]["dataId"],
            &configs[0]["groupName"],
            &configs[0]["namespaceId"]
        ),
        (&json!(id), &json!("G"), &json!(ns))
    );
    assert_eq!(
        configs[0]["id"],
        json!(oldest),
        "the id it was created with"
    );
}

/// A multipart body holding `archive` as the field `file`, and its content type.
fn multipart(archive: &[u8]) -> (String, Vec<u8>) {
    let boundary = "roster-v3-boundary-Zq81PLx";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"export.zip\"\r\n\
         Content-Type: application/zip\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(archive);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The JSON of a binary answer.
fn json_of(status: u16, body: &[u8]) -> (u16, Value) {
    let value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {status} {}", String::from_utf8_lossy(body)));
    (status, value)
}

#[test]
fn export_import_clone_and_batch_delete_move_items_between_namespaces() {
    let node = Node::start();
    let (from, to, copy) = (unique("v3from"), unique("v3to"), unique("v3copy"));
    publish(
        &node,
        &item("a.yaml", "G", &from),
        "a: 1\n",
        "&type=yaml&appName=shop",
    );
    publish(&node, &item("b.txt", "H", &from), "b", "");

    // Export: the namespace's items as a zip.
    let (status, archive) = node.binary(
        "GET",
        &format!("{CONFIG}/export?namespaceId={from}"),
        None,
        Vec::new(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&archive));
    assert!(archive.starts_with(b"PK"), "a zip archive");

    // Import into another namespace; again with ABORT: 409, nothing changed; with SKIP:
    // both skipped.
    let (content_type, body) = multipart(&archive);
    let import = |policy: &str| {
        let (status, bytes) = node.binary(
            "POST",
            &format!("{CONFIG}/import?namespaceId={to}&policy={policy}"),
            Some(&content_type),
            body.clone(),
        );
        json_of(status, &bytes)
    };
    let (status, answer) = import("ABORT");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (&answer["code"], &answer["data"]["succCount"]),
        (&json!(0), &json!(2)),
        "{answer}"
    );
    assert_eq!(
        v1_read(&node, "a.yaml", "G", &to).as_deref(),
        Some("a: 1\n")
    );
    let (status, answer) = import("ABORT");
    assert_eq!((status, &answer["code"]), (409, &json!(20005)), "{answer}");
    let (status, answer) = import("SKIP");
    assert_eq!(
        (status, &answer["data"]["skipCount"]),
        (200, &json!(2)),
        "{answer}"
    );

    // Clone by id: one renamed, one as it is.
    let listed = data(node.call("GET", &format!("{CONFIG}/list?namespaceId={from}")));
    let id_of = |data_id: &str| {
        listed["pageItems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["dataId"] == data_id)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (a, b) = (id_of("a.yaml"), id_of("b.txt"));
    let order = format!(
        r#"[{{"configId":{a},"targetDataId":"renamed.yaml","targetGroupName":"G2"}},{{"configId":"{b}"}}]"#
    );
    let (status, bytes) = node.binary(
        "POST",
        &format!("{CONFIG}/clone?namespaceId={copy}&policy=ABORT"),
        Some("application/json"),
        order.into_bytes(),
    );
    let (status, answer) = json_of(status, &bytes);
    assert_eq!(
        (status, &answer["data"]["succCount"]),
        (200, &json!(2)),
        "{answer}"
    );
    assert_eq!(
        v1_read(&node, "renamed.yaml", "G2", &copy).as_deref(),
        Some("a: 1\n")
    );
    assert_eq!(v1_read(&node, "b.txt", "H", &copy).as_deref(), Some("b"));
    let cloned = data(node.call(
        "GET",
        &format!("{CONFIG}?{}", item("renamed.yaml", "G2", &copy)),
    ));
    assert_eq!(
        (&cloned["type"], &cloned["appName"]),
        (&json!("yaml"), &json!("shop"))
    );
    // A clone order that is not a list: 400.
    let (status, bytes) = node.binary(
        "POST",
        &format!("{CONFIG}/clone?namespaceId={copy}"),
        Some("application/json"),
        br#"{"configId":1}"#.to_vec(),
    );
    assert_eq!(json_of(status, &bytes).0, 400);

    // Batch delete by id; ids of no item are passed over.
    assert_eq!(
        data(node.call("DELETE", &format!("{CONFIG}/batch?ids={a},{b},999999999"))),
        true
    );
    let listed = data(node.call("GET", &format!("{CONFIG}/list?namespaceId={from}")));
    assert_eq!(listed["totalCount"], 0, "{listed}");
    assert_eq!(
        v1_read(&node, "b.txt", "H", &copy).as_deref(),
        Some("b"),
        "copies stay"
    );
}

#[test]
fn listeners_of_an_item_and_of_an_ip_show_a_held_long_poll() {
    let node = Node::start();
    let (id, other_ns) = (unique("listened"), unique("v3lns"));
    publish(&node, &item(&id, "G", ""), "v1", "");
    publish(&node, &item(&id, "G", &other_ns), "v1", "");
    let md5 = data(node.call("GET", &format!("{CONFIG}?{}", item(&id, "G", ""))))["md5"]
        .as_str()
        .unwrap()
        .to_string();
    // Up to date in both namespaces: the poll holds.
    let listening = format!("{id}\u{2}G\u{2}{md5}\u{1}{id}\u{2}G\u{2}{md5}\u{2}{other_ns}\u{1}");
    let form = format!("Listening-Configs={}", enc(&listening));
    let auth = format!("Bearer {}", node.token());
    thread::scope(|s| {
        s.spawn(|| {
            node.raw(
                "POST",
                "/nacos/v1/cs/configs/listener",
                &[("authorization", &auth), ("Long-Pulling-Timeout", "8000")],
                Some(&form),
            )
            .expect(200)
        });
        let of_item = eventually(Duration::from_secs(5), || {
            let info = data(node.call(
                "GET",
                &format!("{CONFIG}/listener?{}", item(&id, "G", "public")),
            ));
            match info["listenersStatus"]["127.0.0.1"].is_string() {
                true => Ok(info),
                false => Err(format!("not listed yet: {info}")),
            }
        });
        assert_eq!(
            of_item,
            json!({"queryType": "config", "listenersStatus": {"127.0.0.1": md5}})
        );
        let (public_key, other_key) = (format!("{id}+G+public"), format!("{id}+G+{other_ns}"));
        let by_ip =
            |query: &str| data(node.call("GET", &format!("{LISTENER}?ip=127.0.0.1{query}")));
        let info = by_ip("");
        assert_eq!(info["queryType"], "ip");
        assert_eq!(info["listenersStatus"][&public_key], json!(md5), "{info}");
        assert!(info["listenersStatus"].get(&other_key).is_none(), "{info}");
        for query in ["&all=true".to_string(), format!("&namespaceId={other_ns}")] {
            let info = by_ip(&query);
            assert_eq!(
                info["listenersStatus"][&other_key],
                json!(md5),
                "{query}: {info}"
            );
        }
        assert_eq!(
            by_ip("&all=true")["listenersStatus"]
                .as_object()
                .unwrap()
                .len(),
            2
        );
        // Another address listens to nothing here.
        assert_eq!(
            data(node.call("GET", &format!("{LISTENER}?ip=127.0.0.2&all=true"))),
            json!({"queryType": "ip", "listenersStatus": {}})
        );
    });
}

/// Creates `user` with a role granted `action` on each of `resources`, and logs in.
fn user_with(node: &Node, user: &str, grants: &[(&str, &str)]) -> String {
    let password = "v3-config-pass-1";
    node.call_form(
        "POST",
        "/nacos/v1/auth/users",
        &format!("username={user}&password={password}"),
    )
    .expect(200);
    for (n, (resource, action)) in grants.iter().enumerate() {
        let role = format!("{user}-{n}");
        node.call_form(
            "POST",
            "/nacos/v1/auth/roles",
            &format!("role={role}&username={user}"),
        )
        .expect(200);
        node.call_form(
            "POST",
            "/nacos/v1/auth/permissions",
            &format!("role={role}&resource={}&action={action}", enc(resource)),
        )
        .expect(200);
    }
    node.raw(
        "POST",
        &format!("/nacos/v1/auth/login?username={user}&password={password}"),
        &[],
        None,
    )
    .expect(200)
    .json()["accessToken"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_reader_sees_only_what_its_grants_say_and_admin_routes_are_refused() {
    let node = Node::start();
    let (mixed, other) = (unique("v3mixed"), unique("v3other"));
    for id in ["seen-1", "seen-2", "hidden"] {
        publish(&node, &item(id, "G", &mixed), "v1", "");
    }
    publish(&node, &item("x", "G", &other), "v1", "");
    let user = unique("v3reader");
    let token = user_with(&node, &user, &[(&format!("{mixed}:G:config/seen-*"), "r")]);
    let auth = format!("Bearer {token}");
    let call = |method: &str, path: &str, form: Option<&str>| {
        node.raw(method, path, &[("authorization", &auth)], form)
    };
    let denied = |r: Resp| {
        let (status, code, _) = failure(r);
        assert_eq!((status, code), (403, json!(10001)));
    };

    // Reads what it is granted; listings leave out the rest.
    let got = data(call(
        "GET",
        &format!("{CONFIG}?{}", item("seen-1", "G", &mixed)),
        None,
    ));
    assert_eq!(got["content"], "v1");
    denied(call(
        "GET",
        &format!("{CONFIG}?{}", item("hidden", "G", &mixed)),
        None,
    ));
    let listed = data(call(
        "GET",
        &format!("{CONFIG}/list?namespaceId={mixed}&pageSize=1"),
        None,
    ));
    assert_eq!(
        (data_ids(&listed), &listed["totalCount"]),
        (vec!["seen-1".to_string()], &json!(2))
    );
    let configs = data(call(
        "GET",
        &format!("{HISTORY}/configs?namespaceId={mixed}"),
        None,
    ));
    let names: Vec<&str> = configs
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["dataId"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seen-1", "seen-2"]);
    data(call(
        "GET",
        &format!("{HISTORY}/list?{}", item("seen-2", "G", &mixed)),
        None,
    ));
    denied(call(
        "GET",
        &format!("{CONFIG}/list?namespaceId={other}"),
        None,
    ));

    // Writes nothing; the admin routes are refused.
    let write = format!("{}&content=v2", item("seen-1", "G", &mixed));
    denied(call("POST", CONFIG, Some(&write)));
    denied(call(
        "DELETE",
        &format!("{CONFIG}?{}", item("seen-1", "G", &mixed)),
        None,
    ));
    denied(call("DELETE", &format!("{CONFIG}/batch?ids=1"), None));
    denied(call("GET", &format!("{LISTENER}?ip=127.0.0.1"), None));
    denied(call("POST", "/nacos/v3/admin/cs/ops/localCache", None));
    assert_eq!(v1_read(&node, "seen-1", "G", &mixed).as_deref(), Some("v1"));

    // Without credentials: refused in the envelope.
    let r = node.raw(
        "GET",
        &format!("{CONFIG}?{}", item("seen-1", "G", &mixed)),
        &[],
        None,
    );
    assert!(r.status == 401 || r.status == 403, "status {}", r.status);
    assert_eq!(r.json()["code"], 10001);
}
