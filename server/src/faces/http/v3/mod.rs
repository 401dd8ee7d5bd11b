//! Nacos 3's HTTP API (`/nacos/v3/...`): the client API (`client/ns`, `client/cs`), the
//! admin API (`admin/ns`, `admin/cs`, `admin/core`) and the auth API (`auth/...`), as
//! Nacos 3 shapes them: its paths and parameters (`namespaceId`, `groupName`, `dataId`,
//! `serviceName`; the namespace `public` spelled out), answers in the
//! `{code, message, data}` envelope, Nacos' error codes.
//!
//! The table is [`V3`]: one value per operation, parsed once from the method and the
//! path ([`V3::parse`]); what it needs of a caller ([`V3::access`]), whether it is
//! audited ([`V3::audit`]), its metric label ([`Path::path`]) and its handler
//! ([`V3::serve`]) are `match`es on it, as the rest of the HTTP face's are
//! (`super::endpoint`). Handlers are by area: [`client`], [`auth`], [`core`],
//! [`naming`] (with the view of clients, [`clients`]) and [`config`]. They reuse the
//! v1 and v2 operations underneath: one registry, one store, whichever face writes.
//!
//! What Nacos 3 has and roster does not serve answers 501 in the envelope, saying why
//! ([`not_served`]); the README lists those routes.

pub mod auth;
pub mod client;
pub mod clients;
pub mod config;
pub mod core;
pub mod naming;
mod policy;
mod table;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::endpoint::Answer;
use crate::state::AppState;
pub use table::Path;

/// Where every v3 path starts.
pub const PREFIX: &str = "/nacos/v3/";

/// One operation of the v3 API.
#[allow(missing_docs)] // Each is its path's method, named in `V3::parse`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum V3 {
    ClientRegister,
    ClientDeregister,
    ClientList,
    ClientConfigGet,
    Login,
    UserCreate,
    UserPassword,
    UserDelete,
    UserAdmin,
    UserList,
    UserSearch,
    RoleCreate,
    RoleDelete,
    RoleList,
    RoleSearch,
    PermissionExists,
    PermissionCreate,
    PermissionDelete,
    PermissionList,
    NamespaceList,
    NamespaceGet,
    NamespaceCreate,
    NamespaceUpdate,
    NamespaceDelete,
    NamespaceCheck,
    ClusterNodes,
    ClusterNodesUpdate,
    ClusterSelf,
    ClusterLookup,
    State,
    Liveness,
    Readiness,
    OpsRaft,
    OpsIds,
    OpsLog,
    LoaderCurrent,
    LoaderCluster,
    LoaderReloadCurrent,
    LoaderSmartReload,
    LoaderReloadClient,
    ServiceGet,
    ServiceCreate,
    ServiceUpdate,
    ServiceDelete,
    ServiceList,
    ServiceSubscribers,
    SelectorTypes,
    InstanceGet,
    InstanceRegister,
    InstanceUpdate,
    InstanceDeregister,
    InstanceList,
    InstancePartial,
    MetadataBatchUpdate,
    MetadataBatchDelete,
    NamingCluster,
    HealthInstance,
    HealthCheckers,
    Switches,
    SwitchesUpdate,
    NamingMetrics,
    NamingLog,
    ClientsList,
    ClientDetail,
    ClientPublished,
    ClientSubscribed,
    ServicePublishers,
    ServiceSubscriberClients,
    ClientDistro,
    ConfigGet,
    ConfigPublish,
    ConfigDelete,
    ConfigMetadata,
    ConfigBatchDelete,
    ConfigList,
    ConfigListeners,
    BetaGet,
    BetaStop,
    ConfigImport,
    ConfigExport,
    ConfigClone,
    HistoryList,
    HistoryGet,
    HistoryPrevious,
    HistoryConfigs,
    ListenerByIp,
    ConfigLocalCache,
    ConfigLog,
}

/// The methods as v3 paths tell them apart: `HEAD` is `GET`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `GET` or `HEAD`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
    /// Any other.
    Other,
}

/// What a v3 path and method are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// An operation.
    Op(V3),
    /// A known path, a method it does not answer.
    NotAllowed(Path),
    /// No such path.
    Unknown,
}

/// Which handlers' file serves an operation (and what the guard and the audit make of
/// it: [`V3::is_config`], [`V3::is_users`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// The client API's instances and configuration query (`client.rs`).
    Client,
    /// Login, users, roles, permissions (`auth.rs`).
    Auth,
    /// Namespaces, members, state, the loader (`core.rs`).
    Core,
    /// The view of clients (`clients.rs`).
    Clients,
    /// Naming admin (`naming.rs`).
    Naming,
    /// Configuration admin (`config/`).
    Config,
}

impl V3 {
    /// The handlers' file it is served by.
    pub fn area(self) -> Area {
        use V3 as O;
        match self {
            O::ClientRegister | O::ClientDeregister | O::ClientList | O::ClientConfigGet => {
                Area::Client
            }
            O::Login
            | O::UserCreate
            | O::UserPassword
            | O::UserDelete
            | O::UserAdmin
            | O::UserList
            | O::UserSearch
            | O::RoleCreate
            | O::RoleDelete
            | O::RoleList
            | O::RoleSearch
            | O::PermissionExists
            | O::PermissionCreate
            | O::PermissionDelete
            | O::PermissionList => Area::Auth,
            O::NamespaceList
            | O::NamespaceGet
            | O::NamespaceCreate
            | O::NamespaceUpdate
            | O::NamespaceDelete
            | O::NamespaceCheck
            | O::ClusterNodes
            | O::ClusterNodesUpdate
            | O::ClusterSelf
            | O::ClusterLookup
            | O::State
            | O::Liveness
            | O::Readiness
            | O::OpsRaft
            | O::OpsIds
            | O::OpsLog
            | O::LoaderCurrent
            | O::LoaderCluster
            | O::LoaderReloadCurrent
            | O::LoaderSmartReload
            | O::LoaderReloadClient => Area::Core,
            O::ClientsList
            | O::ClientDetail
            | O::ClientPublished
            | O::ClientSubscribed
            | O::ServicePublishers
            | O::ServiceSubscriberClients
            | O::ClientDistro => Area::Clients,
            O::ServiceGet
            | O::ServiceCreate
            | O::ServiceUpdate
            | O::ServiceDelete
            | O::ServiceList
            | O::ServiceSubscribers
            | O::SelectorTypes
            | O::InstanceGet
            | O::InstanceRegister
            | O::InstanceUpdate
            | O::InstanceDeregister
            | O::InstanceList
            | O::InstancePartial
            | O::MetadataBatchUpdate
            | O::MetadataBatchDelete
            | O::NamingCluster
            | O::HealthInstance
            | O::HealthCheckers
            | O::Switches
            | O::SwitchesUpdate
            | O::NamingMetrics
            | O::NamingLog => Area::Naming,
            O::ConfigGet
            | O::ConfigPublish
            | O::ConfigDelete
            | O::ConfigMetadata
            | O::ConfigBatchDelete
            | O::ConfigList
            | O::ConfigListeners
            | O::BetaGet
            | O::BetaStop
            | O::ConfigImport
            | O::ConfigExport
            | O::ConfigClone
            | O::HistoryList
            | O::HistoryGet
            | O::HistoryPrevious
            | O::HistoryConfigs
            | O::ListenerByIp
            | O::ConfigLocalCache
            | O::ConfigLog => Area::Config,
        }
    }

    /// Its handler, called with the request (its parameters and caller in its
    /// extensions).
    pub fn serve(self, req: Request, state: AppState) -> Answer {
        match self.area() {
            Area::Client => client::serve(self, req, state),
            Area::Auth => auth::serve(self, req, state),
            Area::Core => core::serve(self, req, state),
            Area::Clients => clients::serve(self, req, state),
            Area::Naming => naming::serve(self, req, state),
            Area::Config => config::serve(self, req, state),
        }
    }
}

/// The answer to an operation Nacos 3 has and roster does not serve: 501 in the
/// envelope, `data` saying why (and what to use instead).
pub fn not_served(why: &'static str) -> Response {
    (
        StatusCode::NOT_IMPLEMENTED,
        Json(json!({ "code": 501, "message": "not served by roster", "data": why })),
    )
        .into_response()
}

/// [`not_served`] as a handler's answer.
pub fn answer_not_served(why: &'static str) -> Answer {
    Box::pin(std::future::ready(not_served(why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_one_operation_s_at_least_and_each_operation_is_on_its_path() {
        for &path in Path::ALL {
            assert!(path.path().starts_with(PREFIX), "{path:?}");
            let mut served = 0;
            for verb in [Verb::Get, Verb::Post, Verb::Put, Verb::Delete] {
                match V3::parse(verb, path.path()) {
                    Parsed::Op(op) => {
                        served += 1;
                        // Readiness answers on two paths.
                        if path != Path::OpsReadiness {
                            assert_eq!(op.path(), path, "{op:?}");
                        }
                        assert_eq!(op.is_get(), verb == Verb::Get, "{op:?}");
                        let method = match verb {
                            Verb::Get => "GET",
                            Verb::Post => "POST",
                            Verb::Put => "PUT",
                            _ => "DELETE",
                        };
                        assert!(path.allow().split(',').any(|m| m == method), "{op:?}");
                    }
                    Parsed::NotAllowed(p) => assert_eq!(p, path),
                    Parsed::Unknown => panic!("{path:?} unknown"),
                }
            }
            assert!(served > 0, "{path:?}");
            assert_eq!(
                V3::parse(Verb::Other, path.path()),
                Parsed::NotAllowed(path)
            );
        }
        assert_eq!(V3::parse(Verb::Get, "/nacos/v3/nothing"), Parsed::Unknown);
    }
}
