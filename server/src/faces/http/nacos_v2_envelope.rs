//! The Nacos Open API v2 envelope, `{code, message, data}`: [`success`] and [`failure`].
//! Apart from the routes (`nacos_v2`, `nacos_v2_config`), the guard answers its v2
//! refusals in it, so this module imports nothing from the protocol faces: the guard
//! importing the v2 routes closed an import circle through the v1 handlers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::Error;

/// `{"code":0,"message":"success","data":...}`.
pub(crate) fn success(data: Value) -> Response {
    Json(json!({ "code": 0, "message": "success", "data": data })).into_response()
}

/// The v2 shape of a v1 error: same status, `{code, message, data: <detail>}`.
pub(crate) fn failure(e: Error) -> Response {
    let (code, message) = e.v2_code();
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        Json(json!({ "code": code, "message": message, "data": e.message })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_the_v1_status_in_a_json_body() {
        let e = Error::missing("serviceName");
        let status = e.http_status();
        let response = failure(e);
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(
            response.headers()[axum::http::header::CONTENT_TYPE],
            "application/json"
        );
    }
}
