//! The Nacos v1 calls the bench makes itself (both systems answer them alike):
//! registration, lists and instance counts, bulk registration to a count with bounded
//! concurrency, and configuration items (publish, read, form bodies), for what wrk does
//! not fit.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::shapes::Shape;

/// Requests in flight at once during bulk registration and counting.
const BULK_CONCURRENCY: usize = 32;
/// Concurrent list requests while counting a server's instances.
const COUNT_CONCURRENCY: usize = 8;

/// One instance address in one service.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Plain service name (group `DEFAULT_GROUP`, namespace `public`).
    pub service: String,
    /// IPv4 address.
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Its number in its [`Layout`] (0 outside one); a shape's metadata may depend on it.
    pub k: usize,
}

/// How bulk-registered instances are laid out: instance `k` lives in service
/// `<prefix>-<k / per_service>` at `127.<1 + k/65536>.<k/256 % 256>.<k % 256>:8080`.
/// `bench/lua/beat.lua` mirrors this layout; change both together.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Service name prefix.
    pub prefix: &'static str,
    /// Instances per service.
    pub per_service: usize,
}

impl Layout {
    /// Instance number `k`.
    pub fn instance(&self, k: usize) -> Instance {
        Instance {
            service: format!("{}-{}", self.prefix, k / self.per_service),
            ip: format!("127.{}.{}.{}", 1 + k / 65536, (k / 256) % 256, k % 256),
            port: 8080,
            k,
        }
    }

    /// The services that instances `0..count` live in.
    pub fn services(&self, count: usize) -> Vec<String> {
        services(self.prefix, count.div_ceil(self.per_service))
    }
}

/// `<prefix>-0 .. <prefix>-<n-1>`.
pub fn services(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// An HTTP client for one server. Cheap to clone.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    /// Sent as `accessToken` in every request's query (a server with authentication
    /// on), as the Nacos 1.x clients send it.
    token: Option<Arc<str>>,
}

/// What bulk registration achieved.
#[derive(Clone, Copy, Debug)]
pub struct Bulk {
    /// Registrations answered 200 `ok`.
    pub acked: usize,
    /// Registrations refused or failed.
    pub failed: usize,
    /// Wall time, seconds.
    pub secs: f64,
}

impl Api {
    /// A client for the server at `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self::with(addr, BULK_CONCURRENCY * 2, Duration::from_secs(10))
    }

    /// A client of its own for the server at `addr` that keeps at most one idle
    /// connection, as one application's client does, with `timeout` per request (a long
    /// poll needs more than [`Api::new`]'s 10 s).
    pub fn dedicated(addr: SocketAddr, timeout: Duration) -> Self {
        Self::with(addr, 1, timeout)
    }

    fn with(addr: SocketAddr, idle: usize, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(idle)
            .timeout(timeout)
            .build()
            .expect("an HTTP client without TLS always builds");
        Self {
            http,
            base: format!("http://{addr}"),
            token: None,
        }
    }

    /// This client, sending `token` with every request.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The URL of `path` (path and query), with the token if there is one.
    pub fn url(&self, path: &str) -> String {
        match &self.token {
            None => format!("{}{path}", self.base),
            Some(token) => {
                let join = if path.contains('?') { '&' } else { '?' };
                format!("{}{path}{join}accessToken={token}", self.base)
            }
        }
    }

    /// `GET path` (path and query); the status and body, with the content type.
    pub async fn get(&self, path: &str) -> Result<Answer> {
        self.send(self.http.get(self.url(path))).await
    }

    /// `GET path` with extra headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Result<Answer> {
        let mut request = self.http.get(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// `method path` with extra headers and, if given, a JSON body (`Content-Type:
    /// application/json`), for the other registries' faces (Consul, Eureka).
    pub async fn send_with(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        json: Option<String>,
    ) -> Result<Answer> {
        let mut request = self.http.request(method, self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = json {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        self.send(request).await
    }

    /// `POST path` with an empty body.
    pub async fn post(&self, path: &str) -> Result<Answer> {
        self.send(self.http.post(self.url(path))).await
    }

    /// `PUT path` with an empty body.
    pub async fn put(&self, path: &str) -> Result<Answer> {
        self.send(self.http.put(self.url(path))).await
    }

    /// `POST path` with `form` as an `application/x-www-form-urlencoded` body (as the
    /// Nacos clients send it) and extra headers.
    pub async fn post_form(
        &self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Result<Answer> {
        let mut request = self
            .http
            .post(self.url(path))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded; charset=UTF-8",
            )
            .body(form_body(form));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// Publishes a configuration item (`POST /nacos/v1/cs/configs`, namespace
    /// `public`); Ok only for 200 `true`.
    pub async fn publish_config(&self, data_id: &str, group: &str, content: &str) -> Result<()> {
        let answer = self
            .post_form(
                CONFIGS_PATH,
                &[("dataId", data_id), ("group", group), ("content", content)],
                &[],
            )
            .await?;
        if answer.status != 200 || answer.body != b"true" {
            bail!(
                "publishing {group}/{data_id} answered {} {}",
                answer.status,
                answer.text()
            );
        }
        Ok(())
    }

    /// The content of a configuration item (`GET /nacos/v1/cs/configs`); Ok only for 200.
    pub async fn config(&self, data_id: &str, group: &str) -> Result<Vec<u8>> {
        let answer = self.get(&config_path(data_id, group)).await?;
        if answer.status != 200 {
            bail!(
                "reading {group}/{data_id} answered {} {}",
                answer.status,
                answer.text()
            );
        }
        Ok(answer.body)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer> {
        let response = request.send().await.context("request failed")?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response.bytes().await.context("reading the body")?.to_vec();
        Ok(Answer {
            status,
            content_type,
            body,
        })
    }

    /// Registers `instance` with the metadata of `shape` (an HTTP shape: `metadata` is a
    /// percent-encoded JSON object in the query, as the Nacos 1.x Java client sends
    /// it); Ok only for 200 `ok`.
    pub async fn register(&self, instance: &Instance, ephemeral: bool, shape: Shape) -> Result<()> {
        let ip: std::net::Ipv4Addr = instance.ip.parse().context("instance address")?;
        if !ip.is_loopback() {
            bail!("{ip} is not a loopback address: the bench registers only 127.0.0.0/8");
        }
        let mut path = format!(
            "/nacos/v1/ns/instance?serviceName={}&ip={}&port={}&ephemeral={ephemeral}",
            instance.service, instance.ip, instance.port
        );
        if let Some(metadata) = shape.metadata_json(&instance.service, instance.k) {
            path.push_str("&metadata=");
            path.push_str(&encode(&metadata));
        }
        let answer = self.post(&path).await?;
        if answer.status != 200 || answer.body != b"ok" {
            bail!(
                "register {}:{} answered {} {}",
                instance.ip,
                instance.port,
                answer.status,
                answer.text()
            );
        }
        Ok(())
    }

    /// The hosts `service` lists, every instance (`healthyOnly=false`) or what the
    /// default query answers.
    pub async fn hosts(&self, service: &str, all: bool) -> Result<Vec<Value>> {
        let path = if all {
            format!("/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false")
        } else {
            format!("/nacos/v1/ns/instance/list?serviceName={service}")
        };
        let answer = self.get(&path).await?;
        if answer.status != 200 {
            bail!(
                "list {service} answered {} {}",
                answer.status,
                answer.text()
            );
        }
        let list: Value = serde_json::from_slice(&answer.body).context("list is not JSON")?;
        Ok(list["hosts"].as_array().cloned().unwrap_or_default())
    }

    /// How many instances `service` lists (`healthyOnly=false`), without building the
    /// hosts' JSON (counts read 100,000s of instances while they age).
    async fn listed(&self, service: &str) -> Result<usize> {
        /// The list answer, reduced to what a count needs.
        #[derive(serde::Deserialize)]
        struct Hosts {
            #[serde(default)]
            hosts: Vec<serde::de::IgnoredAny>,
        }
        let answer = self
            .get(&format!(
                "/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=false"
            ))
            .await?;
        if answer.status != 200 {
            bail!(
                "list {service} answered {} {}",
                answer.status,
                answer.text()
            );
        }
        let list: Hosts = serde_json::from_slice(&answer.body)
            .with_context(|| format!("list {service} is not a host list"))?;
        Ok(list.hosts.len())
    }

    /// Instances held over `services`, every one counted (`healthyOnly=false`).
    pub async fn count(&self, services: &[String]) -> Result<usize> {
        let next = Arc::new(AtomicUsize::new(0));
        let services = Arc::new(services.to_vec());
        let mut tasks = Vec::new();
        for _ in 0..COUNT_CONCURRENCY {
            let (api, next, services) = (self.clone(), next.clone(), services.clone());
            tasks.push(tokio::spawn(async move {
                let mut held = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(service) = services.get(i) else {
                        return Ok::<usize, anyhow::Error>(held);
                    };
                    held += api.listed(service).await?;
                }
            }));
        }
        let mut held = 0;
        for task in tasks {
            held += task.await??;
        }
        Ok(held)
    }

    /// Registers instances `range` of `layout` with the metadata of `shape` (an HTTP
    /// shape), `BULK_CONCURRENCY` at a time.
    pub async fn register_bulk(
        &self,
        layout: Layout,
        range: Range<usize>,
        ephemeral: bool,
        shape: Shape,
    ) -> Result<Bulk> {
        let started = Instant::now();
        let next = Arc::new(AtomicUsize::new(range.start));
        let mut tasks = Vec::new();
        for _ in 0..BULK_CONCURRENCY {
            let (api, next, end) = (self.clone(), next.clone(), range.end);
            tasks.push(tokio::spawn(async move {
                let (mut acked, mut failed, mut first_error) = (0, 0, None);
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= end {
                        return (acked, failed, first_error);
                    }
                    match api.register(&layout.instance(k), ephemeral, shape).await {
                        Ok(()) => acked += 1,
                        Err(e) => {
                            failed += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
            }));
        }
        let mut bulk = Bulk {
            acked: 0,
            failed: 0,
            secs: 0.0,
        };
        for task in tasks {
            let (acked, failed, first_error) = task.await?;
            bulk.acked += acked;
            bulk.failed += failed;
            if let Some(e) = first_error {
                eprintln!("  registration failed: {e:#}");
            }
        }
        bulk.secs = started.elapsed().as_secs_f64();
        Ok(bulk)
    }
}

/// The v1 configuration path.
pub const CONFIGS_PATH: &str = "/nacos/v1/cs/configs";

/// `GET` path and query of one configuration item (namespace `public`).
pub fn config_path(data_id: &str, group: &str) -> String {
    format!(
        "{CONFIGS_PATH}?dataId={}&group={}",
        encode(data_id),
        encode(group)
    )
}

/// Percent-encodes everything but unreserved characters (for queries and form values).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes and `+` (a form's space); a malformed escape stays as it is.
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `name=value&...`, every name and value percent-encoded.
pub fn form_body(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A response: status, content type and body.
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, empty when absent.
    pub content_type: String,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text (lossy), for messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| format!("not JSON: {}", self.text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_and_decoding_round_trip() {
        let text = "a\u{2}DEFAULT_GROUP\u{2}0cc1\u{1} x+y/é";
        assert_eq!(decode(&encode(text)), text);
        assert_eq!(encode("a b\u{1}"), "a%20b%01");
        assert_eq!(decode("a+b%02c%0"), "a b\u{2}c%0");
        assert_eq!(
            form_body(&[("dataId", "x.y"), ("content", "k=v\n")]),
            "dataId=x.y&content=k%3Dv%0A"
        );
    }
}
