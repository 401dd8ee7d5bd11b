//! `GET /api/v1/clients` (admins): the naming clients of the node asked, each with
//! what it publishes and subscribes to, in one answer — the console's Clients page.
//! The clients are those of Nacos 3's view (`v3::clients`, whose builders this
//! shares): this node's gRPC connections, the copies of other nodes' connections whose
//! instances it holds, and the address clients (v1 beats, v1 UDP subscriptions).

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::guard::Caller;
use super::nacos::json_of;
use super::params::Params;
use super::v3::clients::{published, subscribed, summary, Client, UdpSubscriptions};
use crate::error::Error;
use crate::state::AppState;

/// `GET /api/v1/clients[?ip=PREFIX][&app=PART]`: `{"node": id, "clients": [...]}`, each
/// client Nacos' `ClientSummaryInfo` with its address, `here` (a connection of this
/// node, or an address client this node is responsible for), `published` and
/// `subscribed`. `ip` keeps the clients whose address starts with it, `app` those
/// whose application name contains it (any case).
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let ip = params.optional("ip").filter(|s| !s.is_empty());
    let app = params
        .optional("app")
        .filter(|s| !s.is_empty())
        .map(str::to_lowercase);
    let me = state.members.me().node_id;
    let udp = UdpSubscriptions::of_node(&state);
    let clients: Vec<Value> = Client::all(&state, &udp)
        .iter()
        .map(|client| {
            let mut row = match summary(&state, client) {
                Value::Object(fields) => fields,
                _ => Map::new(),
            };
            let subscriptions = subscribed(client, &udp);
            let here = match client {
                Client::Here(_) => true,
                Client::Elsewhere(_) => false,
                Client::Address(addr) => {
                    // Nacos names neither the address nor the application of an
                    // address client: its id and its UDP subscriptions do.
                    let (ip, port) = split_address(addr);
                    row.insert("clientIp".into(), json!(ip));
                    row.insert("clientPort".into(), json!(port));
                    if let Some((_, said)) = subscriptions.first() {
                        row.insert("appName".into(), said["appName"].clone());
                        row.insert("version".into(), said["agent"].clone());
                    }
                    state.distro.owner_of(addr) == me
                }
            };
            row.insert("here".into(), json!(here));
            let published: Vec<Value> = published(&state, client)
                .into_iter()
                .map(|(key, at)| {
                    json!({
                        "namespaceId": key.namespace,
                        "groupName": key.group,
                        "serviceName": key.name,
                        "ip": at["ip"],
                        "port": at["port"],
                        "clusterName": at["clusterName"],
                    })
                })
                .collect();
            let subscribed: Vec<Value> = subscriptions
                .iter()
                .map(|(key, _)| {
                    json!({
                        "namespaceId": key.namespace,
                        "groupName": key.group,
                        "serviceName": key.name,
                    })
                })
                .collect();
            row.insert("published".into(), Value::Array(published));
            row.insert("subscribed".into(), Value::Array(subscribed));
            Value::Object(row)
        })
        .filter(|row| {
            let field = |name: &str| row[name].as_str().unwrap_or_default();
            ip.is_none_or(|ip| field("clientIp").starts_with(ip))
                && app
                    .as_deref()
                    .is_none_or(|app| field("appName").to_lowercase().contains(app))
        })
        .collect();
    Ok(json_of(&json!({ "node": me, "clients": clients })))
}

/// The address and port of an address client's id (`ip:port`, `[v6]:port` or
/// `v6:port`).
fn split_address(addr: &str) -> (&str, u16) {
    match addr.rsplit_once(':') {
        Some((ip, port)) => (
            ip.trim_start_matches('[').trim_end_matches(']'),
            port.parse().unwrap_or(0),
        ),
        None => (addr, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_client_is_split_into_its_address_and_port() {
        assert_eq!(split_address("10.0.0.1:8080"), ("10.0.0.1", 8080));
        assert_eq!(split_address("[::1]:8080"), ("::1", 8080));
        assert_eq!(split_address("::1:8080"), ("::1", 8080));
        assert_eq!(split_address("host"), ("host", 0));
    }
}
