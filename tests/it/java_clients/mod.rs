//! The Java clients most Nacos users run, unmodified, against real roster processes. The
//! programs are one Maven build, `tests/clients/java/`, one module per client line (each
//! with its own classpath), built by `scripts/test`; a test runs a module's main class on
//! `java -cp` with the classpath Maven wrote (`target/classpath.txt`). One JVM per scenario.
//! A module that is not built fails the test: it never skips.

mod dubbo;
mod eureka;
mod fuzzy;
mod maintainer;
mod nacos_client;
mod spring_cloud;
mod spring_registries;

use std::path::PathBuf;
use std::process::Command;

pub use roster_tests::scenario::{run, step, steps, Running};
use roster_tests::workspace_root;

/// The Maven build's directory (`ROSTER_JAVA_CLIENTS` names another checkout's).
fn root() -> PathBuf {
    std::env::var_os("ROSTER_JAVA_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/clients/java"))
}

/// A command running `main` (a class name) of `module` with its classpath, on the Java
/// the machine has (17): a small heap and the quick compiler, as a scenario is short.
pub fn java(module: &str, main: &str) -> Command {
    let dir = root().join(module).join("target");
    let classes = dir.join("classes");
    let classpath = std::fs::read_to_string(dir.join("classpath.txt")).unwrap_or_else(|e| {
        panic!(
            "the Java client module {module} is not built ({}: {e}); scripts/test builds tests/clients/java",
            dir.display()
        )
    });
    assert!(
        classes.exists(),
        "{} missing: scripts/test builds tests/clients/java",
        classes.display()
    );
    let mut cmd = Command::new("java");
    cmd.args(["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .arg("-cp")
        .arg(format!("{}:{}", classes.display(), classpath.trim()))
        .arg(main);
    cmd
}
