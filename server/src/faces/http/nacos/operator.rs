//! `/nacos/v1/ns/operator/*`: the status probe clients use and the (read-only) switches.

use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::json;

use super::json_of;
use crate::error::Error;
use crate::faces::http::params::Params;
use crate::services::auth::Identity;
use crate::state::AppState;
use roster_registry::namespace::PUBLIC_NAMESPACE;

/// `GET /nacos/v1/ns/operator/metrics`: `{"status":"UP"}` (open, clients probe it);
/// with `onlyStatus=false`, counts too (authenticated).
pub async fn metrics(
    State(state): State<AppState>,
    params: Params,
    req: Request,
) -> Result<Response, Error> {
    if params.boolean("onlyStatus")?.unwrap_or(true) {
        return Ok(json_of(&json!({ "status": "UP" })));
    }
    // The path is open for the status probe; the counts need a caller.
    if state.auth.enabled() && req.extensions().get::<Identity>().is_none() {
        return Err(crate::services::auth::AuthError::Missing.into());
    }
    let (services, instances, healthy) = state.registry.totals();
    Ok(json_of(&json!({
        "status": "UP",
        "serviceCount": services,
        "instanceCount": instances,
        "healthyInstanceCount": healthy,
        "subscribeCount": state.push.subscriber_count(),
        "responsibleInstanceCount": instances,
    })))
}

/// `GET /nacos/v1/ns/operator/switches`: the settings clients and tools read, in Nacos'
/// shape, reflecting what roster does.
pub async fn switches(State(state): State<AppState>) -> Response {
    json_of(&switch_domain(&state))
}

/// The switches as v1 and v2 answer them (v3 renames a few, `faces::http::v3::naming`).
pub(crate) fn switch_domain(state: &AppState) -> serde_json::Value {
    json!({
        "name": "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00",
        "masters": null,
        "adWeightMap": {},
        "defaultPushCacheMillis": roster_registry::wire::CACHE_MILLIS,
        "clientBeatInterval": 5000,
        "defaultCacheMillis": 3000,
        "distroThreshold": 0.7,
        "healthCheckEnabled": true,
        "autoChangeHealthCheckEnabled": true,
        "distroEnabled": true,
        "enableStandalone": true,
        "pushEnabled": true,
        "checkTimes": 3,
        "httpHealthParams": { "max": 5000, "min": 500, "factor": 0.85 },
        "tcpHealthParams": { "max": 5000, "min": 1000, "factor": 0.75 },
        "mysqlHealthParams": { "max": 3000, "min": 2000, "factor": 0.65 },
        "incrementalList": [],
        "serverStatusSynchronizationPeriodMillis": 2000,
        "serviceStatusSynchronizationPeriodMillis": 5000,
        "disableAddIP": false,
        "sendBeatOnly": false,
        "lightBeatEnabled": true,
        "limitedUrlMap": {},
        "distroServerExpiredMillis": 10000,
        "pushGoVersion": "0.1.0",
        "pushJavaVersion": "0.1.0",
        "pushPythonVersion": "0.4.3",
        "pushCVersion": "1.0.12",
        "pushCSharpVersion": "0.9.0",
        "enableAuthentication": state.auth.enabled(),
        "overriddenServerStatus": null,
        "defaultInstanceEphemeral": true,
        "healthCheckWhiteList": [],
        "checksum": null,
        "defaultNamespace": PUBLIC_NAMESPACE,
    })
}
