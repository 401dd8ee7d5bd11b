//! What an endpoint needs of the guard, the audit and the body limit: [`Access`],
//! [`AuditRule`], [`BodyLimit`], each a `match` on [`Endpoint`] (and, for methods a
//! route does not answer, on its [`Route`]).

use super::super::consul::Op as ConsulOp;
use super::super::eureka::Op;
use super::{Area, Endpoint, Route};
use crate::services::auth::permissions::Action;

/// What an endpoint needs of its caller: for the guard's stages (readiness,
/// authentication) and, for a caller who is not an admin, the permission checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Answered before the node is ready and without authentication (probes,
    /// scrapers, the console's files): they reveal counts, never data.
    Public,
    /// No authentication once the node is ready (logins).
    Open,
    /// Authentication optional: clients probe it for `{"status":"UP"}`; its detailed
    /// form requires a caller and checks for one.
    Soft,
    /// Any authenticated caller (lists leave out what the caller may not read).
    Caller,
    /// Anyone: without credentials the caller is anonymous and may read nothing a
    /// permission guards (Consul's reads, as its anonymous token); credentials given
    /// must be good (401 otherwise).
    Anonymous,
    /// An admin.
    Admin,
    /// This action on the service named by `namespaceId`, `groupName`, `serviceName`.
    Service(Action),
    /// Reading something of the namespace `namespaceId` (default `public`).
    Namespace,
    /// Reading something of `namespaceId` when given (the event stream).
    NamespaceIfGiven,
    /// This action on the configuration item named by `dataId`, the group in the
    /// parameter `group` names and the namespace in the parameter `tenant` names (v1:
    /// `tenant` and `group`, v2: `namespaceId` and `group`, v3: `namespaceId` and
    /// `groupName`).
    Config {
        /// Read or write.
        action: Action,
        /// The parameter naming the namespace.
        tenant: &'static str,
        /// The parameter naming the group.
        group: &'static str,
    },
    /// Reading something of the namespace this parameter names (default `public`):
    /// config listings (v1: `tenant`, v3: `namespaceId`).
    ConfigNamespace(&'static str),
    /// This action on the service of the application a Eureka path names, in the
    /// namespace and group of Eureka's applications (`--eureka-namespace`,
    /// `--eureka-group`).
    EurekaApp(Action),
    /// Reading something of the namespace of Eureka's applications (the listings leave
    /// out the services the caller may not read).
    EurekaNamespace,
}

/// Whether a request is audited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditRule {
    /// Whatever the answer (writes, admin actions).
    Always,
    /// When answered 403 (reads).
    IfForbidden,
    /// Never (heartbeats, the reads clients poll, the console's files).
    Never,
}

/// The largest body an endpoint takes (the settings say how large each is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLimit {
    /// `--max-body-bytes`.
    Default,
    /// The configuration API's: a content percent-encoded in full fits.
    Config,
    /// A configuration import's archive (streamed: a form never is one).
    Archive,
}

impl Endpoint {
    /// What it needs of a caller. Reads of a service or an item need `r` on it,
    /// everything else done to it `w`; users, roles, permissions, namespace changes,
    /// cluster members, sync tasks, key rotation, the audit, snapshots — and any path of
    /// no route — are for admins.
    pub fn access(&self) -> Access {
        use Action::{Read, Write};
        use Endpoint as E;
        let config = |action| Access::Config {
            action,
            tenant: "tenant",
            group: "group",
        };
        let config_v2 = |action| Access::Config {
            action,
            tenant: "namespaceId",
            group: "group",
        };
        match self {
            E::Console | E::Live | E::Ready | E::Metrics => Access::Public,
            E::Login | E::UsersLogin => Access::Open,
            E::OperatorMetrics => Access::Soft,
            E::InstanceDetail
            | E::InstanceList
            | E::ServiceDetail
            | E::Subscribers
            | E::CatalogService
            | E::CatalogInstances
            | E::V2InstanceDetail
            | E::V2InstanceList
            | E::V2ServiceDetail
            | E::Instances
            | E::Pick => Access::Service(Read),
            E::InstanceRegister
            | E::InstanceDeregister
            | E::InstanceUpdate
            | E::InstanceBeat
            | E::InstanceHealth
            | E::Health
            | E::ServiceCreate
            | E::ServiceDelete
            | E::ServiceUpdate
            | E::NamingCluster
            | E::V2InstanceRegister
            | E::V2InstanceDeregister
            | E::V2InstanceUpdate
            | E::V2InstanceBeat
            | E::V2InstanceHealth
            | E::V2ServiceCreate
            | E::V2ServiceDelete
            | E::V2ServiceUpdate => Access::Service(Write),
            // Filtered to the services the caller may read.
            E::ServiceList | E::CatalogServices | E::V2ServiceList => Access::Namespace,
            // Filtered to the namespaces the caller may read.
            E::NamespaceList => Access::Caller,
            E::NamespaceShow => Access::Namespace,
            E::ConfigGet | E::ConfigListeners | E::History | E::HistoryPrevious => config(Read),
            E::ConfigPublish | E::ConfigDelete => config(Write),
            E::V2ConfigGet => config_v2(Read),
            E::V2ConfigPublish | E::V2ConfigDelete => config_v2(Write),
            // Listings and exports, filtered to the items the caller may read.
            E::ConfigSearch | E::ConfigExport | E::HistoryConfigs => {
                Access::ConfigNamespace("tenant")
            }
            // The handler checks every item listened to (it parses the list anyway).
            E::ConfigListen => Access::Caller,
            // The handler lets users change their own password (with the old one).
            E::UserPassword => Access::Caller,
            // `service` and `namespace` events are filtered per event.
            E::Events => Access::NamespaceIfGiven,
            // Filtered to the services the caller may read.
            E::PrometheusSd(_) => Access::Caller,
            // What clients probe, and the cluster's shape: nothing of any namespace.
            E::SelectorTypes
            | E::OperatorSwitches
            | E::V2OperatorMetrics
            | E::V2OperatorSwitches
            | E::ClusterStatus
            | E::ClusterOwner
            | E::Overview
            | E::CoreClusterNodes => Access::Caller,
            // An import writes many items at once, from a large body.
            E::ConfigImport
            | E::NamespaceCheck
            | E::NamespaceCreate
            | E::NamespaceUpdate
            | E::NamespaceDelete
            | E::UserList
            | E::UserCreate
            | E::UserDelete
            | E::UserSearch
            | E::RoleList
            | E::RoleAdd
            | E::RoleDelete
            | E::RoleSearch
            | E::PermissionList
            | E::PermissionAdd
            | E::PermissionDelete
            | E::ClusterAddMember
            | E::ClusterRemoveMember
            | E::RotateKey
            | E::Audit
            | E::Clients
            | E::ApiTokenList
            | E::ApiTokenCreate
            | E::ApiTokenRevoke
            | E::Snapshot
            | E::SyncTaskList
            | E::SyncTaskCreate
            | E::SyncTaskShow(_)
            | E::SyncTaskDelete(_)
            | E::SyncTaskPause(_)
            | E::SyncTaskResume(_)
            | E::SyncTaskApply(_) => Access::Admin,
            // Consul's paths of no route (its KV store, sessions, ...): any caller is
            // told that roster does not serve them.
            E::NotFound {
                area: Area::Consul, ..
            } => Access::Caller,
            E::NotFound { .. } => Access::Admin,
            // The handlers check the service a call names (a registration names it in
            // its body, a check by its id) and leave out of listings what the caller
            // may not read — everything, for an anonymous reader (Consul clients read
            // the leader and the catalog without their token: Spring Cloud Consul's
            // health indicator does).
            E::Consul(call) if call.op.reads() => Access::Anonymous,
            E::Consul(_) => Access::Caller,
            E::MethodNotAllowed { route, .. } => route.access_of_other_methods(),
            E::V3(op) => op.access(),
            E::Eureka(call) => match (call.op.names_app(), call.op.reads()) {
                (true, true) => Access::EurekaApp(Read),
                (true, false) => Access::EurekaApp(Write),
                (false, _) => Access::EurekaNamespace,
            },
            // An admin's, whatever the path: a 405 reveals nothing to anyone else.
            E::V3NotAllowed { .. } => Access::Admin,
        }
    }

    /// Whether HTTP Basic credentials count, beside tokens: on the routes whose clients
    /// send them — Eureka's (`user:password@` in `defaultZone`) and Prometheus service
    /// discovery (Nacos guards it with Basic; Prometheus' `basic_auth`).
    pub fn takes_basic(&self) -> bool {
        matches!(self.area(), Area::Eureka | Area::Consul)
            || matches!(self, Endpoint::PrometheusSd(_))
    }

    /// Whether it is audited: every request other than a read, whatever its answer,
    /// but heartbeats; reads only when answered 403; never the routes clients poll
    /// (instance lists, `/api/v1/instances`, `/api/v1/pick`, the config long poll):
    /// a client left with an expired token would fill the trail.
    pub fn audit(&self) -> AuditRule {
        match self {
            Endpoint::Console => AuditRule::Never,
            Endpoint::NotFound { reads: true, .. } => AuditRule::IfForbidden,
            Endpoint::NotFound { reads: false, .. } => AuditRule::Always,
            Endpoint::MethodNotAllowed { route, reads } => route.audit(*reads),
            Endpoint::V3(op) => op.audit(),
            // Renewals are heartbeats; the registry and its deltas are what clients poll.
            Endpoint::Eureka(call) => match call.op {
                Op::Renew | Op::Apps | Op::Delta | Op::App => AuditRule::Never,
                op if op.reads() => AuditRule::IfForbidden,
                _ => AuditRule::Always,
            },
            // Checks' reports are heartbeats; the catalog and health reads are what
            // clients poll (blocking queries).
            Endpoint::Consul(call) => match call.op {
                op if op.is_check_report() => AuditRule::Never,
                ConsulOp::CatalogServices
                | ConsulOp::CatalogService
                | ConsulOp::HealthService
                | ConsulOp::HealthChecks => AuditRule::Never,
                op if op.reads() => AuditRule::IfForbidden,
                _ => AuditRule::Always,
            },
            Endpoint::V3NotAllowed { reads: true, .. } => AuditRule::IfForbidden,
            Endpoint::V3NotAllowed { reads: false, .. } => AuditRule::Always,
            // Every other endpoint reads exactly when its method is `GET` (or `HEAD`).
            other => match other.route() {
                Some(route) => route.audit(other.is_get()),
                None => AuditRule::Never,
            },
        }
    }

    /// Whether it is served by a `GET` handler.
    fn is_get(&self) -> bool {
        use Endpoint as E;
        matches!(
            self,
            E::Live
                | E::Ready
                | E::Metrics
                | E::PrometheusSd(_)
                | E::InstanceDetail
                | E::InstanceList
                | E::ServiceDetail
                | E::ServiceList
                | E::SelectorTypes
                | E::Subscribers
                | E::CatalogServices
                | E::CatalogService
                | E::CatalogInstances
                | E::OperatorMetrics
                | E::OperatorSwitches
                | E::ConfigGet
                | E::ConfigSearch
                | E::ConfigExport
                | E::ConfigListeners
                | E::History
                | E::HistoryPrevious
                | E::HistoryConfigs
                | E::NamespaceList
                | E::NamespaceShow
                | E::NamespaceCheck
                | E::UserList
                | E::UserSearch
                | E::RoleList
                | E::RoleSearch
                | E::PermissionList
                | E::CoreClusterNodes
                | E::V2InstanceDetail
                | E::V2InstanceList
                | E::V2ServiceDetail
                | E::V2ServiceList
                | E::V2OperatorMetrics
                | E::V2OperatorSwitches
                | E::V2ConfigGet
                | E::ClusterStatus
                | E::ClusterOwner
                | E::Instances
                | E::Pick
                | E::Events
                | E::Audit
                | E::Snapshot
                | E::Overview
                | E::Clients
                | E::ApiTokenList
                | E::SyncTaskList
                | E::SyncTaskShow(_)
        )
    }

    /// The largest body it takes, before its parameters are read (`query`: the raw
    /// query string, where a configuration import says so: the archive streams to
    /// its handler, any method of the path may carry one and it is refused there).
    pub fn body_limit(&self, query: Option<&str>) -> BodyLimit {
        let import = || query.is_some_and(|q| q.split('&').any(|p| p == "import=true"));
        if (self.route() == Some(Route::Configs) && import())
            || *self == Endpoint::V3(super::V3::ConfigImport)
        {
            BodyLimit::Archive
        } else if self.area().is_config() {
            BodyLimit::Config
        } else {
            BodyLimit::Default
        }
    }
}

impl Route {
    /// What a method the route does not answer needs (the guard answers before the
    /// 405): what the route's other methods need, whatever the method.
    fn access_of_other_methods(self) -> Access {
        use Action::{Read, Write};
        use Route as R;
        match self {
            R::Live | R::Ready | R::Metrics => Access::Public,
            R::Login | R::UsersLogin => Access::Open,
            R::OperatorMetrics => Access::Soft,
            R::Instance
            | R::Service
            | R::V2Instance
            | R::V2Service
            | R::InstanceBeat
            | R::V2InstanceBeat
            | R::HealthInstance
            | R::Health
            | R::V2HealthInstance
            | R::NamingCluster => Access::Service(Write),
            R::InstanceList
            | R::V2InstanceList
            | R::CatalogService
            | R::CatalogInstances
            | R::Subscribers
            | R::Instances
            | R::Pick => Access::Service(Read),
            R::ServiceList | R::V2ServiceList | R::CatalogServices => Access::Namespace,
            R::Configs => Access::Config {
                action: Write,
                tenant: "tenant",
                group: "group",
            },
            R::V2Config => Access::Config {
                action: Write,
                tenant: "namespaceId",
                group: "group",
            },
            R::ConfigListener
            | R::PrometheusSd
            | R::PrometheusSdNamespace
            | R::PrometheusSdService => Access::Caller,
            R::Events => Access::NamespaceIfGiven,
            R::SelectorTypes
            | R::OperatorSwitches
            | R::V2OperatorMetrics
            | R::V2OperatorSwitches
            | R::Cluster
            | R::ClusterOwner
            | R::Overview
            | R::CoreClusterNodes => Access::Caller,
            R::History
            | R::HistoryPrevious
            | R::HistoryConfigs
            | R::Namespaces
            | R::Users
            | R::UsersSearch
            | R::Roles
            | R::RolesSearch
            | R::Permissions
            | R::ClusterMembers
            | R::RotateKey
            | R::Audit
            | R::Clients
            | R::ApiTokens
            | R::Snapshot
            | R::SyncTasks
            | R::SyncTask
            | R::SyncTaskPause
            | R::SyncTaskResume
            | R::SyncTaskApply => Access::Admin,
            // As Nacos 3's: a 405 of Eureka's reveals nothing to anyone but an admin.
            R::EurekaApps
            | R::EurekaDelta
            | R::EurekaApp
            | R::EurekaInstance
            | R::EurekaStatus
            | R::EurekaMetadata
            | R::EurekaInstanceById
            | R::EurekaVip
            | R::EurekaSvip => Access::Admin,
            // Consul's 405s: any caller (its clients' methods are PUT and GET).
            R::ConsulRegister
            | R::ConsulDeregister
            | R::ConsulMaintenance
            | R::ConsulAgentService
            | R::ConsulAgentServices
            | R::ConsulAgentChecks
            | R::ConsulCheckPass
            | R::ConsulCheckWarn
            | R::ConsulCheckFail
            | R::ConsulCheckUpdate
            | R::ConsulAgentSelf
            | R::ConsulDatacenters
            | R::ConsulCatalogServices
            | R::ConsulCatalogService
            | R::ConsulCatalogNodes
            | R::ConsulCatalogNode
            | R::ConsulHealthService
            | R::ConsulHealthChecks
            | R::ConsulHealthNode
            | R::ConsulHealthState
            | R::ConsulLeader
            | R::ConsulPeers => Access::Caller,
        }
    }

    /// Whether a request to the route is audited, by whether its method reads.
    fn audit(self, reads: bool) -> AuditRule {
        use Route as R;
        match self {
            // Heartbeats (their volume: one per instance every 5 s) and the long poll.
            R::InstanceBeat | R::V2InstanceBeat | R::ConfigListener => AuditRule::Never,
            // The reads clients poll.
            R::InstanceList | R::V2InstanceList | R::Instances | R::Pick if reads => {
                AuditRule::Never
            }
            // A read that hands out password hashes and signing keys: who took one,
            // always.
            R::Snapshot => AuditRule::Always,
            _ if reads => AuditRule::IfForbidden,
            _ => AuditRule::Always,
        }
    }
}
