//! Each endpoint's handler ([`Endpoint::serve`]), called with the request as axum's
//! router called it, and what the router did to every answer ([`finish`]).

use std::future::Future;
use std::pin::Pin;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::super::guard::Caller;
use super::super::nacos::{auth, catalog, config, config_history, instance, namespace, operator};
use super::super::nacos::{permissions, service};
use super::super::{
    audit, clients, cluster, events, nacos, nacos_v2, nacos_v2_config, ops, overview, pick,
};
use super::super::{prometheus, signing_key, snapshot, sync, tokens};
use super::Endpoint;
use crate::state::AppState;

/// The answer of a routed handler, before [`finish`].
pub type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

impl Endpoint {
    /// Its handler, called with the request (its parameters and caller in its
    /// extensions). Answers as axum's router did once [`finish`]ed.
    pub fn serve(self, req: Request, state: AppState) -> Answer {
        use Endpoint as E;
        match self {
            E::Live => Handler::call(ops::live, req, state),
            E::Ready => Handler::call(ops::ready, req, state),
            E::Metrics => Handler::call(ops::metrics, req, state),
            E::PrometheusSd(scope) => {
                let targets = move |s: State<AppState>, c: Caller| prometheus::targets(s, c, scope);
                Handler::call(targets, req, state)
            }
            E::InstanceRegister => Handler::call(instance::register, req, state),
            E::InstanceDeregister => Handler::call(instance::deregister, req, state),
            E::InstanceUpdate => Handler::call(instance::update, req, state),
            E::InstanceDetail => Handler::call(instance::detail, req, state),
            E::InstanceList => Handler::call(instance::list, req, state),
            E::InstanceBeat | E::V2InstanceBeat => Handler::call(instance::beat, req, state),
            E::InstanceHealth | E::Health => Handler::call(instance::health, req, state),
            E::ServiceCreate => Handler::call(service::create, req, state),
            E::ServiceDelete => Handler::call(service::delete, req, state),
            E::ServiceUpdate => Handler::call(service::update, req, state),
            E::ServiceDetail => Handler::call(service::detail, req, state),
            E::ServiceList => Handler::call(service::list, req, state),
            E::SelectorTypes => Handler::call(service::selector_types, req, state),
            E::Subscribers => Handler::call(service::subscribers, req, state),
            E::NamingCluster => Handler::call(service::put_cluster, req, state),
            E::CatalogServices => Handler::call(catalog::services, req, state),
            E::CatalogService => Handler::call(catalog::service, req, state),
            E::CatalogInstances => Handler::call(catalog::instances, req, state),
            E::OperatorMetrics => Handler::call(operator::metrics, req, state),
            E::OperatorSwitches => Handler::call(operator::switches, req, state),
            E::ConfigGet | E::ConfigSearch | E::ConfigExport => {
                Handler::call(config::get, req, state)
            }
            E::ConfigPublish | E::ConfigImport => Handler::call(config::post, req, state),
            E::ConfigDelete => Handler::call(config::delete, req, state),
            E::ConfigListen => Handler::call(config::listener, req, state),
            E::ConfigListeners => Handler::call(config::listeners, req, state),
            E::History => Handler::call(config_history::get, req, state),
            E::HistoryPrevious => Handler::call(config_history::previous, req, state),
            E::HistoryConfigs => Handler::call(config_history::configs, req, state),
            E::NamespaceList | E::NamespaceShow | E::NamespaceCheck => {
                Handler::call(namespace::get, req, state)
            }
            E::NamespaceCreate => Handler::call(namespace::create, req, state),
            E::NamespaceUpdate => Handler::call(namespace::update, req, state),
            E::NamespaceDelete => Handler::call(namespace::delete, req, state),
            E::Login | E::UsersLogin => Handler::call(auth::login, req, state),
            E::UserList => Handler::call(auth::list_users, req, state),
            E::UserCreate => Handler::call(auth::create_user, req, state),
            E::UserPassword => Handler::call(auth::change_password, req, state),
            E::UserDelete => Handler::call(auth::delete_user, req, state),
            E::UserSearch => Handler::call(permissions::search_users, req, state),
            E::RoleList => Handler::call(permissions::list_roles, req, state),
            E::RoleAdd => Handler::call(permissions::add_role, req, state),
            E::RoleDelete => Handler::call(permissions::delete_role, req, state),
            E::RoleSearch => Handler::call(permissions::search_roles, req, state),
            E::PermissionList => Handler::call(permissions::list_permissions, req, state),
            E::PermissionAdd => Handler::call(permissions::add_permission, req, state),
            E::PermissionDelete => Handler::call(permissions::delete_permission, req, state),
            E::CoreClusterNodes => Handler::call(cluster::nacos_nodes, req, state),
            E::V2InstanceDetail => Handler::call(nacos_v2::instance_detail, req, state),
            E::V2InstanceRegister => Handler::call(nacos_v2::register, req, state),
            E::V2InstanceDeregister => Handler::call(nacos_v2::deregister, req, state),
            E::V2InstanceUpdate => Handler::call(nacos_v2::update, req, state),
            E::V2InstanceList => Handler::call(nacos_v2::list, req, state),
            E::V2InstanceHealth => Handler::call(nacos_v2::health, req, state),
            E::V2ServiceDetail => Handler::call(nacos_v2::service_detail, req, state),
            E::V2ServiceCreate => Handler::call(nacos_v2::create_service, req, state),
            E::V2ServiceDelete => Handler::call(nacos_v2::delete_service, req, state),
            E::V2ServiceUpdate => Handler::call(nacos_v2::update_service, req, state),
            E::V2ServiceList => Handler::call(nacos_v2::service_list, req, state),
            E::V2OperatorMetrics => Handler::call(nacos_v2::metrics, req, state),
            E::V2OperatorSwitches => Handler::call(nacos_v2::switches, req, state),
            E::V2ConfigGet => Handler::call(nacos_v2_config::get_config, req, state),
            E::V2ConfigPublish => Handler::call(nacos_v2_config::publish, req, state),
            E::V2ConfigDelete => Handler::call(nacos_v2_config::remove, req, state),
            E::ClusterStatus => Handler::call(cluster::status, req, state),
            E::ClusterAddMember => Handler::call(cluster::add_member, req, state),
            E::ClusterRemoveMember => Handler::call(cluster::remove_member, req, state),
            E::ClusterOwner => Handler::call(cluster::owner, req, state),
            E::Instances => Handler::call(pick::instances, req, state),
            E::Pick => Handler::call(pick::pick, req, state),
            E::Events => Handler::call(events::stream, req, state),
            E::RotateKey => Handler::call(signing_key::rotate, req, state),
            E::Audit => Handler::call(audit::list, req, state),
            E::Snapshot => Handler::call(snapshot::download, req, state),
            E::Overview => Handler::call(overview::overview, req, state),
            E::Clients => Handler::call(clients::list, req, state),
            E::ApiTokenList => Handler::call(tokens::list, req, state),
            E::ApiTokenCreate => Handler::call(tokens::create, req, state),
            E::ApiTokenRevoke => Handler::call(tokens::revoke, req, state),
            E::SyncTaskList => Handler::call(sync::list, req, state),
            E::SyncTaskCreate => Handler::call(sync::create, req, state),
            // A task's name, as axum's `Path` extractor gave it.
            E::SyncTaskShow(Some(name)) => {
                let show = move |s: State<AppState>, c: Caller| sync::show(s, c, Path(name));
                Handler::call(show, req, state)
            }
            E::SyncTaskDelete(Some(name)) => {
                let delete = move |s: State<AppState>, c: Caller| sync::delete(s, c, Path(name));
                Handler::call(delete, req, state)
            }
            E::SyncTaskPause(Some(name)) => {
                let pause = move |s: State<AppState>, c: Caller| sync::pause(s, c, Path(name));
                Handler::call(pause, req, state)
            }
            E::SyncTaskResume(Some(name)) => {
                let resume = move |s: State<AppState>, c: Caller| sync::resume(s, c, Path(name));
                Handler::call(resume, req, state)
            }
            E::SyncTaskApply(Some(name)) => {
                let apply = move |s: State<AppState>, c: Caller| sync::apply(s, c, Path(name));
                Handler::call(apply, req, state)
            }
            E::SyncTaskShow(None)
            | E::SyncTaskDelete(None)
            | E::SyncTaskPause(None)
            | E::SyncTaskResume(None)
            | E::SyncTaskApply(None) => Box::pin(std::future::ready(
                (
                    StatusCode::BAD_REQUEST,
                    "Invalid URL: Invalid UTF-8 in `name`",
                )
                    .into_response(),
            )),
            E::V3(op) => op.serve(req, state),
            E::Eureka(call) => call.serve(req, state),
            E::Consul(call) => call.serve(req, state),
            E::MethodNotAllowed { route, .. } => not_allowed(route.allow()),
            E::V3NotAllowed { path, .. } => not_allowed(path.allow()),
            // `Front` serves the console's files; never routed here.
            E::Console | E::NotFound { .. } => Handler::call(nacos::no_such_api, req, state),
        }
    }
}

/// 405, with the methods the path answers.
fn not_allowed(allow: &'static str) -> Answer {
    let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    Box::pin(std::future::ready(response))
}

/// What axum's router did to every answer of a route: a `Content-Length` when the
/// body's size is known, and no body for a `HEAD` (the `GET` handler answered it).
pub fn finish(mut response: Response, head: bool) -> Response {
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_LENGTH) {
        if let Some(size) = http_body::Body::size_hint(response.body()).exact() {
            let value = if size == 0 {
                HeaderValue::from_static("0")
            } else {
                HeaderValue::from(size)
            };
            response.headers_mut().insert(header::CONTENT_LENGTH, value);
        }
    }
    if head {
        *response.body_mut() = Body::empty();
    }
    response
}
