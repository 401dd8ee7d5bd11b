//! The real side of the model test: the [`Registry`] with what the test keeps beside it,
//! each operation applied to it and to the model (comparing what each returns), and every
//! read the core offers compared after each step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use proptest::test_runner::TestCaseError;

use super::naive::{Answer, MInstance, MReg, MService, Model};
use super::ops::{
    addr_id, key, metadata, CopyInstance, CopyOf, Op, QuerySpec, Rev, Step, ADDRS, CLUSTERS,
    CLUSTER_FILTERS, LANES, LOCAL_CONNS, REMOTE_CONN, SELECTORS, SERVICES, TASKS, THRESHOLDS,
    WEIGHTS,
};
use crate::balance::{consistent_hash, weighted_random, RoundRobin};
use crate::changes::ChangeSet;
use crate::client::ClientData;
use crate::guard::EvictionGuard;
use crate::instance::{
    addr_key, BeatClock, ClusterName, Heartbeat, Instance, Keeper, Meta, Pinned, Rare,
};
use crate::select::{select, Query};
use crate::selector::LabelSelector;
use crate::service::{
    ListParts, Selector, ServiceKey, ServiceSettings, ServiceView, METADATA_SELECTOR,
};
use crate::wire::{grpc_service_info, grpc_service_info_made, plain_list_parts, GrpcInfoRequest};
use crate::{InstancePatch, Registration, Registry, RegistryError};

/// An instance as compared: every field a reader can get at, as text.
fn seen_real(i: &Instance) -> String {
    let rare = i.rare.as_deref().cloned().unwrap_or_default();
    format!(
        "{} {} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?} hb={}/{}/{} beat={:?}",
        i.address,
        i.ip(),
        i.port,
        &*i.cluster,
        i.weight,
        i.healthy,
        i.enabled,
        i.ephemeral,
        i.metadata,
        i.pinned,
        i.client().map(|c| c.to_string()),
        (
            rare.owner.map(|o| o.to_string()),
            rare.instance_id.map(|o| o.to_string())
        ),
        rare.heartbeat.interval_ms,
        rare.heartbeat.timeout_ms,
        rare.heartbeat.delete_ms,
        i.clock().map(|c| c.last_beat_ms()),
    )
}

fn seen_model(i: &MInstance) -> String {
    let (timeout, delete) = i.timeouts();
    format!(
        "{} {} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?} hb={}/{}/{} beat={:?}",
        i.address,
        i.ip,
        i.port,
        i.cluster,
        i.weight,
        i.healthy,
        i.enabled,
        i.ephemeral,
        i.metadata,
        i.pinned,
        i.conn,
        (i.task.clone(), i.instance_id.clone()),
        i.interval(),
        timeout,
        delete,
        i.beats().then_some(i.last_beat),
    )
}

/// The real registry with what the test keeps beside it.
pub(super) struct Real {
    pub(super) registry: Registry,
    pub(super) guard: EvictionGuard,
    pub(super) changes: Arc<ChangeSet>,
    /// Address clients owned elsewhere, for the sweep's `owns`.
    pub(super) foreign: Mutex<BTreeSet<String>>,
}

fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if cond {
        Ok(())
    } else {
        Err(TestCaseError::fail(what()))
    }
}

fn eq<T: PartialEq + std::fmt::Debug>(real: T, model: T, what: &str) -> Result<(), TestCaseError> {
    check(real == model, || {
        format!("{what}:\n  real:  {real:?}\n  model: {model:?}")
    })
}

fn registration(reg: &MReg) -> Registration {
    let (ip, port) = ADDRS[reg.addr];
    Registration {
        ip: ip.into(),
        port,
        cluster: reg.cluster.clone(),
        weight: reg.weight,
        healthy: reg.healthy,
        enabled: reg.enabled,
        ephemeral: reg.ephemeral,
        metadata: reg.metadata.clone(),
        instance_id: reg.instance_id.clone(),
        client: reg.conn.clone(),
        owner: reg.task.clone(),
    }
}

/// Runs one operation on both sides; compares what each returns.
pub(super) fn apply(real: &Real, model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    let r = &real.registry;
    let now = model.now;
    match op {
        Op::Register {
            svc,
            addr,
            conn,
            ephemeral,
            cluster,
            weight,
            enabled,
            healthy,
            meta,
            with_id,
        } => {
            let reg = MReg {
                svc: *svc,
                addr: *addr,
                cluster: CLUSTERS[*cluster].into(),
                weight: WEIGHTS[*weight],
                healthy: *healthy,
                enabled: *enabled,
                ephemeral: *ephemeral,
                metadata: metadata(*meta),
                instance_id: with_id.then(|| format!("id-{addr}")),
                conn: conn.map(|c| LOCAL_CONNS[c].to_string()),
                task: None,
            };
            let wire = registration(&reg);
            // The API refuses a persistent registration into an ephemeral service before
            // proposing it; the registry checks an ephemeral one itself.
            let real_ok = if !ephemeral && r.kind_conflict(&key(*svc), false).is_some() {
                false
            } else {
                match r.register(&key(*svc), &wire, now) {
                    Ok(()) => true,
                    Err(RegistryError::KindConflict { .. }) => false,
                    Err(e) => return Err(TestCaseError::fail(format!("register: {e}"))),
                }
            };
            let model_ok = if !ephemeral && model.persistent_conflict(*svc) {
                false
            } else {
                model.register(reg).is_ok()
            };
            eq(real_ok, model_ok, "registration accepted")
        }
        Op::Deregister {
            svc,
            addr,
            ephemeral,
        } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.deregister(&key(*svc), ip, port, *ephemeral, now);
            eq(
                got,
                model.deregister(*svc, *addr, *ephemeral),
                "deregistered",
            )
        }
        Op::Update {
            svc,
            addr,
            ephemeral,
            weight,
            enabled,
            meta,
        } => {
            let patch = InstancePatch {
                weight: weight.map(|w| WEIGHTS[w]),
                enabled: *enabled,
                metadata: meta.map(metadata),
            };
            let (ip, port) = ADDRS[*addr];
            let got = match r.update_instance(&key(*svc), ip, port, *ephemeral, &patch, now) {
                Ok(()) => Ok(()),
                Err(RegistryError::ServiceNotFound(_)) => Err("service"),
                Err(RegistryError::InstanceNotFound { .. }) => Err("instance"),
                Err(e) => return Err(TestCaseError::fail(format!("update: {e}"))),
            };
            eq(got, model.update(*svc, *addr, *ephemeral, &patch), "update")
        }
        Op::Beat { svc, addr } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.beat(&key(*svc), ip, port, now).map(|h| h.interval_ms);
            eq(got, model.beat(*svc, *addr), "beat answer")
        }
        Op::SetHealth {
            svc,
            addr,
            ephemeral,
            healthy,
        } => {
            let (ip, port) = ADDRS[*addr];
            let got = r.set_health(&key(*svc), ip, port, *ephemeral, *healthy, now);
            let want = model.set_health(*svc, &addr_id(*addr), *ephemeral, *healthy);
            eq(got, want, "health set")
        }
        Op::Settings {
            svc,
            threshold,
            selector,
            lane_key,
        } => {
            let settings = ServiceSettings {
                protect_threshold: THRESHOLDS[*threshold],
                selector: match selector {
                    0 => Selector {
                        kind: "none".into(),
                        expression: String::new(),
                    },
                    1 => Selector {
                        kind: METADATA_SELECTOR.into(),
                        expression: SELECTORS[1].into(),
                    },
                    _ => Selector {
                        kind: "label".into(),
                        expression: "CONSUMER.label.x = PROVIDER.label.x".into(),
                    },
                },
                lane_key: lane_key.then(|| "env".to_string()),
                ..Default::default()
            };
            r.update_service(&key(*svc), &settings, now);
            model.services.entry(*svc).or_default().settings = Some(settings);
            Ok(())
        }
        Op::Advance { ms } => {
            model.now += ms;
            Ok(())
        }
        Op::Sweep => {
            let owns = |client: &str| !real.foreign.lock().unwrap().contains(client);
            r.expire_due(now, &owns, &real.guard);
            real.guard.release_idle(now);
            model.sweep();
            // Removals the model leaves open follow the real registry.
            for (svc, address) in std::mem::take(&mut model.may_linger) {
                let gone = r
                    .service_by_key(&key(svc))
                    .is_none_or(|s| s.view().instances.get(&address).is_none());
                if gone {
                    model.remove(svc, &address);
                }
            }
            Ok(())
        }
        Op::Ownership { addr, foreign } => {
            let id = addr_id(*addr);
            let mut set = real.foreign.lock().unwrap();
            if *foreign {
                set.insert(id.clone());
                model.foreign.insert(id);
            } else {
                set.remove(&id);
                model.foreign.remove(&id);
            }
            // What the expiry worker does when the live members change.
            r.recheck_all();
            Ok(())
        }
        Op::Disconnect { conn } => {
            let id = LOCAL_CONNS[*conn];
            let got = r.remove_client(id, now);
            eq(
                got,
                model.drop_conn(id, None, &[]),
                "instances of the closed connection",
            )
        }
        Op::Retain { conn, svc, keep } => {
            let id = LOCAL_CONNS[*conn];
            let keep: Vec<String> = keep.iter().map(|a| addr_id(*a)).collect();
            let keep_arcs: Vec<Arc<str>> = keep.iter().map(|a| Arc::from(a.as_str())).collect();
            let got = r.retain_client_instances(id, &key(*svc), &keep_arcs, now);
            eq(
                got,
                model.drop_conn(id, Some(*svc), &keep),
                "instances trimmed",
            )
        }
        Op::Copy {
            of,
            revision,
            beat_ago,
            instances,
        } => {
            let id = of.id();
            let base = r.clients().get(&id).map_or(0, |c| c.revision);
            let rev = match revision {
                Rev::Newer => base + 1,
                Rev::Same => base,
                Rev::Older => base.saturating_sub(1),
            };
            let last_beat = now.saturating_sub(*beat_ago);
            // One instance per service: an address client holds one there, and a
            // connection one per address.
            let mut chosen: BTreeMap<(usize, String), &CopyInstance> = BTreeMap::new();
            for c in instances {
                let address = match of {
                    CopyOf::Addr(a) => addr_id(*a),
                    CopyOf::Remote => addr_id(c.addr),
                };
                let slot = if matches!(of, CopyOf::Addr(_)) {
                    (c.svc, String::new())
                } else {
                    (c.svc, address)
                };
                chosen.entry(slot).or_insert(c);
            }
            let mut wire = Vec::new();
            let mut modelled = Vec::new();
            let mut svcs = Vec::new();
            for c in chosen.values() {
                let addr = match of {
                    CopyOf::Addr(a) => *a,
                    CopyOf::Remote => c.addr,
                };
                let (ip, port) = ADDRS[addr];
                let conn = matches!(of, CopyOf::Remote).then(|| REMOTE_CONN.to_string());
                let m = MInstance {
                    address: addr_id(addr),
                    ip: ip.into(),
                    port,
                    cluster: CLUSTERS[c.cluster].into(),
                    weight: WEIGHTS[c.weight],
                    healthy: c.healthy,
                    enabled: c.enabled,
                    ephemeral: true,
                    metadata: metadata(c.meta),
                    pinned: Pinned::default(),
                    conn: conn.clone(),
                    task: None,
                    instance_id: None,
                    last_beat,
                    held: false,
                };
                let inst = Instance {
                    address: addr_key(ip, port),
                    port,
                    cluster: ClusterName::new(&m.cluster),
                    weight: m.weight,
                    healthy: m.healthy,
                    enabled: m.enabled,
                    ephemeral: true,
                    metadata: Meta::new(&m.metadata),
                    pinned: Pinned::default(),
                    keeper: match conn {
                        Some(c) => Keeper::Connection(Arc::from(c.as_str())),
                        None => Keeper::Beats(BeatClock::new(0)),
                    },
                    rare: Rare::boxed(None, None, Heartbeat::from_metadata(&m.metadata)),
                };
                wire.push((key(c.svc), inst));
                modelled.push(m);
                svcs.push(c.svc);
            }
            let data = ClientData {
                id: id.clone(),
                revision: rev,
                last_beat_ms: last_beat,
                instances: wire,
            };
            let got = r.apply_client(&data, now);
            // An older revision than 0 is 0 again: the same.
            let revision = if rev == base { Rev::Same } else { *revision };
            let want = model.copy_applies(&id, revision);
            if want {
                model.apply_copy(&id, last_beat, &modelled, &svcs);
            }
            eq(got, want, "copy applied")
        }
        Op::DropCopy { of } => {
            let id = of.id();
            r.drop_client_copy(&id, now);
            model.drop_copy(&id);
            Ok(())
        }
        Op::Refresh { of, beat_ago } => {
            let id = of.id();
            let at = now.saturating_sub(*beat_ago);
            r.refresh_client_beat(&id, at);
            model.refresh(&id, at);
            Ok(())
        }
        Op::Import {
            task,
            svc,
            addr,
            weight,
            healthy,
            meta,
            remove,
        } => {
            let task = TASKS[*task];
            let (ip, port) = ADDRS[*addr];
            if *remove {
                r.apply_import(task, &[], &[(key(*svc), ip.to_string(), port)], now);
                model.remove_import(task, *svc, &addr_id(*addr));
            } else {
                let reg = MReg {
                    svc: *svc,
                    addr: *addr,
                    cluster: "DEFAULT".into(),
                    weight: WEIGHTS[*weight],
                    healthy: *healthy,
                    enabled: true,
                    ephemeral: false,
                    metadata: metadata(*meta),
                    instance_id: None,
                    conn: None,
                    task: Some(task.to_string()),
                };
                r.apply_import(task, &[(key(*svc), registration(&reg))], &[], now);
                let _ = model.register(reg);
            }
            Ok(())
        }
        Op::RemoveTask { task } => {
            let task = TASKS[*task];
            let got = r.remove_all_owned(task, now);
            let mut owned = Vec::new();
            for (svc, s) in &model.services {
                for i in s.instances.values() {
                    if i.task.as_deref() == Some(task) {
                        owned.push((*svc, i.address.clone()));
                    }
                }
            }
            for (svc, address) in &owned {
                model.remove_import(task, *svc, address);
            }
            eq(got, owned.len(), "imports removed")
        }
        Op::DeleteService { svc } => {
            let deletable = r.check_deletable(&key(*svc)).is_ok();
            if deletable {
                r.delete_service(&key(*svc), now);
            }
            let want = model
                .services
                .get(svc)
                .is_some_and(|s| s.instances.is_empty());
            if want {
                model.services.remove(svc);
            }
            eq(deletable, want, "service deletable")
        }
    }
}

/// What the test remembers of the real side between steps.
#[derive(Default)]
pub(super) struct Before {
    /// Per service: its `Service` (by address) and view revision.
    revisions: BTreeMap<usize, (usize, u64)>,
    /// Per client: its record's revision.
    client_revisions: BTreeMap<String, u64>,
    /// Per service: what the model showed.
    visible: BTreeMap<usize, String>,
}

fn all_clients() -> Vec<String> {
    let mut ids: Vec<String> = (0..ADDRS.len()).map(addr_id).collect();
    ids.extend(LOCAL_CONNS.iter().map(|c| c.to_string()));
    ids.push(REMOTE_CONN.to_string());
    ids
}

fn real_query(view: &ServiceView, q: &QuerySpec) -> (Answer, Vec<Arc<Instance>>) {
    let selector = (q.selector > 0).then(|| LabelSelector::parse(SELECTORS[q.selector]).unwrap());
    let selection = select(
        view,
        &Query {
            clusters: CLUSTER_FILTERS[q.clusters],
            healthy_only: q.healthy_only,
            selector: selector.as_ref(),
            lanes: LANES[q.lanes],
        },
    );
    let hosts = selection
        .hosts
        .iter()
        .map(|h| (h.address.to_string(), selection.reported_healthy(h)))
        .collect();
    let answer = (hosts, selection.protected, selection.lane.clone());
    (answer, selection.hosts)
}

/// Compares every read after a step.
pub(super) fn compare(
    real: &Real,
    model: &Model,
    step: &Step,
    before: &mut Before,
) -> Result<(), TestCaseError> {
    let r = &real.registry;
    let marked: BTreeSet<ServiceKey> = real.changes.drain().into_iter().collect();
    let plain = QuerySpec {
        clusters: 0,
        healthy_only: false,
        selector: 0,
        lanes: 0,
    };
    let healthy_only = QuerySpec {
        healthy_only: true,
        ..plain
    };
    let mut totals = (0, 0, 0);
    for svc in 0..SERVICES.len() {
        let k = key(svc);
        let found = r.service_by_key(&k);
        let m = model.services.get(&svc);
        eq(
            found.is_some(),
            m.is_some(),
            &format!("service {svc} exists"),
        )?;
        let visible = m.map(MService::visible).unwrap_or_default();
        let changed = before.visible.get(&svc).cloned().unwrap_or_default() != visible;
        if changed {
            check(marked.contains(&k), || {
                format!("service {svc} changed but was not marked for push; marked {marked:?}")
            })?;
        }
        before.visible.insert(svc, visible);
        let (Some(service), Some(m)) = (found, m) else {
            before.revisions.remove(&svc);
            continue;
        };
        let view = service.view();
        // Revisions grow with every visible change of the same service.
        let id = Arc::as_ptr(&service) as usize;
        if let Some((was_id, was_rev)) = before.revisions.get(&svc) {
            if *was_id == id {
                check(view.revision >= *was_rev, || {
                    format!("service {svc}: revision went back")
                })?;
                check(!changed || view.revision > *was_rev, || {
                    format!("service {svc} changed but its revision stayed {was_rev}")
                })?;
            }
        }
        before.revisions.insert(svc, (id, view.revision));
        // Instances, field by field.
        let real_seen: Vec<String> = view.instances.values().map(|i| seen_real(i)).collect();
        let model_seen: Vec<String> = m.instances.values().map(seen_model).collect();
        eq(
            real_seen,
            model_seen,
            &format!("instances of service {svc}"),
        )?;
        let settings = |s: Option<&ServiceSettings>| {
            s.map(|s| (s.protect_threshold, s.selector.clone(), s.lane_key.clone()))
        };
        eq(
            settings(view.settings.as_deref()),
            settings(m.settings.as_ref()),
            &format!("settings of service {svc}"),
        )?;
        let healthy = m.instances.values().filter(|i| i.healthy).count();
        eq(view.healthy_count(), healthy, "healthy count")?;
        let clusters: BTreeSet<&str> = m.instances.values().map(|i| i.cluster.as_str()).collect();
        let real_clusters: Vec<String> =
            view.cluster_names().iter().map(|c| c.to_string()).collect();
        eq(
            real_clusters,
            clusters.iter().map(|c| c.to_string()).collect(),
            "cluster names",
        )?;
        totals.0 += 1;
        totals.1 += m.instances.len();
        totals.2 += healthy;
        // Queries, and the candidates of each pick strategy.
        for q in [plain, healthy_only, step.queries[0], step.queries[1]] {
            let (answer, hosts) = real_query(&view, &q);
            let want = model.query(svc, &q);
            eq(&answer, &want, &format!("service {svc}, query {q:?}"))?;
            let picks = QuerySpec {
                healthy_only: true,
                ..q
            };
            let (_, candidates) = real_query(&view, &picks);
            let allowed: BTreeSet<String> = model
                .query(svc, &picks)
                .0
                .into_iter()
                .filter(|(a, _)| m.instances[a].weight > 0.0)
                .map(|(a, _)| a)
                .collect();
            let mut rr = RoundRobin::default();
            let got = [
                weighted_random(&candidates, 0.0),
                weighted_random(&candidates, 0.61),
                weighted_random(&candidates, 0.999_999),
                consistent_hash(&candidates, "user-1"),
                consistent_hash(&candidates, "user-2"),
                rr.next(&candidates),
                rr.next(&candidates),
            ];
            for pick in got {
                match pick {
                    Some(p) => check(allowed.contains(&*p.address), || {
                        format!(
                            "service {svc}, {q:?}: picked {} outside {allowed:?}",
                            p.address
                        )
                    })?,
                    None => check(allowed.is_empty(), || {
                        format!("service {svc}, {q:?}: no pick from {allowed:?}")
                    })?,
                }
            }
            drop(hosts);
        }
        // The cached plain list body, as a reader gets it.
        let ListParts { head, tail, .. } = plain_list_parts(&view, &service.grouped, &k.group);
        let body = [&head[..], b"0", &tail[..]].concat();
        let json: serde_json::Value = serde_json::from_slice(&body).expect("list body is JSON");
        let listed: Vec<(String, bool)> = json["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .map(|h| {
                (
                    format!("{}:{}", h["ip"].as_str().unwrap(), h["port"]),
                    h["healthy"].as_bool().unwrap(),
                )
            })
            .collect();
        let (want_hosts, want_protected, _) = model.query(svc, &plain);
        eq(
            listed,
            want_hosts,
            &format!("cached list body of service {svc}"),
        )?;
        eq(
            json["reachProtectionThreshold"].as_bool(),
            Some(want_protected),
            "cached list body's reachProtectionThreshold",
        )?;
        // The gRPC serviceInfo copied from that cache, as made from the instances.
        let grpc = GrpcInfoRequest {
            name: &k.name,
            group: &k.group,
            grouped: &service.grouped,
            clusters_raw: "",
            clusters: &[],
            healthy_only: false,
            now_ms: 7,
        };
        eq(
            String::from_utf8_lossy(&grpc_service_info(Some(&view), &grpc)),
            String::from_utf8_lossy(&grpc_service_info_made(Some(&view), &grpc)),
            &format!("gRPC serviceInfo of service {svc} from the cached list"),
        )?;
    }
    eq(r.totals(), totals, "totals (services, instances, healthy)")?;
    for ns in ["public", "ns1"] {
        let real_keys: Vec<String> = r.services(ns).iter().map(|s| s.key.to_string()).collect();
        let model_keys: Vec<String> = model
            .services
            .keys()
            .filter(|svc| SERVICES[**svc].0 == ns)
            .map(|svc| key(*svc).to_string())
            .collect();
        eq(
            real_keys,
            model_keys,
            &format!("services of namespace {ns}"),
        )?;
    }
    for task in TASKS {
        let mut real_owned: Vec<String> = r
            .owned_by(task)
            .iter()
            .map(|(k, i)| format!("{k} {}", i.address))
            .collect();
        real_owned.sort();
        let mut model_owned: Vec<String> = Vec::new();
        for (svc, s) in &model.services {
            for i in s
                .instances
                .values()
                .filter(|i| i.task.as_deref() == Some(task))
            {
                model_owned.push(format!("{} {}", key(*svc), i.address));
            }
        }
        model_owned.sort();
        eq(
            real_owned,
            model_owned,
            &format!("instances task {task} owns"),
        )?;
    }
    // Distro's view of clients.
    let drained: BTreeSet<String> = r
        .clients()
        .drain_changed()
        .iter()
        .map(|c| c.to_string())
        .collect();
    for id in all_clients() {
        let record = r.clients().get(&id);
        eq(
            record.is_some(),
            model.known.contains(&id),
            &format!("client {id} has a record"),
        )?;
        let held = model.client_instances(&id);
        let entries: BTreeSet<(usize, String)> = record
            .iter()
            .flat_map(|rec| rec.entries.iter())
            .map(|(k, a)| {
                let svc = (0..SERVICES.len())
                    .find(|s| key(*s) == **k)
                    .expect("a known service");
                (svc, a.to_string())
            })
            .collect();
        eq(&entries, &held, &format!("entries of client {id}'s record"))?;
        if let Some(data) = r.client_data(&id) {
            // What Distro sends (shared instances) is what a peer decodes as the data.
            let share = r.client_share(&id).expect("a client with data has a share");
            check(
                rmp_serde::to_vec_named(&share).ok() == rmp_serde::to_vec_named(&data).ok(),
                || format!("client {id}: its share does not serialize as its data"),
            )?;
            let mut sent: Vec<String> = data
                .instances
                .iter()
                .map(|(k, i)| format!("{k} {}", seen_real(i)))
                .collect();
            sent.sort();
            let mut want: Vec<String> = held
                .iter()
                .map(|(svc, a)| {
                    format!(
                        "{} {}",
                        key(*svc),
                        seen_model(&model.services[svc].instances[a])
                    )
                })
                .collect();
            want.sort();
            eq(sent, want, &format!("client {id} as Distro sends it"))?;
            let last = held
                .iter()
                .map(|(svc, a)| &model.services[svc].instances[a])
                .filter(|i| i.beats())
                .map(|i| i.last_beat)
                .max()
                .unwrap_or(0);
            eq(
                data.last_beat_ms,
                last,
                &format!("client {id}'s last beat as sent"),
            )?;
        }
        let revision = record.as_ref().map_or(0, |rec| rec.revision);
        if model.changed_here.contains(&id) {
            check(drained.contains(&id), || {
                format!("client {id} changed here but Distro was not told; told {drained:?}")
            })?;
            let was = before.client_revisions.get(&id).copied().unwrap_or(0);
            check(revision > was, || {
                format!("client {id} changed here but its revision stayed {was}")
            })?;
        }
        before.client_revisions.insert(id, revision);
    }
    Ok(())
}
