//! The Nacos naming model's write path, as every protocol face shares it ([`writes`]:
//! ephemeral instances to their Distro owner, persistent ones through Raft). The shapes
//! answers and pushes carry are the registry's (`roster_registry::wire`: HTTP v1 and v2
//! lists, UDP and gRPC pushes, gRPC queries and the console all serialize the same
//! `ServiceInfo`), as are the naming rules the faces apply (`roster_registry::validate`,
//! with `registration`, the one check of a registration whichever face it came through).
//! [`apply`] is how the state machine applies the naming commands to the registry;
//! [`origin`] tells which face registered an instance, for roster's own views.

pub mod apply;
pub mod origin;
pub mod writes;
