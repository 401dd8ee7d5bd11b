//! roster: a clustered, Nacos-compatible service registry.
//!
//! Modules: [`config`] flags and config file, [`app`] the node's state and `run`,
//! [`registry`] the in-memory registry core and beat expiry, [`health`] health checks and
//! the eviction guard, [`store`] the Raft state machine and proposals, [`auth`] users and
//! tokens, [`push`] UDP push, [`api`] the HTTP routes, [`imports`] sync tasks, [`metrics`]
//! Prometheus metrics, [`clock`] time, [`hash`] stable hashing shared by Distro and balancing.

pub mod api;
pub mod app;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod distro;
pub mod dns;
pub mod grpc;
pub mod hash;
pub mod health;
pub mod imports;
pub mod metrics;
pub mod push;
pub mod registry;
pub mod store;

pub use app::{run, Listeners};
