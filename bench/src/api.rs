//! The Nacos v1 calls the bench makes itself (both systems answer them alike):
//! registration, lists and instance counts, and bulk registration to a count with
//! bounded concurrency, for what wrk does not fit.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

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
}

/// How bulk-registered instances are laid out: instance `k` lives in service
/// `<prefix>-<k / per_service>` at `10.<1 + k/65536>.<k/256 % 256>.<k % 256>:8080`.
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
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(BULK_CONCURRENCY * 2)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client without TLS always builds");
        Self {
            http,
            base: format!("http://{addr}"),
        }
    }

    /// `GET path` (path and query); the status and body, with the content type.
    pub async fn get(&self, path: &str) -> Result<Answer> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// `GET path` with extra headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Result<Answer> {
        let mut request = self.http.get(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    /// `POST path` with an empty body.
    pub async fn post(&self, path: &str) -> Result<Answer> {
        self.send(self.http.post(format!("{}{path}", self.base)))
            .await
    }

    /// `PUT path` with an empty body.
    pub async fn put(&self, path: &str) -> Result<Answer> {
        self.send(self.http.put(format!("{}{path}", self.base)))
            .await
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

    /// Registers `instance`; Ok only for 200 `ok`.
    pub async fn register(&self, instance: &Instance, ephemeral: bool) -> Result<()> {
        let answer = self
            .post(&format!(
                "/nacos/v1/ns/instance?serviceName={}&ip={}&port={}&ephemeral={ephemeral}",
                instance.service, instance.ip, instance.port
            ))
            .await?;
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
                    held += api.hosts(service, true).await?.len();
                }
            }));
        }
        let mut held = 0;
        for task in tasks {
            held += task.await??;
        }
        Ok(held)
    }

    /// Registers instances `range` of `layout`, `BULK_CONCURRENCY` at a time.
    pub async fn register_bulk(
        &self,
        layout: Layout,
        range: Range<usize>,
        ephemeral: bool,
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
                    match api.register(&layout.instance(k), ephemeral).await {
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
