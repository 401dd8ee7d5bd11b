//! The Nacos naming model as every protocol face shares it: where a write goes
//! ([`writes`]: ephemeral instances to their Distro owner, persistent ones through Raft)
//! and the shapes answers and pushes carry ([`wire`]: HTTP v1 and v2 lists, UDP and
//! gRPC pushes, gRPC queries and the console all serialize the same `ServiceInfo`). The
//! naming rules the faces apply to requests are the registry's (`registry::validate`).

pub mod wire;
pub mod writes;
