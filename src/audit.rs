//! kube-apiserver's audit log: a policy (`audit.k8s.io/v1` Policy) gives each request a level, and
//! events (`audit.k8s.io/v1` Event, one JSON line per stage) go to a file or stdout through a buffer
//! bounded in bytes, so a slow disk never holds a request up: what does not fit is dropped and counted.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;

/// Bytes of events waiting to be written before new ones are dropped.
const QUEUE_BYTES: usize = 64 << 20;
/// The most of a request or response body an event carries; a larger one is left out of the event.
pub const MAX_OBJECT_BYTES: usize = 1 << 20;
/// The time in a rotated log's name, as lumberjack writes it.
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// Why the audit configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file cannot be read.
    #[error("audit policy {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy is not an `audit.k8s.io/v1` Policy kgate understands.
    #[error("audit policy: {0}")]
    Policy(String),
    /// The log cannot be opened.
    #[error("audit log {path}: {source}")]
    Log {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// How much of a request is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when and the answer's code.
    Metadata,
    /// And the request's object.
    Request,
    /// And the response's object.
    RequestResponse,
}

impl Level {
    fn parse(s: &str) -> Result<Level, AuditError> {
        Ok(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            other => return Err(AuditError::Policy(format!("unknown level {other:?}"))),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Once it is authenticated, before anything else is done.
    RequestReceived,
    /// When a long-running answer (a watch) has sent its headers.
    ResponseStarted,
    /// Once the whole answer is sent.
    ResponseComplete,
    /// The handler panicked (kgate's do not answer from a panic; the stage may be named).
    Panic,
}

impl Stage {
    fn parse(s: &str) -> Result<Stage, AuditError> {
        Ok(match s {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            other => return Err(AuditError::Policy(format!("unknown stage {other:?}"))),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyDoc {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    rules: Vec<RuleDoc>,
    #[serde(default)]
    omit_stages: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleDoc {
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Vec<Stage>,
}

/// The resource a request is about.
#[derive(Debug, Clone, Default)]
pub struct ObjectRef {
    /// API group, `""` for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource, `""` for none.
    pub subresource: String,
    /// Namespace, `""` for none.
    pub namespace: String,
    /// Name, `""` for a collection.
    pub name: String,
}

/// What a policy decides on.
pub struct Attributes<'a> {
    /// The authenticated user.
    pub user: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// The request's verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'a str,
    /// The resource, for a resource request.
    pub object: Option<&'a ObjectRef>,
    /// The URL path, for a non-resource request.
    pub path: &'a str,
}

/// An `audit.k8s.io/v1` Policy.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<Stage>,
}

/// What the policy says of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Its level.
    pub level: Level,
    /// The stages not to write.
    pub omit: Vec<Stage>,
}

fn stages(names: &[String]) -> Result<Vec<Stage>, AuditError> {
    names.iter().map(|s| Stage::parse(s)).collect()
}

impl Policy {
    /// Reads a policy file (YAML or JSON).
    pub fn load(path: &Path) -> Result<Policy, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read { path: path.into(), source })?;
        Policy::parse(&text)
    }

    /// Parses a policy (YAML or JSON).
    pub fn parse(text: &str) -> Result<Policy, AuditError> {
        let doc: PolicyDoc = serde_yaml_ng::from_str(text).map_err(|e| AuditError::Policy(e.to_string()))?;
        if doc.kind != "Policy" || !doc.api_version.starts_with("audit.k8s.io/") {
            return Err(AuditError::Policy(format!(
                "expected kind Policy of audit.k8s.io, got {:?} of {:?}",
                doc.kind, doc.api_version
            )));
        }
        let rules = doc
            .rules
            .into_iter()
            .map(|r| {
                Ok(Rule {
                    level: Level::parse(&r.level)?,
                    users: r.users,
                    user_groups: r.user_groups,
                    verbs: r.verbs,
                    resources: r.resources,
                    namespaces: r.namespaces,
                    non_resource_urls: r.non_resource_urls,
                    omit_stages: stages(&r.omit_stages)?,
                })
            })
            .collect::<Result<_, AuditError>>()?;
        Ok(Policy { rules, omit_stages: stages(&doc.omit_stages)? })
    }

    /// The first rule that matches decides, as kube's policy checker does; no rule means `None`.
    pub fn decide(&self, a: &Attributes) -> Decision {
        for r in &self.rules {
            if matches(r, a) {
                let mut omit = self.omit_stages.clone();
                omit.extend(r.omit_stages.iter().copied());
                return Decision { level: r.level, omit };
            }
        }
        Decision { level: Level::None, omit: Vec::new() }
    }
}

fn matches(r: &Rule, a: &Attributes) -> bool {
    let has = |list: &[String], s: &str| list.iter().any(|x| x == s);
    if !r.users.is_empty() && !has(&r.users, a.user) {
        return false;
    }
    if !r.user_groups.is_empty() && !a.groups.iter().any(|g| has(&r.user_groups, g)) {
        return false;
    }
    if !r.verbs.is_empty() && !has(&r.verbs, a.verb) {
        return false;
    }
    // As kube's checker: resources or namespaces make a rule about resource requests only, and
    // non-resource URLs one about the other requests only.
    if !r.namespaces.is_empty() || !r.resources.is_empty() {
        return a.object.is_some_and(|o| matches_resource(r, o));
    }
    if !r.non_resource_urls.is_empty() {
        return a.object.is_none() && r.non_resource_urls.iter().any(|spec| path_matches(a.path, spec));
    }
    true
}

fn matches_resource(r: &Rule, o: &ObjectRef) -> bool {
    if !r.namespaces.is_empty() && !r.namespaces.contains(&o.namespace) {
        return false;
    }
    if r.resources.is_empty() {
        return true;
    }
    let combined =
        if o.subresource.is_empty() { o.resource.clone() } else { format!("{}/{}", o.resource, o.subresource) };
    r.resources.iter().filter(|gr| gr.group == o.group).any(|gr| {
        if gr.resources.is_empty() {
            return true;
        }
        let named = gr.resource_names.is_empty() || gr.resource_names.contains(&o.name);
        named
            && gr.resources.iter().any(|res| {
                res == "*"
                    || *res == combined
                    || (!o.subresource.is_empty() && res.strip_prefix("*/") == Some(o.subresource.as_str()))
                    || res.strip_suffix("/*") == Some(o.resource.as_str())
            })
    })
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*" || spec == path || spec.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

/// Where events go and how the file is rotated (kube's `--audit-log-*` flags).
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// The file, or `-` for stdout.
    pub path: String,
    /// Rotate once the file would pass this many MiB; 0: never.
    pub max_size_mb: u64,
    /// Rotated files to keep; 0: all.
    pub max_backup: usize,
    /// Days to keep rotated files; 0: forever.
    pub max_age_days: u64,
}

/// Counters of the audit log, for `/metrics`.
#[derive(Clone)]
pub struct AuditMetrics {
    /// Events written or queued to be.
    pub events: prometheus::IntCounter,
    /// Events dropped because the buffer was full (the disk is slower than the requests).
    pub dropped: prometheus::IntCounter,
}

/// The audit log of a server: its policy and the buffer its events go through.
pub struct Auditor {
    policy: Policy,
    queue: Arc<Queue>,
    metrics: AuditMetrics,
    /// The writer thread, joined when the auditor goes so that the last events reach the log.
    writer: Option<std::thread::JoinHandle<()>>,
}

/// Events waiting for the writer thread: lines joined in one buffer of at most `QUEUE_BYTES`. A
/// `Mutex` around the buffer, held to append one line or to take them all, with a `Condvar` the
/// writer waits on: it wakes every `WRITE_EVERY`, or when a batch is large, never per event (a
/// channel woke it for each, and those wake-ups cost a third of a GET's throughput).
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct QueueState {
    lines: Vec<u8>,
    /// Bytes of `lines` each logical cluster's requests queued, so that one tenant whose requests make
    /// large events (bodies of a megabyte, refused or not) fills its share and not every tenant's: its
    /// own events are dropped past it. Emptied with `lines`, so it holds the clusters of one batch.
    by_cluster: std::collections::HashMap<Box<str>, usize>,
    /// The server is done with the log: write what is left and end.
    closed: bool,
}

/// What one logical cluster's events may take of the queue.
const CLUSTER_QUEUE_BYTES: usize = QUEUE_BYTES / 8;

impl QueueState {
    /// Appends `line` of `cluster`'s request, unless the queue or the cluster's share of it is full.
    fn push(&mut self, cluster: &str, line: &[u8]) -> bool {
        let held = self.by_cluster.get(cluster).copied().unwrap_or(0);
        if self.lines.len() + line.len() > QUEUE_BYTES || held + line.len() > CLUSTER_QUEUE_BYTES {
            return false;
        }
        self.lines.extend_from_slice(line);
        *self.by_cluster.entry(cluster.into()).or_default() += line.len();
        true
    }

    /// Everything queued, for the writer.
    fn take(&mut self) -> Vec<u8> {
        self.by_cluster.clear();
        std::mem::take(&mut self.lines)
    }
}

/// How long an event may wait in the queue before it is written.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Bytes in the queue that wake the writer before `WRITE_EVERY`.
const WAKE_AT: usize = 256 * 1024;

impl Auditor {
    /// Opens the log and starts the thread that writes it.
    pub fn start(policy: Policy, options: LogOptions, metrics: AuditMetrics) -> Result<Auditor, AuditError> {
        let mut out = Output::open(options)?;
        let queue = Arc::new(Queue::default());
        let shared = queue.clone();
        let dropped = metrics.dropped.clone();
        let writer = std::thread::Builder::new()
            .name("kgate-audit".into())
            .spawn(move || loop {
                let (batch, closed) = {
                    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                    if st.lines.is_empty() && !st.closed {
                        st = shared.wake.wait_timeout(st, WRITE_EVERY).unwrap_or_else(|e| e.into_inner()).0;
                    }
                    (st.take(), st.closed)
                };
                // Written outside the lock: a slow disk holds up only this thread, and requests append
                // meanwhile until the queue is full (then their events are dropped and counted).
                if !batch.is_empty() {
                    // A line that could not be written is lost alone, and counted.
                    let failed = out.write(&batch);
                    dropped.inc_by(failed);
                    if let Err(e) = out.flush() {
                        tracing::warn!(error = %e, "writing the audit log");
                    }
                }
                if closed {
                    return;
                }
            })
            .map_err(|source| AuditError::Log { path: "audit thread".into(), source })?;
        Ok(Auditor { policy, queue, metrics, writer: Some(writer) })
    }

    /// What the policy says of a request.
    pub fn decide(&self, a: &Attributes) -> Decision {
        self.policy.decide(a)
    }

    /// Queues one event's line of `cluster`'s request; drops it (and counts it) when the queue, or the
    /// cluster's share of it, is full.
    fn emit(&self, cluster: &str, line: Vec<u8>) {
        let mut st = self.queue.state.lock().unwrap_or_else(|e| e.into_inner());
        if !st.push(cluster, &line) {
            drop(st);
            self.metrics.dropped.inc();
            return;
        }
        let wake = st.lines.len() >= WAKE_AT && st.lines.len() - line.len() < WAKE_AT;
        drop(st);
        if wake {
            self.queue.wake.notify_one();
        }
        self.metrics.events.inc();
    }
}

impl Drop for Auditor {
    fn drop(&mut self) {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.queue.wake.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The log file (or stdout), rotated by size as kube's lumberjack writer does.
struct Output {
    options: LogOptions,
    file: Option<std::io::BufWriter<std::fs::File>>,
    size: u64,
}

/// Bytes of events the writer gathers before a write to the file.
const WRITE_BUFFER: usize = 256 * 1024;

impl Output {
    fn open(options: LogOptions) -> Result<Output, AuditError> {
        let mut out = Output { options, file: None, size: 0 };
        if out.options.path != "-" {
            out.reopen()?;
        }
        Ok(out)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(&self.options.path)
    }

    fn reopen(&mut self) -> Result<(), AuditError> {
        let path = self.path();
        let log = |source| AuditError::Log { path: path.clone(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(log)?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(log)?;
        self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
        self.file = Some(std::io::BufWriter::with_capacity(WRITE_BUFFER, file));
        Ok(())
    }

    /// Write out what the buffer holds.
    fn flush(&mut self) -> std::io::Result<()> {
        match (self.options.path == "-", self.file.as_mut()) {
            (true, _) => std::io::stdout().lock().flush(),
            (false, Some(f)) => f.flush(),
            (false, None) => Ok(()),
        }
    }

    /// Write a batch of lines, rotating between two of them when the file is full; how many lines
    /// could not be written.
    fn write(&mut self, batch: &[u8]) -> u64 {
        let lines = batch.split_inclusive(|b| *b == b'\n');
        if self.options.path == "-" {
            return match std::io::stdout().lock().write_all(batch) {
                Ok(()) => 0,
                Err(e) => {
                    tracing::warn!(error = %e, "writing the audit log");
                    lines.count() as u64
                }
            };
        }
        let mut failed = 0;
        for line in lines {
            if let Err(e) = self.write_line(line) {
                if failed == 0 {
                    tracing::warn!(error = %e, "writing the audit log");
                }
                failed += 1;
            }
        }
        failed
    }

    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        // A log that could not be reopened after a rotation is tried again; events never go elsewhere.
        if self.file.is_none() {
            self.reopen().map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let max = self.options.max_size_mb << 20;
        if max > 0 && self.size > 0 && self.size + line.len() as u64 > max {
            self.rotate()?;
        }
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("audit log is not open"))?;
        file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    /// Renames the file to `<name>-<time>.<ext>` and starts a new one; then drops the backups beyond
    /// `max_backup` and older than `max_age_days`.
    fn rotate(&mut self) -> std::io::Result<()> {
        let path = self.path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit").to_string();
        let ext = path.extension().and_then(|s| s.to_str()).map(|e| format!(".{e}")).unwrap_or_default();
        let stamp = chrono::Utc::now().format(BACKUP_TIME);
        let backup = path.with_file_name(format!("{stem}-{stamp}{ext}"));
        if let Some(f) = self.file.as_mut() {
            f.flush()?;
        }
        // A failed rename leaves the open file as it is, to be written on.
        std::fs::rename(&path, &backup)?;
        self.file = None;
        self.reopen().map_err(|e| std::io::Error::other(e.to_string()))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let prefix = format!("{stem}-");
        let mut backups: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|e| {
                // Only this log's own backups: `<stem>-<time><ext>` with a time that parses.
                let name = e.file_name().to_string_lossy().into_owned();
                let stamp = name.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix(ext.as_str()));
                stamp.is_some_and(|t| chrono::NaiveDateTime::parse_from_str(t, BACKUP_TIME).is_ok())
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let max_age = std::time::Duration::from_secs(self.options.max_age_days * 86_400);
        let now = std::time::SystemTime::now();
        for (i, (modified, file)) in backups.iter().enumerate() {
            let too_many = self.options.max_backup > 0 && i >= self.options.max_backup;
            let too_old = self.options.max_age_days > 0 && now.duration_since(*modified).unwrap_or_default() > max_age;
            if too_many || too_old {
                let _ = std::fs::remove_file(file);
            }
        }
        Ok(())
    }
}

/// One audited request: what is known of it when it is received, and what its answer adds. It
/// writes `ResponseComplete` when dropped, which its response body does once sent.
pub struct Record {
    auditor: Arc<Auditor>,
    /// The logical cluster the request is in, whose share of the queue its events take.
    cluster: Box<str>,
    decision: Decision,
    /// The event's fields so far as JSON, without the closing brace: what each stage's event begins
    /// with, serialised once rather than built for every stage. Impersonation adds to them after
    /// `RequestReceived`.
    event: Mutex<Vec<u8>>,
    /// What the request is about, completed from its object and its answer's (name, namespace, uid,
    /// resourceVersion) as kube's audit completes it: a create names its object only in its body.
    object_ref: Mutex<Option<Completed>>,
    /// The request's object, kept at level Request and above.
    request_object: Mutex<Option<Value>>,
    /// The answer's code and, at level RequestResponse, its body as sent (up to `MAX_OBJECT_BYTES`).
    response: Mutex<(u16, Option<Vec<u8>>)>,
    /// What the kept body costs, charged to the tenant's bytes in flight like the answer itself.
    charge: Mutex<Option<crate::budget::Charge>>,
}

/// What a record is made from.
pub struct Received<'a> {
    /// The authenticated user and groups.
    pub user: (&'a str, &'a [String]),
    /// The verb.
    pub verb: &'a str,
    /// The URI as received, with the logical cluster's path prefix.
    pub uri: &'a str,
    /// The resource, for a resource request.
    pub object: Option<&'a ObjectRef>,
    /// The logical cluster.
    pub cluster: &'a str,
    /// The client's address.
    pub source_ip: Option<String>,
    /// Its User-Agent.
    pub user_agent: Option<&'a str>,
}

fn now() -> String {
    // kube's MicroTime; not `format`, which parses its pattern on every call.
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The fields an event starts with, in the order of kube's `audit.k8s.io/v1` Event (its stage and
/// what its answer adds come after).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Opening<'a> {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: &'a str,
    #[serde(rename = "requestURI")]
    request_uri: &'a str,
    verb: &'a str,
    user: UserInfo<'a>,
    #[serde(rename = "sourceIPs")]
    source_ips: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    user_agent: Option<&'a str>,
    request_received_timestamp: String,
    annotations: Annotations<'a>,
}

#[derive(serde::Serialize)]
struct UserInfo<'a> {
    username: &'a str,
    groups: &'a [String],
}

/// An event's `objectRef`, in the order of kube's `ObjectReference`: empty parts are left out.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Completed {
    resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    api_group: String,
    api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    subresource: String,
}

impl Completed {
    /// Fill what is still empty from an object's metadata.
    fn complete(&mut self, obj: &Value) {
        let Some(meta) = obj.get("metadata") else { return };
        for (field, key) in [
            (&mut self.namespace, "namespace"),
            (&mut self.name, "name"),
            (&mut self.uid, "uid"),
            (&mut self.resource_version, "resourceVersion"),
        ] {
            if field.is_empty() {
                if let Some(v) = meta.get(key).and_then(Value::as_str) {
                    *field = v.to_string();
                }
            }
        }
    }
}

#[derive(serde::Serialize)]
struct Annotations<'a> {
    #[serde(rename = "kgate.dev/cluster")]
    cluster: &'a str,
}

impl Record {
    /// A record of a request, and its `RequestReceived` event; `None` at level None.
    pub fn begin(auditor: &Arc<Auditor>, r: Received<'_>) -> Option<Arc<Record>> {
        let path = r.uri.split('?').next().unwrap_or_default();
        let decision =
            auditor.decide(&Attributes { user: r.user.0, groups: r.user.1, verb: r.verb, object: r.object, path });
        if decision.level == Level::None {
            return None;
        }
        let mut id = [0; uuid::fmt::Hyphenated::LENGTH];
        let object_ref = r.object.map(|o| Completed {
            resource: o.resource.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            api_group: o.group.clone(),
            api_version: o.version.clone(),
            subresource: o.subresource.clone(),
            ..Default::default()
        });
        let opening = Opening {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: decision.level.name(),
            audit_id: uuid::Uuid::new_v4().hyphenated().encode_lower(&mut id),
            request_uri: r.uri,
            verb: r.verb,
            user: UserInfo { username: r.user.0, groups: r.user.1 },
            source_ips: r.source_ip.as_slice(),
            user_agent: r.user_agent,
            request_received_timestamp: now(),
            annotations: Annotations { cluster: r.cluster },
        };
        let mut opening = serde_json::to_vec(&opening).expect("JSON serialises");
        opening.pop(); // the closing brace: each stage adds its fields
        let record = Arc::new(Record {
            auditor: auditor.clone(),
            cluster: r.cluster.into(),
            decision,
            event: Mutex::new(opening),
            object_ref: Mutex::new(object_ref),
            request_object: Mutex::new(None),
            response: Mutex::new((0, None)),
            charge: Mutex::new(None),
        });
        record.write(Stage::RequestReceived);
        Some(record)
    }

    /// Whom the request acts as, once its impersonation is allowed; later stages name it.
    pub fn impersonating(&self, user: &str, groups: &[String]) {
        let mut event = self.event.lock().expect("not poisoned");
        event.extend_from_slice(b",\"impersonatedUser\":");
        event.extend(serde_json::to_vec(&UserInfo { username: user, groups }).expect("JSON serialises"));
    }

    /// Keeps the request's body (JSON, or kube's protobuf, as kubectl sends built-ins) as the event's
    /// `requestObject`, at level Request and above.
    /// At every level, its metadata completes the event's `objectRef`.
    pub fn request_body(&self, body: &[u8]) {
        if body.is_empty() || body.len() > MAX_OBJECT_BYTES {
            return;
        }
        let object = match body.starts_with(&crate::proto::MAGIC) {
            true => crate::proto::decode(body).ok(),
            false => serde_json::from_slice::<Value>(body).ok(),
        };
        let Some(object) = object else { return };
        if let Some(r) = self.object_ref.lock().expect("not poisoned").as_mut() {
            r.complete(&object);
        }
        if self.decision.level >= Level::Request {
            *self.request_object.lock().expect("not poisoned") = Some(object);
        }
    }

    /// The object a write stored: what the request did not name of it (a create's uid and
    /// resourceVersion) completes the event's `objectRef`.
    pub fn written(&self, object: &Value) {
        if let Some(r) = self.object_ref.lock().expect("not poisoned").as_mut() {
            r.complete(object);
        }
    }

    /// The answer's code; a long-running answer (a watch) writes `ResponseStarted` now.
    pub fn responded(&self, code: u16, long_running: bool) {
        let mut response = self.response.lock().expect("not poisoned");
        response.0 = code;
        if self.decision.level >= Level::RequestResponse && !long_running {
            response.1 = Some(Vec::new());
        }
        drop(response);
        if long_running {
            self.write(Stage::ResponseStarted);
        }
    }

    /// Keeps a chunk of the answer as it is sent, at level RequestResponse, charged to `account` (the
    /// tenant's bytes in flight); an answer that grows past `MAX_OBJECT_BYTES`, or that the tenant's
    /// budget cannot hold, is left out of the event.
    pub fn sent(&self, chunk: &[u8], account: Option<&Arc<crate::budget::Account>>) {
        let mut response = self.response.lock().expect("not poisoned");
        let Some(buf) = response.1.as_mut() else { return };
        let total = buf.len() + chunk.len();
        let charged = account.map(|a| a.try_charge(total as u64));
        match charged {
            Some(Err(_)) => response.1 = None,
            _ if total > MAX_OBJECT_BYTES => response.1 = None,
            Some(Ok(c)) => {
                buf.extend_from_slice(chunk);
                *self.charge.lock().expect("not poisoned") = Some(c);
            }
            None => buf.extend_from_slice(chunk),
        }
        if response.1.is_none() {
            *self.charge.lock().expect("not poisoned") = None;
        }
    }

    fn write(&self, stage: Stage) {
        if self.decision.omit.contains(&stage) {
            return;
        }
        let mut line = self.event.lock().expect("not poisoned").clone();
        fn field(line: &mut Vec<u8>, name: &str, v: &impl serde::Serialize) {
            line.extend_from_slice(b",\"");
            line.extend_from_slice(name.as_bytes());
            line.extend_from_slice(b"\":");
            serde_json::to_writer(&mut *line, v).expect("JSON serialises");
        }
        if let Some(r) = self.object_ref.lock().expect("not poisoned").as_ref() {
            field(&mut line, "objectRef", r);
        }
        field(&mut line, "stage", &stage.name());
        field(&mut line, "stageTimestamp", &now());
        if stage == Stage::ResponseComplete || stage == Stage::ResponseStarted {
            let response = self.response.lock().expect("not poisoned");
            line.extend_from_slice(
                format!(",\"responseStatus\":{{\"metadata\":{{}},\"code\":{}}}", response.0).as_bytes(),
            );
            if stage == Stage::ResponseComplete {
                if let Some(v) = response.1.as_deref().and_then(|b| serde_json::from_slice::<Value>(b).ok()) {
                    field(&mut line, "responseObject", &v);
                }
            }
        }
        if let Some(v) = self.request_object.lock().expect("not poisoned").as_ref() {
            field(&mut line, "requestObject", v);
        }
        line.extend_from_slice(b"}\n");
        self.auditor.emit(&self.cluster, line);
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        self.write(Stage::ResponseComplete);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One tenant's large events fill its share of the queue, not every tenant's: another's still go.
    #[test]
    fn a_cluster_fills_its_share_of_the_queue_and_no_more() {
        let mut q = QueueState::default();
        let line = vec![b'x'; 1 << 20];
        let taken = (0..64).take_while(|_| q.push("greedy", &line)).count();
        assert_eq!(taken, CLUSTER_QUEUE_BYTES / line.len());
        assert!(q.push("polite", b"{}\n"), "another cluster's event goes");
        assert_eq!(q.take().len(), CLUSTER_QUEUE_BYTES + 3);
        assert!(q.push("greedy", &line), "written out, the share is free again");
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources: [{group: "", resources: ["secrets"]}]
  namespaces: ["prod"]
- level: Request
  verbs: ["create", "update", "patch"]
  resources: [{group: "apps", resources: ["deployments/*", "*/status"]}]
- level: Metadata
  userGroups: ["system:authenticated"]
  omitStages: [ResponseStarted]
"#;

    fn obj(group: &str, resource: &str, sub: &str, ns: &str) -> ObjectRef {
        ObjectRef {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: "x".into(),
        }
    }

    #[test]
    fn the_first_matching_rule_decides_as_kubes_checker() {
        let p = Policy::parse(POLICY).unwrap();
        let groups = vec!["system:authenticated".to_string()];
        let decide = |user: &str, verb: &str, o: Option<&ObjectRef>, path: &str| {
            p.decide(&Attributes { user, groups: &groups, verb, object: o, path }).level
        };
        assert_eq!(decide("system:kube-proxy", "get", None, "/api"), Level::None);
        assert_eq!(decide("alice", "get", None, "/healthz/ready"), Level::None);
        assert_eq!(decide("alice", "get", None, "/version"), Level::None);
        assert_eq!(decide("alice", "get", None, "/api"), Level::Metadata);
        assert_eq!(decide("alice", "get", Some(&obj("", "secrets", "", "prod")), ""), Level::RequestResponse);
        assert_eq!(decide("alice", "get", Some(&obj("", "secrets", "", "dev")), ""), Level::Metadata);
        assert_eq!(decide("alice", "patch", Some(&obj("apps", "deployments", "scale", "a")), ""), Level::Request);
        assert_eq!(decide("alice", "update", Some(&obj("apps", "statefulsets", "status", "a")), ""), Level::Request);
        assert_eq!(decide("alice", "update", Some(&obj("apps", "statefulsets", "", "a")), ""), Level::Metadata);
        let d = p.decide(&Attributes { user: "alice", groups: &groups, verb: "watch", object: None, path: "/api" });
        assert_eq!(d.omit, vec![Stage::RequestReceived, Stage::ResponseStarted]);
        // Nobody matched: not audited.
        let d = p.decide(&Attributes { user: "bob", groups: &[], verb: "get", object: None, path: "/api" });
        assert_eq!(d.level, Level::None);
    }

    /// The policy the deploy kit installs parses and audits as its comments say.
    #[test]
    fn the_deploy_kits_policy_is_valid() {
        let p =
            Policy::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kustomize/base/audit-policy.yaml")))
                .unwrap();
        let groups = vec!["system:authenticated".to_string()];
        let level = |verb: &str, o: &ObjectRef| {
            p.decide(&Attributes { user: "u", groups: &groups, verb, object: Some(o), path: "" }).level
        };
        assert_eq!(level("create", &obj("", "events", "", "a")), Level::None);
        assert_eq!(level("create", &obj("", "secrets", "", "a")), Level::Metadata);
        assert_eq!(level("create", &obj("rbac.authorization.k8s.io", "rolebindings", "", "a")), Level::RequestResponse);
        assert_eq!(level("patch", &obj("apps", "deployments", "", "a")), Level::Request);
        assert_eq!(level("list", &obj("apps", "deployments", "", "a")), Level::Metadata);
    }

    #[test]
    fn bad_policies_are_refused_with_the_reason() {
        assert!(Policy::parse("apiVersion: v1\nkind: ConfigMap\n").unwrap_err().to_string().contains("Policy"));
        let bad = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n";
        assert!(Policy::parse(bad).unwrap_err().to_string().contains("Loud"));
    }

    #[test]
    fn the_log_rotates_by_size_and_keeps_max_backup_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let options =
            LogOptions { path: path.to_string_lossy().into_owned(), max_size_mb: 1, max_backup: 2, max_age_days: 0 };
        let mut out = Output::open(options).unwrap();
        // Not one of the log's backups: rotation never deletes it.
        std::fs::write(dir.path().join("audit-notes.log"), "mine").unwrap();
        let line = vec![b'x'; 300 << 10];
        for _ in 0..12 {
            assert_eq!(out.write(&line), 0);
            // Distinct backup names: the stamp has milliseconds.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 4, "the log, two backups and the unrelated file: {names:?}");
        assert!(names.contains(&"audit-notes.log".to_string()));
        assert!(std::fs::metadata(&path).unwrap().len() <= 1 << 20);
    }
}
