//! What the audit trail keeps of gRPC requests: the writes (instance registrations,
//! deregistrations and batches; configuration publishes and removals), answered or
//! refused before they ran — a caller not authenticated, or without the permission —
//! as HTTP keeps its refusals. Entries go through the trail's bounded queue, like every
//! other face's; reads, beats and listens are not kept.

use std::borrow::Cow;
use std::net::SocketAddr;

use super::kind::RequestKind;
use super::{config, GrpcServer, NamingRequest};
use crate::services::audit::{Addressed, Entry};
use crate::services::auth::Identity;

/// Who a refused request is recorded as when no one was authenticated (as over HTTP).
const ANONYMOUS: &str = "anonymous";

/// The entry of naming request `kind` when the trail keeps it
/// ([`RequestKind::audited`]): what it addresses, from its fields as sent (a batch names
/// no one instance). Who sent it and the outcome come with [`Entry::answered`].
pub(super) fn naming(kind: RequestKind, request: &NamingRequest) -> Option<Entry> {
    if !kind.audited() {
        return None;
    }
    let instance = request
        .instance
        .as_ref()
        .filter(|_| kind != RequestKind::BatchInstance);
    let addressed = Addressed {
        namespace: request.namespace.as_deref(),
        group: request.group_name.as_deref(),
        service: request.service_name.as_deref(),
        instance: instance
            .and_then(|i| Some((i.ip.as_deref()?, i.port?, i.cluster_name.as_deref()))),
    };
    Some(Entry::grpc(
        kind.name(),
        request.r#type.as_deref(),
        addressed,
    ))
}

/// The entry of request `kind` refused before it was read, when it is a write: what it
/// addresses, from `body` as far as that reads (nothing, if it is not a request).
pub(super) fn unread(kind: RequestKind, body: &[u8]) -> Option<Entry> {
    if kind.is_config() {
        return config::refused_entry(kind, body);
    }
    match serde_json::from_slice::<NamingRequest>(body) {
        Ok(request) => naming(kind, &request),
        Err(_) => naming(kind, &NamingRequest::default()).map(|entry| Entry {
            namespace_id: None,
            resource: None,
            ..entry
        }),
    }
}

impl GrpcServer {
    /// Records `entry` (if any) as answered `status` to `caller` (`None`: no one was
    /// authenticated) from `remote`.
    pub(super) fn audit(
        &self,
        entry: Option<Entry>,
        caller: Option<&Identity>,
        remote: SocketAddr,
        status: u16,
    ) {
        let Some(entry) = entry else {
            return;
        };
        let user = caller.map_or(Cow::Borrowed(ANONYMOUS), |c| c.username.clone());
        self.app
            .audit
            .record(entry.answered(user, remote.ip(), status));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_are_named_as_sent_and_reads_not_kept() {
        let body = json!({"namespace": "dev", "serviceName": "orders", "type": "registerInstance",
                          "instance": {"ip": "127.0.0.9", "port": 80}});
        let body = serde_json::to_vec(&body).unwrap();
        let unread = |kind: &str, body: &[u8]| unread(RequestKind::decode(kind), body);
        let entry = unread("InstanceRequest", &body).unwrap();
        assert_eq!(entry.action, "InstanceRequest registerInstance");
        assert_eq!(entry.namespace_id.as_deref(), Some("dev"));
        assert_eq!(
            entry.resource.as_deref(),
            Some("127.0.0.9#80#DEFAULT#DEFAULT_GROUP@@orders")
        );
        let garbage = unread("BatchInstanceRequest", b"not json").unwrap();
        assert_eq!((garbage.namespace_id, garbage.resource), (None, None));
        let config = json!({"tenant": "dev", "group": "g", "dataId": "app.yaml"});
        let config = serde_json::to_vec(&config).unwrap();
        let entry = unread("ConfigPublishRequest", &config).unwrap();
        assert_eq!(entry.resource.as_deref(), Some("config:g/app.yaml"));
        for read in [
            "ServiceQueryRequest",
            "SubscribeServiceRequest",
            "ConfigQueryRequest",
        ] {
            assert!(unread(read, &body).is_none(), "{read}");
        }
    }
}
