//! Telling subscribers about changes: Nacos v1 UDP push ([`udp`]) and the broadcast of
//! changes that event streams follow ([`events`]). gRPC pushes go out over each client's
//! own connection (`faces::grpc`), which the other faces see through [`connections`];
//! [`balance`] spreads those connections over the members.

pub mod balance;
pub mod connections;
pub mod events;
pub mod udp;

use serde::Serialize;

use roster_registry::service::ServiceKey;

/// A subscriber as `/service/subscribers` lists it (UDP and gRPC alike).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberView {
    /// `ip:port`.
    pub addr_str: String,
    /// The client's user agent or version.
    pub agent: String,
    /// The application it names, or `unknown`.
    pub app: String,
    /// Its address.
    pub ip: String,
    /// Its port (UDP: where pushes go; gRPC: the connection's source port).
    pub port: u16,
    /// The namespace of the service.
    pub namespace_id: String,
    /// `group@@name`.
    pub service_name: String,
    /// The clusters it asked for (comma-separated; empty: all).
    pub cluster: String,
    /// `udp` or `grpc`.
    pub protocol: &'static str,
}

/// The subscribers of a service over one protocol. The UDP pusher and the gRPC
/// connections each keep theirs; the API lists them all without knowing either.
pub trait SubscriberList: Send + Sync {
    /// The subscribers of `key`, ordered by address.
    fn subscribers(&self, key: &ServiceKey) -> Vec<SubscriberView>;
}
