//! The services around the registry core: what holds, replicates, guards and reports the
//! node's data. None of them imports a face or the node's wiring.
//!
//! - [`store`] the Raft state machine, its commands and the sync task table;
//!   [`distro`] AP replication of ephemeral instances; [`cluster`] members, the peer
//!   channel and the cluster view;
//! - [`naming`] the write path of instances; [`configs`] the Nacos configuration store
//!   (Raft-held) and its listeners' change feed; [`auth`] users, tokens and permissions;
//! - [`health`] persistent instances' health checks; [`push`] UDP push and the broadcast
//!   of changes;
//! - [`metrics`] Prometheus metrics; [`audit`] the audit log of writes and admin actions;
//!   [`backup`] snapshot files, scheduled snapshots, offline restore and recovery;
//! - [`net`] the listeners' connection caps, accept backoff, HTTP connection timeouts and
//!   the certificates of every TLS face; [`workers`] the node's background tasks.

pub mod audit;
pub mod auth;
pub mod backup;
pub mod cluster;
pub mod configs;
pub mod distro;
pub mod health;
pub mod metrics;
pub mod naming;
pub mod net;
pub mod push;
pub mod store;
pub mod workers;
