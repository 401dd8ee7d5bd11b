//! The protocol faces: how clients reach the node. Each parses its requests, asks the
//! guard, and reads and writes through the services' handles.
//!
//! - [`http`] the HTTP routes: Nacos v1 and v2, roster's own API, the console's;
//! - [`grpc`] the Nacos 2.x gRPC protocol;
//! - [`dns`] the DNS interface;
//! - [`peer`] what other members ask of this node over the peer channel;
//! - [`sync`] the sync task runner: imports from foreign registries, writing as a client
//!   of the naming and config write paths does.

pub mod dns;
pub mod grpc;
pub mod http;
pub mod peer;
pub mod sync;
