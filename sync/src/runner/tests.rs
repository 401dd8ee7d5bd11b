use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;

use super::*;
use crate::{Applied, SinkError, SourceConfig, SourceInstance};

/// A source whose state the test sets; `poke` wakes its watch.
#[derive(Clone, Default)]
struct Scripted {
    services: Arc<Mutex<Services>>,
    fail: Arc<AtomicBool>,
    partial: Arc<AtomicBool>,
    poke: Arc<Notify>,
    /// `Some`: the source reports configuration items (`configs=true`).
    configs: Arc<Mutex<Option<Vec<SourceConfig>>>>,
    /// The next watch reports the configuration items rather than the services.
    configs_changed: Arc<AtomicBool>,
}

impl Scripted {
    fn set(&self, name: &str, instances: Vec<SourceInstance>) {
        self.services
            .lock()
            .unwrap()
            .insert(ServiceName::plain(name), instances);
        self.poke.notify_one();
    }

    fn set_configs(&self, items: &[(&str, &str, &str)]) {
        let list = items
            .iter()
            .map(|(group, data_id, content)| SourceConfig {
                namespace: "public".into(),
                group: group.to_string(),
                data_id: data_id.to_string(),
                content: content.to_string(),
                r#type: "yaml".into(),
                app_name: String::new(),
            })
            .collect();
        *self.configs.lock().unwrap() = Some(list);
        self.configs_changed.store(true, Ordering::SeqCst);
        self.poke.notify_one();
    }

    fn opener(&self) -> Opener {
        let me = self.clone();
        Box::new(move |_, _| Ok(Box::new(me.clone()) as Box<dyn Source>))
    }
}

#[async_trait::async_trait]
impl Source for Scripted {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(SourceError::Unreachable("scripted outage".into()));
        }
        self.configs_changed.store(false, Ordering::SeqCst);
        Ok(Snapshot {
            services: self.services.lock().unwrap().clone(),
            partial: self.partial.load(Ordering::SeqCst),
            configs: self.configs.lock().unwrap().clone(),
        })
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        self.poke.notified().await;
        if self.fail.load(Ordering::SeqCst) {
            return Err(SourceError::Unreachable("scripted outage".into()));
        }
        if self.configs_changed.swap(false, Ordering::SeqCst) {
            let configs = self.configs.lock().unwrap().clone().unwrap_or_default();
            return Ok(Update::Configs(configs));
        }
        Ok(Update::Services(self.services.lock().unwrap().clone()))
    }
}

/// An in-memory roster: instances by key, with their owner (`None`: native).
#[derive(Default)]
struct Memory {
    instances: Mutex<BTreeMap<TargetKey, (Option<String>, Target)>>,
    status: Mutex<Option<TaskStatus>>,
    writes: Mutex<usize>,
    /// Configuration items by key, with their owner (`None`: roster's own).
    configs: Mutex<BTreeMap<ConfigTargetKey, (Option<String>, ConfigTarget)>>,
}

#[async_trait::async_trait]
impl Sink for Memory {
    async fn owned(&self, task: &str) -> Result<Vec<Owned>, SinkError> {
        Ok(self
            .instances
            .lock()
            .unwrap()
            .values()
            .filter(|(owner, _)| owner.as_deref() == Some(task))
            .map(|(_, t)| Owned {
                target: t.clone(),
                pinned_weight: false,
                pinned_enabled: false,
                pinned_metadata: false,
            })
            .collect())
    }

    async fn apply(
        &self,
        task: &str,
        upserts: Vec<Target>,
        removals: Vec<TargetKey>,
    ) -> Result<Applied, SinkError> {
        *self.writes.lock().unwrap() += 1;
        let mut map = self.instances.lock().unwrap();
        let mut applied = Applied::default();
        for t in upserts {
            match map.get(&t.key()) {
                Some((owner, _)) if owner.as_deref() != Some(task) => applied.skipped += 1,
                _ => {
                    map.insert(t.key(), (Some(task.into()), t));
                }
            }
        }
        for k in removals {
            if map.get(&k).is_some_and(|(o, _)| o.as_deref() == Some(task)) {
                map.remove(&k);
            }
        }
        Ok(applied)
    }

    async fn report(&self, _task: &str, status: &TaskStatus) -> Result<(), SinkError> {
        *self.status.lock().unwrap() = Some(status.clone());
        Ok(())
    }

    async fn owned_configs(&self, task: &str) -> Result<Vec<ConfigTarget>, SinkError> {
        Ok(self
            .configs
            .lock()
            .unwrap()
            .values()
            .filter(|(owner, _)| owner.as_deref() == Some(task))
            .map(|(_, t)| t.clone())
            .collect())
    }

    async fn apply_configs(
        &self,
        task: &str,
        upserts: Vec<ConfigTarget>,
        removals: Vec<ConfigTargetKey>,
    ) -> Result<Applied, SinkError> {
        let mut map = self.configs.lock().unwrap();
        let mut applied = Applied::default();
        for t in upserts {
            match map.get(&t.key) {
                Some((owner, _)) if owner.as_deref() != Some(task) => applied.skipped += 1,
                _ => {
                    map.insert(t.key.clone(), (Some(task.into()), t));
                }
            }
        }
        for k in removals {
            if map.get(&k).is_some_and(|(o, _)| o.as_deref() == Some(task)) {
                map.remove(&k);
            }
        }
        Ok(applied)
    }
}

impl Memory {
    fn addrs(&self, service: &str) -> Vec<String> {
        self.instances
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.service == service)
            .map(|k| format!("{}:{}", k.ip, k.port))
            .collect()
    }

    fn get(&self, service: &str, ip: &str, port: u16) -> Option<Target> {
        self.instances
            .lock()
            .unwrap()
            .values()
            .find(|(_, t)| t.service == service && t.instance.ip == ip && t.instance.port == port)
            .map(|(_, t)| t.clone())
    }

    /// `group/dataId=content` of every configuration item, with `*` after the ones
    /// roster holds itself.
    fn config_items(&self) -> Vec<String> {
        self.configs
            .lock()
            .unwrap()
            .iter()
            .map(|(k, (owner, t))| {
                let mark = if owner.is_none() { "*" } else { "" };
                format!("{}/{}={}{mark}", k.group, k.data_id, t.content)
            })
            .collect()
    }

    fn status(&self) -> TaskStatus {
        self.status.lock().unwrap().clone().unwrap_or_default()
    }
}

fn inst(ip: &str, port: u16) -> SourceInstance {
    SourceInstance {
        cluster: "DEFAULT".into(),
        ip: ip.into(),
        port,
        weight: 1.0,
        healthy: true,
        enabled: true,
        metadata: Default::default(),
        source_id: format!("{ip}:{port}"),
    }
}

fn spec(name: &str) -> TaskSpec {
    TaskSpec {
        name: name.into(),
        source: "etcd://127.0.0.1:2379".into(),
        namespace: None,
        group: None,
        services: None,
        dry_run: false,
        paused: false,
        reconcile_secs: 3600,
        hold_share: 0.5,
        hold_min: 3,
        hold_secs: 300,
        created_ms: 0,
    }
}

/// Polls `check` for up to five seconds.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..250 {
        if check() {
            return;
        }
        sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn start(spec: TaskSpec, source: &Scripted, sink: &Arc<Memory>) -> AbortOnDrop {
    let sink: Arc<dyn Sink> = sink.clone();
    AbortOnDrop(tokio::spawn(run_with(spec, sink, Some(1), source.opener())))
}

#[tokio::test]
async fn imports_with_provenance_and_skips_copies_and_filtered() {
    let source = Scripted::default();
    let mut copy = inst("10.0.0.9", 80);
    copy.metadata
        .insert("sourceClusterId".into(), "elsewhere".into());
    source.set("orders", vec![inst("10.0.0.1", 80), copy]);
    source.set("orders-canary", vec![inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let mut s = spec("t1");
    s.services = Some("orders*,!*-canary".into());
    s.group = Some("MIGRATED".into());
    let _run = start(s, &source, &sink);
    until("orders imported", || {
        sink.addrs("orders") == ["10.0.0.1:80"]
    })
    .await;
    let t = sink.get("orders", "10.0.0.1", 80).unwrap();
    assert_eq!(
        (t.namespace.as_str(), t.group.as_str()),
        ("public", "MIGRATED")
    );
    let m = &t.instance.metadata;
    assert_eq!(m["syncSource"], "ETCD");
    assert_eq!(m["sync.taskId"], "t1");
    assert_eq!(m["sync.sourceInstanceId"], "10.0.0.1:80");
    assert_eq!(m["sourceClusterId"].len(), 32);
    assert!(sink.addrs("orders-canary").is_empty());
    until("status", || {
        let st = sink.status();
        st.state == TaskState::Running && st.copies_ignored == 1 && st.instances == 1
    })
    .await;
}

#[tokio::test]
async fn changes_and_deletions_follow_the_source() {
    let source = Scripted::default();
    source.set("svc", vec![inst("10.0.0.1", 80), inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let _run = start(spec("t"), &source, &sink);
    until("two", || sink.addrs("svc").len() == 2).await;
    let mut changed = inst("10.0.0.1", 80);
    changed.weight = 7.0;
    changed.metadata.insert("version".into(), "2".into());
    source.set("svc", vec![changed]);
    until("one left, changed", || {
        sink.addrs("svc") == ["10.0.0.1:80"]
            && sink
                .get("svc", "10.0.0.1", 80)
                .is_some_and(|t| t.instance.weight == 7.0 && t.instance.metadata["version"] == "2")
    })
    .await;
}

#[tokio::test]
async fn a_mass_vanish_is_held_then_released_after_hold_secs() {
    let source = Scripted::default();
    let six: Vec<_> = (1..=6).map(|i| inst(&format!("10.0.0.{i}"), 80)).collect();
    source.set("svc", six.clone());
    let sink = Arc::new(Memory::default());
    let mut s = spec("t");
    s.hold_secs = 1;
    let _run = start(s, &source, &sink);
    until("six", || sink.addrs("svc").len() == 6).await;
    source.set("svc", six[..2].to_vec());
    until("held", || sink.status().state == TaskState::Holding).await;
    let st = sink.status();
    assert_eq!(st.held_deletions, 4);
    assert!(
        st.hold_reasons[0].contains("4 of 6"),
        "{:?}",
        st.hold_reasons
    );
    assert_eq!(sink.addrs("svc").len(), 6);
    // Still gone after hold_secs: the next pass removes them.
    sleep(Duration::from_millis(1100)).await;
    source.poke.notify_one();
    until("released", || sink.addrs("svc").len() == 2).await;
    until("running", || sink.status().state == TaskState::Running).await;
}

#[tokio::test]
async fn a_small_vanish_is_not_held() {
    let source = Scripted::default();
    source.set("svc", vec![inst("10.0.0.1", 80), inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let _run = start(spec("t"), &source, &sink);
    until("two", || sink.addrs("svc").len() == 2).await;
    source.set("svc", vec![]);
    until("none", || sink.addrs("svc").is_empty()).await;
}

#[tokio::test]
async fn a_failing_source_deletes_nothing_and_recovers() {
    let source = Scripted::default();
    source.set("svc", vec![inst("10.0.0.1", 80), inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let _run = start(spec("t"), &source, &sink);
    until("two", || sink.addrs("svc").len() == 2).await;
    source.fail.store(true, Ordering::SeqCst);
    source.services.lock().unwrap().clear();
    source.poke.notify_one();
    until("error", || sink.status().state == TaskState::Error).await;
    assert!(sink
        .status()
        .last_error
        .unwrap()
        .contains("scripted outage"));
    assert_eq!(sink.addrs("svc").len(), 2);
    // Back, with one instance: the relist after the backoff converges.
    source
        .services
        .lock()
        .unwrap()
        .insert(ServiceName::plain("svc"), vec![inst("10.0.0.2", 80)]);
    source.fail.store(false, Ordering::SeqCst);
    until("converged", || sink.addrs("svc") == ["10.0.0.2:80"]).await;
    assert_eq!(sink.status().last_error, None);
}

#[tokio::test]
async fn a_partial_answer_deletes_nothing() {
    let source = Scripted::default();
    source.set("a", vec![inst("10.0.0.1", 80)]);
    source.set("b", vec![inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let mut s = spec("t");
    s.reconcile_secs = 1;
    let _run = start(s, &source, &sink);
    until("both", || {
        sink.addrs("a").len() == 1 && sink.addrs("b").len() == 1
    })
    .await;
    source.partial.store(true, Ordering::SeqCst);
    source
        .services
        .lock()
        .unwrap()
        .remove(&ServiceName::plain("b"));
    until("holding", || sink.status().state == TaskState::Holding).await;
    assert_eq!(sink.addrs("b").len(), 1);
}

#[tokio::test]
async fn native_addresses_are_left_alone() {
    let source = Scripted::default();
    source.set("svc", vec![inst("10.0.0.1", 80), inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let native = Target {
        namespace: "public".into(),
        group: "DEFAULT_GROUP".into(),
        service: "svc".into(),
        instance: inst("10.0.0.1", 80),
    };
    sink.instances
        .lock()
        .unwrap()
        .insert(native.key(), (None, native));
    let _run = start(spec("t"), &source, &sink);
    until("skipped", || sink.status().skipped == 1).await;
    assert!(sink
        .get("svc", "10.0.0.1", 80)
        .unwrap()
        .instance
        .metadata
        .is_empty());
    assert!(sink.get("svc", "10.0.0.2", 80).is_some());
}

#[tokio::test]
async fn a_dry_run_reports_and_writes_nothing() {
    let source = Scripted::default();
    source.set("svc", vec![inst("10.0.0.1", 80), inst("10.0.0.2", 80)]);
    let sink = Arc::new(Memory::default());
    let mut s = spec("t");
    s.dry_run = true;
    let _run = start(s, &source, &sink);
    until("report", || sink.status().dry_run.is_some()).await;
    let report = sink.status().dry_run.unwrap();
    assert_eq!(report.would_add, 2);
    assert_eq!(report.sample[0], "public/DEFAULT_GROUP/svc 10.0.0.1:80");
    assert_eq!(*sink.writes.lock().unwrap(), 0);
    assert!(sink.addrs("svc").is_empty());
}

#[tokio::test]
async fn configuration_items_follow_the_source_and_roster_own_stay() {
    let source = Scripted::default();
    source.set_configs(&[
        ("DEFAULT_GROUP", "app.yaml", "a: 1"),
        ("mapping", "org.demo.Api", "shop"),
        ("DEFAULT_GROUP", "local.yaml", "from the source"),
    ]);
    let sink = Arc::new(Memory::default());
    // roster holds its own item at one of the keys: it is left alone.
    let local = ConfigTargetKey {
        namespace: "public".into(),
        group: "DEFAULT_GROUP".into(),
        data_id: "local.yaml".into(),
    };
    sink.configs.lock().unwrap().insert(
        local.clone(),
        (
            None,
            ConfigTarget {
                key: local,
                content: "roster's own".into(),
                r#type: "yaml".into(),
                app_name: String::new(),
            },
        ),
    );
    let _run = start(spec("t1"), &source, &sink);
    until("items imported", || {
        sink.config_items()
            == [
                "DEFAULT_GROUP/app.yaml=a: 1",
                "DEFAULT_GROUP/local.yaml=roster's own*",
                "mapping/org.demo.Api=shop",
            ]
    })
    .await;
    until("status counts them", || {
        let s = sink.status();
        s.configs == Some(2) && s.configs_skipped == 1
    })
    .await;
    // A change and a removal at the source follow.
    source.set_configs(&[("DEFAULT_GROUP", "app.yaml", "a: 2")]);
    until("changed and removed", || {
        sink.config_items()
            == [
                "DEFAULT_GROUP/app.yaml=a: 2",
                "DEFAULT_GROUP/local.yaml=roster's own*",
            ]
    })
    .await;
}

#[tokio::test]
async fn configuration_items_vanishing_at_once_are_held() {
    let source = Scripted::default();
    source.set_configs(&[
        ("G", "a", "1"),
        ("G", "b", "1"),
        ("G", "c", "1"),
        ("G", "d", "1"),
    ]);
    let sink = Arc::new(Memory::default());
    let _run = start(spec("t1"), &source, &sink);
    until("imported", || sink.config_items().len() == 4).await;
    // Every item gone at once: held back, and the status says so.
    source.set_configs(&[]);
    until("held", || {
        let s = sink.status();
        s.state == TaskState::Holding
            && s.held_deletions == 4
            && s.hold_reasons.iter().any(|r| r.contains("configurations"))
    })
    .await;
    assert_eq!(sink.config_items().len(), 4, "nothing deleted");
    // Most of them back: the hold ends, the one still gone is removed.
    source.set_configs(&[("G", "a", "1"), ("G", "b", "1"), ("G", "c", "1")]);
    until("released", || {
        sink.config_items().len() == 3 && sink.status().state == TaskState::Running
    })
    .await;
}
