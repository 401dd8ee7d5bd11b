//! Instance health: server-side checks of persistent instances ([`check`], never aimed
//! at what [`deny`] names), and the worker that runs beat expiry ([`expiry`]). The rule
//! and the sweep, and the eviction guard the sweep asks before it removes ephemeral
//! instances, are the registry's (`roster_registry::{expiry, sweep, guard}`).

pub mod check;
pub mod deny;
pub mod expiry;
