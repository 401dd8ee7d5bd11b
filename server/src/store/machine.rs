//! The registry's Raft state machine: applies [`Command`]s to the [`Registry`] and the
//! auth state, and snapshots both. Changes to namespaces, users and sync tasks are also
//! recorded in [`CatalogChanges`] for the console's event streams (the registry reports
//! its service changes itself).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::tasks::{StoredTask, SyncTasks};
use crate::auth::{Auth, AuthData, User};
use crate::registry::{PersistentData, Registry};

use super::catalog::{CatalogChange, CatalogChanges};
use super::command::{Command, CommandV1, Outcome, Rejection};

/// Applies committed commands to the node's registry and auth state.
pub struct RegistryMachine {
    registry: Registry,
    auth: Auth,
    tasks: SyncTasks,
    /// Where applied catalog changes are recorded.
    catalog: Arc<CatalogChanges>,
}

/// What a snapshot holds, by format version.
#[derive(Serialize, Deserialize)]
enum SnapshotData {
    V1 {
        registry: PersistentData,
        auth: AuthData,
        /// Sync tasks (absent in snapshots of builds before sync).
        #[serde(default)]
        sync: Vec<StoredTask>,
    },
}

impl RegistryMachine {
    /// A machine that writes into `registry`, `auth` and `tasks`, and records what it
    /// changes of the catalog in `catalog`.
    pub fn new(
        registry: Registry,
        auth: Auth,
        tasks: SyncTasks,
        catalog: Arc<CatalogChanges>,
    ) -> Self {
        Self {
            registry,
            auth,
            tasks,
            catalog,
        }
    }

    fn apply_v1(&mut self, command: CommandV1) -> Outcome {
        let r = &self.registry;
        match command {
            CommandV1::Bootstrap {
                signing_key,
                admin,
                password_hash,
            } => {
                let mut data = AuthData::clone(&self.auth.data());
                if data.signing_key.is_some() {
                    return Err(Rejection::AlreadyBootstrapped);
                }
                data.signing_key = Some(signing_key);
                data.users.insert(
                    admin,
                    User {
                        password_hash,
                        admin: true,
                    },
                );
                self.auth.set_data(data);
                Ok(())
            }
            CommandV1::CreateNamespace(info) => Ok(r.create_namespace(&info)?),
            CommandV1::UpdateNamespace(info) => Ok(r.update_namespace(&info)?),
            CommandV1::DeleteNamespace { id } => Ok(r.delete_namespace(&id)?),
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
            CommandV1::CreateUser { username, user } => self.edit_users(|users| {
                if users.contains_key(&username) {
                    return Err(Rejection::UserExists(username));
                }
                users.insert(username, user);
                Ok(())
            }),
            CommandV1::SetPassword {
                username,
                password_hash,
            } => self.edit_users(|users| match users.get_mut(&username) {
                Some(user) => {
                    user.password_hash = password_hash;
                    Ok(())
                }
                None => Err(Rejection::UserNotFound(username)),
            }),
            CommandV1::DeleteUser { username } => {
                self.edit_users(|users| match users.get(&username) {
                    Some(user) if user.admin => Err(Rejection::DeleteAdmin(username)),
                    Some(_) => {
                        users.remove(&username);
                        Ok(())
                    }
                    None => Err(Rejection::UserNotFound(username)),
                })
            }
            CommandV1::CreateSyncTask(spec) => self.tasks.create(spec),
            CommandV1::SetSyncTaskPaused { name, paused } => self.tasks.set_paused(&name, paused),
            CommandV1::DeleteSyncTask { name, at_ms } => {
                self.tasks.delete(&name)?;
                r.remove_all_owned(&name, at_ms);
                Ok(())
            }
            CommandV1::SyncApply {
                task,
                upserts,
                removals,
                at_ms,
            } => {
                if !self.tasks.contains(&task) {
                    return Err(Rejection::SyncTaskNotFound(task));
                }
                r.apply_import(&task, &upserts, &removals, at_ms);
                Ok(())
            }
            CommandV1::SyncStatus { name, status } => self.tasks.set_status(&name, status),
            CommandV1::RotateKey {
                signing_key,
                keep_previous_secs,
                at_ms,
            } => {
                let mut data = AuthData::clone(&self.auth.data());
                if !data.rotate(signing_key, keep_previous_secs, at_ms) {
                    return Err(Rejection::NotBootstrapped);
                }
                self.auth.set_data(data);
                Ok(())
            }
        }
    }

    fn edit_users(
        &self,
        f: impl FnOnce(&mut std::collections::BTreeMap<String, User>) -> Outcome,
    ) -> Outcome {
        let mut data = AuthData::clone(&self.auth.data());
        f(&mut data.users)?;
        self.auth.set_data(data);
        Ok(())
    }
}

impl roster_raft::StateMachine for RegistryMachine {
    type Command = Command;
    type Response = Outcome;

    fn apply(&mut self, command: Command) -> Outcome {
        match command {
            Command::V1(c) => {
                let change = CatalogChange::of(&c);
                let outcome = self.apply_v1(c);
                // A refused command changed nothing.
                if let (Some(change), Ok(())) = (change, &outcome) {
                    self.catalog.mark(change);
                }
                outcome
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let data = SnapshotData::V1 {
            registry: self.registry.persistent_data(),
            auth: AuthData::clone(&self.auth.data()),
            sync: self.tasks.all(),
        };
        rmp_serde::to_vec_named(&data).expect("snapshot data serializes")
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let data: SnapshotData = rmp_serde::from_slice(snapshot).map_err(|e| e.to_string())?;
        match data {
            SnapshotData::V1 {
                registry,
                auth,
                sync,
            } => {
                self.registry
                    .restore_persistent(&registry, crate::clock::now_ms());
                self.auth.set_data(auth);
                self.tasks.restore(sync);
            }
        }
        self.catalog.mark(CatalogChange::Everything);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use roster_raft::StateMachine;

    use super::*;
    use crate::registry::namespace::NamespaceInfo;
    use crate::registry::service::ServiceKey;

    fn machine() -> (RegistryMachine, Arc<CatalogChanges>) {
        let catalog = Arc::new(CatalogChanges::default());
        let machine = RegistryMachine::new(
            Registry::new(),
            Auth::new(true, 60),
            SyncTasks::default(),
            catalog.clone(),
        );
        (machine, catalog)
    }

    fn apply(machine: &mut RegistryMachine, command: CommandV1) -> Outcome {
        machine.apply(Command::V1(command))
    }

    #[test]
    fn applied_catalog_commands_are_recorded_and_refused_ones_are_not() {
        let (mut m, catalog) = machine();
        let dev = NamespaceInfo {
            id: "dev".into(),
            name: "Dev".into(),
            description: String::new(),
        };
        apply(&mut m, CommandV1::CreateNamespace(dev.clone())).unwrap();
        apply(
            &mut m,
            CommandV1::CreateUser {
                username: "ann".into(),
                user: User {
                    password_hash: "secret-hash".into(),
                    admin: false,
                },
            },
        )
        .unwrap();
        let spec = serde_json::from_value(serde_json::json!({
            "name": "t1", "source": "etcd://127.0.0.1:1"
        }))
        .unwrap();
        apply(&mut m, CommandV1::CreateSyncTask(spec)).unwrap();
        // A registry change is the registry's to report.
        apply(
            &mut m,
            CommandV1::SetHealth {
                key: ServiceKey::new("dev", "G", "s"),
                ip: "127.0.0.1".into(),
                port: 1,
                healthy: false,
                at_ms: 1,
            },
        )
        .unwrap();
        assert_eq!(
            catalog.drain(),
            vec![
                CatalogChange::Namespace("dev".into()),
                CatalogChange::Users,
                CatalogChange::Task("t1".into()),
            ]
        );

        // Refused: nothing changed, nothing recorded.
        apply(&mut m, CommandV1::CreateNamespace(dev)).unwrap_err();
        apply(
            &mut m,
            CommandV1::DeleteUser {
                username: "nobody".into(),
            },
        )
        .unwrap_err();
        apply(
            &mut m,
            CommandV1::SetSyncTaskPaused {
                name: "none".into(),
                paused: true,
            },
        )
        .unwrap_err();
        assert!(catalog.drain().is_empty());
    }

    #[test]
    fn a_rotated_key_and_the_one_it_replaced_survive_a_snapshot() {
        let (mut m, _) = machine();
        let rotate = |key: &[u8]| CommandV1::RotateKey {
            signing_key: key.to_vec(),
            keep_previous_secs: 60,
            at_ms: 1_000_000,
        };
        assert_eq!(
            apply(&mut m, rotate(b"k2")),
            Err(Rejection::NotBootstrapped)
        );
        apply(
            &mut m,
            CommandV1::Bootstrap {
                signing_key: b"k1".to_vec(),
                admin: "nacos".into(),
                password_hash: "hash".into(),
            },
        )
        .unwrap();
        apply(&mut m, rotate(b"k2")).unwrap();
        let before = AuthData::clone(&m.auth.data());
        assert_eq!(before.signing_key.as_deref(), Some(&b"k2"[..]));
        assert_eq!(before.retired_keys[0].key, b"k1");

        let (mut restored, _) = machine();
        restored.restore(&m.snapshot()).unwrap();
        assert_eq!(*restored.auth.data(), before);
    }

    #[test]
    fn a_snapshot_from_before_rotation_restores_without_retired_keys() {
        // What a build before key rotation wrote: `auth` without `retired_keys`.
        #[derive(Serialize)]
        struct OldAuth {
            #[serde(with = "serde_bytes")]
            signing_key: Vec<u8>,
            users: std::collections::BTreeMap<String, User>,
        }
        #[derive(Serialize)]
        enum OldSnapshot {
            V1 {
                registry: PersistentData,
                auth: OldAuth,
            },
        }
        let (m, _) = machine();
        let old = OldSnapshot::V1 {
            registry: m.registry.persistent_data(),
            auth: OldAuth {
                signing_key: b"k1".to_vec(),
                users: Default::default(),
            },
        };
        let (mut restored, _) = machine();
        restored
            .restore(&rmp_serde::to_vec_named(&old).unwrap())
            .unwrap();
        let auth = restored.auth.data();
        assert_eq!(auth.signing_key.as_deref(), Some(&b"k1"[..]));
        assert!(auth.retired_keys.is_empty());
    }

    #[test]
    fn a_restored_snapshot_changes_everything() {
        let (mut m, catalog) = machine();
        let snapshot = m.snapshot();
        m.restore(&snapshot).unwrap();
        assert_eq!(catalog.drain(), vec![CatalogChange::Everything]);
    }
}
