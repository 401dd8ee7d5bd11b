//! The HTTP face's endpoint table. A request is parsed once, from its method, its path
//! and the few parameters that tell operations apart, into an [`Endpoint`]; what the
//! guard lets through ([`Endpoint::access`]), what the audit records
//! ([`Endpoint::audit`]), the label the metrics count it under ([`Endpoint::label`]),
//! the body it may send ([`Endpoint::body_limit`]) and the handler that answers it
//! ([`Endpoint::serve`]) are `match`es on that value, as garage's
//! `Endpoint::from_request` and `authorization_type()` are. The paths themselves are
//! written once, in [`Route`]'s table.
//!
//! What axum's router answered before this table, it still answers: a known path with a
//! method it does not serve is a 405 with `Allow` listing the methods in the order they
//! were registered (`GET` bringing `HEAD`), any other path Nacos' 404 (`no such api`);
//! `HEAD` is served by the `GET` handler with the body left out ([`finish`]).

mod policy;
mod route;
mod serve;

use axum::http::Method;

use super::consul;
use super::eureka;
use super::nacos;
use super::params::Params;
use super::prometheus;
use super::v3::{self, V3};
pub use policy::{Access, AuditRule, BodyLimit};
use route::{is_console, percent_decoded, TASK_PREFIX};
pub use route::{Area, Route};
pub use serve::{finish, Answer};

/// A sync task's name, percent-decoded from its path segment; `None` when the decoded
/// bytes are not UTF-8 (axum's `Path` answered that with a 400).
pub type TaskName = Option<String>;

/// One operation of the HTTP face: what a request is, parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The console's files (`roster_console_ui::router`): public, never guarded.
    Console,
    /// `GET /health/live`.
    Live,
    /// `GET /health/ready`.
    Ready,
    /// `GET /metrics`.
    Metrics,
    /// `GET /nacos/prometheus[/namespaceId/{namespaceId}[/service/{service}]]`.
    PrometheusSd(prometheus::Scope),
    /// `POST /nacos/v1/ns/instance`.
    InstanceRegister,
    /// `DELETE /nacos/v1/ns/instance`.
    InstanceDeregister,
    /// `PUT` or `PATCH /nacos/v1/ns/instance`.
    InstanceUpdate,
    /// `GET /nacos/v1/ns/instance`.
    InstanceDetail,
    /// `GET /nacos/v1/ns/instance/list`.
    InstanceList,
    /// `PUT /nacos/v1/ns/instance/beat`.
    InstanceBeat,
    /// `PUT /nacos/v1/ns/health/instance`.
    InstanceHealth,
    /// `PUT /nacos/v1/ns/health`.
    Health,
    /// `POST /nacos/v1/ns/service`.
    ServiceCreate,
    /// `DELETE /nacos/v1/ns/service`.
    ServiceDelete,
    /// `PUT /nacos/v1/ns/service`.
    ServiceUpdate,
    /// `GET /nacos/v1/ns/service`.
    ServiceDetail,
    /// `GET /nacos/v1/ns/service/list`.
    ServiceList,
    /// `GET /nacos/v1/ns/service/selector/types`.
    SelectorTypes,
    /// `GET /nacos/v1/ns/service/subscribers`.
    Subscribers,
    /// `PUT /nacos/v1/ns/cluster`.
    NamingCluster,
    /// `GET /nacos/v1/ns/catalog/services`.
    CatalogServices,
    /// `GET /nacos/v1/ns/catalog/service`.
    CatalogService,
    /// `GET /nacos/v1/ns/catalog/instances`.
    CatalogInstances,
    /// `GET /nacos/v1/ns/operator/metrics`.
    OperatorMetrics,
    /// `GET /nacos/v1/ns/operator/switches`.
    OperatorSwitches,
    /// `GET /nacos/v1/cs/configs`: one item.
    ConfigGet,
    /// `GET /nacos/v1/cs/configs?search=`: a listing.
    ConfigSearch,
    /// `GET /nacos/v1/cs/configs?export=true` (or `exportV2`): an archive.
    ConfigExport,
    /// `POST /nacos/v1/cs/configs`: a publish.
    ConfigPublish,
    /// `POST /nacos/v1/cs/configs?import=true`: an archive imported.
    ConfigImport,
    /// `DELETE /nacos/v1/cs/configs`.
    ConfigDelete,
    /// `POST /nacos/v1/cs/configs/listener`: the long poll.
    ConfigListen,
    /// `GET /nacos/v1/cs/configs/listener`: who listens to an item.
    ConfigListeners,
    /// `GET /nacos/v1/cs/history`.
    History,
    /// `GET /nacos/v1/cs/history/previous`.
    HistoryPrevious,
    /// `GET /nacos/v1/cs/history/configs`.
    HistoryConfigs,
    /// `GET /nacos/v1/console/namespaces`: the list.
    NamespaceList,
    /// `GET /nacos/v1/console/namespaces?show=`: one namespace.
    NamespaceShow,
    /// `GET /nacos/v1/console/namespaces?checkNamespaceIdExist=`: part of creating one.
    NamespaceCheck,
    /// `POST /nacos/v1/console/namespaces`.
    NamespaceCreate,
    /// `PUT /nacos/v1/console/namespaces`.
    NamespaceUpdate,
    /// `DELETE /nacos/v1/console/namespaces`.
    NamespaceDelete,
    /// `POST /nacos/v1/auth/login`.
    Login,
    /// `POST /nacos/v1/auth/users/login`.
    UsersLogin,
    /// `GET /nacos/v1/auth/users`.
    UserList,
    /// `POST /nacos/v1/auth/users`.
    UserCreate,
    /// `PUT /nacos/v1/auth/users`: a password change.
    UserPassword,
    /// `DELETE /nacos/v1/auth/users`.
    UserDelete,
    /// `GET /nacos/v1/auth/users/search`.
    UserSearch,
    /// `GET /nacos/v1/auth/roles`.
    RoleList,
    /// `POST /nacos/v1/auth/roles`.
    RoleAdd,
    /// `DELETE /nacos/v1/auth/roles`.
    RoleDelete,
    /// `GET /nacos/v1/auth/roles/search`.
    RoleSearch,
    /// `GET /nacos/v1/auth/permissions`.
    PermissionList,
    /// `POST /nacos/v1/auth/permissions`.
    PermissionAdd,
    /// `DELETE /nacos/v1/auth/permissions`.
    PermissionDelete,
    /// `GET /nacos/v1/core/cluster/nodes`.
    CoreClusterNodes,
    /// `GET /nacos/v2/ns/instance`.
    V2InstanceDetail,
    /// `POST /nacos/v2/ns/instance`.
    V2InstanceRegister,
    /// `DELETE /nacos/v2/ns/instance`.
    V2InstanceDeregister,
    /// `PUT` or `PATCH /nacos/v2/ns/instance`.
    V2InstanceUpdate,
    /// `GET /nacos/v2/ns/instance/list`.
    V2InstanceList,
    /// `PUT /nacos/v2/ns/instance/beat`.
    V2InstanceBeat,
    /// `PUT /nacos/v2/ns/health/instance`.
    V2InstanceHealth,
    /// `GET /nacos/v2/ns/service`.
    V2ServiceDetail,
    /// `POST /nacos/v2/ns/service`.
    V2ServiceCreate,
    /// `DELETE /nacos/v2/ns/service`.
    V2ServiceDelete,
    /// `PUT /nacos/v2/ns/service`.
    V2ServiceUpdate,
    /// `GET /nacos/v2/ns/service/list`.
    V2ServiceList,
    /// `GET /nacos/v2/ns/operator/metrics`.
    V2OperatorMetrics,
    /// `GET /nacos/v2/ns/operator/switches`.
    V2OperatorSwitches,
    /// `GET /nacos/v2/cs/config`.
    V2ConfigGet,
    /// `POST /nacos/v2/cs/config`.
    V2ConfigPublish,
    /// `DELETE /nacos/v2/cs/config`.
    V2ConfigDelete,
    /// `GET /api/v1/cluster`.
    ClusterStatus,
    /// `POST /api/v1/cluster/members`.
    ClusterAddMember,
    /// `DELETE /api/v1/cluster/members`.
    ClusterRemoveMember,
    /// `GET /api/v1/cluster/owner`.
    ClusterOwner,
    /// `GET /api/v1/instances`.
    Instances,
    /// `GET /api/v1/pick`.
    Pick,
    /// `GET /api/v1/events`.
    Events,
    /// `POST /api/v1/auth/rotate-key`.
    RotateKey,
    /// `GET /api/v1/audit`.
    Audit,
    /// `GET /api/v1/snapshot`.
    Snapshot,
    /// `GET /api/v1/overview`.
    Overview,
    /// `GET /api/v1/clients`.
    Clients,
    /// `GET /api/v1/tokens`.
    ApiTokenList,
    /// `POST /api/v1/tokens`.
    ApiTokenCreate,
    /// `DELETE /api/v1/tokens?id=`.
    ApiTokenRevoke,
    /// `GET /api/v1/sync/tasks`.
    SyncTaskList,
    /// `POST /api/v1/sync/tasks`.
    SyncTaskCreate,
    /// `GET /api/v1/sync/tasks/{name}`.
    SyncTaskShow(TaskName),
    /// `DELETE /api/v1/sync/tasks/{name}`.
    SyncTaskDelete(TaskName),
    /// `POST /api/v1/sync/tasks/{name}/pause`.
    SyncTaskPause(TaskName),
    /// `POST /api/v1/sync/tasks/{name}/resume`.
    SyncTaskResume(TaskName),
    /// `POST /api/v1/sync/tasks/{name}/apply`.
    SyncTaskApply(TaskName),
    /// An operation of Eureka's API (`/eureka/...`, `/nacos/eureka/...`).
    Eureka(eureka::Call),
    /// An operation of Consul's API (`/v1/...`).
    Consul(consul::Call),
    /// An operation of Nacos 3's API (`/nacos/v3/...`), its own table.
    V3(V3),
    /// A known v3 path with a method it does not answer: 405.
    V3NotAllowed {
        /// The path.
        path: v3::Path,
        /// Whether the method reads (`GET`, `HEAD`, `OPTIONS`), for the audit.
        reads: bool,
    },
    /// A known path with a method it does not answer: 405.
    MethodNotAllowed {
        /// The path's route.
        route: Route,
        /// Whether the method reads (`GET`, `HEAD`, `OPTIONS`), for the audit.
        reads: bool,
    },
    /// No route: Nacos' 404.
    NotFound {
        /// What the path's prefix says of it.
        area: Area,
        /// Whether the method reads (`GET`, `HEAD`, `OPTIONS`), for the audit.
        reads: bool,
    },
}

/// The methods as routes tell them apart: `HEAD` is `GET`'s.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Other,
}

impl Verb {
    fn of(method: &Method) -> Verb {
        match *method {
            Method::GET | Method::HEAD => Verb::Get,
            Method::POST => Verb::Post,
            Method::PUT => Verb::Put,
            Method::PATCH => Verb::Patch,
            Method::DELETE => Verb::Delete,
            _ => Verb::Other,
        }
    }
}

/// Whether `method` reads, to the audit.
fn reads(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl Endpoint {
    /// The endpoint of `method` on `path`, before its parameters are read: no
    /// allocation (but a sync task's name), no regex; the hot routes are the first
    /// strings compared. [`Endpoint::with_params`] then tells apart the operations
    /// that share a method and a path.
    pub fn parse(method: &Method, path: &str) -> Endpoint {
        let verb = Verb::of(method);
        let Some(route) = Route::of_path(path) else {
            return Self::parse_other(method, verb, path);
        };
        use Endpoint as E;
        use Route as R;
        use Verb::*;
        match (route, verb) {
            (R::InstanceList, Get) => E::InstanceList,
            (R::Instance, Post) => E::InstanceRegister,
            (R::Instance, Delete) => E::InstanceDeregister,
            (R::Instance, Put | Patch) => E::InstanceUpdate,
            (R::Instance, Get) => E::InstanceDetail,
            (R::InstanceBeat, Put) => E::InstanceBeat,
            (R::Configs, Get) => E::ConfigGet,
            (R::Configs, Post) => E::ConfigPublish,
            (R::Configs, Delete) => E::ConfigDelete,
            (R::ConfigListener, Post) => E::ConfigListen,
            (R::ConfigListener, Get) => E::ConfigListeners,
            (R::Live, Get) => E::Live,
            (R::Ready, Get) => E::Ready,
            (R::Metrics, Get) => E::Metrics,
            (R::PrometheusSd, Get) => E::PrometheusSd(prometheus::Scope::All),
            (R::PrometheusSdNamespace | R::PrometheusSdService, _) => {
                Self::parse_other(method, verb, path)
            }
            (R::HealthInstance, Put) => E::InstanceHealth,
            (R::Health, Put) => E::Health,
            (R::Service, Post) => E::ServiceCreate,
            (R::Service, Delete) => E::ServiceDelete,
            (R::Service, Put) => E::ServiceUpdate,
            (R::Service, Get) => E::ServiceDetail,
            (R::ServiceList, Get) => E::ServiceList,
            (R::SelectorTypes, Get) => E::SelectorTypes,
            (R::Subscribers, Get) => E::Subscribers,
            (R::NamingCluster, Put) => E::NamingCluster,
            (R::CatalogServices, Get) => E::CatalogServices,
            (R::CatalogService, Get) => E::CatalogService,
            (R::CatalogInstances, Get) => E::CatalogInstances,
            (R::OperatorMetrics, Get) => E::OperatorMetrics,
            (R::OperatorSwitches, Get) => E::OperatorSwitches,
            (R::History, Get) => E::History,
            (R::HistoryPrevious, Get) => E::HistoryPrevious,
            (R::HistoryConfigs, Get) => E::HistoryConfigs,
            (R::Namespaces, Get) => E::NamespaceList,
            (R::Namespaces, Post) => E::NamespaceCreate,
            (R::Namespaces, Put) => E::NamespaceUpdate,
            (R::Namespaces, Delete) => E::NamespaceDelete,
            (R::Login, Post) => E::Login,
            (R::UsersLogin, Post) => E::UsersLogin,
            (R::Users, Get) => E::UserList,
            (R::Users, Post) => E::UserCreate,
            (R::Users, Put) => E::UserPassword,
            (R::Users, Delete) => E::UserDelete,
            (R::UsersSearch, Get) => E::UserSearch,
            (R::Roles, Get) => E::RoleList,
            (R::Roles, Post) => E::RoleAdd,
            (R::Roles, Delete) => E::RoleDelete,
            (R::RolesSearch, Get) => E::RoleSearch,
            (R::Permissions, Get) => E::PermissionList,
            (R::Permissions, Post) => E::PermissionAdd,
            (R::Permissions, Delete) => E::PermissionDelete,
            (R::CoreClusterNodes, Get) => E::CoreClusterNodes,
            (R::V2Instance, Get) => E::V2InstanceDetail,
            (R::V2Instance, Post) => E::V2InstanceRegister,
            (R::V2Instance, Delete) => E::V2InstanceDeregister,
            (R::V2Instance, Put | Patch) => E::V2InstanceUpdate,
            (R::V2InstanceList, Get) => E::V2InstanceList,
            (R::V2InstanceBeat, Put) => E::V2InstanceBeat,
            (R::V2HealthInstance, Put) => E::V2InstanceHealth,
            (R::V2Service, Get) => E::V2ServiceDetail,
            (R::V2Service, Post) => E::V2ServiceCreate,
            (R::V2Service, Delete) => E::V2ServiceDelete,
            (R::V2Service, Put) => E::V2ServiceUpdate,
            (R::V2ServiceList, Get) => E::V2ServiceList,
            (R::V2OperatorMetrics, Get) => E::V2OperatorMetrics,
            (R::V2OperatorSwitches, Get) => E::V2OperatorSwitches,
            (R::V2Config, Get) => E::V2ConfigGet,
            (R::V2Config, Post) => E::V2ConfigPublish,
            (R::V2Config, Delete) => E::V2ConfigDelete,
            (R::Cluster, Get) => E::ClusterStatus,
            (R::ClusterMembers, Post) => E::ClusterAddMember,
            (R::ClusterMembers, Delete) => E::ClusterRemoveMember,
            (R::ClusterOwner, Get) => E::ClusterOwner,
            (R::Instances, Get) => E::Instances,
            (R::Pick, Get) => E::Pick,
            (R::Events, Get) => E::Events,
            (R::RotateKey, Post) => E::RotateKey,
            (R::Audit, Get) => E::Audit,
            (R::Snapshot, Get) => E::Snapshot,
            (R::Overview, Get) => E::Overview,
            (R::Clients, Get) => E::Clients,
            (R::ApiTokens, Get) => E::ApiTokenList,
            (R::ApiTokens, Post) => E::ApiTokenCreate,
            (R::ApiTokens, Delete) => E::ApiTokenRevoke,
            (R::SyncTasks, Get) => E::SyncTaskList,
            (R::SyncTasks, Post) => E::SyncTaskCreate,
            // The task routes' patterns, asked for as literal paths, name the task
            // `{name}`: parsed as any task path.
            (R::SyncTask | R::SyncTaskPause | R::SyncTaskResume | R::SyncTaskApply, _) => {
                Self::parse_other(method, verb, path)
            }
            // Eureka's paths name applications and instances: parsed apart.
            (
                R::EurekaApps
                | R::EurekaDelta
                | R::EurekaApp
                | R::EurekaInstance
                | R::EurekaStatus
                | R::EurekaMetadata
                | R::EurekaInstanceById
                | R::EurekaVip
                | R::EurekaSvip,
                _,
            ) => Self::parse_other(method, verb, path),
            // Consul's paths name services, checks and nodes: parsed apart.
            (route, _) if route.is_consul() => Self::parse_other(method, verb, path),
            (route, _) => E::MethodNotAllowed {
                route,
                reads: reads(method),
            },
        }
    }

    /// A path that is no static route's: a sync task's, the console's, or none.
    fn parse_other(method: &Method, verb: Verb, path: &str) -> Endpoint {
        if is_console(path) {
            return Endpoint::Console;
        }
        let not_found = || Endpoint::NotFound {
            area: Area::of_path(path),
            reads: reads(method),
        };
        if path.starts_with(v3::PREFIX) {
            let verb = match verb {
                Verb::Get => v3::Verb::Get,
                Verb::Post => v3::Verb::Post,
                Verb::Put => v3::Verb::Put,
                Verb::Delete => v3::Verb::Delete,
                Verb::Patch | Verb::Other => v3::Verb::Other,
            };
            return match V3::parse(verb, path) {
                v3::Parsed::Op(op) => Endpoint::V3(op),
                v3::Parsed::NotAllowed(path) => Endpoint::V3NotAllowed {
                    path,
                    reads: reads(method),
                },
                v3::Parsed::Unknown => not_found(),
            };
        }
        if let Some(rest) = path.strip_prefix(prometheus::NAMESPACE_PREFIX) {
            return match prometheus::scope(rest, percent_decoded) {
                None => not_found(),
                Some(scope) if verb == Verb::Get => Endpoint::PrometheusSd(scope),
                Some(prometheus::Scope::Service(..)) => Endpoint::MethodNotAllowed {
                    route: Route::PrometheusSdService,
                    reads: reads(method),
                },
                Some(_) => Endpoint::MethodNotAllowed {
                    route: Route::PrometheusSdNamespace,
                    reads: reads(method),
                },
            };
        }
        if let Some(rest) = eureka::strip(path) {
            return match eureka::parse(verb == Verb::Get, method, rest, percent_decoded) {
                Ok(call) => Endpoint::Eureka(call),
                Err(Some(route)) => Endpoint::MethodNotAllowed {
                    route,
                    reads: reads(method),
                },
                Err(None) => not_found(),
            };
        }
        if let Some(rest) = path.strip_prefix(consul::PREFIX) {
            let put = matches!(verb, Verb::Put | Verb::Post);
            return match consul::parse(verb == Verb::Get, put, rest, percent_decoded) {
                Ok(call) => Endpoint::Consul(call),
                Err(Some(route)) => Endpoint::MethodNotAllowed {
                    route,
                    reads: reads(method),
                },
                Err(None) => not_found(),
            };
        }
        let Some(rest) = path.strip_prefix(TASK_PREFIX) else {
            return not_found();
        };
        // `{name}` is one segment, `{name}/pause` and the like one more.
        let (segment, route) = match rest.split_once('/') {
            None => (rest, Route::SyncTask),
            Some((segment, "pause")) => (segment, Route::SyncTaskPause),
            Some((segment, "resume")) => (segment, Route::SyncTaskResume),
            Some((segment, "apply")) => (segment, Route::SyncTaskApply),
            Some(_) => return not_found(),
        };
        // axum's router took an empty name before a last segment, not at the end.
        if segment.is_empty() && route == Route::SyncTask {
            return not_found();
        }
        let name = || percent_decoded(segment);
        match (route, verb) {
            (Route::SyncTask, Verb::Get) => Endpoint::SyncTaskShow(name()),
            (Route::SyncTask, Verb::Delete) => Endpoint::SyncTaskDelete(name()),
            (Route::SyncTaskPause, Verb::Post) => Endpoint::SyncTaskPause(name()),
            (Route::SyncTaskResume, Verb::Post) => Endpoint::SyncTaskResume(name()),
            (Route::SyncTaskApply, Verb::Post) => Endpoint::SyncTaskApply(name()),
            (route, _) => Endpoint::MethodNotAllowed {
                route,
                reads: reads(method),
            },
        }
    }

    /// The operation among those that share a method and a path, by the parameters
    /// that tell them apart (the query and a form body).
    pub fn with_params(self, params: &Params) -> Endpoint {
        match self {
            Endpoint::ConfigGet if params.optional("search").is_some() => Endpoint::ConfigSearch,
            Endpoint::ConfigGet
                if ["export", "exportV2"]
                    .iter()
                    .any(|k| params.optional(k) == Some("true")) =>
            {
                Endpoint::ConfigExport
            }
            Endpoint::ConfigPublish if nacos::config_zip::is_import(params) => {
                Endpoint::ConfigImport
            }
            Endpoint::NamespaceList if params.optional("checkNamespaceIdExist").is_some() => {
                Endpoint::NamespaceCheck
            }
            Endpoint::NamespaceList if params.optional("show").is_some() => Endpoint::NamespaceShow,
            other => other,
        }
    }

    /// Its route; `None` for the console and for a path of no route.
    pub fn route(&self) -> Option<Route> {
        use Endpoint as E;
        use Route as R;
        Some(match self {
            E::Console | E::NotFound { .. } | E::V3(_) | E::V3NotAllowed { .. } => return None,
            E::MethodNotAllowed { route, .. } => *route,
            E::Live => R::Live,
            E::PrometheusSd(prometheus::Scope::All) => R::PrometheusSd,
            E::PrometheusSd(prometheus::Scope::Service(..)) => R::PrometheusSdService,
            E::PrometheusSd(_) => R::PrometheusSdNamespace,
            E::Ready => R::Ready,
            E::Metrics => R::Metrics,
            E::InstanceRegister | E::InstanceDeregister | E::InstanceUpdate | E::InstanceDetail => {
                R::Instance
            }
            E::InstanceList => R::InstanceList,
            E::InstanceBeat => R::InstanceBeat,
            E::InstanceHealth => R::HealthInstance,
            E::Health => R::Health,
            E::ServiceCreate | E::ServiceDelete | E::ServiceUpdate | E::ServiceDetail => R::Service,
            E::ServiceList => R::ServiceList,
            E::SelectorTypes => R::SelectorTypes,
            E::Subscribers => R::Subscribers,
            E::NamingCluster => R::NamingCluster,
            E::CatalogServices => R::CatalogServices,
            E::CatalogService => R::CatalogService,
            E::CatalogInstances => R::CatalogInstances,
            E::OperatorMetrics => R::OperatorMetrics,
            E::OperatorSwitches => R::OperatorSwitches,
            E::ConfigGet
            | E::ConfigSearch
            | E::ConfigExport
            | E::ConfigPublish
            | E::ConfigImport
            | E::ConfigDelete => R::Configs,
            E::ConfigListen | E::ConfigListeners => R::ConfigListener,
            E::History => R::History,
            E::HistoryPrevious => R::HistoryPrevious,
            E::HistoryConfigs => R::HistoryConfigs,
            E::NamespaceList
            | E::NamespaceShow
            | E::NamespaceCheck
            | E::NamespaceCreate
            | E::NamespaceUpdate
            | E::NamespaceDelete => R::Namespaces,
            E::Login => R::Login,
            E::UsersLogin => R::UsersLogin,
            E::UserList | E::UserCreate | E::UserPassword | E::UserDelete => R::Users,
            E::UserSearch => R::UsersSearch,
            E::RoleList | E::RoleAdd | E::RoleDelete => R::Roles,
            E::RoleSearch => R::RolesSearch,
            E::PermissionList | E::PermissionAdd | E::PermissionDelete => R::Permissions,
            E::CoreClusterNodes => R::CoreClusterNodes,
            E::V2InstanceDetail
            | E::V2InstanceRegister
            | E::V2InstanceDeregister
            | E::V2InstanceUpdate => R::V2Instance,
            E::V2InstanceList => R::V2InstanceList,
            E::V2InstanceBeat => R::V2InstanceBeat,
            E::V2InstanceHealth => R::V2HealthInstance,
            E::V2ServiceDetail | E::V2ServiceCreate | E::V2ServiceDelete | E::V2ServiceUpdate => {
                R::V2Service
            }
            E::V2ServiceList => R::V2ServiceList,
            E::V2OperatorMetrics => R::V2OperatorMetrics,
            E::V2OperatorSwitches => R::V2OperatorSwitches,
            E::V2ConfigGet | E::V2ConfigPublish | E::V2ConfigDelete => R::V2Config,
            E::ClusterStatus => R::Cluster,
            E::ClusterAddMember | E::ClusterRemoveMember => R::ClusterMembers,
            E::ClusterOwner => R::ClusterOwner,
            E::Instances => R::Instances,
            E::Pick => R::Pick,
            E::Events => R::Events,
            E::RotateKey => R::RotateKey,
            E::Audit => R::Audit,
            E::Snapshot => R::Snapshot,
            E::Overview => R::Overview,
            E::Clients => R::Clients,
            E::ApiTokenList | E::ApiTokenCreate | E::ApiTokenRevoke => R::ApiTokens,
            E::SyncTaskList | E::SyncTaskCreate => R::SyncTasks,
            E::SyncTaskShow(_) | E::SyncTaskDelete(_) => R::SyncTask,
            E::SyncTaskPause(_) => R::SyncTaskPause,
            E::SyncTaskResume(_) => R::SyncTaskResume,
            E::SyncTaskApply(_) => R::SyncTaskApply,
            E::Eureka(call) => match call.op {
                eureka::Op::Apps => R::EurekaApps,
                eureka::Op::Delta => R::EurekaDelta,
                eureka::Op::Register | eureka::Op::App => R::EurekaApp,
                eureka::Op::Renew | eureka::Op::Cancel | eureka::Op::Instance => R::EurekaInstance,
                eureka::Op::StatusOverride | eureka::Op::StatusClear => R::EurekaStatus,
                eureka::Op::Metadata => R::EurekaMetadata,
                eureka::Op::InstanceById => R::EurekaInstanceById,
                eureka::Op::Vip => R::EurekaVip,
                eureka::Op::Svip => R::EurekaSvip,
            },
            E::Consul(call) => call.op.route(),
        })
    }

    /// The label the metrics count it under (and the audit's action names): its
    /// route's path. `None` for a path of no route (counted as `unmatched`: anyone can
    /// invent paths) and for the console (not counted).
    pub fn label(&self) -> Option<&'static str> {
        match self {
            Endpoint::V3(op) => Some(op.path().path()),
            Endpoint::V3NotAllowed { path, .. } => Some(path.path()),
            _ => self.route().map(Route::path),
        }
    }

    /// What its path's prefix says of it.
    pub fn area(&self) -> Area {
        use Route as R;
        match self {
            Endpoint::NotFound { area, .. } => *area,
            Endpoint::V3(op) if op.is_config() => Area::ConfigV3,
            Endpoint::V3(op) if op.is_users() => Area::UsersV3,
            Endpoint::V3(_) | Endpoint::V3NotAllowed { .. } => Area::NacosV3,
            _ => match self.route() {
                None => Area::Other,
                Some(
                    R::Configs
                    | R::ConfigListener
                    | R::History
                    | R::HistoryPrevious
                    | R::HistoryConfigs,
                ) => Area::ConfigV1,
                Some(R::V2Config) => Area::ConfigV2,
                Some(
                    R::V2Instance
                    | R::V2InstanceList
                    | R::V2InstanceBeat
                    | R::V2HealthInstance
                    | R::V2Service
                    | R::V2ServiceList
                    | R::V2OperatorMetrics
                    | R::V2OperatorSwitches,
                ) => Area::NacosV2,
                Some(R::Users | R::UsersSearch | R::Roles | R::RolesSearch | R::Permissions) => {
                    Area::Users
                }
                Some(R::SyncTask | R::SyncTaskPause | R::SyncTaskResume | R::SyncTaskApply) => {
                    Area::SyncTask
                }
                Some(route) if route.is_eureka() => Area::Eureka,
                Some(route) if route.is_consul() => Area::Consul,
                Some(_) => Area::Other,
            },
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::auth::permissions::Action;
    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::{header, StatusCode};
    use axum::routing::{get, post, put};
    use tower::ServiceExt;

    fn parse(method: Method, path_and_query: &str) -> Endpoint {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let params = Params::parse(Some(query), None).unwrap();
        Endpoint::parse(&method, path).with_params(&params)
    }

    fn access(method: Method, path_and_query: &str) -> Access {
        parse(method, path_and_query).access()
    }

    #[test]
    fn every_route_is_parsed_from_its_path() {
        for &route in Route::ALL {
            let endpoint = Endpoint::parse(&Method::TRACE, route.path());
            assert_eq!(endpoint.route(), Some(route), "{route:?}");
            assert_eq!(endpoint.label(), Some(route.path()));
        }
    }

    #[test]
    fn method_path_and_parameters_name_one_endpoint() {
        use Endpoint as E;
        let task = |name: &str| Some(name.to_string());
        for (method, path, endpoint) in [
            (Method::GET, "/nacos/v1/ns/instance/list", E::InstanceList),
            (Method::HEAD, "/nacos/v1/ns/instance/list", E::InstanceList),
            (Method::POST, "/nacos/v1/ns/instance", E::InstanceRegister),
            (
                Method::DELETE,
                "/nacos/v1/ns/instance",
                E::InstanceDeregister,
            ),
            (Method::PATCH, "/nacos/v1/ns/instance", E::InstanceUpdate),
            (Method::PUT, "/nacos/v1/ns/instance/beat", E::InstanceBeat),
            (Method::PUT, "/nacos/v1/ns/health", E::Health),
            (Method::GET, "/nacos/v1/cs/configs?dataId=a", E::ConfigGet),
            (
                Method::GET,
                "/nacos/v1/cs/configs?search=blur",
                E::ConfigSearch,
            ),
            (
                Method::GET,
                "/nacos/v1/cs/configs?export=true",
                E::ConfigExport,
            ),
            (
                Method::GET,
                "/nacos/v1/cs/configs?exportV2=true",
                E::ConfigExport,
            ),
            (
                Method::GET,
                "/nacos/v1/cs/configs?export=false",
                E::ConfigGet,
            ),
            (Method::POST, "/nacos/v1/cs/configs", E::ConfigPublish),
            (
                Method::POST,
                "/nacos/v1/cs/configs?import=true",
                E::ConfigImport,
            ),
            (
                Method::POST,
                "/nacos/v1/cs/configs/listener",
                E::ConfigListen,
            ),
            (
                Method::GET,
                "/nacos/v1/cs/configs/listener",
                E::ConfigListeners,
            ),
            (
                Method::GET,
                "/nacos/v1/console/namespaces",
                E::NamespaceList,
            ),
            (
                Method::GET,
                "/nacos/v1/console/namespaces?show=all",
                E::NamespaceShow,
            ),
            (
                Method::GET,
                "/nacos/v1/console/namespaces?checkNamespaceIdExist=true",
                E::NamespaceCheck,
            ),
            (Method::PUT, "/nacos/v1/auth/users", E::UserPassword),
            (Method::POST, "/nacos/v1/auth/users/login", E::UsersLogin),
            (Method::PATCH, "/nacos/v2/ns/instance", E::V2InstanceUpdate),
            (Method::DELETE, "/nacos/v2/cs/config", E::V2ConfigDelete),
            (Method::GET, "/api/v1/sync/tasks", E::SyncTaskList),
            (
                Method::GET,
                "/api/v1/sync/tasks/a",
                E::SyncTaskShow(task("a")),
            ),
            (
                Method::DELETE,
                "/api/v1/sync/tasks/a%2Fb",
                E::SyncTaskDelete(task("a/b")),
            ),
            (
                Method::POST,
                "/api/v1/sync/tasks/a/pause",
                E::SyncTaskPause(task("a")),
            ),
            (
                Method::POST,
                "/api/v1/sync/tasks/%FF/apply",
                E::SyncTaskApply(None),
            ),
            (Method::GET, "/", E::Console),
            (Method::POST, "/assets/app.js", E::Console),
            (Method::GET, "/nacos/", E::Console),
        ] {
            assert_eq!(parse(method.clone(), path), endpoint, "{method} {path}");
        }
    }

    #[test]
    fn wrong_methods_and_unknown_paths_are_405_and_404() {
        let not_allowed = |route, reads| Endpoint::MethodNotAllowed { route, reads };
        assert_eq!(
            parse(Method::POST, "/nacos/v1/ns/instance/list"),
            not_allowed(Route::InstanceList, false)
        );
        assert_eq!(
            parse(Method::OPTIONS, "/nacos/v1/ns/instance"),
            not_allowed(Route::Instance, true)
        );
        assert_eq!(
            parse(Method::GET, "/api/v1/sync/tasks/a/pause"),
            not_allowed(Route::SyncTaskPause, true)
        );
        assert_eq!(
            parse(Method::POST, "/api/v1/sync/tasks/a"),
            not_allowed(Route::SyncTask, false)
        );
        for (path, area) in [
            ("/nacos/v1/ns/instance/list/", Area::Other),
            ("/whatever", Area::Other),
            ("/nacos/v1/cs/other", Area::ConfigV1),
            ("/nacos/v2/cs/other", Area::ConfigV2),
            ("/nacos/v2/ns/other", Area::NacosV2),
            ("/nacos/v1/auth/other", Area::Users),
            ("/api/v1/sync/tasks/a/b", Area::SyncTask),
            ("/api/v1/sync/tasks/", Area::SyncTask),
        ] {
            let endpoint = parse(Method::GET, path);
            assert_eq!(endpoint, Endpoint::NotFound { area, reads: true }, "{path}");
            assert_eq!(endpoint.label(), None);
            assert_eq!(endpoint.access(), Access::Admin);
        }
    }

    #[test]
    fn naming_endpoints_need_read_or_write_on_their_service() {
        let read = Access::Service(Action::Read);
        let write = Access::Service(Action::Write);
        for path in [
            "/nacos/v1/ns/instance/list",
            "/nacos/v2/ns/instance/list",
            "/nacos/v1/ns/instance",
            "/nacos/v2/ns/instance",
            "/nacos/v1/ns/service",
            "/nacos/v1/ns/catalog/instances",
            "/nacos/v1/ns/service/subscribers",
            "/api/v1/instances",
            "/api/v1/pick",
        ] {
            assert_eq!(access(Method::GET, path), read, "{path}");
        }
        for (method, path) in [
            (Method::POST, "/nacos/v1/ns/instance"),
            (Method::DELETE, "/nacos/v1/ns/instance"),
            (Method::PUT, "/nacos/v1/ns/instance"),
            (Method::PATCH, "/nacos/v2/ns/instance"),
            (Method::PUT, "/nacos/v1/ns/instance/beat"),
            (Method::PUT, "/nacos/v2/ns/instance/beat"),
            (Method::PUT, "/nacos/v1/ns/health/instance"),
            (Method::POST, "/nacos/v1/ns/service"),
            (Method::DELETE, "/nacos/v2/ns/service"),
            (Method::PUT, "/nacos/v1/ns/cluster"),
            // Methods the route does not answer need what its other methods need.
            (Method::PATCH, "/nacos/v1/ns/service"),
            (Method::GET, "/nacos/v1/ns/instance/beat"),
        ] {
            assert_eq!(access(method.clone(), path), write, "{method} {path}");
        }
        assert_eq!(access(Method::POST, "/nacos/v1/ns/instance/list"), read);
        // A list of services needs the namespace; the handler filters the rest.
        for path in [
            "/nacos/v1/ns/service/list",
            "/nacos/v2/ns/service/list",
            "/nacos/v1/ns/catalog/services",
        ] {
            assert_eq!(access(Method::GET, path), Access::Namespace, "{path}");
        }
    }

    #[test]
    fn config_endpoints_need_read_or_write_on_their_item() {
        let v1 = |action| Access::Config {
            action,
            tenant: "tenant",
            group: "group",
        };
        let q = "?dataId=a&group=g&tenant=dev";
        for path in [
            "/nacos/v1/cs/configs",
            "/nacos/v1/cs/history",
            "/nacos/v1/cs/history/previous",
            "/nacos/v1/cs/configs/listener",
        ] {
            let path = format!("{path}{q}");
            assert_eq!(access(Method::GET, &path), v1(Action::Read), "{path}");
        }
        for method in [Method::POST, Method::DELETE, Method::PUT] {
            let path = format!("/nacos/v1/cs/configs{q}");
            assert_eq!(access(method.clone(), &path), v1(Action::Write), "{method}");
        }
        let v2 = |action| Access::Config {
            action,
            tenant: "namespaceId",
            group: "group",
        };
        assert_eq!(access(Method::GET, "/nacos/v2/cs/config"), v2(Action::Read));
        assert_eq!(
            access(Method::POST, "/nacos/v2/cs/config"),
            v2(Action::Write)
        );
        assert_eq!(
            access(Method::DELETE, "/nacos/v2/cs/config"),
            v2(Action::Write)
        );
        // Listings need the namespace and are filtered; the listener checks each item.
        for path in [
            "/nacos/v1/cs/configs?search=blur&dataId=a*",
            "/nacos/v1/cs/configs?search=accurate&tenant=dev",
            "/nacos/v1/cs/configs?export=true",
            "/nacos/v1/cs/history/configs?tenant=dev",
        ] {
            assert_eq!(
                access(Method::GET, path),
                Access::ConfigNamespace("tenant"),
                "{path}"
            );
        }
        for method in [Method::POST, Method::PUT] {
            let path = "/nacos/v1/cs/configs/listener";
            assert_eq!(access(method, path), Access::Caller);
        }
        // An import is for admins; so are writes to the history (no route: a 405).
        assert_eq!(
            access(Method::POST, "/nacos/v1/cs/configs?import=true"),
            Access::Admin
        );
        assert_eq!(access(Method::POST, "/nacos/v1/cs/history"), Access::Admin);
        assert_eq!(
            access(Method::DELETE, "/nacos/v1/cs/history/configs"),
            Access::Admin
        );
    }

    #[test]
    fn management_is_for_admins_and_unknown_routes_too() {
        for (method, path) in [
            (Method::GET, "/nacos/v1/auth/users"),
            (Method::POST, "/nacos/v1/auth/users"),
            (Method::DELETE, "/nacos/v1/auth/users"),
            (Method::PATCH, "/nacos/v1/auth/users"),
            (Method::GET, "/nacos/v1/auth/users/search"),
            (Method::GET, "/nacos/v1/auth/roles"),
            (Method::POST, "/nacos/v1/auth/roles"),
            (Method::GET, "/nacos/v1/auth/roles/search"),
            (Method::GET, "/nacos/v1/auth/permissions"),
            (Method::DELETE, "/nacos/v1/auth/permissions"),
            (Method::POST, "/nacos/v1/console/namespaces"),
            (Method::PUT, "/nacos/v1/console/namespaces"),
            (Method::DELETE, "/nacos/v1/console/namespaces"),
            (Method::PATCH, "/nacos/v1/console/namespaces"),
            (
                Method::GET,
                "/nacos/v1/console/namespaces?checkNamespaceIdExist=true",
            ),
            (Method::POST, "/api/v1/cluster/members"),
            (Method::DELETE, "/api/v1/cluster/members"),
            (Method::GET, "/api/v1/sync/tasks"),
            (Method::POST, "/api/v1/sync/tasks/t/pause"),
            (Method::POST, "/api/v1/auth/rotate-key"),
            (Method::GET, "/api/v1/snapshot"),
            (Method::GET, "/api/v1/audit"),
            (Method::GET, "/nacos/v1/ns/instance/list/"),
            (Method::GET, "/whatever"),
        ] {
            assert_eq!(
                access(method.clone(), path),
                Access::Admin,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn the_rest_needs_a_caller_a_namespace_or_nothing() {
        assert_eq!(
            access(Method::GET, "/nacos/v1/console/namespaces"),
            Access::Caller
        );
        assert_eq!(
            access(
                Method::GET,
                "/nacos/v1/console/namespaces?show=all&namespaceId=x"
            ),
            Access::Namespace
        );
        assert_eq!(access(Method::PUT, "/nacos/v1/auth/users"), Access::Caller);
        assert_eq!(
            access(Method::GET, "/api/v1/events"),
            Access::NamespaceIfGiven
        );
        for path in [
            "/nacos/v2/ns/operator/metrics",
            "/nacos/v2/ns/operator/switches",
            "/nacos/v1/ns/service/selector/types",
            "/api/v1/cluster",
            "/api/v1/cluster/owner",
            "/api/v1/overview",
            "/nacos/v1/core/cluster/nodes",
        ] {
            assert_eq!(access(Method::GET, path), Access::Caller, "{path}");
        }
        // Whatever the method: probes, logins, the optional caller of the metrics.
        for method in [Method::GET, Method::POST] {
            for path in ["/health/live", "/health/ready", "/metrics"] {
                assert_eq!(access(method.clone(), path), Access::Public, "{path}");
            }
            for path in ["/nacos/v1/auth/login", "/nacos/v1/auth/users/login"] {
                assert_eq!(access(method.clone(), path), Access::Open, "{path}");
            }
            let metrics = "/nacos/v1/ns/operator/metrics";
            assert_eq!(access(method.clone(), metrics), Access::Soft);
        }
    }

    #[test]
    fn eureka_paths_need_their_app_or_the_namespace_and_renewals_are_not_audited() {
        use AuditRule::*;
        let app = |action| Access::EurekaApp(action);
        for prefix in ["/eureka", "/nacos/eureka"] {
            let at = |m: Method, p: &str| parse(m, &format!("{prefix}{p}"));
            assert_eq!(at(Method::POST, "/apps/ORDER").access(), app(Action::Write));
            assert_eq!(
                at(Method::PUT, "/apps/ORDER/i").access(),
                app(Action::Write)
            );
            assert_eq!(
                at(Method::DELETE, "/apps/ORDER/i").access(),
                app(Action::Write)
            );
            assert_eq!(
                at(Method::PUT, "/apps/O/i/status").access(),
                app(Action::Write)
            );
            assert_eq!(
                at(Method::PUT, "/apps/O/i/metadata").access(),
                app(Action::Write)
            );
            assert_eq!(at(Method::GET, "/apps/ORDER").access(), app(Action::Read));
            assert_eq!(at(Method::GET, "/apps/ORDER/i").access(), app(Action::Read));
            for path in [
                "/apps",
                "/apps/",
                "/apps/delta",
                "/instances/i",
                "/vips/v",
                "/svips/v",
            ] {
                assert_eq!(
                    at(Method::GET, path).access(),
                    Access::EurekaNamespace,
                    "{path}"
                );
            }
            // A 405 is an admin's; a path of no route too.
            assert_eq!(at(Method::POST, "/apps").access(), Access::Admin);
            assert_eq!(at(Method::GET, "/apps/a/b/c/d").access(), Access::Admin);
            assert_eq!(at(Method::PUT, "/apps/ORDER/i").audit(), Never);
            assert_eq!(at(Method::GET, "/apps").audit(), Never);
            assert_eq!(at(Method::GET, "/apps/delta").audit(), Never);
            assert_eq!(at(Method::GET, "/vips/v").audit(), IfForbidden);
            assert_eq!(at(Method::POST, "/apps/ORDER").audit(), Always);
            assert_eq!(at(Method::DELETE, "/apps/ORDER/i/status").audit(), Always);
            assert_eq!(at(Method::GET, "/apps/ORDER").area(), Area::Eureka);
            assert_eq!(at(Method::GET, "/nothing").area(), Area::Eureka);
            assert_eq!(
                at(Method::PUT, "/apps/ORDER/i").label(),
                Some("/eureka/apps/{app}/{id}")
            );
        }
        assert_eq!(
            BodyLimit::Default,
            parse(Method::POST, "/eureka/apps/A").body_limit(None)
        );
    }

    #[test]
    fn writes_are_audited_reads_when_refused_beats_and_polls_never() {
        use AuditRule::*;
        let rule = |method: Method, path: &str| parse(method, path).audit();
        assert_eq!(rule(Method::POST, "/nacos/v1/ns/instance"), Always);
        assert_eq!(rule(Method::DELETE, "/nacos/v2/ns/instance"), Always);
        assert_eq!(rule(Method::POST, "/nacos/v1/auth/login"), Always);
        assert_eq!(rule(Method::POST, "/api/v1/auth/rotate-key"), Always);
        assert_eq!(rule(Method::PUT, "/nacos/v1/ns/instance/beat"), Never);
        assert_eq!(rule(Method::PUT, "/nacos/v2/ns/instance/beat"), Never);
        assert_eq!(rule(Method::GET, "/nacos/v1/ns/instance/beat"), Never);
        assert_eq!(rule(Method::GET, "/nacos/v1/ns/instance/list"), Never);
        assert_eq!(rule(Method::OPTIONS, "/nacos/v1/ns/instance/list"), Never);
        assert_eq!(rule(Method::GET, "/api/v1/pick"), Never);
        assert_eq!(rule(Method::POST, "/nacos/v1/cs/configs/listener"), Never);
        assert_eq!(rule(Method::GET, "/nacos/v1/cs/configs/listener"), Never);
        assert_eq!(rule(Method::POST, "/nacos/v1/cs/configs"), Always);
        assert_eq!(rule(Method::DELETE, "/nacos/v2/cs/config"), Always);
        assert_eq!(rule(Method::GET, "/nacos/v1/cs/configs"), IfForbidden);
        assert_eq!(rule(Method::GET, "/api/v1/audit"), IfForbidden);
        assert_eq!(rule(Method::GET, "/nacos/v1/auth/users"), IfForbidden);
        assert_eq!(rule(Method::GET, "/whatever"), IfForbidden);
        assert_eq!(rule(Method::POST, "/whatever"), Always);
        // A backup holds password hashes and signing keys: every download is recorded.
        assert_eq!(rule(Method::GET, "/api/v1/snapshot"), Always);
        assert_eq!(rule(Method::OPTIONS, "/api/v1/snapshot"), Always);
        // A write on a read route is still a write (answered 405, and recorded).
        assert_eq!(rule(Method::POST, "/nacos/v1/ns/instance/list"), Always);
        assert_eq!(rule(Method::GET, "/"), Never);
    }

    #[test]
    fn labels_are_paths_and_task_patterns() {
        let label = |method: Method, path: &str| parse(method, path).label();
        assert_eq!(
            label(Method::GET, "/nacos/v1/ns/instance/list"),
            Some("/nacos/v1/ns/instance/list")
        );
        assert_eq!(
            label(Method::POST, "/nacos/v1/ns/instance/list"),
            Some("/nacos/v1/ns/instance/list")
        );
        assert_eq!(
            label(Method::GET, "/api/v1/sync/tasks/a"),
            Some("/api/v1/sync/tasks/{name}")
        );
        assert_eq!(
            label(Method::POST, "/api/v1/sync/tasks/a/pause"),
            Some("/api/v1/sync/tasks/{name}/pause")
        );
        assert_eq!(
            label(Method::POST, "/api/v1/sync/tasks/a/resume"),
            Some("/api/v1/sync/tasks/{name}/resume")
        );
        assert_eq!(
            label(Method::POST, "/api/v1/sync/tasks/a/apply"),
            Some("/api/v1/sync/tasks/{name}/apply")
        );
        assert_eq!(label(Method::GET, "/api/v1/sync/tasks/a/b"), None);
        assert_eq!(label(Method::GET, "/"), None);
    }

    #[test]
    fn config_paths_take_the_config_limit_and_imports_an_archive() {
        let limit = |method: Method, path: &str, query: Option<&str>| {
            Endpoint::parse(&method, path).body_limit(query)
        };
        let configs = "/nacos/v1/cs/configs";
        assert_eq!(limit(Method::POST, configs, None), BodyLimit::Config);
        assert_eq!(
            limit(Method::POST, configs, Some("a=b&import=true")),
            BodyLimit::Archive
        );
        assert_eq!(
            limit(Method::POST, "/nacos/v2/cs/config", Some("import=true")),
            BodyLimit::Config
        );
        assert_eq!(
            limit(Method::GET, "/nacos/v1/cs/nothing", None),
            BodyLimit::Config
        );
        assert_eq!(
            limit(Method::POST, "/nacos/v1/ns/instance", None),
            BodyLimit::Default
        );
        assert_eq!(
            limit(Method::GET, "/nacos/v1/csx", None),
            BodyLimit::Default
        );
    }

    async fn ok() {}

    /// The routes as axum's router held them, with a handler that answers 200.
    fn axum_router() -> axum::Router {
        let any = || post(ok).delete(ok).put(ok).patch(ok).get(ok);
        axum::Router::new()
            .route("/nacos/v1/ns/instance", any())
            .route("/nacos/v1/ns/instance/list", get(ok))
            .route("/nacos/v1/ns/instance/beat", put(ok))
            .route("/nacos/v1/ns/health/instance", put(ok))
            .route("/nacos/v1/ns/health", put(ok))
            .route("/nacos/v1/ns/service", post(ok).delete(ok).put(ok).get(ok))
            .route("/nacos/v1/cs/configs", get(ok).post(ok).delete(ok))
            .route("/nacos/v1/cs/configs/listener", post(ok).get(ok))
            .route("/nacos/v1/cs/history", get(ok))
            .route(
                "/nacos/v1/console/namespaces",
                get(ok).post(ok).put(ok).delete(ok),
            )
            .route("/nacos/v1/auth/login", post(ok))
            .route("/nacos/v1/auth/users", get(ok).post(ok).put(ok).delete(ok))
            .route("/nacos/v1/auth/roles", get(ok).post(ok).delete(ok))
            .route(
                "/nacos/v2/ns/instance",
                get(ok).post(ok).delete(ok).put(ok).patch(ok),
            )
            .route("/nacos/v2/ns/service", get(ok).post(ok).delete(ok).put(ok))
            .route("/nacos/v2/cs/config", get(ok).post(ok).delete(ok))
            .route("/api/v1/cluster/members", post(ok).delete(ok))
            .route("/api/v1/sync/tasks", get(ok).post(ok))
            .route("/api/v1/sync/tasks/{name}", get(ok).delete(ok))
            .route("/api/v1/sync/tasks/{name}/pause", post(ok))
            .route("/api/v1/auth/rotate-key", post(ok))
            .route("/health/live", get(ok))
    }

    #[tokio::test]
    async fn wrong_methods_and_unknown_paths_answer_as_axum_did() {
        let router = axum_router();
        let paths = [
            "/nacos/v1/ns/instance",
            "/nacos/v1/ns/instance/list",
            "/nacos/v1/ns/instance/beat",
            "/nacos/v1/ns/health/instance",
            "/nacos/v1/ns/health",
            "/nacos/v1/ns/service",
            "/nacos/v1/cs/configs",
            "/nacos/v1/cs/configs/listener",
            "/nacos/v1/cs/history",
            "/nacos/v1/console/namespaces",
            "/nacos/v1/auth/login",
            "/nacos/v1/auth/users",
            "/nacos/v1/auth/roles",
            "/nacos/v2/ns/instance",
            "/nacos/v2/ns/service",
            "/nacos/v2/cs/config",
            "/api/v1/cluster/members",
            "/api/v1/sync/tasks",
            "/api/v1/sync/tasks/a",
            "/api/v1/sync/tasks/a%20b",
            "/api/v1/sync/tasks/a/pause",
            "/api/v1/sync/tasks/a/b",
            "/api/v1/sync/tasks/",
            "/api/v1/sync/tasks//pause",
            "/api/v1/auth/rotate-key",
            "/health/live",
            "/health/live/",
            "/nacos/v1/ns/instance/list/",
            "/nacos/v1/ns/instance%2Flist",
            "//nacos/v1/ns/instance",
            "/NACOS/v1/ns/instance",
        ];
        let methods = [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
            Method::TRACE,
        ];
        for path in paths {
            for method in methods.clone() {
                let req = Request::builder()
                    .method(method.clone())
                    .uri(path)
                    .body(Body::empty())
                    .unwrap();
                let answer = router.clone().oneshot(req).await.unwrap();
                let endpoint = Endpoint::parse(&method, path);
                let what = format!("{method} {path}: {endpoint:?}");
                match answer.status() {
                    StatusCode::OK => assert!(
                        !matches!(
                            endpoint,
                            Endpoint::MethodNotAllowed { .. } | Endpoint::NotFound { .. }
                        ),
                        "{what}"
                    ),
                    StatusCode::METHOD_NOT_ALLOWED => {
                        let Endpoint::MethodNotAllowed { route, .. } = endpoint else {
                            panic!("{what}: 405")
                        };
                        assert_eq!(answer.headers()[header::ALLOW], route.allow(), "{what}");
                    }
                    StatusCode::NOT_FOUND => {
                        assert!(matches!(endpoint, Endpoint::NotFound { .. }), "{what}")
                    }
                    other => panic!("{what}: {other}"),
                }
            }
        }
    }

    #[test]
    fn task_names_are_percent_decoded_as_axum_did() {
        assert_eq!(percent_decoded("a%20b"), Some("a b".to_string()));
        assert_eq!(percent_decoded("a+b%2"), Some("a+b%2".to_string()));
        assert_eq!(percent_decoded("%zz%41"), Some("%zzA".to_string()));
        assert_eq!(percent_decoded("%FF"), None);
    }
}
