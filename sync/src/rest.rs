//! The HTTP client the HTTP-speaking sources share ([`crate::consul`], [`crate::eureka`],
//! [`crate::nacos`]): tries a URL's hosts in turn, keeps using the one that answered,
//! and maps failures onto [`SourceError`] without leaking secrets from query strings.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Method;
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::{SourceError, SourceUrl};

/// How long connecting to a host may take before the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of an error body goes into an error message.
const BODY_IN_ERROR: usize = 200;

/// A client for one source's servers. Cheap to clone: clones share the connection pool
/// and the preferred host.
#[derive(Clone)]
pub(crate) struct Rest {
    client: reqwest::Client,
    /// `http://host:port` plus the URL's path, one per host, in the URL's order.
    bases: Arc<[String]>,
    /// The host that answered last; tried first next time.
    preferred: Arc<AtomicUsize>,
    /// HTTP basic credentials sent with every request.
    basic: Option<(String, String)>,
}

/// An answer with a status below 500.
#[derive(Debug)]
pub(crate) struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Response body.
    pub body: Vec<u8>,
    /// `METHOD base/path` of the request, without its query, for messages.
    pub what: String,
}

impl Reply {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The reply if it is a success, else a [`SourceError::Refused`] naming the status.
    pub fn success(self) -> Result<Self, SourceError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(SourceError::Refused(self.describe()))
        }
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, SourceError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| SourceError::Invalid(format!("{}: {e}", self.what)))
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `GET http://h/p: HTTP 403: <start of body>`.
    pub fn describe(&self) -> String {
        format!(
            "{}: HTTP {}{}",
            self.what,
            self.status,
            body_excerpt(&self.body)
        )
    }
}

impl Rest {
    /// A client for `url`'s hosts, every request prefixed with `path` (e.g. `/eureka`),
    /// sending `headers` (secret values are marked sensitive, so they stay out of logs).
    pub fn new(
        url: &SourceUrl,
        path: &str,
        headers: &[(&'static str, String)],
        basic: Option<(String, String)>,
    ) -> Result<Self, SourceError> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                SourceError::Config(format!("the value for header {name} is not valid in HTTP"))
            })?;
            value.set_sensitive(true);
            map.insert(HeaderName::from_static(name), value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .default_headers(map)
            .build()
            .map_err(|e| SourceError::Config(format!("cannot build an HTTP client: {e}")))?;
        let bases: Vec<String> = url
            .hosts
            .iter()
            .map(|h| format!("http://{h}{path}"))
            .collect();
        Ok(Self {
            client,
            bases: bases.into(),
            preferred: Arc::new(AtomicUsize::new(0)),
            basic,
        })
    }

    /// `GET path_and_query`, giving up on a host after `timeout`.
    pub async fn get(&self, path_and_query: &str, timeout: Duration) -> Result<Reply, SourceError> {
        self.send(Method::GET, path_and_query, None, timeout).await
    }

    /// `POST path_and_query` with a form body.
    pub async fn post_form(
        &self,
        path_and_query: &str,
        form: String,
        timeout: Duration,
    ) -> Result<Reply, SourceError> {
        self.send(Method::POST, path_and_query, Some(form), timeout)
            .await
    }

    /// Sends the request to each host in turn, starting with the preferred one, until
    /// one answers with a status below 500. Connection failures, timeouts and 5xx move
    /// on to the next host; when every host failed, the last failure is returned.
    async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        form: Option<String>,
        timeout: Duration,
    ) -> Result<Reply, SourceError> {
        let first = self.preferred.load(Ordering::Relaxed);
        let path = path_and_query.split('?').next().unwrap_or_default();
        let mut last_error = String::new();
        for step in 0..self.bases.len() {
            let i = (first + step) % self.bases.len();
            let what = format!("{method} {}{path}", self.bases[i]);
            let mut request = self
                .client
                .request(method.clone(), format!("{}{path_and_query}", self.bases[i]))
                .timeout(timeout);
            if let Some((user, password)) = &self.basic {
                request = request.basic_auth(user, Some(password));
            }
            if let Some(body) = &form {
                request = request
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body.clone());
            }
            match read(request, what).await {
                Ok(reply) if reply.status < 500 => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(reply);
                }
                Ok(reply) => last_error = reply.describe(),
                Err(e) => last_error = e,
            }
            tracing::debug!(error = %last_error, "source host failed");
        }
        Err(SourceError::Unreachable(last_error))
    }
}

/// Sends `request` and reads the whole answer.
async fn read(request: reqwest::RequestBuilder, what: String) -> Result<Reply, String> {
    let response = request
        .send()
        .await
        .map_err(|e| format!("{what}: {}", chain(e)))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("{what}: reading the body: {}", chain(e)))?;
    Ok(Reply {
        status,
        headers,
        body: body.to_vec(),
        what,
    })
}

/// An error and its causes, without the URL (it may hold an access token).
fn chain(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    if timeout && !text.contains("timed out") {
        text.push_str(" (timed out)");
    }
    text
}

/// `": <first 200 characters of the body>"`, or nothing for an empty body.
fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let cut: String = text.chars().take(BODY_IN_ERROR).collect();
    format!(": {cut}")
}

/// `?k=v&...`, form-encoded; empty for no pairs.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    format!("?{}", q.finish())
}

/// `text` percent-encoded for use as one path segment.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A JSON value as metadata text: strings as they are, `null` as nothing, anything
/// else in its JSON form.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Runs `fetch` on every key, at most `limit` at a time, and returns each key with its
/// result. The first error cancels the rest and is returned.
pub(crate) async fn fetch_all<K, T, F, Fut>(
    keys: Vec<K>,
    limit: usize,
    fetch: F,
) -> Result<Vec<(K, T)>, SourceError>
where
    K: Clone + Send + 'static,
    T: Send + 'static,
    F: Fn(K) -> Fut,
    Fut: Future<Output = Result<T, SourceError>> + Send + 'static,
{
    let mut pending = keys.into_iter();
    let mut running = JoinSet::new();
    let mut done = Vec::new();
    loop {
        while running.len() < limit.max(1) {
            let Some(key) = pending.next() else { break };
            let work = fetch(key.clone());
            running.spawn(async move { (key, work.await) });
        }
        // Dropping `running` on an early return aborts what is still in flight.
        match running.join_next().await {
            None => return Ok(done),
            Some(Ok((key, Ok(value)))) => done.push((key, value)),
            Some(Ok((_, Err(e)))) => return Err(e),
            Some(Err(e)) => return Err(SourceError::Invalid(format!("a fetch failed: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_queries_and_segments() {
        assert_eq!(query(&[]), "");
        assert_eq!(query(&[("a", "b c"), ("x", "1&2")]), "?a=b+c&x=1%262");
        assert_eq!(segment("order service/v1"), "order%20service%2Fv1");
        assert_eq!(segment("a-b_c.d~e"), "a-b_c.d~e");
    }

    #[test]
    fn excerpts_bodies() {
        assert_eq!(body_excerpt(b"  "), "");
        assert_eq!(body_excerpt(b"ACL not found\n"), ": ACL not found");
        assert_eq!(body_excerpt(&[b'x'; 500]).len(), 2 + BODY_IN_ERROR);
    }

    #[tokio::test]
    async fn fetch_all_limits_and_fails_fast() {
        let out = fetch_all((0..20).collect(), 3, |k: u32| async move { Ok(k * 2) })
            .await
            .unwrap();
        let mut values: Vec<u32> = out.into_iter().map(|(_, v)| v).collect();
        values.sort();
        assert_eq!(values, (0..20).map(|k| k * 2).collect::<Vec<_>>());

        let err = fetch_all((0..5).collect(), 2, |k: u32| async move {
            if k == 3 {
                Err(SourceError::Unreachable("boom".into()))
            } else {
                Ok(k)
            }
        })
        .await
        .unwrap_err();
        assert_eq!(err, SourceError::Unreachable("boom".into()));
    }

    #[tokio::test]
    async fn unreachable_hosts_are_reported() {
        // Port 1 on loopback refuses connections.
        let url: SourceUrl = "consul://127.0.0.1:1".parse().unwrap();
        let rest = Rest::new(&url, "", &[], None).unwrap();
        let err = rest
            .get("/v1/catalog/services?token=secret", Duration::from_secs(2))
            .await
            .unwrap_err();
        let SourceError::Unreachable(text) = err else {
            panic!("expected unreachable, got {err:?}")
        };
        assert!(
            text.contains("GET http://127.0.0.1:1/v1/catalog/services"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }
}
