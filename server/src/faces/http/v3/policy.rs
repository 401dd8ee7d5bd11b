//! What each v3 operation is to the guard, the audit and the body limit: matches on
//! [`V3`].

use super::{Area, V3};
use crate::faces::http::endpoint::{Access, AuditRule};
use crate::services::auth::permissions::Action;

impl V3 {
    /// Whether it reads (served for `GET` and `HEAD`).
    pub fn is_get(self) -> bool {
        use V3 as O;
        matches!(
            self,
            O::ClientList
                | O::ClientConfigGet
                | O::UserList
                | O::UserSearch
                | O::RoleList
                | O::RoleSearch
                | O::PermissionExists
                | O::PermissionList
                | O::NamespaceList
                | O::NamespaceGet
                | O::NamespaceCheck
                | O::ClusterNodes
                | O::ClusterSelf
                | O::State
                | O::Liveness
                | O::Readiness
                | O::OpsIds
                | O::LoaderCurrent
                | O::LoaderCluster
                | O::ServiceGet
                | O::ServiceList
                | O::ServiceSubscribers
                | O::SelectorTypes
                | O::InstanceGet
                | O::InstanceList
                | O::HealthCheckers
                | O::Switches
                | O::NamingMetrics
                | O::ClientsList
                | O::ClientDetail
                | O::ClientPublished
                | O::ClientSubscribed
                | O::ServicePublishers
                | O::ServiceSubscriberClients
                | O::ClientDistro
                | O::ConfigGet
                | O::ConfigList
                | O::ConfigListeners
                | O::BetaGet
                | O::ConfigExport
                | O::HistoryList
                | O::HistoryGet
                | O::HistoryPrevious
                | O::HistoryConfigs
                | O::ListenerByIp
        )
    }

    /// Whether it is the configuration API's (a larger body; the audit's target is an
    /// item): the config admin's, and the client API's config query.
    pub fn is_config(self) -> bool {
        self.area() == Area::Config || self == V3::ClientConfigGet
    }

    /// Whether it is the auth API's users, roles and permissions (the audit's target is
    /// a user or a role).
    pub fn is_users(self) -> bool {
        self.area() == Area::Auth && self != V3::Login
    }

    /// What it needs of a caller who is not an admin: `r` or `w` on the service or item
    /// its parameters name, read of the namespace it lists, or to be authenticated (the
    /// handler leaves out what the caller may not read); the state probes are public, the
    /// login open; users, roles, permissions, namespace changes, the cluster's members,
    /// the connections and the view of clients are for admins.
    pub fn access(self) -> Access {
        use Action::{Read, Write};
        use V3 as O;
        let config = |action| Access::Config {
            action,
            tenant: "namespaceId",
            group: "groupName",
        };
        match self {
            O::State | O::Liveness | O::Readiness => Access::Public,
            O::Login => Access::Open,
            O::ClientList
            | O::ServiceGet
            | O::ServiceSubscribers
            | O::InstanceGet
            | O::InstanceList => Access::Service(Read),
            O::ClientRegister
            | O::ClientDeregister
            | O::ServiceCreate
            | O::ServiceUpdate
            | O::ServiceDelete
            | O::InstanceRegister
            | O::InstanceUpdate
            | O::InstanceDeregister
            | O::InstancePartial
            | O::MetadataBatchUpdate
            | O::MetadataBatchDelete
            | O::NamingCluster
            | O::HealthInstance => Access::Service(Write),
            O::ServiceList => Access::Namespace,
            O::ClientConfigGet
            | O::ConfigGet
            | O::ConfigListeners
            | O::BetaGet
            | O::HistoryList
            | O::HistoryGet
            | O::HistoryPrevious => config(Read),
            O::ConfigPublish | O::ConfigDelete | O::ConfigMetadata | O::BetaStop => config(Write),
            // Listings, filtered to the items the caller may read.
            O::ConfigList | O::ConfigExport | O::HistoryConfigs => {
                Access::ConfigNamespace("namespaceId")
            }
            // Filtered to the namespaces the caller may read.
            O::NamespaceList => Access::Caller,
            O::NamespaceGet | O::NamespaceCheck => Access::Namespace,
            // The handler lets users change their own password.
            O::UserPassword => Access::Caller,
            // The cluster's shape and what clients probe: nothing of any namespace.
            O::ClusterNodes
            | O::ClusterSelf
            | O::SelectorTypes
            | O::HealthCheckers
            | O::Switches
            | O::NamingMetrics => Access::Caller,
            O::UserCreate
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
            | O::PermissionList
            | O::NamespaceCreate
            | O::NamespaceUpdate
            | O::NamespaceDelete
            | O::ClusterNodesUpdate
            | O::ClusterLookup
            | O::OpsRaft
            | O::OpsIds
            | O::OpsLog
            | O::LoaderCurrent
            | O::LoaderCluster
            | O::LoaderReloadCurrent
            | O::LoaderSmartReload
            | O::LoaderReloadClient
            | O::SwitchesUpdate
            | O::NamingLog
            | O::ClientsList
            | O::ClientDetail
            | O::ClientPublished
            | O::ClientSubscribed
            | O::ServicePublishers
            | O::ServiceSubscriberClients
            | O::ClientDistro
            | O::ConfigBatchDelete
            | O::ConfigImport
            | O::ConfigClone
            | O::ListenerByIp
            | O::ConfigLocalCache
            | O::ConfigLog => Access::Admin,
        }
    }

    /// Whether it is audited: every write, whatever its answer; reads when answered
    /// 403; never the instance list and the state probes (polled).
    pub fn audit(self) -> AuditRule {
        match self {
            V3::ClientList | V3::State | V3::Liveness | V3::Readiness => AuditRule::Never,
            op if op.is_get() => AuditRule::IfForbidden,
            _ => AuditRule::Always,
        }
    }
}
