//! How the state machine applies sync task commands: changes to the task table, and a
//! task's batches of imports, which are refused once the task is gone (a deleted
//! task's runner may still have a batch in flight). Deleting a task removes what it
//! imported, instances and configuration items alike.

use super::SyncTasks;
use crate::services::configs::{Configs, Retention};
use crate::services::store::command::{CommandV1, Outcome, Rejection};
use roster_registry::Registry;

/// Applies task `command` to `tasks`, and a task's imports to `registry` and `configs`.
pub fn apply(
    tasks: &SyncTasks,
    registry: &Registry,
    configs: &Configs,
    command: CommandV1,
) -> Outcome {
    match command {
        CommandV1::CreateSyncTask(spec) => tasks.create(spec),
        CommandV1::SetSyncTaskPaused { name, paused } => tasks.set_paused(&name, paused),
        CommandV1::ApplySyncTask { name } => tasks.end_dry_run(&name),
        CommandV1::SyncStatus { name, status } => tasks.set_status(&name, status),
        CommandV1::DeleteSyncTask { name, at_ms } => {
            tasks.delete(&name)?;
            registry.remove_all_owned(&name, at_ms);
            // Its configuration imports go too (the history keeps them).
            configs.remove_owned(&name, Retention::default(), at_ms);
            Ok(())
        }
        CommandV1::SyncApply {
            task,
            upserts,
            removals,
            at_ms,
        } => {
            if !tasks.contains(&task) {
                return Err(Rejection::SyncTaskNotFound(task));
            }
            registry.apply_import(&task, &upserts, &removals, at_ms);
            Ok(())
        }
        CommandV1::SyncConfigs {
            task,
            upserts,
            removals,
            retention,
            at_ms,
        } => {
            if !tasks.contains(&task) {
                return Err(Rejection::SyncTaskNotFound(task));
            }
            configs.apply_import(&task, &upserts, &removals, retention, at_ms);
            Ok(())
        }
        other => unreachable!("a {:?} command routed to tasks", other.domain()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::configs::{ConfigKey, Imported};
    use roster_registry::service::ServiceKey;
    use roster_registry::Registration;

    fn spec(name: &str) -> roster_sync::TaskSpec {
        serde_json::from_value(serde_json::json!({
            "name": name, "source": "etcd://127.0.0.1:1"
        }))
        .unwrap()
    }

    fn import(task: &str, ip: &str) -> CommandV1 {
        let registration = Registration {
            ip: ip.into(),
            port: 80,
            cluster: "DEFAULT".into(),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: false,
            metadata: Default::default(),
            instance_id: None,
            client: None,
            owner: Some(task.into()),
        };
        CommandV1::SyncApply {
            task: task.into(),
            upserts: vec![(ServiceKey::new("public", "G", "s"), registration)],
            removals: vec![],
            at_ms: 1,
        }
    }

    #[test]
    fn a_task_imports_until_it_is_deleted_and_its_imports_go_with_it() {
        let (tasks, registry, configs) = (SyncTasks::default(), Registry::new(), Configs::new());
        let apply = |c| apply(&tasks, &registry, &configs, c);
        assert_eq!(
            apply(import("t1", "10.0.0.1")),
            Err(Rejection::SyncTaskNotFound("t1".into()))
        );
        apply(CommandV1::CreateSyncTask(spec("t1"))).unwrap();
        apply(import("t1", "10.0.0.1")).unwrap();
        let key = ConfigKey::new("", "G", "app.yaml");
        let item = Imported {
            content: "a: 1".into(),
            r#type: "yaml".into(),
            app_name: String::new(),
        };
        apply(CommandV1::SyncConfigs {
            task: "t1".into(),
            upserts: vec![(key.clone(), item)],
            removals: vec![],
            retention: Retention::default(),
            at_ms: 1,
        })
        .unwrap();
        assert_eq!(registry.owned_by("t1").len(), 1);
        assert!(configs.get(&key).is_some());

        apply(CommandV1::DeleteSyncTask {
            name: "t1".into(),
            at_ms: 2,
        })
        .unwrap();
        assert!(!tasks.contains("t1"));
        assert!(registry.owned_by("t1").is_empty());
        assert!(configs.get(&key).is_none());
        // A batch in flight when the task went is refused.
        assert_eq!(
            apply(import("t1", "10.0.0.2")),
            Err(Rejection::SyncTaskNotFound("t1".into()))
        );
    }
}
