//! The v3 API: the view of naming clients (`/nacos/v3/admin/ns/client/...`), as Nacos 3
//! names them: a gRPC client by its connection id (`<ms>_<ip>_<port>`), an address
//! client by `ip:port#true` (its ephemeral instances, its v1 UDP subscriptions).
//! roster holds a gRPC client as the registry client `g:<node>:<connection id>` and an
//! address client as `ip:port` ([`Client`] translates); the registry lists the clients
//! whose instances this node holds (its own and Distro's copies of its peers'), the
//! gRPC face the connections of this node with their subscriptions. Persistent
//! instances (Nacos' `ip:port#false` clients) belong to no client in roster: they show
//! as publishers of their service only.

use std::collections::{BTreeSet, HashSet};

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::response::Response;
use serde_json::{json, Value};

use super::{answer_not_served, V3};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::nacos_v2_envelope::{failure, success};
use crate::faces::http::params::Params;
use crate::services::push::connections::ConnectionView;
use crate::state::AppState;
use roster_registry::client::is_connection;
use roster_registry::service::ServiceKey;
use roster_registry::validate::{check_ip, parse_port};

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::ClientsList => Handler::call(clients_list, req, state),
        V3::ClientDetail => Handler::call(client_detail, req, state),
        V3::ClientPublished => Handler::call(client_published, req, state),
        V3::ClientSubscribed => Handler::call(client_subscribed, req, state),
        V3::ServicePublishers => Handler::call(service_publishers, req, state),
        V3::ServiceSubscriberClients => Handler::call(service_subscribers, req, state),
        V3::ClientDistro => Handler::call(client_distro, req, state),
        _ => answer_not_served("not this area's"),
    }
}

/// `data` on success, the v3 failure otherwise.
fn answer(result: Result<Value, Error>) -> Response {
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// The suffix of an address client's id: its instances are ephemeral.
const EPHEMERAL: &str = "#true";

/// Nacos' id of the registry client `id`.
fn nacos_id(id: &str) -> String {
    if is_connection(id) {
        // `g:<node>:<connection id>`
        id.splitn(3, ':').nth(2).unwrap_or(id).to_string()
    } else {
        format!("{id}{EPHEMERAL}")
    }
}

/// A naming client this node knows, as Nacos 3 shows it (shared with roster's
/// `/api/v1/clients`).
#[derive(Debug)]
pub(crate) enum Client {
    /// A connection of this node.
    Here(ConnectionView),
    /// A connection of another node, whose instances this node holds a copy of: its
    /// registry id.
    Elsewhere(String),
    /// An address client: `ip:port`.
    Address(String),
}

impl Client {
    /// The client `id` names, if this node knows it.
    fn find(state: &AppState, id: &str) -> Option<Client> {
        if let Some(addr) = id.strip_suffix(EPHEMERAL) {
            let held = state.registry.clients().get(addr).is_some_and(held);
            return (held || UdpSubscriptions::of_node(state).of(addr).next().is_some())
                .then(|| Client::Address(addr.to_string()));
        }
        if let Some(conn) = state
            .grpc_connections
            .connections()
            .into_iter()
            .find(|c| c.id == id)
        {
            return Some(Client::Here(conn));
        }
        let clients = state.registry.clients();
        clients
            .ids()
            .into_iter()
            .find(|c| is_connection(c) && nacos_id(c) == id && clients.get(c).is_some_and(held))
            .map(|c| Client::Elsewhere(c.to_string()))
    }

    /// Every client this node knows, by Nacos id: its connections, the clients whose
    /// instances it holds, the addresses subscribed over UDP here.
    pub(crate) fn all(state: &AppState, udp: &UdpSubscriptions) -> Vec<Client> {
        let connections = state.grpc_connections.connections();
        let mine: HashSet<&str> = connections.iter().map(|c| c.client.as_str()).collect();
        let registry = state.registry.clients();
        let mut held: BTreeSet<String> = registry
            .ids()
            .into_iter()
            .filter(|id| !mine.contains(&**id) && registry.get(id).is_some_and(held))
            .map(|id| id.to_string())
            .collect();
        held.extend(udp.addresses().map(str::to_string));
        let others = held.into_iter().map(|id| match is_connection(&id) {
            true => Client::Elsewhere(id),
            false => Client::Address(id),
        });
        let mut all: Vec<Client> = connections
            .into_iter()
            .map(Client::Here)
            .chain(others)
            .collect();
        all.sort_by_key(Client::nacos_id);
        all
    }

    /// Its id, as Nacos names it.
    pub(crate) fn nacos_id(&self) -> String {
        match self {
            Client::Here(conn) => conn.id.clone(),
            Client::Elsewhere(id) | Client::Address(id) => nacos_id(id),
        }
    }

    /// The registry's id of it.
    fn registry_id(&self) -> &str {
        match self {
            Client::Here(conn) => &conn.client,
            Client::Elsewhere(id) | Client::Address(id) => id,
        }
    }
}

/// Whether a client record holds instances (an empty one is a deletion replicating).
fn held(record: roster_registry::client::ClientRecord) -> bool {
    !record.entries.is_empty()
}

/// `clientId`, which must name a client this node knows (404 otherwise, as Nacos).
fn client_param(state: &AppState, params: &Params) -> Result<Client, Error> {
    let id = params.required("clientId")?;
    Client::find(state, id).ok_or_else(|| Error::not_found(format!("clientId [ {id} ] not exist")))
}

/// `GET .../client/list`: the ids of the clients this node knows.
async fn clients_list(State(state): State<AppState>) -> Response {
    let udp = UdpSubscriptions::of_node(&state);
    let mut ids: Vec<String> = Client::all(&state, &udp)
        .iter()
        .map(Client::nacos_id)
        .collect();
    ids.dedup();
    success(json!(ids))
}

/// The connection id's parts: `<ms>_<ip>_<port>`.
fn connection_parts(id: &str) -> Option<(u64, &str, u16)> {
    let (ms, rest) = id.split_once('_')?;
    let (ip, port) = rest.rsplit_once('_')?;
    Some((ms.parse().ok()?, ip, port.parse().ok()?))
}

/// `GET .../client?clientId=`: Nacos' `ClientSummaryInfo`.
async fn client_detail(State(state): State<AppState>, params: Params) -> Response {
    answer(client_param(&state, &params).map(|client| summary(&state, &client)))
}

/// Nacos' `ClientSummaryInfo` of `client` (an address client: its type, not its
/// address, as Nacos).
pub(crate) fn summary(state: &AppState, client: &Client) -> Value {
    match client {
        Client::Here(conn) => json!({
            "clientId": conn.id,
            "ephemeral": true,
            "lastUpdatedTime": conn.last_active_ms,
            "clientType": "connection",
            "connectType": "GRPC",
            "appName": conn.app_name(),
            "version": conn.version,
            "clientIp": conn.ip(),
            "clientPort": conn.remote_port,
        }),
        Client::Elsewhere(id) => {
            let conn_id = nacos_id(id);
            let (_, ip, port) = connection_parts(&conn_id).unwrap_or((0, "", 0));
            let confirmed = state
                .registry
                .clients()
                .get(id)
                .map_or(0, |r| r.confirmed_ms);
            json!({
                "clientId": conn_id,
                "ephemeral": true,
                "lastUpdatedTime": confirmed,
                "clientType": "connection",
                "connectType": "GRPC",
                "clientIp": ip,
                "clientPort": port,
            })
        }
        Client::Address(addr) => {
            let record = state.registry.clients().get(addr);
            let last = state
                .registry
                .client_last_beat(addr)
                .max(record.map_or(0, |r| r.confirmed_ms));
            json!({
                "clientId": format!("{addr}{EPHEMERAL}"),
                "ephemeral": true,
                "lastUpdatedTime": last,
                "clientType": "ipPort",
            })
        }
    }
}

/// Nacos' `ClientServiceInfo` of service `key`, with `info` under `field`.
fn service_info(key: &ServiceKey, field: &str, info: Value) -> Value {
    json!({
        "namespaceId": key.namespace,
        "groupName": key.group,
        "serviceName": key.name,
        field: info,
    })
}

/// The instances `client` publishes: each one's service and its
/// `{ip, port, clusterName}`.
pub(crate) fn published(state: &AppState, client: &Client) -> Vec<(ServiceKey, Value)> {
    let share = state.registry.client_share(client.registry_id());
    share
        .map(|s| s.instances)
        .unwrap_or_default()
        .iter()
        .map(|(key, inst)| {
            let publisher = json!({
                "ip": inst.ip(),
                "port": inst.port,
                "clusterName": &*inst.cluster,
            });
            (ServiceKey::clone(key), publisher)
        })
        .collect()
}

/// `GET .../client/publish/list?clientId=`: the instances the client publishes, one
/// `ClientServiceInfo` each.
async fn client_published(State(state): State<AppState>, params: Params) -> Response {
    answer(client_param(&state, &params).map(|client| {
        let rows = published(&state, &client)
            .into_iter()
            .map(|(key, publisher)| service_info(&key, "publisherInfo", publisher))
            .collect();
        Value::Array(rows)
    }))
}

/// The v1 UDP subscriptions of this node: each subscribed service with its
/// subscriber's address and what it said of itself (`ClientSubscriberInfo`), read
/// once per request.
pub(crate) struct UdpSubscriptions(Vec<(String, ServiceKey, Value)>);

impl UdpSubscriptions {
    /// Every UDP subscription this node holds.
    pub(crate) fn of_node(state: &AppState) -> Self {
        let mut found = Vec::new();
        for ns in state.registry.namespaces() {
            for svc in ns.services.iter() {
                let key = ServiceKey::clone(&svc.key);
                for s in state.push.subscribers(&key) {
                    let info =
                        json!({ "appName": s.app, "agent": s.agent, "address": &s.addr_str });
                    found.push((s.addr_str, key.clone(), info));
                }
            }
        }
        UdpSubscriptions(found)
    }

    /// The subscriptions of address `addr`.
    fn of<'a>(&'a self, addr: &'a str) -> impl Iterator<Item = (&'a ServiceKey, &'a Value)> {
        self.0
            .iter()
            .filter(move |(a, _, _)| a == addr)
            .map(|(_, key, info)| (key, info))
    }

    /// The addresses subscribed.
    fn addresses(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(addr, _, _)| addr.as_str())
    }
}

/// The services `client` subscribes to, each with its `ClientSubscriberInfo` (a
/// connection of another node: none known here).
pub(crate) fn subscribed(client: &Client, udp: &UdpSubscriptions) -> Vec<(ServiceKey, Value)> {
    match client {
        Client::Here(conn) => conn
            .subscriptions
            .iter()
            .map(|(key, _)| (key.clone(), subscriber_info(conn)))
            .collect(),
        Client::Elsewhere(_) => Vec::new(),
        Client::Address(addr) => udp
            .of(addr)
            .map(|(key, info)| (key.clone(), info.clone()))
            .collect(),
    }
}

/// `GET .../client/subscribe/list?clientId=`: the services the client subscribes to.
async fn client_subscribed(State(state): State<AppState>, params: Params) -> Response {
    answer(client_param(&state, &params).map(|client| {
        let udp = UdpSubscriptions::of_node(&state);
        let rows = subscribed(&client, &udp)
            .into_iter()
            .map(|(key, info)| service_info(&key, "subscriberInfo", info))
            .collect();
        Value::Array(rows)
    }))
}

/// A connection as a subscriber: Nacos' `ClientSubscriberInfo`.
fn subscriber_info(conn: &ConnectionView) -> Value {
    json!({
        "clientId": conn.id,
        "appName": conn.app_name(),
        "agent": conn.version,
        "address": format!("{}:{}", conn.ip(), conn.remote_port),
    })
}

/// The service (`namespaceId`, `groupName`, `serviceName`) and the optional `ip` and
/// `port` filters of the service's client lists.
fn service_filter(params: &Params) -> Result<(ServiceKey, Option<&str>, Option<u16>), Error> {
    let key = params.service_key()?;
    let ip = params.optional("ip");
    // The maintainer client sends `port=null` when it filters by no port.
    let port = params
        .optional("port")
        .filter(|p| *p != "null")
        .map(|p| parse_port("port", p))
        .transpose()?;
    Ok((key, ip, port))
}

/// `GET .../client/service/publisher/list`: the clients publishing instances of a
/// service (`ip`, `port`: only those at that address).
async fn service_publishers(State(state): State<AppState>, params: Params) -> Response {
    answer(service_filter(&params).map(|(key, ip, port)| {
        let Some(svc) = state.registry.service_by_key(&key) else {
            return json!([]);
        };
        let view = svc.view();
        let rows: Vec<Value> = view
            .instances
            .values()
            .filter(|i| ip.is_none_or(|ip| i.ip() == ip) && port.is_none_or(|p| i.port == p))
            .map(|i| {
                let client = match i.client() {
                    Some(client) => nacos_id(client),
                    None => format!("{}#{}", i.addr(), i.ephemeral),
                };
                json!({
                    "clientId": client,
                    "ip": i.ip(),
                    "port": i.port,
                    "clusterName": &*i.cluster,
                })
            })
            .collect();
        Value::Array(rows)
    }))
}

/// `GET .../client/service/subscriber/list`: the clients subscribing to a service on
/// this node, gRPC and UDP alike (`ip`, `port`: only those at that address).
async fn service_subscribers(State(state): State<AppState>, params: Params) -> Response {
    answer(service_filter(&params).map(|(key, ip, port)| {
        let wanted = |i: &str, p: u16| ip.is_none_or(|ip| i == ip) && port.is_none_or(|w| p == w);
        let grpc = state
            .grpc_connections
            .connections()
            .into_iter()
            .filter(|c| c.subscriptions.iter().any(|(k, _)| *k == key))
            .filter(|c| wanted(c.ip(), c.remote_port))
            .map(|c| subscriber_info(&c));
        let udp = state
            .push
            .subscribers(&key)
            .into_iter()
            .filter(|s| wanted(&s.ip, s.port))
            .map(|s| {
                json!({
                    "clientId": format!("{}{EPHEMERAL}", s.addr_str),
                    "appName": s.app,
                    "agent": s.agent,
                    "address": s.addr_str,
                })
            });
        Value::Array(grpc.chain(udp).collect())
    }))
}

/// `GET .../client/distro?ip=&port=`: `{responsibleServer}`, the HTTP address of the
/// member that owns the address client `ip:port` (takes its beats, judges its expiry).
async fn client_distro(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let ip = params.required("ip")?;
        check_ip("ip", ip)?;
        let port = params.port("port")?;
        let owner = state.distro.owner_of(&format!("{ip}:{port}"));
        let view = state.cluster_view();
        let member = view.members.iter().find(|m| m.id == owner);
        let address = member.map(|m| m.http.clone().unwrap_or_else(|| m.peer.clone()));
        Ok(json!({ "responsibleServer": address }))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nacos_names_a_connection_by_its_id_and_an_address_client_with_its_kind() {
        assert_eq!(
            nacos_id("g:3:1700000000000_10.0.0.1_5000"),
            "1700000000000_10.0.0.1_5000"
        );
        assert_eq!(nacos_id("10.0.0.1:8080"), "10.0.0.1:8080#true");
        // A host named `g` is an address, not a connection.
        assert_eq!(nacos_id("g:8080"), "g:8080#true");
    }

    #[test]
    fn a_connection_id_holds_its_time_address_and_port() {
        assert_eq!(
            connection_parts("1700000000000_10.0.0.1_5000"),
            Some((1_700_000_000_000, "10.0.0.1", 5000))
        );
        assert_eq!(connection_parts("1_::1_5000"), Some((1, "::1", 5000)));
        assert_eq!(connection_parts("10.0.0.1:8080"), None);
    }

    #[test]
    fn the_client_filter_needs_a_service_and_a_valid_port() {
        let of = |q: &str| Params::parse(Some(q), None).unwrap();
        let e = service_filter(&of("groupName=G")).unwrap_err();
        assert!(e.message.contains("serviceName"), "{}", e.message);
        let e = service_filter(&of("serviceName=s&port=x")).unwrap_err();
        assert!(e.message.contains("port"), "{}", e.message);
        let params = of("serviceName=s&ip=10.0.0.1&port=80");
        let (key, ip, port) = service_filter(&params).unwrap();
        assert_eq!((&*key.name, &*key.group), ("s", "DEFAULT_GROUP"));
        assert_eq!((ip, port), (Some("10.0.0.1"), Some(80)));
        let params = of("serviceName=s&port=null");
        assert_eq!(service_filter(&params).unwrap().2, None);
    }
}
