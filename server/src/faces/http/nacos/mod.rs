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
/// Nacos' `Page` of `total` items, `items` being page `page_no` of them:
/// `{totalCount, pageNumber, pagesAvailable, pageItems}`.
pub fn page_of<T: serde::Serialize>(
    total: usize,
    page_no: usize,
    page_size: usize,
    items: Vec<T>,
) -> serde_json::Value {
    serde_json::json!({
        "totalCount": total,
        "pageNumber": page_no,
        "pagesAvailable": total.div_ceil(page_size),
        "pageItems": items,
    })
}

/// [`page_of`] page `page_no` of all of `items`.
pub fn page_json<T: serde::Serialize>(
    items: Vec<T>,
    page_no: usize,
    page_size: usize,
) -> serde_json::Value {
    let total = items.len();
    page_of(
        total,
        page_no,
        page_size,
        roster_registry::wire::page(items, page_no, page_size),
    )
}

pub fn json_of<T: serde::Serialize>(value: &T) -> axum::response::Response {
    json(serde_json::to_vec(value).expect("response serializes"))
}

/// `{"code":200,"message":null,"data":...}`, the envelope of Nacos' console APIs.
pub fn envelope<T: serde::Serialize>(data: T) -> axum::response::Response {
    json_of(&serde_json::json!({ "code": 200, "message": null, "data": data }))
}
