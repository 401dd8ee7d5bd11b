//! Raft as an operator reads it in the log: one INFO line when a leader is elected (who,
//! in which term) and one when the applied membership changes (the members); and the
//! stand-down of a node that learns it was removed from the cluster.
//!
//! A node learns it was removed in one of two ways. Either the membership it has
//! applied (committed, so never undone) no longer names it; or, as is usual, it never
//! receives that entry — the leader stops replicating to it once the change is in the
//! leader's log, leaving it a voter of the joint configuration, campaigning for a term
//! the others refuse — and a member answers its hello with a later applied membership
//! that leaves it out ([`Members::left_out_at`]). A node cut off before either stays
//! not-ready ("starting") and cannot commit anything; it learns once it reaches a member.

use std::collections::BTreeMap;
use std::time::Duration;

use roster_raft::{NodeId, RaftStatus};
use tokio::sync::watch;

use super::members::Members;
use super::readiness::{Readiness, REMOVED};
use crate::services::store::Store;
use crate::services::workers::Workers;

/// How often the Raft position is read: leader and membership lines appear within this.
const EVERY: Duration = Duration::from_millis(200);

/// What the watch has logged and learned so far.
#[derive(Default)]
struct Seen {
    /// The leader and term last logged.
    leader: Option<(NodeId, u64)>,
    /// The applied membership last logged.
    members: Option<BTreeMap<NodeId, String>>,
    /// Whether this node has been a member. A node started with `--join` is not until it
    /// is added: while it catches up it applies older memberships that do not name it.
    member: bool,
}

/// Starts the watchers of Raft's state among `workers`: the log of leader and
/// membership changes with the stand-down of a removed node ([`run`]), and the watchdog
/// that reports a fatal Raft error on `failed` (the node then shuts down).
pub fn spawn_workers(
    store: &Store,
    members: &Members,
    ready: &Readiness,
    join: bool,
    failed: watch::Sender<Option<String>>,
    workers: &mut Workers,
) {
    workers.spawn(run(
        store.clone(),
        members.clone(),
        ready.clone(),
        join,
        workers.stopping(),
    ));
    workers.spawn(raft_watchdog(store.clone(), failed, workers.stopping()));
}

/// Reports on `failed` when Raft hits a fatal error (storage failure, unknown command).
async fn raft_watchdog(
    store: Store,
    failed: watch::Sender<Option<String>>,
    mut stopping: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        if let Some(fatal) = store.status().fatal {
            tracing::error!(error = %fatal, "raft stopped; shutting the node down");
            failed.send_replace(Some(format!("raft stopped: {fatal}")));
            return;
        }
    }
}

/// Logs leader and membership changes, and stands the node down (not ready, refusing
/// clients, no more elections) once it learns it was removed, until `stopping`.
pub async fn run(
    store: Store,
    members: Members,
    ready: Readiness,
    join: bool,
    mut stopping: watch::Receiver<bool>,
) {
    let me = store.id();
    let mut seen = Seen {
        member: !join,
        ..Default::default()
    };
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.changed() => return,
        }
        let status = store.status();
        if status.fatal.is_some() || ready.is_removed() {
            return;
        }
        log_changes(&status, me, &mut seen);
        if was_removed(&status, me, &seen, members.left_out_at()) {
            ready.set_removed();
            store.stop_campaigning();
            // Said once, at WARN. The process keeps running, refusing everyone: a
            // supervisor would restart a process that exits, into the same state.
            tracing::warn!(
                node_id = me,
                "{REMOVED}; it no longer serves clients and reports not ready"
            );
            return;
        }
    }
}

/// Logs a new leader or a new applied membership, and notes whether this node has been
/// a member.
fn log_changes(status: &RaftStatus, me: NodeId, seen: &mut Seen) {
    if let Some(leader) = status.leader {
        if seen.leader != Some((leader, status.term)) {
            tracing::info!(
                leader,
                term = status.term,
                this_node = leader == me,
                "raft leader elected"
            );
            seen.leader = Some((leader, status.term));
        }
    }
    // Only an applied membership: one merely appended may still be undone.
    let Some(index) = status.membership_index else {
        return;
    };
    if status.last_applied < index || seen.members.as_ref() == Some(&status.members) {
        return;
    }
    tracing::info!(
        members = ?status.members,
        voters = ?status.voters,
        raft_index = index,
        "raft membership changed"
    );
    seen.members = Some(status.members.clone());
    seen.member |= status.members.contains_key(&me);
}

/// Whether this node, having been a member, was removed: its applied membership leaves
/// it out, or a member applied a later one that does (`left_out_at`).
fn was_removed(status: &RaftStatus, me: NodeId, seen: &Seen, left_out_at: Option<u64>) -> bool {
    if !seen.member {
        return false;
    }
    let applied = status
        .membership_index
        .filter(|index| status.last_applied >= *index);
    if applied.is_some() && !status.members.contains_key(&me) {
        return true;
    }
    // A later membership than this node's own, committed (a member applied it), without
    // this node. Compared with the appended one: that one is at least the applied one.
    left_out_at.is_some_and(|at| status.membership_index.is_none_or(|own| at > own))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(members: &[NodeId], membership_index: u64, last_applied: u64) -> RaftStatus {
        RaftStatus {
            node_id: 2,
            state: roster_raft::ServerState::Follower,
            term: 1,
            leader: Some(1),
            last_log_index: last_applied,
            last_applied,
            snapshot_index: 0,
            voters: members.iter().copied().collect(),
            members: members
                .iter()
                .map(|id| (*id, format!("n{id}:7848")))
                .collect(),
            membership_index: Some(membership_index),
            replication: BTreeMap::new(),
            millis_since_quorum_ack: None,
            fatal: None,
        }
    }

    fn seen(member: bool) -> Seen {
        Seen {
            member,
            ..Default::default()
        }
    }

    #[test]
    fn an_applied_membership_without_this_node_removes_it() {
        assert!(was_removed(&status(&[1, 3], 4, 4), 2, &seen(true), None));
        // Appended, not applied yet: it may still be undone.
        assert!(!was_removed(&status(&[1, 3], 4, 3), 2, &seen(true), None));
        // Still named.
        assert!(!was_removed(
            &status(&[1, 2, 3], 4, 4),
            2,
            &seen(true),
            None
        ));
    }

    #[test]
    fn a_member_answering_with_a_later_membership_without_this_node_removes_it() {
        // Stuck in the joint configuration (index 3); a member applied index 4.
        assert!(was_removed(
            &status(&[1, 2, 3], 3, 3),
            2,
            &seen(true),
            Some(4)
        ));
        // A member lagging behind this node's own membership proves nothing.
        assert!(!was_removed(
            &status(&[1, 2, 3], 5, 5),
            2,
            &seen(true),
            Some(4)
        ));
    }

    #[test]
    fn a_node_that_never_was_a_member_is_not_removed() {
        // A `--join` node catching up applies older memberships without itself.
        assert!(!was_removed(
            &status(&[1, 3], 0, 4),
            2,
            &seen(false),
            Some(4)
        ));
    }
}
