//! What Distro nodes send each other on the peer channel (MessagePack, rmp-serde named
//! fields), by route under `distro/`: `sync` ([`SyncMessage`], answered `()`), `verify`
//! ([`VerifyMessage`] → [`VerifyReply`]), `snapshot` (empty → [`SnapshotMessage`]), and
//! `forward2` / `forward` ([`EphemeralOp`] → the owner's answer) and `forward-batch`
//! (several ops → one answer each), see [`super::forward`].
//! These shapes are the wire format: change them only with a new route.

use serde::{Deserialize, Serialize};

use roster_registry::client::ClientData;
use roster_registry::service::ServiceKey;
use roster_registry::{InstancePatch, Registration};

/// Route of pushed client states.
pub const SYNC: &str = "sync";
/// Route of an owner's confirmations.
pub const VERIFY: &str = "verify";
/// Route of a starting node's request for every client.
pub const SNAPSHOT: &str = "snapshot";

/// A write or beat for an ephemeral instance, executed by the client's owner.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EphemeralOp {
    /// Register or re-register.
    Register {
        /// The service.
        key: ServiceKey,
        /// The instance.
        registration: Registration,
    },
    /// Deregister.
    Deregister {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
    },
    /// An operator's update.
    Update {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
        /// What changes.
        patch: InstancePatch,
    },
    /// A heartbeat; with a registration to fall back on when the instance is unknown
    /// (a full beat re-registers).
    Beat {
        /// The service.
        key: ServiceKey,
        /// Instance IP.
        ip: String,
        /// Instance port.
        port: u16,
        /// Re-register with this when the instance is unknown.
        re_register: Option<Registration>,
    },
}

impl EphemeralOp {
    /// The address (`ip`, `port`) of the client the op is about.
    pub fn address(&self) -> (&str, u16) {
        match self {
            EphemeralOp::Register { registration, .. } => (&registration.ip, registration.port),
            EphemeralOp::Deregister { ip, port, .. }
            | EphemeralOp::Update { ip, port, .. }
            | EphemeralOp::Beat { ip, port, .. } => (ip, *port),
        }
    }
}

/// What an op returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpReply {
    /// Done.
    Done,
    /// A beat for a known (or re-registered) instance, with its beat interval.
    BeatOk(u64),
    /// A beat for an unknown instance without a registration to fall back on.
    BeatUnknown,
}

/// Client states pushed to a peer: sent as
/// [`ClientShare`](roster_registry::client::ClientShare)s (the registry's instances, not
/// copies of them), received as [`ClientData`]: the same bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncMessage<C = ClientData> {
    /// Whole client states.
    pub clients: Vec<C>,
}

/// Every client a node has, or one part of them, and whether that node had itself
/// loaded when it answered (a node that is starting too has nothing to give yet).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotMessage<C = ClientData> {
    /// Whether the answering node had loaded its own state.
    pub loaded: bool,
    /// Whole client states (sent as `ClientShare`s, like [`SyncMessage`]'s).
    pub clients: Vec<C>,
    /// Into how many parts the answering node splits its snapshot: the answer to a
    /// plan request ([`SnapshotRequest`] with `parts` 0) carries no clients and this
    /// count; 0 from a node that sends its snapshot whole (builds before parts, which
    /// answer every request with everything).
    #[serde(default)]
    pub parts: u32,
}

/// A starting node's request for a peer's snapshot: first the plan (`parts` 0), then
/// each part `part` of `parts`, the clients whose id hashes to it. Parts keep every
/// message far below the peer channel's limit whatever the number of instances. An
/// empty body asks for everything at once (what builds before parts send).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRequest {
    /// The part wanted, below `parts`.
    pub part: u32,
    /// How many parts (0: the plan).
    pub parts: u32,
}

/// What an owner confirms: `(client, revision, last beat ms)` for each client it owns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VerifyMessage {
    /// The owner's clients.
    pub clients: Vec<(String, u64, u64)>,
}

/// The clients a peer's copy disagrees on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReply {
    /// Clients to send whole.
    pub need: Vec<String>,
}
