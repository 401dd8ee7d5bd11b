//! How the state machine applies naming commands — namespaces, service settings and
//! persistent instances — to the registry. Deterministic: the proposal time comes in
//! the command, and every node decides a refusal alike.

use crate::services::configs::Configs;
use crate::services::store::command::{CommandV1, Outcome, Rejection};
use roster_registry::Registry;

/// Applies naming `command` to `registry`; `configs` is read to refuse deleting a
/// namespace that holds configuration items.
pub fn apply(registry: &Registry, configs: &Configs, command: CommandV1) -> Outcome {
    let r = registry;
    match command {
        CommandV1::CreateNamespace(info) => Ok(r.create_namespace(&info)?),
        CommandV1::UpdateNamespace(info) => Ok(r.update_namespace(&info)?),
        CommandV1::DeleteNamespace { id } => {
            // Decided here too: an item may have been published since the face
            // checked.
            let configs = configs.count_in(&id);
            if configs > 0 {
                return Err(Rejection::NamespaceHoldsConfigs { id, configs });
            }
            Ok(r.delete_namespace(&id)?)
        }
        CommandV1::CreateService {
            key,
            settings,
            at_ms,
        } => Ok(r.create_service(&key, &settings, at_ms)?),
        CommandV1::UpdateService {
            key,
            settings,
            at_ms,
        } => {
            r.update_service(&key, &settings, at_ms);
            Ok(())
        }
        CommandV1::PutCluster {
            key,
            cluster,
            settings,
            at_ms,
        } => {
            r.put_cluster(&key, &cluster, &settings, at_ms);
            Ok(())
        }
        CommandV1::DeleteService { key, at_ms } => {
            r.delete_service(&key, at_ms);
            Ok(())
        }
        CommandV1::Register {
            key,
            registration,
            at_ms,
        } => Ok(r.register(&key, &registration, at_ms)?),
        CommandV1::Deregister {
            key,
            ip,
            port,
            at_ms,
        } => {
            // A sync task's instance is the task's to remove.
            r.imported(&key, &ip, port)?;
            r.deregister(&key, &ip, port, Some(false), at_ms);
            Ok(())
        }
        CommandV1::UpdateInstance {
            key,
            ip,
            port,
            patch,
            at_ms,
        } => Ok(r.update_instance(&key, &ip, port, false, &patch, at_ms)?),
        CommandV1::SetHealth {
            key,
            ip,
            port,
            healthy,
            at_ms,
        } => {
            r.set_health(&key, &ip, port, false, healthy, at_ms);
            Ok(())
        }
        other => unreachable!("a {:?} command routed to naming", other.domain()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::configs::{ConfigKey, Publish, Retention};
    use roster_registry::namespace::NamespaceInfo;
    use roster_registry::service::ServiceKey;
    use roster_registry::{Registration, RegistryError};

    fn dev() -> NamespaceInfo {
        NamespaceInfo {
            id: "dev".into(),
            name: "Dev".into(),
            description: String::new(),
        }
    }

    fn registration(ip: &str) -> Registration {
        Registration {
            ip: ip.into(),
            port: 8080,
            cluster: "DEFAULT".into(),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: false,
            metadata: Default::default(),
            instance_id: None,
            client: None,
            owner: None,
        }
    }

    #[test]
    fn namespaces_and_persistent_instances_apply_to_the_registry() {
        let (registry, configs) = (Registry::new(), Configs::new());
        let apply = |c| apply(&registry, &configs, c);
        apply(CommandV1::CreateNamespace(dev())).unwrap();
        assert_eq!(
            apply(CommandV1::CreateNamespace(dev())),
            Err(Rejection::Registry(RegistryError::NamespaceExists(
                "dev".into()
            )))
        );
        let key = ServiceKey::new("dev", "G", "s");
        apply(CommandV1::Register {
            key: key.clone(),
            registration: registration("10.0.0.1"),
            at_ms: 1,
        })
        .unwrap();
        let held = registry.instance(&key, "10.0.0.1", 8080).unwrap();
        assert!(!held.ephemeral);
        apply(CommandV1::SetHealth {
            key: key.clone(),
            ip: "10.0.0.1".into(),
            port: 8080,
            healthy: false,
            at_ms: 2,
        })
        .unwrap();
        assert!(!registry.instance(&key, "10.0.0.1", 8080).unwrap().healthy);
        apply(CommandV1::Deregister {
            key: key.clone(),
            ip: "10.0.0.1".into(),
            port: 8080,
            at_ms: 3,
        })
        .unwrap();
        assert!(registry.instance(&key, "10.0.0.1", 8080).is_none());
    }

    #[test]
    fn a_namespace_holding_configuration_items_is_not_deleted() {
        let (registry, configs) = (Registry::new(), Configs::new());
        apply(&registry, &configs, CommandV1::CreateNamespace(dev())).unwrap();
        let publish = Publish {
            key: ConfigKey::new("dev", "G", "app.yaml"),
            content: "a: 1".into(),
            r#type: None,
            app_name: None,
            desc: None,
            tags: None,
            cas_md5: None,
            by: "nacos".into(),
            src_ip: "127.0.0.1".into(),
            retention: Retention::default(),
        };
        configs.publish(&publish, 1).unwrap();
        let delete = || CommandV1::DeleteNamespace { id: "dev".into() };
        assert_eq!(
            apply(&registry, &configs, delete()),
            Err(Rejection::NamespaceHoldsConfigs {
                id: "dev".into(),
                configs: 1
            })
        );
        assert!(registry
            .namespace("dev")
            .is_some_and(|n| n.info().is_some()));
    }
}
