//! The Go stacks our users run, unmodified, against real roster processes: nacos-sdk-go v2
//! (gRPC) and v1 (HTTP with UDP push), dubbo-go v3 with application-level discovery,
//! go-micro with a registry over nacos-sdk-go, and grpc-go resolving names through roster's
//! DNS. The programs are one Go module, `tests/clients/go/`, built by `scripts/test` into one
//! binary (`target/roster-goclients`, or `ROSTER_GOCLIENTS`) with a subcommand per
//! scenario. A missing binary fails the test: it never skips.

mod dubbo;
mod grpc_dns;
mod micro;
mod nacos_v1;
mod nacos_v2;

use std::path::PathBuf;
use std::process::Command;

pub use roster_tests::scenario::{run, step, steps, Running};
use roster_tests::workspace_root;

/// The binary `scripts/test` builds from `tests/clients/go`.
pub fn bin() -> PathBuf {
    let path = std::env::var_os("ROSTER_GOCLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/roster-goclients"));
    assert!(
        path.exists(),
        "the Go clients are not built at {} (scripts/test builds them from tests/clients/go)",
        path.display()
    );
    path
}

/// A command running `scenario` of the Go clients binary.
pub fn scenario(name: &str) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg(name);
    cmd
}
