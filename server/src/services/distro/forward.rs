//! Forwarding an ephemeral write or beat to its client's owner, and the answer's wire
//! format, by version, so that a cluster can be upgraded one node at a time.
//!
//! - `distro/forward2` (this build): the owner answers `Result<OpReply, Error>`, the
//!   error whole — its kind travels, so a client gets the same status, v2 code and gRPC
//!   code whichever node took its request.
//! - `distro/forward` (builds before typed errors): the owner answers
//!   `Result<OpReply, {status, message}>`, an HTTP status. This build still serves it,
//!   for old nodes forwarding here, and still speaks it, to old owners: a node that does
//!   not know `forward2` answers 404, and the op goes again on the old route. A status
//!   carries less than a kind (a 400 does not say whether the weight or the metadata was
//!   wrong), so an error from an old owner is answered by its status only; that lasts as
//!   long as the upgrade does.
//!
//! Both routes take the same request body, an [`EphemeralOp`].
//!
//! Under load, ops for one owner go together: while a request to an owner is in
//! flight, the ops for it queue ([`Queues`]), and the next request carries every queued
//! op (at most [`MAX_BATCH`]) on `distro/forward-batch` ([`BATCH_ROUTE`]), answered with
//! one result per op, in order. The first op to an idle owner goes at once, alone, so
//! batching adds no wait; a peer request per op had cost more than the op itself, and
//! capped the ephemeral writes one node of three took at ~8,000/s. An owner from before
//! batches answers 404, and that batch's ops go one by one on the older routes.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::messages::{EphemeralOp, OpReply};
use super::transport::Transport;
use crate::error::{Error, ErrorKind};
use roster_raft::{NodeId, TransportError};

/// The route of this build's answer format.
pub const ROUTE: &str = "forward2";
/// The route of the answer format before typed errors.
pub const LEGACY_ROUTE: &str = "forward";

/// An owner's error as builds before typed errors send and read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LegacyError {
    /// HTTP status.
    pub status: u16,
    /// Message.
    pub message: String,
}

impl From<&Error> for LegacyError {
    fn from(e: &Error) -> Self {
        Self {
            status: e.http_status(),
            message: e.message.clone(),
        }
    }
}

impl From<LegacyError> for Error {
    /// The kind a status stands for; where several kinds share one status, the most
    /// general of them.
    fn from(e: LegacyError) -> Self {
        let kind = match e.status {
            401 => ErrorKind::Unauthenticated,
            403 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            413 => ErrorKind::TooLarge,
            503 => ErrorKind::Unavailable,
            400..=499 => ErrorKind::InvalidParameter,
            _ => ErrorKind::Internal,
        };
        Error::new(kind, e.message)
    }
}

/// The owner's answer to a forwarded op, encoded for the route it came on.
pub fn encode_reply(route: &str, reply: &Result<OpReply, Error>) -> Vec<u8> {
    let bytes = if route == LEGACY_ROUTE {
        let legacy: Result<OpReply, LegacyError> = reply.as_ref().copied().map_err(Into::into);
        rmp_serde::to_vec_named(&legacy)
    } else {
        rmp_serde::to_vec_named(reply)
    };
    bytes.expect("forward replies serialize")
}

/// Reads an owner's answer that came on `route`.
pub fn decode_reply(route: &str, bytes: &[u8]) -> Result<Result<OpReply, Error>, String> {
    if route == LEGACY_ROUTE {
        rmp_serde::from_slice::<Result<OpReply, LegacyError>>(bytes)
            .map(|r| r.map_err(Error::from))
            .map_err(|e| e.to_string())
    } else {
        rmp_serde::from_slice(bytes).map_err(|e| e.to_string())
    }
}

/// Whether a peer refused a route because it does not know it (a build from before it).
fn unknown_route(e: &TransportError) -> bool {
    matches!(e, TransportError::Refused(_, m) if m.starts_with("404"))
}

/// The route of batched ops (`Vec<EphemeralOp>` → `Vec<Result<OpReply, Error>>`).
pub const BATCH_ROUTE: &str = "forward-batch";
/// Most ops in one batch: what a sender puts in one, and what a receiver accepts.
pub const MAX_BATCH: usize = 256;

/// What became of a queued op.
#[derive(Debug)]
pub enum Outcome {
    /// The owner's answer.
    Answered(Result<OpReply, Error>),
    /// The owner could not be reached (or its answer read): the op comes back, for the
    /// caller to handle itself (boxed: an op is several times the size of an answer).
    Unreachable(Box<EphemeralOp>, String),
}

/// An op waiting for its owner, and where its outcome goes.
type Waiter = (EphemeralOp, oneshot::Sender<Outcome>);

/// Ops queued per owner while a batch to it is in flight.
#[derive(Default)]
pub struct Queues {
    owners: Mutex<HashMap<NodeId, Queue>>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    /// A sender is running for this owner (it takes `waiting` until it is empty).
    sending: bool,
}

impl Queues {
    /// Queues `op` for `owner`; the outcome's receiver, and whether the caller must
    /// start a sender for this owner (none is running).
    pub fn enqueue(&self, owner: NodeId, op: EphemeralOp) -> (oneshot::Receiver<Outcome>, bool) {
        let (tx, rx) = oneshot::channel();
        let mut owners = self.owners.lock();
        let queue = owners.entry(owner).or_default();
        queue.waiting.push((op, tx));
        let start = !queue.sending;
        queue.sending = true;
        (rx, start)
    }

    /// The next batch for `owner`, at most [`MAX_BATCH`] ops; empty when none waits,
    /// and then the sender stops (the next op starts another).
    fn take(&self, owner: NodeId) -> Vec<Waiter> {
        let mut owners = self.owners.lock();
        let Some(queue) = owners.get_mut(&owner) else {
            return Vec::new();
        };
        if queue.waiting.is_empty() {
            queue.sending = false;
            owners.remove(&owner);
            return Vec::new();
        }
        let rest = queue.waiting.split_off(queue.waiting.len().min(MAX_BATCH));
        std::mem::replace(&mut queue.waiting, rest)
    }
}

/// Sends `owner`'s queued ops, batch after batch, until none waits.
pub async fn send_queued<T: Transport>(
    queues: &Queues,
    transport: &T,
    owner: NodeId,
    timeout: Duration,
) {
    loop {
        let batch = queues.take(owner);
        if batch.is_empty() {
            return;
        }
        let (ops, waiters): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        match call_batch(transport, owner, &ops, timeout).await {
            Ok(replies) => {
                for (tx, reply) in waiters.into_iter().zip(replies) {
                    let _ = tx.send(Outcome::Answered(reply));
                }
            }
            Err(e) => {
                for (tx, op) in waiters.into_iter().zip(ops) {
                    let _ = tx.send(Outcome::Unreachable(Box::new(op), e.clone()));
                }
            }
        }
    }
}

/// Runs `ops` on `owner` in one request, or one by one on the older routes when the
/// owner does not know batches. `Err` when the owner cannot be reached or its answer
/// cannot be read.
async fn call_batch<T: Transport>(
    transport: &T,
    owner: NodeId,
    ops: &[EphemeralOp],
    timeout: Duration,
) -> Result<Vec<Result<OpReply, Error>>, String> {
    if let [op] = ops {
        return Ok(vec![call(transport, owner, op, timeout).await?]);
    }
    let body = rmp_serde::to_vec_named(ops).expect("ops serialize");
    let path = format!("distro/{BATCH_ROUTE}");
    match transport.post(owner, &path, body, timeout).await {
        Ok(bytes) => {
            let replies: Vec<Result<OpReply, Error>> = rmp_serde::from_slice(&bytes)
                .map_err(|e| format!("bad answer from node {owner}: {e}"))?;
            if replies.len() != ops.len() {
                return Err(format!(
                    "node {owner} answered {} of {} ops",
                    replies.len(),
                    ops.len()
                ));
            }
            Ok(replies)
        }
        Err(e) if unknown_route(&e) => {
            let mut replies = Vec::with_capacity(ops.len());
            for op in ops {
                replies.push(call(transport, owner, op, timeout).await?);
            }
            Ok(replies)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `op` on `owner`: on [`ROUTE`], or on [`LEGACY_ROUTE`] when the owner does not
/// know it. `Err` when the owner cannot be reached or its answer cannot be read (then the
/// caller handles the op itself).
pub async fn call<T: Transport>(
    transport: &T,
    owner: NodeId,
    op: &EphemeralOp,
    timeout: Duration,
) -> Result<Result<OpReply, Error>, String> {
    let body = rmp_serde::to_vec_named(op).expect("ops serialize");
    let path = format!("distro/{ROUTE}");
    let (route, bytes) = match transport.post(owner, &path, body.clone(), timeout).await {
        Ok(bytes) => (ROUTE, bytes),
        Err(e) if unknown_route(&e) => {
            let path = format!("distro/{LEGACY_ROUTE}");
            let bytes = transport
                .post(owner, &path, body, timeout)
                .await
                .map_err(|e| e.to_string())?;
            (LEGACY_ROUTE, bytes)
        }
        Err(e) => return Err(e.to_string()),
    };
    decode_reply(route, &bytes).map_err(|e| format!("bad answer from node {owner}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::services::distro::mem::{Fault, MemNet, MemTransport};
    use crate::services::distro::responsibility::owner_of;
    use crate::services::distro::tests::{key, reg};
    use crate::services::distro::Distro;
    use roster_registry::{InstancePatch, Registry};

    /// The reply type of builds before typed errors, as they declared it.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct OldForwardError {
        status: u16,
        message: String,
    }

    #[test]
    fn the_new_route_carries_the_kind() {
        let e = Error::new(ErrorKind::InvalidWeight, "weights range");
        let bytes = encode_reply(ROUTE, &Err(e.clone()));
        assert_eq!(decode_reply(ROUTE, &bytes).unwrap(), Err(e));
        let bytes = encode_reply(ROUTE, &Ok(OpReply::BeatOk(5000)));
        assert_eq!(
            decode_reply(ROUTE, &bytes).unwrap(),
            Ok(OpReply::BeatOk(5000))
        );
    }

    #[test]
    fn an_old_node_forwarding_here_reads_the_old_format() {
        // An old node posts to `forward` and decodes `Result<OpReply, {status, message}>`.
        let e = Error::instance_not_found("instance 127.0.0.1:1 not found in service g@@s");
        let bytes = encode_reply(LEGACY_ROUTE, &Err(e));
        let old: Result<OpReply, OldForwardError> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(
            old,
            Err(OldForwardError {
                status: 404,
                message: "instance 127.0.0.1:1 not found in service g@@s".into()
            })
        );
        let bytes = encode_reply(LEGACY_ROUTE, &Ok(OpReply::Done));
        let old: Result<OpReply, OldForwardError> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(old, Ok(OpReply::Done));
    }

    #[test]
    fn this_node_reads_an_old_owners_answer() {
        // An old owner answers on `forward` with a status.
        let answer: Result<OpReply, OldForwardError> = Err(OldForwardError {
            status: 400,
            message: "instance format invalid: The weights range from 0.0 to 10000.0".into(),
        });
        let bytes = rmp_serde::to_vec_named(&answer).unwrap();
        let read = decode_reply(LEGACY_ROUTE, &bytes).unwrap().unwrap_err();
        assert_eq!(read.http_status(), 400);
        assert_eq!(
            read.kind,
            ErrorKind::InvalidParameter,
            "a status, not a kind"
        );
        let unavailable: Result<OpReply, OldForwardError> = Err(OldForwardError {
            status: 503,
            message: "no leader".into(),
        });
        let bytes = rmp_serde::to_vec_named(&unavailable).unwrap();
        assert_eq!(
            decode_reply(LEGACY_ROUTE, &bytes)
                .unwrap()
                .unwrap_err()
                .kind,
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn an_old_owner_refuses_the_new_route_as_unknown() {
        // What an old node answers for a distro route it does not know.
        let refused = TransportError::Refused(
            "127.0.0.1:7848".into(),
            "404 Not Found: no distro route forward2".into(),
        );
        assert!(unknown_route(&refused));
        let other =
            TransportError::Refused("127.0.0.1:7848".into(), "403 Forbidden: bad mac".into());
        assert!(!unknown_route(&other));
    }

    fn register(ip: &str) -> EphemeralOp {
        EphemeralOp::Register {
            key: key(),
            registration: reg(ip, 80),
        }
    }

    /// Node `id` of this build on `net`, loaded, and its registry.
    fn node(net: &MemNet, id: NodeId) -> (Distro<MemTransport>, Registry) {
        let registry = Registry::new();
        let distro = Distro::with_transport(
            id,
            registry.clone(),
            net.transport(id),
            Duration::from_secs(1),
            |_| false,
            Arc::new(|| 1_700_000_000_000),
        );
        net.attach(&distro);
        distro.core().set_loaded();
        (distro, registry)
    }

    #[tokio::test(start_paused = true)]
    async fn an_owner_from_before_typed_errors_runs_forwarded_ops_on_the_old_route() {
        let net = MemNet::new();
        let (here, here_registry) = node(&net, 1);
        // Node 2 is a build from before `forward2` and batches: it answers those 404, and
        // `forward` in its format, `{status, message}`.
        let (_owner, owner_registry) = node(&net, 2);
        net.old_build(2, &[ROUTE, BATCH_ROUTE]);
        let owned: Vec<String> = (0..10_000u32)
            .map(|i| format!("10.9.{}.{}", i / 250, i % 250))
            .filter(|ip| owner_of(&format!("{ip}:80"), &[1, 2]) == 2)
            .take(12)
            .collect();
        let run_by_owner = |ip: &str| {
            owner_registry.instance(&key(), ip, 80).is_some()
                && here_registry.instance(&key(), ip, 80).is_none()
        };
        let (first, unknown, rest) = (&owned[0], &owned[1], &owned[2..]);
        assert_eq!(here.execute(register(first)).await, Ok(OpReply::Done));
        assert!(run_by_owner(first));
        assert_eq!(net.delivered(1, 2, ROUTE).len(), 1, "refused");
        assert_eq!(net.delivered(1, 2, LEGACY_ROUTE).len(), 1);
        // The owner's error comes back by its status, as the kind that status stands for.
        let update = EphemeralOp::Update {
            key: key(),
            ip: unknown.clone(),
            port: 80,
            patch: InstancePatch::default(),
        };
        let refused = here.execute(update).await.unwrap_err();
        assert_eq!(refused.http_status(), 404);
        assert_eq!(refused.kind, ErrorKind::NotFound, "a status, not a kind");
        // Ops queued for it meanwhile: their batch is refused, and they go one by one,
        // each on the old route.
        net.fault(1, 2, Some(Fault::Delay(Duration::from_millis(20))));
        let mut calls = tokio::task::JoinSet::new();
        for ip in rest {
            let (here, op) = (here.clone(), register(ip));
            calls.spawn(async move { here.execute(op).await });
        }
        let answers = calls.join_all().await;
        assert!(
            answers.iter().all(|a| *a == Ok(OpReply::Done)),
            "{answers:?}"
        );
        assert!(rest.iter().all(|ip| run_by_owner(ip)));
        assert!(!net.delivered(1, 2, BATCH_ROUTE).is_empty(), "a batch went");
        assert_eq!(net.delivered(1, 2, LEGACY_ROUTE).len(), 2 + rest.len());
    }
}
