//! The Nacos naming model as every protocol face shares it: the shapes answers and
//! pushes carry ([`wire`]) — HTTP v1 and v2 lists, UDP and gRPC pushes, gRPC queries and
//! the console all serialize the same `ServiceInfo` and hosts. The naming rules they
//! apply to requests are the registry's (`registry::validate`).

pub mod wire;
