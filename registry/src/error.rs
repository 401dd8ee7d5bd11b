//! Why a registry operation was refused: one enum for every refusal of the core, which
//! each protocol maps to its own codes. Serializable, because a refusal by the Raft state
//! machine is part of the command's response that goes back to the proposing node.

use serde::{Deserialize, Serialize};

/// Why a registry operation was refused. Every variant is the caller's mistake or a
/// conflict with current state; none is an internal failure.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum RegistryError {
    /// The service does not exist.
    #[error("service {0} not found")]
    ServiceNotFound(String),
    /// The service already has stored settings.
    #[error("service {0} already exists")]
    ServiceExists(String),
    /// The service still has instances.
    #[error("service {0} is not empty; deregister its instances first")]
    ServiceNotEmpty(String),
    /// The instance does not exist.
    #[error("instance {addr} not found in service {service}")]
    InstanceNotFound {
        /// The service.
        service: String,
        /// `ip:port`.
        addr: String,
    },
    /// The service holds the other kind of instance.
    #[error("service {service} holds {held} instances; a {wanted} instance cannot join it (deregister them first, or use another service)")]
    KindConflict {
        /// The service.
        service: String,
        /// What it holds.
        held: String,
        /// What was offered.
        wanted: String,
    },
    /// The namespace does not exist.
    #[error("namespace {0} not found")]
    NamespaceNotFound(String),
    /// A namespace with this id exists.
    #[error("namespace {0} already exists")]
    NamespaceExists(String),
    /// The namespace still holds services.
    #[error("namespace {id} still holds {services} service(s); delete them first")]
    NamespaceNotEmpty {
        /// The namespace.
        id: String,
        /// How many services it holds.
        services: usize,
    },
    /// The public namespace cannot be changed this way.
    #[error("the public namespace cannot be deleted")]
    PublicNamespace,
    /// The instance belongs to a sync task.
    #[error("instance {addr} in service {service} is imported by sync task '{task}'; pause or delete the task, or exclude the service from it")]
    Imported {
        /// The service.
        service: String,
        /// `ip:port`.
        addr: String,
        /// The task.
        task: String,
    },
}
