//! Nacos Open API v2 for configuration (`/nacos/v2/cs/config`): the v1 operations of
//! `nacos::config` behind the `{code, message, data}` envelope, the namespace named by
//! `namespaceId`. A missing item is a 404 with code 20004 and `data` "config data not
//! exist"; a compare-and-set that finds another md5 a 409 with code 20005.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use super::guard::Caller;
use super::nacos::config::{self, gray_tag_of, named, Source, NOT_FOUND};
use super::nacos_v2_envelope::{failure, success};
use super::params::Params;
use crate::error::Error;
use crate::services::configs::gray::Client;
use crate::state::AppState;

/// The parameter that names the namespace in v2.
const NAMESPACE: &str = "namespaceId";

/// `data` on success, the v2 failure otherwise.
fn answer(result: Result<Value, Error>) -> Response {
    match result {
        Ok(data) => success(data),
        Err(e) => failure(e),
    }
}

/// `GET`: the content of `dataId` in `group` of `namespaceId` as the caller's client
/// reads it (a gray version it matches by its address, `tag` or `Vipserver-Tag`, else
/// the formal content); with `consistent=true`, as of the leader's commit when the call
/// came (a read barrier first).
pub(super) async fn get_config(
    State(state): State<AppState>,
    Source(address): Source,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let consistent = match params.consistent() {
        Ok(consistent) => consistent,
        Err(e) => return failure(e),
    };
    if consistent {
        if let Err(e) = state.store.read_barrier().await {
            return failure(e.into());
        }
    }
    answer(named(&params, NAMESPACE).and_then(|key| {
        let tag = gray_tag_of(&params, &headers)?;
        let client = Client {
            ip: &address,
            tag: tag.as_deref(),
        };
        let served = state
            .configs
            .read_for(&key, &client)
            .ok_or_else(|| Error::not_found(NOT_FOUND))?;
        Ok(Value::from(&*served.content))
    }))
}

/// `POST`: publishes (`content`, `type`, `appName`, `desc`, `configTags`, `casMd5`);
/// `data` true.
#[tracing::instrument(skip_all)]
pub(super) async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let published = config::publish(&state, &caller, &source, &params, &headers, NAMESPACE).await;
    answer(published.map(|()| Value::Bool(true)))
}

/// `DELETE`: removes; `data` true.
#[tracing::instrument(skip_all)]
pub(super) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
) -> Response {
    let removed = config::remove(&state, &caller, &source, &params, NAMESPACE).await;
    answer(removed.map(|()| Value::Bool(true)))
}
