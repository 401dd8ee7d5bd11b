//! Dubbo 3 Java (3.3) with application-level service discovery: roster is its registry,
//! metadata report and config centre (user and password in the `nacos://` address). A Java
//! provider and a Java consumer call each other over Triple (hessian2) through roster; the
//! test reads back what Dubbo wrote (the interface → application mapping, the revision's
//! metadata). Then the cross-language case Dubbo users run: the Java consumer calls the
//! dubbo-go provider and the dubbo-go consumer calls the Java provider (the Go programs of
//! `tests/clients/go`, the same service in both languages).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use roster_tests::{enc, free_port, json, unique, Node, Value, ADMIN_PASSWORD};

use tempfile::TempDir;

use super::{java, Running};
use crate::calls::{answered, assert_all_loopback_in, config, dubbo_revision, wait_report};
use crate::go_clients::scenario;

/// The interface both languages serve (`org.roster.test.Greeter`).
const INTERFACE: &str = "org.roster.test.Greeter";

/// A Dubbo Java process starts in 5-20 s on a loaded machine.
const JVM_START: Duration = Duration::from_secs(90);

/// The flags every program, Java or Go, takes: roster, the user, the application, the
/// namespace (empty: public) and the directory for the clients' caches and logs.
fn common(cmd: &mut Command, servers: &str, app: &str, namespace: &str, dir: &Path) {
    cmd.args(["--server", servers])
        .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
        .args(["--app", app, "--seconds", "300"])
        .arg("--dir")
        .arg(dir);
    if !namespace.is_empty() {
        cmd.args(["--namespace", namespace]);
    }
}

/// A provider (`java` or Go) named `name` serving Triple on 127.0.0.1:`port`, started and
/// registered.
fn provider(
    java_side: bool,
    servers: &str,
    app: &str,
    namespace: &str,
    name: &str,
    tmp: &TempDir,
) -> (Running, Value, u16) {
    let port = free_port();
    let mut cmd = if java_side {
        java("dubbo", "org.roster.clients.dubbo.Provider")
    } else {
        scenario("dubbo-provider")
    };
    common(&mut cmd, servers, app, namespace, &tmp.path().join(name));
    cmd.args(["--name", name, "--port", &port.to_string()]);
    let lang = if java_side { "Java" } else { "dubbo-go" };
    let mut p = Running::start(cmd, &format!("{lang} provider {name}"));
    let serving = p.wait_step("serving", JVM_START);
    (p, serving, port)
}

/// A consumer (`java` or Go) of the interface, started and dialed.
fn consumer(java_side: bool, servers: &str, namespace: &str, tmp: &TempDir) -> Running {
    let app = unique("dubbo-caller");
    let mut cmd = if java_side {
        java("dubbo", "org.roster.clients.dubbo.Consumer")
    } else {
        scenario("dubbo-consumer")
    };
    common(&mut cmd, servers, &app, namespace, &tmp.path().join(&app));
    let lang = if java_side { "Java" } else { "dubbo-go" };
    let mut c = Running::start(cmd, &format!("{lang} consumer"));
    c.wait_step("dialed", JVM_START);
    c
}

/// Waits for a report, for a second that began from now on, in which every call was
/// answered by `name` and none failed.
fn wait_answers(c: &mut Running, name: &str) -> Value {
    wait_report(
        c,
        &format!("calls answered by {name} alone, without errors"),
        |v| {
            v["errors"] == 0
                && answered(v, name) > 0
                && v["by"].as_object().is_some_and(|by| by.len() == 1)
        },
    )
}

/// Ends a program through its stdin; it must exit 0.
fn stop(mut p: Running) {
    p.close_stdin();
    p.wait_success(Duration::from_secs(20));
}

#[test]
fn dubbo_java_provider_and_consumer_discover_each_other_through_roster() {
    let node = Node::start();
    let tmp = tempfile::tempdir().unwrap();
    let servers = node.addr();
    let app = unique("dubbo-java-greeter");
    // The config centre: Dubbo reads the application's item (data id dubbo.properties,
    // group = the application) before it exports anything.
    node.call_form(
        "POST",
        "/nacos/v1/cs/configs",
        &format!(
            "dataId=dubbo.properties&group={app}&content={}",
            enc("roster.greeting=hello from roster\n")
        ),
    )
    .expect(200);

    let (p1, serving, port) = provider(true, &servers, &app, "", "j1", &tmp);
    assert_eq!(
        serving["greeting"],
        json!("hello from roster"),
        "the provider read its config centre item: {serving}"
    );
    let mut c = consumer(true, &servers, "", &tmp);
    wait_answers(&mut c, "j1");

    // What Dubbo Java wrote to roster: the mapping, created by compare-and-set (Dubbo
    // sends casMd5=0 for a mapping that does not exist yet) ...
    assert_eq!(config(&node, INTERFACE, "mapping"), app, "the mapping");
    // ... the instance, by application, on loopback, with its metadata's revision ...
    let revision = dubbo_revision(&node, &app, port, &serving);
    // ... and the revision's metadata, data id = application, group = revision.
    let meta: Value = roster_tests::serde_json::from_str(&config(&node, &app, &revision))
        .unwrap_or_else(|e| panic!("metadata {app}/{revision}: {e}"));
    assert_eq!(meta["app"], json!(app), "{meta}");
    assert_eq!(meta["revision"], json!(revision), "{meta}");
    let service = &meta["services"][format!("{INTERFACE}:tri")];
    assert_eq!(service["name"], json!(INTERFACE), "{meta}");
    assert_eq!(service["port"], json!(port), "{meta}");
    assert_eq!(
        service["params"]["serialization"],
        json!("hessian2"),
        "{meta}"
    );
    assert_all_loopback_in(&node, "");

    stop(c);
    stop(p1);
}

#[test]
fn dubbo_java_and_dubbo_go_call_each_other_through_roster() {
    let node = Node::start();
    let tmp = tempfile::tempdir().unwrap();
    let servers = node.addr();
    // Each direction in a namespace of its own, so that each consumer finds one
    // application (one language) behind the interface's mapping; both run at once.
    let go_ns = unique("dubbo-go-side");
    let java_ns = unique("dubbo-java-side");
    for ns in [&go_ns, &java_ns] {
        node.call(
            "POST",
            &format!("/nacos/v1/console/namespaces?customNamespaceId={ns}&namespaceName={ns}"),
        )
        .expect(200);
    }
    let go_app = unique("dubbo-go-greeter");
    let java_app = unique("dubbo-java-greeter");

    let (go_provider, _, _) = provider(false, &servers, &go_app, &go_ns, "g1", &tmp);
    let (java_provider, _, _) = provider(true, &servers, &java_app, &java_ns, "j1", &tmp);
    let mut java_consumer = consumer(true, &servers, &go_ns, &tmp);
    let mut go_consumer = consumer(false, &servers, &java_ns, &tmp);

    // The Java consumer calls the dubbo-go provider, the dubbo-go consumer the Java one.
    wait_answers(&mut java_consumer, "g1");
    wait_answers(&mut go_consumer, "j1");
    assert_all_loopback_in(&node, &go_ns);
    assert_all_loopback_in(&node, &java_ns);

    stop(java_consumer);
    stop(go_consumer);
    stop(java_provider);
    stop(go_provider);
}
