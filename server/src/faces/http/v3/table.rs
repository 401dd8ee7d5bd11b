//! The v3 paths ([`Path`], written once with the methods each answers) and how a method
//! and a path make an operation ([`V3::parse`], [`V3::path`]).

use super::{Parsed, Verb, V3};

macro_rules! paths {
    ($($(#[doc = $doc:literal])* $name:ident => $path:literal, $allow:literal;)*) => {
        /// A v3 path: its label in the metrics and the audit, and the methods it answers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Path {
            $($(#[doc = $doc])* $name,)*
        }

        impl Path {
            /// Every path (for tests).
            #[cfg(test)]
            pub const ALL: &'static [Path] = &[$(Path::$name,)*];

            /// The path `path` names exactly.
            pub fn of(path: &str) -> Option<Path> {
                match path {
                    $($path => Some(Path::$name),)*
                    _ => None,
                }
            }

            /// Its path: the label the metrics count it under, and the audit's action.
            pub fn path(self) -> &'static str {
                match self {
                    $(Path::$name => $path,)*
                }
            }

            /// The methods it answers, for `Allow`.
            pub fn allow(self) -> &'static str {
                match self {
                    $(Path::$name => $allow,)*
                }
            }
        }
    };
}

paths! {
    // The client API: what SDKs call.
    /// Register and deregister an instance.
    ClientInstance => "/nacos/v3/client/ns/instance", "POST,DELETE";
    /// The instances of a service.
    ClientInstanceList => "/nacos/v3/client/ns/instance/list", "GET,HEAD";
    /// A configuration item's content.
    ClientConfig => "/nacos/v3/client/cs/config", "GET,HEAD";
    // Auth.
    /// Login.
    Login => "/nacos/v3/auth/user/login", "POST";
    /// A user: create, change the password, delete.
    User => "/nacos/v3/auth/user", "POST,PUT,DELETE";
    /// Creating the first admin (roster creates it at bootstrap).
    UserAdmin => "/nacos/v3/auth/user/admin", "POST";
    /// Users, a page.
    UserList => "/nacos/v3/auth/user/list", "GET,HEAD";
    /// User names starting with a prefix.
    UserSearch => "/nacos/v3/auth/user/search", "GET,HEAD";
    /// A role binding: create, delete.
    Role => "/nacos/v3/auth/role", "POST,DELETE";
    /// Role bindings, a page.
    RoleList => "/nacos/v3/auth/role/list", "GET,HEAD";
    /// Role names starting with a prefix.
    RoleSearch => "/nacos/v3/auth/role/search", "GET,HEAD";
    /// A permission: whether it exists, create, delete.
    Permission => "/nacos/v3/auth/permission", "GET,HEAD,POST,DELETE";
    /// Permissions, a page.
    PermissionList => "/nacos/v3/auth/permission/list", "GET,HEAD";
    // Admin: core.
    /// Namespaces.
    NamespaceList => "/nacos/v3/admin/core/namespace/list", "GET,HEAD";
    /// A namespace: detail, create, update, delete.
    Namespace => "/nacos/v3/admin/core/namespace", "GET,HEAD,POST,PUT,DELETE";
    /// Whether a namespace id is taken.
    NamespaceCheck => "/nacos/v3/admin/core/namespace/check", "GET,HEAD";
    /// The cluster's members.
    ClusterNodes => "/nacos/v3/admin/core/cluster/node/list", "GET,HEAD,PUT";
    /// This member.
    ClusterSelf => "/nacos/v3/admin/core/cluster/node/self", "GET,HEAD";
    /// The member lookup mode.
    ClusterLookup => "/nacos/v3/admin/core/cluster/lookup", "PUT";
    /// The node's state: version, modes, switches.
    State => "/nacos/v3/admin/core/state", "GET,HEAD";
    /// Liveness.
    Liveness => "/nacos/v3/admin/core/state/liveness", "GET,HEAD";
    /// Readiness.
    Readiness => "/nacos/v3/admin/core/state/readiness", "GET,HEAD";
    /// Readiness, where the 3.1 maintainer client asks for it.
    OpsReadiness => "/nacos/v3/admin/core/ops/readiness", "GET,HEAD";
    /// Raft operations.
    OpsRaft => "/nacos/v3/admin/core/ops/raft", "POST";
    /// Id generators.
    OpsIds => "/nacos/v3/admin/core/ops/ids", "GET,HEAD";
    /// Log levels.
    OpsLog => "/nacos/v3/admin/core/ops/log", "PUT";
    /// This node's gRPC connections.
    LoaderCurrent => "/nacos/v3/admin/core/loader/current", "GET,HEAD";
    /// Every node's connection counts.
    LoaderCluster => "/nacos/v3/admin/core/loader/cluster", "GET,HEAD";
    /// Move connections off this node down to a count.
    LoaderReloadCurrent => "/nacos/v3/admin/core/loader/reloadCurrent", "POST";
    /// Balance connections across the cluster.
    LoaderSmartReload => "/nacos/v3/admin/core/loader/smartReloadCluster", "POST";
    /// Move one connection.
    LoaderReloadClient => "/nacos/v3/admin/core/loader/reloadClient", "POST";
    // Admin: naming.
    /// A service: detail, create, update, delete.
    Service => "/nacos/v3/admin/ns/service", "GET,HEAD,POST,PUT,DELETE";
    /// Services, a page.
    ServiceList => "/nacos/v3/admin/ns/service/list", "GET,HEAD";
    /// A service's subscribers, a page.
    ServiceSubscribers => "/nacos/v3/admin/ns/service/subscribers", "GET,HEAD";
    /// The selector types.
    SelectorTypes => "/nacos/v3/admin/ns/service/selector/types", "GET,HEAD";
    /// An instance: detail, register, update, deregister.
    Instance => "/nacos/v3/admin/ns/instance", "GET,HEAD,POST,PUT,DELETE";
    /// The instances of a service.
    InstanceList => "/nacos/v3/admin/ns/instance/list", "GET,HEAD";
    /// An update of the fields given only.
    InstancePartial => "/nacos/v3/admin/ns/instance/partial", "PUT";
    /// Metadata of many instances: update, delete keys.
    InstanceMetadataBatch => "/nacos/v3/admin/ns/instance/metadata/batch", "PUT,DELETE";
    /// A cluster's settings.
    NamingCluster => "/nacos/v3/admin/ns/cluster", "PUT";
    /// An instance's health.
    HealthInstance => "/nacos/v3/admin/ns/health/instance", "PUT";
    /// The health checkers.
    HealthCheckers => "/nacos/v3/admin/ns/health/checkers", "GET,HEAD";
    /// Naming switches.
    OpsSwitches => "/nacos/v3/admin/ns/ops/switches", "GET,HEAD,PUT";
    /// Naming metrics.
    OpsMetrics => "/nacos/v3/admin/ns/ops/metrics", "GET,HEAD";
    /// Naming log levels.
    NamingOpsLog => "/nacos/v3/admin/ns/ops/log", "PUT";
    /// Clients (connections and address clients) of this node.
    ClientList => "/nacos/v3/admin/ns/client/list", "GET,HEAD";
    /// A client.
    Client => "/nacos/v3/admin/ns/client", "GET,HEAD";
    /// What a client publishes.
    ClientPublished => "/nacos/v3/admin/ns/client/publish/list", "GET,HEAD";
    /// What a client subscribes to.
    ClientSubscribed => "/nacos/v3/admin/ns/client/subscribe/list", "GET,HEAD";
    /// The clients publishing a service.
    ServicePublishers => "/nacos/v3/admin/ns/client/service/publisher/list", "GET,HEAD";
    /// The clients subscribing to a service.
    ServiceSubscriberClients => "/nacos/v3/admin/ns/client/service/subscriber/list", "GET,HEAD";
    /// The node responsible for an address client.
    ClientDistro => "/nacos/v3/admin/ns/client/distro", "GET,HEAD";
    // Admin: configuration.
    /// An item: detail, publish, delete.
    Config => "/nacos/v3/admin/cs/config", "GET,HEAD,POST,DELETE";
    /// An item's description and tags.
    ConfigMetadata => "/nacos/v3/admin/cs/config/metadata", "PUT";
    /// Items by id.
    ConfigBatch => "/nacos/v3/admin/cs/config/batch", "DELETE";
    /// Items, a page (exact or blurred search).
    ConfigList => "/nacos/v3/admin/cs/config/list", "GET,HEAD";
    /// Who listens to an item.
    ConfigListeners => "/nacos/v3/admin/cs/config/listener", "GET,HEAD";
    /// An item's beta: detail, stop.
    ConfigBeta => "/nacos/v3/admin/cs/config/beta", "GET,HEAD,DELETE";
    /// Items imported from an archive.
    ConfigImport => "/nacos/v3/admin/cs/config/import", "POST";
    /// Items exported as an archive.
    ConfigExport => "/nacos/v3/admin/cs/config/export", "GET,HEAD";
    /// Items copied to another namespace.
    ConfigClone => "/nacos/v3/admin/cs/config/clone", "POST";
    /// An item's history, a page.
    HistoryList => "/nacos/v3/admin/cs/history/list", "GET,HEAD";
    /// A version of an item.
    History => "/nacos/v3/admin/cs/history", "GET,HEAD";
    /// The version before a version.
    HistoryPrevious => "/nacos/v3/admin/cs/history/previous", "GET,HEAD";
    /// The items of a namespace.
    HistoryConfigs => "/nacos/v3/admin/cs/history/configs", "GET,HEAD";
    /// What an address listens to.
    ListenerByIp => "/nacos/v3/admin/cs/listener", "GET,HEAD";
    /// Reload the cache from the store.
    ConfigLocalCache => "/nacos/v3/admin/cs/ops/localCache", "POST";
    /// Config log levels.
    ConfigOpsLog => "/nacos/v3/admin/cs/ops/log", "PUT";
}

impl V3 {
    /// The operation of `verb` on `path` (a path under [`PREFIX`]).
    pub fn parse(verb: Verb, path: &str) -> Parsed {
        let Some(p) = Path::of(path) else {
            return Parsed::Unknown;
        };
        use Path as P;
        use Verb::*;
        use V3 as O;
        Parsed::Op(match (p, verb) {
            (P::ClientInstance, Post) => O::ClientRegister,
            (P::ClientInstance, Delete) => O::ClientDeregister,
            (P::ClientInstanceList, Get) => O::ClientList,
            (P::ClientConfig, Get) => O::ClientConfigGet,
            (P::Login, Post) => O::Login,
            (P::User, Post) => O::UserCreate,
            (P::User, Put) => O::UserPassword,
            (P::User, Delete) => O::UserDelete,
            (P::UserAdmin, Post) => O::UserAdmin,
            (P::UserList, Get) => O::UserList,
            (P::UserSearch, Get) => O::UserSearch,
            (P::Role, Post) => O::RoleCreate,
            (P::Role, Delete) => O::RoleDelete,
            (P::RoleList, Get) => O::RoleList,
            (P::RoleSearch, Get) => O::RoleSearch,
            (P::Permission, Get) => O::PermissionExists,
            (P::Permission, Post) => O::PermissionCreate,
            (P::Permission, Delete) => O::PermissionDelete,
            (P::PermissionList, Get) => O::PermissionList,
            (P::NamespaceList, Get) => O::NamespaceList,
            (P::Namespace, Get) => O::NamespaceGet,
            (P::Namespace, Post) => O::NamespaceCreate,
            (P::Namespace, Put) => O::NamespaceUpdate,
            (P::Namespace, Delete) => O::NamespaceDelete,
            (P::NamespaceCheck, Get) => O::NamespaceCheck,
            (P::ClusterNodes, Get) => O::ClusterNodes,
            (P::ClusterNodes, Put) => O::ClusterNodesUpdate,
            (P::ClusterSelf, Get) => O::ClusterSelf,
            (P::ClusterLookup, Put) => O::ClusterLookup,
            (P::State, Get) => O::State,
            (P::Liveness, Get) => O::Liveness,
            (P::Readiness | P::OpsReadiness, Get) => O::Readiness,
            (P::OpsRaft, Post) => O::OpsRaft,
            (P::OpsIds, Get) => O::OpsIds,
            (P::OpsLog, Put) => O::OpsLog,
            (P::LoaderCurrent, Get) => O::LoaderCurrent,
            (P::LoaderCluster, Get) => O::LoaderCluster,
            (P::LoaderReloadCurrent, Post) => O::LoaderReloadCurrent,
            (P::LoaderSmartReload, Post) => O::LoaderSmartReload,
            (P::LoaderReloadClient, Post) => O::LoaderReloadClient,
            (P::Service, Get) => O::ServiceGet,
            (P::Service, Post) => O::ServiceCreate,
            (P::Service, Put) => O::ServiceUpdate,
            (P::Service, Delete) => O::ServiceDelete,
            (P::ServiceList, Get) => O::ServiceList,
            (P::ServiceSubscribers, Get) => O::ServiceSubscribers,
            (P::SelectorTypes, Get) => O::SelectorTypes,
            (P::Instance, Get) => O::InstanceGet,
            (P::Instance, Post) => O::InstanceRegister,
            (P::Instance, Put) => O::InstanceUpdate,
            (P::Instance, Delete) => O::InstanceDeregister,
            (P::InstanceList, Get) => O::InstanceList,
            (P::InstancePartial, Put) => O::InstancePartial,
            (P::InstanceMetadataBatch, Put) => O::MetadataBatchUpdate,
            (P::InstanceMetadataBatch, Delete) => O::MetadataBatchDelete,
            (P::NamingCluster, Put) => O::NamingCluster,
            (P::HealthInstance, Put) => O::HealthInstance,
            (P::HealthCheckers, Get) => O::HealthCheckers,
            (P::OpsSwitches, Get) => O::Switches,
            (P::OpsSwitches, Put) => O::SwitchesUpdate,
            (P::OpsMetrics, Get) => O::NamingMetrics,
            (P::NamingOpsLog, Put) => O::NamingLog,
            (P::ClientList, Get) => O::ClientsList,
            (P::Client, Get) => O::ClientDetail,
            (P::ClientPublished, Get) => O::ClientPublished,
            (P::ClientSubscribed, Get) => O::ClientSubscribed,
            (P::ServicePublishers, Get) => O::ServicePublishers,
            (P::ServiceSubscriberClients, Get) => O::ServiceSubscriberClients,
            (P::ClientDistro, Get) => O::ClientDistro,
            (P::Config, Get) => O::ConfigGet,
            (P::Config, Post) => O::ConfigPublish,
            (P::Config, Delete) => O::ConfigDelete,
            (P::ConfigMetadata, Put) => O::ConfigMetadata,
            (P::ConfigBatch, Delete) => O::ConfigBatchDelete,
            (P::ConfigList, Get) => O::ConfigList,
            (P::ConfigListeners, Get) => O::ConfigListeners,
            (P::ConfigBeta, Get) => O::BetaGet,
            (P::ConfigBeta, Delete) => O::BetaStop,
            (P::ConfigImport, Post) => O::ConfigImport,
            (P::ConfigExport, Get) => O::ConfigExport,
            (P::ConfigClone, Post) => O::ConfigClone,
            (P::HistoryList, Get) => O::HistoryList,
            (P::History, Get) => O::HistoryGet,
            (P::HistoryPrevious, Get) => O::HistoryPrevious,
            (P::HistoryConfigs, Get) => O::HistoryConfigs,
            (P::ListenerByIp, Get) => O::ListenerByIp,
            (P::ConfigLocalCache, Post) => O::ConfigLocalCache,
            (P::ConfigOpsLog, Put) => O::ConfigLog,
            (p, _) => return Parsed::NotAllowed(p),
        })
    }

    /// Its path.
    pub fn path(self) -> Path {
        use Path as P;
        use V3 as O;
        match self {
            O::ClientRegister | O::ClientDeregister => P::ClientInstance,
            O::ClientList => P::ClientInstanceList,
            O::ClientConfigGet => P::ClientConfig,
            O::Login => P::Login,
            O::UserCreate | O::UserPassword | O::UserDelete => P::User,
            O::UserAdmin => P::UserAdmin,
            O::UserList => P::UserList,
            O::UserSearch => P::UserSearch,
            O::RoleCreate | O::RoleDelete => P::Role,
            O::RoleList => P::RoleList,
            O::RoleSearch => P::RoleSearch,
            O::PermissionExists | O::PermissionCreate | O::PermissionDelete => P::Permission,
            O::PermissionList => P::PermissionList,
            O::NamespaceList => P::NamespaceList,
            O::NamespaceGet | O::NamespaceCreate | O::NamespaceUpdate | O::NamespaceDelete => {
                P::Namespace
            }
            O::NamespaceCheck => P::NamespaceCheck,
            O::ClusterNodes | O::ClusterNodesUpdate => P::ClusterNodes,
            O::ClusterSelf => P::ClusterSelf,
            O::ClusterLookup => P::ClusterLookup,
            O::State => P::State,
            O::Liveness => P::Liveness,
            O::Readiness => P::Readiness,
            O::OpsRaft => P::OpsRaft,
            O::OpsIds => P::OpsIds,
            O::OpsLog => P::OpsLog,
            O::LoaderCurrent => P::LoaderCurrent,
            O::LoaderCluster => P::LoaderCluster,
            O::LoaderReloadCurrent => P::LoaderReloadCurrent,
            O::LoaderSmartReload => P::LoaderSmartReload,
            O::LoaderReloadClient => P::LoaderReloadClient,
            O::ServiceGet | O::ServiceCreate | O::ServiceUpdate | O::ServiceDelete => P::Service,
            O::ServiceList => P::ServiceList,
            O::ServiceSubscribers => P::ServiceSubscribers,
            O::SelectorTypes => P::SelectorTypes,
            O::InstanceGet | O::InstanceRegister | O::InstanceUpdate | O::InstanceDeregister => {
                P::Instance
            }
            O::InstanceList => P::InstanceList,
            O::InstancePartial => P::InstancePartial,
            O::MetadataBatchUpdate | O::MetadataBatchDelete => P::InstanceMetadataBatch,
            O::NamingCluster => P::NamingCluster,
            O::HealthInstance => P::HealthInstance,
            O::HealthCheckers => P::HealthCheckers,
            O::Switches | O::SwitchesUpdate => P::OpsSwitches,
            O::NamingMetrics => P::OpsMetrics,
            O::NamingLog => P::NamingOpsLog,
            O::ClientsList => P::ClientList,
            O::ClientDetail => P::Client,
            O::ClientPublished => P::ClientPublished,
            O::ClientSubscribed => P::ClientSubscribed,
            O::ServicePublishers => P::ServicePublishers,
            O::ServiceSubscriberClients => P::ServiceSubscriberClients,
            O::ClientDistro => P::ClientDistro,
            O::ConfigGet | O::ConfigPublish | O::ConfigDelete => P::Config,
            O::ConfigMetadata => P::ConfigMetadata,
            O::ConfigBatchDelete => P::ConfigBatch,
            O::ConfigList => P::ConfigList,
            O::ConfigListeners => P::ConfigListeners,
            O::BetaGet | O::BetaStop => P::ConfigBeta,
            O::ConfigImport => P::ConfigImport,
            O::ConfigExport => P::ConfigExport,
            O::ConfigClone => P::ConfigClone,
            O::HistoryList => P::HistoryList,
            O::HistoryGet => P::History,
            O::HistoryPrevious => P::HistoryPrevious,
            O::HistoryConfigs => P::HistoryConfigs,
            O::ListenerByIp => P::ListenerByIp,
            O::ConfigLocalCache => P::ConfigLocalCache,
            O::ConfigLog => P::ConfigOpsLog,
        }
    }
}
