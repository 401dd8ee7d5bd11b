//! The CP workload: clients that publish, compare-and-set, remove and read a handful of
//! configuration items, and register, deregister and list persistent instances of a
//! few services, each operation through a node picked at random and over HTTP or gRPC,
//! recorded in the [`History`] with its call and return times. Values are unique per
//! write (`v<client>-<n>`), so the checker can tell which write a read saw.
//!
//! A client behaves as SDKs do under faults: a request that times out, or whose
//! connection breaks, is given up ("unknown": a write may have happened), and the next
//! one goes wherever the dice say — to a dead node too, which costs a connection error.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use md5::{Digest, Md5};
use serde_json::{json, Value};

use super::history::{History, Status};
use super::rng::Rng;
use crate::grpc::{decode, payload, RawClient};

/// The configuration items written and read (in group [`GROUP`] of the public namespace).
pub const CONFIG_KEYS: [&str; 8] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
/// The group of the items.
pub const GROUP: &str = "ROBUSTNESS";
/// The services whose persistent instances come and go: client `c` registers addresses
/// `127.0.36.<c + 1>:<port>` (loopback: the leader probes them), a new port each time.
pub const SERVICES: [&str; 5] = ["cp-a", "cp-b", "cp-c", "cp-d", "cp-e"];
/// How long a request may take before the client gives it up: longer than roster takes
/// to answer a write it cannot commit (it waits up to 10 s for a leader's answer), so
/// that a refusal comes back as one rather than as a timeout of unknown outcome.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a node is reached.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its id (from 1).
    pub node: usize,
    /// `host:port` of its HTTP API.
    pub http: String,
    /// `host:port` of its gRPC port.
    pub grpc: String,
}

/// What the clients share.
pub struct Shared {
    /// The nodes.
    pub endpoints: Vec<Endpoint>,
    /// An admin token (valid on every node, across restarts).
    pub token: String,
    /// The record.
    pub history: Arc<History>,
    /// Set when the run ends.
    pub stop: Arc<AtomicBool>,
}

/// Starts `clients` client threads, client `i` choosing with `Rng::fork(seed, i)`.
pub fn spawn(clients: usize, seed: u64, shared: Arc<Shared>) -> Vec<JoinHandle<()>> {
    (0..clients)
        .map(|i| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("cp-client-{i}"))
                .spawn(move || Client::new(i, Rng::fork(seed, i as u64), shared).run())
                .unwrap()
        })
        .collect()
}

/// The md5 of a value, as Nacos computes it.
fn md5_hex(content: &str) -> String {
    Md5::digest(content.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One client: its own HTTP agent, gRPC connections and last values read.
struct Client {
    id: usize,
    rng: Rng,
    shared: Arc<Shared>,
    agent: ureq::Agent,
    runtime: tokio::runtime::Runtime,
    /// A set-up gRPC connection per node, dropped when it fails.
    grpc: HashMap<usize, RawClient>,
    /// The content this client last read of each item: what it compares-and-sets from.
    last_read: HashMap<&'static str, String>,
    writes: u64,
    /// The instances this client added and has not removed: (service, ip, port).
    mine: Vec<(&'static str, String, u16)>,
    /// The last port used.
    ports: u16,
}

/// What an HTTP request came back with: a status and body, or a transport error.
type Answer = Result<(u16, String), String>;

impl Client {
    fn new(id: usize, rng: Rng, shared: Arc<Shared>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self {
            id,
            rng,
            shared,
            agent,
            runtime,
            grpc: HashMap::new(),
            last_read: HashMap::new(),
            writes: 0,
            mine: Vec::new(),
            ports: 0,
        }
    }

    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            let node = self.rng.below(self.shared.endpoints.len());
            let grpc = self.rng.chance(0.5);
            if self.rng.chance(0.6) {
                self.config_op(node, grpc);
            } else {
                self.instance_op(node, grpc);
            }
            std::thread::sleep(self.rng.between_ms(20, 80));
        }
    }

    fn next_value(&mut self) -> String {
        self.writes += 1;
        format!("v{}-{}", self.id, self.writes)
    }

    // ----- configuration items -------------------------------------------------------

    fn config_op(&mut self, node: usize, grpc: bool) {
        let key = CONFIG_KEYS[self.rng.below(CONFIG_KEYS.len())];
        // put, cas, delete, get, get_consistent
        match self.rng.weighted(&[5, 5, 2, 4, 4]) {
            0 => {
                let value = self.next_value();
                self.publish(node, grpc, key, value, None);
            }
            1 => match self.last_read.get(key).cloned() {
                Some(expect) => {
                    let value = self.next_value();
                    self.publish(node, grpc, key, value, Some(expect));
                }
                None => self.read(node, false, key, true),
            },
            2 => self.remove(node, grpc, key),
            3 => self.read(node, grpc, key, false),
            // Consistent reads are an HTTP option.
            _ => self.read(node, false, key, true),
        }
    }

    fn publish(
        &mut self,
        node: usize,
        grpc: bool,
        key: &str,
        value: String,
        expect: Option<String>,
    ) {
        let endpoint = self.shared.endpoints[node].clone();
        let op = if expect.is_some() { "cas" } else { "put" };
        let face = if grpc { "grpc" } else { "http" };
        let history = self.shared.history.clone();
        let mut call = history
            .call(self.id, endpoint.node, face, "config", key, op)
            .arg("value", value.clone());
        if let Some(e) = &expect {
            call = call.arg("expect", e.clone());
        }
        let cas = expect.as_deref().map(md5_hex);
        let (status, error) = if grpc {
            let mut body = json!({"headers": {}, "requestId": "1", "module": "config", "dataId": key,
                "group": GROUP, "tenant": "", "content": value, "casMd5": cas, "additionMap": {}});
            if cas.is_none() {
                body["casMd5"] = Value::Null;
            }
            match self.unary(&endpoint, "ConfigPublishRequest", body) {
                Ok((_, b)) if b["resultCode"] == 200 => (Status::Ok, String::new()),
                Ok((_, b)) => {
                    let message = b["message"].as_str().unwrap_or_default().to_string();
                    (classify_grpc(&b, &message), message)
                }
                Err(e) if never_sent(&e) => (Status::NotSent, e),
                Err(e) => (Status::Unknown, e),
            }
        } else {
            let mut form = format!(
                "dataId={key}&group={GROUP}&content={}&accessToken={}",
                roster_tests::enc(&value),
                self.shared.token
            );
            if let Some(cas) = &cas {
                form.push_str(&format!("&casMd5={cas}"));
            }
            let answer = self.http(&endpoint, "POST", "/nacos/v1/cs/configs", Some(&form));
            classify_http(&answer)
        };
        call.returned(status, json!({ "error": error }));
    }

    fn remove(&mut self, node: usize, grpc: bool, key: &str) {
        let endpoint = self.shared.endpoints[node].clone();
        let face = if grpc { "grpc" } else { "http" };
        let history = self.shared.history.clone();
        let call = history.call(self.id, endpoint.node, face, "config", key, "delete");
        let (status, error) = if grpc {
            let body = json!({"headers": {}, "requestId": "1", "module": "config", "dataId": key,
                "group": GROUP, "tenant": ""});
            match self.unary(&endpoint, "ConfigRemoveRequest", body) {
                Ok((_, b)) if b["resultCode"] == 200 => (Status::Ok, String::new()),
                Ok((_, b)) => {
                    let message = b["message"].as_str().unwrap_or_default().to_string();
                    (classify_grpc(&b, &message), message)
                }
                Err(e) if never_sent(&e) => (Status::NotSent, e),
                Err(e) => (Status::Unknown, e),
            }
        } else {
            let path = format!(
                "/nacos/v1/cs/configs?dataId={key}&group={GROUP}&accessToken={}",
                self.shared.token
            );
            classify_http(&self.http(&endpoint, "DELETE", &path, None))
        };
        call.returned(status, json!({ "error": error }));
    }

    fn read(&mut self, node: usize, grpc: bool, key: &'static str, consistent: bool) {
        let endpoint = self.shared.endpoints[node].clone();
        let face = if grpc { "grpc" } else { "http" };
        let op = if consistent { "get_consistent" } else { "get" };
        let history = self.shared.history.clone();
        let call = history.call(self.id, endpoint.node, face, "config", key, op);
        // (status, found, content, error)
        let (status, found, content, error) = if grpc {
            let body = json!({"headers": {}, "module": "config", "dataId": key, "group": GROUP,
                "tenant": "", "tag": ""});
            match self.unary(&endpoint, "ConfigQueryRequest", body) {
                Ok((_, b)) if b["resultCode"] == 200 => {
                    let content = b["content"].as_str().unwrap_or_default().to_string();
                    (Status::Ok, true, content, String::new())
                }
                // CONFIG_NOT_FOUND
                Ok((_, b)) if b["errorCode"] == 300 => {
                    (Status::Ok, false, String::new(), String::new())
                }
                Ok((_, b)) => (Status::Unknown, false, String::new(), b.to_string()),
                Err(e) if never_sent(&e) => (Status::NotSent, false, String::new(), e),
                Err(e) => (Status::Unknown, false, String::new(), e),
            }
        } else {
            let path = format!(
                "/nacos/v1/cs/configs?dataId={key}&group={GROUP}&accessToken={}{}",
                self.shared.token,
                if consistent { "&consistent=true" } else { "" }
            );
            match self.http(&endpoint, "GET", &path, None) {
                Ok((200, body)) => (Status::Ok, true, body, String::new()),
                Ok((404, _)) => (Status::Ok, false, String::new(), String::new()),
                Ok((status, body)) => (
                    Status::Unknown,
                    false,
                    String::new(),
                    format!("{status} {body}"),
                ),
                Err(e) if never_sent(&e) => (Status::NotSent, false, String::new(), e),
                Err(e) => (Status::Unknown, false, String::new(), e),
            }
        };
        if status == Status::Ok && found {
            self.last_read.insert(key, content.clone());
        }
        let result = if found {
            json!({"found": true, "read": content, "error": error})
        } else {
            json!({"found": false, "error": error})
        };
        call.returned(status, result);
    }

    // ----- persistent instances ------------------------------------------------------

    fn instance_op(&mut self, node: usize, grpc: bool) {
        let endpoint = self.shared.endpoints[node].clone();
        let history = self.shared.history.clone();
        // add, remove, list: a client adds addresses of its own, each once (a new port
        // each time), and removes what it added, each once — so that the checker can
        // tell which add or remove a list saw.
        let mut choice = self.rng.weighted(&[4, 4, 4]);
        if choice == 1 && self.mine.is_empty() {
            choice = 0;
        }
        match choice {
            op @ (0 | 1) => {
                let (service, ip, port) = match op {
                    0 => {
                        self.ports += 1;
                        let service = SERVICES[self.rng.below(SERVICES.len())];
                        let added = (
                            service,
                            format!("127.0.36.{}", self.id + 1),
                            10_000 + self.ports,
                        );
                        self.mine.push(added.clone());
                        added
                    }
                    _ => {
                        let at = self.rng.below(self.mine.len());
                        self.mine.swap_remove(at)
                    }
                };
                let (name, grpc_type, method) = match op {
                    0 => ("add", "registerInstance", "POST"),
                    _ => ("remove", "deregisterInstance", "DELETE"),
                };
                let face = if grpc { "grpc" } else { "http" };
                let call = history
                    .call(self.id, endpoint.node, face, "instances", service, name)
                    .arg("addr", format!("{ip}:{port}"));
                let (status, error) = if grpc {
                    let body = json!({"headers": {}, "requestId": null, "namespace": "public",
                        "serviceName": service, "groupName": "DEFAULT_GROUP", "type": grpc_type,
                        "instance": {"ip": ip, "port": port, "weight": 1.0, "healthy": true,
                            "enabled": true, "ephemeral": false, "clusterName": "DEFAULT",
                            "metadata": {}}, "module": "naming"});
                    match self.unary(&endpoint, "PersistentInstanceRequest", body) {
                        Ok((_, b)) if b["resultCode"] == 200 => (Status::Ok, String::new()),
                        Ok((_, b)) => {
                            let message = b["message"].as_str().unwrap_or_default().to_string();
                            (classify_grpc(&b, &message), message)
                        }
                        Err(e) if never_sent(&e) => (Status::NotSent, e),
                        Err(e) => (Status::Unknown, e),
                    }
                } else {
                    // A deregistration states the kind, or leaves it to the node (which
                    // must then decide on a view as new as the leader's commit).
                    let stated = if op == 0 || self.rng.chance(0.5) {
                        "&ephemeral=false"
                    } else {
                        ""
                    };
                    let path = format!(
                        "/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port={port}{stated}&accessToken={}",
                        self.shared.token
                    );
                    classify_http(&self.http(&endpoint, method, &path, None))
                };
                call.returned(status, json!({ "error": error }));
            }
            _ => {
                let service = SERVICES[self.rng.below(SERVICES.len())];
                let call =
                    history.call(self.id, endpoint.node, "http", "instances", service, "list");
                let path = format!(
                    "/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false&consistent=true&accessToken={}",
                    self.shared.token
                );
                match self.http(&endpoint, "GET", &path, None) {
                    Ok((200, body)) => {
                        let hosts = serde_json::from_str::<Value>(&body)
                            .ok()
                            .and_then(|v| v["hosts"].as_array().cloned());
                        match hosts {
                            Some(hosts) => {
                                let addrs: BTreeSet<String> = hosts
                                    .iter()
                                    .map(|h| {
                                        format!("{}:{}", h["ip"].as_str().unwrap_or("?"), h["port"])
                                    })
                                    .collect();
                                call.returned(Status::Ok, json!({ "addrs": addrs }));
                            }
                            None => call.returned(
                                Status::Unknown,
                                json!({ "error": format!("not a list: {body}") }),
                            ),
                        }
                    }
                    Ok((status, body)) => call.returned(
                        Status::Unknown,
                        json!({ "error": format!("{status} {body}") }),
                    ),
                    Err(e) => call.returned(Status::Unknown, json!({ "error": e })),
                }
            }
        }
    }

    // ----- transport -----------------------------------------------------------------

    fn http(&self, endpoint: &Endpoint, method: &str, path: &str, form: Option<&str>) -> Answer {
        roster_tests::addresses::check_request(path, form);
        let url = format!("http://{}{}", endpoint.http, path);
        let builder = ureq::http::Request::builder().method(method).uri(&url);
        let result = match form {
            Some(body) => self.agent.run(
                builder
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body.to_string())
                    .map_err(|e| e.to_string())?,
            ),
            None => self.agent.run(builder.body(()).map_err(|e| e.to_string())?),
        };
        let mut response = result.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    /// One gRPC request through this client's connection to `endpoint` (set up first if
    /// there is none); a connection that fails is dropped.
    fn unary(
        &mut self,
        endpoint: &Endpoint,
        kind: &str,
        body: Value,
    ) -> Result<(String, Value), String> {
        let token = self.shared.token.clone();
        let runtime = &self.runtime;
        let grpc = &mut self.grpc;
        runtime.block_on(async {
            let client = match grpc.entry(endpoint.node) {
                Entry::Occupied(held) => held.into_mut(),
                // The request goes only on a connection that is set up.
                Entry::Vacant(slot) => slot.insert(
                    RawClient::try_set_up(&endpoint.grpc, REQUEST_TIMEOUT)
                        .await
                        .map_err(|e| format!("not sent: {e}"))?,
                ),
            };
            let call = client.try_unary(payload(kind, &body, Some(&token)));
            match tokio::time::timeout(REQUEST_TIMEOUT, call).await {
                Ok(Ok(reply)) => {
                    let (kind, body) = decode(&reply);
                    // A node that restarted does not know this connection: set up a new
                    // one next time.
                    if body["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("unregistered"))
                    {
                        grpc.remove(&endpoint.node);
                    }
                    Ok((kind, body))
                }
                Ok(Err(status)) => {
                    grpc.remove(&endpoint.node);
                    Err(format!("grpc: {status}"))
                }
                Err(_) => {
                    grpc.remove(&endpoint.node);
                    Err("grpc: timed out".to_string())
                }
            }
        })
    }
}

/// A write's outcome from its HTTP answer: 200 done; 409 a compare-and-set that did not
/// match; another 4xx, or a 503 that says nothing was proposed, refused; anything else,
/// or no answer, unknown.
fn classify_http(answer: &Answer) -> (Status, String) {
    match answer {
        Ok((200, _)) => (Status::Ok, String::new()),
        Ok((409, body)) => (Status::Fail, format!("409 {body}")),
        Ok((status, body)) if (400..500).contains(status) => {
            (Status::Refused, format!("{status} {body}"))
        }
        Ok((503, body)) if refused_for_certain(body) => (Status::Refused, format!("503 {body}")),
        Ok((status, body)) => (Status::Unknown, format!("{status} {body}")),
        // A connection refused never carried the request.
        Err(e) if never_sent(e) => (Status::NotSent, e.clone()),
        Err(e) => (Status::Unknown, e.clone()),
    }
}

/// Whether a 503 says the write was not applied: the README promises that only one
/// that says "outcome unknown" may have been (no leader reachable, a leader without a
/// quorum: refused before anything was proposed). The checker holds roster to it: a
/// write recorded as failed that was applied after all is a value nobody wrote.
fn refused_for_certain(message: &str) -> bool {
    // No leader: nothing was proposed. Not ready (a node starting, HTTP and gRPC) and a
    // gRPC connection the node does not know (it restarted): refused before anything.
    [
        "no raft leader is reachable",
        "server is starting",
        "Server is starting",
        "Connection is unregistered",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Whether a transport error means the request never left (the connection was refused:
/// the node is down). Anything else — a timeout, a reset — may come after it arrived.
fn never_sent(error: &str) -> bool {
    error.starts_with("not sent: ") || error.contains("Connection refused")
}

/// A write's outcome from a failed gRPC reply: a compare-and-set that did not match
/// failed; a bad request, or a refusal before anything was proposed, refused; other
/// unavailability (the outcome of a proposal lost in a failover) unknown.
fn classify_grpc(body: &Value, message: &str) -> Status {
    let code = body["errorCode"].as_u64().unwrap_or(0);
    if message.contains("Cas publish fail") {
        Status::Fail
    } else if (400..500).contains(&code) || refused_for_certain(message) {
        Status::Refused
    } else {
        Status::Unknown
    }
}
