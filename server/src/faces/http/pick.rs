//! roster's selection API. `GET /api/v1/pick`: one healthy instance of a service, for clients that cannot
//! balance themselves — by weighted random, smooth weighted round-robin or consistent
//! hash on a key, after the same clusters, selector and lanes as a list query.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use super::nacos::json_of;
use super::params::Params;
use crate::error::Error;
use crate::state::AppState;
use roster_registry::balance::{consistent_hash, weighted_random, Strategy};
use roster_registry::select::{select, Query};
use roster_registry::validate::parse_cluster_list;
use roster_registry::wire::Host;

/// `GET /api/v1/instances`: the instances of a service after `clusters`, `selector`,
/// `lanes` and `healthyOnly`, in Nacos' `ServiceInfo` shape.
pub(super) async fn instances(
    State(state): State<AppState>,
    params: Params,
) -> Result<Response, Error> {
    let listed = super::nacos::instance::query(&state, &params, "clusters").await?;
    Ok(super::nacos::json(listed.body))
}

#[derive(Serialize)]
struct Picked<'a> {
    #[serde(flatten)]
    host: Host<'a>,
    /// The lane that served, when lanes were asked for (absent: the base lane).
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<String>,
}

pub(super) async fn pick(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    let clusters_raw = params.get("clusters").unwrap_or("");
    let clusters = parse_cluster_list(clusters_raw)?;
    let selector = params.selector()?;
    let lanes = params.lanes();
    let strategy = match params.optional("strategy") {
        None => Strategy::WeightedRandom,
        Some(s) => Strategy::parse(s).ok_or_else(|| {
            Error::illegal(
                "strategy",
                format!("'{s}' is not one of random, round-robin, hash."),
            )
        })?,
    };
    let hash_key = match strategy {
        Strategy::Hash => Some(params.required("key")?),
        _ => None,
    };
    let grouped = key.grouped();
    let none = || Error::not_found(format!("no healthy instance of service {grouped} matches"));
    let svc = state.registry.service_by_key(&key).ok_or_else(none)?;
    let view = svc.view();
    let selection = select(
        &view,
        &Query {
            clusters: &clusters,
            healthy_only: true,
            selector: selector.as_ref(),
            lanes: lanes.as_deref(),
        },
    );
    let picked = match (strategy, hash_key) {
        (Strategy::Hash, Some(k)) => consistent_hash(&selection.hosts, k),
        (Strategy::RoundRobin, _) => {
            let id = format!(
                "{key}|{clusters_raw}|{}|{}",
                params.get("selector").unwrap_or(""),
                params.get("lanes").unwrap_or("\u{0}")
            );
            state.balancers.next(id, &selection.hosts)
        }
        _ => weighted_random(&selection.hosts, rand::random::<f64>()),
    }
    .ok_or_else(none)?;
    Ok(json_of(&Picked {
        host: Host::new(&picked, &grouped, selection.reported_healthy(&picked)),
        lane: selection.lane.clone(),
    }))
}
