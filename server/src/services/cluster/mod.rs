//! Running as one node of several, over the peer channel (`services::channel`): who
//! the members are and which of them are alive ([`members`]), the cluster as one node
//! sees it ([`view`]), Raft's leader and membership changes in the log, with the
//! stand-down of a removed node ([`watch`]), and whether the node serves clients
//! ([`readiness`]).

pub mod members;
pub mod readiness;
pub mod view;
pub mod watch;

use std::collections::BTreeMap;

use roster_raft::NodeId;

/// Parses `--members`: `1=host:port,2=host:port,...` (node id = peer address).
pub fn parse_members(raw: &str) -> Result<BTreeMap<NodeId, String>, String> {
    let mut members = BTreeMap::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| format!("--members: '{part}' should be ID=HOST:PORT"))?;
        let id: NodeId = id
            .trim()
            .parse()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| format!("--members: '{id}' is not a positive node id"))?;
        let addr = addr.trim();
        let port_ok = addr.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !port_ok {
            return Err(format!("--members: '{addr}' should be HOST:PORT"));
        }
        if members.insert(id, addr.to_string()).is_some() {
            return Err(format!("--members: node id {id} appears twice"));
        }
    }
    if members.is_empty() {
        return Err("--members: no members given".into());
    }
    Ok(members)
}

/// The members whose address on the command line (`given`: `--members`, or this node's
/// `--peer`) differs from the one in the stored Raft membership (`stored`), as
/// `(id, stored, given)`. Once a node has joined, the stored membership is what every
/// node dials: the command line's addresses are not read again.
pub fn changed_addresses(
    stored: &BTreeMap<NodeId, String>,
    given: &BTreeMap<NodeId, String>,
) -> Vec<(NodeId, String, String)> {
    given
        .iter()
        .filter_map(|(id, addr)| {
            let old = stored.get(id)?;
            (old != addr).then(|| (*id, old.clone(), addr.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_addresses_compare_the_members_in_both() {
        let stored = parse_members("1=a:1,2=b:2,3=c:3").unwrap();
        let given = parse_members("1=a:1,2=b:9,4=d:4").unwrap();
        assert_eq!(
            changed_addresses(&stored, &given),
            [(2, "b:2".to_string(), "b:9".to_string())]
        );
    }

    #[test]
    fn members_parse() {
        let m = parse_members("1=127.0.0.1:7848, 2=host-b:7848,3=[::1]:7850").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[&2], "host-b:7848");
        assert!(parse_members("1=a:1,1=b:2").unwrap_err().contains("twice"));
        assert!(parse_members("x=a:1").is_err());
        assert!(parse_members("0=a:1").is_err());
        assert!(parse_members("1=a").is_err());
        assert!(parse_members("1=a:0").is_err());
        assert!(parse_members("").is_err());
    }
}
