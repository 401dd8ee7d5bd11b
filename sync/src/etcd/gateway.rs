//! etcd v3's JSON gateway (`/v3/*`, etcd 3.4 and later) over plain HTTP/1.1: prefix
//! ranges, watch streams and token authentication. Keys and values travel base64-encoded,
//! int64 fields as JSON strings, and fields with default values are left out (a PUT
//! event has no `type`).

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::SourceError;

/// Longest wait for a TCP connection to a server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a range or authentication answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Keys fetched per range request while listing.
const PAGE_SIZE: u64 = 500;

/// gRPC status codes etcd reports in gateway errors.
mod code {
    pub const INVALID_ARGUMENT: i64 = 3;
    pub const PERMISSION_DENIED: i64 = 7;
    pub const FAILED_PRECONDITION: i64 = 9;
    pub const OUT_OF_RANGE: i64 = 11;
    pub const UNAUTHENTICATED: i64 = 16;
}

/// A key and its value.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Kv {
    /// The key (etcd keys are bytes; read as UTF-8, lossily).
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
}

/// One change a watch reports.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Event {
    /// The key was created or changed.
    Put(Kv),
    /// The key was deleted (lease expiry included).
    Delete(String),
}

/// One message of a watch stream.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum WatchMessage {
    /// Changes, in revision order.
    Events(Vec<Event>),
    /// The watch ended: compaction, a rejected token, a server shutting down.
    Canceled(String),
    /// A watch was created, or a progress notification: nothing changed.
    Quiet,
}

/// How we authenticate.
#[derive(Clone, Debug)]
enum Auth {
    /// No credentials given.
    Anonymous,
    /// Credentials given, no token yet (or the last one was rejected).
    Pending { name: String, password: String },
    /// Authenticated: send this token.
    Token {
        name: String,
        password: String,
        token: String,
    },
    /// Credentials given but the server has authentication off.
    NotEnabled,
}

/// Why a gateway call failed.
enum Failure {
    /// The server rejected our token (expired, or issued by a restarted server).
    BadToken(String),
    /// The revision asked for was compacted.
    Compacted,
    /// Anything else.
    Source(SourceError),
}

impl From<SourceError> for Failure {
    fn from(e: SourceError) -> Self {
        Failure::Source(e)
    }
}

impl Failure {
    fn into_source(self) -> SourceError {
        match self {
            Failure::BadToken(m) => {
                SourceError::Refused(format!("etcd rejected the auth token: {m}"))
            }
            Failure::Compacted => {
                SourceError::Unreachable("etcd compacted the revision being read".into())
            }
            Failure::Source(e) => e,
        }
    }
}

/// A client of the gateways of one etcd cluster.
pub(super) struct Gateway {
    http: reqwest::Client,
    /// `host:port` of each server.
    hosts: Vec<String>,
    /// Index in `hosts` of the server that answered last; it is tried first.
    current: usize,
    auth: Auth,
}

impl Gateway {
    /// A client of `hosts` (tried in order), authenticating with `credentials` if given.
    pub(super) fn new(
        hosts: Vec<String>,
        credentials: Option<(String, String)>,
    ) -> Result<Self, SourceError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_keepalive(Duration::from_secs(30))
            .build()
            .map_err(|e| SourceError::Config(format!("cannot build an HTTP client: {e}")))?;
        let auth = match credentials {
            Some((name, password)) => Auth::Pending { name, password },
            None => Auth::Anonymous,
        };
        Ok(Self {
            http,
            hosts,
            current: 0,
            auth,
        })
    }

    /// Every key starting with `prefix`, read at one revision: `at`, or the current one.
    /// Returns that revision. `Ok(None)`: `at` was compacted meanwhile.
    pub(super) async fn range_prefix(
        &mut self,
        prefix: &str,
        at: Option<i64>,
    ) -> Result<Option<(i64, Vec<Kv>)>, SourceError> {
        let range_end = prefix_end(prefix.as_bytes());
        let mut start = prefix.as_bytes().to_vec();
        let mut revision = at;
        let mut kvs = Vec::new();
        loop {
            let mut body = json!({
                "key": BASE64.encode(&start),
                "range_end": BASE64.encode(&range_end),
                "limit": PAGE_SIZE.to_string(),
            });
            if let Some(r) = revision {
                body["revision"] = json!(r.to_string());
            }
            let page: RangeResponse = match self.call("/v3/kv/range", &body).await {
                Ok(bytes) => parse(&bytes, "range response")?,
                Err(Failure::Compacted) => return Ok(None),
                Err(e) => return Err(e.into_source()),
            };
            revision = Some(page.header.revision);
            if let Some(last) = page.kvs.last() {
                // The next page starts just after the last key.
                start = decode_b64(&last.key, "key")?;
                start.push(0);
            }
            for kv in page.kvs {
                kvs.push(kv.decode()?);
            }
            if !page.more {
                return Ok(Some((revision.unwrap_or_default(), kvs)));
            }
        }
    }

    /// Opens one watch stream over every key starting with one of `prefixes`, from
    /// revision `start` on, on the first server that answers.
    pub(super) async fn watch(
        &mut self,
        prefixes: &[String],
        start: i64,
    ) -> Result<WatchStream, SourceError> {
        // One request body may hold several create requests: one watcher each, all
        // answered on this stream.
        let body: String = prefixes
            .iter()
            .map(|p| {
                let create = json!({"create_request": {
                    "key": BASE64.encode(p.as_bytes()),
                    "range_end": BASE64.encode(prefix_end(p.as_bytes())),
                    "start_revision": start.to_string(),
                }});
                format!("{create}\n")
            })
            .collect();
        let mut last = None;
        for idx in self.host_order() {
            match self.open_watch(idx, &body).await {
                Ok(response) => {
                    self.current = idx;
                    return Ok(WatchStream::new(response));
                }
                Err(Failure::BadToken(m)) => {
                    // Rejected up front (a running stream reports it as a cancellation):
                    // the next call authenticates again.
                    self.forget_token();
                    return Err(Failure::BadToken(m).into_source());
                }
                Err(Failure::Source(e @ SourceError::Unreachable(_))) => {
                    warn!(host = %self.hosts[idx], error = %e, "etcd watch failed, trying the next server");
                    last = Some(e);
                }
                Err(e) => return Err(e.into_source()),
            }
        }
        Err(last.unwrap_or_else(|| SourceError::Config("no etcd host given".into())))
    }

    async fn open_watch(&mut self, idx: usize, body: &str) -> Result<reqwest::Response, Failure> {
        self.authenticate(idx).await?;
        let request = self
            .request(idx, "/v3/watch")
            .header("content-type", "application/json")
            .body(body.to_string());
        // Only the response head is awaited with a deadline: the body is the stream.
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, request.send()).await;
        let response = sent
            .map_err(|_| unreachable_err(&self.hosts[idx], "no answer to the watch request"))?
            .map_err(|e| unreachable_err(&self.hosts[idx], &e.to_string()))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap_or_default();
        Err(classify(&self.hosts[idx], status, &bytes))
    }

    /// POSTs `body` to `path` on the first server that answers; re-authenticates once
    /// if the token was rejected.
    async fn call(&mut self, path: &str, body: &Value) -> Result<Vec<u8>, Failure> {
        let mut last = None;
        for idx in self.host_order() {
            match self.call_host(idx, path, body).await {
                Ok(bytes) => {
                    self.current = idx;
                    return Ok(bytes);
                }
                Err(Failure::Source(e @ SourceError::Unreachable(_))) => {
                    warn!(host = %self.hosts[idx], error = %e, "etcd call failed, trying the next server");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(Failure::Source(last.unwrap_or_else(|| {
            SourceError::Config("no etcd host given".into())
        })))
    }

    async fn call_host(
        &mut self,
        idx: usize,
        path: &str,
        body: &Value,
    ) -> Result<Vec<u8>, Failure> {
        self.authenticate(idx).await?;
        match self.post(idx, path, body).await {
            Err(Failure::BadToken(m)) if matches!(self.auth, Auth::Token { .. }) => {
                debug!(reason = %m, "etcd token rejected, authenticating again");
                self.forget_token();
                self.authenticate(idx).await?;
                self.post(idx, path, body).await
            }
            other => other,
        }
    }

    /// Gets a token if we have credentials and none yet.
    async fn authenticate(&mut self, idx: usize) -> Result<(), Failure> {
        let Auth::Pending { name, password } = &self.auth else {
            return Ok(());
        };
        let (name, password) = (name.clone(), password.clone());
        let body = json!({"name": name, "password": password});
        // Sent without a token: `post` adds none while the state is Pending.
        match self.post(idx, "/v3/auth/authenticate", &body).await {
            Ok(bytes) => {
                let answer: AuthenticateResponse = parse(&bytes, "authenticate response")?;
                self.auth = Auth::Token {
                    name,
                    password,
                    token: answer.token,
                };
                Ok(())
            }
            Err(Failure::Source(SourceError::Refused(m)))
                if m.contains("authentication is not enabled") =>
            {
                warn!("etcd has authentication off; ignoring the username and password");
                self.auth = Auth::NotEnabled;
                Ok(())
            }
            Err(Failure::Source(SourceError::Refused(m))) => Err(Failure::Source(
                SourceError::Refused(format!("etcd authentication as '{name}' failed: {m}")),
            )),
            Err(e) => Err(e),
        }
    }

    fn forget_token(&mut self) {
        if let Auth::Token { name, password, .. } = &self.auth {
            self.auth = Auth::Pending {
                name: name.clone(),
                password: password.clone(),
            };
        }
    }

    async fn post(&self, idx: usize, path: &str, body: &Value) -> Result<Vec<u8>, Failure> {
        let host = &self.hosts[idx];
        let response = self
            .request(idx, path)
            .timeout(REQUEST_TIMEOUT)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| unreachable_err(host, &e.to_string()))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unreachable_err(host, &format!("reading the answer: {e}")))?;
        if (200..300).contains(&status) {
            Ok(bytes.to_vec())
        } else {
            Err(classify(host, status, &bytes))
        }
    }

    fn request(&self, idx: usize, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.post(format!("http://{}{path}", self.hosts[idx]));
        match &self.auth {
            Auth::Token { token, .. } => request.header("authorization", token),
            _ => request,
        }
    }

    /// Host indexes, the one that answered last first.
    fn host_order(&self) -> Vec<usize> {
        let n = self.hosts.len();
        (0..n).map(|i| (self.current + i) % n).collect()
    }
}

/// An open watch stream: newline-separated JSON messages.
pub(super) struct WatchStream {
    response: reqwest::Response,
    /// Bytes received but not yet parsed (at most one partial message).
    buffer: Vec<u8>,
}

impl WatchStream {
    fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next message, waiting until `deadline` at most (`Ok(None)`: none by then).
    /// A deadline already past still returns what has arrived.
    pub(super) async fn next(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<WatchMessage>, SourceError> {
        loop {
            if let Some(message) = take_message(&mut self.buffer)? {
                return Ok(Some(message));
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => return Ok(None),
                Ok(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
                Ok(Ok(None)) => {
                    return Err(SourceError::Unreachable(
                        "etcd closed the watch stream".into(),
                    ))
                }
                Ok(Err(e)) => {
                    return Err(SourceError::Unreachable(format!(
                        "etcd watch stream broke: {e}"
                    )))
                }
            }
        }
    }
}

/// Parses the first complete message in `buffer` and removes it.
fn take_message(buffer: &mut Vec<u8>) -> Result<Option<WatchMessage>, SourceError> {
    let mut messages = serde_json::Deserializer::from_slice(buffer).into_iter::<WatchEnvelope>();
    let parsed = match messages.next() {
        None => {
            // Only whitespace so far.
            buffer.clear();
            return Ok(None);
        }
        Some(Err(e)) if e.is_eof() => return Ok(None),
        Some(Err(e)) => {
            return Err(SourceError::Invalid(format!("etcd watch message: {e}")));
        }
        Some(Ok(envelope)) => envelope,
    };
    let consumed = messages.byte_offset();
    buffer.drain(..consumed);
    parsed.into_message().map(Some)
}

/// The end of the key range holding every key that starts with `prefix`: the prefix with
/// its last byte below 0xff incremented (etcd's `WithPrefix`); `\0` (every key) if none.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn unreachable_err(host: &str, detail: &str) -> Failure {
    Failure::Source(SourceError::Unreachable(format!(
        "etcd at {host}: {detail}"
    )))
}

/// Maps a gateway error answer onto a failure.
fn classify(host: &str, status: u16, body: &[u8]) -> Failure {
    let error: GatewayError = serde_json::from_slice(body).unwrap_or_default();
    let message = if error.message.is_empty() {
        String::from_utf8_lossy(body).trim().to_string()
    } else {
        error.message
    };
    match error.code {
        code::UNAUTHENTICATED => Failure::BadToken(message),
        code::OUT_OF_RANGE if message.contains("compacted") => Failure::Compacted,
        code::INVALID_ARGUMENT if message.contains("user name is empty") => {
            Failure::Source(SourceError::Refused(format!(
                "etcd at {host} requires authentication: add username and password to the URL ({message})"
            )))
        }
        code::INVALID_ARGUMENT | code::PERMISSION_DENIED | code::FAILED_PRECONDITION => {
            Failure::Source(SourceError::Refused(format!("etcd at {host}: {message}")))
        }
        _ if status >= 500 => {
            Failure::Source(SourceError::Unreachable(format!("etcd at {host}: HTTP {status}: {message}")))
        }
        _ => Failure::Source(SourceError::Refused(format!("etcd at {host}: HTTP {status}: {message}"))),
    }
}

fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, SourceError> {
    serde_json::from_slice(bytes).map_err(|e| SourceError::Invalid(format!("etcd {what}: {e}")))
}

fn decode_b64(text: &str, what: &str) -> Result<Vec<u8>, SourceError> {
    BASE64
        .decode(text)
        .map_err(|e| SourceError::Invalid(format!("etcd {what} is not base64: {e}")))
}

/// An int64, which the gateway writes as a JSON string (numbers accepted too).
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => s.parse().map_err(serde::de::Error::custom),
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| serde::de::Error::custom("not an int64")),
        Value::Null => Ok(0),
        other => Err(serde::de::Error::custom(format!(
            "expected an int64, got {other}"
        ))),
    }
}

#[derive(Debug, Default, Deserialize)]
struct GatewayError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: i64,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseHeader {
    #[serde(default, deserialize_with = "int64")]
    revision: i64,
}

#[derive(Debug, Deserialize)]
struct RawKv {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

impl RawKv {
    fn decode(self) -> Result<Kv, SourceError> {
        let key = decode_b64(&self.key, "key")?;
        Ok(Kv {
            key: String::from_utf8_lossy(&key).into_owned(),
            value: decode_b64(&self.value, "value")?,
        })
    }
}

#[derive(Debug, Deserialize)]
struct RangeResponse {
    #[serde(default)]
    header: ResponseHeader,
    #[serde(default)]
    kvs: Vec<RawKv>,
    #[serde(default)]
    more: bool,
}

#[derive(Debug, Deserialize)]
struct AuthenticateResponse {
    token: String,
}

/// A watch stream message: a result, or an error the gateway reports in-stream.
#[derive(Debug, Deserialize)]
struct WatchEnvelope {
    #[serde(default)]
    result: Option<WatchResult>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WatchResult {
    #[serde(default)]
    canceled: bool,
    #[serde(default, deserialize_with = "int64")]
    compact_revision: i64,
    #[serde(default)]
    cancel_reason: String,
    #[serde(default)]
    events: Vec<RawEvent>,
}

#[derive(Debug, Deserialize)]
struct RawEvent {
    /// `DELETE`, or absent for a PUT (the enum's default value).
    #[serde(default, rename = "type")]
    kind: String,
    kv: RawKv,
}

impl WatchEnvelope {
    fn into_message(self) -> Result<WatchMessage, SourceError> {
        if let Some(error) = self.error {
            return Err(SourceError::Unreachable(format!(
                "etcd watch stream error: {error}"
            )));
        }
        let Some(result) = self.result else {
            return Ok(WatchMessage::Quiet);
        };
        if result.canceled {
            let reason = if result.compact_revision > 0 {
                format!("revision compacted (up to {})", result.compact_revision)
            } else if result.cancel_reason.is_empty() {
                "canceled by the server".to_string()
            } else {
                result.cancel_reason
            };
            return Ok(WatchMessage::Canceled(reason));
        }
        if result.events.is_empty() {
            return Ok(WatchMessage::Quiet);
        }
        let events = result
            .events
            .into_iter()
            .map(RawEvent::decode)
            .collect::<Result<_, _>>()?;
        Ok(WatchMessage::Events(events))
    }
}

impl RawEvent {
    fn decode(self) -> Result<Event, SourceError> {
        let kv = self.kv.decode()?;
        Ok(match self.kind.as_str() {
            "DELETE" => Event::Delete(kv.key),
            _ => Event::Put(kv),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(
            prefix_end(b"/micro/registry/"),
            b"/micro/registry0".to_vec()
        );
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(
            BASE64.encode(prefix_end(b"/microservices/")),
            "L21pY3Jvc2VydmljZXMw"
        );
    }

    #[test]
    fn parses_stream_messages_across_chunks() {
        let put = r#"{"result":{"header":{"revision":"44"},"events":[{"kv":{"key":"L2E=","mod_revision":"44","value":"eA=="}}]}}"#;
        let delete = r#"{"result":{"header":{"revision":"45"},"events":[{"type":"DELETE","kv":{"key":"L2E=","mod_revision":"45"}}]}}"#;
        let text = format!("{put}\n{delete}\n");
        let (first, second) = text.as_bytes().split_at(30);
        let mut buffer = first.to_vec();
        assert_eq!(take_message(&mut buffer).unwrap(), None);
        buffer.extend_from_slice(second);
        assert_eq!(
            take_message(&mut buffer).unwrap(),
            Some(WatchMessage::Events(vec![Event::Put(Kv {
                key: "/a".into(),
                value: b"x".to_vec()
            })]))
        );
        assert_eq!(
            take_message(&mut buffer).unwrap(),
            Some(WatchMessage::Events(vec![Event::Delete("/a".into())]))
        );
        assert_eq!(take_message(&mut buffer).unwrap(), None);
        assert!(buffer.is_empty());
    }

    #[test]
    fn cancellations_and_errors() {
        let mut created = br#"{"result":{"header":{"revision":"2"},"created":true}}"#.to_vec();
        assert_eq!(
            take_message(&mut created).unwrap(),
            Some(WatchMessage::Quiet)
        );
        let mut compacted =
            br#"{"result":{"header":{},"canceled":true,"compact_revision":"2"}}"#.to_vec();
        assert!(matches!(
            take_message(&mut compacted).unwrap(),
            Some(WatchMessage::Canceled(r)) if r.contains("compacted")
        ));
        let mut error = br#"{"error":{"grpc_code":14,"message":"unavailable"}}"#.to_vec();
        assert!(matches!(
            take_message(&mut error),
            Err(SourceError::Unreachable(_))
        ));
        let mut garbage = b"]not json".to_vec();
        assert!(matches!(
            take_message(&mut garbage),
            Err(SourceError::Invalid(_))
        ));
    }

    #[test]
    fn classifies_gateway_errors() {
        let body = |code: i64, message: &str| {
            json!({"error": message, "message": message, "code": code}).to_string()
        };
        assert!(matches!(
            classify(
                "h",
                401,
                body(16, "etcdserver: invalid auth token").as_bytes()
            ),
            Failure::BadToken(_)
        ));
        assert!(matches!(
            classify(
                "h",
                400,
                body(11, "etcdserver: mvcc: required revision has been compacted").as_bytes()
            ),
            Failure::Compacted
        ));
        assert!(matches!(
            classify("h", 400, body(3, "etcdserver: user name is empty").as_bytes()),
            Failure::Source(SourceError::Refused(m)) if m.contains("add username and password")
        ));
        assert!(matches!(
            classify("h", 503, b"upstream down"),
            Failure::Source(SourceError::Unreachable(m)) if m.contains("upstream down")
        ));
    }
}
