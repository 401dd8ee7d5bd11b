//! Every process the bench starts (servers and wrk) is held here, so that an error, a
//! panic or a signal kills them all: nothing the bench started outlives it. Each one
//! also leaves a pid file, which `bench/run` uses as a last resort if the driver itself
//! is killed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Running children by pid. Static, because the panic hook must reach them.
static CHILDREN: Mutex<BTreeMap<u32, Child>> = Mutex::new(BTreeMap::new());
/// Where the pid files go.
static PID_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Sets the pid-file directory (created if missing). Call once, before any spawn.
pub fn init(pid_dir: &Path) -> Result<()> {
    std::fs::create_dir_all(pid_dir).with_context(|| format!("creating {}", pid_dir.display()))?;
    let _ = PID_DIR.set(pid_dir.to_path_buf());
    Ok(())
}

fn children() -> std::sync::MutexGuard<'static, BTreeMap<u32, Child>> {
    // A panic while the lock was held leaves the map intact; keep using it.
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

fn pid_file(pid: u32) -> Option<PathBuf> {
    PID_DIR.get().map(|d| d.join(pid.to_string()))
}

/// Starts `command` and holds the child. Returns its pid.
pub fn spawn(command: &mut Command) -> Result<u32> {
    let child = command
        .spawn()
        .with_context(|| format!("starting {:?}", command.get_program()))?;
    let pid = child.id();
    if let Some(file) = pid_file(pid) {
        let _ = std::fs::write(file, format!("{:?}\n", command.get_program()));
    }
    children().insert(pid, child);
    Ok(pid)
}

/// Whether the child `pid` is still running.
pub fn is_running(pid: u32) -> bool {
    match children().get_mut(&pid) {
        Some(child) => matches!(child.try_wait(), Ok(None)),
        None => false,
    }
}

/// Waits for the child `pid` to exit, at most `timeout`; kills it past that.
pub async fn wait(pid: u32, timeout: Duration) -> Result<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        {
            let mut all = children();
            let Some(child) = all.get_mut(&pid) else {
                bail!("process {pid} is not one of ours");
            };
            if let Some(status) = child.try_wait()? {
                all.remove(&pid);
                forget(pid);
                return Ok(status);
            }
        }
        if Instant::now() >= deadline {
            kill(pid);
            bail!("process {pid} still running after {timeout:?}; killed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills the child `pid` (SIGKILL) and reaps it. Unknown pids are ignored.
pub fn kill(pid: u32) {
    let child = children().remove(&pid);
    if let Some(mut child) = child {
        let _ = child.kill();
        let _ = child.wait();
    }
    forget(pid);
}

/// Kills every child still running.
pub fn kill_all() {
    let all = std::mem::take(&mut *children());
    for (pid, mut child) in all {
        let _ = child.kill();
        let _ = child.wait();
        forget(pid);
    }
}

fn forget(pid: u32) {
    if let Some(file) = pid_file(pid) {
        let _ = std::fs::remove_file(file);
    }
}
