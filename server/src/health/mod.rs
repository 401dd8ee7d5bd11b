//! Instance health: beat expiry for ephemeral instances ([`expiry`]) and server-side
//! checks of persistent ones ([`check`]).

pub mod check;
pub mod expiry;
pub mod guard;
