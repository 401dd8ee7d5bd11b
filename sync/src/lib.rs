//! Continuous import from other registries into roster (docs/architecture.md, "Sync imports").
//!
//! A [`Source`] reads one foreign registry and reports its state mapped onto roster's
//! model: [`Source::list`] gives the whole state, [`Source::watch`] waits for the next
//! change. The [`runner`] drives one sync task: it lists, watches, debounces bursts per
//! service, reconciles the desired state against the instances the task owns in a
//! [`Sink`] (which the server implements over Raft), holds deletions back when the source
//! errors or a large share of a service vanishes at once, and reports a [`TaskStatus`].
//!
//! Sources, one module each: [`nacos`], [`consul`], [`eureka`], [`zk`] (ZooKeeper, three
//! layouts), [`etcd`] (three layouts); the last two keep their reads in a `keyed` index, the
//! first three share a `rest` HTTP client. A source is named by a [`SourceUrl`].

pub mod consul;
pub mod etcd;
pub mod eureka;
pub mod filter;
mod keyed;
pub mod model;
pub mod nacos;
mod rest;
pub mod runner;
pub mod url;
pub mod zk;

pub use filter::Filter;
pub use model::*;
pub use url::{SourceKind, SourceUrl};

/// Opens the source `url` names, reading only services `filter` admits (sources that
/// list services anyway may also leave filtering to the runner).
pub fn open(url: &SourceUrl, filter: &Filter) -> Result<Box<dyn Source>, SourceError> {
    Ok(match url.kind {
        SourceKind::Nacos => Box::new(nacos::NacosSource::new(url, filter)?),
        SourceKind::Consul => Box::new(consul::ConsulSource::new(url, filter)?),
        SourceKind::Eureka => Box::new(eureka::EurekaSource::new(url, filter)?),
        SourceKind::Zookeeper => Box::new(zk::ZkSource::new(url, filter)?),
        SourceKind::Etcd => Box::new(etcd::EtcdSource::new(url, filter)?),
    })
}
