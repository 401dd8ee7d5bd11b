//! The push paths: the SDK subscriber processes of one node (gRPC push to
//! `nacos-sdk-python`, UDP push to npm `nacos-naming`) and the console's event stream with
//! its refetch of the service page.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use roster_tests::{workspace_root, Node, Value, ADMIN_PASSWORD};

use super::service::Spec;
use super::views::{hosts_view, History, Path, Seen, View};
use super::{now_ms, SDK_WATCHDOG_SECS};

/// What the SDK observer processes of one node reported.
#[derive(Default)]
pub(super) struct FeedLog {
    /// Views by (path, namespace, service): the list at subscription, then every push.
    views: HashMap<(Path, String, String), History>,
    ready: BTreeSet<Path>,
    /// Lists the Python SDK asked for itself (there must be none).
    pub(super) py3_queries: Vec<String>,
    /// Queries the npm SDK made (its 1 s and 10 s re-queries; informational).
    pub(super) npm_queries: usize,
    /// `error` lines and stderr, for failure messages.
    pub(super) errors: Vec<String>,
}

/// The Python 3 (gRPC) and npm (UDP) subscribers of one node, for every case's service.
pub(super) struct Subscribers {
    children: Vec<Child>,
    pub(super) log: Arc<Mutex<FeedLog>>,
}

fn clients_dir() -> std::path::PathBuf {
    workspace_root().join("tests/clients")
}

impl Subscribers {
    pub(super) fn start(node: &Node, specs: &[&Spec]) -> Self {
        let python = clients_dir().join("python3/.venv/bin/python");
        assert!(
            python.exists(),
            "{} missing: run scripts/test",
            python.display()
        );
        assert!(
            clients_dir()
                .join("node/node_modules/nacos-naming")
                .exists(),
            "nacos-naming not installed: run scripts/test"
        );
        let log = Arc::new(Mutex::new(FeedLog::default()));
        let mut children = Vec::new();
        for path in [Path::Py3Push, Path::NpmPush] {
            let mut cmd = match path {
                Path::Py3Push => {
                    let mut c = Command::new(&python);
                    c.arg(clients_dir().join("python3/observer.py"));
                    c
                }
                _ => {
                    let mut c = Command::new("node");
                    c.arg(clients_dir().join("node/observer.js"));
                    c
                }
            };
            cmd.args(["--server", &node.addr()])
                .args(["--username", "nacos", "--password", ADMIN_PASSWORD])
                .args(["--seconds", SDK_WATCHDOG_SECS]);
            for s in specs {
                cmd.args(["--watch", &format!("{}/{}", s.ns, s.service)]);
            }
            let mut child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start the {} observer: {e}", path.name()));
            let stdout = child.stdout.take().unwrap();
            let stderr = child.stderr.take().unwrap();
            let l = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    Self::take_line(&l, path, &line);
                }
            });
            let l = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut log = l.lock().unwrap();
                    if log.errors.len() < 200 {
                        log.errors.push(format!("{} stderr: {line}", path.name()));
                    }
                }
            });
            children.push(child);
        }
        let mut me = Self { children, log };
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            if me.log.lock().unwrap().ready.len() == 2 {
                return me;
            }
            if let Some(status) = me
                .children
                .iter_mut()
                .find_map(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "an SDK observer exited ({status}) before it was ready: {:?}",
                    me.log.lock().unwrap().errors
                );
            }
            assert!(
                Instant::now() < deadline,
                "SDK observers not ready in 40 s: {:?}",
                me.log.lock().unwrap().errors
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn take_line(log: &Mutex<FeedLog>, path: Path, line: &str) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            log.lock()
                .unwrap()
                .errors
                .push(format!("{}: {line}", path.name()));
            return;
        };
        let at = v["at_ms"].as_u64().unwrap_or(0);
        let key = || {
            (
                path,
                v["namespace"].as_str().unwrap_or("").to_string(),
                v["service"].as_str().unwrap_or("").to_string(),
            )
        };
        let mut log = log.lock().unwrap();
        match v["kind"].as_str().unwrap_or("") {
            "push" | "subscribed" => {
                let view = hosts_view(&v["hosts"], v["protected"] == true);
                log.views.entry(key()).or_default().push(Seen {
                    start: at,
                    end: at,
                    view,
                });
            }
            "query" if path == Path::Py3Push => log.py3_queries.push(line.to_string()),
            "query" => log.npm_queries += 1,
            "ready" => {
                log.ready.insert(path);
            }
            "error" => log.errors.push(format!("{}: {line}", path.name())),
            _ => {}
        }
    }

    pub(super) fn history(&self, path: Path, spec: &Spec) -> History {
        self.log
            .lock()
            .unwrap()
            .views
            .get(&(path, spec.ns.clone(), spec.service.clone()))
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Subscribers {
    /// Closes each observer's stdin, which ends it, and gives it 3 s to remove its SDK
    /// directory before it is killed.
    fn drop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for child in &mut self.children {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---- the console's event stream ----------------------------------------------------------

/// The console's service page: its event stream, and a refetch of what the page shows
/// after every event about the service (and at the start).
pub(super) struct Console {
    pub(super) history: Arc<Mutex<History>>,
    pub(super) events: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Console {
    pub(super) fn open(node: &Node, spec: &Spec) -> Self {
        let history = Arc::new(Mutex::new(History::new()));
        let events = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let feed = ConsoleFeed {
            addr: node.addr(),
            token: node.token(),
            ns: spec.ns.clone(),
            service: spec.service.clone(),
            history: history.clone(),
            events: events.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::spawn(move || {
            if let Err(e) = feed.follow(&ready_tx) {
                if !feed.stop.load(Ordering::Relaxed) {
                    let t = now_ms();
                    feed.history.lock().unwrap().push(Seen {
                        start: t,
                        end: t,
                        view: View::from([format!("ERROR event stream: {e}")]),
                    });
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the console's event stream opens");
        Self {
            history,
            events,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct ConsoleFeed {
    addr: String,
    token: String,
    ns: String,
    service: String,
    history: Arc<Mutex<History>>,
    events: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl ConsoleFeed {
    /// What the service page shows: `catalog/instances` of cluster DEFAULT, raw health.
    fn refetch(&self, agent: &ureq::Agent) {
        let start = now_ms();
        let url = format!(
            "http://{}/nacos/v1/ns/catalog/instances?serviceName={}&namespaceId={}&clusterName=DEFAULT&pageSize=100",
            self.addr, self.service, self.ns
        );
        let view = match agent
            .get(&url)
            .header("authorization", &format!("Bearer {}", self.token))
            .call()
        {
            Ok(mut r) if r.status() == 200 => {
                let body: Value = r.body_mut().read_json().unwrap_or(Value::Null);
                hosts_view(&body["list"], false)
            }
            // The cluster is gone with its last instance.
            Ok(r) if r.status() == 404 => View::new(),
            Ok(r) => View::from([format!("ERROR catalog {}", r.status())]),
            Err(e) => View::from([format!("ERROR catalog {e}")]),
        };
        self.history.lock().unwrap().push(Seen {
            start,
            end: now_ms(),
            view,
        });
    }

    /// Reads the stream (HTTP/1.1, chunked) until `stop`, refetching on each relevant
    /// event. Reads time out every 200 ms so that `stop` is seen.
    fn follow(&self, ready: &mpsc::Sender<()>) -> Result<(), String> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .build()
            .into();
        let mut stream = TcpStream::connect(&self.addr).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        write!(
            stream,
            "GET /api/v1/events?namespaceId={}&accessToken={} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            self.ns, self.token, self.addr
        )
        .map_err(|e| e.to_string())?;
        let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
        let mut raw: Vec<u8> = Vec::new();
        let mut text = String::new();
        let mut chunked = None;
        let mut buf = [0u8; 8192];
        while !self.stop.load(Ordering::Relaxed) {
            match stream.read(&mut buf) {
                Ok(0) => return Err("the stream closed".into()),
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e.to_string()),
            }
            if chunked.is_none() {
                let Some(end) = find(&raw, b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                if !head.starts_with("http/1.1 200") {
                    return Err(head);
                }
                chunked = Some(head.contains("transfer-encoding: chunked"));
                raw.drain(..end + 4);
                // The page loads what it shows when it opens, with the stream already on.
                self.refetch(&agent);
                let _ = ready.send(());
            }
            if chunked == Some(true) {
                while let Some(eol) = find(&raw, b"\r\n") {
                    let size_text = String::from_utf8_lossy(&raw[..eol]).to_string();
                    let size =
                        usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
                            .map_err(|e| format!("chunk size {size_text:?}: {e}"))?;
                    if size == 0 {
                        return Err("the stream ended".into());
                    }
                    if raw.len() < eol + 2 + size + 2 {
                        break;
                    }
                    text.push_str(&String::from_utf8_lossy(&raw[eol + 2..eol + 2 + size]));
                    raw.drain(..eol + 2 + size + 2);
                }
            } else {
                text.push_str(&String::from_utf8_lossy(&raw));
                raw.clear();
            }
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let mut kind = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        kind = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                let relevant = match kind.as_str() {
                    "service" => serde_json::from_str::<Value>(&data).is_ok_and(|d| {
                        d["serviceName"] == self.service.as_str()
                            && d["groupName"] == "DEFAULT_GROUP"
                    }),
                    "resync" => true,
                    _ => false,
                };
                if relevant {
                    self.events.fetch_add(1, Ordering::Relaxed);
                    self.refetch(&agent);
                }
            }
        }
        Ok(())
    }
}
