//! Instance health beyond beats: server-side checks of persistent instances ([`check`],
//! never aimed at what [`deny`] names) and the eviction guard ([`guard`]), the policy
//! the registry's expiry sweep asks before it removes ephemeral instances. Beat expiry
//! itself is the registry's (`registry/expiry.rs`, `registry/sweep.rs`): it uses the
//! guard, and the guard knows nothing of the registry.

pub mod check;
pub mod deny;
pub mod guard;
