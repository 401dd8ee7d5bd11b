//! The v3 API: core (`/nacos/v3/admin/core/...`): namespaces, the cluster's members,
//! the node's state and probes, and the gRPC connections of this node (Nacos' "loader":
//! listing them, moving clients to other nodes with `ConnectResetRequest`, and asking
//! every member for a round of connection balancing).
//!
//! roster's membership is Raft's and its operations are roster's own, so what Nacos
//! changes there (member lists, lookup modes, its Raft groups, id generators, log
//! levels) answers 501 saying what to use instead.

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::auth::from_v1;
use super::{answer_not_served, V3};
use crate::error::{Error, ErrorKind};
use crate::faces::http::cluster::nacos_members;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::namespace;
use crate::faces::http::nacos_v2_envelope::{failure, success};
use crate::faces::http::params::Params;
use crate::services::push::balance;
use crate::services::push::connections::ConnectionView;
use crate::state::AppState;
use roster_registry::namespace::{NamespaceInfo, PUBLIC_NAMESPACE};
use roster_registry::validate::{check_ip, check_namespace_id, parse_port};

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::NamespaceList => Handler::call(namespace_list, req, state),
        V3::NamespaceGet => Handler::call(namespace_get, req, state),
        V3::NamespaceCreate => Handler::call(namespace_create, req, state),
        V3::NamespaceUpdate => Handler::call(namespace_update, req, state),
        V3::NamespaceDelete => Handler::call(namespace_delete, req, state),
        V3::NamespaceCheck => Handler::call(namespace_check, req, state),
        V3::ClusterNodes => Handler::call(cluster_nodes, req, state),
        V3::ClusterSelf => Handler::call(cluster_self, req, state),
        V3::ClusterNodesUpdate => answer_not_served(
            "roster's members are Raft's: add and remove them with `roster cluster add/remove` \
             or POST/DELETE /api/v1/cluster/members; liveness is measured, not set",
        ),
        V3::ClusterLookup => answer_not_served(
            "roster has one lookup: the Raft membership (--members, --join); change it with \
             `roster cluster add/remove` or /api/v1/cluster/members",
        ),
        V3::State => Handler::call(server_state, req, state),
        V3::Liveness => Handler::call(liveness, req, state),
        V3::Readiness => Handler::call(readiness, req, state),
        V3::OpsRaft => answer_not_served(
            "roster runs one Raft group of its own; its leader and members are in \
             GET /api/v1/cluster, its membership changes through /api/v1/cluster/members",
        ),
        V3::OpsIds => answer_not_served("roster has no id generators: ids are not sequences"),
        V3::OpsLog => answer_not_served("log levels are set with RUST_LOG / --log at start"),
        V3::LoaderCurrent => Handler::call(loader_current, req, state),
        V3::LoaderCluster => Handler::call(loader_cluster, req, state),
        V3::LoaderReloadCurrent => Handler::call(loader_reload_current, req, state),
        V3::LoaderReloadClient => Handler::call(loader_reload_client, req, state),
        V3::LoaderSmartReload => Handler::call(loader_smart_reload, req, state),
        _ => answer_not_served("not this area's"),
    }
}

/// `data` on success, the v3 failure otherwise.
fn answer(result: Result<Value, Error>) -> Response {
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// `GET .../namespace/list`: the namespaces the caller may read something of.
async fn namespace_list(State(state): State<AppState>, caller: Caller) -> Response {
    let rows: Vec<Value> = state
        .registry
        .namespaces()
        .iter()
        .filter(|n| caller.may_read_namespace(&state, &n.id))
        .map(|n| namespace::row(&state, n))
        .collect();
    success(Value::Array(rows))
}

/// The namespace id `namespaceId` names, checked (required).
fn namespace_id(params: &Params) -> Result<&str, Error> {
    let id = params.required("namespaceId")?;
    check_namespace_id("namespaceId", id)?;
    Ok(id)
}

/// Whether namespace `id` exists (`public` always does).
fn namespace_exists(state: &AppState, id: &str) -> bool {
    id == PUBLIC_NAMESPACE
        || state
            .registry
            .namespace(id)
            .is_some_and(|n| n.info().is_some())
}

/// `GET .../namespace?namespaceId=`: one namespace.
async fn namespace_get(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let id = namespace_id(&params)?;
        let ns = state
            .registry
            .namespace(id)
            .filter(|_| namespace_exists(&state, id))
            .ok_or_else(|| Error::not_found(format!("namespaceId [{id}] not exist")))?;
        Ok(namespace::row(&state, &ns))
    })())
}

/// `POST .../namespace` (`namespaceId`, empty or absent for a random one;
/// `namespaceName`, `namespaceDesc`): `true`.
async fn namespace_create(State(state): State<AppState>, params: Params) -> Response {
    let info = (|| {
        let id = match params.optional("namespaceId") {
            Some(id) => {
                check_namespace_id("namespaceId", id)?;
                id.to_string()
            }
            None => namespace::random_id(),
        };
        Ok::<_, Error>(NamespaceInfo {
            id,
            name: namespace::name(&params, "namespaceName")?,
            description: namespace::description(&params, "namespaceDesc")?,
        })
    })();
    let created = match info {
        Ok(info) => state.writes().create_namespace(info).await,
        Err(e) => Err(e),
    };
    answer(created.map(|()| Value::Bool(true)))
}

/// `PUT .../namespace` (`namespaceId`, `namespaceName`, `namespaceDesc`): `true`.
async fn namespace_update(State(state): State<AppState>, params: Params) -> Response {
    let info = (|| {
        let id = namespace_id(&params)?;
        if id == PUBLIC_NAMESPACE {
            return Err(Error::illegal(
                "namespaceId",
                "the public namespace cannot be changed.",
            ));
        }
        Ok(NamespaceInfo {
            id: id.to_string(),
            name: namespace::name(&params, "namespaceName")?,
            description: namespace::description(&params, "namespaceDesc")?,
        })
    })();
    let updated = match info {
        Ok(info) => state.writes().update_namespace(info).await,
        Err(e) => Err(e),
    };
    answer(updated.map(|()| Value::Bool(true)))
}

/// `DELETE .../namespace?namespaceId=`: deletes an empty namespace; `true`.
async fn namespace_delete(state: State<AppState>, caller: Caller, params: Params) -> Response {
    from_v1(namespace::delete(state, caller, params).await).await
}

/// `GET .../namespace/check?namespaceId=`: 1 when the id is taken, else 0.
async fn namespace_check(State(state): State<AppState>, params: Params) -> Response {
    answer(namespace_id(&params).map(|id| json!(u8::from(namespace_exists(&state, id)))))
}

/// Nacos' member states.
const NODE_STATES: [&str; 5] = ["STARTING", "UP", "SUSPICIOUS", "DOWN", "ISOLATION"];

/// `GET .../cluster/node/list` (`address`: a prefix; `state`: one of Nacos' states):
/// the members in Nacos' `Member` shape; roster's are `UP` or `DOWN`.
async fn cluster_nodes(State(state): State<AppState>, params: Params) -> Response {
    let wanted = match params.optional("state") {
        None => None,
        Some(s) => match NODE_STATES.iter().find(|n| n.eq_ignore_ascii_case(s)) {
            Some(n) => Some(*n),
            None => {
                return failure(Error::illegal(
                    "state",
                    format!("'{s}' is not one of {}.", NODE_STATES.join(", ")),
                ))
            }
        },
    };
    let prefix = params.optional("address").unwrap_or("");
    let view = state.cluster_view_with_leader().await;
    let nodes: Vec<Value> = nacos_members(&view)
        .into_iter()
        .map(|(_, member)| member)
        .filter(|m| m["address"].as_str().unwrap_or("").starts_with(prefix))
        .filter(|m| wanted.is_none_or(|w| m["state"] == w))
        .collect();
    success(Value::Array(nodes))
}

/// `GET .../cluster/node/self`: this member.
async fn cluster_self(State(state): State<AppState>) -> Response {
    let view = state.cluster_view_with_leader().await;
    let me = nacos_members(&view)
        .into_iter()
        .find(|(m, _)| m.id == view.node_id)
        .map(|(_, member)| member);
    answer(me.ok_or_else(|| {
        // A node removed from the cluster no longer finds itself among the members.
        Error::not_found("this node is not a member of the cluster")
    }))
}

/// `GET .../state`: the node's state as Nacos' modules report theirs, every value a
/// string (or null).
async fn server_state(State(state): State<AppState>) -> Response {
    let me = state.members.me();
    let standalone = state.members.peers().is_empty();
    let auth = state.auth.enabled();
    let port = me.http_addr.rsplit_once(':').map(|(_, p)| p.to_string());
    let mut map = Map::new();
    let mut put = |key: &str, value: Option<String>| {
        map.insert(key.into(), value.map_or(Value::Null, Value::String));
    };
    put("version", Some(me.version.clone()));
    put("roster_version", Some(me.version.clone()));
    let mode = if standalone { "standalone" } else { "cluster" };
    put("startup_mode", Some(mode.into()));
    put("standalone_mode", Some(mode.into()));
    // Naming and configuration both: Nacos' null.
    put("function_mode", None);
    put("server_port", port);
    put("auth_enabled", Some(auth.to_string()));
    put("auth_system_type", Some("nacos".into()));
    // The admin exists from bootstrap: nobody is asked to create one.
    put("auth_admin_request", Some("false".into()));
    put("login_page_enabled", Some(auth.to_string()));
    put("console_ui_enabled", Some("true".into()));
    put("datasource_platform", Some(String::new()));
    success(Value::Object(map))
}

/// `GET .../state/liveness`: `ok` while the node serves HTTP.
async fn liveness() -> Response {
    success(json!("ok"))
}

/// `GET .../state/readiness` (and `.../ops/readiness`): `ok` once the node is ready;
/// 500 with the reason before, and once it was removed from the cluster, as Nacos
/// answers a module not ready.
async fn readiness(State(state): State<AppState>) -> Response {
    match state.ready.refusal("starting") {
        None => success(json!("ok")),
        Some(why) => failure(Error::new(ErrorKind::Internal, why)),
    }
}

/// A connection in the shape of Nacos' `Connection` (its `metaInfo` with the client's
/// own account of itself).
fn connection_json(c: &ConnectionView) -> Value {
    let labels: Map<String, Value> = c
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "traced": false,
        "connected": true,
        "labels": labels,
        "metaInfo": {
            "connectionId": c.id,
            "connectType": "GRPC",
            "clientIp": c.ip(),
            "remoteIp": c.remote_ip,
            "remotePort": c.remote_port,
            "version": c.version,
            "appName": c.app_name(),
            "namespaceId": c.tenant,
            "labels": labels,
            "createTime": c.created_ms,
            "lastActiveTime": c.last_active_ms,
            "sdkSource": true,
            "clusterSource": false,
        },
    })
}

/// `GET .../loader/current`: this node's gRPC connections, by id.
async fn loader_current(State(state): State<AppState>) -> Response {
    let all: Map<String, Value> = state
        .grpc_connections
        .connections()
        .iter()
        .map(|c| (c.id.clone(), connection_json(c)))
        .collect();
    success(Value::Object(all))
}

/// `GET .../loader/cluster`: the connection counts per member, as Nacos'
/// `ServerLoaderMetrics`: this node's counted now, the others' as their last hellos told
/// them (`completed` is false while a member has not told its count).
async fn loader_cluster(State(state): State<AppState>) -> Response {
    let count = state.grpc_connections.count();
    let members = state.members.peers();
    let mut details = vec![(
        json!({
            "address": state.members.me().http_addr,
            "sdkConCount": count,
            "conCount": count,
            "load": load_average(),
            "cpu": null,
        }),
        count,
    )];
    for peer in members.values() {
        let (Some(load), Some(address)) = (peer.load, &peer.http_addr) else {
            continue;
        };
        let count = load.grpc_clients as usize;
        details.push((
            json!({
                "address": address,
                "sdkConCount": count,
                "conCount": count,
                "load": null,
                "cpu": null,
            }),
            count,
        ));
    }
    success(loader_metrics(details, members.len() + 1))
}

/// `POST .../loader/smartReloadCluster?loaderFactor=0.1`: one round of connection
/// balancing now on every live member, with the factor as the tolerance (Nacos' default
/// 0.1; its maintainer client sends `loaderFactorStr`). Each member moves only its
/// excess over the mean, only connections over a minute old, a batch at most.
async fn loader_smart_reload(State(state): State<AppState>, params: Params) -> Response {
    let factor = params
        .optional("loaderFactor")
        .or_else(|| params.optional("loaderFactorStr"))
        .map(|raw| {
            raw.trim_end_matches(['f', 'F'])
                .parse::<f64>()
                .ok()
                .filter(|f| (0.0..=1.0).contains(f))
                .ok_or_else(|| {
                    Error::illegal(
                        "loaderFactor",
                        format!("'{raw}' is not a number from 0 to 1."),
                    )
                })
        })
        .transpose();
    let factor = match factor {
        Ok(f) => f.unwrap_or(balance::TOLERANCE),
        Err(e) => return answer(Err(e)),
    };
    let missed = state
        .balance
        .request_cluster(&state.members, &state.peers, factor)
        .await;
    if !missed.is_empty() {
        return answer(Err(Error::unavailable(format!(
            "Smart reload failed, please try again later: members {missed:?} did not answer"
        ))));
    }
    tracing::info!(factor, "connection balancing asked of every member");
    success(json!("ok"))
}

/// `ServerLoaderMetrics` from each answering node's metric and count.
fn loader_metrics(details: Vec<(Value, usize)>, member_count: usize) -> Value {
    let counts: Vec<usize> = details.iter().map(|(_, n)| *n).collect();
    let total: usize = counts.iter().sum();
    let avg = total / counts.len().max(1);
    json!({
        "detail": details.into_iter().map(|(d, _)| d).collect::<Vec<_>>(),
        "memberCount": member_count,
        "metricsCount": counts.len(),
        "completed": counts.len() == member_count,
        "max": counts.iter().max().copied().unwrap_or(0),
        "min": counts.iter().min().copied().unwrap_or(0),
        "avg": avg,
        // Nacos' threshold: 10% above the average.
        "threshold": format!("{:.1}", avg as f64 * 1.1),
        "total": total,
    })
}

/// The one-minute load average, where the system tells it (Nacos' `load`).
fn load_average() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/loadavg").ok()?;
    raw.split_whitespace().next().map(str::to_string)
}

/// `redirectAddress` (`ip:port`), checked, as a reset request carries it.
fn redirect(params: &Params) -> Result<Option<(&str, &str)>, Error> {
    let Some(raw) = params.optional("redirectAddress") else {
        return Ok(None);
    };
    let bad = || Error::illegal("redirectAddress", format!("'{raw}' should be IP:PORT."));
    let (ip, port) = raw.rsplit_once(':').ok_or_else(bad)?;
    check_ip("redirectAddress", ip)?;
    parse_port("redirectAddress", port)?;
    Ok(Some((ip, port)))
}

/// `POST .../loader/reloadCurrent?count=N[&redirectAddress=ip:port]`: asks the clients
/// of all but `count` of this node's connections to reconnect (to `redirectAddress`, or
/// to a node of their choosing); the newest connections move first.
async fn loader_reload_current(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let raw = params.required("count")?;
        let keep: usize = raw.parse().map_err(|_| {
            Error::illegal("count", format!("'{raw}' is not a non-negative integer."))
        })?;
        let target = redirect(&params)?;
        // Ids and set-up times only: no connection's view is built for this.
        let mut all = state.grpc_connections.created();
        // The oldest connections stay; the newest are asked to move.
        all.sort_unstable_by(|(a, at), (b, bt)| (at, a).cmp(&(bt, b)));
        let mut asked = 0;
        for (id, _) in all.iter().skip(keep) {
            if state.grpc_connections.reset(id, target) {
                asked += 1;
            }
        }
        tracing::info!(
            kept = keep,
            asked,
            "grpc clients asked to reconnect elsewhere"
        );
        Ok(json!(format!("{asked} connections asked to reconnect")))
    })())
}

/// `POST .../loader/reloadClient?connectionId=...[&redirectAddress=ip:port]`: asks one
/// connection's client to reconnect.
async fn loader_reload_client(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let id = params.required("connectionId")?;
        let target = redirect(&params)?;
        if !state.grpc_connections.reset(id, target) {
            return Err(Error::not_found(format!(
                "connectionId [{id}] is not a connection of this node"
            )));
        }
        Ok(json!(format!("connection {id} asked to reconnect")))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_metrics_sum_the_answers_and_say_whether_every_member_answered() {
        let metrics = loader_metrics(vec![(json!({ "address": "a" }), 4)], 3);
        assert_eq!(metrics["total"], 4);
        assert_eq!(metrics["max"], 4);
        assert_eq!(metrics["min"], 4);
        assert_eq!(metrics["avg"], 4);
        assert_eq!(metrics["threshold"], "4.4");
        assert_eq!(metrics["metricsCount"], 1);
        assert_eq!(metrics["completed"], false);
        let two = loader_metrics(vec![(json!({}), 1), (json!({}), 6)], 2);
        assert_eq!(two["avg"], 3);
        assert_eq!(two["min"], 1);
        assert_eq!(two["completed"], true);
    }

    #[test]
    fn a_redirect_is_an_address_and_its_port() {
        let of = |q: &str| Params::parse(Some(q), None).unwrap();
        assert_eq!(redirect(&of("")).unwrap(), None);
        assert_eq!(
            redirect(&of("redirectAddress=127.0.0.1:8848")).unwrap(),
            Some(("127.0.0.1", "8848"))
        );
        for bad in ["redirectAddress=127.0.0.1", "redirectAddress=127.0.0.1:x"] {
            let e = redirect(&of(bad)).unwrap_err();
            assert!(e.message.contains("redirectAddress"), "{}", e.message);
        }
    }

    #[test]
    fn a_connection_shows_its_own_address_and_app() {
        let c = ConnectionView {
            id: "1_10.0.0.1_5000".into(),
            remote_ip: "10.0.0.1".into(),
            remote_port: 5000,
            client_ip: "192.168.0.7".into(),
            labels: vec![("AppName".into(), "shop".into())],
            ..Default::default()
        };
        let json = connection_json(&c);
        assert_eq!(json["metaInfo"]["clientIp"], "192.168.0.7");
        assert_eq!(json["metaInfo"]["remotePort"], 5000);
        assert_eq!(json["metaInfo"]["appName"], "shop");
        assert_eq!(json["labels"]["AppName"], "shop");
    }
}
