//! How the state machine applies configuration commands — publications, removals, gray
//! versions and history pruning — to the configuration store. Everything an apply needs comes inside
//! the command (time, who, the history retention), so every node decides alike. A
//! sync task's configuration imports are the task's (`store::tasks::apply`).

use super::Configs;
use crate::services::store::command::{CommandV1, Outcome};

/// Applies configuration `command` to `configs`.
pub fn apply(configs: &Configs, command: CommandV1) -> Outcome {
    match command {
        CommandV1::PublishConfig { publish, at_ms } => Ok(configs.publish(&publish, at_ms)?),
        CommandV1::RemoveConfig {
            key,
            by,
            src_ip,
            retention,
            at_ms,
        } => {
            configs.remove(&key, &by, &src_ip, retention, at_ms);
            Ok(())
        }
        CommandV1::PublishConfigGray { publish, at_ms } => {
            Ok(configs.publish_gray(&publish, at_ms)?)
        }
        CommandV1::RemoveConfigGray {
            key,
            name,
            by,
            src_ip,
            retention,
            at_ms,
        } => {
            configs.remove_gray(&key, &name, &by, &src_ip, retention, at_ms);
            Ok(())
        }
        CommandV1::PruneConfigHistory { retention, at_ms } => {
            configs.prune_history(retention, at_ms);
            Ok(())
        }
        other => unreachable!("a {:?} command routed to configs", other.domain()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::configs::{ConfigKey, ConfigRejection, Publish, Retention};
    use crate::services::store::command::Rejection;

    fn publish(key: &ConfigKey, content: &str, cas_md5: Option<&str>) -> CommandV1 {
        CommandV1::PublishConfig {
            publish: Publish {
                key: key.clone(),
                content: content.into(),
                r#type: None,
                app_name: None,
                desc: None,
                tags: None,
                cas_md5: cas_md5.map(str::to_string),
                by: "nacos".into(),
                src_ip: "127.0.0.1".into(),
                retention: Retention::default(),
            },
            at_ms: 1,
        }
    }

    #[test]
    fn publications_compare_and_set_and_removals_keep_history() {
        let configs = Configs::new();
        let key = ConfigKey::new("", "G", "app.yaml");
        apply(&configs, publish(&key, "a: 1", None)).unwrap();
        assert_eq!(
            apply(&configs, publish(&key, "a: 2", Some("stale"))),
            Err(Rejection::Config(ConfigRejection::CasMismatch))
        );
        assert_eq!(&*configs.get(&key).unwrap().content, "a: 1");
        let remove = CommandV1::RemoveConfig {
            key: key.clone(),
            by: "nacos".into(),
            src_ip: "127.0.0.1".into(),
            retention: Retention::default(),
            at_ms: 2,
        };
        apply(&configs, remove).unwrap();
        assert!(configs.get(&key).is_none());
        assert_eq!(configs.history(&key).len(), 2);
        let prune = CommandV1::PruneConfigHistory {
            retention: Retention {
                max_age_ms: 10,
                max_versions: 100,
            },
            at_ms: 20,
        };
        apply(&configs, prune).unwrap();
        assert!(configs.history(&key).is_empty());
    }
}
