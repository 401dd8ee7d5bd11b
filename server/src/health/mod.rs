//! Instance health: beat expiry for ephemeral instances ([`expiry`]).

pub mod expiry;
