//! Where a naming write goes — the one place that decides it for every protocol face.
//! HTTP v1, HTTP v2 and gRPC parse their wire format into the registry's domain types
//! (checked by `roster_registry::validate::registration`) and call [`Writes`]; it routes:
//!
//! - an ephemeral instance of an address client (HTTP beats) to the address's Distro
//!   owner, forwarded over the peer channel when that is another node;
//! - an ephemeral instance of a gRPC connection to this node, which owns its
//!   connections (Distro replicates the change like any other);
//! - a persistent instance, or a persistent instance's health, through Raft, after the
//!   checks that depend on node-local state (a service's kind can hang on ephemeral
//!   instances, which the state machine must not consult);
//! - an update or deregistration by the kind the request states, else by the kind of
//!   the instance found at the address.
//!
//! A write that decides on local state decides only on what this node has applied,
//! which can lag the leader (a registration through another node, acknowledged a
//! moment ago, may not be here yet). Wherever that view would change the outcome — an
//! instance or service not found, a kind that decides the path — the write first waits
//! for a read barrier (everything the leader had committed when it was called is
//! applied here) and looks again. A deregistration that states `ephemeral=false` goes
//! through Raft whatever this node holds.
//!
//! Namespaces and service settings are Raft data: their writes propose here too, after
//! the checks a face makes on a view at least as new as the leader's commit
//! ([`Store::recheck`]) where this node's own view would refuse.
//!
//! Sync imports are the sync task's own writes (`faces::sync::RaftSink`, through Raft as
//! `SyncApply`, built in `store::tasks::writes`); they meet the same naming rules.

use std::sync::Arc;

use crate::error::Error;
use crate::services::configs::Configs;
use crate::services::distro::{Distro, EphemeralOp, OpReply};
use crate::services::store::command::{CommandV1, Rejection};
use crate::services::store::{ProposeError, Store};
use roster_registry::clock::now_ms;
use roster_registry::instance::{addr_key, Heartbeat, Instance};
use roster_registry::namespace::NamespaceInfo;
use roster_registry::service::{ClusterSettings, HealthChecker, ServiceKey, ServiceSettings};
use roster_registry::{InstancePatch, Registration, Registry};

/// The routes of naming writes, over the node's registry, store and Distro.
#[derive(Clone, Copy)]
pub struct Writes<'a> {
    /// The registry (read for kinds and existence; written for connection clients).
    pub registry: &'a Registry,
    /// Raft, for persistent data.
    pub store: &'a Store,
    /// Distro, for ephemeral instances of address clients.
    pub distro: &'a Distro,
}

/// The kind of instance a deregistration names, if it names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stated {
    /// `ephemeral=false`, gRPC's persistent request: through Raft whatever is held here.
    Persistent,
    /// `ephemeral=true`: the kind found decides (as unstated; a persistent instance at
    /// the address is removed too, as it always was).
    Ephemeral,
    /// No kind given: the kind found decides.
    Unstated,
}

impl Stated {
    /// From an `ephemeral` parameter, if given.
    pub fn from_ephemeral(ephemeral: Option<bool>) -> Self {
        match ephemeral {
            Some(false) => Self::Persistent,
            Some(true) => Self::Ephemeral,
            None => Self::Unstated,
        }
    }
}

/// What a beat found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeatOutcome {
    /// The instance is known (or was registered from the beat): beat again after this
    /// many ms.
    Known(u64),
    /// No such instance, and the beat carried nothing to register it from.
    Unknown,
}

impl Writes<'_> {
    /// Registers an instance: an ephemeral one of an address client at its owner, one of
    /// a gRPC connection here, a persistent one through Raft unless the service holds
    /// ephemeral instances.
    pub async fn register(&self, key: ServiceKey, reg: Registration) -> Result<(), Error> {
        if reg.ephemeral && reg.client.is_some() {
            self.registry.register(&key, &reg, now_ms())?;
            return Ok(());
        }
        if reg.ephemeral {
            self.distro
                .execute(EphemeralOp::Register {
                    key,
                    registration: reg,
                })
                .await?;
            return Ok(());
        }
        if let Some(conflict) = self.registry.kind_conflict(&key, false) {
            return Err(conflict.into());
        }
        self.store
            .propose(CommandV1::Register {
                key,
                registration: reg,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Makes the instances of gRPC connection `client` in service `key` exactly `regs`
    /// (ephemeral, each carrying `client`): applied here, where the connection is.
    pub fn replace_connection_instances(
        &self,
        client: &Arc<str>,
        key: &ServiceKey,
        regs: &[Registration],
    ) -> Result<(), Error> {
        let now = now_ms();
        let mut keep = Vec::with_capacity(regs.len());
        for reg in regs {
            debug_assert!(reg.ephemeral && reg.client.as_deref() == Some(&**client));
            self.registry.register(key, reg, now)?;
            keep.push(addr_key(&reg.ip, reg.port));
        }
        self.registry
            .retain_client_instances(client, key, &keep, now);
        Ok(())
    }

    /// Deregisters the instance at `ip:port`. `stated` is the kind the request names
    /// (`ephemeral=false`: persistent). A persistent one goes through Raft (an imported
    /// one is refused there); an ephemeral one to its owner (also when it is not
    /// replicated here yet). With no persistent kind stated, the kind found here decides;
    /// an instance not found here is looked up again after a read barrier, so a
    /// persistent registration acknowledged through another node is never mistaken for
    /// an absent ephemeral one. Missing is not an error.
    pub async fn deregister(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
        stated: Stated,
    ) -> Result<(), Error> {
        let persistent = match stated {
            Stated::Persistent => {
                // An ephemeral instance at the address goes too, as an unstated
                // deregistration would take it (the address is what the caller names).
                if self
                    .registry
                    .instance(&key, ip, port)
                    .is_some_and(|i| i.ephemeral)
                {
                    self.deregister_ephemeral(key.clone(), ip, port).await?;
                }
                true
            }
            Stated::Ephemeral | Stated::Unstated => {
                match self.fresh_instance(&key, ip, port).await? {
                    Some(i) => !i.ephemeral,
                    None => false,
                }
            }
        };
        if persistent {
            self.deregister_persistent(key, ip, port).await
        } else {
            self.deregister_ephemeral(key, ip, port).await
        }
    }

    /// Deregisters the ephemeral instance at `ip:port` at its owner.
    async fn deregister_ephemeral(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
    ) -> Result<(), Error> {
        self.distro
            .execute(EphemeralOp::Deregister {
                key,
                ip: ip.to_string(),
                port,
            })
            .await?;
        Ok(())
    }

    /// The instance at `ip:port` as this node holds it; when it holds none, as it holds
    /// it after a read barrier (at least as new as the leader's commit when called).
    async fn fresh_instance(
        &self,
        key: &ServiceKey,
        ip: &str,
        port: u16,
    ) -> Result<Option<Arc<Instance>>, Error> {
        if let Some(i) = self.registry.instance(key, ip, port) {
            return Ok(Some(i));
        }
        self.store.read_barrier().await?;
        Ok(self.registry.instance(key, ip, port))
    }

    /// Deregisters the persistent instance at `ip:port` through Raft.
    pub async fn deregister_persistent(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
    ) -> Result<(), Error> {
        self.store
            .propose(CommandV1::Deregister {
                key,
                ip: ip.to_string(),
                port,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// An operator's update of the instance at `ip:port`, routed by its kind (looked up
    /// again after a read barrier when this node does not hold it).
    pub async fn update(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
        patch: InstancePatch,
    ) -> Result<(), Error> {
        let Some(instance) = self.fresh_instance(&key, ip, port).await? else {
            if self.registry.service_by_key(&key).is_none() {
                return Err(Error::service_not_found(format!(
                    "service not found, namespace: {}, service: {}",
                    key.namespace,
                    key.grouped()
                )));
            }
            return Err(Error::instance_not_found(format!(
                "instance {ip}:{port} not found in service {}",
                key.grouped()
            )));
        };
        if instance.ephemeral {
            self.distro
                .execute(EphemeralOp::Update {
                    key,
                    ip: ip.to_string(),
                    port,
                    patch,
                })
                .await?;
        } else {
            self.store
                .propose(CommandV1::UpdateInstance {
                    key,
                    ip: ip.to_string(),
                    port,
                    patch,
                    at_ms: now_ms(),
                })
                .await?;
        }
        Ok(())
    }

    /// Sets the health of the persistent instance at `ip:port` whose cluster the server
    /// does not check (health checker `NONE`). An ephemeral instance's health follows
    /// its beats, and a checked one's its checks: both are refused. Decided after a read
    /// barrier.
    pub async fn set_health(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
        healthy: bool,
    ) -> Result<(), Error> {
        // Decided on the instance's kind and its cluster's checker, both Raft data: read
        // as of the leader's commit, not as this node happens to hold them.
        self.store.read_barrier().await?;
        let grouped = key.grouped();
        let svc = self
            .registry
            .service_by_key(&key)
            .ok_or_else(|| Error::service_not_found(format!("service {grouped} not found!")))?;
        let view = svc.view();
        let instance = view
            .instances
            .get(&roster_registry::instance::Addr::new(ip, port))
            .ok_or_else(|| {
                Error::instance_not_found(format!(
                    "instance {ip}:{port} not found in service {grouped}"
                ))
            })?;
        if instance.ephemeral {
            return Err(Error::bad_request(format!(
                "instance {ip}:{port} is ephemeral: its health follows its heartbeats and cannot be set"
            )));
        }
        let settings = view.settings_or_default();
        let checker = settings
            .clusters
            .get(&*instance.cluster)
            .map(|c| &c.health_checker)
            .unwrap_or(&HealthChecker::Tcp);
        if *checker != HealthChecker::None {
            return Err(Error::bad_request(format!(
                "health check is still working, service: {grouped}, cluster: {}",
                instance.cluster
            )));
        }
        record_health(self.store, key, ip, port, healthy).await?;
        Ok(())
    }

    /// A beat that this node can take itself — it owns the address and holds the
    /// instance, as for nearly every beat — without building the op a forward needs.
    /// `None`: call [`Writes::beat`].
    pub fn beat_here(&self, ns: &str, grouped: &str, ip: &str, port: u16) -> Option<Heartbeat> {
        self.distro.beat_here(ns, grouped, ip, port, now_ms())
    }

    /// A beat at the address's owner; `re_register` stands in for a registration when the
    /// owner does not know the instance (a full beat).
    pub async fn beat(
        &self,
        key: ServiceKey,
        ip: &str,
        port: u16,
        re_register: Option<Registration>,
    ) -> Result<BeatOutcome, Error> {
        let op = EphemeralOp::Beat {
            key,
            ip: ip.to_string(),
            port,
            re_register,
        };
        Ok(match self.distro.execute(op).await? {
            OpReply::BeatOk(interval) => BeatOutcome::Known(interval),
            OpReply::BeatUnknown | OpReply::Done => BeatOutcome::Unknown,
        })
    }
}

/// Sets the health of the persistent instance at `ip:port` through Raft, unchecked: the
/// verdict of a server-side health check (`health::check`), or an operator's change
/// that [`Writes::set_health`] has checked.
pub async fn record_health(
    store: &Store,
    key: ServiceKey,
    ip: &str,
    port: u16,
    healthy: bool,
) -> Result<(), ProposeError> {
    store
        .propose(CommandV1::SetHealth {
            key,
            ip: ip.to_string(),
            port,
            healthy,
            at_ms: now_ms(),
        })
        .await
}

/// A service that is not there, in the words of the service routes.
pub fn service_not_found(key: &ServiceKey) -> Error {
    Error::service_not_found(format!(
        "service not found, namespace: {}, serviceName: {}",
        key.namespace,
        key.grouped()
    ))
}

/// Namespaces and service settings: Raft data, proposed after the checks that can be
/// made before (the state machine decides again when it applies).
impl Writes<'_> {
    /// Declares a namespace (an id that exists is refused when applied).
    pub async fn create_namespace(&self, info: NamespaceInfo) -> Result<(), Error> {
        self.store.propose(CommandV1::CreateNamespace(info)).await?;
        Ok(())
    }

    /// Renames or describes a namespace.
    pub async fn update_namespace(&self, info: NamespaceInfo) -> Result<(), Error> {
        self.store.propose(CommandV1::UpdateNamespace(info)).await?;
        Ok(())
    }

    /// Deletes namespace `id` if it holds no service and no item of `configs`: judged
    /// on a view at least as new as the leader's commit when this node's own refuses (a
    /// service or item removed through another node a moment ago).
    pub async fn delete_namespace(&self, id: &str, configs: &Configs) -> Result<(), Error> {
        self.store
            .recheck(|| {
                self.registry.check_namespace_deletable(id)?;
                match configs.count_in(id) {
                    0 => Ok(()),
                    configs => Err(Error::from(Rejection::NamespaceHoldsConfigs {
                        id: id.to_string(),
                        configs,
                    })),
                }
            })
            .await?;
        self.store
            .propose(CommandV1::DeleteNamespace { id: id.to_string() })
            .await?;
        Ok(())
    }

    /// Stores settings for a new service.
    pub async fn create_service(
        &self,
        key: ServiceKey,
        settings: ServiceSettings,
    ) -> Result<(), Error> {
        self.store
            .propose(CommandV1::CreateService {
                key,
                settings,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Deletes a service that holds no instance (judged again after a read barrier when
    /// this node's view refuses).
    pub async fn delete_service(&self, key: ServiceKey) -> Result<(), Error> {
        self.store
            .recheck(|| self.registry.check_deletable(&key).map_err(Error::from))
            .await?;
        self.store
            .propose(CommandV1::DeleteService {
                key,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Changes a service's settings as `change` says, starting from those the leader
    /// had committed when called (read barrier), not this node's possibly older copy. A
    /// service not found is refused before `change` runs; `change` may refuse too.
    pub async fn update_service(
        &self,
        key: ServiceKey,
        change: impl FnOnce(&mut ServiceSettings) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.store.read_barrier().await?;
        let current = self
            .registry
            .service_by_key(&key)
            .ok_or_else(|| service_not_found(&key))?;
        let mut settings = ServiceSettings::clone(&current.view().settings_or_default());
        change(&mut settings)?;
        self.store
            .propose(CommandV1::UpdateService {
                key,
                settings,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Stores one cluster's settings in an existing service (looked up again after a
    /// read barrier when this node does not hold it).
    pub async fn put_cluster(
        &self,
        key: ServiceKey,
        cluster: String,
        settings: ClusterSettings,
    ) -> Result<(), Error> {
        self.store
            .recheck(|| {
                self.registry
                    .service_by_key(&key)
                    .ok_or_else(|| service_not_found(&key))
            })
            .await?;
        self.store
            .propose(CommandV1::PutCluster {
                key,
                cluster,
                settings,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }
}
