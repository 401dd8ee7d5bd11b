//! roster: a clustered, Nacos-compatible service registry.
//!
//! Modules, from the core outwards:
//! - The core is its own crate, `roster_registry`: services, instances, selection, beat
//!   expiry and the eviction guard, Distro's client records, the Nacos list shapes,
//!   stable hashing and time.
//! - [`health`] persistent instances' health checks; [`store`]
//!   the Raft state machine, its commands and the sync task table; [`distro`] AP
//!   replication of ephemeral instances; [`cluster`] members, the peer channel and the
//!   cluster view; [`push`] UDP push and the broadcast of changes; [`auth`] users and
//!   tokens; [`metrics`] Prometheus metrics; [`audit`] the audit log of writes and
//!   admin actions; [`configs`] the Nacos configuration store (Raft-held) and its
//!   listeners' change feed.
//! - [`naming`] the write path of instances every face takes; [`error`] the one
//!   error kind with its HTTP, Nacos v2 and gRPC projections.
//! - [`state`] the node's shared state, gathering the handles above.
//! - The protocol faces: [`api`] the HTTP routes (Nacos v1 and v2, roster's own API, the
//!   console's), [`grpc`] the Nacos 2.x gRPC protocol, [`dns`] the DNS interface; and
//!   [`imports`] the sync task runner.
//! - [`backup`] backup snapshot files, scheduled snapshots, and the offline restore and
//!   recovery of a data dir.
//! - [`app`] the wiring: binds the faces to the state and runs the workers; [`config`]
//!   flags and config file; [`cli`] the client subcommands; [`listen`] the HTTP and gRPC
//!   listeners' connection caps, accept backoff and HTTP connection timeouts (and HTTPS);
//!   [`tls`] certificates of every TLS face, reloaded when their files change.

pub mod api;
pub mod app;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod configs;
pub mod distro;
pub mod dns;
pub mod error;
pub mod grpc;
pub mod health;
pub mod imports;
pub mod listen;
pub mod metrics;
pub mod naming;
pub mod push;
pub mod state;
pub mod store;
pub mod tls;

pub use app::{run, Listeners};
