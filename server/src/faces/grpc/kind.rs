//! The gRPC face's request table: the Nacos payload type of a unary request (its
//! `metadata.type`, such as `InstanceRequest`) decoded once into a [`RequestKind`]; its
//! reply type, the permission it needs, whether the audit keeps it and the label the
//! metrics count it under are `match`es on that value, as the HTTP face's endpoints are.

use crate::services::auth::permissions::Action;

/// A unary request's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `ServerCheckRequest`: the connection id, before any stream is open.
    ServerCheck,
    /// `HealthCheckRequest`.
    HealthCheck,
    /// `InstanceRequest`: an ephemeral instance (de)registered by its connection.
    Instance,
    /// `PersistentInstanceRequest`: a persistent instance (de)registered.
    PersistentInstance,
    /// `BatchInstanceRequest`: a connection's instances of a service, replaced.
    BatchInstance,
    /// `ServiceQueryRequest`: a service's instances.
    ServiceQuery,
    /// `SubscribeServiceRequest`: a subscription (or its end).
    SubscribeService,
    /// `ServiceListRequest`: the services of a group.
    ServiceList,
    /// `ConnectionSetupRequest` sent as a unary call (it belongs on the stream).
    ConnectionSetup,
    /// `ConfigQueryRequest`: a configuration item read.
    ConfigQuery,
    /// `ConfigPublishRequest`.
    ConfigPublish,
    /// `ConfigRemoveRequest`.
    ConfigRemove,
    /// `ConfigBatchListenRequest`: configuration items listened to (or no longer).
    ConfigBatchListen,
    /// `NamingFuzzyWatchRequest`: the services a pattern matches watched (or no longer).
    NamingFuzzyWatch,
    /// `ConfigFuzzyWatchRequest`: the configuration items a pattern matches watched (or
    /// no longer).
    ConfigFuzzyWatch,
    /// Any other type: `RequestHandler Not Found`.
    Unknown,
}

/// What a request needs of a caller who is not an admin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Nothing: answered before authentication (or not at all).
    Public,
    /// This action on the service the request names.
    Service(Action),
    /// Reading something of the namespace the request names (the list then leaves out
    /// what the caller may not read).
    Namespace,
    /// This action on each configuration item the request names, checked by its
    /// handler.
    Config(Action),
    /// Reading something of the namespace a fuzzy watch pattern names; each item it
    /// matches is told only to watchers who may read it.
    Watch,
}

impl RequestKind {
    /// Every kind but [`RequestKind::Unknown`] (for tests).
    #[cfg(test)]
    const KNOWN: [RequestKind; 15] = [
        RequestKind::ServerCheck,
        RequestKind::HealthCheck,
        RequestKind::Instance,
        RequestKind::PersistentInstance,
        RequestKind::BatchInstance,
        RequestKind::ServiceQuery,
        RequestKind::SubscribeService,
        RequestKind::ServiceList,
        RequestKind::ConnectionSetup,
        RequestKind::ConfigQuery,
        RequestKind::ConfigPublish,
        RequestKind::ConfigRemove,
        RequestKind::ConfigBatchListen,
        RequestKind::NamingFuzzyWatch,
        RequestKind::ConfigFuzzyWatch,
    ];

    /// The kind of payload type `name`.
    pub fn decode(name: &str) -> RequestKind {
        match name {
            "InstanceRequest" => RequestKind::Instance,
            "ServiceQueryRequest" => RequestKind::ServiceQuery,
            "SubscribeServiceRequest" => RequestKind::SubscribeService,
            "ConfigQueryRequest" => RequestKind::ConfigQuery,
            "ConfigBatchListenRequest" => RequestKind::ConfigBatchListen,
            "HealthCheckRequest" => RequestKind::HealthCheck,
            "ServerCheckRequest" => RequestKind::ServerCheck,
            "BatchInstanceRequest" => RequestKind::BatchInstance,
            "PersistentInstanceRequest" => RequestKind::PersistentInstance,
            "ServiceListRequest" => RequestKind::ServiceList,
            "ConnectionSetupRequest" => RequestKind::ConnectionSetup,
            "ConfigPublishRequest" => RequestKind::ConfigPublish,
            "ConfigRemoveRequest" => RequestKind::ConfigRemove,
            "NamingFuzzyWatchRequest" => RequestKind::NamingFuzzyWatch,
            "ConfigFuzzyWatchRequest" => RequestKind::ConfigFuzzyWatch,
            _ => RequestKind::Unknown,
        }
    }

    /// Its payload type; `other` for an unknown one. Also its label in the metrics and
    /// its name in the audit trail and in messages.
    pub fn name(self) -> &'static str {
        match self {
            RequestKind::ServerCheck => "ServerCheckRequest",
            RequestKind::HealthCheck => "HealthCheckRequest",
            RequestKind::Instance => "InstanceRequest",
            RequestKind::PersistentInstance => "PersistentInstanceRequest",
            RequestKind::BatchInstance => "BatchInstanceRequest",
            RequestKind::ServiceQuery => "ServiceQueryRequest",
            RequestKind::SubscribeService => "SubscribeServiceRequest",
            RequestKind::ServiceList => "ServiceListRequest",
            RequestKind::ConnectionSetup => "ConnectionSetupRequest",
            RequestKind::ConfigQuery => "ConfigQueryRequest",
            RequestKind::ConfigPublish => "ConfigPublishRequest",
            RequestKind::ConfigRemove => "ConfigRemoveRequest",
            RequestKind::ConfigBatchListen => "ConfigBatchListenRequest",
            RequestKind::NamingFuzzyWatch => "NamingFuzzyWatchRequest",
            RequestKind::ConfigFuzzyWatch => "ConfigFuzzyWatchRequest",
            RequestKind::Unknown => "other",
        }
    }

    /// The label the metrics count it under: its name, unknown types together.
    pub fn label(self) -> &'static str {
        self.name()
    }

    /// The reply type a handled request answers with; `None` for the two checks
    /// (answered apart) and for the types no handler serves.
    pub fn reply_type(self) -> Option<&'static str> {
        Some(match self {
            RequestKind::Instance | RequestKind::PersistentInstance => "InstanceResponse",
            RequestKind::BatchInstance => "BatchInstanceResponse",
            RequestKind::ServiceQuery => "QueryServiceResponse",
            RequestKind::SubscribeService => "SubscribeServiceResponse",
            RequestKind::ServiceList => "ServiceListResponse",
            RequestKind::ConfigQuery => "ConfigQueryResponse",
            RequestKind::ConfigPublish => "ConfigPublishResponse",
            RequestKind::ConfigRemove => "ConfigRemoveResponse",
            RequestKind::ConfigBatchListen => "ConfigChangeBatchListenResponse",
            RequestKind::NamingFuzzyWatch => "NamingFuzzyWatchResponse",
            RequestKind::ConfigFuzzyWatch => "ConfigFuzzyWatchResponse",
            RequestKind::ServerCheck
            | RequestKind::HealthCheck
            | RequestKind::ConnectionSetup
            | RequestKind::Unknown => return None,
        })
    }

    /// Whether it is the configuration API's (answered by `config`).
    pub fn is_config(self) -> bool {
        matches!(self.access(), Access::Config(_))
    }

    /// Whether it is a fuzzy watch, services' or configuration items' (answered by
    /// `fuzzy`).
    pub fn is_fuzzy_watch(self) -> bool {
        self.access() == Access::Watch
    }

    /// What it needs of a caller who is not an admin: instance changes `w` on the
    /// service, queries and subscriptions `r`, a service list `r` on something of the
    /// namespace; configuration reads `r` and writes `w` on each item; a fuzzy watch
    /// `r` on something of the namespace (what it tells is what the caller may read).
    pub fn access(self) -> Access {
        match self {
            RequestKind::ServerCheck
            | RequestKind::HealthCheck
            | RequestKind::ConnectionSetup
            | RequestKind::Unknown => Access::Public,
            RequestKind::Instance
            | RequestKind::PersistentInstance
            | RequestKind::BatchInstance => Access::Service(Action::Write),
            RequestKind::ServiceQuery | RequestKind::SubscribeService => {
                Access::Service(Action::Read)
            }
            RequestKind::ServiceList => Access::Namespace,
            RequestKind::ConfigQuery | RequestKind::ConfigBatchListen => {
                Access::Config(Action::Read)
            }
            RequestKind::ConfigPublish | RequestKind::ConfigRemove => Access::Config(Action::Write),
            RequestKind::NamingFuzzyWatch | RequestKind::ConfigFuzzyWatch => Access::Watch,
        }
    }

    /// Whether the audit trail keeps it: the writes (instance registrations,
    /// deregistrations and batches; configuration publishes and removals), answered or
    /// refused; reads, beats and listens are not kept.
    pub fn audited(self) -> bool {
        matches!(
            self,
            RequestKind::Instance
                | RequestKind::PersistentInstance
                | RequestKind::BatchInstance
                | RequestKind::ConfigPublish
                | RequestKind::ConfigRemove
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_decodes_to_its_kind_and_back() {
        for kind in RequestKind::KNOWN {
            assert_eq!(RequestKind::decode(kind.name()), kind);
        }
        for unknown in ["", "instancerequest", "NotifySubscriberResponse", "other"] {
            assert_eq!(RequestKind::decode(unknown), RequestKind::Unknown);
        }
        assert_eq!(RequestKind::Unknown.label(), "other");
    }

    #[test]
    fn kinds_answer_their_reply_type_permission_and_audit() {
        use RequestKind as K;
        let table = [
            (K::ServerCheck, None, Access::Public, false),
            (K::HealthCheck, None, Access::Public, false),
            (K::ConnectionSetup, None, Access::Public, false),
            (K::Unknown, None, Access::Public, false),
            (
                K::Instance,
                Some("InstanceResponse"),
                Access::Service(Action::Write),
                true,
            ),
            (
                K::PersistentInstance,
                Some("InstanceResponse"),
                Access::Service(Action::Write),
                true,
            ),
            (
                K::BatchInstance,
                Some("BatchInstanceResponse"),
                Access::Service(Action::Write),
                true,
            ),
            (
                K::ServiceQuery,
                Some("QueryServiceResponse"),
                Access::Service(Action::Read),
                false,
            ),
            (
                K::SubscribeService,
                Some("SubscribeServiceResponse"),
                Access::Service(Action::Read),
                false,
            ),
            (
                K::ServiceList,
                Some("ServiceListResponse"),
                Access::Namespace,
                false,
            ),
            (
                K::ConfigQuery,
                Some("ConfigQueryResponse"),
                Access::Config(Action::Read),
                false,
            ),
            (
                K::ConfigPublish,
                Some("ConfigPublishResponse"),
                Access::Config(Action::Write),
                true,
            ),
            (
                K::ConfigRemove,
                Some("ConfigRemoveResponse"),
                Access::Config(Action::Write),
                true,
            ),
            (
                K::ConfigBatchListen,
                Some("ConfigChangeBatchListenResponse"),
                Access::Config(Action::Read),
                false,
            ),
            (
                K::NamingFuzzyWatch,
                Some("NamingFuzzyWatchResponse"),
                Access::Watch,
                false,
            ),
            (
                K::ConfigFuzzyWatch,
                Some("ConfigFuzzyWatchResponse"),
                Access::Watch,
                false,
            ),
        ];
        for (kind, reply, access, audited) in table {
            assert_eq!(kind.reply_type(), reply, "{kind:?}");
            assert_eq!(kind.access(), access, "{kind:?}");
            assert_eq!(kind.audited(), audited, "{kind:?}");
        }
    }
}
