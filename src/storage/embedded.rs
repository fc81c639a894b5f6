//! The embedded store: redb tables in `--data-dir`, one writer thread that commits batches of writes
//! with an fsync before acknowledging any of them (group commit), and an event log for watches.
//!
//! Tables: `kv` (key -> revision + value), `log` (revision -> event, the retained history that watches
//! and reads at past revisions use) and `meta` (current and compacted revisions).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc};

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use tokio::sync::{oneshot, watch};

use super::keys::prefix_end;
use super::{Guard, KeyValue, RangeRequest, RangeResult, Revision, Store, StoreError, WatchEvent, WatchStream};

const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const META_REV: &str = "revision";
const META_COMPACTED: &str = "compacted";

/// Most writes committed in one transaction; bounds the latency one batch adds.
const MAX_BATCH: usize = 512;
/// The most bytes of values a batch brings (one write larger than it goes alone).
const MAX_BATCH_BYTES: usize = 16 << 20;
/// The most log records, and bytes of them, a read at a past revision walks to find what changed
/// since: the log holds every tenant's writes, so a read far in the past would otherwise walk them
/// all for one small list. Past either, the revision is answered as compacted, and the client lists
/// again from now (as it would after etcd's compaction).
const MAX_OVERLAY_RECORDS: usize = if cfg!(test) { 1_000 } else { 500_000 };
const MAX_OVERLAY_BYTES: usize = 256 << 20;
/// The largest write taken: etcd's default `--max-request-bytes` (1.5 MiB), so that an object either
/// store takes, the other takes too.
const MAX_REQUEST: usize = 1536 * 1024;
/// Log entries read per watch step.
const WATCH_READ_CHUNK: u64 = 1024;

fn internal(e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// Refuse a write over [`MAX_REQUEST`], as etcd refuses one over its limit.
fn within_limit(key: &str, value: &[u8]) -> Result<(), StoreError> {
    let size = key.len() + value.len();
    if size > MAX_REQUEST {
        return Err(StoreError::TooLarge(format!(
            "request is too large: {size} bytes, over the embedded store's limit of {MAX_REQUEST} (etcd's default)"
        )));
    }
    Ok(())
}

enum Op {
    Create {
        key: String,
        value: Vec<u8>,
        guard: Option<Guard>,
    },
    Update {
        key: String,
        value: Vec<u8>,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    /// Every key at its revision, or none: in one redb transaction, each at a revision of its own
    /// (the log holds one event per revision).
    DeleteAll {
        items: Vec<(String, Revision)>,
    },
    Compact {
        revision: Revision,
    },
}

enum Done {
    Written(Revision),
    Deleted(Revision, KeyValue),
    /// Whether `DeleteAll` deleted them.
    DeletedAll(bool),
    Compacted,
}

impl Op {
    /// What the write brings (a value, and a key for each).
    fn bytes(&self) -> usize {
        match self {
            Op::Create { key, value, .. } | Op::Update { key, value, .. } => key.len() + value.len(),
            Op::Delete { key, .. } => key.len(),
            Op::DeleteAll { items } => items.iter().map(|(k, _)| k.len()).sum(),
            Op::Compact { .. } => 0,
        }
    }
}

struct Cmd {
    op: Op,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// State shared by readers and the writer thread.
struct Shared {
    db: Database,
    /// Latest committed revision. Written only by the writer thread after a commit, so a reader that
    /// sees revision N also sees every write up to N; an atomic is enough because no other state must
    /// change together with it.
    revision: AtomicI64,
    /// Highest compacted revision (history at or below it is gone).
    compacted: AtomicI64,
}

/// The embedded, durable, in-process store.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    /// Write requests to the single writer thread. `std::sync::mpsc` because the receiver is a
    /// blocking thread; senders never block (unbounded), the thread applies back-pressure by batching.
    writes: Option<mpsc::Sender<Cmd>>,
    /// The writer thread, joined on drop so the database file is closed when the store is.
    writer: Option<std::thread::JoinHandle<()>>,
    /// Wakes watchers when the revision moves.
    revision_rx: watch::Receiver<Revision>,
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        // Closing the channel ends the writer loop after it has committed what it holds.
        self.writes.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        // Reads already on blocking threads (a watch's log read when its task was aborted, say) hold the
        // database until they finish; wait for them, so that once the store is dropped the same data dir
        // opens again at once (a restart in one process). They are short; the bound is only a safeguard.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while Arc::strong_count(&self.shared) > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

fn encode_kv(rev: Revision, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(value);
    out
}

fn decode_kv(key: &str, raw: &[u8]) -> Result<KeyValue, StoreError> {
    if raw.len() < 8 {
        return Err(internal("short kv record"));
    }
    let mut rev = [0u8; 8];
    rev.copy_from_slice(&raw[..8]);
    Ok(KeyValue { key: key.to_string(), value: raw[8..].to_vec(), mod_revision: i64::from_be_bytes(rev) })
}

/// One log record: `[kind][key][prev?][value]`, lengths little-endian u32.
fn encode_event(put: bool, key: &str, prev: Option<&KeyValue>, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + key.len() + value.len() + prev.map_or(0, |p| p.value.len()));
    out.push(u8::from(put));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    match prev {
        Some(p) => {
            out.push(1);
            out.extend_from_slice(&p.mod_revision.to_le_bytes());
            out.extend_from_slice(&(p.value.len() as u32).to_le_bytes());
            out.extend_from_slice(&p.value);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value);
    out
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.buf.len() < n {
            return Err(internal("truncated log record"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn u32(&mut self) -> Result<usize, StoreError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let n = self.u32()?;
        self.take(n)
    }
}

/// The key of a log record, read without copying the record: every watch and past-revision read walks
/// the log of every resource, and decoding (copying values of up to 1.5 MiB) only the records under
/// its own prefix keeps that walk cheap.
fn event_key(raw: &[u8]) -> Result<&str, StoreError> {
    let mut r = Reader { buf: raw };
    r.take(1)?;
    std::str::from_utf8(r.bytes()?).map_err(internal)
}

fn decode_event(revision: Revision, raw: &[u8]) -> Result<WatchEvent, StoreError> {
    let mut r = Reader { buf: raw };
    let put = r.take(1)?[0] == 1;
    let key = std::str::from_utf8(r.bytes()?).map_err(internal)?.to_string();
    let prev = if r.take(1)?[0] == 1 {
        let b = r.take(8)?;
        let rev = i64::from_le_bytes(b.try_into().map_err(internal)?);
        Some(KeyValue { key: key.clone(), value: r.bytes()?.to_vec(), mod_revision: rev })
    } else {
        None
    };
    let value = r.bytes()?.to_vec();
    Ok(if put {
        WatchEvent::Put { kv: KeyValue { key, value, mod_revision: revision }, created: prev.is_none(), prev }
    } else {
        WatchEvent::Delete { revision, prev, key }
    })
}

/// redb's page cache. Its default (1 GiB) would hold the whole store in memory as it grows, so memory
/// would rise with every tenant; hot pages fit in this, and the rest is read from the OS page cache.
/// The cache fills and stays full: at 64 MiB a replica holding 1,000 small clusters idled at 75 MiB,
/// at 16 MiB at 38 MiB, with the same create, get and list rates (`benches/throughput.rs`).
const PAGE_CACHE: usize = 16 << 20;

impl EmbeddedStore {
    /// Open (or create) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(internal)?;
        let db = redb::Builder::new().set_cache_size(PAGE_CACHE).create(dir.join("kgate.redb")).map_err(internal)?;
        let (revision, compacted) = {
            let txn = db.begin_write().map_err(internal)?;
            let r = {
                txn.open_table(KV).map_err(internal)?;
                txn.open_table(LOG).map_err(internal)?;
                let meta = txn.open_table(META).map_err(internal)?;
                let rev = meta.get(META_REV).map_err(internal)?.map(|v| v.value()).unwrap_or(1);
                let compacted = meta.get(META_COMPACTED).map_err(internal)?.map(|v| v.value()).unwrap_or(0);
                (rev as i64, compacted as i64)
            };
            txn.commit().map_err(internal)?;
            r
        };
        let shared = Arc::new(Shared { db, revision: AtomicI64::new(revision), compacted: AtomicI64::new(compacted) });
        let (tx, rx) = mpsc::channel::<Cmd>();
        let (rev_tx, revision_rx) = watch::channel(revision);
        let writer_shared = shared.clone();
        let writer = std::thread::Builder::new()
            .name("kgate-store-writer".into())
            .spawn(move || writer_loop(writer_shared, rx, rev_tx))
            .map_err(internal)?;
        Ok(EmbeddedStore { shared, writes: Some(tx), writer: Some(writer), revision_rx })
    }

    async fn submit(&self, op: Op) -> Result<Done, StoreError> {
        let (reply, rx) = oneshot::channel();
        let closed = || StoreError::Unavailable("store is closed".into());
        self.writes.as_ref().ok_or_else(closed)?.send(Cmd { op, reply }).map_err(|_| closed())?;
        rx.await.map_err(|_| StoreError::Unavailable("store writer stopped".into()))?
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shared) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || f(&shared)).await.map_err(internal)?
    }
}

fn writer_loop(shared: Arc<Shared>, rx: mpsc::Receiver<Cmd>, rev_tx: watch::Sender<Revision>) {
    while let Ok(first) = rx.recv() {
        let mut bytes = first.op.bytes();
        let mut batch = vec![first];
        // Bounded in bytes as well: 512 writes of 1.5 MiB, each logged with the value it replaced,
        // would be gigabytes of dirty pages in one transaction.
        while batch.len() < MAX_BATCH && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(c) => {
                    bytes += c.op.bytes();
                    batch.push(c);
                }
                Err(_) => break,
            }
        }
        let mut rev = shared.revision.load(Ordering::Acquire);
        let result = apply_batch(&shared, &batch, &mut rev);
        match result {
            Ok(outcomes) => {
                // Publish the revision before acknowledging so a client that saw its write acknowledged
                // always reads at least that revision.
                shared.revision.store(rev, Ordering::Release);
                let _ = rev_tx.send(rev);
                for (cmd, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = cmd.reply.send(outcome);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "embedded store commit failed");
                for cmd in batch {
                    let _ = cmd.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

type Outcomes = Vec<Result<Done, StoreError>>;

/// Whether a guard's key is gone or was written since its revision.
fn guard_changed(kv: &redb::Table<&str, &[u8]>, guard: Option<&Guard>) -> Result<bool, StoreError> {
    let Some(g) = guard else { return Ok(false) };
    Ok(match kv.get(g.key.as_str()).map_err(internal)? {
        Some(v) => decode_kv(&g.key, v.value())?.mod_revision != g.mod_revision,
        None => true,
    })
}

fn apply_batch(shared: &Shared, batch: &[Cmd], rev: &mut Revision) -> Result<Outcomes, StoreError> {
    let txn = shared.db.begin_write().map_err(internal)?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut compact_to = None;
    {
        let mut kv = txn.open_table(KV).map_err(internal)?;
        let mut log = txn.open_table(LOG).map_err(internal)?;
        for cmd in batch {
            let current = |kv: &redb::Table<&str, &[u8]>, key: &str| -> Result<Option<KeyValue>, StoreError> {
                match kv.get(key).map_err(internal)? {
                    Some(v) => Ok(Some(decode_kv(key, v.value())?)),
                    None => Ok(None),
                }
            };
            let outcome = match &cmd.op {
                Op::Create { key, value, guard } => match current(&kv, key)? {
                    Some(_) => Err(StoreError::AlreadyExists),
                    None if guard_changed(&kv, guard.as_ref())? => Err(StoreError::GuardChanged),
                    None => {
                        *rev += 1;
                        kv.insert(key.as_str(), encode_kv(*rev, value).as_slice()).map_err(internal)?;
                        log.insert(*rev as u64, encode_event(true, key, None, value).as_slice()).map_err(internal)?;
                        Ok(Done::Written(*rev))
                    }
                },
                Op::Update { key, value, expected } => match current(&kv, key)? {
                    None => Err(StoreError::NotFound),
                    Some(cur) if cur.mod_revision != *expected => Err(StoreError::Conflict { current: Some(cur) }),
                    Some(cur) => {
                        *rev += 1;
                        kv.insert(key.as_str(), encode_kv(*rev, value).as_slice()).map_err(internal)?;
                        log.insert(*rev as u64, encode_event(true, key, Some(&cur), value).as_slice())
                            .map_err(internal)?;
                        Ok(Done::Written(*rev))
                    }
                },
                Op::Delete { key, expected } => match current(&kv, key)? {
                    None => Err(StoreError::NotFound),
                    Some(cur) if expected.is_some_and(|e| e != cur.mod_revision) => {
                        Err(StoreError::Conflict { current: Some(cur) })
                    }
                    Some(cur) => {
                        *rev += 1;
                        kv.remove(key.as_str()).map_err(internal)?;
                        log.insert(*rev as u64, encode_event(false, key, Some(&cur), &[]).as_slice())
                            .map_err(internal)?;
                        Ok(Done::Deleted(*rev, cur))
                    }
                },
                Op::DeleteAll { items } => {
                    let mut found = Vec::with_capacity(items.len());
                    for (key, expected) in items {
                        match current(&kv, key)? {
                            Some(cur) if cur.mod_revision == *expected => found.push(cur),
                            _ => break,
                        }
                    }
                    let all = found.len() == items.len();
                    for cur in found.iter().filter(|_| all) {
                        *rev += 1;
                        kv.remove(cur.key.as_str()).map_err(internal)?;
                        log.insert(*rev as u64, encode_event(false, &cur.key, Some(cur), &[]).as_slice())
                            .map_err(internal)?;
                    }
                    Ok(Done::DeletedAll(all))
                }
                Op::Compact { revision } => {
                    let target = (*revision).min(*rev);
                    if target > shared.compacted.load(Ordering::Acquire) {
                        log.retain_in(..=(target as u64), |_, _| false).map_err(internal)?;
                        compact_to = Some(target);
                    }
                    Ok(Done::Compacted)
                }
            };
            outcomes.push(outcome);
        }
        let mut meta = txn.open_table(META).map_err(internal)?;
        meta.insert(META_REV, *rev as u64).map_err(internal)?;
        if let Some(c) = compact_to {
            meta.insert(META_COMPACTED, c as u64).map_err(internal)?;
        }
    }
    // Default durability is Immediate: commit returns after the data is fsync'd.
    txn.commit().map_err(internal)?;
    if let Some(c) = compact_to {
        shared.compacted.store(c, Ordering::Release);
    }
    Ok(outcomes)
}

/// Read a prefix at the latest revision, or at a past one by undoing logged changes newer than it.
fn read_range(shared: &Shared, req: &RangeRequest, abandoned: &AtomicBool) -> Result<RangeResult, StoreError> {
    let txn = shared.db.begin_read().map_err(internal)?;
    // Both tables are read in this one snapshot, so the revision below matches their contents.
    let meta = txn.open_table(META).map_err(internal)?;
    let current = meta.get(META_REV).map_err(internal)?.map(|v| v.value() as i64).unwrap_or(1);
    let compacted = meta.get(META_COMPACTED).map_err(internal)?.map(|v| v.value() as i64).unwrap_or(0);
    let kv = txn.open_table(KV).map_err(internal)?;
    let end = prefix_end(&req.prefix);
    let end = String::from_utf8(end).map_err(internal)?;
    let start = req.start.clone().unwrap_or_else(|| req.prefix.clone());
    let at = req.revision.unwrap_or(current);
    if at > current {
        return Err(StoreError::FutureRevision { requested: at, current });
    }
    if at >= current {
        let mut kvs = Vec::new();
        let mut more = false;
        for item in kv.range(start.as_str()..end.as_str()).map_err(internal)? {
            let (k, v) = item.map_err(internal)?;
            if req.limit > 0 && kvs.len() == req.limit {
                more = true;
                break;
            }
            kvs.push(decode_kv(k.value(), v.value())?);
        }
        return Ok(RangeResult { kvs, more, revision: current });
    }
    if at < compacted {
        return Err(StoreError::Compacted { requested: at, compacted });
    }
    // Past revision: the value at `at` of every key changed since is the `prev` of its first later
    // event. That overlay (proportional to writes since `at`, not to the prefix) is merged with a
    // bounded walk of the current keys.
    let mut overlay: BTreeMap<String, Option<KeyValue>> = BTreeMap::new();
    let log = txn.open_table(LOG).map_err(internal)?;
    let (mut walked, mut bytes) = (0usize, 0usize);
    for item in log.range((at as u64 + 1)..).map_err(internal)? {
        let (r, raw) = item.map_err(internal)?;
        walked += 1;
        bytes += raw.value().len();
        if walked > MAX_OVERLAY_RECORDS || bytes > MAX_OVERLAY_BYTES {
            return Err(StoreError::Compacted { requested: at, compacted: at + 1 });
        }
        // A read its requester gave up on (timed out, or its stream reset) stops here: a blocking
        // task runs on after the future awaiting it is dropped.
        if walked.is_multiple_of(256) && abandoned.load(Ordering::Relaxed) {
            return Err(StoreError::Unavailable("the read was abandoned".into()));
        }
        let key = event_key(raw.value())?;
        // Only a key's first event after `at` counts: later ones are not decoded.
        if !key.starts_with(&req.prefix) || key < start.as_str() || overlay.contains_key(key) {
            continue;
        }
        let (key, prev) = match decode_event(r.value() as i64, raw.value())? {
            WatchEvent::Put { kv, prev, .. } => (kv.key, prev),
            WatchEvent::Delete { key, prev, .. } => (key, prev),
            WatchEvent::Progress(_) => continue,
        };
        overlay.entry(key).or_insert(prev);
    }
    let mut kvs = Vec::new();
    let mut more = false;
    let mut current_keys = kv.range(start.as_str()..end.as_str()).map_err(internal)?.peekable();
    let mut changed = overlay.into_iter().peekable();
    loop {
        // Next key in order from either side; the overlay wins for keys present in both.
        let next_current = match current_keys.peek() {
            Some(Ok((k, _))) => Some(k.value().to_string()),
            Some(Err(_)) => return Err(internal("reading keys")),
            None => None,
        };
        let take_overlay = match (&next_current, changed.peek()) {
            (None, None) => break,
            (Some(c), Some((o, _))) => o <= c,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        let value = if take_overlay {
            let (k, v) = changed.next().expect("peeked");
            if next_current.as_deref() == Some(k.as_str()) {
                current_keys.next();
            }
            v
        } else {
            let (k, v) = current_keys.next().expect("peeked").map_err(internal)?;
            Some(decode_kv(k.value(), v.value())?)
        };
        let Some(v) = value else { continue };
        if req.limit > 0 && kvs.len() == req.limit {
            more = true;
            break;
        }
        kvs.push(v);
    }
    Ok(RangeResult { kvs, more, revision: at })
}

/// Log events under `prefix` in `(after, upto]`.
fn read_log(shared: &Shared, prefix: &str, after: Revision, upto: Revision) -> Result<Vec<WatchEvent>, StoreError> {
    let txn = shared.db.begin_read().map_err(internal)?;
    // The compaction point must come from the same snapshot as the log: the in-memory copy is
    // updated only after the commit that deleted history, so it could hide a gap.
    let meta = txn.open_table(META).map_err(internal)?;
    let compacted = meta.get(META_COMPACTED).map_err(internal)?.map(|v| v.value() as i64).unwrap_or(0);
    if after < compacted {
        return Err(StoreError::Compacted { requested: after, compacted });
    }
    let log = txn.open_table(LOG).map_err(internal)?;
    let mut out = Vec::new();
    for item in log.range((after as u64 + 1)..=(upto as u64)).map_err(internal)? {
        let (r, raw) = item.map_err(internal)?;
        if event_key(raw.value())?.starts_with(prefix) {
            out.push(decode_event(r.value() as i64, raw.value())?);
        }
    }
    Ok(out)
}

struct WatchState {
    /// Weak: an idle watch must not keep the database open after the store is dropped.
    shared: std::sync::Weak<Shared>,
    prefix: String,
    next_after: Revision,
    buffered: VecDeque<WatchEvent>,
    rx: watch::Receiver<Revision>,
    failed: bool,
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let key = key.to_string();
        self.blocking(move |s| {
            let txn = s.db.begin_read().map_err(internal)?;
            let kv = txn.open_table(KV).map_err(internal)?;
            match kv.get(key.as_str()).map_err(internal)? {
                Some(v) => Ok(Some(decode_kv(&key, v.value())?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError> {
        /// Marks the read abandoned when the future awaiting it is dropped (or ends).
        struct Abandon(Arc<AtomicBool>);
        impl Drop for Abandon {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon = Abandon(abandoned.clone());
        self.blocking(move |s| read_range(s, &req, &abandoned)).await
    }

    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError> {
        within_limit(key, &value)?;
        match self.submit(Op::Create { key: key.to_string(), value, guard: guard.cloned() }).await? {
            Done::Written(r) => Ok(r),
            _ => Err(internal("unexpected writer answer")),
        }
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError> {
        within_limit(key, &value)?;
        match self.submit(Op::Update { key: key.to_string(), value, expected }).await? {
            Done::Written(r) => Ok(r),
            _ => Err(internal("unexpected writer answer")),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError> {
        match self.submit(Op::Delete { key: key.to_string(), expected }).await? {
            Done::Deleted(r, kv) => Ok((r, kv)),
            _ => Err(internal("unexpected writer answer")),
        }
    }

    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        match self.submit(Op::DeleteAll { items: items.to_vec() }).await? {
            Done::DeletedAll(all) => Ok(all),
            _ => Err(internal("unexpected writer answer")),
        }
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let compacted = self.shared.compacted.load(Ordering::Acquire);
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        let state = WatchState {
            shared: Arc::downgrade(&self.shared),
            prefix: prefix.to_string(),
            next_after: after,
            buffered: VecDeque::new(),
            rx: self.revision_rx.clone(),
            failed: false,
        };
        let stream = futures::stream::unfold(state, |mut st| async move {
            loop {
                if st.failed {
                    return None;
                }
                if let Some(ev) = st.buffered.pop_front() {
                    return Some((Ok(ev), st));
                }
                let current = *st.rx.borrow_and_update();
                if st.next_after < current {
                    let upto = current.min(st.next_after + WATCH_READ_CHUNK as i64);
                    let shared = st.shared.upgrade()?;
                    let (prefix, after) = (st.prefix.clone(), st.next_after);
                    let read = tokio::task::spawn_blocking(move || read_log(&shared, &prefix, after, upto)).await;
                    match read.map_err(internal).and_then(|r| r) {
                        Ok(events) => {
                            st.buffered.extend(events);
                            st.next_after = upto;
                            if upto == current {
                                // Caught up: say so, so a watch cache knows it is current.
                                st.buffered.push_back(WatchEvent::Progress(upto));
                            }
                        }
                        Err(e) => {
                            st.failed = true;
                            return Some((Err(e), st));
                        }
                    }
                    continue;
                }
                if st.rx.changed().await.is_err() {
                    return None;
                }
            }
        });
        Ok(Box::pin(stream))
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.submit(Op::Compact { revision }).await.map(|_| ())
    }

    async fn healthy(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| !w.is_finished())
    }

    fn reports_progress(&self) -> bool {
        true
    }
}

/// Size of the retained history, for tests and metrics.
impl EmbeddedStore {
    /// Number of log entries retained.
    pub fn history_len(&self) -> Result<u64, StoreError> {
        let txn = self.shared.db.begin_read().map_err(internal)?;
        let log = txn.open_table(LOG).map_err(internal)?;
        log.len().map_err(internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key read alone is the key the whole record holds, with or without a previous value, and a
    /// cut record is an error rather than a wrong key.
    #[test]
    fn a_log_records_key_is_read_without_decoding_it() {
        let prev = KeyValue { key: "/r/a/k".into(), value: vec![7; 100], mod_revision: 3 };
        for record in [encode_event(true, "/r/a/k", Some(&prev), b"{}"), encode_event(false, "/r/a/k", None, b"")] {
            assert_eq!(event_key(&record).unwrap(), "/r/a/k");
            let key = match decode_event(9, &record).unwrap() {
                WatchEvent::Put { kv, .. } => kv.key,
                WatchEvent::Delete { key, .. } => key,
                WatchEvent::Progress(_) => unreachable!(),
            };
            assert_eq!(key, "/r/a/k");
            assert!(event_key(&record[..4]).is_err());
        }
    }

    /// A read at a past revision walks the writes since, every tenant's: past a bound it answers as
    /// compacted (the client lists again from now) rather than walk them all for one small list.
    #[tokio::test]
    async fn a_read_far_in_the_past_is_answered_as_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let first = store.create("/r/mine/a", b"{}".to_vec()).await.unwrap();
        let keys: Vec<String> = (0..=MAX_OVERLAY_RECORDS).map(|i| format!("/r/others/{i}")).collect();
        futures::future::try_join_all(keys.iter().map(|k| store.create(k, b"{}".to_vec()))).await.unwrap();
        let at = |revision| RangeRequest { prefix: "/r/mine/".into(), revision: Some(revision), ..Default::default() };
        let near = store.range(at(first + MAX_OVERLAY_RECORDS as i64 - 10)).await.unwrap();
        assert_eq!(near.kvs.len(), 1, "a few thousand writes back is read");
        let far = store.range(at(first)).await;
        assert!(matches!(far, Err(StoreError::Compacted { requested, .. }) if requested == first), "{far:?}");
    }
}
