//! The persistent domains as the state machine takes them: each domain's apply function
//! ([`APPLIERS`]). The store routes a command to its domain; the domain decides. Given
//! to the machine by the node's wiring and by the offline tools (backups, recovery).

use crate::services::store::machine::Appliers;
use crate::services::{auth, configs, naming};

/// The apply function of every persistent domain.
pub const APPLIERS: Appliers = Appliers {
    naming: naming::apply::apply,
    auth: auth::apply::apply,
    configs: configs::apply::apply,
};
