//! The Nacos gRPC wire: the `Payload` envelope (written by hand with prost's derive; the
//! proto has no package and a local `Any`) and the two services, `/Request/request`
//! (unary) and `/BiRequestStream/requestBiStream` (bidirectional), as tower services a
//! tonic server can route to.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, StreamingService, UnaryService};
use tonic::{Request, Response, Status, Streaming};

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
        Self {
            metadata: Some(Metadata {
                r#type: kind.to_string(),
                client_ip: String::new(),
                headers: HashMap::new(),
            }),
            body: Some(Any {
                type_url: String::new(),
                value: serde_json::to_vec(body).expect("JSON bodies serialize"),
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
    ) -> BoxFuture<ReceiverStream<Result<Payload, Status>>, Status>;
}

/// The `Payload` codec with Nacos' message size limit both ways.
fn codec() -> Grpc<tonic_prost::ProstCodec<Payload, Payload>> {
    Grpc::new(tonic_prost::ProstCodec::default())
        .apply_max_message_size_config(Some(MAX_MESSAGE), Some(MAX_MESSAGE))
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
    type ResponseStream = ReceiverStream<Result<Payload, Status>>;
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
                let mut grpc = codec();
                Ok(grpc.streaming(StreamCall(handler), req).await)
            }),
            _ => Box::pin(async move { Ok(unimplemented()) }),
        }
    }
}
