//! What a scrape reads beside the counters: the node's figures ([`NodeFigures`], read
//! from its parts when `/metrics` is asked for) set into their gauges, the data dir's
//! filesystem and the served certificates' expiry; and the rendering of it all.

use std::path::Path;

use roster_sync::TaskState;

use super::{
    history, task_state_label, ListenerLabels, Metrics, NodeLabels, TaskStateLabels, TASK_STATES,
};

impl Metrics {
    /// Renders every metric, with the node's current `figures`.
    pub fn render(&self, figures: &NodeFigures) -> String {
        let owned = &figures.owned_by;
        self.owned_by.clear();
        for (node, count) in owned {
            self.owned_by
                .get_or_create(&NodeLabels {
                    node: node.to_string(),
                })
                .set(*count as i64);
        }
        self.ready.set(i64::from(figures.ready));
        self.members.set(figures.members as i64);
        self.members_live.set(figures.members_live as i64);
        self.distro_clients
            .set(owned.values().sum::<usize>() as i64);
        self.distro_owned
            .set(owned.get(&figures.raft.node_id).copied().unwrap_or(0) as i64);
        self.eviction_engaged.set(figures.guard_engaged as i64);
        let (services, instances, healthy) = figures.totals;
        self.services.set(services as i64);
        self.instances.set(instances as i64);
        self.healthy_instances.set(healthy as i64);
        self.subscribers.set(figures.udp_subscribers as i64);
        self.configs.set(figures.configs as i64);
        self.config_long_polls.set(figures.config_long_polls as i64);
        self.list_cache_bytes.set(figures.list_cache_bytes as i64);
        let raft = &figures.raft;
        self.raft_term.set(raft.term as i64);
        self.raft_is_leader
            .set(i64::from(raft.state == roster_raft::ServerState::Leader));
        self.raft_last_log_index.set(raft.last_log_index as i64);
        self.raft_last_applied.set(raft.last_applied as i64);
        self.raft_snapshot_index.set(raft.snapshot_index as i64);
        let leads = raft.state == roster_raft::ServerState::Leader;
        self.raft_commit_index
            .set(if leads { raft.last_applied as i64 } else { 0 });
        self.replication_lag.clear();
        if leads {
            for (node, matched) in &raft.replication {
                self.replication_lag
                    .get_or_create(&NodeLabels {
                        node: node.to_string(),
                    })
                    .set(raft.last_log_index.saturating_sub(*matched) as i64);
            }
        }
        let counts = history::TaskCounts::of(&figures.sync_tasks);
        for (state, count) in TASK_STATES.into_iter().zip(counts.0) {
            self.sync_tasks
                .get_or_create(&TaskStateLabels { state })
                .set(i64::from(count));
        }
        self.render_watched();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Reads the data dir's filesystem and the served certificates' expiry into their
    /// gauges. A filesystem that cannot be read keeps its last figures (a warning says
    /// why); a certificate whose expiry cannot be read is left out.
    fn render_watched(&self) {
        let watched = self.watched.lock();
        if let Some(dir) = &watched.data_dir {
            match filesystem_space(dir) {
                Ok(space) => {
                    self.data_dir_size.set(space.size as i64);
                    self.data_dir_avail.set(space.avail as i64);
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot read the data dir's filesystem")
                }
            }
        }
        self.certificate_expiry.clear();
        for (listener, cert) in &watched.certificates {
            let current = cert.current();
            if let Some(expiry) = current.cert.first().and_then(|leaf| not_after(leaf)) {
                self.certificate_expiry
                    .get_or_create(&ListenerLabels { listener })
                    .set(expiry);
            }
        }
    }
}

/// A filesystem's size and the bytes an unprivileged writer may still use, in bytes.
struct FilesystemSpace {
    size: u64,
    avail: u64,
}

/// The space of the filesystem holding `dir` (`statvfs`).
#[cfg(unix)]
fn filesystem_space(dir: &Path) -> std::io::Result<FilesystemSpace> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok(FilesystemSpace {
        size: stat.f_blocks.saturating_mul(stat.f_frsize),
        avail: stat.f_bavail.saturating_mul(stat.f_frsize),
    })
}

/// No `statvfs` here: the gauges stay at zero.
#[cfg(not(unix))]
fn filesystem_space(_dir: &Path) -> std::io::Result<FilesystemSpace> {
    Err(std::io::Error::other(
        "filesystem space is read on Unix only",
    ))
}

/// The notAfter of a DER certificate, Unix seconds; `None` if it does not parse (rustls
/// accepted it, so that would be a certificate this parser cannot read, not a bad one).
fn not_after(der: &[u8]) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// The figures of a node that the gauges show, read when `/metrics` is asked for.
pub struct NodeFigures {
    /// Whether the node serves API requests.
    pub ready: bool,
    /// Configured members, this node included.
    pub members: usize,
    /// Members that answered lately, this node included.
    pub members_live: usize,
    /// Ephemeral clients owned by each live member, as this node sees them.
    pub owned_by: std::collections::BTreeMap<roster_raft::NodeId, usize>,
    /// Namespaces where the eviction guard holds removals.
    pub guard_engaged: usize,
    /// (services, instances, healthy instances).
    pub totals: (usize, usize, usize),
    /// UDP push subscriptions.
    pub udp_subscribers: usize,
    /// Configuration items.
    pub configs: usize,
    /// HTTP long polls held.
    pub config_long_polls: usize,
    /// Bytes of cached list bodies.
    pub list_cache_bytes: usize,
    /// Raft's state on this node.
    pub raft: roster_raft::RaftStatus,
    /// The state of every sync task, as its runner last reported it (one of
    /// [`TASK_STATES`] each).
    pub sync_tasks: Vec<&'static str>,
}

/// The labels of `states`, for [`NodeFigures::sync_tasks`].
pub fn task_state_labels(states: impl Iterator<Item = TaskState>) -> Vec<&'static str> {
    states.map(task_state_label).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_expiry_is_the_leaf_not_after() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 17);
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            not_after(cert.der()),
            Some(params.not_after.unix_timestamp())
        );
        assert_eq!(not_after(b"not a certificate"), None);
    }
}
