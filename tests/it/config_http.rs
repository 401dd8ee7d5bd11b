//! The Nacos configuration API over HTTP, against real nodes: `/nacos/v1/cs/configs`
//! (publish, get with its headers, delete, listings), compare-and-set, history and
//! rollback, the long-polling listener, `/nacos/v2/cs/config`, permissions, the audit
//! trail, and the unmodified Python SDK 0.1.16 (`tests/clients/python/config_flow.py`).

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use roster_tests::{
    enc, eventually, json, unique, workspace_root, Node, NodeOptions, Resp, Value, ADMIN_PASSWORD,
};

const CONFIGS: &str = "/nacos/v1/cs/configs";
const LISTENER: &str = "/nacos/v1/cs/configs/listener";
const HISTORY: &str = "/nacos/v1/cs/history";
const V2: &str = "/nacos/v2/cs/config";
/// Content with characters a form must encode, and its md5.
const CONTENT: &str = "greeting: hello\nsymbols: a&b=c+d%20 中文\n";
const CONTENT_MD5: &str = "1ed0aa63309c622c5cf2521c94fc90ad";
const V1_MD5: &str = "6654c734ccab8f440ff0825eb443dc7f";
const V2_MD5: &str = "1b267619c4812cc46ee281747884ca50";

/// A request with `token` as the bearer, extra headers and an optional form.
fn send(
    node: &Node,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> Resp {
    let auth = format!("Bearer {token}");
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    node.raw(method, path, &all, form)
}

/// Publishes `form` (urlencoded) as the admin.
fn publish(node: &Node, form: &str) -> Resp {
    node.call_form("POST", CONFIGS, form)
}

/// `dataId`, `group` and `tenant` as a query or form.
fn item(data_id: &str, group: &str, tenant: &str) -> String {
    format!("dataId={data_id}&group={group}&tenant={tenant}")
}

/// An `application/x-www-form-urlencoded` value decoded.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// `Listening-Configs` for `(dataId, group, md5, tenant)` entries, as a form.
fn listening(entries: &[(&str, &str, &str, &str)]) -> String {
    let raw: String = entries
        .iter()
        .map(|(d, g, m, t)| format!("{d}\u{2}{g}\u{2}{m}\u{2}{t}\u{1}"))
        .collect();
    format!("Listening-Configs={}", enc(&raw))
}

/// A long poll as the admin with `Long-Pulling-Timeout: timeout_ms`: the answer, decoded,
/// and how long it took.
fn poll(node: &Node, form: &str, timeout_ms: u64) -> (Resp, String, Duration) {
    let timeout = timeout_ms.to_string();
    let started = Instant::now();
    let r = send(
        node,
        &node.token(),
        "POST",
        LISTENER,
        &[("Long-Pulling-Timeout", &timeout)],
        Some(form),
    );
    let took = started.elapsed();
    let decoded = decode(&r.body);
    (r, decoded, took)
}

/// The `search` listing of `query` as the admin.
fn search(node: &Node, query: &str) -> Value {
    node.call("GET", &format!("{CONFIGS}?{query}"))
        .expect(200)
        .json()
}

fn data_ids(page: &Value) -> Vec<String> {
    page["pageItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["dataId"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn publish_get_and_delete_round_trip_with_headers() {
    let node = Node::start();
    let id = unique("app.yaml");
    let form = format!(
        "{}&content={}&type=yaml&appName=shop&desc=the%20shop&config_tags=a,b",
        item(&id, "G", "dev"),
        enc(CONTENT)
    );
    let r = publish(&node, &form).expect(200);
    assert_eq!(r.body, "true");

    let r = node
        .call("GET", &format!("{CONFIGS}?{}", item(&id, "G", "dev")))
        .expect(200);
    assert_eq!(r.body, CONTENT, "the content comes back byte for byte");
    assert_eq!(r.header("config-type"), Some("yaml"));
    assert_eq!(r.header("content-md5"), Some(CONTENT_MD5));
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let modified = r.header("last-modified").expect("Last-Modified");
    assert!(modified.ends_with(" GMT"), "an HTTP date: {modified}");

    let detail = node
        .call(
            "GET",
            &format!("{CONFIGS}?{}&show=all", item(&id, "G", "dev")),
        )
        .expect(200)
        .json();
    for (field, want) in [
        ("dataId", json!(id)),
        ("group", json!("G")),
        ("tenant", json!("dev")),
        ("content", json!(CONTENT)),
        ("md5", json!(CONTENT_MD5)),
        ("type", json!("yaml")),
        ("appName", json!("shop")),
        ("desc", json!("the shop")),
        ("configTags", json!("a,b")),
        ("createUser", json!("nacos")),
    ] {
        assert_eq!(detail[field], want, "{field}: {detail}");
    }
    assert!(detail["id"].is_string(), "{detail}");
    assert!(detail["createTime"].as_u64().unwrap() > 0, "{detail}");

    // No group is DEFAULT_GROUP; no tenant and `public` are the same namespace; another
    // namespace is another item.
    let plain = unique("plain");
    publish(&node, &format!("dataId={plain}&content=v1")).expect(200);
    for query in [
        format!("dataId={plain}&group=DEFAULT_GROUP"),
        format!("dataId={plain}&tenant=public"),
        format!("dataId={plain}&group=&tenant="),
    ] {
        let r = node.call("GET", &format!("{CONFIGS}?{query}")).expect(200);
        assert_eq!(
            (r.body.as_str(), r.header("content-md5")),
            ("v1", Some(V1_MD5))
        );
    }
    let r = node.call("GET", &format!("{CONFIGS}?dataId={plain}&tenant=dev"));
    assert_eq!((r.status, r.body.as_str()), (404, "config data not exist"));

    // A new publish replaces the content and keeps what it does not give.
    publish(&node, &format!("{}&content=v2", item(&id, "G", "dev"))).expect(200);
    let detail = node
        .call(
            "GET",
            &format!("{CONFIGS}?{}&show=all", item(&id, "G", "dev")),
        )
        .expect(200)
        .json();
    assert_eq!(
        (
            &detail["content"],
            &detail["md5"],
            &detail["type"],
            &detail["appName"]
        ),
        (&json!("v2"), &json!(V2_MD5), &json!("yaml"), &json!("shop"))
    );

    let r = node
        .call("DELETE", &format!("{CONFIGS}?{}", item(&id, "G", "dev")))
        .expect(200);
    assert_eq!(r.body, "true");
    let r = node.call("GET", &format!("{CONFIGS}?{}", item(&id, "G", "dev")));
    assert_eq!((r.status, r.body.as_str()), (404, "config data not exist"));
    // Deleting what is not there is no error, as in Nacos.
    node.call("DELETE", &format!("{CONFIGS}?{}", item(&id, "G", "dev")))
        .expect(200);
}

#[test]
fn bad_input_is_refused_naming_the_field_and_nothing_is_stored() {
    let node = Node::start_with(NodeOptions {
        args: [
            "--config-max-content-bytes",
            "1024",
            "--max-body-bytes",
            "2048",
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    });
    let tenant = "bad-input";
    let cases = [
        (format!("dataId=a%20b&tenant={tenant}&content=x"), "dataId"),
        (format!("tenant={tenant}&content=x"), "dataId"),
        (
            format!("dataId=a&group=g%2Fh&tenant={tenant}&content=x"),
            "group",
        ),
        (format!("dataId=a&tenant={tenant}&content="), "content"),
        (
            format!("dataId=a&tenant={tenant}&content=%20%0A"),
            "content",
        ),
        (
            format!("dataId=a&tenant={tenant}&content={}", "x".repeat(1025)),
            "content",
        ),
        (
            format!("dataId=a&tenant={tenant}&content=x&config_tags=1,2,3,4,5,6"),
            "config_tags",
        ),
        ("dataId=a&tenant=..%2Fx&content=x".to_string(), "tenant"),
        (
            format!("dataId=a&tenant={tenant}&content=x&type=a%20b"),
            "type",
        ),
        (
            format!("dataId=a&tenant={tenant}&content=x&appName=a%07b"),
            "appName",
        ),
    ];
    for (form, field) in &cases {
        let r = publish(&node, form);
        assert_eq!(r.status, 400, "{form}: {}", r.body);
        assert!(r.body.contains(&format!("'{field}'")), "{form}: {}", r.body);
        // The same through v2, with its envelope.
        let v2_form = form.replace("tenant=", "namespaceId=");
        let r = node.call_form("POST", V2, &v2_form);
        assert_eq!(r.status, 400, "v2 {v2_form}: {}", r.body);
        let v = r.json();
        assert!(v["code"] == 10000 || v["code"] == 20002, "{v}");
    }
    let listed = search(&node, &format!("search=accurate&tenant={tenant}"));
    assert_eq!(listed["totalCount"], 0, "nothing stored: {listed}");
    assert_eq!(
        node.call("GET", &format!("{CONFIGS}?dataId=a&tenant={tenant}"))
            .status,
        404
    );

    // Content up to the limit passes, percent-encoded to three times its size, over a
    // body limit that naming requests keep.
    let wide = "中".repeat(341);
    let form = format!("dataId=fine&group=G&tenant={tenant}&content={}", enc(&wide));
    assert!(form.len() > 2048);
    publish(&node, &form).expect(200);
    let r = node
        .call(
            "GET",
            &format!("{CONFIGS}?dataId=fine&group=G&tenant={tenant}"),
        )
        .expect(200);
    assert_eq!(r.body, wide);
    let naming = format!(
        "serviceName=s&ip=127.0.0.1&port=80&metadata={}",
        "m".repeat(3000)
    );
    let r = node.call_form("POST", "/nacos/v1/ns/instance", &naming);
    assert_eq!(r.status, 413, "{}", r.body);

    // A malformed or missing Listening-Configs.
    for form in [
        "Listening-Configs=a%02b%01".to_string(),
        listening(&[("a b", "G", "", "")]),
        listening(&[("a", "G", "", "../x")]),
        "Listening-Configs=".to_string(),
    ] {
        let (r, _, _) = poll(&node, &form, 1000);
        assert_eq!(r.status, 400, "{form}: {}", r.body);
        assert!(r.body.contains("'Listening-Configs'"), "{form}: {}", r.body);
    }
    let (r, _, _) = poll(&node, &listening(&[("a", "G", "", "")]), 0);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        &node,
        &node.token(),
        "POST",
        LISTENER,
        &[("Long-Pulling-Timeout", "soon")],
        Some(&listening(&[("a", "G", "", "")])),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("'Long-Pulling-Timeout'"), "{}", r.body);
    // Listings: a bad mode or page.
    for query in [
        "search=fuzzy",
        "search=blur&pageNo=0",
        "search=blur&pageSize=x",
    ] {
        let r = node.call("GET", &format!("{CONFIGS}?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
    }
}

#[test]
fn compare_and_set_publishes_refuse_a_stale_md5() {
    let node = Node::start();
    let id = unique("mapping");
    let key = item(&id, "mapping", "");
    publish(&node, &format!("{key}&content=v1")).expect(200);
    let r = node.call("GET", &format!("{CONFIGS}?{key}")).expect(200);
    assert_eq!(r.header("content-md5"), Some(V1_MD5));

    // Two writers read v1; the first wins, the second is refused and changes nothing.
    let first = publish(&node, &format!("{key}&content=v2&casMd5={V1_MD5}"));
    assert_eq!((first.status, first.body.as_str()), (200, "true"));
    let second = publish(&node, &format!("{key}&content=v3&casMd5={V1_MD5}"));
    assert_eq!(
        (second.status, second.body.as_str()),
        (409, "Cas publish fail, server md5 may have changed.")
    );
    let r = node.call("GET", &format!("{CONFIGS}?{key}")).expect(200);
    assert_eq!(r.body, "v2");

    // The md5 as a header, as Nacos' clients send it.
    let auth = format!("Bearer {}", node.token());
    let stale = node.raw(
        "POST",
        CONFIGS,
        &[("authorization", &auth), ("casMd5", V1_MD5)],
        Some(&format!("{key}&content=v3")),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    node.raw(
        "POST",
        CONFIGS,
        &[("authorization", &auth), ("casMd5", V2_MD5)],
        Some(&format!("{key}&content=v3")),
    )
    .expect(200);
    // Compare-and-set against an item that does not exist fails too.
    let r = publish(
        &node,
        &format!(
            "{}&content=x&casMd5={V1_MD5}",
            item(&unique("none"), "G", "")
        ),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    // ... except `casMd5=0`, Dubbo 3's ticket for "no item": it inserts an absent item,
    // and against one that exists it is refused and changes nothing.
    let absent = item(&unique("absent"), "mapping", "");
    publish(&node, &format!("{absent}&content=app-a&casMd5=0")).expect(200);
    let again = publish(&node, &format!("{absent}&content=app-b&casMd5=0"));
    assert_eq!(again.status, 409, "{}", again.body);
    let r = node.call("GET", &format!("{CONFIGS}?{absent}")).expect(200);
    assert_eq!(r.body, "app-a");
    // v2 answers the conflict in its envelope.
    let r = node.call_form(
        "POST",
        V2,
        &format!("dataId={id}&group=mapping&content=v4&casMd5={V1_MD5}"),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["code"], 20005);
    let r = node.call("GET", &format!("{CONFIGS}?{key}")).expect(200);
    assert_eq!(r.body, "v3");
}

#[test]
fn listings_search_exactly_or_by_pattern_and_page() {
    let node = Node::start();
    let ns = unique("search");
    for (id, group, extra) in [
        ("app-1", "A", "&appName=shop&config_tags=blue,green"),
        ("app-2", "A", "&appName=shop"),
        ("app-3", "B", "&config_tags=blue"),
        ("other", "A", ""),
    ] {
        publish(
            &node,
            &format!("{}&content=c-{id}{extra}", item(id, group, &ns)),
        )
        .expect(200);
    }
    // The same name in the public namespace stays out of `ns`'s listings.
    publish(&node, &format!("{}&content=x", item("app-1", "A", ""))).expect(200);

    let q = |rest: &str| search(&node, &format!("tenant={ns}&{rest}"));
    let exact = q("search=accurate&dataId=app-1");
    assert_eq!(data_ids(&exact), ["app-1"]);
    let row = &exact["pageItems"][0];
    assert_eq!(
        (
            &row["group"],
            &row["content"],
            &row["tenant"],
            &row["appName"]
        ),
        (&json!("A"), &json!("c-app-1"), &json!(ns), &json!("shop"))
    );
    assert_eq!(
        data_ids(&q("search=accurate&dataId=app")),
        Vec::<String>::new()
    );
    assert_eq!(data_ids(&q("search=accurate")).len(), 4);
    assert_eq!(data_ids(&q("search=accurate&group=B")), ["app-3"]);
    assert_eq!(
        data_ids(&q("search=blur&dataId=app-*")),
        ["app-1", "app-2", "app-3"]
    );
    assert_eq!(
        data_ids(&q("search=blur&dataId=pp")),
        ["app-1", "app-2", "app-3"]
    );
    assert_eq!(data_ids(&q("search=blur&dataId=*-2")), ["app-2"]);
    assert_eq!(
        data_ids(&q("search=blur&dataId=app*&group=A")),
        ["app-1", "app-2"]
    );
    assert_eq!(
        data_ids(&q("search=accurate&appName=shop")),
        ["app-1", "app-2"]
    );
    assert_eq!(
        data_ids(&q("search=blur&config_tags=blue")),
        ["app-1", "app-3"]
    );
    assert_eq!(
        data_ids(&q("search=blur&config_tags=blue,green")),
        ["app-1"]
    );

    // Paging: 4 items (by group, then dataId), 3 a page.
    let page = q("search=blur&dataId=*&pageNo=2&pageSize=3");
    assert_eq!(
        (
            &page["totalCount"],
            &page["pageNumber"],
            &page["pagesAvailable"]
        ),
        (&json!(4), &json!(2), &json!(2))
    );
    assert_eq!(data_ids(&page), ["app-3"]);
    // Defaults 1 and 100; a size over 500 is taken as 500 (the Python SDK asks 1000).
    let page = q("search=accurate&pageSize=1000");
    assert_eq!(
        (&page["pageNumber"], &page["pagesAvailable"]),
        (&json!(1), &json!(1))
    );
    let public = search(&node, "search=accurate&dataId=app-1");
    assert_eq!(public["totalCount"], 1);
    assert_eq!(public["pageItems"][0]["tenant"], "");
}

#[test]
fn history_lists_versions_shows_one_and_its_previous_and_restores() {
    let node = Node::start();
    let id = unique("history");
    let key = item(&id, "G", "hist");
    for content in ["v1", "v2", "v3"] {
        publish(&node, &format!("{key}&content={content}")).expect(200);
    }
    let list = node
        .call("GET", &format!("{HISTORY}?search=accurate&{key}"))
        .expect(200)
        .json();
    assert_eq!(list["totalCount"], 3, "{list}");
    let rows = list["pageItems"].as_array().unwrap();
    let ops: Vec<&str> = rows.iter().map(|r| r["opType"].as_str().unwrap()).collect();
    assert_eq!(ops, ["U", "U", "I"], "newest first: {list}");
    let md5s: Vec<&str> = rows.iter().map(|r| r["md5"].as_str().unwrap()).collect();
    assert_eq!(md5s[2], V1_MD5);
    for row in rows {
        assert_eq!(
            (
                &row["dataId"],
                &row["group"],
                &row["tenant"],
                &row["srcUser"],
                &row["lastId"]
            ),
            (
                &json!(id),
                &json!("G"),
                &json!("hist"),
                &json!("nacos"),
                &json!(-1)
            ),
            "{row}"
        );
        assert_eq!(row["srcIp"], "127.0.0.1", "{row}");
        let time = row["createdTime"].as_str().unwrap();
        assert!(time.ends_with("+00:00") && time.contains('T'), "{time}");
    }
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();

    // One version in detail, and the one before another.
    let oldest = node
        .call("GET", &format!("{HISTORY}?nid={}&{key}", ids[2]))
        .expect(200)
        .json();
    assert_eq!(
        (&oldest["content"], &oldest["opType"]),
        (&json!("v1"), &json!("I"))
    );
    let previous = node
        .call("GET", &format!("{HISTORY}/previous?id={}&{key}", ids[0]))
        .expect(200)
        .json();
    assert_eq!(previous["content"], "v2");
    assert_eq!(previous["id"], json!(ids[1]));
    let r = node.call("GET", &format!("{HISTORY}/previous?id={}&{key}", ids[2]));
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(
        node.call("GET", &format!("{HISTORY}?nid=999999&{key}"))
            .status,
        404
    );
    assert_eq!(
        node.call("GET", &format!("{HISTORY}?nid=x&{key}")).status,
        400
    );
    // A version of another item is not this one's.
    let other = item(&unique("other"), "G", "hist");
    assert_eq!(
        node.call("GET", &format!("{HISTORY}?nid={}&{other}", ids[2]))
            .status,
        404
    );

    // Rollback: publish the old version's content again.
    let old = oldest["content"].as_str().unwrap();
    publish(&node, &format!("{key}&content={}", enc(old))).expect(200);
    let r = node.call("GET", &format!("{CONFIGS}?{key}")).expect(200);
    assert_eq!(
        (r.body.as_str(), r.header("content-md5")),
        ("v1", Some(V1_MD5))
    );

    // A deletion is a version too, and the item stays listed among those with history.
    node.call("DELETE", &format!("{CONFIGS}?{key}")).expect(200);
    let list = node
        .call("GET", &format!("{HISTORY}?{key}&pageNo=1&pageSize=2"))
        .expect(200)
        .json();
    assert_eq!(
        (&list["totalCount"], &list["pagesAvailable"]),
        (&json!(5), &json!(3))
    );
    assert_eq!(list["pageItems"][0]["opType"], "D");
    let configs = node
        .call("GET", &format!("{HISTORY}/configs?tenant=hist"))
        .expect(200)
        .json();
    assert_eq!(
        configs,
        json!([{ "dataId": id, "group": "G", "tenant": "hist" }])
    );
}

#[test]
fn the_long_poll_answers_changes_at_once_holds_otherwise_and_times_out_empty() {
    let node = Node::start();
    let id = unique("poll");
    let key = item(&id, "G", "lp");
    publish(&node, &format!("{key}&content=v1")).expect(200);

    // A listener that holds an older md5 (or none) hears at once.
    for held in ["", V2_MD5] {
        let (r, answer, took) = poll(&node, &listening(&[(&id, "G", held, "lp")]), 30_000);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(answer, format!("{id}\u{2}G\u{2}lp\u{1}"));
        assert!(took < Duration::from_secs(5), "answered at once: {took:?}");
        assert_eq!(r.header("pragma"), Some("no-cache"));
    }
    // Up to date, with a short timeout: held about that long, then answered empty.
    let current = listening(&[(&id, "G", V1_MD5, "lp")]);
    let (r, answer, took) = poll(&node, &current, 1500);
    assert_eq!((r.status, answer.as_str()), (200, ""));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "held for the timeout less the margin: {took:?}"
    );
    // `No-Hangup` answers at once, as does a poll without the timeout header.
    let auth = format!("Bearer {}", node.token());
    for headers in [
        vec![
            ("authorization", auth.as_str()),
            ("Long-Pulling-Timeout", "30000"),
            ("Long-Pulling-Timeout-No-Hangup", "true"),
        ],
        vec![("authorization", auth.as_str())],
    ] {
        let started = Instant::now();
        let r = node
            .raw("POST", LISTENER, &headers, Some(&current))
            .expect(200);
        assert_eq!(r.body, "");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    // Up to date with a long timeout: held until another request publishes, then
    // answered with the item, well before the timeout.
    let other = unique("quiet");
    let form = listening(&[(&other, "G", "", "lp"), (&id, "G", V1_MD5, "lp")]);
    let (answer, took, answered_after_publish) = thread::scope(|s| {
        // The waiter notes when its answer came: the poll thread may start late on a
        // loaded machine, so its own duration says nothing of the publish.
        let waiter = s.spawn(|| {
            let (r, answer, took) = poll(&node, &form, 30_000);
            (r, answer, took, Instant::now())
        });
        thread::sleep(Duration::from_secs(1));
        let published = Instant::now();
        publish(&node, &format!("{key}&content=v2")).expect(200);
        let (r, answer, took, answered) = waiter.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        (answer, took, answered.checked_duration_since(published))
    });
    assert_eq!(
        answer,
        format!("{id}\u{2}G\u{2}lp\u{1}"),
        "only the changed item"
    );
    let after_publish = answered_after_publish
        .unwrap_or_else(|| panic!("answered before the publish: it did not hold ({took:?})"));
    assert!(
        after_publish < Duration::from_secs(5) && took < Duration::from_secs(10),
        "woken by the publish, not the timeout: {took:?}, {after_publish:?} after it"
    );

    // A deleted item, held with its md5, is reported at once; an item of the public
    // namespace is named without a tenant.
    publish(&node, &format!("dataId={id}&group=G&content=v1")).expect(200);
    node.call("DELETE", &format!("{CONFIGS}?{key}")).expect(200);
    let form = listening(&[(&id, "G", V2_MD5, "lp"), (&id, "G", V2_MD5, "")]);
    let (_, answer, took) = poll(&node, &form, 30_000);
    assert_eq!(answer, format!("{id}\u{2}G\u{2}lp\u{1}{id}\u{2}G\u{1}"));
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Neither there nor held: nothing to say.
    let (_, answer, _) = poll(&node, &listening(&[(&id, "G", "", "lp")]), 600);
    assert_eq!(answer, "");
}

#[test]
fn v2_gets_publishes_and_deletes_in_its_envelope() {
    let node = Node::start();
    let id = unique("v2");
    let r = node
        .call_form(
            "POST",
            V2,
            &format!(
                "dataId={id}&group=G&namespaceId=v2ns&content={}&type=yaml&configTags=x",
                enc(CONTENT)
            ),
        )
        .expect(200);
    assert_eq!(
        r.json(),
        json!({"code": 0, "message": "success", "data": true})
    );
    let q = format!("dataId={id}&group=G&namespaceId=v2ns");
    let r = node.call("GET", &format!("{V2}?{q}")).expect(200);
    assert_eq!(
        r.json(),
        json!({"code": 0, "message": "success", "data": CONTENT})
    );
    // The same item through v1.
    let r = node
        .call("GET", &format!("{CONFIGS}?{}", item(&id, "G", "v2ns")))
        .expect(200);
    assert_eq!(
        (r.body.as_str(), r.header("config-type")),
        (CONTENT, Some("yaml"))
    );

    let r = node.call("DELETE", &format!("{V2}?{q}")).expect(200);
    assert_eq!(r.json()["data"], true);
    let r = node.call("GET", &format!("{V2}?{q}"));
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"code": 20004, "message": "resource not found", "data": "config data not exist"})
    );
}

/// Creates `user` with a role granted `action` on each of `resources` (before its login:
/// binding a role ends the user's tokens), and logs in.
fn user_with(node: &Node, user: &str, grants: &[(&str, &str)]) -> String {
    let password = "config-pass-1";
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
fn a_reader_reads_only_what_its_grants_say_and_writes_nothing() {
    let node = Node::start();
    let (dev, other, mixed) = (unique("dev"), unique("other"), unique("mixed"));
    let id = "app.yaml";
    for ns in [&dev, &other] {
        publish(&node, &format!("{}&content=v1", item(id, "G", ns))).expect(200);
    }
    for visible in ["seen-1", "seen-2", "hidden"] {
        publish(&node, &format!("{}&content=v1", item(visible, "G", &mixed))).expect(200);
    }
    let user = unique("reader");
    let token = user_with(
        &node,
        &user,
        &[
            (&format!("{dev}:*:*"), "r"),
            (&format!("{mixed}:G:config/seen-*"), "r"),
        ],
    );
    let denied = |r: Resp| {
        assert_eq!((r.status, r.body.as_str()), (403, "authorization failed!"));
    };
    let get = |path: String| send(&node, &token, "GET", &path, &[], None);

    // Reads in dev, no writes there.
    let r = get(format!("{CONFIGS}?{}", item(id, "G", &dev))).expect(200);
    assert_eq!(r.body, "v1");
    get(format!("{HISTORY}?{}", item(id, "G", &dev))).expect(200);
    let listed = get(format!("{CONFIGS}?search=accurate&tenant={dev}")).expect(200);
    assert_eq!(data_ids(&listed.json()), [id]);
    let write = format!("{}&content=v2", item(id, "G", &dev));
    denied(send(&node, &token, "POST", CONFIGS, &[], Some(&write)));
    denied(send(
        &node,
        &token,
        "DELETE",
        &format!("{CONFIGS}?{}", item(id, "G", &dev)),
        &[],
        None,
    ));
    let r = send(
        &node,
        &token,
        "POST",
        V2,
        &[],
        Some(&format!("dataId={id}&group=G&namespaceId={dev}&content=v2")),
    );
    assert_eq!((r.status, r.json()["code"].clone()), (403, json!(10001)));
    assert_eq!(
        node.call("GET", &format!("{CONFIGS}?{}", item(id, "G", &dev)))
            .body,
        "v1"
    );

    // Nothing of another namespace.
    denied(get(format!("{CONFIGS}?{}", item(id, "G", &other))));
    denied(get(format!("{CONFIGS}?search=accurate&tenant={other}")));
    denied(get(format!("{HISTORY}?{}", item(id, "G", &other))));
    denied(get(format!("{HISTORY}/configs?tenant={other}")));
    assert_eq!(
        get(format!("{V2}?dataId={id}&group=G&namespaceId={other}")).status,
        403
    );

    // Listings of a namespace it reads part of leave out the rest.
    let listed = get(format!("{CONFIGS}?search=blur&tenant={mixed}&pageSize=1")).expect(200);
    let listed = listed.json();
    assert_eq!(
        (data_ids(&listed), &listed["totalCount"]),
        (vec!["seen-1".to_string()], &json!(2))
    );
    let history = get(format!("{HISTORY}/configs?tenant={mixed}"))
        .expect(200)
        .json();
    let names: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["dataId"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seen-1", "seen-2"]);

    // A listener on an item it may not read is refused whole.
    let listen = |entries: &[(&str, &str, &str, &str)]| {
        send(
            &node,
            &token,
            "POST",
            LISTENER,
            &[
                ("Long-Pulling-Timeout-No-Hangup", "true"),
                ("Long-Pulling-Timeout", "30000"),
            ],
            Some(&listening(entries)),
        )
    };
    let r = listen(&[(id, "G", "", dev.as_str())]).expect(200);
    assert_eq!(decode(&r.body), format!("{id}\u{2}G\u{2}{dev}\u{1}"));
    denied(listen(&[
        (id, "G", "", dev.as_str()),
        (id, "G", "", other.as_str()),
    ]));
    denied(listen(&[("hidden", "G", "", mixed.as_str())]));
}

#[test]
fn config_writes_are_in_the_audit_trail_and_the_long_poll_is_not() {
    let node = Node::start();
    let ns = unique("audit-cs");
    let id = unique("audited.yaml");
    publish(&node, &format!("{}&content=v1", item(&id, "G", &ns))).expect(200);
    poll(&node, &listening(&[(&id, "G", V1_MD5, &ns)]), 0);
    node.call_form(
        "POST",
        V2,
        &format!("dataId={id}&group=G&namespaceId={ns}&content=v2"),
    )
    .expect(200);
    node.call("DELETE", &format!("{CONFIGS}?{}", item(&id, "G", &ns)))
        .expect(200);
    let expected = [
        ("DELETE /nacos/v1/cs/configs", "http-v1"),
        ("POST /nacos/v2/cs/config", "http-v2"),
        ("POST /nacos/v1/cs/configs", "http-v1"),
    ];
    let trail = eventually(Duration::from_secs(10), || {
        let trail = node
            .call("GET", &format!("/api/v1/audit?namespaceId={ns}"))
            .expect(200)
            .json();
        let found: Vec<(String, String)> = trail["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_string(),
                    e["face"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = expected
            .iter()
            .map(|(a, f)| (a.to_string(), f.to_string()))
            .collect();
        (found == want).then_some(trail).ok_or(format!("{found:?}"))
    });
    for e in trail["entries"].as_array().unwrap() {
        assert_eq!(
            (&e["user"], &e["resource"], &e["status"]),
            (
                &json!("nacos"),
                &json!(format!("config:G/{id}")),
                &json!(200)
            ),
            "{e}"
        );
    }
}

#[test]
fn python_sdk_0_1_16_publishes_gets_watches_and_removes_configs() {
    let node = Node::start();
    let python = workspace_root().join("tests/clients/python/.venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run scripts/test",
        python.display()
    );
    let data_id = unique("py-config");
    let namespace = unique("py-ns");
    let out = Command::new(&python)
        .arg(workspace_root().join("tests/clients/python/config_flow.py"))
        .args(["--server", &node.addr()])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--data-id", &data_id, "--namespace", &namespace])
        .output()
        .expect("run the python client; run scripts/test to install it");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "python config client failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("python config client:\n{stdout}");
    let steps: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let names: Vec<&str> = steps.iter().filter_map(|s| s["step"].as_str()).collect();
    assert_eq!(
        names,
        [
            "publish",
            "get",
            "other_namespace_apart",
            "watch",
            "watch_other_namespace",
            "remove",
            "done"
        ],
        "{stdout}"
    );
    assert!(steps.iter().all(|s| s["ok"] == true), "{stdout}");
    // The server agrees: both items are gone, their history stays.
    for tenant in ["", namespace.as_str()] {
        let r = node.call(
            "GET",
            &format!("{CONFIGS}?dataId={data_id}&tenant={tenant}"),
        );
        assert_eq!(r.status, 404, "{tenant}: {}", r.body);
        let history = node
            .call(
                "GET",
                &format!("{HISTORY}?dataId={data_id}&tenant={tenant}"),
            )
            .expect(200)
            .json();
        assert!(history["totalCount"].as_u64().unwrap() >= 3, "{history}");
    }
}
