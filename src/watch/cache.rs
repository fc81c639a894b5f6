//! The watch cache: one store watch per resource type feeds the current objects of every cluster and a
//! bounded history of events; watches of one cluster, one namespace or every cluster are fan-outs of it.
//!
//! The shape follows etcd's `cache` package and kube-apiserver's cacher: a single ingest task applies
//! store events in revision order, appends them to a ring buffer and hands each to the watchers it
//! concerns through a small bounded channel per watcher. A watcher whose channel is full is not waited
//! for: it is cut off (marked lagging) and catches up from the ring buffer by itself, so one slow client
//! never delays the ingest or anybody else. A watcher too far behind for the ring buffer is told so and
//! falls back to a store watch (or gets 410 when the store compacted past it).
//!
//! Caches start lazily, on the first watch or `resourceVersion=0` read of a resource type, so only the
//! types clients actually watch are held in memory; objects are kept as their serialised JSON (what a
//! list or a watch event sends), not as parsed trees.
//!
//! The current objects are a persistent (copy-on-write) B-tree, as kube-apiserver's cache snapshots are
//! clones of a copy-on-write B-tree: a list or a watch's initial state takes a snapshot in constant time
//! under the lock and reads it after, so a list of every cluster's objects neither holds up the ingest
//! task nor pays for copying 10,000 references before its first byte leaves. From time to time the
//! objects' JSON is copied into shared blocks in key order (`pack`), so that such a list reads a few
//! runs of memory rather than allocations strewn over the heap.

use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dashmap::DashMap;
use futures::task::AtomicWaker;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::watch;

use crate::budget::{Account, Charge};
use crate::metrics::CacheMetrics;
use crate::registry::Registry;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, Revision, StoreError, WatchEvent};

mod pack;

pub use pack::{Run, Runs};

/// Events kept per resource type for watchers that resume or fall behind (kube-apiserver sizes its
/// cache history by time, about 75 s of events; at 1,000 writes/s this is 10 s, and older resumes are
/// served by a store watch instead).
pub const HISTORY: usize = 10_000;
/// Bytes of events (objects and the states they replaced) kept per resource type: a tenant writing
/// objects of 1 MiB would otherwise make 10,000 events 20 GiB. Past it the oldest go, and a watcher
/// further behind resumes from the store, as it does past `HISTORY`.
pub const HISTORY_BYTES: u64 = 64 << 20;
/// Bytes of events kept by the histories of every resource type together, so that a tenant's thousand
/// CRDs do not make a thousand histories of `HISTORY_BYTES`: each cache keeps at most an equal share of
/// it (trimming its own history as it appends, and every cache's every `TRIM_EVERY`), so no type's
/// history can be taken by another's, however much a tenant writes to it.
pub const ALL_HISTORIES_BYTES: u64 = 256 << 20;
/// How often every cache's history is trimmed to its share (a share shrinks as caches start).
const TRIM_EVERY: Duration = Duration::from_secs(10);
/// Events queued per watcher before it is cut off and left to catch up from history.
pub const WATCHER_QUEUE: usize = 128;
/// Bytes queued per watcher before it is cut off (unless the queue is empty: one event of any size
/// gets in). Its account is also charged for them (see `budget`), and its cluster's budget spent cuts
/// it off too.
pub const WATCHER_QUEUE_BYTES: u64 = 8 << 20;
/// Keys read per page while a cache loads.
const LOAD_PAGE: usize = 5_000;
/// A cache nobody watched or read for this long is dropped with its memory.
const IDLE_EVICT: Duration = Duration::from_secs(600);
/// The same for a custom resource's cache: any tenant can start them (a CRD and one read each), and
/// each holds a task and a store watch until it goes.
const IDLE_EVICT_CUSTOM: Duration = Duration::from_secs(60);
/// How often caches are checked for idleness.
const IDLE_CHECK: Duration = Duration::from_secs(60);

/// The opening of an object's JSON as one definition serves it: `{"apiVersion":"…","kind":"…"`.
/// Cached objects are kept without it (see `Entry`), so one cache serves a custom resource in every
/// version and kind the clusters' CRDs declare for it, each request putting its own in front. (A cache
/// per version would let one tenant multiply every tenant's objects in memory by declaring versions.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head(Bytes);

impl Head {
    /// The opening of `def`'s objects.
    pub fn of(def: &ResourceDef) -> Head {
        let api_version = def.api_version();
        let api_version = serde_json::to_vec(&api_version).expect("strings serialise");
        let kind = serde_json::to_vec(&def.kind).expect("strings serialise");
        // A built-in type's Go struct begins with TypeMeta, kind first; a custom resource's keys are
        // sorted (see `proto::order`).
        let h = if crate::proto::order::is_struct(&def.api_version(), &def.kind) {
            [&b"{\"kind\":"[..], &kind, b",\"apiVersion\":", &api_version].concat()
        } else {
            [&b"{\"apiVersion\":"[..], &api_version, b",\"kind\":", &kind].concat()
        };
        Head(Bytes::from(h))
    }

    /// No opening: what goes before an object's JSON that has its own.
    pub fn empty() -> Head {
        Head(Bytes::new())
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// What precedes each body in a packed block of objects served with this head, and so each object
    /// in a list after the first: a comma and the head.
    pub fn sep(&self) -> Bytes {
        Bytes::from([b",", self.bytes()].concat())
    }
}

/// A current object: what a GET returns, serialised. Kept in the map itself rather than behind an
/// `Arc`, so a list walking the map reaches each object's bytes in one step: a pointer to chase per
/// object, through memory scattered by other work, cost lists a third more CPU.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The allocation holding the body: the body's own, or a block of bodies shared with other objects,
    /// each following a comma and its cache's `Head`, so that a run of them is already a list's items
    /// as they are sent (see `pack`). Private: entries are made by `Entry::new`, and by `pack` from
    /// entries so made.
    block: Bytes,
    /// Where the body lies in `block`. The body is the object as clients see it (resourceVersion and
    /// cluster annotation set), as JSON, without its apiVersion and kind: what follows a `Head`, either
    /// `,"metadata":…}` or `}`. Two `u32`s rather than a `Bytes` of the body: a list needs the block to
    /// send a run of bodies as one slice, and an entry is 48 bytes this way against 72 with both (and
    /// 40 with the body's alone).
    at: u32,
    len: u32,
    /// Revision of its last write.
    pub revision: Revision,
}

impl Entry {
    /// The entry of an object; its apiVersion and kind are left to the `Head` it is served with.
    pub fn new(mut obj: Value, revision: Revision) -> serde_json::Result<Entry> {
        let (mut api_version, mut kind) = (Value::Null, Value::Null);
        if let Some(m) = obj.as_object_mut() {
            api_version = m.remove("apiVersion").unwrap_or_default();
            kind = m.remove("kind").unwrap_or_default();
        }
        Entry::typed(api_version.as_str().unwrap_or_default(), kind.as_str().unwrap_or_default(), &obj, revision)
    }

    /// The entry of an object of `api_version`/`kind` given without them: its keys are written in
    /// that type's order (see `proto::order`).
    fn typed(api_version: &str, kind: &str, obj: &Value, revision: Revision) -> serde_json::Result<Entry> {
        let mut json = crate::proto::order::to_vec_untyped(api_version, kind, obj);
        if json.first() != Some(&b'{') {
            return Err(serde::de::Error::custom("an object is not a JSON object"));
        }
        // `{…}` becomes `,…}`, and `{}` becomes `}`.
        if json.len() > 2 {
            json[0] = b',';
        } else {
            json.remove(0);
        }
        Entry::own(Bytes::from(json), revision).ok_or_else(|| serde::de::Error::custom("an object of 4 GiB or more"))
    }

    /// An entry whose body is all of `body`.
    fn own(body: Bytes, revision: Revision) -> Option<Entry> {
        Some(Entry { len: u32::try_from(body.len()).ok()?, block: body, at: 0, revision })
    }

    /// The object's JSON after its head.
    pub fn body(&self) -> &[u8] {
        &self.block[self.at as usize..self.end()]
    }

    /// The body as shared bytes (a reference, not a copy).
    pub fn body_bytes(&self) -> Bytes {
        self.block.slice(self.at as usize..self.end())
    }

    /// Where the body ends in its block.
    fn end(&self) -> usize {
        self.at as usize + self.len as usize
    }

    /// Whether `sep` lies right before the body in its block.
    pub fn after(&self, sep: &[u8]) -> bool {
        let at = self.at as usize;
        at >= sep.len() && self.block[at - sep.len()..at] == *sep
    }

    /// Whether the body lies in `prev`'s block right after `prev`'s body and `sep`, given that `sep` lies
    /// before `prev`'s (`after`). The bytes between are not compared (that took an eighth of the CPU
    /// of a list): only `pack` puts two entries in one block, with the same separator before each.
    pub fn follows(&self, prev: &Entry, sep: &[u8]) -> bool {
        self.block.as_ptr() == prev.block.as_ptr() && self.at as usize == prev.end() + sep.len()
    }

    /// The bytes of the block from `sep` before `first`'s body to the end of `last`'s: `sep` and a body
    /// repeated, when `last` follows `first` through a chain of `follows`.
    pub fn run(first: &Entry, last: &Entry, sep: &[u8]) -> Bytes {
        debug_assert!(first.block.as_ptr() == last.block.as_ptr() && first.after(sep));
        first.block.slice(first.at as usize - sep.len()..last.end())
    }

    /// Bytes a holder of this entry keeps alive that a holder of `prev` (the entry before it in a list)
    /// does not: its allocation (a packed block, or its own body), unless it shares `prev`'s.
    pub fn holds_after(&self, prev: Option<&Entry>) -> u64 {
        match prev {
            Some(p) if p.block.as_ptr() == self.block.as_ptr() => 0,
            _ => self.block.len() as u64,
        }
    }

    /// The body's length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the body is empty (never, for an entry made from an object).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same entry with a body of its own: holding it keeps no block of other objects alive (see
    /// `pack`), for whatever outlives the cache's current state (an event's old object in history).
    pub fn detached(&self) -> Entry {
        Entry { block: Bytes::copy_from_slice(self.body()), at: 0, len: self.len, revision: self.revision }
    }

    /// The object's JSON as `head`'s definition serves it.
    pub fn json(&self, head: &Head) -> Bytes {
        let mut j = Vec::with_capacity(head.0.len() + self.len as usize);
        j.extend_from_slice(&head.0);
        j.extend_from_slice(self.body());
        Bytes::from(j)
    }

    /// The object parsed as `head`'s definition serves it (for selectors and Table rendering).
    pub fn value(&self, head: &Head) -> ApiResult<Value> {
        serde_json::from_slice(&self.json(head)).map_err(ApiError::internal)
    }

    /// The object parsed without apiVersion and kind.
    fn headless(&self) -> serde_json::Result<Value> {
        let body = self.body();
        let mut j = Vec::with_capacity(body.len() + 1);
        j.push(b'{');
        j.extend_from_slice(body.strip_prefix(b",").unwrap_or(body));
        serde_json::from_slice(&j)
    }
}

/// What a list or a watch pays per cached object it holds besides the object's allocation: the
/// reference itself.
pub const HANDLE: u64 = std::mem::size_of::<Entry>() as u64;

/// Current objects by store key (ordered, so one cluster or namespace is a range). Keys are shared
/// with the events that wrote them, and cloning the map shares every node until one of the copies
/// changes it (a write then copies the few nodes on its path).
type Objects = imbl::OrdMap<Arc<str>, Entry>;

/// The objects in one scope as of one revision, readable for as long as it is kept however the cache
/// changes meanwhile.
#[derive(Clone)]
pub struct Snapshot {
    objects: Objects,
    /// The runs of packed objects among them, in a snapshot of the whole cache for a list. Boxed: most
    /// snapshots (a tenant's, a watch's) have none, and a watcher's registration holds its snapshot.
    runs: Option<Box<Runs>>,
    /// Keys in scope are in `start..end`.
    start: String,
    end: String,
    /// For one namespace in every cluster, the key prefix and namespace each key in range must match.
    namespace: Option<(String, String)>,
    /// The revision the objects are current at.
    pub revision: Revision,
}

impl Snapshot {
    /// The objects in scope in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Entry)> {
        self.between(Bound::Unbounded, None)
    }

    /// The objects in scope in key order, from `from` (the scope's start if unbounded) to before `until`
    /// (the scope's end if not given).
    pub fn between<'a>(
        &'a self,
        from: Bound<&'a str>,
        until: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a Arc<str>, &'a Entry)> {
        let start = match from {
            Bound::Unbounded => Bound::Included(self.start.as_str()),
            from => from,
        };
        let end = Bound::Excluded(until.unwrap_or(&self.end));
        self.objects.range::<_, str>((start, end)).filter(move |(k, _)| match &self.namespace {
            Some((prefix, ns)) => keys::parse(prefix, k, true).is_some_and(|k| k.namespace == Some(ns.as_str())),
            None => true,
        })
    }

    /// The runs of packed objects, in a snapshot of the whole cache whose blocks have `sep` before each
    /// body (a list served with another head cannot send them as they are).
    pub fn runs(&self, sep: &[u8]) -> Option<&Runs> {
        self.runs.as_deref().filter(|r| r.sep() == sep)
    }
}

/// One change, shared by every watcher it goes to.
#[derive(Debug)]
pub struct Event {
    /// Store key of the object.
    pub key: Arc<str>,
    /// `key`'s identity for each watcher's record of what it sent (`super::sent`), worked out once.
    pub key_hash: u64,
    /// The last event of its revision: a watcher that has passed it has all of that revision.
    pub ends: bool,
    /// The revision of the change.
    pub revision: Revision,
    /// For a put, the new state; for a delete, the last state stamped with the delete's revision.
    pub object: Entry,
    /// The state before the change, if the object existed.
    pub prev: Option<Entry>,
    /// Whether the object was deleted.
    pub deleted: bool,
    /// What selectors read of `prev` and `object`, worked out by the first watcher with selectors that
    /// needs it and shared by the others (see [`Event::selectable`]).
    pub selectable: std::sync::OnceLock<Selectable>,
}

/// What selectors read of an event's two states (`registry::selectable`). Without it every watcher
/// with selectors parsed the whole object twice for each event (a thousand watchers, a 1 MiB object:
/// seconds of CPU for one small patch); kube's cacher likewise keeps each event's labels and fields.
#[derive(Debug, Clone)]
pub struct Parts {
    /// Of the state before, if any.
    pub prev: Option<Value>,
    /// Of the new state (for a delete, the last).
    pub object: Value,
}

/// An event's [`Parts`] as kept with it, counted in [`SELECTABLE_BYTES`] while kept.
#[derive(Debug)]
pub struct Selectable {
    parts: Parts,
    weight: u64,
}

/// The bytes all events' [`Selectable`]s hold, at most [`SELECTABLE_LIMIT`]: they live as long as their
/// events' history, which is bounded by the objects' bytes, not these.
static SELECTABLE_BYTES: AtomicU64 = AtomicU64::new(0);
/// Past this, an event's parts are worked out by each watcher for itself, until some are let go.
const SELECTABLE_LIMIT: u64 = 128 << 20;

impl Drop for Selectable {
    fn drop(&mut self) {
        SELECTABLE_BYTES.fetch_sub(self.weight, Ordering::AcqRel);
    }
}

impl Event {
    /// What selectors read of this event's states: as kept with the event, worked out by the first
    /// caller; or the caller's own when the kept ones are at [`SELECTABLE_LIMIT`].
    pub fn selectable(&self, head: &Head) -> ApiResult<std::borrow::Cow<'_, Parts>> {
        if let Some(s) = self.selectable.get() {
            return Ok(std::borrow::Cow::Borrowed(&s.parts));
        }
        let part = |v: Value| crate::registry::selectable(&v);
        let prev = self.prev.as_ref().map(|p| p.value(head)).transpose()?.map(part);
        let parts = Parts { prev, object: part(self.object.value(head)?) };
        // Values hold a few times their JSON text.
        let size = |v: &Value| 3 * crate::meta::json_size_within(v, usize::MAX).unwrap_or(0) as u64;
        let weight = parts.prev.as_ref().map_or(0, size) + size(&parts.object);
        if SELECTABLE_BYTES.fetch_add(weight, Ordering::AcqRel) + weight > SELECTABLE_LIMIT {
            SELECTABLE_BYTES.fetch_sub(weight, Ordering::AcqRel);
            return Ok(std::borrow::Cow::Owned(parts));
        }
        // A caller that got here first keeps its own; this one, dropped, gives its weight back.
        let kept = self.selectable.get_or_init(|| Selectable { parts, weight });
        Ok(std::borrow::Cow::Borrowed(&kept.parts))
    }

    /// What it keeps alive: its object and the state it replaced (each in an allocation of its own).
    pub fn size(&self) -> u64 {
        (self.object.block.len() + self.prev.as_ref().map_or(0, |p| p.block.len()) + self.key.len()) as u64
    }
}

/// Which keys a watcher or a read wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// One cluster, or every cluster.
    pub cluster: Option<String>,
    /// One namespace (namespaced resources only).
    pub namespace: Option<String>,
}

/// Why a watcher's queue was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// Still registered.
    Active,
    /// Its queue overflowed: catch up from history.
    Lagging,
    /// The cache reloaded and its history restarted: catch up from the store.
    Reloaded,
}

/// How a new watcher starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// With the current objects in scope as its initial state.
    Snapshot,
    /// With every event after this revision.
    After(Revision),
}

/// A registered watcher: its initial state and its queue. Dropping it unregisters.
pub struct Registration {
    /// The objects in scope at `revision` (for `Start::Snapshot`).
    pub snapshot: Option<Snapshot>,
    /// Events after the requested revision that history still held (for `Start::After`).
    pub replay: Vec<Arc<Event>>,
    /// The revision the watcher starts at: events at or below it are never queued for it.
    pub revision: Revision,
    queue: Arc<Queue>,
    id: u64,
    cacher: Arc<Cacher>,
}

impl Registration {
    /// The next queued event; `None` once the queue is closed and drained (see `cutoff` for why).
    pub async fn recv(&self) -> Option<Arc<Event>> {
        std::future::poll_fn(|cx| self.queue.poll_pop(cx)).await
    }

    /// Whether no event is queued.
    pub fn is_drained(&self) -> bool {
        self.queue.lock().events.is_empty()
    }

    /// Why the queue closed (or `Active` while it is open).
    pub fn cutoff(&self) -> Cutoff {
        self.queue.lock().cutoff
    }

    /// The cache this watcher is fed by.
    pub fn cacher(&self) -> &Arc<Cacher> {
        &self.cacher
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cacher.unregister(self.id);
    }
}

/// A resume point older than the cache's history.
#[derive(Debug, Clone, Copy)]
pub struct TooOld {
    /// The oldest revision a resume may start after.
    pub oldest: Revision,
}

struct Slot {
    scope: Scope,
    queue: Arc<Queue>,
}

/// A watcher's queue: the events the ingest task handed it that it has not sent yet, and why it was
/// closed. Not a tokio mpsc channel: that allocates about 800 bytes up front (a block of 32 slots and
/// cache-padded halves) which every idle watcher would hold; this holds nothing until events arrive
/// and lets the memory go when drained.
struct Queue {
    /// Guards the events, their bytes and the cutoff. A std `Mutex`: held to push, pop or close, never
    /// across an await. Lock order: the ingest task pushes while holding `Cacher::state`; the watcher
    /// takes this lock alone.
    inner: Mutex<QueueState>,
    /// The watcher's task, woken by the first event after the queue ran empty and by closing.
    waker: AtomicWaker,
    /// Who pays for the queued events (a tenant's watcher; none for the exempt and for tests).
    account: Option<Arc<Account>>,
}

struct QueueState {
    events: VecDeque<Arc<Event>>,
    /// The queued events' sizes (`Event::size`), charged to the account while they wait.
    bytes: u64,
    charge: Option<Charge>,
    cutoff: Cutoff,
}

/// A drained queue keeping more room than this gives it back (a burst does not stay allocated).
const QUEUE_KEEP: usize = 8;
/// Queued events are charged to their watcher's account in steps of this many bytes.
const CHARGE_STEP: u64 = 64 * 1024;

impl QueueState {
    /// Let every queued event go (the watcher resumes from the last one it sent, from history).
    fn clear(&mut self) {
        self.events = VecDeque::new();
        self.bytes = 0;
        self.charge = None;
    }
}

impl Queue {
    fn new(account: Option<Arc<Account>>) -> Arc<Self> {
        Arc::new(Queue {
            inner: Mutex::new(QueueState { events: VecDeque::new(), bytes: 0, charge: None, cutoff: Cutoff::Active }),
            waker: AtomicWaker::new(),
            account,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // Every change under this lock is a single push, pop or assignment: nothing half-done to see.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue an event; when the queue is full (in events or bytes, or its cluster's budget is spent),
    /// close it as lagging instead, let its events go, and return false.
    fn push(&self, event: Arc<Event>) -> bool {
        let size = event.size();
        let mut q = self.lock();
        let was_empty = q.events.is_empty();
        let full = q.events.len() >= WATCHER_QUEUE
            || (!was_empty
                && (q.bytes + size > WATCHER_QUEUE_BYTES || self.account.as_ref().is_some_and(|a| a.over())));
        if full {
            q.cutoff = Cutoff::Lagging;
            q.clear();
            drop(q);
            self.waker.wake();
            return false;
        }
        q.events.push_back(event);
        q.bytes += size;
        // Charged ahead, a step at a time: the fan-out then touches the tenant's shared counters once
        // per step of events rather than for every event of every watcher.
        let owed = q.bytes;
        match (&mut q.charge, &self.account) {
            (Some(c), _) if c.bytes() < owed => c.grow(owed - c.bytes() + CHARGE_STEP),
            (None, Some(a)) => q.charge = Some(a.charge(owed + CHARGE_STEP)),
            _ => {}
        }
        drop(q);
        // The watcher only waits on an empty queue, so only the first event after that needs a wake.
        if was_empty {
            self.waker.wake();
        }
        true
    }

    fn close(&self, why: Cutoff) {
        let mut q = self.lock();
        q.cutoff = why;
        if why == Cutoff::Reloaded {
            // A reload starts over from the store: the queued events are not what the watcher resumes
            // with, and a watcher that never reads would keep them.
            q.clear();
        }
        drop(q);
        self.waker.wake();
    }

    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Arc<Event>>> {
        // Registered before looking, so an event pushed after the look wakes us.
        self.waker.register(cx.waker());
        let mut q = self.lock();
        match q.events.pop_front() {
            Some(ev) => {
                let size = ev.size();
                q.bytes -= size;
                let owed = q.bytes;
                if owed == 0 {
                    // Drained: an idle watcher holds nothing of its tenant's budget.
                    q.charge = None;
                } else if let Some(c) = q.charge.as_mut().filter(|c| c.bytes() > owed + 2 * CHARGE_STEP) {
                    c.release(c.bytes() - owed - CHARGE_STEP);
                }
                if q.events.is_empty() && q.events.capacity() > QUEUE_KEEP {
                    q.events = VecDeque::new();
                }
                Poll::Ready(Some(ev))
            }
            None if q.cutoff == Cutoff::Active => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

/// Everything the ingest task changes. Guarded by `Cacher::state`.
struct State {
    /// Current objects by store key. Changed only through `set` and `delete`, by a pack swap that
    /// indexes its span under the same lock, or replaced or cleared along with `runs` (a load, a stop),
    /// so that `runs` stays true to it.
    objects: Objects,
    /// The runs of packed objects in `objects` (see `pack::Runs`).
    runs: Runs,
    /// Recent events in revision order.
    history: VecDeque<Arc<Event>>,
    /// Their sizes (`Event::size`), also counted in `WatchCache`'s total of every history.
    history_bytes: u64,
    /// History holds every event after this revision.
    history_from: Revision,
    /// Every change up to here is applied.
    revision: Revision,
    slots: HashMap<u64, Slot>,
    /// Watcher ids by cluster, and the wildcard ones, so an event costs only its interested watchers.
    by_cluster: HashMap<Box<str>, Vec<u64>>,
    wildcard: Vec<u64>,
    /// Writes applied since the last packing pass began (see `pack`); a load sets it to the objects
    /// loaded, so that the first list across clusters packs them.
    written: usize,
    /// A packing pass is under way.
    packing: bool,
    /// Some objects are in blocks since the last load.
    packed: bool,
}

impl State {
    /// Put an object; returns the one it replaced.
    fn set(&mut self, key: Arc<str>, entry: Entry) -> Option<Entry> {
        self.runs.forget(&key);
        self.objects.insert(key, entry)
    }

    /// Remove an object; returns it.
    fn delete(&mut self, key: &str) -> Option<Entry> {
        self.runs.forget(key);
        self.objects.remove(key)
    }
}

/// Lifecycle of one cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the current objects; readers wait.
    Loading,
    /// Applying store events; reads and watches are served.
    Serving,
    /// Stopped (evicted or shut down); callers start a new one.
    Stopped,
}

/// What the histories of every cache of one `WatchCache` hold together (see `ALL_HISTORIES_BYTES`),
/// in two pools: built-in types', which every tenant watches, and custom resources'. Any tenant can
/// start custom resources' caches (a CRD and a read each), so they share among themselves: however
/// many a tenant starts, the built-in types' histories keep their shares.
#[derive(Debug, Default)]
pub struct HistoryBytes {
    builtin: Pool,
    custom: Pool,
}

/// One pool of histories.
#[derive(Debug, Default)]
struct Pool {
    /// Their bytes.
    bytes: AtomicU64,
    /// How many caches there are.
    caches: AtomicU64,
}

impl HistoryBytes {
    fn pool(&self, custom: bool) -> &Pool {
        if custom {
            &self.custom
        } else {
            &self.builtin
        }
    }
}

impl Pool {
    /// The bytes one cache's history may hold now.
    fn share(&self) -> u64 {
        HISTORY_BYTES.min(ALL_HISTORIES_BYTES / self.caches.load(Ordering::Relaxed).max(1))
    }
}

/// The cache of one resource type across every cluster.
pub struct Cacher {
    /// The definition that started the cache. Its prefix and scope are those of every request it serves;
    /// its version and kind need not be (each request serves objects with its own `Head`).
    def: Arc<ResourceDef>,
    metrics: CacheMetrics,
    /// Store prefix of the type in every cluster (`/registry/core/configmaps/`).
    prefix: String,
    /// Every cache's history bytes, shared by the caches of one `WatchCache`.
    all_history: Arc<HistoryBytes>,
    /// Guards the objects, history and watcher slots. A std `RwLock`: it is never held across an await,
    /// reads (snapshots for lists, registrations) are constant-time clones and may run side by side,
    /// and the single writer is the ingest task. Lock order: `state` only; no other lock is taken inside.
    state: RwLock<State>,
    /// The applied revision and phase, for readers waiting until the cache is fresh enough.
    progress: watch::Sender<(Phase, Revision)>,
    next_id: AtomicU64,
    /// Turned true to stop the ingest task (eviction).
    halt: watch::Sender<bool>,
    /// Seconds since `epoch` of the last use, for idle eviction.
    last_used: AtomicU64,
    epoch: Instant,
}

impl Cacher {
    /// The pool of histories this cache's is in.
    fn history_pool(&self) -> &Pool {
        self.all_history.pool(self.def.custom.is_some())
    }

    fn new(def: Arc<ResourceDef>, prefix: String, metrics: CacheMetrics, all_history: Arc<HistoryBytes>) -> Arc<Self> {
        let sep = Head::of(&def).sep();
        all_history.pool(def.custom.is_some()).caches.fetch_add(1, Ordering::AcqRel);
        Arc::new(Cacher {
            def,
            metrics,
            prefix,
            all_history,
            state: RwLock::new(State {
                objects: Objects::new(),
                runs: Runs::new(sep),
                history: VecDeque::new(),
                history_bytes: 0,
                history_from: 0,
                revision: 0,
                slots: HashMap::new(),
                by_cluster: HashMap::new(),
                wildcard: Vec::new(),
                written: 0,
                packing: false,
                packed: false,
            }),
            progress: watch::Sender::new((Phase::Loading, 0)),
            next_id: AtomicU64::new(1),
            halt: watch::Sender::new(false),
            last_used: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    fn touch(&self) {
        self.last_used.store(self.epoch.elapsed().as_secs(), Ordering::Relaxed);
    }

    /// The counters this cache reports to.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// Every change up to this revision is applied.
    pub fn revision(&self) -> Revision {
        self.progress.borrow().1
    }

    /// Wait until the cache serves, and has applied every change up to `rev` (if given), for at most
    /// `patience`. Returns the applied revision, or `None` if it did not get there in time.
    pub async fn wait_for(&self, rev: Option<Revision>, patience: Duration) -> Option<Revision> {
        let mut rx = self.progress.subscribe();
        let fresh = |p: &(Phase, Revision)| p.0 == Phase::Serving && rev.is_none_or(|r| p.1 >= r);
        let stopped = |p: &(Phase, Revision)| p.0 == Phase::Stopped;
        let seen = tokio::time::timeout(patience, rx.wait_for(|p| fresh(p) || stopped(p)))
            .await
            .ok()
            .and_then(|r| r.ok().map(|p| *p));
        seen.filter(fresh).map(|p| p.1)
    }

    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A panic while holding the lock leaves no half-applied event behind (each event is applied by
        // assignments that cannot fail midway), so the state stays usable.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    fn range_prefix(&self, scope: &Scope) -> String {
        match (&scope.cluster, &scope.namespace) {
            (None, _) => self.prefix.clone(),
            (Some(c), Some(ns)) if self.def.namespaced => format!("{}{c}/{ns}/", self.prefix),
            (Some(c), _) => format!("{}{c}/", self.prefix),
        }
    }

    /// Whether a key is in a scope.
    pub fn in_scope(&self, scope: &Scope, key: &str) -> bool {
        let Some(k) = keys::parse(&self.prefix, key, self.def.namespaced) else {
            return false;
        };
        scope.cluster.as_deref().is_none_or(|c| c == k.cluster)
            && (!self.def.namespaced || scope.namespace.is_none() || scope.namespace.as_deref() == k.namespace)
    }

    /// The current objects in scope. Constant time under the lock: the map is shared, not copied.
    /// A list across every cluster also starts a packing pass when one is due (see `pack`): lists of
    /// the whole cache are what packing serves, so a type nobody lists that way is never packed.
    pub fn snapshot(self: &Arc<Self>, scope: &Scope) -> Snapshot {
        self.touch();
        // Runs span clusters and namespaces: only a list of everything can send them whole.
        let whole = scope.cluster.is_none() && scope.namespace.is_none();
        let (objects, runs, revision, pack) = {
            let st = self.lock_read();
            let pack = scope.cluster.is_none() && !st.packing && pack::due(st.objects.len(), st.written);
            (st.objects.clone(), whole.then(|| Box::new(st.runs.clone())), st.revision, pack)
        };
        if pack {
            self.start_packing();
        }
        self.snapshot_of(objects, runs, revision, scope)
    }

    fn start_packing(self: &Arc<Self>) {
        let mut st = self.lock_write();
        if st.packing || !pack::due(st.objects.len(), st.written) {
            return;
        }
        st.packing = true;
        st.written = 0;
        drop(st);
        tokio::spawn(pack::pass(self.clone()));
    }

    fn snapshot_of(&self, objects: Objects, runs: Option<Box<Runs>>, revision: Revision, scope: &Scope) -> Snapshot {
        let start = self.range_prefix(scope);
        let end = String::from_utf8(keys::prefix_end(&start)).unwrap_or_default();
        let namespace = match (&scope.cluster, &scope.namespace) {
            (None, Some(ns)) if self.def.namespaced => Some((self.prefix.clone(), ns.clone())),
            _ => None,
        };
        Snapshot { objects, runs, start, end, namespace, revision }
    }

    /// The size of one object by key, without counting as a use (a cache only written through does not
    /// stay for it).
    pub fn size_of(&self, key: &str) -> Option<usize> {
        self.lock_read().objects.get(key).map(Entry::len)
    }

    /// One object by key.
    pub fn get(&self, key: &str) -> (Option<Entry>, Revision) {
        self.touch();
        let st = self.lock_read();
        (st.objects.get(key).cloned(), st.revision)
    }

    /// Register a watcher atomically with its starting point, so no event falls between the two. The
    /// events queued for it are charged to `account` while they wait.
    pub fn register(
        self: &Arc<Self>,
        scope: Scope,
        start: Start,
        account: Option<Arc<Account>>,
    ) -> Result<Registration, TooOld> {
        // First under the shared lock: a store-fed watcher asks before each of its events whether it can
        // move back here, and while it is behind the history the answer must not cost the write lock.
        if let Start::After(rev) = start {
            let oldest = self.lock_read().history_from;
            if rev < oldest {
                return Err(TooOld { oldest });
            }
        }
        self.touch();
        let queue = Queue::new(account);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock_write();
        let (snapshot, replay, revision) = match start {
            Start::Snapshot => {
                // No runs: a watch sends its initial objects one event each.
                (Some(self.snapshot_of(st.objects.clone(), None, st.revision, &scope)), Vec::new(), st.revision)
            }
            Start::After(rev) => {
                if rev < st.history_from {
                    return Err(TooOld { oldest: st.history_from });
                }
                let first = st.history.partition_point(|e| e.revision <= rev);
                let replay =
                    st.history.range(first..).filter(|e| self.in_scope(&scope, &e.key)).cloned().collect::<Vec<_>>();
                // A resume point the cache has not reached yet is fine: events up to it are the client's
                // already, and the watcher skips them as they arrive.
                (None, replay, rev)
            }
        };
        match &scope.cluster {
            Some(c) => st.by_cluster.entry(c.as_str().into()).or_default().push(id),
            None => st.wildcard.push(id),
        }
        st.slots.insert(id, Slot { scope, queue: queue.clone() });
        drop(st);
        Ok(Registration { snapshot, replay, revision, queue, id, cacher: self.clone() })
    }

    fn unregister(&self, id: u64) {
        let mut st = self.lock_write();
        remove_slot(&mut st, id);
    }

    /// Number of registered watchers.
    pub fn watchers(&self) -> usize {
        self.lock_read().slots.len()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.lock_read().objects.len()
    }

    /// Whether no object is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached form of a stored object, or `None` for a key of the other scope: clusters may define
    /// the same custom resource as namespaced and as cluster-scoped, and their objects share the
    /// prefix, but each cluster's are served by the cache of its own definition. (Failing on them
    /// instead would let one tenant stop every other tenant's cache of that resource.)
    fn entry_of(&self, registry: &Registry, kv: &KeyValue) -> Result<Option<Entry>, StoreError> {
        let Some(cluster) = keys::parse(&self.prefix, &kv.key, self.def.namespaced).map(|k| k.cluster) else {
            return Ok(None);
        };
        // One object that does not read back (written before writes were checked for it, or by
        // another program) is left out and logged: failing here would stop every tenant's cache of
        // the resource, over and over, on each reload.
        let obj = match registry.decode(&self.def, cluster, kv) {
            Ok(obj) => obj,
            Err(e) => {
                tracing::error!(key = %kv.key, error = %e.message, "an object in the store does not read back; the watch cache leaves it out");
                return Ok(None);
            }
        };
        Ok(Some(Entry::new(obj, kv.mod_revision).map_err(|e| StoreError::Internal(e.to_string()))?))
    }

    /// Replace everything with a fresh load; watchers of the old state are cut off to catch up from the
    /// store (their resume points may be older than the new history).
    fn reset(&self, objects: Objects, revision: Revision) {
        let mut st = self.lock_write();
        st.objects = objects;
        st.runs.clear();
        // None of a load's objects is in a block: the first list across clusters packs them.
        st.written = st.objects.len();
        st.packed = false;
        self.forget_history(&mut st);
        st.history_from = revision;
        st.revision = revision;
        for (_, slot) in st.slots.drain() {
            slot.queue.close(Cutoff::Reloaded);
        }
        st.by_cluster.clear();
        st.wildcard.clear();
        drop(st);
        self.metrics.initializations.with_label_values(&[self.def.metric_label()]).inc();
        self.progress.send_replace((Phase::Serving, revision));
    }

    /// Apply one revision's store events (one transaction's): update the objects, append to history,
    /// queue for interested watchers, all under one hold of the lock, so that nobody (a list, a new
    /// watcher's snapshot, a bookmark) ever sees part of a transaction as the cache's revision.
    fn apply(&self, registry: &Registry, evs: Vec<WatchEvent>) -> Result<(), StoreError> {
        let Some(revision) = evs.iter().map(WatchEvent::revision).max() else { return Ok(()) };
        let mut built = Vec::with_capacity(evs.len());
        for ev in evs {
            built.extend(match ev {
                WatchEvent::Progress(_) => None,
                WatchEvent::Put { kv, .. } => match self.entry_of(registry, &kv)? {
                    Some(entry) => Some((Arc::from(kv.key.as_str()), entry, false)),
                    // A key this cache holds whose new value does not read back: the version held is
                    // not the object any more, so it goes, as if deleted, rather than be served as current.
                    None => self.gone(&kv.key, revision)?,
                },
                WatchEvent::Delete { key, revision, .. } => self.gone(&key, revision)?,
            });
        }
        let mut st = self.lock_write();
        let count = built.len();
        if count > 0 && revision <= st.revision {
            // A revision whose events came in two parts, which etcd never sends and the stores'
            // streams never hand out: watchers took the first part's last event for the revision's
            // end, and skip the rest. Applied, so the cache holds what the store does; said loudly,
            // as it breaks what watches rely on.
            tracing::error!(revision, applied = st.revision, resource = %self.def.plural,
                "watch events of a revision the cache has applied; watchers may miss them");
        }
        for (i, (key, object, deleted)) in built.into_iter().enumerate() {
            let prev = if deleted { st.delete(&key) } else { st.set(key.clone(), object.clone()) };
            // The history keeps it long after the map let it go: in a block, it would keep the block.
            let prev = if st.packed { prev.map(|p| p.detached()) } else { prev };
            let key_hash = super::sent::key_hash(&key);
            let ends = i + 1 == count;
            let event = Arc::new(Event {
                key,
                key_hash,
                ends,
                revision,
                object,
                prev,
                deleted,
                selectable: Default::default(),
            });
            let size = event.size();
            st.history.push_back(event.clone());
            st.history_bytes += size;
            self.history_pool().bytes.fetch_add(size, Ordering::AcqRel);
            self.trim_history(&mut st);
            self.dispatch(&mut st, &event);
            st.written += 1;
        }
        st.revision = st.revision.max(revision);
        let now = st.revision;
        drop(st);
        self.progress.send_replace((Phase::Serving, now));
        Ok(())
    }

    /// The deletion of `key` at `revision`, if this cache holds it: its last version, stamped with
    /// the delete's revision, as kube-apiserver sends deleted objects.
    fn gone(&self, key: &str, revision: Revision) -> Result<Option<(Arc<str>, Entry, bool)>, StoreError> {
        let last = self.lock_read().objects.get(key).cloned();
        match last {
            Some(last) => Ok(Some((Arc::from(key), restamp(&self.def, &last, revision)?, true))),
            None => Ok(None),
        }
    }

    /// Drop the oldest events past `HISTORY` or this cache's share of the histories' bytes.
    fn trim_history(&self, st: &mut State) {
        let share = self.history_pool().share();
        while st.history.len() > HISTORY || st.history_bytes > share {
            let Some(old) = st.history.pop_front() else { break };
            st.history_from = old.revision;
            let size = old.size();
            st.history_bytes -= size;
            self.history_pool().bytes.fetch_sub(size, Ordering::AcqRel);
        }
    }

    /// Empty the history, and take its bytes off every history's total.
    fn forget_history(&self, st: &mut State) {
        st.history.clear();
        self.history_pool().bytes.fetch_sub(std::mem::take(&mut st.history_bytes), Ordering::AcqRel);
    }

    fn dispatch(&self, st: &mut State, event: &Arc<Event>) {
        let Some(k) = keys::parse(&self.prefix, &event.key, self.def.namespaced) else { return };
        let mut targets: Vec<u64> = st.wildcard.clone();
        if let Some(ids) = st.by_cluster.get(k.cluster) {
            targets.extend_from_slice(ids);
        }
        let mut dead = Vec::new();
        for id in targets {
            let Some(slot) = st.slots.get(&id) else { continue };
            let ns_ok = !self.def.namespaced
                || slot.scope.namespace.is_none()
                || slot.scope.namespace.as_deref() == k.namespace;
            if !ns_ok {
                continue;
            }
            if !slot.queue.push(event.clone()) {
                self.metrics.lagging.with_label_values(&[self.def.metric_label()]).inc();
                dead.push(id);
            }
        }
        for id in dead {
            remove_slot(st, id);
        }
    }

    /// Load, then follow the store until stopped; reload when the store loses our place.
    async fn run(self: Arc<Self>, registry: Registry, mut stop: watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(100);
        let mut halt = self.halt.subscribe();
        loop {
            self.progress.send_modify(|p| p.0 = Phase::Loading);
            let res = tokio::select! {
                r = self.follow(&registry) => r,
                _ = stop.changed() => break,
                _ = halt.changed() => break,
            };
            match res {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, resource = %self.def.plural, "watch cache lost the store; reloading");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => break,
                        _ = halt.changed() => break,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        self.stop();
    }

    fn stop(&self) {
        let mut st = self.lock_write();
        for (_, slot) in st.slots.drain() {
            slot.queue.close(Cutoff::Reloaded);
        }
        st.by_cluster.clear();
        st.wildcard.clear();
        st.objects.clear();
        st.runs.clear();
        self.forget_history(&mut st);
        // No resume point is in a stopped cache's history: nothing would feed a watcher registered now.
        st.history_from = Revision::MAX;
        drop(st);
        self.progress.send_modify(|p| p.0 = Phase::Stopped);
    }

    async fn follow(&self, registry: &Registry) -> Result<(), StoreError> {
        let store = &registry.store;
        let mut objects = Objects::new();
        let at = crate::storage::range_pages(&**store, &self.prefix, LOAD_PAGE, |kvs| {
            for kv in kvs {
                if let Some(entry) = self.entry_of(registry, kv)? {
                    objects.insert(Arc::from(kv.key.as_str()), entry);
                }
            }
            Ok::<_, StoreError>(())
        })
        .await?;
        // The cache holds every key's last value itself, so it asks none of the store, which would read
        // one for every update and delete (etcd 3.4 for every event).
        let mut events = store.watch_current(&self.prefix, at).await?;
        self.reset(objects, at);
        // A transaction's events arrive together (etcd never splits a revision across watch
        // responses, and the store's stream hands a response's events out without waiting), so the
        // ones ready now at the first one's revision are all of it.
        let (mut held, mut ended) = (None, false);
        while !ended {
            let first = match held.take() {
                Some(ev) => ev,
                None => match events.next().await {
                    Some(ev) => ev?,
                    None => break,
                },
            };
            let revision = first.revision();
            let mut batch = vec![first];
            while let Some(ready) = events.next().now_or_never() {
                match ready {
                    Some(ev) => match ev? {
                        ev if ev.revision() == revision => batch.push(ev),
                        later => {
                            held = Some(later);
                            break;
                        }
                    },
                    None => {
                        ended = true;
                        break;
                    }
                }
            }
            self.apply(registry, batch)?;
        }
        Err(StoreError::Unavailable("store watch ended".into()))
    }
}

impl Drop for Cacher {
    fn drop(&mut self) {
        // However the cache ended (evicted, its task aborted), its history leaves the shared total.
        let bytes = std::mem::take(&mut self.lock_write().history_bytes);
        self.history_pool().bytes.fetch_sub(bytes, Ordering::AcqRel);
        self.history_pool().caches.fetch_sub(1, Ordering::AcqRel);
    }
}

fn remove_slot(st: &mut State, id: u64) {
    let Some(slot) = st.slots.remove(&id) else { return };
    let list = match &slot.scope.cluster {
        Some(c) => st.by_cluster.get_mut(c.as_str()),
        None => Some(&mut st.wildcard),
    };
    if let Some(list) = list {
        list.retain(|x| *x != id);
        if list.is_empty() {
            if let Some(c) = &slot.scope.cluster {
                st.by_cluster.remove(c.as_str());
            }
        }
    }
}

/// The same object with another resourceVersion.
fn restamp(def: &ResourceDef, entry: &Entry, revision: Revision) -> Result<Entry, StoreError> {
    let internal = |e: serde_json::Error| StoreError::Internal(e.to_string());
    let mut obj = entry.headless().map_err(internal)?;
    crate::meta::metadata_mut(&mut obj).insert("resourceVersion".into(), Value::String(revision.to_string()));
    Entry::typed(&def.api_version(), &def.kind, &obj, revision).map_err(internal)
}

/// Every resource type's cache over one store.
pub struct WatchCache {
    registry: Registry,
    metrics: CacheMetrics,
    /// Every cache's history bytes together.
    all_history: Arc<HistoryBytes>,
    /// One cache per resource prefix. A `DashMap` because every watch and cached read looks its type up
    /// while new types are added rarely; it holds one entry per resource type, never per cluster.
    cachers: DashMap<String, Arc<Cacher>>,
    stop: watch::Receiver<bool>,
    /// Ingest tasks, awaited at shutdown so the store is released when the server stops. A std `Mutex`:
    /// pushed to when a type's cache starts and drained once, never held across an await.
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl WatchCache {
    /// Caches over `registry`'s store; they stop when `stop` turns true.
    pub fn new(registry: Registry, metrics: CacheMetrics, stop: watch::Receiver<bool>) -> Arc<Self> {
        Self::with_history(registry, metrics, stop, Arc::default())
    }

    /// Caches over another shard's store, whose history counts against the same bound as this one's:
    /// shards add stores, not memory.
    pub fn alongside(&self, registry: Registry) -> Arc<Self> {
        Self::with_history(registry, self.metrics.clone(), self.stop.clone(), self.all_history.clone())
    }

    fn with_history(
        registry: Registry,
        metrics: CacheMetrics,
        stop: watch::Receiver<bool>,
        all_history: Arc<HistoryBytes>,
    ) -> Arc<Self> {
        let cache = Arc::new(WatchCache {
            registry,
            metrics,
            all_history,
            cachers: DashMap::new(),
            stop,
            tasks: std::sync::Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&cache);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TRIM_EVERY);
            let mut ticks = 0u64;
            loop {
                tick.tick().await;
                let Some(cache) = weak.upgrade() else { return };
                // Shares shrink as caches start: a quiet cache gives its excess back here.
                for c in cache.cachers.iter() {
                    c.trim_history(&mut c.lock_write());
                }
                ticks += 1;
                if ticks.is_multiple_of(IDLE_CHECK.as_secs() / TRIM_EVERY.as_secs()) {
                    cache.evict_idle(IDLE_EVICT, IDLE_EVICT_CUSTOM);
                }
            }
        });
        cache
    }

    /// The cache of a resource type, started if needed; waits (up to `patience`) until it serves. A
    /// version stored as another gets that one's cache: it holds objects as stored, and readers of the
    /// other version convert what they take (see `registry::from_storage`).
    pub async fn cacher(&self, def: &Arc<ResourceDef>, patience: Duration) -> ApiResult<Arc<Cacher>> {
        let def = &crate::registry::stored_def(def);
        let key = self.key(def);
        for _ in 0..3 {
            let prefix = self.registry.collection(def, None, None);
            let cacher = self
                .cachers
                .entry(key.clone())
                .or_insert_with(|| {
                    let c = Cacher::new(def.clone(), prefix, self.metrics.clone(), self.all_history.clone());
                    let task = tokio::spawn(c.clone().run(self.registry.clone(), self.stop.clone()));
                    let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
                    tasks.retain(|t| !t.is_finished());
                    tasks.push(task);
                    c
                })
                .clone();
            cacher.touch();
            if cacher.wait_for(None, patience).await.is_some() {
                return Ok(cacher);
            }
            if cacher.progress.borrow().0 != Phase::Stopped {
                break;
            }
            self.cachers.remove_if(&key, |_, c| Arc::ptr_eq(c, &cacher));
        }
        Err(ApiError::timeout(format!("the watch cache for {} is not ready; retry", def.plural)))
    }

    /// The cache of a resource type if it is already serving.
    pub fn existing(&self, def: &ResourceDef) -> Option<Arc<Cacher>> {
        let c = self.cachers.get(&self.key(def))?.clone();
        let serving = c.progress.borrow().0 == Phase::Serving;
        serving.then_some(c)
    }

    /// Which cache serves `def`: one per store prefix. Clusters' CRDs for one custom resource may differ
    /// in version and kind, which only change each object's `Head`, so one cache serves them all; they
    /// may also differ in scope, which changes the key layout, so a prefix has at most two caches.
    fn key(&self, def: &ResourceDef) -> String {
        let prefix = self.registry.collection(def, None, None);
        match def.custom {
            Some(_) => format!("{prefix}#{}", if def.namespaced { "namespaced" } else { "cluster" }),
            None => prefix,
        }
    }

    /// Drop caches nobody watched or read for `idle` (a custom resource's: `idle_custom`).
    pub fn evict_idle(&self, idle: Duration, idle_custom: Duration) {
        self.cachers.retain(|_, c| {
            let idle = if c.def.custom.is_some() { idle_custom } else { idle };
            let quiet =
                c.epoch.elapsed().as_secs().saturating_sub(c.last_used.load(Ordering::Relaxed)) >= idle.as_secs();
            if quiet && c.watchers() == 0 {
                c.halt.send_replace(true);
                return false;
            }
            true
        });
    }

    /// Stop every cache and wait until their tasks (and store watches) are gone.
    pub async fn shutdown(&self) {
        for c in self.cachers.iter() {
            c.halt.send_replace(true);
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = t.await;
        }
        self.cachers.clear();
    }

    /// Count a read the cache could have served.
    pub fn count_read(&self, def: &ResourceDef, from_cache: bool) {
        let by = if from_cache { "cache" } else { "store" };
        self.metrics.reads.with_label_values(&[def.metric_label(), by]).inc();
    }

    /// Number of resource types cached.
    pub fn len(&self) -> usize {
        self.cachers.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cachers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::respond::Piece;

    /// A store-fed watcher tries to move back onto its cache before each event; once that cache has
    /// been stopped (evicted while idle), nothing would feed or close a slot in it, so it must refuse.
    #[test]
    fn a_stopped_cache_takes_no_watcher_at_a_resume_point() {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().cache;
        let c = Cacher::new(def, "/registry/core/configmaps/".into(), metrics, Arc::default());
        let scope = Scope { cluster: Some("a".into()), namespace: None };
        assert!(c.register(scope.clone(), Start::After(5), None).is_ok(), "a serving cache takes it");
        c.stop();
        assert!(c.register(scope, Start::After(5), None).is_err(), "a stopped one does not");
    }

    /// What selectors read of an event is worked out by its first watcher with selectors, for all.
    #[test]
    fn an_events_selectable_parts_are_worked_out_once_and_hold_only_what_selectors_read() {
        let cm = crate::resources::find("", "v1", "configmaps").unwrap();
        let obj = |labels: Value| serde_json::json!({"metadata": {"name": "x", "labels": labels}, "data": {"big": "x".repeat(100_000)}});
        let (prev, object) =
            (Entry::new(obj(serde_json::json!({"a": "1"})), 2), Entry::new(obj(serde_json::json!({})), 3));
        let ev = Event {
            key: Arc::from("/k"),
            key_hash: 0,
            ends: true,
            revision: 3,
            object: object.unwrap(),
            prev: Some(prev.unwrap()),
            deleted: false,
            selectable: Default::default(),
        };
        let head = Head::of(&cm);
        let std::borrow::Cow::Borrowed(first) = ev.selectable(&head).unwrap() else { panic!("not kept") };
        let again = ev.selectable(&head).unwrap();
        assert!(std::ptr::eq(first, &*again), "worked out once");
        assert_eq!(again.prev.as_ref().unwrap()["metadata"]["labels"], serde_json::json!({"a": "1"}));
        assert!(again.object.get("data").is_none(), "{}", again.object);
        assert!(SELECTABLE_BYTES.load(Ordering::Acquire) >= ev.selectable.get().unwrap().weight);
    }

    /// One cached object is served in whatever version and kind each request's definition names, with
    /// every other field as stored, and a delete's restamp keeps it so.
    #[test]
    fn an_entry_is_served_with_each_requests_head() {
        let cm = crate::resources::find("", "v1", "configmaps").unwrap();
        let deploy = crate::resources::find("apps", "v1", "deployments").unwrap();
        let obj = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "resourceVersion": "3"}, "data": {"k": "v"}
        });
        let e = Entry::new(obj.clone(), 3).unwrap();
        assert!(!e.body().windows(4).any(|w| w == b"kind"), "the head is not stored: {:?}", e.body());
        assert_eq!(e.value(&Head::of(&cm)).unwrap(), obj);
        let as_deployment = e.value(&Head::of(&deploy)).unwrap();
        assert_eq!((&as_deployment["apiVersion"], &as_deployment["kind"]), (&"apps/v1".into(), &"Deployment".into()));
        assert_eq!((&as_deployment["metadata"], &as_deployment["data"]), (&obj["metadata"], &obj["data"]));
        let raw: Value = serde_json::from_slice(&e.json(&Head::of(&deploy))).unwrap();
        assert_eq!(raw, as_deployment);

        let deleted = restamp(&cm, &e, 9).unwrap();
        let v = deleted.value(&Head::of(&cm)).unwrap();
        assert_eq!((deleted.revision, &v["metadata"]["resourceVersion"], &v["data"]), (9, &"9".into(), &obj["data"]));
        // An object with nothing but its head is still one.
        let bare = Entry::new(serde_json::json!({"kind": "ConfigMap"}), 1).unwrap();
        assert_eq!(bare.value(&Head::of(&cm)).unwrap(), serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert!(Entry::new(serde_json::json!([1]), 1).is_err());
    }

    fn cacher_with(keys: &[&str]) -> Arc<Cacher> {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().cache;
        let c = Cacher::new(def, "/registry/core/configmaps/".into(), metrics, Arc::default());
        for k in keys {
            put(&c, k, 1);
        }
        c
    }

    fn put(c: &Cacher, key: &str, revision: Revision) {
        let entry = Entry::new(serde_json::json!({"key": key, "rv": revision}), revision).unwrap();
        let mut st = c.lock_write();
        st.set(key.into(), entry);
        st.revision = revision;
    }

    fn keys_of(s: &Snapshot) -> Vec<&str> {
        s.iter().map(|(k, _)| &**k).collect()
    }

    const P: &str = "/registry/core/configmaps/";

    /// An update the cache cannot read back takes the object out (watchers see it deleted) rather than
    /// leave the old version served as current.
    #[test]
    fn an_update_that_does_not_read_back_takes_the_object_out() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn crate::storage::Store> =
            Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let registry = Registry::new(store, "/registry");
        let c = cacher_with(&[]);
        let key = format!("{P}a/default/x");
        let put = |value: &[u8], revision| WatchEvent::Put {
            kv: KeyValue { key: key.clone(), value: value.to_vec(), mod_revision: revision },
            prev: None,
            created: revision == 2,
        };
        c.apply(&registry, vec![put(br#"{"metadata":{"name":"x","namespace":"default"}}"#, 2)]).unwrap();
        assert!(c.lock_read().objects.get(key.as_str()).is_some());
        c.apply(&registry, vec![put(b"{not json", 3)]).unwrap();
        let st = c.lock_read();
        assert!(st.objects.get(key.as_str()).is_none(), "the old version is not served as current");
        let last = st.history.back().unwrap();
        assert!(last.deleted && last.revision == 3);
    }

    /// One transaction's events reach a watcher together, the last marked as its revision's end, and
    /// the cache's revision moves once they are all queued: a bookmark or a list at that revision
    /// never claims part of a transaction.
    #[tokio::test]
    async fn one_transactions_events_are_applied_together_and_the_last_ends_its_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn crate::storage::Store> =
            Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let registry = Registry::new(store, "/registry");
        let c = cacher_with(&[]);
        let reg = c.register(Scope { cluster: None, namespace: None }, Start::After(0), None).unwrap();
        let put = |name: &str, revision| WatchEvent::Put {
            kv: KeyValue {
                key: format!("{P}a/default/{name}"),
                value: format!(r#"{{"metadata":{{"name":"{name}","namespace":"default"}}}}"#).into_bytes(),
                mod_revision: revision,
            },
            prev: None,
            created: true,
        };
        c.apply(&registry, vec![put("x", 5), put("y", 5), put("z", 5)]).unwrap();
        assert_eq!(c.revision(), 5);
        let mut got = Vec::new();
        for _ in 0..3 {
            let ev = reg.recv().await.unwrap();
            got.push((ev.key.rsplit('/').next().unwrap().to_string(), ev.revision, ev.ends));
        }
        let want = [("x", 5, false), ("y", 5, false), ("z", 5, true)].map(|(k, r, e)| (k.to_string(), r, e));
        assert_eq!(got, want);
        assert!(reg.is_drained());
        // More of revision 5 later (which no store sends) is still applied: the cache holds what the
        // store does.
        c.apply(&registry, vec![put("w", 5)]).unwrap();
        assert_eq!(c.revision(), 5);
        assert!(c.get(&format!("{P}a/default/w")).0.is_some());
    }

    #[test]
    fn custom_resources_caches_share_their_own_pool_of_history() {
        let all = Arc::new(HistoryBytes::default());
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().cache;
        let configmaps = Cacher::new(def, P.into(), metrics, all.clone());
        // A tenant's thousand CRDs, each read once, start a thousand caches of custom resources.
        all.pool(true).caches.fetch_add(1000, Ordering::AcqRel);
        assert_eq!(configmaps.history_pool().share(), HISTORY_BYTES, "built-in types keep their share");
        assert_eq!(all.pool(true).share(), ALL_HISTORIES_BYTES / 1000);
        drop(configmaps);
        assert_eq!(all.pool(false).caches.load(Ordering::Acquire), 0);
    }

    #[test]
    fn snapshots_hold_their_scope_in_key_order() {
        let names = ["a/x/1", "a/y/1", "ab/x/1", "b/x/2", "b/x/1", "b/y/1"].map(|k| format!("{P}{k}"));
        let c = cacher_with(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let scope = |cluster: Option<&str>, ns: Option<&str>| Scope {
            cluster: cluster.map(str::to_string),
            namespace: ns.map(str::to_string),
        };
        let all = c.snapshot(&scope(None, None));
        assert_eq!(keys_of(&all).len(), 6);
        assert!(keys_of(&all).is_sorted());
        let x_everywhere = c.snapshot(&scope(None, Some("x")));
        let want: Vec<String> = ["a/x/1", "ab/x/1", "b/x/1", "b/x/2"].iter().map(|k| format!("{P}{k}")).collect();
        assert_eq!(keys_of(&x_everywhere), want);
        // Cluster `a` is not a prefix match for `ab`.
        let a = c.snapshot(&scope(Some("a"), None));
        assert_eq!(keys_of(&a), [format!("{P}a/x/1"), format!("{P}a/y/1")]);
        assert_eq!(keys_of(&c.snapshot(&scope(Some("b"), Some("y")))), [format!("{P}b/y/1")]);
        // Resuming at a key continues from it.
        assert_eq!(
            x_everywhere.between(Bound::Included(&want[2]), None).map(|(k, _)| &**k).collect::<Vec<_>>(),
            &want[2..]
        );
    }

    #[test]
    fn a_snapshot_keeps_its_revision_while_the_cache_moves_on() {
        let c = cacher_with(&[&format!("{P}a/x/1"), &format!("{P}a/x/2")]);
        let all = Scope { cluster: None, namespace: None };
        let before = c.snapshot(&all);
        put(&c, &format!("{P}a/x/1"), 5);
        put(&c, &format!("{P}a/x/3"), 6);
        c.lock_write().delete(&format!("{P}a/x/2"));
        let rv = |s: &Snapshot| s.iter().map(|(_, e)| e.revision).collect::<Vec<_>>();
        assert_eq!((rv(&before), before.revision), (vec![1, 1], 1), "the old snapshot is unchanged");
        let after = c.snapshot(&all);
        assert_eq!((rv(&after), after.revision), (vec![5, 6], 6));
    }

    #[test]
    fn list_items_are_handed_out_once_each_across_chunks() {
        let keys: Vec<String> = (0..50).map(|i| format!("{P}c/x/{i:03}")).collect();
        let c = cacher_with(&keys.iter().map(String::as_str).collect::<Vec<_>>());
        let snapshot = c.snapshot(&Scope { cluster: None, namespace: None });
        let head = Head::of(c.def.as_ref());
        let mut items = super::super::read::Items::all(snapshot, head.clone());
        assert_eq!(items.values().unwrap().len(), 50);
        // Take 7 a call and decline the 8th, which must be offered first in the next call.
        let (mut taken, mut declined, mut calls) = (Vec::new(), None::<Vec<u8>>, 0);
        loop {
            let (mut offered, mut n) = (Vec::new(), 0);
            let done = items.fill(&mut |piece| {
                let Piece::Object(head, rest) = piece else { panic!("nothing is packed") };
                let json = [head, rest].concat();
                offered.push(json.clone());
                if n == 7 {
                    return false;
                }
                n += 1;
                taken.push(json);
                true
            });
            if let Some(d) = declined.take() {
                assert_eq!(offered.first(), Some(&d), "the declined object comes first next time");
            }
            calls += 1;
            if done {
                break;
            }
            declined = offered.last().cloned();
        }
        let want: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| format!(r#"{{"kind":"ConfigMap","apiVersion":"v1","key":"{k}","rv":1}}"#).into_bytes())
            .collect();
        assert_eq!(taken, want, "every object once, in order");
        assert_eq!(calls, 8);
        assert!(items.fill(&mut |_| panic!("nothing is left")));
        assert!(items.values().unwrap().is_empty());
    }

    /// The items of a list across clusters served with `head`, as the JSON they are sent as, with how
    /// many runs they came in; `decline` turns down every other piece (each must come back first).
    pub(super) fn listed(c: &Arc<Cacher>, head: Head, decline: bool) -> (Vec<u8>, usize) {
        list_of(c.snapshot(&Scope { cluster: None, namespace: None }), head, decline)
    }

    /// The same for a snapshot taken already.
    pub(super) fn list_of(snapshot: Snapshot, head: Head, decline: bool) -> (Vec<u8>, usize) {
        let mut items = super::super::read::Items::all(snapshot, head);
        let (mut out, mut runs, mut offered) = (Vec::new(), 0, 0);
        while !items.fill(&mut |piece| {
            offered += 1;
            if decline && offered % 2 == 0 {
                return false;
            }
            match piece {
                Piece::Object(head, rest) => out.extend_from_slice(&[b",", head, rest].concat()),
                Piece::Run(run) => {
                    out.extend_from_slice(run);
                    runs += 1;
                }
            }
            true
        }) {}
        (out, runs)
    }

    /// Once packed, a list across clusters hands the objects out as one run per block, its bytes the
    /// same as the copied objects' were, also when pieces are declined; a list served with another
    /// head (a custom resource's other version) finds no runs and gets each object with its own head.
    #[tokio::test]
    async fn packed_objects_are_listed_in_runs_of_the_same_bytes() {
        let keys: Vec<String> = (0..3000).map(|i| format!("{P}c{}/x/{i:04}", i % 7)).collect();
        let c = cacher_with(&keys.iter().map(String::as_str).collect::<Vec<_>>());
        let (cm, deploy) = (Head::of(&c.def), Head::of(&crate::resources::find("apps", "v1", "deployments").unwrap()));
        let (before, runs) = listed(&c, cm.clone(), false);
        assert_eq!(runs, 0, "nothing is packed yet");
        c.lock_write().written = keys.len();
        let _ = c.snapshot(&Scope { cluster: None, namespace: None });
        while c.lock_read().packing {
            tokio::task::yield_now().await;
        }
        // 1,024 objects a step: three blocks, each a run a list sends without walking its objects.
        assert_eq!(c.lock_read().runs.len(), 3);
        assert_eq!(listed(&c, cm.clone(), false), (before.clone(), 3));
        assert_eq!(listed(&c, cm.clone(), true).0, before, "declined pieces come back");
        // A declined run is held, and what is left, parsed (for a Table), still has its objects.
        let mut items =
            super::super::read::Items::all(c.snapshot(&Scope { cluster: None, namespace: None }), cm.clone());
        assert!(!items.fill(&mut |piece| !matches!(piece, Piece::Run(_))));
        assert_eq!(items.values().unwrap().len(), keys.len());
        // A delete and a rewrite in the first block: it goes in three runs and an object.
        let mut sorted = keys.clone();
        sorted.sort();
        c.lock_write().delete(&sorted[100]);
        put(&c, &sorted[200], 7);
        let want: Vec<u8> = c
            .snapshot(&Scope { cluster: None, namespace: None })
            .iter()
            .flat_map(|(_, e)| [b",", cm.bytes(), e.body()].concat())
            .collect();
        assert_eq!(want.len(), before.len() - (before.len() / keys.len()), "one object fewer");
        assert_eq!(c.lock_read().runs.len(), 2, "the first block's run is forgotten");
        assert_eq!(listed(&c, cm.clone(), false), (want.clone(), 5));
        assert_eq!(listed(&c, cm.clone(), true).0, want, "declined pieces come back");
        // A new object between two of the second block's: that run is forgotten too, and the list has it
        // in its place, the block's objects around it in two runs.
        put(&c, &format!("{}+", sorted[1500]), 8);
        assert_eq!(c.lock_read().runs.len(), 1);
        let want: Vec<u8> = c
            .snapshot(&Scope { cluster: None, namespace: None })
            .iter()
            .flat_map(|(_, e)| [b",", cm.bytes(), e.body()].concat())
            .collect();
        assert_eq!(listed(&c, cm, false), (want, 6));
        let (other, runs) = listed(&c, deploy, false);
        assert_eq!(runs, 0);
        let items: Value = serde_json::from_slice(&[&b"["[..], &other[1..], b"]"].concat()).unwrap();
        let items = items.as_array().unwrap();
        assert_eq!(items.len(), keys.len());
        assert!(items.iter().all(|i| i["kind"] == "Deployment" && i["apiVersion"] == "apps/v1"));
        assert_eq!(items[5]["key"], sorted[5].as_str());
    }
}
