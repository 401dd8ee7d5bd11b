//! roster: a clustered, Nacos-compatible service registry.
//!
//! Layers, from the core outwards (a layer imports only itself and the layers before it):
//! - The core is its own crate, `roster_registry`: services, instances, selection, beat
//!   expiry and the eviction guard, Distro's client records, the Nacos list shapes,
//!   stable hashing and time.
//! - [`services`] what holds, replicates, guards and reports the node's data: the Raft
//!   store, Distro, the cluster and its peer channel, the naming and config write paths,
//!   auth, health checks, push, metrics, audit, backups, the listeners' limits; and
//!   [`error`], the one error kind with its HTTP, Nacos v2 and gRPC projections.
//! - [`state`] the node's state: the services' handles gathered, as the faces take them.
//! - [`faces`] the protocol faces: HTTP (Nacos v1 and v2, roster's own API, the
//!   console's), Nacos gRPC, DNS, and the sync task runner.
//! - [`node`] the wiring: flags and config file, and [`run`],
//!   which builds the node, starts its components and serves.
//! - [`cli`] the client subcommands.

pub mod cli;
pub mod error;
pub mod faces;
pub mod node;
pub mod services;
pub mod state;

pub use node::{run, Listeners};
