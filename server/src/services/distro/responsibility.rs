//! Which node owns a client: rendezvous hashing over the live members — each member
//! scores `hash(client, member)` and the highest score owns it. Pure, so every node
//! computes the same owner from the same member list; when a member dies only its own
//! clients move, and when it returns only they move back.

use roster_raft::NodeId;

use roster_registry::hash::{mix, stable_hash};

/// The node that owns a gRPC connection client (`g:<node>:<connection>`): the node the
/// connection is on, whether it lives or not.
pub fn connection_owner(client: &str) -> Option<NodeId> {
    client.strip_prefix("g:")?.split_once(':')?.0.parse().ok()
}

/// When a connection client (`g:<node>:<created ms>_<ip>_<port>`) was set up,
/// wall-clock ms on its node.
pub fn connection_created(client: &str) -> Option<u64> {
    let rest = client.strip_prefix("g:")?.split_once(':')?.1;
    rest.split_once('_')?.0.parse().ok()
}

/// The owner of `client` among `live` (non-empty) member ids: for a connection client the
/// node holding the connection, for an address client the highest rendezvous score.
pub fn owner_of(client: &str, live: &[NodeId]) -> NodeId {
    debug_assert!(!live.is_empty());
    if let Some(node) = connection_owner(client) {
        return node;
    }
    let base = stable_hash(client.as_bytes());
    *live
        .iter()
        .max_by_key(|id| (mix(base ^ mix(**id)), **id))
        .expect("live members are never empty")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_owner_rule_reads_as_a_connection_the_registry_does_too() {
        for id in [
            "g:1:abc",
            "g:8080",
            "g:a:x",
            "g:1:1733900000000_127.0.0.1_50012",
        ] {
            assert_eq!(
                roster_registry::client::is_connection(id),
                connection_owner(id).is_some(),
                "{id}"
            );
        }
    }

    #[test]
    fn owners_are_stable_and_spread() {
        assert_eq!(owner_of("10.0.0.1:80", &[7]), 7);
        let live = [1, 2, 3];
        let owner = owner_of("10.0.0.1:80", &live);
        assert_eq!(owner_of("10.0.0.1:80", &live), owner, "deterministic");
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            let o = owner_of(&format!("10.0.{}.{}:8080", i / 250, i % 250), &live);
            counts[(o - 1) as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| *c > 800),
            "spread over all members: {counts:?}"
        );
    }

    #[test]
    fn connections_belong_to_their_node() {
        assert_eq!(owner_of("g:7:1700000000000_10.0.0.1_5000", &[1, 2]), 7);
        assert_eq!(connection_owner("10.0.0.1:80"), None);
        assert_eq!(
            connection_created("g:7:1700000000000_10.0.0.1_5000"),
            Some(1_700_000_000_000)
        );
        for other in ["10.0.0.1:80", "g:7:x_10.0.0.1_5000", "g:7"] {
            assert_eq!(connection_created(other), None, "{other}");
        }
    }

    #[test]
    fn only_a_dead_owners_clients_move() {
        let clients: Vec<String> = (0..300)
            .map(|i| format!("10.1.{}.{}:80", i / 250, i % 250))
            .collect();
        let mut moved = 0;
        for c in &clients {
            let before = owner_of(c, &[1, 2, 3]);
            let after = owner_of(c, &[1, 3]);
            if before == 2 {
                moved += 1;
                assert!(after == 1 || after == 3);
            } else {
                assert_eq!(after, before, "{c} moved although its owner lives");
            }
            // And back when node 2 returns.
            assert_eq!(owner_of(c, &[1, 2, 3]), before);
        }
        assert!(moved > 50);
    }
}
