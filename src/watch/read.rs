//! Which reads the watch cache serves, and serving them: lists and gets with `resourceVersion=0` (any
//! recent state), lists at least as new as a given revision, and consistent lists once the cache has
//! caught up with the store's revision (kube-apiserver's consistent reads from cache). Everything else
//! (exact revisions, continued pages, a cache that is behind) is read from the store.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::cache::{Entry, Head, Scope, Snapshot, WatchCache, HANDLE};
use super::{FRESHNESS_PATIENCE, LOAD_PATIENCE};
use crate::budget::{Account, Charge};
use crate::http::respond::Piece;
use crate::registry::{ListOptions, Registry, RvMatch};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::Revision;

/// A page of a list served from the cache.
pub struct CachedList {
    /// Matching objects.
    pub items: Items,
    /// The revision they are current at.
    pub revision: Revision,
    /// Token for the next page (continued from the store at `revision`).
    pub continue_token: Option<String>,
}

/// The objects of a list served from the cache, as JSON. Holding them costs a snapshot (a list across
/// clusters) or references to the objects picked (a tenant's, see `list`, charged to its account),
/// and they stay valid however the cache changes meanwhile.
pub struct Items {
    /// The opening of each object as the request's definition serves it.
    head: Head,
    from: Source,
    /// What the picked objects keep alive, charged until the whole list is sent (a watch gives its
    /// charge back object by object: it may run for hours; a list is sent, or cut, within its deadlines).
    _charge: Option<Charge>,
}

enum Source {
    /// Every object in scope, read from the snapshot as the body is sent (so the first bytes leave
    /// before the last object is looked at); the snapshot is let go once read to its end.
    All {
        /// The objects; `None` once all are handed out.
        snapshot: Option<Snapshot>,
        /// Where the objects not yet handed out start.
        next: Bound<Arc<str>>,
        /// A run `take` declined, to offer first next time (its objects come before `next`).
        held: Option<Bytes>,
        /// A comma and `head`: what precedes each body in a packed block served with this head.
        sep: Bytes,
    },
    /// The objects a selector or a page limit picked.
    Picked(std::vec::IntoIter<Entry>),
}

impl Items {
    /// Every object of `snapshot`, served with `head`.
    pub fn all(snapshot: Snapshot, head: Head) -> Items {
        let sep = head.sep();
        Items {
            head,
            from: Source::All { snapshot: Some(snapshot), next: Bound::Unbounded, held: None, sep },
            _charge: None,
        }
    }

    /// Hand the objects' JSON to `take` in order until it declines a piece (which stays first for the
    /// next call) or none is left; returns true when none is left. Objects lying in a row in a packed
    /// block (see `cache::pack`) go as one run of their bytes, each after a comma and its head, without
    /// a copy; any other object goes as its head and the rest. The runs a pass indexed go without a
    /// look at their objects; only the objects between them are walked.
    pub fn fill(&mut self, take: &mut dyn FnMut(Piece<'_>) -> bool) -> bool {
        let head = self.head.bytes();
        match &mut self.from {
            Source::All { snapshot, next, held, sep } => {
                let sep: &[u8] = sep;
                if let Some(run) = held.take() {
                    if !take(Piece::Run(&run)) {
                        *held = Some(run);
                        return false;
                    }
                }
                let Some(snap) = snapshot else { return true };
                loop {
                    let indexed = snap.runs(sep).and_then(|r| r.first_from(next.as_ref().map(|k| &**k)));
                    let until = indexed.map(|(first, _)| first);
                    if let Some(at) = walk(snap, next.as_ref().map(|k| &**k), until, (head, sep), take, held) {
                        *next = Bound::Included(at);
                        return false;
                    }
                    let Some((_, run)) = indexed else { break };
                    *next = Bound::Excluded(run.last.clone());
                    if !take(Piece::Run(&run.bytes)) {
                        *held = Some(run.bytes.clone());
                        return false;
                    }
                }
                *snapshot = None;
                held.is_none()
            }
            Source::Picked(items) => {
                while let Some(e) = items.as_slice().first() {
                    if !take(Piece::Object(head, e.body())) {
                        return false;
                    }
                    items.next();
                }
                true
            }
        }
    }

    /// How many objects, when known without a walk: those a selector or a page limit picked.
    pub fn count(&self) -> Option<usize> {
        match &self.from {
            Source::Picked(items) => Some(items.len()),
            Source::All { .. } => None,
        }
    }

    /// The objects not yet handed out, parsed (for Tables and metadata-only lists).
    pub fn values(&self) -> ApiResult<Vec<Value>> {
        let head = &self.head;
        match &self.from {
            Source::All { snapshot, next, held, .. } => {
                // A held run is `,{…},{…}`.
                let mut values: Vec<Value> = match held {
                    Some(run) => {
                        serde_json::from_slice(&[b"[", &run[1..], b"]"].concat()).map_err(ApiError::internal)?
                    }
                    None => Vec::new(),
                };
                if let Some(snap) = snapshot {
                    for (_, e) in snap.between(next.as_ref().map(|k| &**k), None) {
                        values.push(e.value(head)?);
                    }
                }
                Ok(values)
            }
            Source::Picked(items) => items.as_slice().iter().map(|e| e.value(head)).collect(),
        }
    }
}

/// Hand `take` the objects of `snap` from `from` to before `until` (or the end), those lying in a row in
/// a block as one run, each object after `head` and each body in a run after `sep`. Returns the key to
/// resume at when `take` declines a piece, a declined run being put in `held`; when it declines the
/// run that ends the snapshot there is nothing to resume at, and only `held` tells.
fn walk(
    snap: &Snapshot,
    from: Bound<&str>,
    until: Option<&Arc<str>>,
    (head, sep): (&[u8], &[u8]),
    take: &mut dyn FnMut(Piece<'_>) -> bool,
    held: &mut Option<Bytes>,
) -> Option<Arc<str>> {
    // The run being gathered: its first and last object.
    let mut run: Option<(&Entry, &Entry)> = None;
    for (k, e) in snap.between(from, until.map(|u| &**u)) {
        if let Some((_, last)) = &mut run {
            if e.follows(last, sep) {
                *last = e;
                continue;
            }
        }
        if let Some((first, last)) = run.take() {
            let bytes = Entry::run(first, last, sep);
            if !take(Piece::Run(&bytes)) {
                // Kept as gathered: the next call does not walk its objects again.
                *held = Some(bytes);
                return Some(k.clone());
            }
        }
        if e.after(sep) {
            run = Some((e, e));
        } else if !take(Piece::Object(head, e.body())) {
            return Some(k.clone());
        }
    }
    if let Some((first, last)) = run {
        let bytes = Entry::run(first, last, sep);
        if !take(Piece::Run(&bytes)) {
            *held = Some(bytes);
            // What follows is at `until`, if anything.
            return until.cloned();
        }
    }
    None
}

/// Serve a list from the cache when its options allow; `None` means read the store. What a tenant's
/// list keeps alive until sent is charged to `account`, refused if its cluster is over its budget.
/// `def` is the type as stored: the caller has checked the field selectors against the type the
/// client asked for, whose names for fields they are (events.k8s.io's `regarding.name`).
pub async fn list(
    cache: &WatchCache,
    registry: &Registry,
    def: &Arc<ResourceDef>,
    cluster: Option<&str>,
    namespace: Option<&str>,
    opts: &ListOptions,
    account: Option<&Arc<Account>>,
) -> ApiResult<Option<CachedList>> {
    if opts.continue_token.is_some() || opts.rv_match == Some(RvMatch::Exact) {
        return Ok(None);
    }
    let rv = opts.resource_version.as_deref();
    let cacher = match rv {
        // Any recent state: start the type's cache if needed (informers list this way before watching).
        Some("0") => cache.cacher(def, LOAD_PATIENCE).await?,
        Some(r) => {
            // A revision with a limit and no match rule means Exact (WIRE.md section 5).
            if opts.limit > 0 && opts.rv_match.is_none() {
                return Ok(None);
            }
            let need: Revision =
                r.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {r}")))?;
            let Some(c) = cache.existing(def) else { return Ok(store(cache, def)) };
            if c.wait_for(Some(need), FRESHNESS_PATIENCE).await.is_none() {
                return Ok(store(cache, def));
            }
            c
        }
        None => {
            // Consistent: only a cache that has applied the store's current revision.
            let Some(c) = cache.existing(def) else { return Ok(store(cache, def)) };
            let need = registry.store.revision().await?;
            let patience =
                if registry.store.reports_progress() { FRESHNESS_PATIENCE } else { std::time::Duration::ZERO };
            if c.revision() < need && c.wait_for(Some(need), patience).await.is_none() {
                return Ok(store(cache, def));
            }
            c
        }
    };
    let scope = Scope {
        cluster: cluster.map(str::to_string),
        namespace: if def.namespaced { namespace.map(str::to_string) } else { None },
    };
    let snapshot = cacher.snapshot(&scope);
    let revision = snapshot.revision;
    cache.count_read(def, true);
    let filtered = !opts.selects_all();
    let head = Head::of(def);
    // Across every cluster (an administrator's list, and the large one), the body reads the snapshot as
    // it goes. A tenant's list takes references to its own objects at once instead: a snapshot kept
    // while a slow client reads would also keep the old versions of every other tenant's objects
    // written meanwhile.
    if !filtered && opts.limit == 0 && cluster.is_none() {
        let items = Items::all(snapshot, head);
        return Ok(Some(CachedList { items, revision, continue_token: None }));
    }
    let limit = if opts.limit > 0 { opts.limit } else { usize::MAX };
    let mut picked: Vec<Entry> = Vec::new();
    let mut held = 0;
    // The key of the page's last object, and of the page's end when more objects follow.
    let (mut page_end, mut last_key): (Option<&Arc<str>>, Option<&Arc<str>>) = (None, None);
    for (k, e) in snapshot.iter() {
        if picked.len() == limit {
            last_key = page_end;
            break;
        }
        // Selectors parse each object: outside the cache's lock, since the snapshot is ours.
        if filtered && !crate::registry::matches(def, &e.value(&head)?, opts) {
            continue;
        }
        // A reference: what it keeps alive (its block, if packed among other objects) is charged.
        held += HANDLE + e.holds_after(picked.last());
        picked.push(e.clone());
        page_end = Some(k);
    }
    let charge = account.map(|a| a.try_charge(held)).transpose()?;
    let continue_token = last_key.map(|k| {
        let prefix = registry.collection(def, cluster, namespace);
        crate::registry::encode_continue(revision, &format!("{}\u{0}", &k[prefix.len()..]))
    });
    let items = Items { head, from: Source::Picked(picked.into_iter()), _charge: charge };
    Ok(Some(CachedList { items, revision, continue_token }))
}

/// The store serves this read (counted, so operators see how often the cache was not fresh enough).
fn store(cache: &WatchCache, def: &ResourceDef) -> Option<CachedList> {
    cache.count_read(def, false);
    None
}

/// Serve a GET with `resourceVersion=0` from the cache; `None` when the object does not exist.
pub async fn get_any(cache: &WatchCache, def: &Arc<ResourceDef>, key: &str) -> ApiResult<Option<Bytes>> {
    let cacher = cache.cacher(def, LOAD_PATIENCE).await?;
    cache.count_read(def, true);
    Ok(cacher.get(key).0.map(|e| e.json(&Head::of(def))))
}
