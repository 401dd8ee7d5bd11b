//! A small Nacos 2.x gRPC client, as the Java client 2.x speaks it: the `Payload`
//! envelope (metadata `type`, `clientIp`, `headers`; the body a JSON document in an
//! `Any`), unary calls on `/Request/request` and the bi-stream
//! `/BiRequestStream/requestBiStream` on the same HTTP/2 connection. A [`Connection`]
//! makes the handshake (`ServerCheckRequest`, then the stream with
//! `ConnectionSetupRequest` and the client's 100 ms wait), registers ephemeral
//! instances it then owns (`InstanceRequest`, `registerInstance`), and answers every
//! request the server pushes on the stream (`ClientDetectionRequest`,
//! `NotifySubscriberRequest`, ...) with its `...Response`, as a live client does, so
//! neither server drops it as dead. Dropping it closes the connection, and the server
//! drops its instances.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

use crate::api::Instance;

/// The client the handshake names.
const CLIENT_VERSION: &str = "Nacos-Java-Client:v2.3.2";
/// The Java client's wait after `ConnectionSetupRequest` before it uses the connection
/// (`GrpcClient.connectToServer`: "wait to register connection setup").
const SETUP_WAIT: Duration = Duration::from_millis(100);
/// How long one call (connect, unary request) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Registrations refused with 301 (connection not registered yet) are retried this
/// many times, `SETUP_WAIT` apart.
const UNREGISTERED_RETRIES: usize = 20;

#[derive(Clone, PartialEq, prost::Message)]
struct Metadata {
    #[prost(string, tag = "3")]
    r#type: String,
    #[prost(string, tag = "8")]
    client_ip: String,
    #[prost(map = "string, string", tag = "7")]
    headers: HashMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// The Nacos gRPC envelope.
#[derive(Clone, PartialEq, prost::Message)]
struct Payload {
    #[prost(message, optional, tag = "2")]
    metadata: Option<Metadata>,
    #[prost(message, optional, tag = "3")]
    body: Option<Any>,
}

fn payload(kind: &str, body: &Value, client_ip: Ipv4Addr) -> Payload {
    payload_with(kind, body, client_ip, None)
}

/// The envelope of a request that carries `token` (the Java client's `accessToken`
/// header, sent on every request once it has logged in).
fn payload_with(kind: &str, body: &Value, client_ip: Ipv4Addr, token: Option<&str>) -> Payload {
    let headers = token
        .map(|t| HashMap::from([("accessToken".to_string(), t.to_string())]))
        .unwrap_or_default();
    Payload {
        metadata: Some(Metadata {
            r#type: kind.to_string(),
            client_ip: client_ip.to_string(),
            headers,
        }),
        body: Some(Any {
            type_url: String::new(),
            value: body.to_string().into_bytes(),
        }),
    }
}

/// The type and the JSON body of `p` (`Null` when the body is not JSON).
fn decode(p: &Payload) -> (String, Value) {
    let kind = p
        .metadata
        .as_ref()
        .map(|m| m.r#type.clone())
        .unwrap_or_default();
    let body = p
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice(&b.value).ok())
        .unwrap_or(Value::Null);
    (kind, body)
}

/// A push as a subscriber saw it: when it arrived, and the service it describes.
pub struct Push {
    /// The connection's index, as given to [`Connection::open_with`].
    pub subscriber: usize,
    /// When the reader decoded it.
    pub at: std::time::Instant,
    /// `serviceInfo` of the `NotifySubscriberRequest`.
    pub service: Value,
}

/// What a connection is opened with beyond its addresses.
#[derive(Clone, Default)]
pub struct Options {
    /// Sent as `accessToken` on every request (a server with authentication on).
    pub token: Option<String>,
    /// Where `NotifySubscriberRequest` pushes go, with the connection's index.
    pub pushes: Option<(usize, mpsc::UnboundedSender<Push>)>,
}

/// One client connection: a channel of its own (one TCP connection), its open
/// bi-stream, and a task that answers the server's pushes.
pub struct Connection {
    grpc: tonic::client::Grpc<Channel>,
    token: Option<String>,
    /// Keeps the stream open (the reader holds the other sender).
    _to_server: mpsc::Sender<Payload>,
    reader: JoinHandle<()>,
    next_request: u64,
    /// The loopback address it connects from.
    local: Ipv4Addr,
}

impl Connection {
    /// Connects from `local` (a loopback address: each client application has an
    /// address of its own, and servers cap connections per address) to the gRPC server
    /// at `addr` and makes the handshake; every push the server sends later is answered
    /// and counted in `answered`.
    pub async fn open(
        addr: SocketAddr,
        local: Ipv4Addr,
        answered: Arc<AtomicUsize>,
    ) -> Result<Self> {
        Self::open_with(addr, local, answered, Options::default()).await
    }

    /// [`Connection::open`] with a token and a push observer.
    pub async fn open_with(
        addr: SocketAddr,
        local: Ipv4Addr,
        answered: Arc<AtomicUsize>,
        options: Options,
    ) -> Result<Self> {
        let Options { token, pushes } = options;
        if !local.is_loopback() {
            bail!("{local} is not a loopback address: the bench connects only from 127.0.0.0/8");
        }
        let channel = Channel::from_shared(format!("http://{addr}"))
            .context("gRPC address")?
            .local_address(Some(local.into()))
            .connect_timeout(CALL_TIMEOUT)
            .connect()
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        let mut grpc = tonic::client::Grpc::new(channel);
        let (kind, body) = unary(
            &mut grpc,
            payload(
                "ServerCheckRequest",
                &json!({"headers": {}, "requestId": ""}),
                local,
            ),
        )
        .await?;
        if kind != "ServerCheckResponse" || body["resultCode"] != 200 {
            bail!("server check answered {kind} {body}");
        }
        // The setup goes first on the stream; it is queued before the stream opens.
        let (to_server, from_client) = mpsc::channel(64);
        to_server
            .send(payload(
                "ConnectionSetupRequest",
                &json!({
                    "headers": {},
                    "clientVersion": CLIENT_VERSION,
                    "abilities": {},
                    "tenant": "",
                    "labels": {"source": "sdk", "module": "naming"},
                }),
                local,
            ))
            .await
            .context("queueing the setup")?;
        grpc.ready().await.context("channel not ready")?;
        let response = tokio::time::timeout(
            CALL_TIMEOUT,
            grpc.streaming(
                tonic::Request::new(ReceiverStream::new(from_client)),
                PathAndQuery::from_static("/BiRequestStream/requestBiStream"),
                tonic_prost::ProstCodec::<Payload, Payload>::default(),
            ),
        )
        .await
        .context("opening the stream timed out")?
        .context("opening the stream")?;
        let mut inbound = response.into_inner();
        let responder = to_server.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(p)) = inbound.message().await {
                let at = std::time::Instant::now();
                let (kind, mut body) = decode(&p);
                if let Some((subscriber, pushes)) = &pushes {
                    if kind == "NotifySubscriberRequest" {
                        let _ = pushes.send(Push {
                            subscriber: *subscriber,
                            at,
                            service: body["serviceInfo"].take(),
                        });
                    }
                }
                let Some(base) = kind.strip_suffix("Request") else {
                    continue;
                };
                let answer = json!({
                    "resultCode": 200,
                    "errorCode": 0,
                    "success": true,
                    "message": "",
                    "requestId": body["requestId"],
                    "headers": {},
                });
                if responder
                    .send(payload(&format!("{base}Response"), &answer, local))
                    .await
                    .is_err()
                {
                    break;
                }
                answered.fetch_add(1, Ordering::Relaxed);
            }
        });
        tokio::time::sleep(SETUP_WAIT).await;
        Ok(Self {
            grpc,
            token,
            _to_server: to_server,
            reader,
            next_request: 1,
            local,
        })
    }

    /// Registers `instance` as an ephemeral instance of this connection, with
    /// `metadata`, as the Java client's `NamingGrpcClientProxy.registerService` sends
    /// it. Only loopback addresses are registered.
    pub async fn register(
        &mut self,
        instance: &Instance,
        metadata: Option<Map<String, Value>>,
    ) -> Result<()> {
        let mut wire = wire_instance(instance, metadata)?;
        wire["serviceName"] = Value::Null;
        let body = json!({
            "headers": {},
            "module": "naming",
            "namespace": "public",
            "serviceName": instance.service,
            "groupName": "DEFAULT_GROUP",
            "type": "registerInstance",
            "instance": wire,
        });
        let what = format!(
            "registering {}:{} in {}",
            instance.ip, instance.port, instance.service
        );
        self.send_write("InstanceRequest", "InstanceResponse", body, &what)
            .await
    }

    /// Registers `instances` (all of one service, this connection's) in one
    /// `BatchInstanceRequest`, as the Java client's `batchRegisterService` sends it,
    /// each with the metadata `metadata` gives it. Only loopback addresses are
    /// registered.
    pub async fn register_batch(
        &mut self,
        service: &str,
        instances: &[Instance],
        metadata: impl Fn(&Instance) -> Option<Map<String, Value>>,
    ) -> Result<()> {
        let wires = instances
            .iter()
            .map(|i| wire_instance(i, metadata(i)))
            .collect::<Result<Vec<_>>>()?;
        let body = json!({
            "headers": {},
            "module": "naming",
            "namespace": "public",
            "serviceName": service,
            "groupName": "DEFAULT_GROUP",
            "type": "batchRegisterInstance",
            "instances": wires,
        });
        let what = format!("a batch of {} in {service}", instances.len());
        self.send_write("BatchInstanceRequest", "BatchInstanceResponse", body, &what)
            .await
    }

    /// Sends a naming write (`kind`, answered `answer` with `resultCode` 200), waiting
    /// and sending it again while the server says the connection's setup is not
    /// registered yet, as the Java client does.
    async fn send_write(
        &mut self,
        kind: &str,
        answer_kind: &str,
        mut body: Value,
        what: &str,
    ) -> Result<()> {
        for _ in 0..=UNREGISTERED_RETRIES {
            body["requestId"] = self.next_request.to_string().into();
            self.next_request += 1;
            let request = payload_with(kind, &body, self.local, self.token.as_deref());
            let (answered, answer) = unary(&mut self.grpc, request).await?;
            match answered.as_str() {
                k if k == answer_kind && answer["resultCode"] == 200 => return Ok(()),
                "ErrorResponse" if answer["errorCode"] == 301 => {
                    tokio::time::sleep(SETUP_WAIT).await
                }
                _ => bail!("{what} answered {answered} {answer}"),
            }
        }
        bail!("{what}: the connection stayed unregistered")
    }
}

/// An instance as the Java client sends it (`serviceName` set: a batch's form), after
/// checking that its address is a loopback one: the bench registers only 127.0.0.0/8.
fn wire_instance(instance: &Instance, metadata: Option<Map<String, Value>>) -> Result<Value> {
    let ip: Ipv4Addr = instance.ip.parse().context("instance address")?;
    if !ip.is_loopback() {
        bail!("{ip} is not a loopback address: the bench registers only 127.0.0.0/8");
    }
    Ok(json!({
        "instanceId": null,
        "ip": instance.ip,
        "port": instance.port,
        "weight": 1.0,
        "healthy": true,
        "enabled": true,
        "ephemeral": true,
        "clusterName": "DEFAULT",
        "serviceName": instance.service,
        "metadata": metadata.unwrap_or_default(),
        "instanceHeartBeatInterval": 5000,
        "instanceHeartBeatTimeOut": 15000,
        "ipDeleteTimeout": 30000,
    }))
}

/// A `ServiceQueryRequest` made once and sent many times (a load loop should spend its
/// time in the server, not in building requests).
#[derive(Clone)]
pub struct Query(Payload);

impl Connection {
    /// The `ServiceQueryRequest` for every instance of `service` (`healthyOnly` false),
    /// as the Java client's `NamingGrpcClientProxy.queryInstancesOfService` sends it.
    pub fn query_of(&self, service: &str) -> Query {
        let body = json!({
            "headers": {},
            "requestId": "1",
            "module": "naming",
            "namespace": "public",
            "serviceName": service,
            "groupName": "DEFAULT_GROUP",
            "cluster": "",
            "healthyOnly": false,
            "udpPort": 0,
        });
        Query(payload_with(
            "ServiceQueryRequest",
            &body,
            self.local,
            self.token.as_deref(),
        ))
    }

    /// Sends `query`; the answer's body, failing unless it is a `QueryServiceResponse`
    /// with result 200. The body is not parsed (see [`hosts_in`]).
    pub async fn query(&mut self, query: &Query) -> Result<Vec<u8>> {
        let answer = call(&mut self.grpc, query.0.clone()).await?;
        let kind = answer.metadata.as_ref().map(|m| m.r#type.as_str());
        let body = answer.body.map(|b| b.value).unwrap_or_default();
        // Both servers write the result code near the start of a small JSON object;
        // a search of the first bytes tells success without parsing the hosts.
        let head = &body[..body.len().min(256)];
        const OK: &[u8] = b"\"resultCode\":200";
        let ok = head.windows(OK.len()).any(|w| w == OK);
        if kind != Some("QueryServiceResponse") || !ok {
            bail!(
                "query answered {} {}",
                kind.unwrap_or("nothing"),
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        }
        Ok(body)
    }

    /// Subscribes to `service` (`SubscribeServiceRequest`, `subscribe` true), as the
    /// Java client's `subscribe` sends it; the hosts the answer lists.
    pub async fn subscribe(&mut self, service: &str) -> Result<usize> {
        let body = json!({
            "headers": {},
            "requestId": self.next_request.to_string(),
            "module": "naming",
            "namespace": "public",
            "serviceName": service,
            "groupName": "DEFAULT_GROUP",
            "clusters": "",
            "subscribe": true,
        });
        self.next_request += 1;
        let request = payload_with(
            "SubscribeServiceRequest",
            &body,
            self.local,
            self.token.as_deref(),
        );
        let (kind, answer) = unary(&mut self.grpc, request).await?;
        if kind != "SubscribeServiceResponse" || answer["resultCode"] != 200 {
            bail!("subscribing to {service} answered {kind} {answer}");
        }
        Ok(answer["serviceInfo"]["hosts"]
            .as_array()
            .map_or(0, Vec::len))
    }
}

/// The hosts a `QueryServiceResponse` body lists.
pub fn hosts_in(body: &[u8]) -> Result<usize> {
    let answer: Value = serde_json::from_slice(body).context("query answer is not JSON")?;
    answer["serviceInfo"]["hosts"]
        .as_array()
        .map(Vec::len)
        .context("query answer lists no hosts")
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The stream's senders go (the reader holds one), then the channel: the
        // connection closes.
        self.reader.abort();
    }
}

/// One unary call: the answer's type and body.
async fn unary(
    grpc: &mut tonic::client::Grpc<Channel>,
    request: Payload,
) -> Result<(String, Value)> {
    let kind = request
        .metadata
        .as_ref()
        .map(|m| m.r#type.clone())
        .unwrap_or_default();
    let answer = call(grpc, request)
        .await
        .with_context(|| format!("{kind} failed"))?;
    Ok(decode(&answer))
}

/// One unary call, the answer as it came.
async fn call(grpc: &mut tonic::client::Grpc<Channel>, request: Payload) -> Result<Payload> {
    grpc.ready().await.context("channel not ready")?;
    let call = grpc.unary(
        tonic::Request::new(request),
        PathAndQuery::from_static("/Request/request"),
        tonic_prost::ProstCodec::<Payload, Payload>::default(),
    );
    let answer = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .context("timed out")??;
    Ok(answer.into_inner())
}
