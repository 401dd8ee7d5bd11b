//! What the figures were measured on and with: CPU, cores, kernel, date, the versions of
//! roster, r-nacos and wrk; and a process's resident memory.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use serde::Serialize;

/// The machine and the software under test.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Cores available to processes.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Start of the run, UTC.
    pub date: String,
    /// roster's git commit (`-dirty` with uncommitted changes).
    pub roster_commit: String,
    /// `roster --version`.
    pub roster_version: String,
    /// `rnacos --version`.
    pub rnacos_version: String,
    /// `wrk -v`: name and version.
    pub wrk_version: String,
}

impl Machine {
    /// Reads it all; what cannot be read is `unknown`.
    pub fn describe(workspace: &Path, roster: &Path, rnacos: &Path) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(unknown);
        let commit = output(Command::new("git").arg("-C").arg(workspace).args([
            "rev-parse",
            "--short=12",
            "HEAD",
        ]));
        let dirty = output(Command::new("git").arg("-C").arg(workspace).args([
            "status",
            "--porcelain",
            "--untracked-files=no",
        ]));
        let roster_commit = match (commit, dirty) {
            (Some(c), Some(d)) if !d.is_empty() => format!("{c}-dirty"),
            (Some(c), _) => c,
            (None, _) => unknown(),
        };
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| unknown()),
            date: output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]))
                .unwrap_or_else(unknown),
            roster_commit,
            roster_version: output(Command::new(roster).arg("--version")).unwrap_or_else(unknown),
            rnacos_version: output(Command::new(rnacos).arg("--version")).unwrap_or_else(unknown),
            wrk_version: output(Command::new("wrk").arg("-v"))
                .and_then(|s| {
                    // "wrk debian/4.1.0-3+b2 [epoll] Copyright ...": name and version.
                    let words: Vec<&str> = s.split_whitespace().take(2).collect();
                    (!words.is_empty()).then(|| words.join(" "))
                })
                .unwrap_or_else(unknown),
        }
    }
}

fn unknown() -> String {
    "unknown".to_string()
}

/// A command's trimmed stdout, or its stderr when stdout is empty (wrk prints its
/// version there), if it ran.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    Some(String::from_utf8_lossy(&text).trim().to_string())
}

/// Established TCP connections to `port` on this machine (from `/proc/net/tcp`), the
/// client ends only (the remote address is the port).
pub fn established_to(port: u16) -> usize {
    let suffix = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| {
            text.lines()
                .skip(1)
                .filter(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields.len() > 3 && fields[2].ends_with(&suffix) && fields[3] == "01"
                })
                .count()
        })
        .sum()
}

/// Resident memory of `pid` in KiB (`VmRSS` in `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS line")
}

/// CPU time `pid` has used, user and system, over all its threads, in seconds
/// (`/proc/PID/stat` fields 14 and 15, in the kernel's USER_HZ ticks of 1/100 s).
pub fn cpu_secs(pid: u32) -> Result<f64> {
    stat_cpu_secs(&format!("/proc/{pid}/stat"), 2)
}

/// This process' CPU time and that of the children it has waited for (wrk), in
/// seconds (fields 14-17: utime, stime, cutime, cstime).
pub fn own_cpu_secs() -> Result<f64> {
    stat_cpu_secs("/proc/self/stat", 4)
}

/// The sum of the `count` CPU time fields from utime on in the stat file `path`, in
/// seconds.
fn stat_cpu_secs(path: &str, count: usize) -> Result<f64> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) may hold spaces; fields count from its closing ')'.
    let rest = stat.rsplit_once(')').context("no ')' in stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) is at 11.
    let ticks = fields
        .get(11..11 + count)
        .context("a short stat line")?
        .iter()
        .map(|v| {
            v.parse::<f64>()
                .context("a stat field that is not a number")
        })
        .sum::<Result<f64>>()?;
    Ok(ticks / 100.0)
}

/// The share (0..1) of CPU time the whole machine spent busy over `window`, from
/// `/proc/stat`: taken while the bench runs nothing, it shows others' work.
pub async fn busy_share(window: std::time::Duration) -> Option<f64> {
    fn sample() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal ...: idle and iowait are idle.
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some((fields.iter().sum(), idle))
    }
    let (total0, idle0) = sample()?;
    tokio::time::sleep(window).await;
    let (total1, idle1) = sample()?;
    let total = total1.checked_sub(total0)?;
    (total > 0).then(|| 1.0 - (idle1 - idle0) as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_connections_are_counted_by_remote_port() {
        // Nothing listens on port 1.
        assert_eq!(established_to(1), 0);
    }

    #[test]
    fn cpu_time_is_read_for_a_process_and_for_this_one() {
        let pid = std::process::id();
        assert!(cpu_secs(pid).unwrap() >= 0.0);
        assert!(own_cpu_secs().unwrap() >= cpu_secs(pid).unwrap());
    }
}
