//! The services around the registry core: what holds, replicates, guards and reports the
//! node's data. None of them imports a face, the node's state or its wiring.
//!
//! - [`channel`] the peer channel nodes speak over; [`store`] the Raft store, its
//!   commands and the state machine that routes each to its domain, and the sync task
//!   table; [`distro`] AP replication of ephemeral instances; [`cluster`] members, the
//!   cluster view, Raft's watchers and the node's readiness;
//! - the persistent domains, each with its writes (the commands it proposes) and its
//!   apply: [`naming`] namespaces, services and instances (with Distro for ephemeral
//!   ones), [`configs`] the Nacos configuration store and its listeners' change feed,
//!   [`auth`] users, tokens and permissions; [`domains`] their apply functions, as the
//!   state machine takes them;
//! - [`health`] beat expiry and persistent instances' health checks; [`push`] UDP push
//!   and the broadcast of changes;
//! - [`metrics`] Prometheus metrics; [`audit`] the audit log of writes and admin actions;
//!   [`backup`] snapshot files, scheduled snapshots, offline restore and recovery;
//! - [`net`] the listeners' connection caps, accept backoff, HTTP connection timeouts and
//!   the certificates of every TLS face; [`workers`] the node's background tasks.

pub mod audit;
pub mod auth;
pub mod backup;
pub mod channel;
pub mod cluster;
pub mod configs;
pub mod distro;
pub mod domains;
pub mod health;
pub mod metrics;
pub mod naming;
pub mod net;
pub mod push;
pub mod store;
pub mod workers;
