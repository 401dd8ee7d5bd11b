//! The paths the HTTP face serves, written once ([`Route`]'s table), what a path's
//! prefix says of it ([`Area`]), and the parsing helpers of [`super::Endpoint::parse`].

macro_rules! routes {
    ($($(#[doc = $doc:literal])* $name:ident => $path:literal, $allow:literal;)*) => {
        /// A path the API serves: its label in the metrics and the audit, and the
        /// methods it answers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Route {
            $($(#[doc = $doc])* $name,)*
        }

        impl Route {
            /// Every route (for tests).
            #[cfg(test)]
            pub(super) const ALL: &'static [Route] = &[$(Route::$name,)*];

            /// The route whose path is `path` exactly (the sync task routes, which name
            /// a task, are parsed apart).
            pub(super) fn of_path(path: &str) -> Option<Route> {
                match path {
                    $($path => Some(Route::$name),)*
                    _ => None,
                }
            }

            /// Its path (its pattern for the task routes): the label the metrics count
            /// it under, and the audit's action.
            pub fn path(self) -> &'static str {
                match self {
                    $(Route::$name => $path,)*
                }
            }

            /// The methods it answers, as axum's `Allow` header said them.
            pub fn allow(self) -> &'static str {
                match self {
                    $(Route::$name => $allow,)*
                }
            }
        }
    };
}

routes! {
    // The hot routes first: a `match` on strings compares them in order.
    /// Nacos v1 instance list.
    InstanceList => "/nacos/v1/ns/instance/list", "GET,HEAD";
    /// Nacos v1 instance register, deregister, update, detail.
    Instance => "/nacos/v1/ns/instance", "POST,DELETE,PUT,PATCH,GET,HEAD";
    /// Nacos v1 heartbeat.
    InstanceBeat => "/nacos/v1/ns/instance/beat", "PUT";
    /// Nacos v1 configuration items.
    Configs => "/nacos/v1/cs/configs", "GET,HEAD,POST,DELETE";
    /// Nacos v1 config long poll (POST) and listeners of an item (GET).
    ConfigListener => "/nacos/v1/cs/configs/listener", "POST,GET,HEAD";
    /// Liveness.
    Live => "/health/live", "GET,HEAD";
    /// Readiness.
    Ready => "/health/ready", "GET,HEAD";
    /// Prometheus metrics.
    Metrics => "/metrics", "GET,HEAD";
    /// Prometheus HTTP service discovery, every namespace (Nacos 2.2+).
    PrometheusSd => "/nacos/prometheus", "GET,HEAD";
    /// Prometheus HTTP service discovery, a namespace (parsed apart).
    PrometheusSdNamespace => "/nacos/prometheus/namespaceId/{namespaceId}", "GET,HEAD";
    /// Prometheus HTTP service discovery, a service (parsed apart).
    PrometheusSdService => "/nacos/prometheus/namespaceId/{namespaceId}/service/{service}", "GET,HEAD";
    /// Nacos v1 instance health.
    HealthInstance => "/nacos/v1/ns/health/instance", "PUT";
    /// Nacos v1 instance health, the older path.
    Health => "/nacos/v1/ns/health", "PUT";
    /// Nacos v1 services.
    Service => "/nacos/v1/ns/service", "POST,DELETE,PUT,GET,HEAD";
    /// Nacos v1 service list.
    ServiceList => "/nacos/v1/ns/service/list", "GET,HEAD";
    /// Nacos v1 selector types.
    SelectorTypes => "/nacos/v1/ns/service/selector/types", "GET,HEAD";
    /// Nacos v1 subscribers of a service.
    Subscribers => "/nacos/v1/ns/service/subscribers", "GET,HEAD";
    /// Nacos v1 cluster metadata of a service.
    NamingCluster => "/nacos/v1/ns/cluster", "PUT";
    /// Nacos v1 console catalog: services.
    CatalogServices => "/nacos/v1/ns/catalog/services", "GET,HEAD";
    /// Nacos v1 console catalog: a service.
    CatalogService => "/nacos/v1/ns/catalog/service", "GET,HEAD";
    /// Nacos v1 console catalog: instances.
    CatalogInstances => "/nacos/v1/ns/catalog/instances", "GET,HEAD";
    /// Nacos v1 operator metrics (clients probe it).
    OperatorMetrics => "/nacos/v1/ns/operator/metrics", "GET,HEAD";
    /// Nacos v1 switches.
    OperatorSwitches => "/nacos/v1/ns/operator/switches", "GET,HEAD";
    /// Nacos v1 config history of an item.
    History => "/nacos/v1/cs/history", "GET,HEAD";
    /// Nacos v1 previous version of an item.
    HistoryPrevious => "/nacos/v1/cs/history/previous", "GET,HEAD";
    /// Nacos v1 items of a namespace, by history.
    HistoryConfigs => "/nacos/v1/cs/history/configs", "GET,HEAD";
    /// Nacos v1 namespaces.
    Namespaces => "/nacos/v1/console/namespaces", "GET,HEAD,POST,PUT,DELETE";
    /// Nacos v1 login.
    Login => "/nacos/v1/auth/login", "POST";
    /// Nacos v1 login, the users path.
    UsersLogin => "/nacos/v1/auth/users/login", "POST";
    /// Nacos v1 users.
    Users => "/nacos/v1/auth/users", "GET,HEAD,POST,PUT,DELETE";
    /// Nacos v1 user search.
    UsersSearch => "/nacos/v1/auth/users/search", "GET,HEAD";
    /// Nacos v1 roles.
    Roles => "/nacos/v1/auth/roles", "GET,HEAD,POST,DELETE";
    /// Nacos v1 role search.
    RolesSearch => "/nacos/v1/auth/roles/search", "GET,HEAD";
    /// Nacos v1 permissions.
    Permissions => "/nacos/v1/auth/permissions", "GET,HEAD,POST,DELETE";
    /// Nacos v1 cluster members.
    CoreClusterNodes => "/nacos/v1/core/cluster/nodes", "GET,HEAD";
    /// Nacos v2 instances.
    V2Instance => "/nacos/v2/ns/instance", "GET,HEAD,POST,DELETE,PUT,PATCH";
    /// Nacos v2 instance list.
    V2InstanceList => "/nacos/v2/ns/instance/list", "GET,HEAD";
    /// Nacos v2 heartbeat.
    V2InstanceBeat => "/nacos/v2/ns/instance/beat", "PUT";
    /// Nacos v2 instance health.
    V2HealthInstance => "/nacos/v2/ns/health/instance", "PUT";
    /// Nacos v2 services.
    V2Service => "/nacos/v2/ns/service", "GET,HEAD,POST,DELETE,PUT";
    /// Nacos v2 service list.
    V2ServiceList => "/nacos/v2/ns/service/list", "GET,HEAD";
    /// Nacos v2 operator metrics.
    V2OperatorMetrics => "/nacos/v2/ns/operator/metrics", "GET,HEAD";
    /// Nacos v2 switches.
    V2OperatorSwitches => "/nacos/v2/ns/operator/switches", "GET,HEAD";
    /// Nacos v2 configuration items.
    V2Config => "/nacos/v2/cs/config", "GET,HEAD,POST,DELETE";
    /// roster's cluster view.
    Cluster => "/api/v1/cluster", "GET,HEAD";
    /// roster's cluster members.
    ClusterMembers => "/api/v1/cluster/members", "POST,DELETE";
    /// roster's owner of a service.
    ClusterOwner => "/api/v1/cluster/owner", "GET,HEAD";
    /// roster's instance list.
    Instances => "/api/v1/instances", "GET,HEAD";
    /// roster's pick of one instance.
    Pick => "/api/v1/pick", "GET,HEAD";
    /// roster's event stream.
    Events => "/api/v1/events", "GET,HEAD";
    /// roster's signing key rotation.
    RotateKey => "/api/v1/auth/rotate-key", "POST";
    /// roster's audit trail.
    Audit => "/api/v1/audit", "GET,HEAD";
    /// roster's snapshot download.
    Snapshot => "/api/v1/snapshot", "GET,HEAD";
    /// roster's overview samples.
    Overview => "/api/v1/overview", "GET,HEAD";
    /// roster's view of the naming clients of a node.
    Clients => "/api/v1/clients", "GET,HEAD";
    /// roster's long-lived API tokens.
    ApiTokens => "/api/v1/tokens", "GET,HEAD,POST,DELETE";
    /// roster's sync tasks.
    SyncTasks => "/api/v1/sync/tasks", "GET,HEAD,POST";
    /// A sync task (parsed apart: the segment is its name).
    SyncTask => "/api/v1/sync/tasks/{name}", "GET,HEAD,DELETE";
    /// Pausing a sync task.
    SyncTaskPause => "/api/v1/sync/tasks/{name}/pause", "POST";
    /// Resuming a sync task.
    SyncTaskResume => "/api/v1/sync/tasks/{name}/resume", "POST";
    /// Applying a sync task's dry run.
    SyncTaskApply => "/api/v1/sync/tasks/{name}/apply", "POST";
    // Eureka's server API (parsed apart, also under `/nacos/eureka/`: the segments in
    // braces are names).
    /// Eureka: every application.
    EurekaApps => "/eureka/apps", "GET,HEAD";
    /// Eureka: what changed recently.
    EurekaDelta => "/eureka/apps/delta", "GET,HEAD";
    /// Eureka: register into, or read, an application.
    EurekaApp => "/eureka/apps/{app}", "POST,GET,HEAD";
    /// Eureka: renew, cancel or read an instance.
    EurekaInstance => "/eureka/apps/{app}/{id}", "PUT,DELETE,GET,HEAD";
    /// Eureka: an instance's status override.
    EurekaStatus => "/eureka/apps/{app}/{id}/status", "PUT,DELETE";
    /// Eureka: an instance's metadata.
    EurekaMetadata => "/eureka/apps/{app}/{id}/metadata", "PUT";
    /// Eureka: an instance by its id alone.
    EurekaInstanceById => "/eureka/instances/{id}", "GET,HEAD";
    /// Eureka: the instances of a VIP address.
    EurekaVip => "/eureka/vips/{vip}", "GET,HEAD";
    /// Eureka: the instances of a secure VIP address.
    EurekaSvip => "/eureka/svips/{svip}", "GET,HEAD";
    // Consul's HTTP API (parsed apart: the segments in braces are names).
    /// Consul: register a service with the agent.
    ConsulRegister => "/v1/agent/service/register", "PUT";
    /// Consul: deregister a service.
    ConsulDeregister => "/v1/agent/service/deregister/{id}", "PUT";
    /// Consul: a service's maintenance mode.
    ConsulMaintenance => "/v1/agent/service/maintenance/{id}", "PUT";
    /// Consul: one of the agent's services.
    ConsulAgentService => "/v1/agent/service/{id}", "GET,HEAD";
    /// Consul: the agent's services.
    ConsulAgentServices => "/v1/agent/services", "GET,HEAD";
    /// Consul: the agent's checks.
    ConsulAgentChecks => "/v1/agent/checks", "GET,HEAD";
    /// Consul: a TTL check passes.
    ConsulCheckPass => "/v1/agent/check/pass/{check}", "PUT";
    /// Consul: a TTL check warns.
    ConsulCheckWarn => "/v1/agent/check/warn/{check}", "PUT";
    /// Consul: a TTL check fails.
    ConsulCheckFail => "/v1/agent/check/fail/{check}", "PUT";
    /// Consul: a TTL check's status and output.
    ConsulCheckUpdate => "/v1/agent/check/update/{check}", "PUT";
    /// Consul: the agent itself.
    ConsulAgentSelf => "/v1/agent/self", "GET,HEAD";
    /// Consul: the datacenters.
    ConsulDatacenters => "/v1/catalog/datacenters", "GET,HEAD";
    /// Consul: the catalog's services.
    ConsulCatalogServices => "/v1/catalog/services", "GET,HEAD";
    /// Consul: a service's catalog entries.
    ConsulCatalogService => "/v1/catalog/service/{service}", "GET,HEAD";
    /// Consul: the catalog's nodes.
    ConsulCatalogNodes => "/v1/catalog/nodes", "GET,HEAD";
    /// Consul: a node's services.
    ConsulCatalogNode => "/v1/catalog/node/{node}", "GET,HEAD";
    /// Consul: a service's instances with their checks.
    ConsulHealthService => "/v1/health/service/{service}", "GET,HEAD";
    /// Consul: a service's checks.
    ConsulHealthChecks => "/v1/health/checks/{service}", "GET,HEAD";
    /// Consul: the checks of a node (an address).
    ConsulHealthNode => "/v1/health/node/{node}", "GET,HEAD";
    /// Consul: the checks in a state (`any`, `passing`, `warning`, `critical`).
    ConsulHealthState => "/v1/health/state/{state}", "GET,HEAD";
    /// Consul: the Raft leader.
    ConsulLeader => "/v1/status/leader", "GET,HEAD";
    /// Consul: the Raft peers.
    ConsulPeers => "/v1/status/peers", "GET,HEAD";
}

impl Route {
    /// Whether it is one of Eureka's.
    pub fn is_eureka(self) -> bool {
        matches!(
            self,
            Route::EurekaApps
                | Route::EurekaDelta
                | Route::EurekaApp
                | Route::EurekaInstance
                | Route::EurekaStatus
                | Route::EurekaMetadata
                | Route::EurekaInstanceById
                | Route::EurekaVip
                | Route::EurekaSvip
        )
    }

    /// Whether it is one of Consul's.
    pub fn is_consul(self) -> bool {
        self.path().starts_with(super::super::consul::PREFIX)
    }
}

/// Where the sync task routes start; the segment after it is the task's name.
pub(super) const TASK_PREFIX: &str = "/api/v1/sync/tasks/";

/// What a path's prefix says of it, where that matters beyond its route (and for paths
/// of no route): the shape of the guard's refusals, the body limit, what the audit
/// names as the request's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// `/nacos/v1/cs/...`: configuration (a larger body; the target is an item).
    ConfigV1,
    /// `/nacos/v2/cs/...`: configuration, answered in v2's envelope.
    ConfigV2,
    /// Any other `/nacos/v2/...`: answered in v2's envelope.
    NacosV2,
    /// `/nacos/v1/auth/...` but a login: the target is a role or a user.
    Users,
    /// A v3 configuration operation: answered in the envelope, the item named by
    /// `namespaceId`, `groupName`, `dataId`.
    ConfigV3,
    /// A v3 user, role or permission operation: answered in the envelope, the target a
    /// role or a user.
    UsersV3,
    /// Any other `/nacos/v3/...`: answered in the envelope.
    NacosV3,
    /// `/api/v1/sync/tasks/...`: the target is the task its path names.
    SyncTask,
    /// `/eureka/...` and `/nacos/eureka/...`: Eureka's API (a refusal of credentials
    /// asks for HTTP Basic; the target is the path).
    Eureka,
    /// `/v1/...`: Consul's API (answers and refusals in plain text; HTTP Basic counts).
    Consul,
    /// Anything else.
    Other,
}

impl Area {
    /// The area of a path by its prefix.
    pub(super) fn of_path(path: &str) -> Area {
        if path.starts_with("/nacos/v1/cs/") {
            Area::ConfigV1
        } else if path.starts_with("/nacos/v2/cs/") {
            Area::ConfigV2
        } else if path.starts_with("/nacos/v2/") {
            Area::NacosV2
        } else if path.starts_with("/nacos/v3/admin/cs/")
            || path.starts_with("/nacos/v3/client/cs/")
        {
            Area::ConfigV3
        } else if path.starts_with("/nacos/v3/auth/") && !path.ends_with("/login") {
            Area::UsersV3
        } else if path.starts_with("/nacos/v3/") {
            Area::NacosV3
        } else if path.starts_with("/nacos/v1/auth/") && !path.ends_with("/login") {
            Area::Users
        } else if path.starts_with(TASK_PREFIX) {
            Area::SyncTask
        } else if super::super::eureka::is_eureka(path) {
            Area::Eureka
        } else if super::super::consul::is_consul(path) {
            Area::Consul
        } else {
            Area::Other
        }
    }

    /// Whether refusals are answered in the `{code, message, data}` envelope (Nacos v2
    /// and v3).
    pub fn is_enveloped(self) -> bool {
        matches!(
            self,
            Area::ConfigV2 | Area::NacosV2 | Area::ConfigV3 | Area::UsersV3 | Area::NacosV3
        )
    }

    /// Whether it is the configuration API's.
    pub fn is_config(self) -> bool {
        matches!(self, Area::ConfigV1 | Area::ConfigV2 | Area::ConfigV3)
    }

    /// Whether the target is a role or a user.
    pub fn is_users(self) -> bool {
        matches!(self, Area::Users | Area::UsersV3)
    }
}

/// Whether the console router serves `path` (see `roster_console_ui::router`).
pub(super) fn is_console(path: &str) -> bool {
    matches!(
        path,
        "/" | "/index.html" | "/favicon.svg" | "/nacos" | "/nacos/"
    ) || path.starts_with("/assets/")
}

/// `segment` percent-decoded, as axum decoded path parameters: `%XX` with two hex
/// digits is a byte, anything else stays as it is; `None` when the bytes are not UTF-8.
pub(super) fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}
