//! Instance health beyond beats: server-side checks of persistent instances ([`check`],
//! never aimed at what [`deny`] names). The eviction guard the registry's expiry sweep
//! asks before it removes ephemeral instances is the registry's (`roster_registry::guard`),
//! as is beat expiry itself (`expiry`, `sweep`).

pub mod check;
pub mod deny;
