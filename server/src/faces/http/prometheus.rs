//! Prometheus HTTP service discovery as Nacos 2.2+ serves it (`/nacos/prometheus`):
//! every instance as a target group of its own, `ip:port` the target, the instance's
//! metadata as labels (names made valid: Nacos turns `.` and `-` into `_`; roster turns
//! every character Prometheus refuses into `_`, since one invalid name makes Prometheus
//! drop the whole answer), the cluster as `__meta_clusterName`, and roster's
//! `__meta_roster_*` labels (namespace, group, service, healthy, enabled, weight) for
//! relabelling — a `keep` on `__meta_roster_healthy="true"` scrapes the healthy only.
//! Every instance is listed, healthy or not, as Nacos lists them; a caller sees what it
//! may read.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::nacos::json_of;
use crate::state::AppState;
use roster_registry::instance::Instance;
use roster_registry::service::Service;

/// Where the namespace and service routes start.
pub const NAMESPACE_PREFIX: &str = "/nacos/prometheus/namespaceId/";

/// What a discovery request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    All,
    /// One namespace.
    Namespace(String),
    /// A service of a namespace: its name (any group), or `group@@name`.
    Service(String, String),
    /// A path segment that is not UTF-8 once percent-decoded.
    Undecodable,
}

/// The scope of a path after [`NAMESPACE_PREFIX`], with each segment `decode`d;
/// `None` when it is not `{namespaceId}` or `{namespaceId}/service/{service}`.
pub fn scope(rest: &str, decode: impl Fn(&str) -> Option<String>) -> Option<Scope> {
    let segments: Vec<&str> = rest.split('/').collect();
    let decoded = |s: &str| (!s.is_empty()).then(|| decode(s));
    Some(match segments[..] {
        [ns] => match decoded(ns)? {
            Some(ns) => Scope::Namespace(ns),
            None => Scope::Undecodable,
        },
        [ns, "service", service] => match (decoded(ns)?, decoded(service)?) {
            (Some(ns), Some(service)) => Scope::Service(ns, service),
            _ => Scope::Undecodable,
        },
        _ => return None,
    })
}

/// One target group.
#[derive(Serialize)]
struct Group {
    targets: [String; 1],
    labels: BTreeMap<String, String>,
}

/// `GET /nacos/prometheus[/namespaceId/{namespaceId}[/service/{service}]]`.
pub async fn targets(State(state): State<AppState>, caller: Caller, scope: Scope) -> Response {
    let (namespaces, service) = match scope {
        Scope::All => (
            state
                .registry
                .namespaces()
                .iter()
                .map(|n| n.id.to_string())
                .collect(),
            None,
        ),
        Scope::Namespace(ns) => (vec![ns], None),
        Scope::Service(ns, service) => (vec![ns], Some(service)),
        Scope::Undecodable => {
            return Error::bad_request("a path segment is not UTF-8 once percent-decoded")
                .into_response();
        }
    };
    let mut groups = Vec::new();
    for ns in &namespaces {
        for svc in state.registry.services(ns) {
            let named = service.as_deref().is_none_or(|s| {
                s == &*svc.key.name || s == format!("{}@@{}", svc.key.group, svc.key.name)
            });
            if named && caller.may_read(&state, ns, &svc.key.group, &svc.key.name) {
                let view = svc.view();
                groups.extend(view.instances.values().map(|i| group(&svc, i)));
            }
        }
    }
    json_of(&groups)
}

/// An instance's target group.
fn group(svc: &Service, instance: &Instance) -> Group {
    let ip = instance.ip();
    let target = if ip.contains(':') {
        format!("[{ip}]:{}", instance.port)
    } else {
        format!("{ip}:{}", instance.port)
    };
    let mut labels = BTreeMap::from([
        (
            "__meta_clusterName".to_string(),
            instance.cluster.to_string(),
        ),
        (
            "__meta_roster_namespace".to_string(),
            svc.key.namespace.to_string(),
        ),
        ("__meta_roster_group".to_string(), svc.key.group.to_string()),
        (
            "__meta_roster_service".to_string(),
            svc.key.name.to_string(),
        ),
        (
            "__meta_roster_healthy".to_string(),
            instance.healthy.to_string(),
        ),
        (
            "__meta_roster_enabled".to_string(),
            instance.enabled.to_string(),
        ),
        (
            "__meta_roster_weight".to_string(),
            instance.weight.to_string(),
        ),
    ]);
    for (key, value) in instance.metadata.iter() {
        if let Some(name) = label_name(key) {
            labels.entry(name).or_insert_with(|| value.to_string());
        }
    }
    Group {
        targets: [target],
        labels,
    }
}

/// A metadata key as a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`): every other
/// character becomes `_`, a leading digit gets a `_` before it; `None` for an empty key.
fn label_name(key: &str) -> Option<String> {
    if key.is_empty() {
        return None;
    }
    let mut name: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_are_made_valid() {
        assert_eq!(
            label_name("dubbo.version").as_deref(),
            Some("dubbo_version")
        );
        assert_eq!(label_name("app-name").as_deref(), Some("app_name"));
        assert_eq!(label_name("a/b:c d").as_deref(), Some("a_b_c_d"));
        assert_eq!(label_name("9lives").as_deref(), Some("_9lives"));
        assert_eq!(label_name("版本").as_deref(), Some("__"));
        assert_eq!(label_name(""), None);
    }

    #[test]
    fn scopes_are_read_from_the_path() {
        let decode = |s: &str| (s != "bad").then(|| s.replace("%40", "@"));
        assert_eq!(scope("dev", decode), Some(Scope::Namespace("dev".into())));
        assert_eq!(
            scope("dev/service/G%40%40svc", decode),
            Some(Scope::Service("dev".into(), "G@@svc".into()))
        );
        assert_eq!(scope("bad", decode), Some(Scope::Undecodable));
        assert_eq!(scope("dev/service/bad", decode), Some(Scope::Undecodable));
        assert_eq!(scope("", decode), None);
        assert_eq!(scope("dev/service/", decode), None);
        assert_eq!(scope("dev/other/x", decode), None);
        assert_eq!(scope("dev/service/x/y", decode), None);
    }
}
