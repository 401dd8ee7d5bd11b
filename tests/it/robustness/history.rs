//! The recorded history: every client operation with its call and return times and its
//! result, and every fault with its window, written as the JSON the checker reads
//! (`tests/checker/README.md` gives the format). Times are microseconds since the run
//! started, read from one monotonic clock by every thread.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Map, Value};

/// An operation's outcome as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Answered with success.
    Ok,
    /// A compare-and-set whose compare failed: it wrote nothing, and saw the item not
    /// holding what it expected.
    Fail,
    /// Refused before anything was done (not ready, no leader, a 4xx): it did not
    /// happen and saw nothing.
    Refused,
    /// No answer, a timeout, a 5xx: a write may or may not have happened.
    Unknown,
    /// The request never left (the connection was refused): not recorded, only
    /// counted.
    NotSent,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Fail => "fail",
            Self::Refused => "refused",
            Self::Unknown => "unknown",
            Self::NotSent => "not sent",
        }
    }
}

/// Every operation and fault of a run.
pub struct History {
    started: Instant,
    ids: AtomicU64,
    ops: Mutex<Vec<Value>>,
    faults: Mutex<Vec<Value>>,
    /// Requests that never left (connection refused): nothing to check.
    not_sent: AtomicU64,
}

/// An operation called and not yet returned.
pub struct Call<'h> {
    history: &'h History,
    fields: Map<String, Value>,
}

impl History {
    /// An empty history whose clock starts now.
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            ids: AtomicU64::new(1),
            ops: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            not_sent: AtomicU64::new(0),
        }
    }

    /// Microseconds since the run started.
    pub fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }

    /// Records the call of `op` on `key` (of `kind`: `config` or `instances`) by
    /// `client` through `node` (from 1) over `face`; the call time is now.
    pub fn call(
        &self,
        client: usize,
        node: usize,
        face: &str,
        kind: &str,
        key: &str,
        op: &str,
    ) -> Call<'_> {
        let mut fields = Map::new();
        fields.insert("id".into(), self.ids.fetch_add(1, Ordering::Relaxed).into());
        fields.insert("client".into(), client.into());
        fields.insert("node".into(), node.into());
        fields.insert("face".into(), face.into());
        fields.insert("kind".into(), kind.into());
        fields.insert("key".into(), key.into());
        fields.insert("op".into(), op.into());
        fields.insert("call_us".into(), self.now_us().into());
        Call {
            history: self,
            fields,
        }
    }

    /// Records that `nodes` (from 1) were under fault `kind` from `from_us` until
    /// `to_us` (healed, plus the time given to catch up).
    pub fn fault(&self, nodes: &[usize], kind: &str, from_us: u64, to_us: u64) {
        let mut faults = self.faults.lock().unwrap();
        for node in nodes {
            faults.push(json!({"node": node, "kind": kind, "from_us": from_us, "to_us": to_us}));
        }
    }

    /// How many operations were recorded, by `op` and status.
    pub fn summary(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for op in self.ops.lock().unwrap().iter() {
            let name = format!(
                "{} {} {}",
                op["kind"].as_str().unwrap_or("?"),
                op["op"].as_str().unwrap_or("?"),
                op["status"].as_str().unwrap_or("?")
            );
            *counts.entry(name).or_default() += 1;
        }
        counts
    }

    /// How many requests never left.
    pub fn not_sent(&self) -> u64 {
        self.not_sent.load(Ordering::Relaxed)
    }

    /// How many operations were recorded.
    pub fn len(&self) -> usize {
        self.ops.lock().unwrap().len()
    }

    /// Writes the history to `path` as the checker reads it.
    pub fn write(&self, path: &Path, seed: u64, lag_ms: u64) {
        let faults: Vec<Value> = self.faults.lock().unwrap().clone();
        let mut ops: Vec<Value> = self.ops.lock().unwrap().clone();
        ops.sort_by_key(|op| op["call_us"].as_u64());
        let doc = json!({"seed": seed, "lag_ms": lag_ms, "faults": faults, "ops": ops});
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec(&doc).unwrap()).unwrap();
    }
}

impl Call<'_> {
    /// Adds an argument of the operation (`value`, `expect`, `addr`).
    pub fn arg(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }

    /// Records the return, now, with `status` and the result's fields (`found`,
    /// `read`, `addrs`, `error`). A request that was never sent is only counted.
    pub fn returned(mut self, status: Status, result: Value) {
        if status == Status::NotSent {
            self.history.not_sent.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.fields
            .insert("return_us".into(), self.history.now_us().into());
        self.fields.insert("status".into(), status.name().into());
        if let Value::Object(result) = result {
            self.fields.extend(result);
        }
        self.history
            .ops
            .lock()
            .unwrap()
            .push(Value::Object(self.fields));
    }
}
