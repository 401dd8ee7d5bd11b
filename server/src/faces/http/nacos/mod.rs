//! Nacos Open API v1: handlers by resource ([`instance`], [`service`], [`catalog`],
//! [`namespace`], [`auth`] (login, users), [`permissions`] (roles, permissions),
//! [`operator`], [`config`] and [`config_history`] (the configuration API)); their
//! routes are the endpoint table's (`faces::http::endpoint`). The wire shapes are
//! shared with the other faces (`roster_registry::wire`).

pub mod auth;
pub mod catalog;
pub mod config;
pub mod config_gray;
pub mod config_history;
pub mod config_zip;
pub mod instance;
pub mod namespace;
pub mod operator;
pub mod permissions;
pub mod service;

use axum::http::{Method, Uri};
use axum::response::IntoResponse;

use crate::error::Error;

/// Answers paths no route serves, as Nacos words it (the metrics count them under
/// `unmatched`, not under a path anyone can invent).
pub async fn no_such_api(method: Method, uri: Uri) -> axum::response::Response {
    Error::not_found(format!("no such api:{method}:{}", uri.path())).into_response()
}

/// A JSON response with the right content type.
pub fn json(body: impl Into<axum::body::Body>) -> axum::response::Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body.into(),
    )
        .into_response()
}

/// Serializes `value` as a JSON response.
pub fn json_of<T: serde::Serialize>(value: &T) -> axum::response::Response {
    json(serde_json::to_vec(value).expect("response serializes"))
}

/// `{"code":200,"message":null,"data":...}`, the envelope of Nacos' console APIs.
pub fn envelope<T: serde::Serialize>(data: T) -> axum::response::Response {
    json_of(&serde_json::json!({ "code": 200, "message": null, "data": data }))
}
