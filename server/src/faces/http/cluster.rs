//! roster's cluster API (`/api/v1/cluster`) and Nacos' view of it
//! (`/nacos/v1/core/cluster/nodes`): members with their addresses, Raft roles and
//! positions, replication lag and liveness; adding and removing members.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use roster_raft::{MembershipChange, NodeId};
use serde_json::json;

use super::guard::Caller;
use super::nacos::{envelope, json_of};
use super::params::Params;
use crate::error::Error;
use crate::services::cluster::view::{ClusterView, MemberView};
use crate::state::AppState;

/// `GET /api/v1/cluster`: the cluster as this node sees it (for a caller who is not an
/// admin, the eviction guard's namespaces only where the caller may read something).
pub(super) async fn status(State(state): State<AppState>, caller: Caller) -> Response {
    let mut view = state.cluster_view_with_leader().await;
    view.eviction_guard_engaged
        .retain(|ns| caller.may_read_namespace(&state, ns));
    json_of(&view)
}

/// `POST /api/v1/cluster/members?id=N&peer=HOST:PORT`: add a node (learner, then voter).
pub(super) async fn add_member(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = node_id(&params)?;
    let peer = params.required("peer")?;
    crate::services::cluster::parse_members(&format!("{id}={peer}"))
        .map_err(|e| Error::illegal("peer", format!("{e}.")))?;
    if state.store.status().voters.contains(&id) {
        return Err(Error::conflict(format!(
            "node {id} is already a voting member"
        )));
    }
    state
        .store
        .change_membership(MembershipChange::Add {
            id,
            addr: peer.to_string(),
        })
        .await?;
    Ok(json_of(&state.cluster_view_with_leader().await))
}

/// `DELETE /api/v1/cluster/members?id=N`: remove a node.
pub(super) async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = node_id(&params)?;
    let status = state.store.status();
    if !status.members.contains_key(&id) {
        return Err(Error::not_found(format!("node {id} is not a member")));
    }
    if status.voters.len() == 1 && status.voters.contains(&id) {
        return Err(Error::bad_request(format!(
            "node {id} is the last voter; a cluster cannot remove its last voter"
        )));
    }
    state
        .store
        .change_membership(MembershipChange::Remove { id })
        .await?;
    Ok(json_of(&state.cluster_view_with_leader().await))
}

/// `GET /api/v1/cluster/owner?client=IP:PORT`: which node owns an ephemeral client
/// (handles its beats and judges its expiry), as this node sees the live members.
pub(super) async fn owner(
    State(state): State<AppState>,
    params: Params,
) -> Result<Response, Error> {
    let client = params.required("client")?;
    let (ip, port) = client
        .rsplit_once(':')
        .ok_or_else(|| Error::illegal("client", format!("'{client}' should be IP:PORT.")))?;
    roster_registry::validate::check_ip("client", ip)?;
    roster_registry::validate::parse_port("client", port)?;
    Ok(json_of(&json!({
        "client": client,
        "owner": state.distro.owner_of(client),
        "live": state.members.live(),
    })))
}

fn node_id(params: &Params) -> Result<NodeId, Error> {
    let raw = params.required("id")?;
    raw.parse::<NodeId>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| Error::illegal("id", format!("'{raw}' is not a positive node id.")))
}

/// `GET /nacos/v1/core/cluster/nodes`: members in Nacos' `Member` shape.
pub(super) async fn nacos_nodes(State(state): State<AppState>, params: Params) -> Response {
    let keyword = params.optional("keyword").unwrap_or("");
    let view = state.cluster_view_with_leader().await;
    let nodes: Vec<_> = nacos_members(&view)
        .into_iter()
        .filter(|(m, _)| m.http.as_deref().unwrap_or(&m.peer).contains(keyword))
        .map(|(_, member)| member)
        .collect();
    envelope(nodes)
}

/// Every member of `view` beside its Nacos `Member` shape (`ip`, `port`, `state` UP or
/// DOWN, `address`, `extendInfo` with the Raft group and roster's own figures).
pub(super) fn nacos_members(view: &ClusterView) -> Vec<(&MemberView, serde_json::Value)> {
    let leader_peer = view
        .members
        .iter()
        .find(|m| Some(m.id) == view.leader)
        .map(|m| m.peer.clone());
    let peers: Vec<String> = view.members.iter().map(|m| m.peer.clone()).collect();
    view.members
        .iter()
        .map(|m| {
            let address = m.http.clone().unwrap_or_default();
            let (ip, port) = address
                .rsplit_once(':')
                .map(|(h, p)| (h.to_string(), p.parse::<u16>().unwrap_or(0)))
                .unwrap_or_default();
            let mut raft_groups = BTreeMap::new();
            raft_groups.insert(
                "naming_persistent_service_v2",
                json!({ "leader": leader_peer, "raftGroupMember": peers, "term": view.term }),
            );
            let member = json!({
                "ip": ip,
                "port": port,
                "state": if m.live { "UP" } else { "DOWN" },
                "address": address,
                "extendInfo": {
                    "raftPort": m.peer.rsplit_once(':').map(|(_, p)| p.to_string()),
                    "raftMetaData": { "metaDataMap": raft_groups },
                    "version": m.version,
                    "roster": { "id": m.id, "role": m.role, "voter": m.voter },
                },
                "abilities": {},
                "failAccessCnt": 0,
            });
            (m, member)
        })
        .collect()
}
