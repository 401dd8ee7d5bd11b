//! Which face registered an instance, told from what the registry holds (no stored field):
//! the importing sync task, the metadata keys the Consul and Eureka faces keep, and
//! the gRPC connection that holds it. Roster's own views (the console's instance table,
//! `roster instance list`) show it; the Nacos-compatible answers do not.

use roster_registry::instance::Instance;

/// The metadata key the Consul face keeps the service id in
/// (`faces::http::consul::mapping::ID`; a unit test holds the two equal).
pub const CONSUL_ID: &str = "consul.id";
/// The metadata key the Eureka face keeps the instance id in
/// (`faces::http::eureka::mapping::INSTANCE_ID`).
pub const EUREKA_INSTANCE_ID: &str = "eureka.instanceId";

/// The face an instance came through.
///
/// `Http` covers every HTTP face that registers Nacos-style: Nacos v1, v2 and v3 HTTP
/// and roster's own API. They write the same instance (address-kept, no face-specific
/// metadata), so they cannot be told apart afterwards. The metadata keys are the
/// faces' own, but a client of another face could set them too; such an instance is
/// named by the key it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin<'a> {
    /// Consul's HTTP API (`PUT /v1/agent/service/register`, `/v1/catalog/register`).
    Consul,
    /// The Eureka server API (`POST /eureka/apps/{app}`).
    Eureka,
    /// Imported by the named sync task, which owns its lifetime.
    Sync(&'a str),
    /// A Nacos 2/3 gRPC client's connection.
    Grpc,
    /// Nacos v1/v2/v3 HTTP or roster's API (see above).
    Http,
}

impl<'a> Origin<'a> {
    /// The face that registered `instance`. The sync task comes first: a task copying
    /// from a Eureka or Consul source keeps that source's metadata keys, yet the copy
    /// is the task's, not a client's of the face those keys name.
    pub fn of(instance: &'a Instance) -> Self {
        if let Some(task) = instance.owner() {
            Origin::Sync(task)
        } else if instance.metadata.contains_key(CONSUL_ID) {
            Origin::Consul
        } else if instance.metadata.contains_key(EUREKA_INSTANCE_ID) {
            Origin::Eureka
        } else if instance.client().is_some() {
            Origin::Grpc
        } else {
            Origin::Http
        }
    }

    /// The face's name in JSON (`registeredBy`): `consul`, `eureka`, `sync`, `grpc`
    /// or `http`; a sync task's name is [`Origin::task`].
    pub fn name(self) -> &'static str {
        match self {
            Origin::Consul => "consul",
            Origin::Eureka => "eureka",
            Origin::Sync(_) => "sync",
            Origin::Grpc => "grpc",
            Origin::Http => "http",
        }
    }

    /// The importing sync task (`registeredByTask` in JSON), for [`Origin::Sync`].
    pub fn task(self) -> Option<&'a str> {
        match self {
            Origin::Sync(task) => Some(task),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use roster_registry::instance::{addr_key, ClusterName, Keeper, Pinned, Rare};
    use roster_registry::meta::{Meta, Metadata};

    /// An address-kept ephemeral instance with `metadata`, as Nacos v1 HTTP makes one.
    fn instance(metadata: &[(&str, &str)]) -> Instance {
        let metadata: Metadata = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Instance {
            address: addr_key("10.0.0.1", 8080),
            port: 8080,
            cluster: ClusterName::new("DEFAULT"),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Meta::new(&metadata),
            pinned: Pinned::default(),
            keeper: Keeper::new(None, 0),
            rare: None,
        }
    }

    fn owned_by(task: &str, inst: Instance) -> Instance {
        Instance {
            rare: Rare::boxed(None, Some(Arc::from(task)), Default::default()),
            ..inst
        }
    }

    fn held_by_connection(inst: Instance) -> Instance {
        Instance {
            keeper: Keeper::new(Some(Arc::from("1733500000000_10.0.0.1_50000")), 0),
            ..inst
        }
    }

    #[test]
    fn each_face_is_told_from_what_it_leaves() {
        let http = instance(&[("env", "prod")]);
        assert_eq!(Origin::of(&http), Origin::Http);
        let consul = instance(&[(CONSUL_ID, "web-1"), ("consul.tags", "[]")]);
        assert_eq!(Origin::of(&consul), Origin::Consul);
        let eureka = instance(&[(EUREKA_INSTANCE_ID, "host:web:8080")]);
        assert_eq!(Origin::of(&eureka), Origin::Eureka);
        let grpc = held_by_connection(instance(&[]));
        assert_eq!(Origin::of(&grpc), Origin::Grpc);
        let synced = owned_by("from-dc2", instance(&[]));
        assert_eq!(Origin::of(&synced), Origin::Sync("from-dc2"));
    }

    #[test]
    fn a_sync_task_wins_over_the_source_faces_keys() {
        // roster_sync's Eureka source copies `eureka.instanceId` into what it imports.
        let copied = owned_by("eureka-dc", instance(&[(EUREKA_INSTANCE_ID, "i-1")]));
        assert_eq!(Origin::of(&copied), Origin::Sync("eureka-dc"));
        let copied = owned_by("consul-dc", instance(&[(CONSUL_ID, "web-1")]));
        assert_eq!(Origin::of(&copied), Origin::Sync("consul-dc"));
    }

    #[test]
    fn face_keys_win_over_the_connection_and_consul_over_eureka() {
        let both = instance(&[(CONSUL_ID, "web-1"), (EUREKA_INSTANCE_ID, "i-1")]);
        assert_eq!(Origin::of(&both), Origin::Consul);
        let grpc_with_key = held_by_connection(instance(&[(EUREKA_INSTANCE_ID, "i-1")]));
        assert_eq!(Origin::of(&grpc_with_key), Origin::Eureka);
    }

    #[test]
    fn names_and_task() {
        let names: Vec<_> = [
            Origin::Consul,
            Origin::Eureka,
            Origin::Sync("t"),
            Origin::Grpc,
            Origin::Http,
        ]
        .iter()
        .map(|o| (o.name(), o.task()))
        .collect();
        assert_eq!(
            names,
            [
                ("consul", None),
                ("eureka", None),
                ("sync", Some("t")),
                ("grpc", None),
                ("http", None)
            ]
        );
    }

    #[test]
    fn the_keys_are_the_faces_own() {
        assert_eq!(CONSUL_ID, crate::faces::http::consul::mapping::ID);
        assert_eq!(
            EUREKA_INSTANCE_ID,
            crate::faces::http::eureka::mapping::INSTANCE_ID
        );
    }
}
