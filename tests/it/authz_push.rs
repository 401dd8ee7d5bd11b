//! Pushes last only as long as the right to read: a user's gRPC and UDP subscriptions
//! and gRPC configuration listens are dropped within a second of a grant taken back, or
//! of the end of their tokens (a password change, their deletion), done through another
//! node, and no later change reaches them.

use std::io::Read;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use roster_tests::{enc, eventually, json, unique, Cluster, Node, Value};

use crate::authz::{admin_register, ask, grant, grpc_runtime, login, query_body, PASSWORD};
use crate::grpc::RawClient;

const SUBSCRIBE: &str = "SubscribeServiceRequest";
/// An agent that gets UDP pushes.
const JAVA_AGENT: &str = "Nacos-Java-Client:v1.4.6";

/// How long a change that must not be pushed is waited for.
const QUIET: Duration = Duration::from_millis(1500);

/// The sorted host IPs of a `ServiceInfo`.
fn ips(info: &Value) -> Vec<String> {
    let hosts = info["hosts"].as_array().expect("hosts");
    let mut ips: Vec<String> = hosts
        .iter()
        .map(|h| h["ip"].as_str().unwrap().to_string())
        .collect();
    ips.sort();
    ips
}

/// The next UDP push within `timeout` (acknowledged): its service's host IPs.
fn udp_push(socket: &UdpSocket, timeout: Duration) -> Option<Vec<String>> {
    socket
        .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let (len, from) = socket.recv_from(&mut buf).ok()?;
    let mut text = String::new();
    if buf[..len].starts_with(&[0x1f, 0x8b]) {
        let mut gz = flate2::read::GzDecoder::new(&buf[..len]);
        gz.read_to_string(&mut text).unwrap();
    } else {
        text = String::from_utf8(buf[..len].to_vec()).unwrap();
    }
    let packet: Value = serde_json::from_str(&text).unwrap();
    let ack = json!({"type": "push-ack", "lastRefTime": packet["lastRefTime"], "data": ""});
    socket.send_to(ack.to_string().as_bytes(), from).unwrap();
    Some(ips(
        &serde_json::from_str(packet["data"].as_str().unwrap()).unwrap()
    ))
}

/// Waits (5 s at most) for gRPC and UDP pushes that show `ip`.
async fn pushed(grpc: &mut RawClient, udp: &UdpSocket, ip: &str) {
    let ip = ip.to_string();
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = || deadline.saturating_duration_since(Instant::now());
    while !ips(&grpc.expect("NotifySubscriberRequest", left()).await["serviceInfo"]).contains(&ip) {
    }
    while !udp_push(udp, left())
        .unwrap_or_else(|| panic!("no UDP push of {ip}"))
        .contains(&ip)
    {}
}

/// Checks that no push shows `ip` over gRPC (for [`QUIET`]) or UDP.
async fn not_pushed(grpc: &mut RawClient, udp: &UdpSocket, ip: &str) {
    let ip = ip.to_string();
    let deadline = Instant::now() + QUIET;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let push = grpc.expect("NotifySubscriberRequest", left + Duration::from_secs(5));
        let Ok(body) = tokio::time::timeout(left, push).await else {
            break;
        };
        assert!(
            !ips(&body["serviceInfo"]).contains(&ip),
            "gRPC push after the revocation: {body}"
        );
    }
    // Anything sent meanwhile waits in the socket.
    while let Some(hosts) = udp_push(udp, Duration::from_millis(200)) {
        assert!(
            !hosts.contains(&ip),
            "UDP push after the revocation: {hosts:?}"
        );
    }
}

/// A gRPC connection to `node`, set up.
pub(crate) async fn connected(node: &Node) -> RawClient {
    let mut grpc = RawClient::connect(&format!("127.0.0.1:{}", node.http_port + 1000)).await;
    grpc.open_stream().await;
    let setup = json!({"clientVersion": "Roster-Test:v1", "labels": {}, "abilityTable": {}});
    grpc.send("ConnectionSetupRequest", setup).await;
    grpc.expect("SetupAckRequest", Duration::from_secs(5)).await;
    grpc
}

/// How many subscribers (UDP and gRPC) `node` has for `service` of `namespace`.
fn subscribers(node: &Node, namespace: &str, service: &str) -> u64 {
    let path =
        format!("/nacos/v1/ns/service/subscribers?namespaceId={namespace}&serviceName={service}");
    node.call("GET", &path).expect(200).json()["count"]
        .as_u64()
        .unwrap()
}

/// A new namespace and a new user (names from `ns` and `user`) granted `r` on all of
/// it through a role of their own, made through `admin`: (namespace, user, role).
fn reader_of_new_namespace(admin: &Node, ns: &str, user: &str) -> (String, String, String) {
    let (ns, user) = (unique(ns), unique(user));
    let form = format!("customNamespaceId={ns}&namespaceName={ns}");
    admin
        .call_form("POST", "/nacos/v1/console/namespaces", &form)
        .expect(200);
    let form = format!("username={user}&password={PASSWORD}");
    admin
        .call_form("POST", "/nacos/v1/auth/users", &form)
        .expect(200);
    let role = format!("{user}-r");
    grant(admin, &user, &role, &format!("{ns}:*:*"), "r");
    (ns, user, role)
}

#[test]
fn revoked_readers_are_pushed_nothing_more_over_grpc_or_udp() {
    let c = Cluster::start(3, &[]);
    let (admin, watched, other) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    let svc = "watched";
    let (ns, user, role) = reader_of_new_namespace(admin, "push-ns", "pusher");
    let mut token = login(admin, &user, PASSWORD);
    admin_register(watched, &ns, svc, "127.36.0.1");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let list = format!("/nacos/v1/ns/instance/list?namespaceId={ns}&serviceName={svc}");
    let list = format!("{list}&udpPort={port}&clientIP=127.0.0.1");
    let permission = format!(
        "role={role}&resource={}&action=r",
        enc(&format!("{ns}:*:*"))
    );
    // Round 1: the grant taken back. Round 2 (granted again): the password changed.
    // Round 3 (logged in again): the user deleted.
    let password = format!("username={user}&newPassword=pusher-pass-2");
    let username = format!("username={user}");
    let revocations = [
        ("DELETE", "/nacos/v1/auth/permissions", permission.as_str()),
        ("PUT", "/nacos/v1/auth/users", password.as_str()),
        ("DELETE", "/nacos/v1/auth/users", username.as_str()),
    ];
    let subscribe = query_body(&ns, svc);
    grpc_runtime().block_on(async {
        let mut grpc = connected(watched).await;
        for (round, (method, path, form)) in (1..).zip(revocations) {
            // Subscribed on `watched` as the user, over UDP (a v1 list query) and gRPC.
            let bearer = format!("Bearer {token}");
            let headers = [
                ("authorization", bearer.as_str()),
                ("user-agent", JAVA_AGENT),
            ];
            eventually(Duration::from_secs(5), || {
                let r = watched.raw("GET", &list, &headers, None);
                (r.status == 200).then_some(()).ok_or(r.body)
            });
            let (_, body) = ask(&mut grpc, SUBSCRIBE, subscribe.clone(), &token).await;
            assert_eq!(body["success"], json!(true), "{body}");
            assert_eq!(subscribers(watched, &ns, svc), 2);
            let before = format!("127.36.{round}.1");
            admin_register(watched, &ns, svc, &before);
            pushed(&mut grpc, &udp, &before).await;

            // Revoked through another node: dropped within a second, pushed nothing.
            let since = Instant::now();
            other.call(method, &format!("{path}?{form}")).expect(200);
            let left = Duration::from_secs(1).saturating_sub(since.elapsed());
            eventually(left.max(Duration::from_millis(1)), || {
                match subscribers(watched, &ns, svc) {
                    0 => Ok(()),
                    n => Err(format!("{n} subscribers left")),
                }
            });
            eprintln!(
                "round {round}: subscriptions dropped {:?} after",
                since.elapsed()
            );
            let after = format!("127.36.{round}.2");
            admin_register(watched, &ns, svc, &after);
            not_pushed(&mut grpc, &udp, &after).await;
            // Asked again, the gRPC subscription is refused as any request would be.
            let (_, body) = ask(&mut grpc, SUBSCRIBE, subscribe.clone(), &token).await;
            let refusal = (body["errorCode"].clone(), body["success"].clone());
            assert_eq!(refusal, (json!(403), json!(false)), "{body}");
            if round == 1 {
                let permissions = "/nacos/v1/auth/permissions";
                admin
                    .call_form("POST", permissions, &permission)
                    .expect(200);
            } else if round == 2 {
                token = login(admin, &user, "pusher-pass-2");
            }
        }
    });
}

/// A `ConfigBatchListenRequest` listening to `data_id` of `ns` (holding nothing).
fn listen_body(ns: &str, data_id: &str) -> Value {
    let context = json!({"dataId": data_id, "group": "DEFAULT_GROUP", "tenant": ns, "md5": ""});
    json!({"headers": {}, "module": "config", "listen": true, "configListenContexts": [context]})
}

/// How many gRPC connections `node` says listen to `data_id` of `ns`.
fn grpc_listeners(node: &Node, ns: &str, data_id: &str) -> usize {
    let path =
        format!("/nacos/v1/cs/configs/listener?dataId={data_id}&group=DEFAULT_GROUP&tenant={ns}");
    let listeners = node.call("GET", &path).expect(200).json()["listeners"].clone();
    let listeners = listeners.as_array().expect("listeners").clone();
    listeners.iter().filter(|l| l["protocol"] == "grpc").count()
}

/// Publishes `content` as `data_id` of `ns` through `node`, as the admin.
fn publish(node: &Node, ns: &str, data_id: &str, content: &str) {
    let form = format!("dataId={data_id}&group=DEFAULT_GROUP&tenant={ns}&content={content}");
    node.call_form("POST", "/nacos/v1/cs/configs", &form)
        .expect(200);
}

#[test]
fn revoked_readers_hear_of_no_more_config_changes() {
    let c = Cluster::start(3, &[]);
    let (admin, watched, other) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    let data_id = unique("listened");
    let (ns, user, role) = reader_of_new_namespace(admin, "listen-ns", "listener");
    let token = login(admin, &user, PASSWORD);
    publish(admin, &ns, &data_id, "v%3D1");
    // Listened to once `watched` has it: a listen before would be pushed the first one.
    let get = format!("/nacos/v1/cs/configs?dataId={data_id}&group=DEFAULT_GROUP&tenant={ns}");
    eventually(Duration::from_secs(5), || {
        let r = watched.call("GET", &get);
        (r.status == 200).then_some(()).ok_or(r.body)
    });
    // A long poll, short (no hold): let in while the grant lasts, as every new one is.
    let bearer = format!("Bearer {token}");
    let poll = |node: &Node| {
        let entry = format!("{data_id}\u{2}DEFAULT_GROUP\u{2}\u{2}{ns}\u{1}");
        let form = format!("Listening-Configs={}", enc(&entry));
        let headers = [("authorization", bearer.as_str())];
        node.raw(
            "POST",
            "/nacos/v1/cs/configs/listener",
            &headers,
            Some(&form),
        )
        .status
    };
    assert_eq!(poll(watched), 200);
    let permission = format!(
        "role={role}&resource={}&action=r",
        enc(&format!("{ns}:*:*"))
    );
    grpc_runtime().block_on(async {
        let mut grpc = connected(watched).await;
        let listen = listen_body(&ns, &data_id);
        let (_, body) = ask(
            &mut grpc,
            "ConfigBatchListenRequest",
            listen.clone(),
            &token,
        )
        .await;
        assert_eq!(body["success"], json!(true), "{body}");
        assert_eq!(grpc_listeners(watched, &ns, &data_id), 1);
        publish(admin, &ns, &data_id, "v%3D2");
        let push = grpc
            .expect("ConfigChangeNotifyRequest", Duration::from_secs(5))
            .await;
        assert_eq!(push["dataId"], json!(data_id), "{push}");
        let ack = json!({"resultCode": 200, "errorCode": 0, "requestId": push["requestId"]});
        grpc.send("ConfigChangeNotifyResponse", ack).await;

        // Revoked through another node: the listen dropped within a second.
        let since = Instant::now();
        other
            .call(
                "DELETE",
                &format!("/nacos/v1/auth/permissions?{permission}"),
            )
            .expect(200);
        let left = Duration::from_secs(1).saturating_sub(since.elapsed());
        eventually(left.max(Duration::from_millis(1)), || match grpc_listeners(
            watched, &ns, &data_id,
        ) {
            0 => Ok(()),
            n => Err(format!("{n} gRPC listeners left")),
        });
        eprintln!("config listen dropped {:?} after", since.elapsed());
        // The next change is not pushed.
        publish(admin, &ns, &data_id, "v%3D3");
        let quiet = tokio::time::timeout(
            QUIET,
            grpc.expect("ConfigChangeNotifyRequest", Duration::from_secs(10)),
        )
        .await;
        assert!(quiet.is_err(), "pushed after the revocation: {quiet:?}");
        // Listening again is refused, as is a new long poll.
        let (_, body) = ask(&mut grpc, "ConfigBatchListenRequest", listen, &token).await;
        let refusal = (body["errorCode"].clone(), body["success"].clone());
        assert_eq!(refusal, (json!(403), json!(false)), "{body}");
    });
    assert_eq!(poll(watched), 403);
}
