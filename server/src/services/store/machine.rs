//! The registry's Raft state machine: routes each [`Command`] to the domain that applies
//! it ([`Domain`]; the domains' apply functions are given to it, [`Appliers`], so the
//! store knows the commands' shape and the state it snapshots, not any domain's rules),
//! and snapshots the state they hold: the [`Registry`]'s persistent part,
//! the auth data, the sync tasks and the configuration items. Changes to namespaces,
//! users, roles, permissions and sync tasks are also recorded in [`CatalogChanges`] for
//! the console's event streams (the registry reports its service changes itself).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::tasks::{self, StoredTask, SyncTasks};
use crate::services::auth::{Auth, AuthData};
use crate::services::configs::{ConfigData, Configs};
use roster_registry::{PersistentData, Registry};

use super::catalog::{CatalogChange, CatalogChanges};
use super::command::{Command, CommandV1, Domain, Outcome};

/// How each persistent domain applies its commands, given to the machine by the wiring
/// (`services::domains::APPLIERS`). The sync task table's apply is the store's own.
#[derive(Clone, Copy)]
pub struct Appliers {
    /// Namespaces, services and instances, into the registry (a namespace is deleted
    /// only when it holds no configuration item).
    pub naming: fn(&Registry, &Configs, CommandV1) -> Outcome,
    /// Users, roles, permissions and the token signing key.
    pub auth: fn(&Auth, CommandV1) -> Outcome,
    /// Configuration items and their history.
    pub configs: fn(&Configs, CommandV1) -> Outcome,
}

/// Applies committed commands to the node's registry and auth state.
pub struct RegistryMachine {
    registry: Registry,
    auth: Auth,
    tasks: SyncTasks,
    configs: Configs,
    /// Where applied catalog changes are recorded.
    catalog: Arc<CatalogChanges>,
    /// How each domain applies its commands.
    appliers: Appliers,
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
        /// Configuration items and their history (absent in snapshots of builds
        /// before the configuration API).
        #[serde(default)]
        configs: ConfigData,
    },
}

/// How many items of each kind a state holds: what a backup's header says of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StateCounts {
    /// Declared namespaces (`public` aside).
    pub namespaces: u64,
    /// Services with stored settings (protection threshold, metadata, selector, clusters).
    pub services: u64,
    /// Persistent instances.
    pub persistent_instances: u64,
    /// Users, the admin among them.
    pub users: u64,
    /// Role bindings: (user, role) pairs.
    pub role_bindings: u64,
    /// Permissions granted to roles.
    pub grants: u64,
    /// Sync tasks.
    pub sync_tasks: u64,
    /// Configuration items.
    pub configs: u64,
    /// Configuration history versions.
    pub config_versions: u64,
}

impl StateCounts {
    /// Counts the items of a state made by [`RegistryMachine`]'s `snapshot`.
    pub fn of(state: &[u8]) -> Result<Self, String> {
        let data: SnapshotData = rmp_serde::from_slice(state).map_err(|e| e.to_string())?;
        let SnapshotData::V1 {
            registry,
            auth,
            sync,
            configs,
        } = data;
        let len = |n: usize| n as u64;
        Ok(Self {
            namespaces: len(registry.namespaces.len()),
            services: len(registry.services.len()),
            persistent_instances: len(registry.instances.len()),
            users: len(auth.users.len()),
            role_bindings: len(auth.roles.values().map(|r| r.len()).sum()),
            grants: len(auth.permissions.values().map(|g| g.len()).sum()),
            sync_tasks: len(sync.len()),
            configs: len(configs.items.len()),
            config_versions: len(configs.history.iter().map(|(_, v)| v.len()).sum()),
        })
    }
}

impl RegistryMachine {
    /// A machine over parts of its own, attached to no node: for reading and writing
    /// states offline (restoring a backup, recovering a node's directory).
    pub fn detached(appliers: Appliers) -> Self {
        Self::new(
            Registry::new(),
            Auth::new(true, 3600),
            SyncTasks::default(),
            Configs::new(),
            Arc::new(CatalogChanges::default()),
            appliers,
        )
    }

    /// A machine that writes into `registry`, `auth`, `tasks` and `configs` through
    /// `appliers`, and records what it changes of the catalog in `catalog`.
    pub fn new(
        registry: Registry,
        auth: Auth,
        tasks: SyncTasks,
        configs: Configs,
        catalog: Arc<CatalogChanges>,
        appliers: Appliers,
    ) -> Self {
        Self {
            registry,
            auth,
            tasks,
            configs,
            catalog,
            appliers,
        }
    }

    /// Routes `command` to the domain that applies it, with the parts of the state that
    /// domain reads and writes.
    fn apply_v1(&self, command: CommandV1) -> Outcome {
        let (registry, stored) = (&self.registry, &self.configs);
        match command.domain() {
            Domain::Naming => (self.appliers.naming)(registry, stored, command),
            Domain::Auth => (self.appliers.auth)(&self.auth, command),
            Domain::Configs => (self.appliers.configs)(stored, command),
            Domain::Tasks => tasks::apply::apply(&self.tasks, registry, stored, command),
        }
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
            configs: self.configs.data(),
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
                configs,
            } => {
                self.registry
                    .restore_persistent(&registry, roster_registry::clock::now_ms());
                self.auth.set_data(auth);
                self.tasks.restore(sync);
                self.configs.restore(&configs);
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
    use crate::services::auth::permissions::{Granted, ROLE_ADMIN};
    use crate::services::auth::User;
    use crate::services::store::command::Rejection;
    use roster_registry::namespace::NamespaceInfo;
    use roster_registry::service::ServiceKey;

    fn machine() -> (RegistryMachine, Arc<CatalogChanges>) {
        let catalog = Arc::new(CatalogChanges::default());
        let machine = RegistryMachine::new(
            Registry::new(),
            Auth::new(true, 60),
            SyncTasks::default(),
            Configs::new(),
            catalog.clone(),
            crate::services::domains::APPLIERS,
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
        // Nor roles, permissions or token generations.
        assert!(auth.roles.is_empty() && auth.permissions.is_empty());
        assert!(auth.token_generations.is_empty());
    }

    fn bootstrap_with_ann(m: &mut RegistryMachine) {
        apply(
            m,
            CommandV1::Bootstrap {
                signing_key: b"k1".to_vec(),
                admin: "nacos".into(),
                password_hash: "hash".into(),
            },
        )
        .unwrap();
        apply(
            m,
            CommandV1::CreateUser {
                username: "ann".into(),
                user: User {
                    password_hash: "ann-hash".into(),
                    admin: false,
                },
            },
        )
        .unwrap();
    }

    fn role(role: &str, username: &str) -> CommandV1 {
        CommandV1::AddRole {
            role: role.into(),
            username: username.into(),
        }
    }

    fn permission(role: &str, resource: &str, action: Granted) -> CommandV1 {
        CommandV1::AddPermission {
            role: role.into(),
            resource: resource.into(),
            action,
        }
    }

    #[test]
    fn roles_and_permissions_apply_and_move_token_generations() {
        let (mut m, catalog) = machine();
        bootstrap_with_ann(&mut m);
        catalog.drain();
        let generation = |m: &RegistryMachine, u: &str| m.auth.data().token_generation(u);
        assert_eq!(
            apply(&mut m, role("dev", "nobody")),
            Err(Rejection::UserNotFound("nobody".into()))
        );
        apply(&mut m, role("dev", "ann")).unwrap();
        assert_eq!(generation(&m, "ann"), 1, "a role change ends her tokens");
        // Bound already: nothing changes, her tokens stay.
        apply(&mut m, role("dev", "ann")).unwrap();
        assert_eq!(generation(&m, "ann"), 1);
        apply(&mut m, permission("dev", "dev:*:*", Granted::ReadWrite)).unwrap();
        apply(&mut m, permission("dev", ":*:*", Granted::Read)).unwrap();
        assert_eq!(catalog.drain(), vec![CatalogChange::Access]);
        let data = m.auth.data();
        assert_eq!(
            data.roles["ann"],
            std::collections::BTreeSet::from(["dev".to_string()])
        );
        assert_eq!(data.permissions_of("dev").count(), 2);
        assert_eq!(generation(&m, "ann"), 1, "grants end no tokens");

        // A permission is taken back only as granted.
        let take = |resource: &str, action| CommandV1::DeletePermission {
            role: "dev".into(),
            resource: resource.into(),
            action,
        };
        apply(&mut m, take(":*:*", Granted::ReadWrite)).unwrap();
        assert_eq!(m.auth.data().permissions_of("dev").count(), 2);
        apply(&mut m, take(":*:*", Granted::Read)).unwrap();
        assert_eq!(m.auth.data().permissions_of("dev").count(), 1);

        // A password change and a role removal end tokens too.
        apply(
            &mut m,
            CommandV1::SetPassword {
                username: "ann".into(),
                password_hash: "new".into(),
            },
        )
        .unwrap();
        assert_eq!(generation(&m, "ann"), 2);
        apply(
            &mut m,
            CommandV1::DeleteRole {
                role: "dev".into(),
                username: None,
            },
        )
        .unwrap();
        assert_eq!(generation(&m, "ann"), 3);
        assert!(m.auth.data().roles.is_empty());
        // The role's permissions stay, for when it is bound again (as in Nacos).
        assert_eq!(m.auth.data().permissions_of("dev").count(), 1);

        // Deleting a user drops their roles and keeps their generation moving.
        apply(&mut m, role("ops", "ann")).unwrap();
        apply(
            &mut m,
            CommandV1::DeleteUser {
                username: "ann".into(),
            },
        )
        .unwrap();
        assert!(m.auth.data().roles.is_empty());
        assert_eq!(generation(&m, "ann"), 5);
    }

    #[test]
    fn role_admin_is_the_admin_flag_and_the_last_admin_keeps_it() {
        let (mut m, _) = machine();
        bootstrap_with_ann(&mut m);
        let take = |username: Option<&str>| CommandV1::DeleteRole {
            role: ROLE_ADMIN.into(),
            username: username.map(str::to_string),
        };
        assert_eq!(
            apply(&mut m, take(Some("nacos"))),
            Err(Rejection::DeleteAdmin("nacos".into()))
        );
        assert!(apply(&mut m, take(None)).is_err());
        apply(&mut m, role(ROLE_ADMIN, "ann")).unwrap();
        assert!(m.auth.data().users["ann"].admin);
        assert!(m.auth.data().roles.is_empty(), "kept as the flag");
        assert_eq!(m.auth.data().token_generation("ann"), 1);
        // Two admins: one may go.
        apply(&mut m, take(Some("nacos"))).unwrap();
        assert!(!m.auth.data().users["nacos"].admin);
        assert_eq!(m.auth.data().token_generation("nacos"), 1);
        assert_eq!(
            apply(&mut m, take(Some("ann"))),
            Err(Rejection::DeleteAdmin("ann".into()))
        );
        // Not an admin: nothing to take.
        apply(&mut m, take(Some("nacos"))).unwrap();
    }

    #[test]
    fn roles_permissions_and_generations_survive_a_snapshot() {
        let (mut m, _) = machine();
        bootstrap_with_ann(&mut m);
        apply(&mut m, role("dev", "ann")).unwrap();
        apply(&mut m, permission("dev", "dev:*:*", Granted::ReadWrite)).unwrap();
        apply(&mut m, permission("dev", "prod:*:naming/*", Granted::Read)).unwrap();
        let before = AuthData::clone(&m.auth.data());
        assert_eq!(before.token_generation("ann"), 1);
        let (mut restored, _) = machine();
        restored.restore(&m.snapshot()).unwrap();
        assert_eq!(*restored.auth.data(), before);
    }

    #[test]
    fn configs_publish_through_commands_and_survive_a_snapshot() {
        use crate::services::configs::{ConfigKey, ConfigRejection, Publish, Retention};
        let (mut m, catalog) = machine();
        let key = ConfigKey::new("", "mapping", "org.demo.Api");
        let publish = |content: &str, cas: Option<&str>| CommandV1::PublishConfig {
            publish: Publish {
                key: key.clone(),
                content: content.into(),
                r#type: None,
                app_name: None,
                desc: None,
                tags: None,
                cas_md5: cas.map(str::to_string),
                by: "nacos".into(),
                src_ip: "127.0.0.1".into(),
                retention: Retention::default(),
            },
            at_ms: 1,
        };
        apply(&mut m, publish("app-a", None)).unwrap();
        assert_eq!(
            apply(&mut m, publish("app-b", Some("stale"))),
            Err(Rejection::Config(ConfigRejection::CasMismatch))
        );
        assert!(
            catalog.drain().is_empty(),
            "configs report their own changes"
        );
        let (mut restored, _) = machine();
        restored.restore(&m.snapshot()).unwrap();
        assert_eq!(restored.configs.data(), m.configs.data());
        assert_eq!(&*restored.configs.get(&key).unwrap().content, "app-a");
        apply(
            &mut restored,
            CommandV1::RemoveConfig {
                key: key.clone(),
                by: "nacos".into(),
                src_ip: "127.0.0.1".into(),
                retention: Retention::default(),
                at_ms: 2,
            },
        )
        .unwrap();
        assert!(restored.configs.get(&key).is_none());
        assert_eq!(restored.configs.history(&key).len(), 2);
        // The leader's pruner: a removed item's history goes once it is old enough.
        let prune = |at_ms| CommandV1::PruneConfigHistory {
            retention: Retention {
                max_age_ms: 10,
                max_versions: 100,
            },
            at_ms,
        };
        apply(&mut restored, prune(5)).unwrap();
        assert_eq!(restored.configs.history(&key).len(), 2);
        apply(&mut restored, prune(20)).unwrap();
        assert!(restored.configs.history(&key).is_empty());
    }

    #[test]
    fn a_restored_snapshot_changes_everything() {
        let (mut m, catalog) = machine();
        let snapshot = m.snapshot();
        m.restore(&snapshot).unwrap();
        assert_eq!(catalog.drain(), vec![CatalogChange::Everything]);
    }
}
