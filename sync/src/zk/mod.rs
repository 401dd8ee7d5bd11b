//! ZooKeeper as a source, in three layouts (Dubbo 2.x, Dubbo 3, Spring Cloud Zookeeper;
//! see [`layout`]).
//!
//! `list` adds one persistent recursive watch on the root (ZooKeeper 3.6+) *before* it
//! reads the tree, so nothing that changes while it reads is missed, then rebuilds the
//! source's own index of instances by znode path. `watch` applies the watch's node
//! events to that index (re-reading a Curator node's data when it is created or
//! changed) and returns the complete instance lists of the services touched.
//!
//! Session events: a lost connection may lose node events (ZOOKEEPER-4698), so when it
//! comes back `watch` answers [`Update::Resync`]; an expired or closed session, or a
//! connection that does not come back soon, is an error (the runner lists again, on a
//! new session if needed).

mod layout;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use self::layout::{curator_instance, dubbo_provider, join, Layout, Node};
use crate::keyed::{Entries, Keyed};
use crate::{Filter, ServiceName, Snapshot, Source, SourceError, SourceUrl, Update};

/// Session timeout we ask the servers for.
const SESSION_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait for a session to be established.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest a whole `list` may take (requests wait while the connection is down).
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `watch` waits for a change before answering "nothing yet".
const WATCH_WAIT: Duration = Duration::from_secs(25);
/// How long `watch` waits for a lost connection to come back before it errs.
const RECONNECT_WAIT: Duration = Duration::from_secs(10);
/// Requests sent at once while reading the tree (answers come back in order).
const PIPELINE: usize = 256;

/// Reads services registered in ZooKeeper (`zookeeper://host:2181[,host...]?layout=&root=`).
pub struct ZkSource {
    /// The connect string, `host:port,host:port`.
    hosts: String,
    layout: Layout,
    /// The root path, without a trailing `/` (`/` itself allowed).
    root: String,
    filter: Filter,
    /// The session, kept across lists until it expires or closes.
    client: Option<zk::Client>,
    /// The persistent recursive watch on the root; `None` until a list succeeded.
    watcher: Option<zk::PersistentWatcher>,
    /// What the last list and the watch since then have read.
    keyed: Keyed,
}

impl ZkSource {
    /// A source for `url`, reading the services `filter` admits. Connects lazily.
    pub fn new(url: &SourceUrl, filter: &Filter) -> Result<Self, SourceError> {
        let (layout, root) = Layout::from_url(url)?;
        Ok(Self {
            hosts: url.hosts.join(","),
            layout,
            root,
            filter: filter.clone(),
            client: None,
            watcher: None,
            keyed: Keyed::default(),
        })
    }

    /// The current session, or a new one if there is none or it ended.
    async fn session(&mut self) -> Result<zk::Client, SourceError> {
        if let Some(client) = &self.client {
            if !is_terminal(client.state()) {
                return Ok(client.clone());
            }
            info!(hosts = %self.hosts, state = ?client.state(), "ZooKeeper session ended, opening a new one");
        }
        let connect = zk::Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .with_fail_eagerly()
            .connect(&self.hosts);
        let client = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| {
                SourceError::Unreachable(format!(
                    "no ZooKeeper session with {} in {CONNECT_TIMEOUT:?}",
                    self.hosts
                ))
            })?
            .map_err(|e| zk_error(&format!("connecting to {}", self.hosts), e))?;
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Reads the whole tree under the root into a new index.
    async fn read_tree(&self, client: &zk::Client) -> Result<Keyed, SourceError> {
        let top = match client.list_children(&self.root).await {
            Ok(children) => children,
            // No root yet: nothing registered (the watch sees it appear).
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(zk_error(&format!("listing {}", self.root), e)),
        };
        match self.layout {
            Layout::Dubbo => self.read_dubbo(client, top).await,
            Layout::Dubbo3 | Layout::SpringCloud => self.read_curator(client, top).await,
        }
    }

    /// Dubbo: the `providers` children of every interface directory.
    async fn read_dubbo(
        &self,
        client: &zk::Client,
        interfaces: Vec<String>,
    ) -> Result<Keyed, SourceError> {
        let dirs: Vec<String> = interfaces
            .iter()
            .map(|i| join(&join(&self.root, i), "providers"))
            .collect();
        let listed = children_of(client, &dirs).await?;
        let mut keyed = Keyed::default();
        for ((interface, dir), names) in interfaces.iter().zip(&dirs).zip(listed) {
            for name in names.unwrap_or_default() {
                let path = join(dir, &name);
                let entries = self.dubbo_entries(&path, interface, &name);
                keyed.put(&path, entries);
            }
        }
        Ok(keyed)
    }

    /// Curator: every instance node of every admitted service, with its data.
    async fn read_curator(
        &self,
        client: &zk::Client,
        services: Vec<String>,
    ) -> Result<Keyed, SourceError> {
        let services: Vec<String> = services
            .into_iter()
            .filter(|s| self.filter.admits(s))
            .collect();
        let dirs: Vec<String> = services.iter().map(|s| join(&self.root, s)).collect();
        let listed = children_of(client, &dirs).await?;
        let mut keyed = Keyed::default();
        let mut instances = Vec::new();
        for ((service, dir), ids) in services.iter().zip(&dirs).zip(listed) {
            let Some(ids) = ids else { continue };
            keyed.declare(ServiceName::plain(service));
            instances.extend(ids.iter().map(|id| (service.clone(), join(dir, id))));
        }
        let paths: Vec<String> = instances.iter().map(|(_, p)| p.clone()).collect();
        let data = data_of(client, &paths).await?;
        for ((service, path), data) in instances.iter().zip(data) {
            if let Some(data) = data {
                keyed.put(path, self.curator_entries(path, service, &data));
            }
        }
        Ok(keyed)
    }

    fn dubbo_entries(&self, path: &str, interface: &str, name: &str) -> Entries {
        dubbo_provider(path, interface, name, &self.filter).unwrap_or_else(|e| {
            warn!(path, error = %e, "ignoring an unreadable Dubbo provider node");
            Vec::new()
        })
    }

    fn curator_entries(&self, path: &str, service: &str, data: &[u8]) -> Entries {
        curator_instance(path, service, data, &self.filter).unwrap_or_else(|e| {
            warn!(path, error = %e, "ignoring an unreadable Curator instance node");
            Vec::new()
        })
    }

    /// Applies one node event; returns the services it touched.
    async fn apply(
        &mut self,
        event: &zk::WatchedEvent,
    ) -> Result<BTreeSet<ServiceName>, SourceError> {
        use zk::EventType::{NodeCreated, NodeDataChanged, NodeDeleted};
        let path = event.path.as_str();
        Ok(
            match (self.layout.node(&self.root, path), event.event_type) {
                (Node::DubboProvider { interface, name }, NodeCreated) => {
                    let entries = self.dubbo_entries(path, &interface, &name);
                    self.keyed.put(path, entries)
                }
                (Node::DubboProvider { .. }, NodeDeleted) => self.keyed.remove(path),
                (Node::CuratorService(service), NodeCreated) if self.filter.admits(&service) => {
                    let name = ServiceName::plain(service);
                    if self.keyed.declare(name.clone()) {
                        BTreeSet::from([name])
                    } else {
                        BTreeSet::new()
                    }
                }
                (Node::CuratorService(service), NodeDeleted) => {
                    let name = ServiceName::plain(service);
                    if self.keyed.undeclare(&name) {
                        BTreeSet::from([name])
                    } else {
                        BTreeSet::new()
                    }
                }
                (Node::CuratorInstance(service), NodeCreated | NodeDataChanged) => {
                    self.reread_instance(path, &service).await?
                }
                (Node::CuratorInstance(_), NodeDeleted) => self.keyed.remove(path),
                _ => BTreeSet::new(),
            },
        )
    }

    /// Reads a Curator instance node again (it may be gone already).
    async fn reread_instance(
        &mut self,
        path: &str,
        service: &str,
    ) -> Result<BTreeSet<ServiceName>, SourceError> {
        if !self.filter.admits(service) {
            return Ok(BTreeSet::new());
        }
        let Some(client) = self.client.clone() else {
            return Ok(BTreeSet::new());
        };
        match client.get_data(path).await {
            Ok((data, _)) => {
                let entries = self.curator_entries(path, service, &data);
                Ok(self.keyed.put(path, entries))
            }
            Err(zk::Error::NoNode) => Ok(self.keyed.remove(path)),
            Err(e) => Err(zk_error(&format!("reading {path}"), e)),
        }
    }

    /// Waits (until `deadline` at most) for the next watch event; `None`: none by then.
    async fn next_event(&mut self, deadline: Instant) -> Option<zk::WatchedEvent> {
        let watcher = self.watcher.as_mut()?;
        tokio::time::timeout_at(deadline, watcher.changed())
            .await
            .ok()
    }

    /// Forgets the watch (and, if the session ended, the session).
    fn reset(&mut self) {
        self.watcher = None;
        if self.client.as_ref().is_some_and(|c| is_terminal(c.state())) {
            self.client = None;
        }
    }
}

#[async_trait::async_trait]
impl Source for ZkSource {
    async fn list(&mut self) -> Result<Snapshot, SourceError> {
        self.watcher = None;
        let listing = async {
            let client = self.session().await?;
            let watcher = client
                .watch(&self.root, zk::AddWatchMode::PersistentRecursive)
                .await
                .map_err(|e| zk_error(&format!("watching {}", self.root), e))?;
            let keyed = self.read_tree(&client).await?;
            Ok::<_, SourceError>((watcher, keyed))
        };
        let (watcher, keyed) = match tokio::time::timeout(LIST_TIMEOUT, listing).await {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => {
                self.reset();
                return Err(e);
            }
            Err(_) => {
                self.reset();
                return Err(SourceError::Unreachable(format!(
                    "reading {} from ZooKeeper took over {LIST_TIMEOUT:?}",
                    self.root
                )));
            }
        };
        debug!(root = %self.root, "listed ZooKeeper");
        self.keyed = keyed;
        self.watcher = Some(watcher);
        Ok(Snapshot {
            services: self.keyed.snapshot(),
            partial: false,
            configs: None,
        })
    }

    async fn watch(&mut self) -> Result<Update, SourceError> {
        if self.watcher.is_none() {
            return Ok(Update::Resync);
        }
        let mut deadline = Instant::now() + WATCH_WAIT;
        let mut disconnected = false;
        let mut touched = BTreeSet::new();
        loop {
            // Once something changed, take only what has already arrived.
            let wait_until = if touched.is_empty() {
                deadline
            } else {
                Instant::now()
            };
            let Some(event) = self.next_event(wait_until).await else {
                if disconnected {
                    self.reset();
                    return Err(SourceError::Unreachable(format!(
                        "lost the connection to ZooKeeper at {} for over {RECONNECT_WAIT:?}",
                        self.hosts
                    )));
                }
                return Ok(Update::Services(self.keyed.services(touched)));
            };
            if event.event_type != zk::EventType::Session {
                if !disconnected {
                    touched.extend(self.apply(&event).await?);
                }
                continue;
            }
            match event.session_state {
                zk::SessionState::Disconnected => {
                    warn!(hosts = %self.hosts, "lost the connection to ZooKeeper");
                    disconnected = true;
                    touched.clear();
                    deadline = Instant::now() + RECONNECT_WAIT;
                }
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    if disconnected {
                        // Events may have been lost meanwhile: read everything again.
                        info!(hosts = %self.hosts, "reconnected to ZooKeeper; listing again");
                        self.watcher = None;
                        return Ok(Update::Resync);
                    }
                }
                state => {
                    // Terminal: the watcher must not be polled again.
                    self.watcher = None;
                    self.reset();
                    return Err(session_ended(state, &self.hosts));
                }
            }
        }
    }
}

/// Lists the children of each of `paths`, pipelined; `None` where a node does not exist.
async fn children_of(
    client: &zk::Client,
    paths: &[String],
) -> Result<Vec<Option<Vec<String>>>, SourceError> {
    let mut out = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(PIPELINE) {
        // Each request is sent when its future is made; answers arrive in order.
        let pending: Vec<_> = chunk.iter().map(|p| client.list_children(p)).collect();
        for (path, answer) in chunk.iter().zip(pending) {
            out.push(found(answer.await, path, "listing")?);
        }
    }
    Ok(out)
}

/// Reads the data of each of `paths`, pipelined; `None` where a node does not exist.
async fn data_of(
    client: &zk::Client,
    paths: &[String],
) -> Result<Vec<Option<Vec<u8>>>, SourceError> {
    let mut out = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(PIPELINE) {
        let pending: Vec<_> = chunk.iter().map(|p| client.get_data(p)).collect();
        for (path, answer) in chunk.iter().zip(pending) {
            out.push(found(answer.await.map(|(data, _)| data), path, "reading")?);
        }
    }
    Ok(out)
}

/// A read's result, with a vanished node as `None`.
fn found<T>(
    answer: Result<T, zk::Error>,
    path: &str,
    doing: &str,
) -> Result<Option<T>, SourceError> {
    match answer {
        Ok(value) => Ok(Some(value)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(zk_error(&format!("{doing} {path}"), e)),
    }
}

fn is_terminal(state: zk::SessionState) -> bool {
    matches!(
        state,
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

fn session_ended(state: zk::SessionState, hosts: &str) -> SourceError {
    match state {
        zk::SessionState::AuthFailed => {
            SourceError::Refused(format!("ZooKeeper at {hosts} failed our authentication"))
        }
        zk::SessionState::Expired => {
            SourceError::Unreachable(format!("ZooKeeper session with {hosts} expired"))
        }
        other => {
            SourceError::Unreachable(format!("ZooKeeper session with {hosts} ended: {other:?}"))
        }
    }
}

/// Maps a client error onto a source error, saying what we were `doing`.
fn zk_error(doing: &str, e: zk::Error) -> SourceError {
    match e {
        zk::Error::NoAuth | zk::Error::AuthFailed => {
            SourceError::Refused(format!("ZooKeeper refused {doing}: {e}"))
        }
        zk::Error::BadArguments(_) => {
            SourceError::Config(format!("ZooKeeper rejected {doing}: {e}"))
        }
        _ => SourceError::Unreachable(format!("ZooKeeper failed {doing}: {e}")),
    }
}
