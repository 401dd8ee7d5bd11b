//! The HTTP calls of the Consul source: the service list and one service's health
//! entries, each either read at once or as a blocking query (`index` + `wait`), with the
//! `X-Consul-Index` and ACL-filtering headers read off every answer, and Consul's rules
//! for the next blocking index.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::entry::HealthEntry;
use crate::rest::{query, segment, Rest};
use crate::{SourceError, SourceUrl};

/// How long a blocking query waits for a change (Consul adds up to `WAIT / 16`).
const WAIT: Duration = Duration::from_secs(30);
/// Timeout of a call that does not block.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack on top of `WAIT + WAIT / 16` before a blocking call counts as timed out.
const BLOCKING_SLACK: Duration = Duration::from_secs(5);
/// Response header with the blocking index.
const INDEX_HEADER: &str = "x-consul-index";
/// Response header set when ACLs hid part of the answer.
const FILTERED_HEADER: &str = "x-consul-results-filtered-by-acls";

/// The calls this source makes. Cheap to clone; every watch task holds one.
#[derive(Clone)]
pub(super) struct Api {
    rest: Rest,
    /// `dc` parameter: the datacenter to read (the agent's own when absent).
    dc: Option<String>,
    /// `ns` parameter: the Enterprise namespace to read.
    ns: Option<String>,
}

/// One answer of a blocking endpoint.
#[derive(Debug)]
pub(super) struct Answer<T> {
    /// The decoded body.
    pub(super) body: T,
    /// `X-Consul-Index` (0 when absent or unreadable).
    pub(super) index: u64,
    /// ACLs hid part of the answer.
    pub(super) partial: bool,
}

impl Api {
    /// The calls for `url`: its hosts, and its `token`, `dc` and `ns` parameters.
    pub(super) fn new(url: &SourceUrl) -> Result<Self, SourceError> {
        let mut headers = Vec::new();
        if let Some(token) = url.param("token") {
            headers.push(("x-consul-token", token.to_string()));
        }
        Ok(Self {
            rest: Rest::new(url, "", &headers, None)?,
            dc: url.param("dc").map(str::to_string),
            ns: url.param("ns").map(str::to_string),
        })
    }

    /// Every service name (`/v1/catalog/services`); blocks while the index is `index`.
    pub(super) async fn services(
        &self,
        index: u64,
    ) -> Result<Answer<BTreeSet<String>>, SourceError> {
        let answer: Answer<Option<BTreeMap<String, Value>>> =
            self.get("/v1/catalog/services", index).await?;
        Ok(Answer {
            body: answer.body.unwrap_or_default().into_keys().collect(),
            index: answer.index,
            partial: answer.partial,
        })
    }

    /// The entries of one service with their checks (`/v1/health/service/<name>`);
    /// blocks while the index is `index`.
    pub(super) async fn health(
        &self,
        service: &str,
        index: u64,
    ) -> Result<Answer<Vec<HealthEntry>>, SourceError> {
        let path = format!("/v1/health/service/{}", segment(service));
        let answer: Answer<Option<Vec<HealthEntry>>> = self.get(&path, index).await?;
        Ok(Answer {
            body: answer.body.unwrap_or_default(),
            index: answer.index,
            partial: answer.partial,
        })
    }

    /// `GET path` with `dc`, `ns` and, for `index > 0`, a blocking `index` + `wait`.
    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        index: u64,
    ) -> Result<Answer<T>, SourceError> {
        let index_text = index.to_string();
        let wait_text = format!("{}s", WAIT.as_secs());
        let mut pairs = Vec::new();
        if let Some(dc) = &self.dc {
            pairs.push(("dc", dc.as_str()));
        }
        if let Some(ns) = &self.ns {
            pairs.push(("ns", ns.as_str()));
        }
        let timeout = if index > 0 {
            pairs.push(("index", &index_text));
            pairs.push(("wait", &wait_text));
            // Consul may hold the call for up to WAIT + WAIT / 16.
            WAIT + WAIT / 16 + BLOCKING_SLACK
        } else {
            CALL_TIMEOUT
        };
        let reply = self
            .rest
            .get(&format!("{path}{}", query(&pairs)), timeout)
            .await?
            .success()?;
        Ok(Answer {
            body: reply.json()?,
            index: reply
                .header(INDEX_HEADER)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
            partial: reply
                .header(FILTERED_HEADER)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        })
    }
}

/// The index for the next blocking query after an answer carrying `received`, by
/// Consul's rules: start over (0, which does not block) when the index went backwards;
/// never block on an index below 1.
pub(super) fn next_index(previous: u64, received: u64) -> u64 {
    if received < previous {
        0
    } else {
        received.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_rules() {
        assert_eq!(next_index(0, 4711), 4711);
        assert_eq!(next_index(4711, 4711), 4711);
        assert_eq!(next_index(4711, 12), 0, "backwards: start over");
        assert_eq!(next_index(0, 0), 1, "never below 1");
        assert_eq!(
            next_index(1, 0),
            0,
            "backwards wins, then the floor applies next time"
        );
        assert_eq!(next_index(0, next_index(1, 0)), 1);
    }
}
