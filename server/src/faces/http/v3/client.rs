//! The v3 API for clients (`/nacos/v3/client/...`, see the table in `super`): register,
//! beat and deregister an instance, list a service's instances, read a configuration
//! item. The naming writes are v1's (`nacos::instance`); the answers are Nacos 3's, in
//! the `{code, message, data}` envelope.

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{json, Value};

use super::naming::{answer, done, host_list};
use super::{answer_not_served, V3};
use crate::error::Error;
use crate::faces::http::endpoint::Answer;
use crate::faces::http::nacos::config::{gray_tag_of, named_in, Source, NOT_FOUND};
use crate::faces::http::nacos::instance;
use crate::faces::http::nacos_v2_envelope::failure;
use crate::faces::http::params::Params;
use crate::services::configs::gray::{Client, Served, BETA};
use crate::services::naming::writes::BeatOutcome;
use crate::state::AppState;
use roster_registry::select::{select, Query};
use roster_registry::validate::{check_ip, parse_cluster_list};

/// Serves `op`, one of this area's operations.
pub(super) fn serve(op: V3, req: Request, state: AppState) -> Answer {
    match op {
        V3::ClientRegister => Handler::call(register, req, state),
        V3::ClientDeregister => Handler::call(deregister, req, state),
        V3::ClientList => Handler::call(list, req, state),
        V3::ClientConfigGet => Handler::call(config_get, req, state),
        _ => answer_not_served("not the client area's"),
    }
}

/// `POST /nacos/v3/client/ns/instance`: registers the instance (v1's registration), or
/// with `heartBeat=true` beats it: an instance this node's cluster does not know
/// answers 404 with code 21003, and the client registers again.
#[tracing::instrument(skip_all)]
async fn register(State(state): State<AppState>, params: Params) -> Response {
    match params.boolean("heartBeat") {
        Ok(Some(true)) => answer(beat(&state, &params).await),
        Ok(_) => done(instance::register(State(state), params).await),
        Err(e) => failure(e),
    }
}

/// A light beat for the instance `params` name.
async fn beat(state: &AppState, params: &Params) -> Result<Value, Error> {
    let key = params.service_key()?;
    let ip = check_ip("ip", params.required("ip")?)?;
    let port = params.port("port")?;
    let writes = state.writes();
    state.metrics.beats.inc();
    let grouped = key.grouped();
    if writes
        .beat_here(&key.namespace, &grouped, &ip, port)
        .is_some()
    {
        return Ok(Value::from("ok"));
    }
    match writes.beat(key, &ip, port, None).await? {
        BeatOutcome::Known(_) => Ok(Value::from("ok")),
        BeatOutcome::Unknown => Err(Error::instance_not_found(format!(
            "instance {ip}:{port} not found in service {grouped}: register it again"
        ))),
    }
}

/// `DELETE /nacos/v3/client/ns/instance`: v1's deregistration.
#[tracing::instrument(skip_all)]
async fn deregister(state: State<AppState>, params: Params) -> Response {
    done(instance::deregister(state, params).await)
}

/// `GET /nacos/v3/client/ns/instance/list`: the instances a consumer would use, as a
/// list of Nacos' `Instance`: enabled ones of the clusters in `clusterName`
/// (comma-separated; all when absent), healthy ones only with `healthyOnly=true`, after
/// the service's selector and protection threshold as in every instance query. An
/// unknown service has none.
async fn list(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let key = params.service_key()?;
        let clusters = parse_cluster_list(params.get("clusterName").unwrap_or(""))?;
        let healthy_only = params.boolean("healthyOnly")?.unwrap_or(false);
        let Some(service) = state.registry.service_by_key(&key) else {
            return Ok(json!([]));
        };
        let view = service.view();
        let query = Query {
            clusters: &clusters,
            healthy_only,
            selector: None,
            lanes: None,
        };
        let selection = select(&view, &query);
        let grouped = key.grouped();
        let hosts = selection
            .hosts
            .iter()
            .map(|i| (&**i, selection.reported_healthy(i)));
        Ok(host_list(hosts, &grouped))
    })())
}

/// `GET /nacos/v3/client/cs/config`: an item (`dataId`, `groupName`, `namespaceId`) as
/// Nacos' `ConfigQueryResponse`; 404 with code 20004 when there is none. roster keeps no
/// encrypted items and serves no beta or tag to this API: `encryptedDataKey` is null,
/// `beta` false, `tag` null.
async fn config_get(
    State(state): State<AppState>,
    Source(address): Source,
    headers: HeaderMap,
    params: Params,
) -> Response {
    answer((|| {
        params.required("groupName")?;
        let key = named_in(&params, "namespaceId", "groupName")?;
        let tag = gray_tag_of(&params, &headers)?;
        let client = Client {
            ip: &address,
            tag: tag.as_deref(),
        };
        state
            .configs
            .read_for(&key, &client)
            .map(|served| query_response(&served))
            .ok_or_else(|| Error::not_found(NOT_FOUND))
    })())
}

/// Nacos' `ConfigQueryResponse` of what a client reads (with the fields of its
/// `Response` base): `beta` when it is the item's beta, `tag` when a tag's version.
fn query_response(served: &Served) -> Value {
    let tag = served.gray.as_deref().and_then(|g| g.strip_prefix("tag_"));
    json!({
        "resultCode": 200,
        "errorCode": 0,
        "message": null,
        "requestId": null,
        "success": true,
        "content": &*served.content,
        "md5": served.md5,
        "contentType": served.r#type,
        "encryptedDataKey": null,
        "lastModified": served.modified_ms,
        "beta": served.gray.as_deref() == Some(BETA),
        "tag": tag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_response_carries_content_md5_and_type() {
        let item = Served {
            content: "a=1".into(),
            md5: "abc".into(),
            r#type: "properties".into(),
            modified_ms: 42,
            gray: None,
        };
        let v = query_response(&item);
        assert_eq!(v["content"], "a=1");
        assert_eq!(v["md5"], "abc");
        assert_eq!(v["contentType"], "properties");
        assert_eq!(v["lastModified"], 42);
        assert_eq!(v["resultCode"], 200);
        assert_eq!(v["beta"], false);
        assert!(v["encryptedDataKey"].is_null());
        let beta = query_response(&Served {
            gray: Some("beta".into()),
            ..item.clone()
        });
        assert_eq!((&beta["beta"], &beta["tag"]), (&json!(true), &Value::Null));
        let tagged = query_response(&Served {
            gray: Some("tag_canary".into()),
            ..item
        });
        assert_eq!(
            (&tagged["beta"], &tagged["tag"]),
            (&json!(false), &json!("canary"))
        );
    }
}
