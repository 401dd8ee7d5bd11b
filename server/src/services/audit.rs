//! The audit log: who did what, from where, through which face, with what result — every
//! write and admin action the node answers (heartbeats aside), one JSON line each, in
//! `audit.jsonl` in the data dir, read back newest first by `GET /api/v1/audit`.
//!
//! Requests never wait on the disk: a face hands its [`Entry`] to [`Audit::record`],
//! which only tries a send on a bounded queue ([`QUEUE`] entries); when the queue is
//! full the entry is dropped and counted (`roster_audit_dropped_lines_total`). The
//! [`Worker`] takes batches off the queue, serializes them and appends them on a
//! blocking thread; the file rotates at [`MAX_FILE_BYTES`] to `audit.1.jsonl` ..
//! `audit.<KEEP_FILES>.jsonl`, the oldest deleted. Lines are not fsynced: a crash may
//! lose the last ones.
//!
//! Each node keeps the trail of the requests it answered; a forwarded write is in the
//! trail of the node the client called.

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::services::workers::Workers;
use roster_registry::clock::now_ms;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::validate::{DEFAULT_CLUSTER, DEFAULT_GROUP};

/// The current file's name, in the data dir; rotated ones are `audit.<n>.jsonl`.
pub const FILE_NAME: &str = "audit.jsonl";
/// The size at which the current file is rotated.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Rotated files kept: with the current one, at most 5 x 64 MiB on disk.
pub const KEEP_FILES: usize = 4;
/// Entries waiting for the writer at most (~300 bytes each: ~2.5 MiB).
pub const QUEUE: usize = 8_192;
/// Entries written in one go at most.
const BATCH: usize = 512;
/// The longest text field kept, in bytes; longer ones are cut (on a character boundary).
pub const FIELD_MAX: usize = 256;
/// Entries one read returns at most, and by default.
pub const MAX_LIMIT: usize = 1_000;
/// See [`MAX_LIMIT`].
pub const DEFAULT_LIMIT: usize = 100;
/// Lines one read looks at at most (a little more than the five files' worth).
const MAX_SCANNED: usize = 2_000_000;
/// How far out of order lines may be written (requests answered at about the same
/// time queue in any order): a read with `since` stops this far before it.
const ORDER_SLACK_MS: u64 = 60_000;
/// A file is read backwards in blocks of this size.
const READ_BLOCK: usize = 64 * 1024;
/// A "line" longer than this (a damaged file) is skipped rather than buffered.
const MAX_LINE: usize = 1024 * 1024;

/// The protocol face a request came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Face {
    /// Nacos' v1 HTTP API (`/nacos/v1/...` but the console's).
    #[serde(rename = "http-v1")]
    HttpV1,
    /// Nacos' v2 HTTP API (`/nacos/v2/...`).
    #[serde(rename = "http-v2")]
    HttpV2,
    /// The console's routes of the Nacos API: namespaces (`/nacos/v1/console/...`) and
    /// user management (`/nacos/v1/auth/users`); the console uses the rest of the API as
    /// clients do, so those requests count under their face.
    #[serde(rename = "console")]
    Console,
    /// roster's own API (`/api/...`).
    #[serde(rename = "api")]
    Api,
    /// Eureka's server API (`/eureka/...`, `/nacos/eureka/...`).
    #[serde(rename = "eureka")]
    Eureka,
    /// Any other HTTP path (no route serves writes there).
    #[serde(rename = "http")]
    Http,
    /// Nacos' 2.x gRPC protocol.
    #[serde(rename = "grpc")]
    Grpc,
}

impl Face {
    /// The face of an HTTP request for `path`.
    pub fn of_path(path: &str) -> Face {
        if path.starts_with("/nacos/v1/console/") || path.starts_with("/nacos/v1/auth/users") {
            // `/nacos/v1/auth/users/login` is a client's login, not the console's.
            if path != "/nacos/v1/auth/users/login" {
                return Face::Console;
            }
        }
        if path.starts_with("/eureka/") || path.starts_with("/nacos/eureka/") {
            Face::Eureka
        } else if path.starts_with("/nacos/v1/") {
            Face::HttpV1
        } else if path.starts_with("/nacos/v2/") {
            Face::HttpV2
        } else if path.starts_with("/api/") {
            Face::Api
        } else {
            Face::Http
        }
    }
}

/// One line of the trail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When the answer was given, Unix milliseconds.
    pub time: u64,
    /// The authenticated user; for a login, the name tried; `anonymous` when no user
    /// was authenticated (a refused request, or auth off).
    pub user: Cow<'static, str>,
    /// The address the request came from.
    pub address: Option<IpAddr>,
    /// The face it came through.
    pub face: Face,
    /// HTTP: method and route (`POST /nacos/v1/ns/instance`); gRPC: request type and
    /// operation (`InstanceRequest registerInstance`).
    pub action: String,
    /// The namespace it addresses, if any.
    pub namespace_id: Option<String>,
    /// What it addresses in the namespace: `group@@service`, an instance as Nacos names
    /// it (`ip#port#cluster#group@@service`), a configuration item
    /// (`config:<group>/<dataId>`), `user:<name>`, `role:<name>`, `task:<name>`.
    pub resource: Option<String>,
    /// The answer: the HTTP status, or the gRPC answer's code (200 when it succeeded).
    pub status: u16,
}

impl Entry {
    /// The entry of a gRPC write: `kind` and its operation (`op`, the request's
    /// `type`), and what it addresses. Who sent it and the outcome come with
    /// [`Entry::answered`].
    pub fn grpc(kind: &str, op: Option<&str>, addressed: Addressed<'_>) -> Entry {
        let (namespace, resource) = addressed.target();
        Entry {
            time: 0,
            user: Cow::Borrowed("anonymous"),
            address: None,
            face: Face::Grpc,
            action: format!("{kind} {}", given(op).unwrap_or_default()),
            namespace_id: Some(namespace),
            resource: Some(resource),
            status: 0,
        }
    }

    /// The entry of a gRPC configuration write: `kind` on item `data_id` of `group` in
    /// the namespace a client calls `tenant` (fields as sent).
    pub fn grpc_config(
        kind: &str,
        tenant: Option<&str>,
        group: Option<&str>,
        data_id: Option<&str>,
    ) -> Entry {
        let namespace = given(tenant).unwrap_or(PUBLIC_NAMESPACE);
        Entry {
            time: 0,
            user: Cow::Borrowed("anonymous"),
            address: None,
            face: Face::Grpc,
            action: kind.to_string(),
            namespace_id: Some(namespace.to_string()),
            resource: Some(config_resource(group, data_id)),
            status: 0,
        }
    }

    /// This entry, answered now with `status` to `user` at `address`.
    pub fn answered(self, user: Cow<'static, str>, address: IpAddr, status: u16) -> Entry {
        Entry {
            time: now_ms(),
            user,
            address: Some(address),
            status,
            ..self
        }
    }
}

/// What a naming request addresses, from its fields as sent (blank ones count as
/// absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct Addressed<'a> {
    /// The namespace (default `public`).
    pub namespace: Option<&'a str>,
    /// The group (default `DEFAULT_GROUP`; a grouped service name overrides it).
    pub group: Option<&'a str>,
    /// The service name, plain or grouped (`group@@name`).
    pub service: Option<&'a str>,
    /// The instance's IP, port and cluster (default `DEFAULT`), when it names one.
    pub instance: Option<(&'a str, i64, Option<&'a str>)>,
}

impl Addressed<'_> {
    /// The namespace, and the resource: the service as `group@@name`, or the instance
    /// as Nacos names it, `ip#port#cluster#group@@name`. Each part is clipped first, so
    /// what is built stays small whatever was sent.
    pub fn target(&self) -> (String, String) {
        let service = given(self.service).unwrap_or_default();
        let grouped = if service.contains("@@") {
            service.to_string()
        } else {
            let group = given(self.group).unwrap_or(DEFAULT_GROUP);
            format!("{group}@@{service}")
        };
        let instance = self
            .instance
            .and_then(|(ip, port, cluster)| Some((given(Some(ip))?, port, cluster)));
        let resource = match instance {
            Some((ip, port, cluster)) => {
                let cluster = given(cluster).unwrap_or(DEFAULT_CLUSTER);
                format!("{ip}#{port}#{cluster}#{grouped}")
            }
            None => grouped,
        };
        let namespace = given(self.namespace).unwrap_or(PUBLIC_NAMESPACE);
        (namespace.to_string(), clip(&resource).to_string())
    }
}

/// How the trail names a configuration item: `config:<group>/<dataId>` (group default
/// `DEFAULT_GROUP`), from the fields as sent, clipped.
pub fn config_resource(group: Option<&str>, data_id: Option<&str>) -> String {
    let group = given(group).unwrap_or(DEFAULT_GROUP);
    let resource = format!("config:{group}/{}", given(data_id).unwrap_or(""));
    clip(&resource).to_string()
}

/// `field` trimmed and clipped; `None` when absent or blank.
fn given(field: Option<&str>) -> Option<&str> {
    field.map(str::trim).filter(|v| !v.is_empty()).map(clip)
}

/// `text` cut to at most [`FIELD_MAX`] bytes, on a character boundary: entries stay
/// small whatever a request carries.
pub fn clip(text: &str) -> &str {
    if text.len() <= FIELD_MAX {
        return text;
    }
    let mut end = FIELD_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The node's audit trail: where faces record entries and the API reads them. Cheap to
/// clone.
#[derive(Clone)]
pub struct Audit {
    queue: mpsc::Sender<Entry>,
    /// Entries lost: the queue was full, or the file could not be written.
    dropped: Counter,
    files: Arc<Files>,
}

impl Audit {
    /// The trail kept in `dir`, and the worker that writes it (to be run by the
    /// caller). Entries lost are counted in `dropped`.
    pub fn new(dir: &Path, dropped: Counter) -> (Audit, Worker) {
        Self::with_files(
            Files {
                dir: dir.to_path_buf(),
                max_bytes: MAX_FILE_BYTES,
                keep: KEEP_FILES,
            },
            QUEUE,
            dropped,
        )
    }

    fn with_files(files: Files, queue: usize, dropped: Counter) -> (Audit, Worker) {
        let (tx, rx) = mpsc::channel(queue);
        let files = Arc::new(files);
        let worker = Worker {
            queue: rx,
            log: Arc::new(Mutex::new(LogFile::new(files.clone()))),
            dropped: dropped.clone(),
        };
        (
            Audit {
                queue: tx,
                dropped,
                files,
            },
            worker,
        )
    }

    /// Queues `entry` for the file; never waits. A full queue drops it (counted).
    pub fn record(&self, entry: Entry) {
        if self.queue.try_send(entry).is_err() {
            self.dropped.inc();
        }
    }

    /// The entries `query` asks for, newest first, read from the files on a blocking
    /// thread.
    pub async fn read(&self, query: Query) -> io::Result<Page> {
        let files = self.files.clone();
        tokio::task::spawn_blocking(move || files.read(&query))
            .await
            .map_err(io::Error::other)?
    }
}

/// Which entries a read wants.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Only this user's.
    pub user: Option<String>,
    /// Only those addressing this namespace.
    pub namespace_id: Option<String>,
    /// Only those at or after this time, Unix ms.
    pub since: Option<u64>,
    /// Only those at or before this time, Unix ms.
    pub until: Option<u64>,
    /// At most this many (1 to [`MAX_LIMIT`]).
    pub limit: usize,
}

/// A read's answer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Page {
    /// The entries found, newest first, as written.
    pub entries: Vec<Value>,
    /// Whether more entries match than were returned (or the read stopped looking
    /// before the oldest file's start).
    pub truncated: bool,
}

/// The fields a read filters on, taken from a line without building all of it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    time: u64,
    #[serde(borrow)]
    user: Cow<'a, str>,
    #[serde(borrow, default)]
    namespace_id: Option<Cow<'a, str>>,
}

/// The trail's files: `dir/audit.jsonl` and the rotated ones.
struct Files {
    dir: PathBuf,
    max_bytes: u64,
    keep: usize,
}

impl Files {
    /// The current file (0) or the `n`th rotated one.
    fn path(&self, n: usize) -> PathBuf {
        match n {
            0 => self.dir.join(FILE_NAME),
            n => self.dir.join(format!("audit.{n}.jsonl")),
        }
    }

    /// Reads newest first: the current file from its end, then each rotated one.
    fn read(&self, query: &Query) -> io::Result<Page> {
        let limit = query.limit.clamp(1, MAX_LIMIT);
        let mut page = Page::default();
        let mut scanned = 0usize;
        for n in 0..=self.keep {
            let file = match File::open(self.path(n)) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let mut lines = BackwardLines::new(file)?;
            while let Some(line) = lines.next_line()? {
                scanned += 1;
                if scanned > MAX_SCANNED {
                    page.truncated = true;
                    return Ok(page);
                }
                // A line being written, or damaged: skipped.
                let Ok(head) = serde_json::from_slice::<Head>(&line) else {
                    continue;
                };
                if query
                    .since
                    .is_some_and(|since| head.time.saturating_add(ORDER_SLACK_MS) < since)
                {
                    // Everything further back is older still.
                    return Ok(page);
                }
                let wanted = query.since.is_none_or(|since| head.time >= since)
                    && query.until.is_none_or(|until| head.time <= until)
                    && query.user.as_deref().is_none_or(|u| head.user == u)
                    && query
                        .namespace_id
                        .as_deref()
                        .is_none_or(|ns| head.namespace_id.as_deref() == Some(ns));
                if !wanted {
                    continue;
                }
                if page.entries.len() == limit {
                    page.truncated = true;
                    return Ok(page);
                }
                if let Ok(entry) = serde_json::from_slice(&line) {
                    page.entries.push(entry);
                }
            }
        }
        Ok(page)
    }
}

/// A file's lines from the last to the first, read in blocks from the end.
struct BackwardLines {
    file: File,
    /// Where the part not yet read starts.
    unread: u64,
    /// Read but not yet returned: the start of a line, and whole lines before it.
    pending: Vec<u8>,
}

impl BackwardLines {
    fn new(mut file: File) -> io::Result<Self> {
        let unread = file.seek(SeekFrom::End(0))?;
        Ok(Self {
            file,
            unread,
            pending: Vec::new(),
        })
    }

    /// The line before those returned so far, without its newline; empty lines are
    /// skipped.
    fn next_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(at) = self.pending.iter().rposition(|b| *b == b'\n') {
                let line = self.pending.split_off(at + 1);
                self.pending.truncate(at);
                if !line.is_empty() {
                    return Ok(Some(line));
                }
                continue;
            }
            if self.unread == 0 {
                let first = std::mem::take(&mut self.pending);
                return Ok((!first.is_empty()).then_some(first));
            }
            if self.pending.len() > MAX_LINE {
                // No newline in a megabyte: not a line of ours. Drop it, read on.
                self.pending.clear();
            }
            let size = (self.unread as usize).min(READ_BLOCK);
            self.unread -= size as u64;
            let mut block = vec![0; size];
            self.file.seek(SeekFrom::Start(self.unread))?;
            self.file.read_exact(&mut block)?;
            block.extend_from_slice(&self.pending);
            self.pending = block;
        }
    }
}

/// The file being appended to, and its rotation.
struct LogFile {
    files: Arc<Files>,
    /// Open once the first batch comes.
    current: Option<File>,
    /// Bytes in the current file.
    size: u64,
}

impl LogFile {
    fn new(files: Arc<Files>) -> Self {
        Self {
            files,
            current: None,
            size: 0,
        }
    }

    /// Appends whole lines, rotating first if they would take the file past its
    /// size (unless it is empty: a batch larger than a file still goes in one).
    fn append(&mut self, lines: &[u8]) -> io::Result<()> {
        if self.current.is_none() {
            self.open()?;
        }
        if self.size > 0 && self.size + lines.len() as u64 > self.files.max_bytes {
            self.rotate()?;
        }
        let file = self.current.as_mut().expect("opened above");
        if let Err(e) = file.write_all(lines) {
            // The size is unknown now: learn it again on the next batch.
            self.current = None;
            return Err(e);
        }
        self.size += lines.len() as u64;
        Ok(())
    }

    fn open(&mut self) -> io::Result<()> {
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Who did what from where: for the node's owner only, as the data dir.
            options.mode(0o600);
        }
        let file = options.open(self.files.path(0))?;
        self.size = file.metadata()?.len();
        self.current = Some(file);
        Ok(())
    }

    /// `audit.<n>.jsonl` becomes `audit.<n+1>.jsonl` (the last one is deleted), the
    /// current file `audit.1.jsonl`, and a new current file is started.
    fn rotate(&mut self) -> io::Result<()> {
        self.current = None;
        let files = &self.files;
        if files.keep == 0 {
            remove_if_there(&files.path(0))?;
        } else {
            remove_if_there(&files.path(files.keep))?;
            for n in (0..files.keep).rev() {
                match std::fs::rename(files.path(n), files.path(n + 1)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        self.open()
    }
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The writer: takes entries off the queue and appends them. Run by the wiring; on
/// shutdown it writes what is queued and returns.
pub struct Worker {
    queue: mpsc::Receiver<Entry>,
    /// Used on one blocking thread at a time (the worker awaits each write).
    log: Arc<Mutex<LogFile>>,
    dropped: Counter,
}

impl Worker {
    /// Starts the writer among `workers`.
    pub fn spawn_workers(self, workers: &mut Workers) {
        workers.spawn(self.run(workers.stopping()));
    }

    /// Writes batches until `stopping` turns true, then what is left.
    pub async fn run(mut self, mut stopping: watch::Receiver<bool>) {
        let mut batch = Vec::with_capacity(BATCH);
        // Write failures are logged once a minute at most; each batch lost is counted.
        let mut last_warning: Option<Instant> = None;
        loop {
            let stop = tokio::select! {
                n = self.queue.recv_many(&mut batch, BATCH) => n == 0,
                _ = stopping.changed() => true,
            };
            if stop {
                while let Ok(entry) = self.queue.try_recv() {
                    batch.push(entry);
                }
            }
            if !batch.is_empty() {
                let count = batch.len() as u64;
                if let Err(e) = self.write(std::mem::take(&mut batch)).await {
                    self.dropped.inc_by(count);
                    if last_warning.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                        last_warning = Some(Instant::now());
                        tracing::warn!(error = %e, lost = count, "cannot write the audit log");
                    }
                }
            }
            if stop {
                return;
            }
        }
    }

    async fn write(&self, batch: Vec<Entry>) -> io::Result<()> {
        let mut lines = Vec::with_capacity(batch.len() * 256);
        for entry in &batch {
            serde_json::to_writer(&mut lines, entry).map_err(io::Error::other)?;
            lines.push(b'\n');
        }
        let log = self.log.clone();
        tokio::task::spawn_blocking(move || log.lock().append(&lines))
            .await
            .map_err(io::Error::other)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: u64, user: &'static str, namespace: Option<&str>) -> Entry {
        Entry {
            time,
            user: Cow::Borrowed(user),
            address: Some("127.0.0.1".parse().unwrap()),
            face: Face::HttpV1,
            action: "POST /nacos/v1/ns/instance".into(),
            namespace_id: namespace.map(str::to_string),
            resource: Some("127.0.0.1#80#DEFAULT#DEFAULT_GROUP@@orders".into()),
            status: 200,
        }
    }

    fn files(dir: &Path, max_bytes: u64, keep: usize) -> Arc<Files> {
        Arc::new(Files {
            dir: dir.to_path_buf(),
            max_bytes,
            keep,
        })
    }

    fn line(time: u64) -> Vec<u8> {
        let mut l = serde_json::to_vec(&entry(time, "nacos", Some("public"))).unwrap();
        l.push(b'\n');
        l
    }

    fn times(page: &Page) -> Vec<u64> {
        page.entries
            .iter()
            .map(|e| e["time"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn an_entry_is_one_json_line_in_the_documented_shape() {
        let json = serde_json::to_value(entry(7, "nacos", None)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"time":7,"user":"nacos","address":"127.0.0.1","face":"http-v1",
                "action":"POST /nacos/v1/ns/instance","namespaceId":null,
                "resource":"127.0.0.1#80#DEFAULT#DEFAULT_GROUP@@orders","status":200})
        );
        assert_eq!(Face::of_path("/nacos/v1/console/namespaces"), Face::Console);
        assert_eq!(Face::of_path("/nacos/v1/auth/users"), Face::Console);
        assert_eq!(Face::of_path("/nacos/v1/auth/users/login"), Face::HttpV1);
        assert_eq!(Face::of_path("/nacos/v1/auth/login"), Face::HttpV1);
        assert_eq!(Face::of_path("/nacos/v2/ns/instance"), Face::HttpV2);
        assert_eq!(Face::of_path("/api/v1/sync/tasks"), Face::Api);
        assert_eq!(Face::of_path("/elsewhere"), Face::Http);
        let grpc = Entry::grpc(
            "InstanceRequest",
            Some("registerInstance"),
            Addressed {
                service: Some("g@@orders"),
                instance: Some(("127.0.0.1", 80, Some(" "))),
                ..Default::default()
            },
        )
        .answered(Cow::Borrowed("nacos"), "127.0.0.2".parse().unwrap(), 403);
        assert_eq!(grpc.action, "InstanceRequest registerInstance");
        assert_eq!(grpc.namespace_id.as_deref(), Some("public"));
        assert_eq!(
            grpc.resource.as_deref(),
            Some("127.0.0.1#80#DEFAULT#g@@orders")
        );
        assert_eq!((grpc.face, grpc.status), (Face::Grpc, 403));
        assert!(grpc.time > 0);
        let long = "é".repeat(200);
        assert_eq!(clip(&long).len(), FIELD_MAX);
        assert_eq!(clip("short"), "short");
    }

    #[test]
    fn the_file_rotates_by_size_and_keeps_so_many() {
        let dir = tempfile::tempdir().unwrap();
        let one = line(1_000).len() as u64;
        // Three lines to a file, two rotated files kept.
        let files = files(dir.path(), one * 3, 2);
        let mut log = LogFile::new(files.clone());
        for t in 0..10u64 {
            log.append(&line(1_000 + t)).unwrap();
        }
        let lines_of = |n: usize| -> Vec<u64> {
            std::fs::read_to_string(files.path(n))
                .unwrap()
                .lines()
                .map(|l| {
                    serde_json::from_str::<Value>(l).unwrap()["time"]
                        .as_u64()
                        .unwrap()
                })
                .collect()
        };
        assert_eq!(lines_of(0), [1_009]);
        assert_eq!(lines_of(1), [1_006, 1_007, 1_008]);
        assert_eq!(lines_of(2), [1_003, 1_004, 1_005]);
        assert!(!files.path(3).exists(), "the oldest went");
        for n in 0..=2 {
            assert!(std::fs::metadata(files.path(n)).unwrap().len() <= one * 3);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(files.path(0))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A new writer (a restart) appends to the current file and counts its size.
        let mut log = LogFile::new(files.clone());
        log.append(&line(1_010)).unwrap();
        log.append(&line(1_011)).unwrap();
        assert_eq!(lines_of(0), [1_009, 1_010, 1_011]);
        log.append(&line(1_012)).unwrap();
        assert_eq!(lines_of(0), [1_012]);
        assert_eq!(lines_of(2), [1_006, 1_007, 1_008]);
        // Read back across the files, newest first.
        let page = files.read(&Query {
            limit: 100,
            ..Default::default()
        });
        let page = page.unwrap();
        assert_eq!(times(&page), (1_006..=1_012).rev().collect::<Vec<_>>());
        assert!(!page.truncated);
    }

    #[test]
    fn reads_filter_limit_and_skip_broken_lines() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path(), u64::MAX, 1);
        let mut log = LogFile::new(files.clone());
        let mut lines = Vec::new();
        for t in 0..3_000u64 {
            let (user, ns) = if t % 3 == 0 {
                ("alice", Some("dev"))
            } else {
                ("nacos", None)
            };
            serde_json::to_writer(&mut lines, &entry(100_000 + t, user, ns)).unwrap();
            lines.push(b'\n');
        }
        log.append(&lines).unwrap();
        // A line cut short by a crash, then one more.
        log.append(b"{\"time\":1,\"us").unwrap();
        log.append(b"\n").unwrap();
        log.append(&line(103_000)).unwrap();
        let read = |q: Query| files.read(&q).unwrap();
        let all = read(Query {
            limit: 5,
            ..Default::default()
        });
        assert_eq!(times(&all), [103_000, 102_999, 102_998, 102_997, 102_996]);
        assert!(all.truncated);
        // Alice has 1,000 entries: all of them fit, 999 leave one out.
        let alice = |limit| {
            read(Query {
                user: Some("alice".into()),
                limit,
                ..Default::default()
            })
        };
        let (every, but_one) = (alice(1_000), alice(999));
        assert_eq!((every.entries.len(), every.truncated), (1_000, false));
        assert_eq!((but_one.entries.len(), but_one.truncated), (999, true));
        assert_eq!(every.entries[0]["time"], 102_997);
        assert_eq!(every.entries[999]["time"], 100_000);
        let window = read(Query {
            namespace_id: Some("dev".into()),
            since: Some(100_010),
            until: Some(100_020),
            limit: 100,
            ..Default::default()
        });
        assert_eq!(times(&window), [100_018, 100_015, 100_012]);
        assert!(!window.truncated);
        assert!(read(Query {
            user: Some("nobody".into()),
            limit: 10,
            ..Default::default()
        })
        .entries
        .is_empty());
    }

    #[tokio::test]
    async fn the_worker_writes_what_is_queued_and_counts_what_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let dropped = Counter::default();
        let (audit, worker) = Audit::with_files(
            Files {
                dir: dir.path().to_path_buf(),
                max_bytes: MAX_FILE_BYTES,
                keep: 1,
            },
            4,
            dropped.clone(),
        );
        // The worker is not running yet: four fit, the rest are dropped and counted.
        for t in 0..6 {
            audit.record(entry(t, "nacos", None));
        }
        assert_eq!(dropped.get(), 2);
        let (stop, stopping) = watch::channel(false);
        let running = tokio::spawn(worker.run(stopping));
        let page = {
            let mut page = Page::default();
            for _ in 0..200 {
                page = audit
                    .read(Query {
                        limit: 10,
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if page.entries.len() == 4 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            page
        };
        assert_eq!(times(&page), [3, 2, 1, 0]);
        // What is queued at shutdown is written before the worker returns.
        audit.record(entry(10, "nacos", None));
        stop.send_replace(true);
        running.await.unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(text.lines().count(), 5);
    }
}
