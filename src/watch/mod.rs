//! Watch: one request's stream of Kubernetes watch events, fed by the shared watch cache (`cache`), with
//! the initial-state, selector-transition, bookmark and timeout rules of kube-apiserver. A resume point
//! older than the cache's history is served by a store watch of its own (`direct`) rather than refused,
//! so watches survive a kgate restart; only a point the store compacted away gets 410.

pub mod cache;
mod direct;
pub mod read;
mod sent;

use sent::Sent;

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::budget::{Account, Charge};
use crate::registry::{ListOptions, Registry, RvMatch};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::{Revision, StoreError};
use cache::{Cutoff, Entry, Event, Head, Registration, Scope, Snapshot, Start, WatchCache, HANDLE};

/// How often a bookmark is sent when the client allows them.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// How long a watch whose time is up waits for the rest of a transaction's events it has only part
/// of (they are normally queued already) before it ends anyway, once none of them is waiting.
const CLOSING_GRACE: Duration = Duration::from_secs(5);
/// How often a closing watch checks whether the cache has published the revision it is finishing.
const CLOSING_RECHECK: Duration = Duration::from_millis(50);
/// How long after the grace a watch whose client is still reading the rest of its last revision may
/// go on sending it: a client that reads a byte a minute does not hold a watcher for ever.
const CLOSING_LIMIT: Duration = Duration::from_secs(60);
/// kube-apiserver's `--min-request-timeout`, the base of the random default watch timeout.
const MIN_REQUEST_TIMEOUT: u64 = 1800;
/// How long a read waits for the cache to catch up with a revision before it goes to the store instead.
pub const FRESHNESS_PATIENCE: Duration = Duration::from_millis(250);
/// How long a request waits for a cache that is loading.
pub const LOAD_PATIENCE: Duration = Duration::from_secs(30);

/// A watch response body: newline-delimited JSON events.
pub type WatchBody = std::pin::Pin<Box<dyn futures::Stream<Item = Bytes> + Send>>;

/// How each event's object is rendered when it is not plain JSON (Table, PartialObjectMetadata).
pub type Render = Arc<dyn Fn(&Value, bool) -> Value + Send + Sync>;

/// One watch request.
pub struct WatchRequest {
    /// Who pays for what the watch holds while it sends (see `budget`): its initial objects, the
    /// events queued for it.
    pub account: Option<Arc<Account>>,
    /// Resource type.
    pub def: Arc<ResourceDef>,
    /// One cluster, or `None` for every cluster.
    pub cluster: Option<String>,
    /// Namespace filter from the path.
    pub namespace: Option<String>,
    /// Selectors and resourceVersion options.
    pub opts: ListOptions,
    /// Renders objects; `None` sends them as stored (the fast path: no parsing).
    pub render: Option<Render>,
}

/// An object to send: a cached one's serialised JSON after its head (`cache::Entry::body`; the
/// watcher puts its own head in front), a whole object's JSON, or a tree to render.
enum Payload {
    Cached(Bytes),
    Json(Bytes),
    Value(Value),
}

/// What a watch still has to send of its initial state. Objects of the cache are referenced, never
/// copied, as kube-apiserver's watch cache hands each watcher pointers to its one copy; what that
/// keeps alive is charged to the watch's account until sent.
enum Initial {
    /// Nothing (left).
    None,
    /// A snapshot of the whole cache (a watch across every cluster), read as it is sent, the selectors
    /// applied to each object as it comes; where the next object starts. Not charged: a snapshot shares
    /// the cache's objects, and only administrators (or what root's RBAC lets) watch across clusters.
    Snapshot(Snapshot, Bound<Arc<str>>),
    /// The objects of one cluster (or namespace) that pass the selectors, taken at once so that no
    /// snapshot of every tenant's objects is kept while a tenant's client reads.
    Picked {
        items: std::vec::IntoIter<Entry>,
        /// The last one handed out, whose allocation is charged until an object in another one comes.
        last: Option<Entry>,
    },
    /// Objects read from the store (the cache was not fresh enough), as JSON.
    Read(std::vec::IntoIter<Bytes>),
}

impl Initial {
    /// Bytes it keeps alive, to charge.
    fn holds(&self) -> u64 {
        match self {
            Initial::None | Initial::Snapshot(..) => 0,
            Initial::Picked { items, .. } => {
                let mut prev = None;
                items.as_slice().iter().map(|e| HANDLE + e.holds_after(prev.replace(e))).sum()
            }
            Initial::Read(items) => items.as_slice().iter().map(|b| b.len() as u64).sum(),
        }
    }
}

fn line(kind: &str, object: Value) -> Bytes {
    let event = json!({"type": kind, "object": object});
    let mut s = crate::proto::order::to_vec_untyped("meta.k8s.io/v1", "WatchEvent", &event);
    s.push(b'\n');
    Bytes::from(s)
}

/// Bodies at least this long go out as slices of the cached object, after a line's opening and before
/// its end, rather than copied into a line of their own: a watcher whose client reads slowly then holds
/// a reference to the one copy the cache has, as kube-apiserver's watchers hold pointers to it. Shorter
/// ones are copied: one chunk is cheaper to send than three.
const SHARED_BODY: usize = 16 * 1024;

/// An event's line for a cached body: one chunk, or for a long body three (`pieces` gets the last two).
fn raw_line(kind: &str, head: &Head, body: &Bytes, pieces: &mut VecDeque<Bytes>) -> Bytes {
    let shared = body.len() >= SHARED_BODY;
    let mut s = Vec::with_capacity(head.bytes().len() + if shared { 0 } else { body.len() } + 32);
    s.extend_from_slice(b"{\"type\":\"");
    s.extend_from_slice(kind.as_bytes());
    s.extend_from_slice(b"\",\"object\":");
    s.extend_from_slice(head.bytes());
    if shared {
        pieces.push_back(body.clone());
        pieces.push_back(Bytes::from_static(b"}\n"));
        return Bytes::from(s);
    }
    s.extend_from_slice(body);
    s.extend_from_slice(b"}\n");
    Bytes::from(s)
}

fn error_line(e: &ApiError) -> Bytes {
    line("ERROR", e.to_status())
}

fn bookmark(def: &ResourceDef, rev: Revision, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rev.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta})
}

fn expired(requested: Revision, oldest: Revision) -> ApiError {
    ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
}

/// Where a watch is in ending at its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// Its time is not up.
    No,
    /// Its time is up: it sends the rest of its last revision, waiting for them until then.
    Until(tokio::time::Instant),
    /// The grace is over too: it ends as soon as nothing of the revision is waiting to be sent, or
    /// at `CLOSING_LIMIT`.
    Overdue,
}

/// Where a watcher's events come from.
enum Feed {
    /// The shared cache.
    Cache(Registration),
    /// A store watch of its own, for a resume point the cache's history no longer holds, until it has
    /// caught up with that history (then it rejoins the cache). Boxed: rare, and inline it would more
    /// than double every watcher's feed.
    Store(Box<direct::DirectWatch>, Arc<cache::Cacher>),
}

/// Start a watch; returns the stream of newline-delimited JSON events for the response body.
pub async fn start(
    cache: &WatchCache,
    registry: Registry,
    req: WatchRequest,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> ApiResult<WatchBody> {
    // The cache and the store hold a version stored as another in that one's form: the watch runs on
    // it, and each object sent is converted to the version asked for.
    let def = crate::registry::stored_def(&req.def);
    let served = crate::registry::converts(&req.def).then(|| req.def.clone());
    // As the client's version names its fields (events.k8s.io's `regarding.name`).
    crate::registry::check_fields(&req.def, &req.opts)?;
    let opts = &req.opts;
    let rv = opts.resource_version.as_deref();
    let initial = match opts.send_initial_events {
        Some(v) => v,
        None => rv.is_none() || rv == Some("0"),
    };
    let requested: Option<Revision> = match rv {
        Some(r) if r != "0" => {
            Some(r.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {r}")))?)
        }
        _ => None,
    };
    let scope =
        Scope { cluster: req.cluster.clone(), namespace: if def.namespaced { req.namespace.clone() } else { None } };
    let cacher = cache.cacher(&def, LOAD_PATIENCE).await?;
    let head = Head::of(&def);
    let account = req.account.clone();
    let mut pending = Initial::None;
    // What a list read from the store charged as it was read (see below).
    let mut read_held = Vec::new();
    let mut feed = if initial {
        // Initial state: from the cache when it is fresh enough for the request, else a store list
        // followed by the cache's events after that list's revision.
        let need = match (rv, opts.rv_match) {
            (Some("0"), _) => None,
            (Some(_), Some(RvMatch::NotOlderThan)) | (Some(_), None) => requested,
            _ => Some(registry.store.revision().await?),
        };
        let fresh = match need {
            None => true,
            Some(n) => cacher.wait_for(Some(n), FRESHNESS_PATIENCE).await.is_some(),
        };
        if fresh {
            let mut reg = cacher
                .register(scope.clone(), Start::Snapshot, account.clone())
                .map_err(|_| ApiError::internal("snapshot"))?;
            // Taken out of the registration, so that the watcher lets it go once sent.
            if let Some(snapshot) = reg.snapshot.take() {
                pending = match scope.cluster {
                    None => Initial::Snapshot(snapshot, Bound::Unbounded),
                    Some(_) => {
                        let mut items = Vec::new();
                        for (_, e) in snapshot.iter() {
                            if req.opts.selects_all() || crate::registry::matches(&def, &e.value(&head)?, &req.opts) {
                                items.push(e.clone());
                            }
                        }
                        Initial::Picked { items: items.into_iter(), last: None }
                    }
                };
            }
            Feed::Cache(reg)
        } else {
            let mut lo = opts.clone();
            lo.limit = 0;
            lo.continue_token = None;
            lo.rv_match = requested.map(|_| RvMatch::NotOlderThan);
            // Charged as it is read, refused past the budget, until the charge below holds it encoded.
            let mut charge = |bytes: usize| -> ApiResult<()> {
                match &account {
                    Some(a) => Ok(a.charge_read(&mut read_held, bytes)?),
                    None => Ok(()),
                }
            };
            let (cluster, ns) = (req.cluster.as_deref(), scope.namespace.as_deref());
            let list = registry.list_charged(&def, cluster, ns, &lo, &mut charge).await?;
            let json = list.items.iter().map(|v| Bytes::from(crate::proto::order::to_vec(v)));
            pending = Initial::Read(json.collect::<Vec<_>>().into_iter());
            let revision = list.revision;
            drop(list);
            resume(&cacher, &registry, &def, &scope, opts, revision, &account).await?
        }
    } else {
        let from = match requested {
            Some(n) => {
                if n > cacher.revision() {
                    let current = registry.store.revision().await?;
                    if n > current {
                        let e: ApiError = crate::storage::based::ahead(n, current).into();
                        if e.code == 410 {
                            // Another shard's: as a resume from a compacted revision is answered.
                            return Ok(Box::pin(futures::stream::once(std::future::ready(error_line(&e)))));
                        }
                        return Err(e);
                    }
                }
                n
            }
            None => cacher.revision(),
        };
        match resume(&cacher, &registry, &def, &scope, opts, from, &account).await {
            Ok(f) => f,
            Err(e) if e.code == 410 => {
                // As kube-apiserver: a 200 stream with one ERROR event, so every client relists.
                return Ok(Box::pin(futures::stream::once(std::future::ready(error_line(&e)))));
            }
            Err(e) => return Err(e),
        }
    };
    let start_rev = match &feed {
        Feed::Cache(reg) => reg.revision,
        Feed::Store(d, _) => d.revision(),
    };
    let timeout = match req.opts.timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        _ => Duration::from_secs(MIN_REQUEST_TIMEOUT + rand::random::<u64>() % MIN_REQUEST_TIMEOUT),
    };
    let replay = match &mut feed {
        Feed::Cache(reg) => std::mem::take(&mut reg.replay),
        Feed::Store(..) => Vec::new(),
    };
    let initial_end = req.opts.send_initial_events == Some(true);
    let req_bookmarks = req.opts.bookmarks;
    // Refused when the cluster is over its budget already; one watch larger than the budget goes.
    let charge = match &account {
        // A list read from the store was admitted page by page as it was read.
        Some(a) if !read_held.is_empty() => Some(a.charge(pending.holds())),
        Some(a) => Some(a.try_charge(pending.holds())?),
        None => None,
    };
    drop(read_held);
    // Kept as long as the watch runs.
    let selectors = account.as_ref().map(|a| a.charge(req.opts.selectors_size() as u64));
    let scope_cluster_moves = scope.cluster.as_ref().map(|_| registry.moves.subscribe());
    let pump = Pump {
        def,
        served,
        head,
        opts: req.opts,
        render: req.render,
        scope,
        registry,
        first: true,
        sent: Sent::complete(start_rev),
        closing: Closing::No,
        initial: pending,
        charge,
        _selectors: selectors,
        account,
        replay: replay.into_iter(),
        initial_end,
        feed,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        // A timer only for watchers that asked for bookmarks: most idle watchers then cost one timer.
        ticker: req_bookmarks
            .then(|| tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY)),
        shutdown,
        moves: scope_cluster_moves,
        done: false,
        pieces: VecDeque::new(),
    };
    // The response body polls the pump: no task or channel per watch, and a client that goes away
    // drops it (and its registration) at once.
    Ok(Box::pin(futures::stream::unfold(pump, |mut p| async move { p.next_line().await.map(|b| (b, p)) })))
}

/// Watch from `after`: the cache's history if it still has it, else a store watch, else 410.
async fn resume(
    cacher: &Arc<cache::Cacher>,
    registry: &Registry,
    def: &Arc<ResourceDef>,
    scope: &Scope,
    opts: &ListOptions,
    after: Revision,
    account: &Option<Arc<Account>>,
) -> ApiResult<Feed> {
    match cacher.register(scope.clone(), Start::After(after), account.clone()) {
        Ok(reg) => Ok(Feed::Cache(reg)),
        Err(_) => match direct::DirectWatch::open(registry, def, scope, opts, after, &cacher.metrics().store_fed).await
        {
            Ok(d) => Ok(Feed::Store(Box::new(d), cacher.clone())),
            Err(StoreError::Compacted { requested, compacted }) => Err(expired(requested, compacted + 1)),
            Err(e) => Err(e.into()),
        },
    }
}

/// Whether a cached object passes the selectors; returns what to send.
fn select_entry(def: &ResourceDef, head: &Head, opts: &ListOptions, e: &Entry) -> ApiResult<Option<Payload>> {
    if opts.selects_all() {
        return Ok(Some(Payload::Cached(e.body_bytes())));
    }
    let v = e.value(head)?;
    Ok(crate::registry::matches(def, &v, opts).then_some(Payload::Value(v)))
}

/// Turn a cached event into this watcher's event, applying selector transitions.
fn translate(
    def: &ResourceDef,
    head: &Head,
    opts: &ListOptions,
    ev: &Event,
) -> ApiResult<Option<(&'static str, Payload)>> {
    if opts.selects_all() {
        let kind = if ev.deleted {
            "DELETED"
        } else if ev.prev.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        return Ok(Some((kind, Payload::Cached(ev.object.body_bytes()))));
    }
    // Tested on what selectors read of each state, worked out once for every watcher of the event.
    let passes = |v: &Value| crate::registry::matches(def, v, opts);
    let (old, new) = if crate::registry::reads_custom_fields(def, opts) {
        // A CRD's own selectable fields: read from the whole states.
        let prev = ev.prev.as_ref().map(|p| p.value(head)).transpose()?;
        (prev.as_ref().is_some_and(passes), passes(&ev.object.value(head)?))
    } else {
        let parts = ev.selectable(head)?;
        (parts.prev.as_ref().is_some_and(passes), passes(&parts.object))
    };
    if ev.deleted {
        return Ok(old.then(|| ("DELETED", Payload::Cached(ev.object.body_bytes()))));
    }
    Ok(match (old, new) {
        (false, true) => Some(("ADDED", Payload::Cached(ev.object.body_bytes()))),
        (true, true) => Some(("MODIFIED", Payload::Cached(ev.object.body_bytes()))),
        // Leaving the selection: DELETED with the last state that matched, at the new resourceVersion,
        // as kube-apiserver's cacher sends it.
        (true, false) => {
            let mut last = ev.prev.as_ref().expect("it passed").value(head)?;
            crate::meta::metadata_mut(&mut last).insert("resourceVersion".into(), json!(ev.revision.to_string()));
            Some(("DELETED", Payload::Value(last)))
        }
        (false, false) => None,
    })
}

/// One watcher: where its events come from and what it has sent, polled by its response body.
struct Pump {
    def: Arc<ResourceDef>,
    /// The opening of each cached object as `def` serves it.
    head: Head,
    opts: ListOptions,
    render: Option<Render>,
    scope: Scope,
    registry: Registry,
    /// Whether the next object is the first (Table column definitions go with the first row only).
    first: bool,
    /// How far the client has got: a replay's overlap is skipped by it, and resumes and bookmarks
    /// never split one transaction's events (see `sent`).
    sent: Sent,
    /// The watch's time is up, but the client has only part of its last revision's events: the
    /// rest go out first, so that its resume point drops none of them.
    closing: Closing,
    /// Initial state still to send.
    initial: Initial,
    /// The definition objects are sent as, when it is a version stored as `def`'s (each is converted).
    served: Option<Arc<ResourceDef>>,
    /// What `initial` keeps alive, charged to `account` until sent.
    charge: Option<Charge>,
    /// What the parsed selectors hold, charged to `account` for as long as the watch runs.
    _selectors: Option<Charge>,
    /// Who pays for this watcher's memory (its queue, when it registers again).
    account: Option<Arc<Account>>,
    /// Events from history still to send (a resume, or a catch-up after falling behind).
    replay: std::vec::IntoIter<Arc<Event>>,
    /// The `sendInitialEvents` end-of-initial-state bookmark is still to send.
    initial_end: bool,
    feed: Feed,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ticker: Option<tokio::time::Interval>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// For a watch of one cluster: told when a cluster starts moving (see `moving`).
    moves: Option<tokio::sync::watch::Receiver<u64>>,
    /// Nothing more is sent (timeout, shutdown or an ERROR event went out).
    done: bool,
    /// The rest of a line sent in pieces (see `raw_line`), sent before anything else.
    pieces: VecDeque<Bytes>,
}

impl Pump {
    fn encode(&mut self, kind: &str, p: Payload) -> Bytes {
        let first = std::mem::replace(&mut self.first, false);
        let parsed = |json: &[u8]| serde_json::from_slice::<Value>(json).map_err(ApiError::internal);
        let as_stored = self.render.is_none() && self.served.is_none();
        let value = match (as_stored, p) {
            (true, Payload::Cached(b)) => return raw_line(kind, &self.head, &b, &mut self.pieces),
            (true, Payload::Json(b)) => return raw_line(kind, &Head::empty(), &b, &mut self.pieces),
            (true, Payload::Value(v)) => return line(kind, v),
            (false, Payload::Cached(b)) => parsed(&[self.head.bytes(), &b].concat()),
            (false, Payload::Json(b)) => parsed(&b),
            (false, Payload::Value(v)) => Ok(v),
        };
        let value = value.map(|mut v| {
            if let Some(served) = &self.served {
                crate::registry::from_storage(served, &mut v);
            }
            v
        });
        match (value, &self.render) {
            (Ok(v), Some(r)) => line(kind, r(&v, first)),
            (Ok(v), None) => line(kind, v),
            (Err(e), _) => error_line(&e),
        }
    }

    /// The next object of the initial state to send, giving back what the ones sent kept alive.
    fn next_initial(&mut self) -> Option<ApiResult<Payload>> {
        let next = match &mut self.initial {
            Initial::None => return None,
            Initial::Snapshot(snapshot, from) => loop {
                let found = snapshot.between(from.as_ref().map(|k| &**k), None).next();
                let Some((k, e)) = found.map(|(k, e)| (k.clone(), e.clone())) else { break None };
                *from = Bound::Excluded(k);
                match select_entry(&self.def, &self.head, &self.opts, &e) {
                    Ok(Some(p)) => break Some(Ok(p)),
                    Ok(None) => continue,
                    Err(e) => break Some(Err(e)),
                }
            },
            Initial::Picked { items, last } => {
                let next = items.next();
                // The handed-out one's reference leaves the list; the last one's allocation is free to go
                // unless the next one lies in it too.
                let mut freed = if next.is_some() { HANDLE } else { 0 };
                if let Some(l) = last.as_ref() {
                    if next.as_ref().is_none_or(|n| n.holds_after(Some(l)) > 0) {
                        freed += l.holds_after(None);
                    }
                }
                if let Some(c) = &mut self.charge {
                    c.release(freed);
                }
                *last = next.clone();
                next.map(|e| Ok(Payload::Cached(e.body_bytes())))
            }
            Initial::Read(items) => {
                let next = items.next();
                if let (Some(c), Some(b)) = (&mut self.charge, &next) {
                    c.release(b.len() as u64);
                }
                next.map(|b| Ok(Payload::Json(b)))
            }
        };
        if next.is_none() {
            // Everything sent: let the snapshot or the list go, and whatever is left of the charge.
            self.initial = Initial::None;
            self.charge = None;
        }
        next
    }

    /// This watcher's line for a cached event, if it concerns it.
    fn event_line(&mut self, ev: &Event) -> Option<Bytes> {
        if !self.sent.admit(ev.revision, ev.key_hash, ev.ends) {
            return None;
        }
        match translate(&self.def, &self.head, &self.opts, ev) {
            Ok(Some((kind, p))) => Some(self.encode(kind, p)),
            Ok(None) => None,
            Err(e) => Some(error_line(&e)),
        }
    }

    /// A bookmark at `rev`, which the client then has all of.
    fn bookmark_line(&mut self, rev: Revision, initial_end: bool) -> Bytes {
        self.sent.complete_to(rev);
        line("BOOKMARK", bookmark(self.served.as_ref().unwrap_or(&self.def), self.sent.last(), initial_end))
    }

    /// The revision a bookmark may claim, none while the client may lack some of its last revision's
    /// events: the cache's, when everything it applied has reached us.
    fn bookmark_revision(&mut self) -> Option<Revision> {
        match &self.feed {
            Feed::Cache(reg) => {
                // Read the revision first: every event at or below it was queued before it was
                // published (a whole transaction at once), so an empty queue afterwards means we have
                // sent them all.
                let applied = reg.cacher().revision();
                if reg.is_drained() && reg.cutoff() == Cutoff::Active && applied >= self.sent.last() {
                    self.sent.complete_to(applied);
                }
            }
            Feed::Store(d, _) => self.sent.complete_to(d.whole()),
        }
        (!self.sent.is_partial()).then(|| self.sent.last())
    }

    /// Move a store-fed watcher back onto the cache once everything it has seen reaches the cache's
    /// history, so resume points from before a restart do not each keep a store watch for ever. What
    /// the cache's history still owes it is left in `replay`.
    fn rejoin_cache(&mut self) -> bool {
        let Feed::Store(d, cacher) = &self.feed else { return false };
        // Every change in scope before the store watch's revision has been sent or filtered out; of
        // that revision, perhaps not yet.
        self.sent.complete_to(d.whole());
        self.sent.seen(d.revision());
        let from = self.sent.resume_after();
        let Ok(mut reg) = cacher.register(self.scope.clone(), Start::After(from), self.account.clone()) else {
            return false;
        };
        self.replay = std::mem::take(&mut reg.replay).into_iter();
        self.feed = Feed::Cache(reg);
        true
    }

    /// The next line of `replay`, if it has one for this client; `None` also when the watch ends
    /// (see `done`).
    async fn replayed(&mut self) -> Option<Bytes> {
        if self.replay.len() > 0 && self.moving() {
            return None;
        }
        while let Some(ev) = next_of(&mut self.replay) {
            if self.closing_before(ev.revision) {
                return self.close();
            }
            if let Some(b) = self.event_line(&ev) {
                return Some(b);
            }
            // Events filtered out send nothing, yet took work: the worker is given up now and then.
            tokio::task::coop::consume_budget().await;
        }
        None
    }

    /// Whether an event at `rev` comes after the revision a closing watch was finishing: that one is
    /// then whole, and is where the client's next watch starts, so this event goes to that watch.
    fn closing_before(&self, rev: Revision) -> bool {
        self.closing != Closing::No && rev > self.sent.last()
    }

    /// End the watch, with a bookmark at the last revision sent, which the client has all of, if it
    /// asked for bookmarks.
    fn close(&mut self) -> Option<Bytes> {
        self.done = true;
        let rev = self.sent.last();
        self.opts.bookmarks.then(|| self.bookmark_line(rev, false))
    }

    /// Whether nothing is waiting to be sent: a closing watch past its grace ends then. A queue
    /// emptied by a cut-off is not idle: the watch resumes, and sends the rest.
    fn idle(&self) -> bool {
        self.replay.len() == 0
            && match &self.feed {
                Feed::Cache(reg) => reg.is_drained() && reg.cutoff() == Cutoff::Active,
                Feed::Store(d, _) => !d.has_ready(),
            }
    }

    fn fail(&mut self, e: &ApiError) -> Option<Bytes> {
        self.done = true;
        Some(error_line(e))
    }

    /// Whether this watch's cluster is being moved: the watch then ends (and says so once), rather
    /// than send the move's deletes as the cluster's, or stay on the shard it leaves. Its clients
    /// watch again once the cluster is served from its new shard, where their resourceVersion is
    /// refused as too old, and they list again.
    fn moving(&mut self) -> bool {
        let moving = self.scope.cluster.as_deref().is_some_and(|c| self.registry.moves.has(c));
        if moving {
            self.done = true;
        }
        moving
    }

    /// The next line to send, or `None` when the watch ends.
    async fn next_line(&mut self) -> Option<Bytes> {
        if let Some(piece) = self.pieces.pop_front() {
            return Some(piece);
        }
        if self.done {
            return None;
        }
        match self.next_initial() {
            Some(Ok(p)) => return Some(self.encode("ADDED", p)),
            Some(Err(e)) => return self.fail(&e),
            None => {}
        }
        if let Some(b) = self.replayed().await {
            return Some(b);
        }
        if self.done {
            return None;
        }
        if std::mem::take(&mut self.initial_end) {
            let rev = self.sent.last();
            return Some(self.bookmark_line(rev, true));
        }
        loop {
            if self.moving() {
                return None;
            }
            // A resume or a return to the cache left events to send first.
            if let Some(b) = self.replayed().await {
                return Some(b);
            }
            if self.done {
                return None;
            }
            if self.closing != Closing::No {
                // Ends once the client has all of its last revision; or, past the grace, once
                // nothing more of it is waiting (a client still reading it is not cut short).
                if self.bookmark_revision().is_some() {
                    return self.close();
                }
                if self.closing == Closing::Overdue && self.idle() {
                    self.done = true;
                    return None;
                }
            }
            if self.rejoin_cache() {
                continue;
            }
            let next = tokio::select! {
                _ = &mut self.deadline => {
                    let now = tokio::time::Instant::now();
                    self.closing = match self.closing {
                        Closing::No => Closing::Until(now + CLOSING_GRACE),
                        Closing::Until(end) if now < end => Closing::Until(end),
                        Closing::Until(_) => Closing::Overdue,
                        Closing::Overdue => {
                            self.done = true;
                            return None;
                        }
                    };
                    // While closing, the client's last revision is checked for wholeness now and then:
                    // a watcher of one namespace or cluster is not woken when the cache publishes it.
                    let next = match self.closing {
                        Closing::Until(end) => end.min(now + CLOSING_RECHECK),
                        _ => now + CLOSING_LIMIT,
                    };
                    self.deadline.as_mut().reset(next);
                    continue;
                }
                _ = self.shutdown.changed() => return None,
                _ = moved(&mut self.moves) => continue,
                _ = tick(&mut self.ticker), if self.closing == Closing::No => match self.bookmark_revision() {
                    Some(rev) => return Some(self.bookmark_line(rev, false)),
                    // In the middle of a transaction's events: the next tick, once they are sent.
                    None => continue,
                },
                next = next_event(&mut self.feed) => next,
            };
            let rev = match &next {
                Next::Cached(ev) => Some(ev.revision),
                Next::Stored(Ok(Some(c))) => Some(c.revision),
                _ => None,
            };
            if rev.is_some_and(|r| self.closing_before(r)) {
                return self.close();
            }
            if rev.is_some() && self.moving() {
                return None;
            }
            match next {
                Next::Cached(ev) => {
                    if let Some(b) = self.event_line(&ev) {
                        return Some(b);
                    }
                    tokio::task::coop::consume_budget().await;
                }
                Next::Stored(Ok(Some(c))) => {
                    if self.sent.admit(c.revision, c.key, c.ends) {
                        return Some(self.encode(c.kind, Payload::Value(c.object)));
                    }
                }
                Next::Stored(Ok(None)) => {}
                Next::Stored(Err(e)) => return self.fail(&e),
                Next::CutOff => {
                    // Fell behind or the cache reloaded: go on from the last revision sent, from the
                    // cache's history if it still has it, else from the store. Boxed: a rare path that
                    // would otherwise enlarge every idle watcher.
                    let Feed::Cache(reg) = &self.feed else { return None };
                    let cacher = reg.cacher().clone();
                    let resumed = Box::pin(resume(
                        &cacher,
                        &self.registry,
                        &self.def,
                        &self.scope,
                        &self.opts,
                        self.sent.resume_after(),
                        &self.account,
                    ))
                    .await;
                    match resumed {
                        // What the new feed replays that the client has, `sent` skips.
                        Ok(mut f) => {
                            if let Feed::Cache(reg) = &mut f {
                                self.replay = std::mem::take(&mut reg.replay).into_iter();
                            }
                            self.feed = f;
                        }
                        Err(e) => return self.fail(&e),
                    }
                }
                Next::End => return None,
            }
        }
    }
}

/// The next item, letting the buffer go with the last one: a watcher lives on long after its initial
/// state or a replay is sent.
fn next_of<T>(items: &mut std::vec::IntoIter<T>) -> Option<T> {
    let next = items.next();
    if items.len() == 0 {
        *items = Vec::new().into_iter();
    }
    next
}

/// A cluster started moving (never, for a watch across clusters, or once the server has gone).
async fn moved(moves: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    let Some(rx) = moves else { return std::future::pending().await };
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await
    }
}

/// The next bookmark tick, or never.
async fn tick(ticker: &mut Option<tokio::time::Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

enum Next {
    Cached(Arc<Event>),
    Stored(ApiResult<Option<direct::Change>>),
    CutOff,
    End,
}

async fn next_event(feed: &mut Feed) -> Next {
    match feed {
        Feed::Cache(reg) => match reg.recv().await {
            Some(ev) => Next::Cached(ev),
            None if reg.cutoff() == Cutoff::Active => Next::End,
            None => Next::CutOff,
        },
        Feed::Store(d, _) => match d.next().await {
            Some(r) => Next::Stored(r),
            None => Next::End,
        },
    }
}
