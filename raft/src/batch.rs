//! Proposal batching on the leader: concurrent proposals share one log entry.
//!
//! Every log entry costs the same fixed work whatever it holds (an fsync on every voter,
//! a replication round trip, openraft's per-entry bookkeeping), so under concurrent load
//! the leader packs the proposals that arrived while earlier entries were in flight into
//! one entry. A lone proposal is written as before, with no added wait: batches only form
//! from proposals that would otherwise queue. Durability is unchanged — every proposal is
//! acknowledged only after the entry holding it is committed and applied.
//!
//! Followers do the same on the way to the leader: proposals that queue while a forward
//! is in flight travel together in one `ProposeMany` request, and the leader puts each
//! into its own queue, so they usually share one entry there too.
//!
//! A batch entry is the byte [`BATCH_MARK`] followed by the MessagePack array of the
//! commands' own encodings; its response is the same mark followed by the array of the
//! responses, in order. `0xc1` is the one byte MessagePack never uses, so no single
//! command's encoding starts with it and logs written before batching read as they did.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Raft};
use serde::de::DeserializeOwned;
use serde_bytes::ByteBuf;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::network::{decode, encode, Rpc, Transport, TransportError};
use crate::node::WriteError;
use crate::types::{NodeId, Payload, TypeConfig};

/// First byte of a batch entry and of its response.
pub const BATCH_MARK: u8 = 0xc1;
/// At most this many proposals in one entry.
const MAX_PROPOSALS: usize = 512;
/// A batch stops growing once its commands reach this many bytes.
const MAX_BYTES: usize = 1 << 20;
/// Batch entries proposed and not yet committed at once. A new entry starts as soon as
/// the one in flight finishes, taking everything that queued meanwhile. Measured on the
/// three-node bench (2 cores): 1 in flight 5,900 writes/s, 2 → 4,900/s, 4 → 5,000/s —
/// fewer, fuller entries win over more overlap.
const MAX_IN_FLIGHT: usize = 1;
/// Forwards from a follower to the leader in flight at once; the next one takes
/// everything that queued meanwhile.
const MAX_FORWARDS_IN_FLIGHT: usize = 2;
/// How long a forwarded request may take before the caller is told the outcome is
/// unknown.
pub(crate) const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one entry may take to commit before its proposals are told "unknown".
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a proposal must go when this node does not lead.
#[derive(Clone, Debug)]
pub(crate) enum Redirect {
    /// The leader.
    Leader(NodeId, String),
    /// Nobody leads yet.
    Nobody,
}

/// What became of one proposal.
pub(crate) type Outcome = Result<Result<Payload, Redirect>, WriteError>;

struct Proposal {
    bytes: Vec<u8>,
    reply: oneshot::Sender<Outcome>,
}

/// The leader-side queue proposals wait in. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Batcher {
    queue: mpsc::UnboundedSender<Proposal>,
}

impl Batcher {
    /// Starts the task that drains the queue into `raft`.
    pub(crate) fn start(raft: Raft<TypeConfig>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx));
        Self { queue }
    }

    /// Queues one encoded command at once; the receiver gets its outcome.
    pub(crate) fn submit(&self, bytes: Vec<u8>) -> oneshot::Receiver<Outcome> {
        let (reply, outcome) = oneshot::channel();
        // If the task is gone the reply sender is dropped with the message, and the
        // receiver reports the shutdown.
        let _ = self.queue.send(Proposal { bytes, reply });
        outcome
    }
}

/// Waits until `deadline` at most for the outcome of a submitted proposal.
pub(crate) async fn outcome(rx: oneshot::Receiver<Outcome>, deadline: Instant) -> Outcome {
    match tokio::time::timeout_at(deadline, rx).await {
        Err(_) => Err(WriteError::Unknown),
        Ok(Err(_)) => Err(WriteError::Unavailable("raft is shutting down".into())),
        Ok(Ok(outcome)) => outcome,
    }
}

/// Proposals from a follower to the leader, waiting to be forwarded.
struct Forward {
    leader: NodeId,
    addr: String,
    bytes: Vec<u8>,
    reply: oneshot::Sender<Result<Payload, WriteError>>,
}

/// The follower-side queue of proposals for the leader. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Forwarder {
    queue: mpsc::UnboundedSender<Forward>,
}

impl Forwarder {
    /// Starts the task that forwards the queue through `transport`.
    pub(crate) fn start<T: Transport>(transport: T) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run_forwarder(transport, rx));
        Self { queue }
    }

    /// Forwards `bytes` to `leader` at `addr`, with whatever else is on its way there,
    /// and waits for the leader's answer.
    pub(crate) async fn forward(
        &self,
        leader: NodeId,
        addr: &str,
        bytes: Vec<u8>,
    ) -> Result<Payload, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Forward {
                leader,
                addr: addr.to_string(),
                bytes,
                reply,
            })
            .map_err(|_| WriteError::Unavailable("raft is shutting down".into()))?;
        // Bounded here too: behind a stalled forward, a proposal could otherwise wait for
        // a slot and then for its own call. One that gives up is not sent afterwards.
        match tokio::time::timeout(FORWARD_TIMEOUT, answer).await {
            Err(_) => Err(WriteError::Unknown),
            Ok(Err(_)) => Err(WriteError::Unavailable("raft is shutting down".into())),
            Ok(Ok(answer)) => answer,
        }
    }
}

async fn run_forwarder<T: Transport>(transport: T, mut rx: mpsc::UnboundedReceiver<Forward>) {
    let in_flight = Arc::new(Semaphore::new(MAX_FORWARDS_IN_FLIGHT));
    while let Some((permit, batch)) = next_batch(&mut rx, &in_flight).await {
        // Leadership rarely moves mid-batch; when it does, each leader gets its own.
        let mut by_leader: Vec<Vec<Forward>> = Vec::new();
        for f in batch {
            match by_leader
                .iter_mut()
                .find(|g| g[0].leader == f.leader && g[0].addr == f.addr)
            {
                Some(group) => group.push(f),
                None => by_leader.push(vec![f]),
            }
        }
        let transport = transport.clone();
        tokio::spawn(async move {
            for group in by_leader {
                send_group(&transport, group).await;
            }
            drop(permit);
        });
    }
}

/// Sends one leader its proposals (one `Propose`, or one `ProposeMany`) and answers each.
async fn send_group<T: Transport>(transport: &T, mut group: Vec<Forward>) {
    let (leader, addr) = (group[0].leader, group[0].addr.clone());
    if group.len() == 1 {
        let f = group.pop().expect("one proposal");
        let answer = call::<Payload, T>(transport, leader, &addr, Rpc::Propose, f.bytes).await;
        let _ = f.reply.send(answer);
        return;
    }
    let (commands, replies): (Vec<_>, Vec<_>) = group
        .into_iter()
        .map(|f| (ByteBuf::from(f.bytes), f.reply))
        .unzip();
    let answers = match call::<Vec<Result<Payload, WriteError>>, T>(
        transport,
        leader,
        &addr,
        Rpc::ProposeMany,
        encode(&commands),
    )
    .await
    {
        Ok(answers) if answers.len() == replies.len() => answers,
        Ok(_) => vec![
            Err(WriteError::Codec(
                "the leader answered a different number of proposals".into()
            ));
            replies.len()
        ],
        Err(e) => vec![Err(e); replies.len()],
    };
    for (reply, answer) in replies.into_iter().zip(answers) {
        let _ = reply.send(answer);
    }
}

/// Sends `body` as `rpc` to the leader and decodes its `Result<R, WriteError>`.
pub(crate) async fn call<R: DeserializeOwned, T: Transport>(
    transport: &T,
    leader: NodeId,
    addr: &str,
    rpc: Rpc,
    body: Vec<u8>,
) -> Result<R, WriteError> {
    match transport
        .call(leader, addr, rpc, body, FORWARD_TIMEOUT)
        .await
    {
        Ok(reply) => {
            decode::<Result<R, WriteError>>(&reply).map_err(|e| WriteError::Codec(e.to_string()))?
        }
        Err(TransportError::Unreachable(a, why)) => Err(WriteError::NoLeader(format!(
            "leader {leader} at {a}: {why}"
        ))),
        Err(TransportError::NoReply(..)) => Err(WriteError::Unknown),
        Err(e @ TransportError::Refused(..)) => Err(WriteError::Unavailable(e.to_string())),
    }
}

async fn run(raft: Raft<TypeConfig>, mut rx: mpsc::UnboundedReceiver<Proposal>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some((permit, batch)) = next_batch(&mut rx, &in_flight).await {
        let raft = raft.clone();
        tokio::spawn(async move {
            commit(&raft, batch).await;
            drop(permit);
        });
    }
}

/// Something waiting in a queue for its batch.
trait Queued {
    /// Its encoded size.
    fn size(&self) -> usize;
    /// Whether its waiter gave up (told "outcome unknown"): it is not sent any more.
    fn abandoned(&self) -> bool;
}

impl Queued for Proposal {
    fn size(&self) -> usize {
        self.bytes.len()
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

impl Queued for Forward {
    fn size(&self) -> usize {
        self.bytes.len()
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// Waits for the next item and a free in-flight slot, then takes everything that queued
/// meanwhile (up to [`MAX_PROPOSALS`] / [`MAX_BYTES`]), leaving out abandoned items.
/// `None` once the queue is closed.
async fn next_batch<T: Queued>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    in_flight: &Arc<Semaphore>,
) -> Option<(OwnedSemaphorePermit, Vec<T>)> {
    loop {
        let first = rx.recv().await?;
        let permit = in_flight.clone().acquire_owned().await.ok()?;
        let mut size = first.size();
        let mut batch = vec![first];
        while batch.len() < MAX_PROPOSALS && size < MAX_BYTES {
            match rx.try_recv() {
                Ok(next) => {
                    size += next.size();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        batch.retain(|item| !item.abandoned());
        if !batch.is_empty() {
            return Some((permit, batch));
        }
    }
}

/// Writes `batch` as one entry and answers each proposal.
async fn commit(raft: &Raft<TypeConfig>, mut batch: Vec<Proposal>) {
    if batch.len() == 1 {
        let Proposal { bytes, reply } = batch.pop().expect("one proposal");
        let _ = reply.send(write(raft, Payload(bytes)).await);
        return;
    }
    let (commands, replies): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .map(|p| (ByteBuf::from(p.bytes), p.reply))
        .unzip();
    let outcomes: Vec<Outcome> = match encode_batch(&commands) {
        Err(e) => vec![Err(e); replies.len()],
        Ok(entry) => match write(raft, entry).await {
            Ok(Ok(reply)) => match decode_batch(&reply.0) {
                Some(responses) if responses.len() == replies.len() => {
                    responses.into_iter().map(|r| Ok(Ok(Payload(r)))).collect()
                }
                _ => vec![
                    Err(WriteError::Codec(
                        "batch response does not match its proposals".into()
                    ));
                    replies.len()
                ],
            },
            other => vec![other; replies.len()],
        },
    };
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        let _ = reply.send(outcome);
    }
}

/// Proposes one entry, bounded by [`WRITE_TIMEOUT`] so that a stuck write cannot hold
/// its in-flight slot for ever.
async fn write(raft: &Raft<TypeConfig>, entry: Payload) -> Outcome {
    match tokio::time::timeout(WRITE_TIMEOUT, raft.client_write(entry)).await {
        Err(_) => Err(WriteError::Unknown),
        Ok(Ok(reply)) => Ok(Ok(reply.data)),
        Ok(Err(e)) => match redirect_of(&e) {
            Some(r) => Ok(Err(r)),
            None => Err(WriteError::Unavailable(e.to_string())),
        },
    }
}

pub(crate) fn redirect_of(
    e: &RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
) -> Option<Redirect> {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            Some(match (f.leader_id, &f.leader_node) {
                (Some(id), Some(node)) => Redirect::Leader(id, node.addr.clone()),
                _ => Redirect::Nobody,
            })
        }
        _ => None,
    }
}

/// Frames several encoded commands (or responses) as one payload.
pub(crate) fn encode_batch(items: &[ByteBuf]) -> Result<Payload, WriteError> {
    let mut bytes = vec![BATCH_MARK];
    rmp_serde::encode::write(&mut bytes, items).map_err(|e| WriteError::Codec(e.to_string()))?;
    Ok(Payload(bytes))
}

/// The items of a batch payload; `None` if `bytes` is not one.
pub(crate) fn decode_batch(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let rest = bytes.strip_prefix(&[BATCH_MARK])?;
    let items: Vec<ByteBuf> = rmp_serde::from_slice(rest).ok()?;
    Some(items.into_iter().map(ByteBuf::into_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_and_a_single_command_is_not_one() {
        let items = vec![ByteBuf::from(vec![1, 2, 3]), ByteBuf::from(Vec::new())];
        let payload = encode_batch(&items).unwrap();
        assert_eq!(payload.0[0], BATCH_MARK);
        assert_eq!(decode_batch(&payload.0), Some(vec![vec![1, 2, 3], vec![]]));
        let single = rmp_serde::to_vec_named(&("Register", 7u8)).unwrap();
        assert_eq!(decode_batch(&single), None);
    }
}
