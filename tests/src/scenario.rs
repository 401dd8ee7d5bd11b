//! Client programs that the black-box tests run beside real nodes (the Go and Java
//! clients): each prints one JSON object per step on stdout (`{"step":…,"ok":true,…}`),
//! exits 0 only when every check passed, and prints a failed step with `"ok":false`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// Runs a scenario to its end; it must exit 0. Answers its step lines.
pub fn run(mut cmd: Command, what: &str) -> Vec<Value> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        tail(&stderr, 12_000)
    );
    eprintln!("{what}:\n{stdout}");
    steps(&stdout)
}

/// The JSON step lines of a scenario's output (other lines are the libraries' logs).
pub fn steps(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The step named `name`, which must be there and ok.
pub fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    let found = steps
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {steps:?}"));
    assert_eq!(found["ok"], json!(true), "step {name}: {found}");
    found
}

fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A scenario that runs beside the test (a provider, a subscriber): its step lines arrive
/// on a channel as it prints them, it reads commands from its stdin (a scenario that
/// reads stdin ends when it closes), and it is killed when dropped.
pub struct Running {
    pub what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Running {
    pub fn start(mut cmd: Command, what: &str) -> Self {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        // The libraries log to stderr; keep the pipe drained so they never block on it.
        let stderr = child.stderr.take().unwrap();
        let name = what.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("FAIL") {
                    eprintln!("{name}: {line}");
                }
            }
        });
        Running {
            what: what.to_string(),
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits up to `timeout` for a step named `name` and answers it; a failed step, or
    /// the program's end, fails the test.
    pub fn wait_step(&mut self, name: &str, timeout: Duration) -> Value {
        if let Some(v) = self.seen.iter().find(|s| s["step"] == name) {
            return v.clone();
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    assert_ne!(v["ok"], json!(false), "{}: {v}", self.what);
                    self.seen.push(v.clone());
                    if v["step"] == name {
                        return v;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "{}: no step {name} within {timeout:?}; saw {:?}",
                    self.what, self.seen
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                    "{} ended ({:?}) before step {name}; saw {:?}",
                    self.what,
                    self.child.try_wait(),
                    self.seen
                ),
            }
        }
    }

    /// Waits up to `timeout` for a line (seen before or new) that `pred` accepts.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + timeout;
        let mut checked = 0;
        loop {
            self.drain();
            if let Some(v) = self.seen[checked..].iter().find(|v| pred(v)) {
                return v.clone();
            }
            checked = self.seen.len();
            assert!(
                std::time::Instant::now() < deadline,
                "{}: no line shows {what} within {timeout:?}; saw {:?}",
                self.what,
                self.seen
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends one line to the program's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("the program reads its stdin");
        stdin.flush().unwrap();
    }

    /// Closes the program's stdin: a scenario that reads it winds down and exits.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Every line printed so far (without waiting).
    pub fn drain(&mut self) -> &[Value] {
        while let Ok(v) = self.lines.try_recv() {
            self.seen.push(v);
        }
        &self.seen
    }

    /// Kills the program with SIGKILL, as a crashed process ends.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the program to exit by itself; it must exit 0.
    pub fn wait_success(&mut self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.drain();
                assert!(
                    status.success(),
                    "{} exited {status}; saw {:?}",
                    self.what,
                    self.seen
                );
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} still running after {timeout:?}",
                self.what
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
