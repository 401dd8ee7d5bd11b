//! Where a configuration write goes, for every face: through Raft, with this node's
//! retention settings and the proposal time inside the command. The faces check their
//! parameters first (`configs::validate`, in their own field names). The leader's
//! history pruner ([`super::prune`]) proposes through [`prune_history`].

use super::gray::{GrayPublish, Rule};
use super::{ConfigKey, Publish, Retention, Settings};
use crate::error::Error;
use crate::services::store::command::CommandV1;
use crate::services::store::{ProposeError, Store};
use roster_registry::clock::now_ms;

/// A publication as a face parsed it; `Writes::publish` adds who, where from and the
/// retention.
#[derive(Clone, Debug, Default)]
pub struct Draft {
    /// Its content (checked already).
    pub content: String,
    /// Content type; absent: kept (new items: `text`).
    pub r#type: Option<String>,
    /// Application; absent: kept.
    pub app_name: Option<String>,
    /// Description; absent: kept.
    pub desc: Option<String>,
    /// Tags; absent: kept.
    pub tags: Option<String>,
    /// Compare-and-set against this md5 (blank: none).
    pub cas_md5: Option<String>,
}

/// The configuration write path of a node.
#[derive(Clone, Copy)]
pub struct Writes<'a> {
    /// Raft.
    pub store: &'a Store,
    /// Retention and limits.
    pub settings: Settings,
}

impl Writes<'_> {
    /// Publishes `key` as `draft` says, on behalf of `by` at `src_ip`. A compare-and-set
    /// that finds another md5 (or no item) is a 409 `Conflict`.
    pub async fn publish(
        &self,
        key: ConfigKey,
        draft: Draft,
        by: &str,
        src_ip: &str,
    ) -> Result<(), Error> {
        let publish = Publish {
            key,
            content: draft.content,
            r#type: draft.r#type,
            app_name: draft.app_name,
            desc: draft.desc,
            tags: draft.tags,
            cas_md5: draft.cas_md5.filter(|m| !m.trim().is_empty()),
            by: by.to_string(),
            src_ip: src_ip.to_string(),
            retention: self.settings.retention,
        };
        self.store
            .propose(CommandV1::PublishConfig {
                publish,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Removes `key` (nothing to remove is no error, as in Nacos).
    pub async fn remove(&self, key: ConfigKey, by: &str, src_ip: &str) -> Result<(), Error> {
        self.store
            .propose(CommandV1::RemoveConfig {
                key,
                by: by.to_string(),
                src_ip: src_ip.to_string(),
                retention: self.settings.retention,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }
}

impl Writes<'_> {
    /// Publishes a gray version of `key` for the clients `rule` names (its content
    /// checked already), on behalf of `by` at `src_ip`. A compare-and-set that finds
    /// another md5 (or no such gray version), or an item holding as many gray versions
    /// as it may, is a 409 `Conflict`.
    pub async fn publish_gray(
        &self,
        key: ConfigKey,
        rule: Rule,
        content: String,
        cas_md5: Option<String>,
        by: &str,
        src_ip: &str,
    ) -> Result<(), Error> {
        let publish = GrayPublish {
            key,
            rule,
            content,
            cas_md5: cas_md5.filter(|m| !m.trim().is_empty()),
            by: by.to_string(),
            src_ip: src_ip.to_string(),
            retention: self.settings.retention,
        };
        self.store
            .propose(CommandV1::PublishConfigGray {
                publish,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }

    /// Removes gray version `name` of `key` (nothing to remove is no error).
    pub async fn remove_gray(
        &self,
        key: ConfigKey,
        name: String,
        by: &str,
        src_ip: &str,
    ) -> Result<(), Error> {
        self.store
            .propose(CommandV1::RemoveConfigGray {
                key,
                name,
                by: by.to_string(),
                src_ip: src_ip.to_string(),
                retention: self.settings.retention,
                at_ms: now_ms(),
            })
            .await?;
        Ok(())
    }
}

/// Drops configuration history older than `retention` as of `at_ms`, on every node.
pub async fn prune_history(
    store: &Store,
    retention: Retention,
    at_ms: u64,
) -> Result<(), ProposeError> {
    store
        .propose(CommandV1::PruneConfigHistory { retention, at_ms })
        .await
}
