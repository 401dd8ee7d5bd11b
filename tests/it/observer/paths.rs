//! The polled paths of one node: HTTP lists and picks, DNS A and SRV, a raw gRPC
//! `ServiceQueryRequest`; and the [`Probe`] that samples them and gathers every path's
//! history, pushed ones included.

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use roster_tests::{json, Node, Value};

use super::now_ms;
use super::service::{request, Spec};
use super::subscribers::{Console, Subscribers};
use super::views::{entry, list_view, History, Path, Seen, View};
use crate::grpc::{decode, payload, RawClient};

/// A node with its DNS port and SDK subscribers.
pub(super) struct Target<'a> {
    pub(super) node: &'a Node,
    pub(super) dns_port: u16,
    pub(super) subscribers: &'a Subscribers,
    pub(super) label: String,
}

/// The raw gRPC client (`grpc.rs`), set up on a bi-stream, that asks `ServiceQueryRequest`.
struct GrpcQuery {
    runtime: tokio::runtime::Runtime,
    client: RawClient,
}

impl GrpcQuery {
    fn connect(node: &Node) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = format!("127.0.0.1:{}", node.http_port + 1000);
        let setup = async {
            let mut c = RawClient::connect(&addr).await;
            c.open_stream().await;
            c.send(
                "ConnectionSetupRequest",
                json!({"clientVersion":"Roster-Observer:v1","tenant":"","labels":{"source":"sdk","module":"naming"},"abilityTable":{}}),
            )
            .await;
            c.expect("SetupAckRequest", Duration::from_secs(5)).await;
            c
        };
        let client = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(15), setup).await })
            .expect("a gRPC connection set up within 15 s");
        Self { runtime, client }
    }

    fn query(&mut self, spec: &Spec, token: &str) -> Result<View, String> {
        let body = json!({"headers":{},"namespace":spec.ns,"serviceName":spec.service,"groupName":"DEFAULT_GROUP",
                          "cluster":"","healthyOnly":false,"udpPort":0,"module":"naming"});
        let request = payload("ServiceQueryRequest", &body, Some(token));
        let client = &mut self.client;
        let reply = self
            .runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(3), client.try_unary(request)).await
            })
            .map_err(|_| "no answer in 3 s".to_string())?
            .map_err(|e| e.to_string())?;
        let (kind, body) = decode(&reply);
        if kind != "QueryServiceResponse" {
            return Err(format!("{kind}: {body}"));
        }
        Ok(list_view(&body["serviceInfo"]))
    }
}

static DNS_ID: AtomicU16 = AtomicU16::new(1);

/// One DNS query over UDP: the answers' data, or the reason there is none.
fn dns(
    port: u16,
    name: &str,
    rtype: hickory_resolver::proto::rr::RecordType,
) -> Result<Vec<hickory_resolver::proto::rr::RData>, String> {
    use hickory_resolver::proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
    use hickory_resolver::proto::rr::Name;
    let id = DNS_ID.fetch_add(1, Ordering::Relaxed);
    let mut query = Message::new(id, MessageType::Query, OpCode::Query);
    query.add_query(Query::query(
        Name::from_ascii(name).map_err(|e| e.to_string())?,
        rtype,
    ));
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    socket
        .send_to(
            &query.to_vec().map_err(|e| e.to_string())?,
            ("127.0.0.1", port),
        )
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 4096];
    // A late answer to an earlier query may come first; a few are skipped.
    for _ in 0..4 {
        let (n, _) = socket.recv_from(&mut buf).map_err(|e| e.to_string())?;
        let answer = Message::from_vec(&buf[..n]).map_err(|e| e.to_string())?;
        if answer.metadata.id != id {
            continue;
        }
        if answer.metadata.response_code != ResponseCode::NoError {
            return Err(format!("rcode {}", answer.metadata.response_code));
        }
        return Ok(answer.answers.iter().map(|r| r.data.clone()).collect());
    }
    Err("no answer with the query's id".into())
}

/// One node's view of one service, over every path.
pub(super) struct Probe<'a> {
    pub(super) target: &'a Target<'a>,
    pub(super) spec: &'a Spec,
    token: String,
    grpc: GrpcQuery,
    pub(super) console: Console,
    polled: BTreeMap<Path, History>,
}

impl<'a> Probe<'a> {
    pub(super) fn new(target: &'a Target<'a>, spec: &'a Spec) -> Self {
        Self {
            target,
            spec,
            token: target.node.token(),
            grpc: GrpcQuery::connect(target.node),
            console: Console::open(target.node, spec),
            polled: BTreeMap::new(),
        }
    }

    fn get(&self, path_and_query: &str) -> Result<(u16, Value), String> {
        let auth = format!("Bearer {}", self.token);
        let r = request(self.target.node, "GET", path_and_query, &auth)?;
        let body = serde_json::from_str(&r.body).unwrap_or(Value::String(r.body));
        Ok((r.status, body))
    }

    fn get_ok(&self, path_and_query: &str) -> Result<Value, String> {
        match self.get(path_and_query)? {
            (200, body) => Ok(body),
            (status, body) => Err(format!("{status} {body}")),
        }
    }

    fn read(&mut self, path: Path) -> Result<View, String> {
        let q = self.spec.query();
        let dns_name = format!(
            "{}.default_group.{}.roster.",
            self.spec.service, self.spec.ns
        );
        use hickory_resolver::proto::rr::{RData, RecordType};
        match path {
            Path::V1List => Ok(list_view(
                &self.get_ok(&format!("/nacos/v1/ns/instance/list?{q}"))?,
            )),
            Path::V1Healthy => Ok(list_view(
                &self.get_ok(&format!("/nacos/v1/ns/instance/list?{q}&healthyOnly=true"))?,
            )),
            Path::V2List => {
                let v = self.get_ok(&format!("/nacos/v2/ns/instance/list?{q}"))?;
                if v["code"] != 0 {
                    return Err(v.to_string());
                }
                Ok(list_view(&v["data"]))
            }
            Path::Instances => Ok(list_view(&self.get_ok(&format!("/api/v1/instances?{q}"))?)),
            Path::Pick => {
                // Round-robin over equal weights: as many picks as instances meet every
                // instance a healthy-only query returns.
                let mut view = View::new();
                for _ in 0..self.spec.addrs.len() {
                    match self.get(&format!("/api/v1/pick?{q}&strategy=round-robin"))? {
                        (200, h) => {
                            let addr = format!("{}:{}", h["ip"].as_str().unwrap_or("?"), h["port"]);
                            view.insert(entry(&addr, h["healthy"] == true));
                        }
                        (404, _) => break,
                        (status, body) => return Err(format!("pick {status} {body}")),
                    }
                }
                Ok(view)
            }
            Path::DnsA => Ok(dns(self.target.dns_port, &dns_name, RecordType::A)?
                .into_iter()
                .filter_map(|d| match d {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                })
                .collect()),
            Path::DnsSrv => Ok(dns(self.target.dns_port, &dns_name, RecordType::SRV)?
                .into_iter()
                .filter_map(|d| match d {
                    // The target is `<ip with dashes>.ip.roster.`.
                    RData::SRV(s) => {
                        let label = s.target.to_ascii();
                        let ip = label.split('.').next().unwrap_or("").replace('-', ".");
                        Some(format!("{ip}:{}", s.port))
                    }
                    _ => None,
                })
                .collect()),
            Path::GrpcQuery => {
                let token = self.token.clone();
                self.grpc.query(self.spec, &token)
            }
            Path::Py3Push | Path::NpmPush | Path::Console => unreachable!("not polled"),
        }
    }

    /// Polls every polled path once.
    pub(super) fn sample(&mut self) {
        for path in Path::ALL.into_iter().filter(|p| p.polled()) {
            let start = now_ms();
            let view = self
                .read(path)
                .unwrap_or_else(|e| View::from([format!("ERROR {e}")]));
            self.polled.entry(path).or_default().push(Seen {
                start,
                end: now_ms(),
                view,
            });
        }
    }

    pub(super) fn history(&self, path: Path) -> History {
        match path {
            Path::Py3Push | Path::NpmPush => self.target.subscribers.history(path, self.spec),
            Path::Console => self.console.history.lock().unwrap().clone(),
            _ => self.polled.get(&path).cloned().unwrap_or_default(),
        }
    }
}
