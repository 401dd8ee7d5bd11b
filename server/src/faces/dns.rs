//! The DNS interface (`--dns`): healthy, enabled instances as A/AAAA and SRV records, and
//! a service's gRPC service config as TXT, so clients that only know DNS — gRPC's
//! built-in `dns:` resolver among them — discover services unchanged.
//!
//! Names, under `--dns-domain` (default `roster.`):
//! - `<service>.<group>.<namespace>.roster.`, `<service>.<group>.roster.` (namespace
//!   `public`), `<service>.roster.` (`DEFAULT_GROUP` in `public`); matched without regard
//!   to case, the most specific reading first;
//! - `_grpc_config.<service name>` → TXT `grpc_config=<service metadata "grpc_config">`;
//! - `<ip>.ip.roster.` → the address itself (`10-0-0-7`, or eight dashed hex groups for
//!   IPv6): the targets of SRV records.
//!
//! Unknown names under the domain are NXDOMAIN; names outside it are REFUSED: this is not
//! an open resolver. Every query is REFUSED while the node is not ready — still starting
//! (nothing replayed yet) or removed from the cluster (its data only grows staler) — as its
//! HTTP and gRPC ports refuse clients then: a resolver asks another server.
//!
//! DNS carries no identity, so it cannot ask for permissions: it answers only for the
//! namespaces `--dns-namespaces` names (default `public`; `*` for all). A name in any
//! other namespace is NXDOMAIN, as if it did not exist.
//!
//! Over TCP, at most [`TCP_MAX_CONNECTIONS`] connections are open at once (a new one
//! beyond is closed at once, by a [`Gate`] as on the HTTP and gRPC ports), accepts
//! wait out descriptor exhaustion ([`accept`]), and a connection is closed once a
//! query, or the writing of an answer, has taken [`TCP_IDLE_TIMEOUT`]: a client that
//! connects and falls silent, or sends half a query, holds a descriptor that long at
//! most.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::services::cluster::readiness::Readiness;
use crate::services::net::{accept, Gate};
use crate::services::workers::Workers;
use roster_registry::instance::Instance;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::select::{select, Query};
use roster_registry::service::ServiceKey;
use roster_registry::Registry;

/// The service metadata key whose value is published as `grpc_config=<value>`.
pub const GRPC_CONFIG_KEY: &str = "grpc_config";
/// The default group, implied by two- and one-label names.
const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// Largest UDP answer without EDNS.
const PLAIN_UDP_LIMIT: usize = 512;
/// Largest UDP answer we send even when a client offers more (avoids fragmentation).
const EDNS_UDP_LIMIT: u16 = 1232;
/// Most DNS-over-TCP connections open at once (BIND's `tcp-clients` default is 150).
/// TCP carries only the few answers too large for UDP, and each connection holds a
/// descriptor: well under the 256 of a small `ulimit -n`, the other listeners keep theirs.
pub const TCP_MAX_CONNECTIONS: usize = 150;
/// How long a DNS-over-TCP connection may take over a query (from connecting, or from its
/// last answer) and over writing an answer before it is closed: Knot's default TCP idle
/// timeout; RFC 7766 (6.2.3) has servers close idle connections after a few seconds.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the DNS server answers for.
#[derive(Clone, Debug)]
pub struct DnsConfig {
    /// The zone, lower case, fully qualified (`roster.`).
    pub domain: Name,
    /// TTL of every answer, seconds.
    pub ttl: u32,
    /// The namespaces answered for; `None`: all of them.
    pub namespaces: Option<Vec<String>>,
}

impl DnsConfig {
    /// A config for `domain` (with or without the trailing dot), answering for the
    /// public namespace.
    pub fn new(domain: &str, ttl: u32) -> Result<Self, String> {
        let fqdn = if domain.ends_with('.') {
            domain.to_string()
        } else {
            format!("{domain}.")
        };
        let domain = Name::from_ascii(&fqdn)
            .map_err(|e| format!("--dns-domain {domain}: {e}"))?
            .to_lowercase();
        Ok(Self {
            domain,
            ttl,
            namespaces: Some(vec![PUBLIC_NAMESPACE.to_string()]),
        })
    }

    /// This config answering for the namespaces `ids` (`--dns-namespaces`; `*` for
    /// all). Each must be a valid namespace id; none at all is refused.
    pub fn with_namespaces(mut self, ids: &[String]) -> Result<Self, String> {
        let ids: Vec<&str> = ids
            .iter()
            .map(|i| i.trim())
            .filter(|i| !i.is_empty())
            .collect();
        if ids.is_empty() {
            return Err("--dns-namespaces: name at least one namespace (or *)".into());
        }
        if ids.contains(&"*") {
            self.namespaces = None;
            return Ok(self);
        }
        for id in &ids {
            roster_registry::validate::check_namespace_id("--dns-namespaces", id)
                .map_err(|e| e.to_string())?;
        }
        self.namespaces = Some(ids.into_iter().map(str::to_string).collect());
        Ok(self)
    }

    /// Whether names in `namespace` are answered.
    fn serves(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id.eq_ignore_ascii_case(namespace)))
    }
}

/// What a name means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A service's instances.
    Service(ServiceKey),
    /// A service's gRPC config.
    GrpcConfig(ServiceKey),
    /// An SRV target: an address.
    Address(IpAddr),
}

/// The label form of an address, for SRV targets.
pub fn address_label(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.octets().map(|o| o.to_string()).join("-"),
        IpAddr::V6(v6) => v6.segments().map(|s| format!("{s:x}")).join("-"),
    }
}

fn parse_address_label(label: &str) -> Option<IpAddr> {
    let parts: Vec<&str> = label.split('-').collect();
    match parts.len() {
        4 => {
            let octets: Vec<u8> = parts
                .iter()
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            Some(IpAddr::V4(Ipv4Addr::new(
                octets[0], octets[1], octets[2], octets[3],
            )))
        }
        8 => {
            let segs: Vec<u16> = parts
                .iter()
                .map(|p| u16::from_str_radix(p, 16).ok())
                .collect::<Option<_>>()?;
            Some(IpAddr::V6(Ipv6Addr::new(
                segs[0], segs[1], segs[2], segs[3], segs[4], segs[5], segs[6], segs[7],
            )))
        }
        _ => None,
    }
}

/// Finds the service a name's labels (left of the domain) mean, case-insensitively, the
/// most specific reading first, in the namespaces `config` serves. `None`: no such
/// service.
fn find_service(registry: &Registry, config: &DnsConfig, labels: &[String]) -> Option<ServiceKey> {
    let n = labels.len();
    let mut readings: Vec<(String, String, String)> = Vec::new();
    if n >= 3 {
        readings.push((
            labels[..n - 2].join("."),
            labels[n - 2].clone(),
            labels[n - 1].clone(),
        ));
    }
    if n >= 2 {
        readings.push((
            labels[..n - 1].join("."),
            labels[n - 1].clone(),
            PUBLIC_NAMESPACE.into(),
        ));
    }
    if n >= 1 {
        readings.push((
            labels.join("."),
            DEFAULT_GROUP.into(),
            PUBLIC_NAMESPACE.into(),
        ));
    }
    let namespaces = registry.namespaces();
    for (service, group, ns) in readings {
        if !config.serves(&ns) {
            continue;
        }
        let Some(ns) = namespaces.iter().find(|n| n.id.eq_ignore_ascii_case(&ns)) else {
            continue;
        };
        let found = ns.services.iter().find_map(|s| {
            let k = &s.key;
            (k.group.eq_ignore_ascii_case(&group) && k.name.eq_ignore_ascii_case(&service))
                .then(|| ServiceKey::clone(k))
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// What `name` means: `Err(REFUSED)` outside the domain, `Ok(None)` for an unknown name.
pub fn resolve(
    registry: &Registry,
    config: &DnsConfig,
    name: &Name,
) -> Result<Option<Target>, ResponseCode> {
    let name = name.to_lowercase();
    if !config.domain.zone_of(&name) {
        return Err(ResponseCode::Refused);
    }
    let keep = name.num_labels().saturating_sub(config.domain.num_labels()) as usize;
    let labels: Vec<String> = name
        .iter()
        .take(keep)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    if labels.len() == 2 && labels[1] == "ip" {
        return Ok(parse_address_label(&labels[0]).map(Target::Address));
    }
    if labels.first().is_some_and(|l| l == "_grpc_config") {
        return Ok(find_service(registry, config, &labels[1..]).map(Target::GrpcConfig));
    }
    if labels.is_empty() {
        return Ok(None);
    }
    Ok(find_service(registry, config, &labels).map(Target::Service))
}

/// Healthy, enabled instances of `key` (the service's stored selector applies; the
/// protection threshold does not: DNS only ever names healthy instances).
fn healthy_instances(registry: &Registry, key: &ServiceKey) -> Vec<Arc<Instance>> {
    let Some(svc) = registry.service_by_key(key) else {
        return Vec::new();
    };
    let view = svc.view();
    let selection = select(
        &view,
        &Query {
            healthy_only: true,
            ..Default::default()
        },
    );
    selection.hosts.into_iter().filter(|i| i.healthy).collect()
}

fn address_record(name: &Name, ip: IpAddr, ttl: u32) -> Record {
    match ip {
        IpAddr::V4(v4) => Record::from_rdata(name.clone(), ttl, RData::A(A(v4))),
        IpAddr::V6(v6) => Record::from_rdata(name.clone(), ttl, RData::AAAA(AAAA(v6))),
    }
}

fn soa(config: &DnsConfig) -> Record {
    let ns = Name::from_ascii("ns")
        .expect("valid")
        .append_domain(&config.domain)
        .expect("fits");
    let hostmaster = Name::from_ascii("hostmaster")
        .expect("valid")
        .append_domain(&config.domain)
        .expect("fits");
    let ttl = config.ttl as i32;
    Record::from_rdata(
        config.domain.clone(),
        config.ttl,
        RData::SOA(SOA::new(
            ns,
            hostmaster,
            1,
            ttl.max(60),
            ttl.max(60),
            86_400,
            config.ttl,
        )),
    )
}

/// Splits a TXT value into strings of at most 255 bytes (gRPC joins them again).
fn txt_chunks(value: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for c in value.chars() {
        if current.len() + c.len_utf8() > 255 {
            chunks.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    chunks.push(current);
    chunks
}

/// A response to `request` with nothing in it yet: its id, opcode, question and EDNS.
fn reply_to(request: &Message) -> Message {
    let mut response = Message::new(
        request.metadata.id,
        MessageType::Response,
        request.metadata.op_code,
    );
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.add_queries(request.queries.iter().cloned());
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_UDP_LIMIT);
        response.set_edns(edns);
    }
    response
}

/// Answers one query message on a node in state `ready`: REFUSED unless it is ready.
fn answer_when_ready(
    ready: &Readiness,
    registry: &Registry,
    config: &DnsConfig,
    request: &Message,
) -> Message {
    if ready.is_ready() {
        return answer(registry, config, request);
    }
    let mut response = reply_to(request);
    response.metadata.response_code = ResponseCode::Refused;
    response
}

/// Answers one query message.
pub fn answer(registry: &Registry, config: &DnsConfig, request: &Message) -> Message {
    let mut response = reply_to(request);
    let (Some(query), OpCode::Query, 1) = (
        request.queries.first(),
        request.metadata.op_code,
        request.queries.len(),
    ) else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    let ttl = config.ttl;
    let name = query.name.clone();
    let qtype = query.query_type;
    let target = match resolve(registry, config, &name) {
        Err(code) => {
            response.metadata.response_code = code;
            return response;
        }
        Ok(None) => {
            response.metadata.authoritative = true;
            response.metadata.response_code = ResponseCode::NXDomain;
            response.add_authority(soa(config));
            return response;
        }
        Ok(Some(t)) => t,
    };
    response.metadata.authoritative = true;
    match target {
        Target::Address(ip) => {
            if matches!(
                (qtype, ip),
                (RecordType::A, IpAddr::V4(_))
                    | (RecordType::AAAA, IpAddr::V6(_))
                    | (RecordType::ANY, _)
            ) {
                response.add_answer(address_record(&name, ip, ttl));
            }
        }
        Target::GrpcConfig(key) => {
            if matches!(qtype, RecordType::TXT | RecordType::ANY) {
                add_grpc_config(registry, &key, &name, ttl, &mut response);
            }
        }
        Target::Service(key) => {
            let hosts = healthy_instances(registry, &key);
            let ips = || {
                let mut ips: Vec<IpAddr> =
                    hosts.iter().filter_map(|h| h.ip().parse().ok()).collect();
                ips.sort();
                ips.dedup();
                ips
            };
            match qtype {
                RecordType::A | RecordType::AAAA => {
                    for ip in ips()
                        .into_iter()
                        .filter(|ip| ip.is_ipv4() == (qtype == RecordType::A))
                    {
                        response.add_answer(address_record(&name, ip, ttl));
                    }
                }
                RecordType::SRV => {
                    for h in &hosts {
                        // Weight 1.0 is 100; SRV weights are 0..=65535.
                        let weight = (h.weight * 100.0).round().clamp(0.0, 65_535.0) as u16;
                        let (target, glue) = match h.ip().parse::<IpAddr>() {
                            Ok(ip) => {
                                let label = format!("{}.ip", address_label(&ip));
                                let target = Name::from_ascii(&label)
                                    .and_then(|n| n.append_domain(&config.domain))
                                    .expect("address labels are valid names");
                                (target.clone(), Some(address_record(&target, ip, ttl)))
                            }
                            // An instance registered by host name: the name is the target.
                            Err(_) => match Name::from_ascii(format!("{}.", h.ip())) {
                                Ok(n) => (n, None),
                                Err(_) => continue,
                            },
                        };
                        response.add_answer(Record::from_rdata(
                            name.clone(),
                            ttl,
                            RData::SRV(SRV::new(10, weight, h.port, target)),
                        ));
                        if let Some(glue) = glue {
                            response.add_additional(glue);
                        }
                    }
                }
                RecordType::TXT => add_grpc_config(registry, &key, &name, ttl, &mut response),
                _ => {}
            }
        }
    }
    if response.answers.is_empty() {
        response.add_authority(soa(config));
    }
    response
}

fn add_grpc_config(
    registry: &Registry,
    key: &ServiceKey,
    name: &Name,
    ttl: u32,
    response: &mut Message,
) {
    let config = registry.service_by_key(key).and_then(|s| {
        s.view()
            .settings
            .as_ref()
            .and_then(|st| st.metadata.get(GRPC_CONFIG_KEY).cloned())
    });
    if let Some(config) = config {
        let value = format!("grpc_config={config}");
        response.add_answer(Record::from_rdata(
            name.clone(),
            ttl,
            RData::TXT(TXT::new(txt_chunks(&value))),
        ));
    }
}

/// Encodes `response` for UDP: truncated (TC set, answers dropped) when larger than
/// the client can take.
fn udp_bytes(request: &Message, response: &Message) -> Option<Vec<u8>> {
    let limit = match &request.edns {
        Some(e) => usize::from(e.max_payload().clamp(512, EDNS_UDP_LIMIT)),
        None => PLAIN_UDP_LIMIT,
    };
    let bytes = response.to_vec().ok()?;
    if bytes.len() <= limit {
        return Some(bytes);
    }
    response.truncate().to_vec().ok()
}

/// Starts DNS among `workers`: over `udp` and `tcp`, answering from `registry` once
/// `ready`.
pub fn spawn_workers(
    (udp, tcp): (UdpSocket, TcpListener),
    registry: &Registry,
    config: DnsConfig,
    ready: &Readiness,
    workers: &mut Workers,
) {
    if let Ok(addr) = udp.local_addr() {
        tracing::info!(%addr, domain = %config.domain, "serving DNS");
    }
    workers.spawn(serve_udp(
        udp,
        registry.clone(),
        config.clone(),
        ready.clone(),
        workers.stopping(),
    ));
    workers.spawn(serve_tcp(
        tcp,
        registry.clone(),
        config,
        ready.clone(),
        workers.stopping(),
    ));
}

/// Serves DNS over UDP until `stopping`, refusing queries while `ready` is not.
pub async fn serve_udp(
    socket: UdpSocket,
    registry: Registry,
    config: DnsConfig,
    ready: Readiness,
    mut stopping: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 4096];
    loop {
        let (len, from): (usize, SocketAddr) = tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "dns receive failed");
                    continue;
                }
            },
            _ = stopping.changed() => return,
        };
        let Ok(request) = Message::from_vec(&buf[..len]) else {
            continue;
        };
        let response = answer_when_ready(&ready, &registry, &config, &request);
        if let Some(bytes) = udp_bytes(&request, &response) {
            let _ = socket.send_to(&bytes, from).await;
        }
    }
}

/// Serves DNS over TCP (for truncated answers) until `stopping`: at most
/// [`TCP_MAX_CONNECTIONS`] at once, each closed after [`TCP_IDLE_TIMEOUT`] without a
/// query, or at `stopping`; queries are refused while `ready` is not.
pub async fn serve_tcp(
    listener: TcpListener,
    registry: Registry,
    config: DnsConfig,
    ready: Readiness,
    mut stopping: watch::Receiver<bool>,
) {
    let gate = Gate::new("dns", TCP_MAX_CONNECTIONS, None);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = accept(&listener, "dns") => accepted,
            _ = stopping.changed() => return,
        };
        // Over the cap, the stream is dropped here: closed at once.
        let Some(permit) = gate.admit(remote.ip()) else {
            continue;
        };
        let (registry, config, ready) = (registry.clone(), config.clone(), ready.clone());
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let _permit = permit;
            tokio::select! {
                () = serve_tcp_connection(stream, &ready, &registry, &config) => {}
                _ = stopping.wait_for(|s| *s) => {}
            }
        });
    }
}

/// Answers the queries on one TCP connection, one after another, each length-prefixed,
/// until the client closes, sends something that is not a query, or takes longer than
/// [`TCP_IDLE_TIMEOUT`] over sending a query or over taking in its answer.
async fn serve_tcp_connection(
    mut stream: TcpStream,
    ready: &Readiness,
    registry: &Registry,
    config: &DnsConfig,
) {
    loop {
        let Ok(Some(request)) = timeout(TCP_IDLE_TIMEOUT, read_tcp_query(&mut stream)).await else {
            return;
        };
        let Ok(bytes) = answer_when_ready(ready, registry, config, &request).to_vec() else {
            return;
        };
        let Ok(len) = u16::try_from(bytes.len()) else {
            return;
        };
        // Prefix and answer in one write: two would wait on the client's delayed ACK.
        let mut framed = Vec::with_capacity(2 + bytes.len());
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&bytes);
        if !matches!(
            timeout(TCP_IDLE_TIMEOUT, stream.write_all(&framed)).await,
            Ok(Ok(()))
        ) {
            return;
        }
    }
}

/// The next length-prefixed query on `stream`; `None` once the client closes or sends
/// something that is not a DNS message.
async fn read_tcp_query(stream: &mut TcpStream) -> Option<Message> {
    let len = stream.read_u16().await.ok()?;
    let mut buf = vec![0u8; usize::from(len)];
    stream.read_exact(&mut buf).await.ok()?;
    Message::from_vec(&buf).ok()
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::Query as DnsQuery;

    use super::*;
    use roster_registry::service::ServiceSettings;
    use roster_registry::Registration;

    fn registry() -> Registry {
        let r = Registry::new();
        let reg = |ip: &str, port: u16, weight: f64| Registration {
            ip: ip.into(),
            port,
            cluster: "DEFAULT".into(),
            weight,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Default::default(),
            instance_id: None,
            client: None,
            owner: None,
        };
        let orders = ServiceKey::new("public", "DEFAULT_GROUP", "Orders");
        r.register(&orders, &reg("10.0.0.1", 8080, 1.0), 0).unwrap();
        r.register(&orders, &reg("10.0.0.2", 8081, 2.5), 0).unwrap();
        r.register(&orders, &reg("2001:db8::1", 8082, 1.0), 0)
            .unwrap();
        let mut settings = ServiceSettings::default();
        settings.metadata.insert(
            GRPC_CONFIG_KEY.into(),
            r#"[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]"#.into(),
        );
        r.create_service(&orders, &settings, 0).unwrap();
        let pay = ServiceKey::new("dev", "shop", "pay");
        r.register(&pay, &reg("10.1.0.1", 9000, 1.0), 0).unwrap();
        r
    }

    /// Answers for every namespace, as the tests below expect.
    fn ask(r: &Registry, name: &str, qtype: RecordType) -> Message {
        let all = DnsConfig::new("roster", 5)
            .unwrap()
            .with_namespaces(&["*".to_string()])
            .unwrap();
        ask_with(r, &all, name, qtype)
    }

    fn ask_with(r: &Registry, config: &DnsConfig, name: &str, qtype: RecordType) -> Message {
        let mut m = Message::new(7, MessageType::Query, OpCode::Query);
        m.add_query(DnsQuery::query(Name::from_ascii(name).unwrap(), qtype));
        answer(r, config, &m)
    }

    #[test]
    fn only_the_configured_namespaces_are_answered() {
        let r = registry();
        let code = |config: &DnsConfig, name: &str| {
            let m = ask_with(&r, config, name, RecordType::A);
            (m.metadata.response_code, m.answers.len())
        };
        // The default: public only.
        let public = DnsConfig::new("roster", 5).unwrap();
        assert_eq!(code(&public, "orders.roster."), (ResponseCode::NoError, 2));
        assert_eq!(
            code(&public, "pay.shop.dev.roster."),
            (ResponseCode::NXDomain, 0)
        );
        assert_eq!(
            code(&public, "_grpc_config.pay.shop.dev.roster."),
            (ResponseCode::NXDomain, 0)
        );
        let dev = |ids: &[&str]| {
            let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
            DnsConfig::new("roster", 5).unwrap().with_namespaces(&ids)
        };
        let only_dev = dev(&["DEV"]).unwrap();
        assert_eq!(
            code(&only_dev, "pay.shop.dev.roster."),
            (ResponseCode::NoError, 1)
        );
        assert_eq!(
            code(&only_dev, "orders.roster."),
            (ResponseCode::NXDomain, 0)
        );
        let both = dev(&["public", " dev "]).unwrap();
        assert_eq!(code(&both, "orders.roster.").1, 2);
        assert_eq!(code(&both, "pay.shop.dev.roster.").1, 1);
        assert!(dev(&[]).is_err());
        assert!(dev(&["", " "]).is_err());
        assert!(dev(&["bad id!"]).is_err());
    }

    #[test]
    fn names_resolve_to_services_case_insensitively() {
        let r = registry();
        let m = ask(&r, "orders.roster.", RecordType::A);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.answers.len(), 2);
        assert!(m.metadata.authoritative);
        assert_eq!(
            ask(&r, "ORDERS.default_group.roster.", RecordType::A)
                .answers
                .len(),
            2
        );
        assert_eq!(
            ask(&r, "orders.DEFAULT_GROUP.public.roster.", RecordType::AAAA)
                .answers
                .len(),
            1
        );
        assert_eq!(
            ask(&r, "pay.shop.dev.roster.", RecordType::A).answers.len(),
            1
        );
        assert_eq!(
            ask(&r, "pay.roster.", RecordType::A).metadata.response_code,
            ResponseCode::NXDomain
        );
        assert_eq!(
            ask(&r, "nope.roster.", RecordType::A)
                .metadata
                .response_code,
            ResponseCode::NXDomain
        );
        assert_eq!(
            ask(&r, "example.com.", RecordType::A)
                .metadata
                .response_code,
            ResponseCode::Refused
        );
    }

    #[test]
    fn srv_records_carry_weights_and_resolvable_targets() {
        let r = registry();
        let m = ask(&r, "orders.roster.", RecordType::SRV);
        assert_eq!(m.answers.len(), 3);
        let srvs: Vec<(u16, u16, String)> = m
            .answers
            .iter()
            .filter_map(|rec| match &rec.data {
                RData::SRV(s) => Some((s.port, s.weight, s.target.to_string())),
                _ => None,
            })
            .collect();
        assert!(
            srvs.contains(&(8081, 250, "10-0-0-2.ip.roster.".into())),
            "{srvs:?}"
        );
        assert_eq!(m.additionals.len(), 3, "glue for every target");
        let a = ask(&r, "10-0-0-2.ip.roster.", RecordType::A);
        assert!(matches!(&a.answers[0].data, RData::A(A(ip)) if *ip == Ipv4Addr::new(10, 0, 0, 2)));
        let v6 = ask(&r, "2001-db8-0-0-0-0-0-1.ip.roster.", RecordType::AAAA);
        assert_eq!(v6.answers.len(), 1);
        assert_eq!(
            ask(&r, "300-1-1-1.ip.roster.", RecordType::A)
                .metadata
                .response_code,
            ResponseCode::NXDomain
        );
    }

    #[test]
    fn grpc_config_as_txt() {
        let r = registry();
        for name in ["_grpc_config.orders.roster.", "orders.roster."] {
            let m = ask(&r, name, RecordType::TXT);
            let RData::TXT(txt) = &m.answers[0].data else {
                panic!("{m:?}")
            };
            let joined: String = txt
                .txt_data
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect();
            assert!(
                joined.starts_with("grpc_config=[{\"serviceConfig\""),
                "{joined}"
            );
        }
        assert!(
            ask(&r, "_grpc_config.pay.shop.dev.roster.", RecordType::TXT)
                .answers
                .is_empty()
        );
        assert_eq!(
            txt_chunks(&"x".repeat(600))
                .iter()
                .map(String::len)
                .collect::<Vec<_>>(),
            [255, 255, 90]
        );
    }

    #[test]
    fn unhealthy_and_disabled_instances_are_left_out() {
        let r = registry();
        let orders = ServiceKey::new("public", "DEFAULT_GROUP", "Orders");
        r.set_health(&orders, "10.0.0.1", 8080, true, false, 1);
        assert_eq!(ask(&r, "orders.roster.", RecordType::A).answers.len(), 1);
        let patch = roster_registry::InstancePatch {
            enabled: Some(false),
            ..Default::default()
        };
        r.update_instance(&orders, "10.0.0.2", 8081, true, &patch, 1)
            .unwrap();
        let m = ask(&r, "orders.roster.", RecordType::A);
        assert!(m.answers.is_empty());
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NoError,
            "a known name without healthy instances is NODATA"
        );
        assert_eq!(m.authorities.len(), 1, "with the SOA for negative caching");
    }

    #[test]
    fn queries_are_refused_until_ready_and_once_removed() {
        let r = registry();
        let config = DnsConfig::new("roster", 5).unwrap();
        let mut query = Message::new(7, MessageType::Query, OpCode::Query);
        query.add_query(DnsQuery::query(
            Name::from_ascii("orders.roster.").unwrap(),
            RecordType::A,
        ));
        let ask = |ready: &Readiness| {
            let m = answer_when_ready(ready, &r, &config, &query);
            (m.metadata.id, m.metadata.response_code, m.answers.len())
        };
        let ready = Readiness::default();
        assert_eq!(ask(&ready), (7, ResponseCode::Refused, 0), "starting");
        ready.set();
        assert_eq!(ask(&ready), (7, ResponseCode::NoError, 2), "ready");
        ready.set_removed();
        assert_eq!(ask(&ready), (7, ResponseCode::Refused, 0), "removed");
    }
}
