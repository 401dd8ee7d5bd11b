//! The Nacos gRPC wire: the `Payload` envelope (written by hand with prost's derive; the
//! proto has no package and a local `Any`) and the two services, `/Request/request`
//! (unary) and `/BiRequestStream/requestBiStream` (bidirectional), as tower services a
//! tonic server can route to.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::codec::{BufferSettings, Codec};
use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, StreamingService, UnaryService};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// `message Metadata { string type = 3; string clientIp = 8; map<string,string> headers = 7; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    /// The simple Java class name of the body.
    #[prost(string, tag = "3")]
    pub r#type: String,
    /// The sender's idea of its own IP.
    #[prost(string, tag = "8")]
    pub client_ip: String,
    /// Request headers (`accessToken`, `app`, ...).
    #[prost(map = "string, string", tag = "7")]
    pub headers: HashMap<String, String>,
}

/// `google.protobuf.Any`, declared locally (same wire encoding).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// Ignored (clients send `""` or the type name).
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The UTF-8 JSON of the request or response.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `message Payload { Metadata metadata = 2; google.protobuf.Any body = 3; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// Type and headers.
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<Metadata>,
    /// The JSON body.
    #[prost(message, optional, tag = "3")]
    pub body: Option<Any>,
}

impl Payload {
    /// A payload of type `kind` with JSON `body`.
    pub fn new(kind: &str, body: &serde_json::Value) -> Self {
        Self::from_json(
            kind,
            serde_json::to_vec(body).expect("JSON bodies serialize"),
        )
    }

    /// A payload of type `kind` whose body is `json`, serialized already.
    pub fn from_json(kind: &str, json: Vec<u8>) -> Self {
        Self {
            metadata: Some(Metadata {
                r#type: kind.to_string(),
                client_ip: String::new(),
                headers: HashMap::new(),
            }),
            body: Some(Any {
                type_url: String::new(),
                value: json,
            }),
        }
    }

    /// The body's type name.
    pub fn kind(&self) -> &str {
        self.metadata
            .as_ref()
            .map(|m| m.r#type.as_str())
            .unwrap_or("")
    }

    /// The body's bytes.
    pub fn body_bytes(&self) -> &[u8] {
        self.body
            .as_ref()
            .map(|b| b.value.as_slice())
            .unwrap_or(&[])
    }
}

/// Largest message accepted or sent (Nacos' server limit).
pub const MAX_MESSAGE: usize = 10 * 1024 * 1024;

/// What the two services call.
pub trait Handler: Send + Sync + 'static {
    /// A unary request from the transport at `remote`.
    fn request(
        self: Arc<Self>,
        remote: Option<SocketAddr>,
        payload: Payload,
    ) -> BoxFuture<Payload, Status>;
    /// A bi-stream opened by the transport at `remote`; returns what to send back.
    fn stream(
        self: Arc<Self>,
        remote: Option<SocketAddr>,
        inbound: Streaming<Payload>,
    ) -> BoxFuture<Outbound, Status>;
}

/// What a bi-stream sends: a message, or the status that ends the stream. The message
/// is boxed because the queue allocates its slots 32 at a time (the first 32 when it is
/// made, and a connection's stays for the connection's life): 16-byte slots rather
/// than `Payload`'s ~150 bytes, ~4 KB less per connection.
pub type Queued = Result<Box<Payload>, Status>;

/// The messages a bi-stream sends, from its connection's bounded queue.
pub struct Outbound(mpsc::Receiver<Queued>);

impl Outbound {
    /// The stream of what is queued on `rx`.
    pub fn new(rx: mpsc::Receiver<Queued>) -> Self {
        Self(rx)
    }
}

impl Stream for Outbound {
    type Item = Result<Payload, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0
            .poll_recv(cx)
            .map(|queued| queued.map(|item| item.map(|payload| *payload)))
    }
}

/// The `Payload` codec with Nacos' message size limit both ways.
fn codec() -> Grpc<tonic_prost::ProstCodec<Payload, Payload>> {
    Grpc::new(tonic_prost::ProstCodec::default())
        .apply_max_message_size_config(Some(MAX_MESSAGE), Some(MAX_MESSAGE))
}

/// The initial size of a bi-stream's read and write buffers. tonic allocates both when
/// a call starts and keeps them for the call's life, which for a bi-stream is the
/// connection's: 8 KiB each by default, 16 KiB per idle connection. What a stream
/// carries is mostly a few hundred bytes (set-up, acks, probes, small pushes); a larger
/// message grows the buffer as it would a unary call's.
const STREAM_BUFFER: usize = 512;
/// How much a stream's writes batch before they are handed on (tonic's default).
const STREAM_YIELD: usize = 32 * 1024;

/// The `Payload` codec of the bi-stream: [`codec`]'s, with [`STREAM_BUFFER`] buffers.
#[derive(Clone, Copy, Debug, Default)]
struct StreamCodec;

impl Codec for StreamCodec {
    type Encode = Payload;
    type Decode = Payload;
    type Encoder = ProstEncoder<Payload>;
    type Decoder = ProstDecoder<Payload>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::new(STREAM_BUFFER, STREAM_YIELD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(BufferSettings::new(STREAM_BUFFER, STREAM_YIELD))
    }
}

fn stream_codec() -> Grpc<StreamCodec> {
    Grpc::new(StreamCodec).apply_max_message_size_config(Some(MAX_MESSAGE), Some(MAX_MESSAGE))
}

fn unimplemented() -> http::Response<tonic::body::Body> {
    Status::unimplemented("no such method").into_http()
}

/// `service Request { rpc request(Payload) returns (Payload); }`
pub struct RequestServer<H>(pub Arc<H>);

impl<H> Clone for RequestServer<H> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<H> NamedService for RequestServer<H> {
    const NAME: &'static str = "Request";
}

struct UnaryCall<H>(Arc<H>);

impl<H: Handler> UnaryService<Payload> for UnaryCall<H> {
    type Response = Payload;
    type Future = BoxFuture<Response<Payload>, Status>;

    fn call(&mut self, request: Request<Payload>) -> Self::Future {
        let handler = self.0.clone();
        Box::pin(async move {
            let remote = request.remote_addr();
            handler
                .request(remote, request.into_inner())
                .await
                .map(Response::new)
        })
    }
}

impl<H, B> Service<http::Request<B>> for RequestServer<H>
where
    H: Handler,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let handler = self.0.clone();
        match req.uri().path() {
            "/Request/request" => Box::pin(async move {
                let mut grpc = codec();
                Ok(grpc.unary(UnaryCall(handler), req).await)
            }),
            _ => Box::pin(async move { Ok(unimplemented()) }),
        }
    }
}

/// `service BiRequestStream { rpc requestBiStream(stream Payload) returns (stream Payload); }`
pub struct BiStreamServer<H>(pub Arc<H>);

impl<H> Clone for BiStreamServer<H> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<H> NamedService for BiStreamServer<H> {
    const NAME: &'static str = "BiRequestStream";
}

struct StreamCall<H>(Arc<H>);

impl<H: Handler> StreamingService<Payload> for StreamCall<H> {
    type Response = Payload;
    type ResponseStream = Outbound;
    type Future = BoxFuture<Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<Payload>>) -> Self::Future {
        let handler = self.0.clone();
        Box::pin(async move {
            let remote = request.remote_addr();
            handler
                .stream(remote, request.into_inner())
                .await
                .map(Response::new)
        })
    }
}

impl<H, B> Service<http::Request<B>> for BiStreamServer<H>
where
    H: Handler,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let handler = self.0.clone();
        match req.uri().path() {
            "/BiRequestStream/requestBiStream" => Box::pin(async move {
                let mut grpc = stream_codec();
                Ok(grpc.streaming(StreamCall(handler), req).await)
            }),
            _ => Box::pin(async move { Ok(unimplemented()) }),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Fuzzing of what a gRPC client controls: the protobuf envelope, and the JSON body
    //! of a naming request through parsing, service naming and registration. Any bytes
    //! get an answer (a decode error, or an error payload), never a panic.

    use proptest::prelude::*;
    use prost::Message;
    use serde_json::{json, Value};

    use super::*;
    use crate::faces::grpc::kind::RequestKind;
    use crate::faces::grpc::naming::registration;
    use crate::faces::grpc::GrpcServer;

    fn parse_request(
        kind: &str,
        body: &[u8],
    ) -> Result<crate::faces::grpc::NamingRequest, Box<Payload>> {
        crate::faces::grpc::parse_request(RequestKind::decode(kind), body)
    }

    const KINDS: [&str; 6] = [
        "InstanceRequest",
        "PersistentInstanceRequest",
        "BatchInstanceRequest",
        "ServiceQueryRequest",
        "SubscribeServiceRequest",
        "ServiceListRequest",
    ];

    /// A body through everything that reads it before the registry does.
    fn read_body(kind: &str, body: &[u8]) -> Result<(), TestCaseError> {
        match parse_request(kind, body) {
            Ok(request) => {
                let _ = GrpcServer::service_key(&request);
                let client: Arc<str> = Arc::from("g:1:c");
                for wire in request
                    .instance
                    .iter()
                    .chain(request.instances.iter().flatten())
                {
                    if let Ok(reg) = registration(wire, Some(&client), 256) {
                        let kept = roster_registry::validate::check_ip("ip", &reg.ip);
                        prop_assert!(
                            matches!(kept, Ok(std::borrow::Cow::Borrowed(_))),
                            "{}",
                            reg.ip
                        );
                    }
                }
            }
            Err(refusal) => {
                prop_assert_eq!(refusal.kind(), "ErrorResponse");
                let answer: Value = serde_json::from_slice(refusal.body_bytes()).unwrap();
                prop_assert_eq!(&answer["errorCode"], &json!(400));
                prop_assert_eq!(&answer["success"], &json!(false));
            }
        }
        Ok(())
    }

    /// JSON values of every type, for any field of a request or an instance.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| json!(f)),
            "\\PC{0,16}".prop_map(Value::from),
            prop_oneof![
                Just("127.0.0.1"),
                Just("0:0:0:0:0:0:0:1"),
                Just("999.1.1.1"),
                Just("g@@s")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 16, 4, |inner| {
            let key = prop_oneof![
                Just("ip".to_string()),
                Just("port".to_string()),
                Just("serviceName".to_string()),
                Just("instance".to_string()),
                Just("metadata".to_string()),
                "\\PC{0,6}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map(key, inner, 0..4).prop_map(|m| json!(m)),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Arbitrary bytes as a gRPC message: decoded or refused; a decoded payload's
        /// body is read or refused with an error payload.
        #[test]
        fn arbitrary_envelopes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(payload) = Payload::decode(bytes.as_slice()) {
                read_body(payload.kind(), payload.body_bytes())?;
            }
        }

        /// Arbitrary bytes as a naming request's body.
        #[test]
        fn arbitrary_bodies(kind in proptest::sample::select(&KINDS[..]), body in proptest::collection::vec(any::<u8>(), 0..256)) {
            read_body(kind, &body)?;
        }

        /// Request-shaped JSON with fields of any type, as an envelope would carry it.
        #[test]
        fn request_shaped_bodies(
            kind in proptest::sample::select(&KINDS[..]),
            fields in proptest::collection::btree_map(
                prop_oneof![Just("serviceName"), Just("groupName"), Just("namespace"), Just("type"), Just("instance"), Just("instances"), Just("clusters")],
                any_json(),
                0..6,
            ),
            instance in proptest::collection::btree_map(
                prop_oneof![Just("ip"), Just("port"), Just("weight"), Just("clusterName"), Just("metadata"), Just("ephemeral"), Just("instanceId")],
                any_json(),
                0..7,
            ),
        ) {
            let mut body = json!(fields);
            body["instance"] = json!(instance);
            let payload = Payload::new(kind, &body);
            let decoded = Payload::decode(payload.encode_to_vec().as_slice()).unwrap();
            read_body(decoded.kind(), decoded.body_bytes())?;
        }
    }

    #[test]
    fn registrations_over_grpc_follow_the_naming_rules() {
        let read = |instance: Value| {
            let request = parse_request(
                "InstanceRequest",
                json!({ "instance": instance }).to_string().as_bytes(),
            )
            .unwrap();
            registration(request.instance.as_ref().unwrap(), None, 256)
        };
        for bad in ["999.1.1.1", "1.1.1", "01.02.03.004"] {
            let e = read(json!({"ip": bad, "port": 80})).unwrap_err();
            assert!(e.message.contains("'instance.ip'"), "{bad}: {e}");
        }
        let reg = read(json!({"ip": "::FFFF:127.0.0.1", "port": 80})).unwrap();
        assert_eq!(reg.ip, "127.0.0.1");
        // Bytes that are not UTF-8 inside a JSON string: refused, not replaced.
        let refusal = parse_request("InstanceRequest", b"{\"serviceName\":\"a\xff\"}").unwrap_err();
        assert_eq!(refusal.kind(), "ErrorResponse");
    }

    /// Messages much larger than the bi-stream's initial buffers, and small ones around
    /// them, go through the queue, the stream's encoder and decoder unchanged.
    #[tokio::test]
    async fn the_stream_codec_carries_messages_larger_than_its_buffers() {
        use http_body_util::BodyExt;
        use tokio_stream::StreamExt;
        use tonic::codec::{Codec, EncodeBody, SingleMessageCompressionOverride};

        let sizes = [
            0,
            10,
            STREAM_BUFFER,
            STREAM_BUFFER + 1,
            300_000,
            200,
            2 * STREAM_YIELD,
        ];
        let sent: Vec<Payload> = sizes
            .iter()
            .map(|&n| Payload {
                metadata: Some(Metadata {
                    r#type: "NotifySubscriberRequest".into(),
                    client_ip: String::new(),
                    headers: HashMap::from([("k".into(), "v".into())]),
                }),
                body: Some(Any {
                    type_url: String::new(),
                    value: vec![b'x'; n],
                }),
            })
            .collect();
        let (tx, rx) = mpsc::channel(sent.len());
        for p in &sent {
            tx.try_send(Ok(Box::new(p.clone()))).unwrap();
        }
        drop(tx);
        let body = EncodeBody::new_server(
            StreamCodec.encoder(),
            Outbound::new(rx),
            None,
            SingleMessageCompressionOverride::default(),
            Some(MAX_MESSAGE),
        );
        let bytes = body.collect().await.unwrap().to_bytes();
        let inbound = Streaming::new_request(
            StreamCodec.decoder(),
            http_body_util::Full::new(bytes),
            None,
            Some(MAX_MESSAGE),
        );
        let received: Vec<Payload> = inbound.map(Result::unwrap).collect().await;
        assert_eq!(received, sent);
    }
}
