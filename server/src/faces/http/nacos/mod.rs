//! Nacos Open API v1: the route table, and handlers by resource ([`instance`],
//! [`service`], [`catalog`], [`namespace`], [`auth`] (login, users), [`permissions`]
//! (roles, permissions), [`operator`], [`config`] and [`config_history`] (the
//! configuration API)). The wire shapes are shared with the other
//! faces (`roster_registry::wire`).

pub mod auth;
pub mod catalog;
pub mod config;
pub mod config_history;
pub mod config_zip;
pub mod instance;
pub mod namespace;
pub mod operator;
pub mod permissions;
pub mod service;

use axum::http::{Method, Uri};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use axum::Router;

use crate::error::Error;
use crate::state::AppState;

/// Every Nacos v1 route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/nacos/v1/ns/instance",
            post(instance::register)
                .delete(instance::deregister)
                .put(instance::update)
                .patch(instance::update)
                .get(instance::detail),
        )
        .route("/nacos/v1/ns/instance/list", get(instance::list))
        .route("/nacos/v1/ns/instance/beat", put(instance::beat))
        .route("/nacos/v1/ns/health/instance", put(instance::health))
        .route("/nacos/v1/ns/health", put(instance::health))
        .route(
            "/nacos/v1/ns/service",
            post(service::create)
                .delete(service::delete)
                .put(service::update)
                .get(service::detail),
        )
        .route("/nacos/v1/ns/service/list", get(service::list))
        .route(
            "/nacos/v1/ns/service/selector/types",
            get(service::selector_types),
        )
        .route(
            "/nacos/v1/ns/service/subscribers",
            get(service::subscribers),
        )
        .route("/nacos/v1/ns/cluster", put(service::put_cluster))
        .route("/nacos/v1/ns/catalog/services", get(catalog::services))
        .route("/nacos/v1/ns/catalog/service", get(catalog::service))
        .route("/nacos/v1/ns/catalog/instances", get(catalog::instances))
        .route("/nacos/v1/ns/operator/metrics", get(operator::metrics))
        .route(
            "/nacos/v1/cs/configs",
            get(config::get).post(config::post).delete(config::delete),
        )
        .route(
            "/nacos/v1/cs/configs/listener",
            post(config::listener).get(config::listeners),
        )
        .route("/nacos/v1/cs/history", get(config_history::get))
        .route(
            "/nacos/v1/cs/history/previous",
            get(config_history::previous),
        )
        .route("/nacos/v1/cs/history/configs", get(config_history::configs))
        .route("/nacos/v1/ns/operator/switches", get(operator::switches))
        .route(
            "/nacos/v1/console/namespaces",
            get(namespace::get)
                .post(namespace::create)
                .put(namespace::update)
                .delete(namespace::delete),
        )
        .route("/nacos/v1/auth/login", post(auth::login))
        .route("/nacos/v1/auth/users/login", post(auth::login))
        .route(
            "/nacos/v1/auth/users",
            get(auth::list_users)
                .post(auth::create_user)
                .put(auth::change_password)
                .delete(auth::delete_user),
        )
        .route(
            "/nacos/v1/auth/users/search",
            get(permissions::search_users),
        )
        .route(
            "/nacos/v1/auth/roles",
            get(permissions::list_roles)
                .post(permissions::add_role)
                .delete(permissions::delete_role),
        )
        .route(
            "/nacos/v1/auth/roles/search",
            get(permissions::search_roles),
        )
        .route(
            "/nacos/v1/auth/permissions",
            get(permissions::list_permissions)
                .post(permissions::add_permission)
                .delete(permissions::delete_permission),
        )
}

/// Answers paths no route serves, as Nacos words it.
pub async fn no_such_api(method: Method, uri: Uri) -> axum::response::Response {
    let mut response =
        Error::not_found(format!("no such api:{method}:{}", uri.path())).into_response();
    // Metrics count it under `unmatched`, not under a path anyone can invent.
    response
        .extensions_mut()
        .insert(crate::faces::http::Unmatched);
    response
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
