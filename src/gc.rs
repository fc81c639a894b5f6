//! The garbage collector: objects go with their owners, per logical cluster, by the rules of
//! kube-controller-manager's collector (ownerReferences, background, foreground and orphan deletion,
//! dangling references, blockOwnerDeletion, kube's events for invalid references).
//!
//! kube's collector holds every object of every type in a graph. One of 100,000 logical clusters
//! cannot: this one holds, per cluster that has owned objects, which collections hold them and which
//! collections own them (a few numbers), the foreground deletions waiting on dependents, and a
//! bounded cache of owners it has looked up. Everything else is read when needed:
//! - an owned object written (a watch of every key, from the leader's listing): its owners are
//!   looked up, and it is queued when one is missing or has another uid;
//! - an object deleted in a collection that owns something in its cluster: the collections holding
//!   owned objects in its scope (its namespace, or the whole cluster for a cluster-scoped owner) are
//!   read for objects naming it, and each is looked at;
//! - an owner marked with `orphan` or `foregroundDeletion`: its dependents are found the same way.
//!
//! Looking at a dependent is kube's `attemptToDeleteItem`: each owner is read live; with an owner
//! still there, references to absent owners (and to owners waiting in the foreground) are removed;
//! with none, the dependent is deleted (through the registry, as a client would: its finalizers,
//! hooks and watches as for any delete), in the foreground when an owner waits for it and it owns
//! things in turn.
//!
//! It runs on the leader, one per shard, over that shard's store: a cluster's objects and owners are
//! all on its shard. Every step is a compare-and-swap or a delete with a uid precondition, so a new
//! leader (which lists again) redoes nothing wrongly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::auth::Identity;
use crate::crd::CrdIndex;
use crate::registry::propagation::{FOREGROUND, ORPHAN};
use crate::registry::{Ctx, DeleteOptions, Propagation, Registry};
use crate::resources::{self, ResourceDef};
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, RangeRequest, StoreError, WatchEvent};

/// Keys read per page, listing at start and looking for dependents.
const PAGE: usize = 256;
/// Work queued for the workers; the watch waits while it is full (the store holds the rest).
const QUEUE: usize = 4_096;
/// Work items handled at once.
const WORKERS: usize = 4;
/// Dependents one item acts on at once.
const PER_ITEM: usize = 16;
/// Dependents one item gathers before acting; an owner with more is taken again for the rest.
const MAX_FOUND: usize = 4_096;
/// Work held for later (retries, foreground owners waiting): past this the collector lists again
/// rather than hold more.
const LATER_MAX: usize = 100_000;
/// How long after a change in its cluster a waiting foreground owner is looked at again.
const RECHECK: Duration = Duration::from_millis(200);
/// The longest a waiting foreground owner goes without being looked at.
const WAITING_RECHECK: Duration = Duration::from_secs(2);
/// A failed item's first retry; doubled up to `RETRY_MAX`.
const RETRY: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Bytes of owner lookups remembered by the watch (keys and uids).
const OWNER_CACHE_BYTES: u64 = 16 << 20;

/// Who the collector acts as, as kube's does.
pub const USER: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
/// The component its events come from.
pub const COMPONENT: &str = "garbage-collector-controller";

/// An object key's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key<'a> {
    group: &'a str,
    plural: &'a str,
    cluster: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
}

impl<'a> Key<'a> {
    /// `<prefix>/<group>/<plural>/<cluster>/[<namespace>/]<name>`; `None` for kgate's own keys.
    fn parse(prefix: &str, key: &'a str) -> Option<Key<'a>> {
        let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
        let parts: Vec<&str> = rest.split('/').collect();
        let (group, plural, cluster) = (parts.first()?, parts.get(1)?, parts.get(2)?);
        if *group == "kgate" {
            return None;
        }
        let (namespace, name) = match parts.len() {
            4 => (None, parts[3]),
            5 => (Some(parts[3]), parts[4]),
            _ => return None,
        };
        Some(Key { group, plural, cluster, namespace, name })
    }

    /// The collection, as the collector names it: `<storage group>/<plural>`.
    fn collection(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
}

/// What the collector reads of an object.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Meta,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerRef>>,
}

impl Object {
    fn parse(value: &[u8]) -> Option<Object> {
        serde_json::from_slice(value).ok()
    }

    fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or_default()
    }

    fn owners(&self) -> &[OwnerRef] {
        self.metadata.owner_references.as_deref().unwrap_or_default()
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.metadata.finalizers.iter().flatten().any(|x| x == f)
    }

    fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// One owner reference.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct OwnerRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

impl OwnerRef {
    /// The group and version of `apiVersion` (`v1` is the core group's).
    fn group_version(&self) -> (&str, &str) {
        match self.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", self.api_version.as_str()),
        }
    }

    /// `[apiVersion/kind, namespace: ns, name: n, uid: u]`, as kube's events print a reference.
    fn describe(&self, namespace: &str) -> String {
        format!("[{}/{}, namespace: {namespace}, name: {}, uid: {}]", self.api_version, self.kind, self.name, self.uid)
    }
}

/// What one owner reference of a dependent comes to, looked up live.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// There with the referenced uid.
    Solid,
    /// Absent, or there under another uid.
    Dangling,
    /// There, deleted in the foreground: waiting for its dependents.
    Waiting,
    /// A type the cluster does not serve in that version (kube leaves such dependents alone).
    Unresolvable,
    /// A namespaced owner of a cluster-scoped dependent: never collected, and an event says so.
    Invalid,
}

/// Work for the workers. Equal items queued twice are handled once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Work {
    /// Look at a dependent's owners and act (kube's `attemptToDeleteItem`).
    Dependent(Box<str>),
    /// An object that owns things in its cluster was deleted: look at what names it.
    Gone { cluster: Box<str>, namespace: Option<Box<str>>, group: Box<str>, name: Box<str> },
    /// An owner marked with `orphan` or `foregroundDeletion`.
    Finalize(Box<str>),
}

/// What one cluster holds that the collector needs to know, for clusters with owned objects only.
#[derive(Debug, Default)]
struct Held {
    /// Collections holding owned objects: their name's number, times two, plus one when namespaced.
    owned: Vec<u32>,
    /// Collections whose objects are named as owners.
    owners: Vec<u32>,
    /// Keys of owners deleted in the foreground and waiting for dependents.
    waiting: Vec<Box<str>>,
}

/// Collection names by number, so that each cluster's `Held` is a few integers. Grows with the
/// distinct collections that own or are owned, not with clusters.
#[derive(Default)]
struct Names {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

/// Work held until a time (retries, and foreground owners to look at again), and the failures of
/// each item since it last succeeded, which lengthen its retries.
#[derive(Default)]
struct Later {
    due: HashMap<Work, Instant>,
    failures: HashMap<Work, u32>,
}

/// One shard's collector.
pub struct Collector {
    registry: Registry,
    crds: Arc<CrdIndex>,
    /// Per cluster with owned objects. A DashMap: the watch writes, workers read, one entry at a time.
    clusters: DashMap<Box<str>, Held>,
    /// A std Mutex: held for one lookup or insert, never across an await.
    names: Mutex<Names>,
    /// Queued and not yet taken: what makes a second queueing a no-op. Taken off as a worker starts
    /// the item, so a change while it runs queues it again.
    queued: dashmap::DashSet<Work>,
    /// A std Mutex, held only to add or take due items.
    later: Mutex<Later>,
    /// Set when work could not be held: the watch starts over with a listing, which finds it again.
    relist: std::sync::atomic::AtomicBool,
    /// The revision of the last listing, once it is done (0 before).
    listed: tokio::sync::watch::Sender<i64>,
    identity: Identity,
}

impl Collector {
    /// A collector over `registry`'s store, resolving custom kinds through `crds`.
    pub fn new(registry: Registry, crds: Arc<CrdIndex>) -> Arc<Self> {
        let groups = vec![
            "system:serviceaccounts".to_string(),
            "system:serviceaccounts:kube-system".to_string(),
            "system:authenticated".to_string(),
        ];
        Arc::new(Collector {
            registry,
            crds,
            clusters: DashMap::new(),
            names: Mutex::new(Names::default()),
            queued: Default::default(),
            later: Mutex::new(Later::default()),
            relist: Default::default(),
            listed: tokio::sync::watch::channel(0).0,
            identity: Identity { user: USER.to_string(), groups },
        })
    }

    /// Collect until aborted (under `leader::while_leading`).
    pub async fn run(self: Arc<Self>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        futures::join!(self.clone().follow(tx.clone()), self.clone().work(rx, tx));
    }

    /// Wait until the collector has listed every key once (and follows changes from there).
    pub async fn wait_listed(&self) {
        let _ = self.listed.subscribe().wait_for(|rev| *rev > 0).await;
    }

    /// What the collector holds: clusters tracked, and bytes about (for the benches).
    pub fn footprint(&self) -> (usize, usize) {
        let mut bytes = 0;
        for e in self.clusters.iter() {
            let h = e.value();
            bytes += e.key().len()
                + std::mem::size_of::<Held>()
                + 4 * (h.owned.capacity() + h.owners.capacity())
                + h.waiting.iter().map(|w| w.len() + 16).sum::<usize>()
                + 16;
        }
        (self.clusters.len(), bytes)
    }

    fn intern(&self, name: &str) -> u32 {
        let mut n = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = n.ids.get(name) {
            return *id;
        }
        let id = n.names.len() as u32;
        let name: Arc<str> = name.into();
        n.names.push(name.clone());
        n.ids.insert(name, id);
        id
    }

    fn name_of(&self, id: u32) -> Arc<str> {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).names[id as usize].clone()
    }

    fn id_of(&self, name: &str) -> Option<u32> {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).ids.get(name).copied()
    }

    /// List every key, then follow every change; over again when the watch ends or work was dropped.
    async fn follow(self: Arc<Self>, tx: mpsc::Sender<Work>) {
        let prefix = format!("{}/", self.registry.prefix);
        loop {
            self.clusters.clear();
            self.relist.store(false, std::sync::atomic::Ordering::Relaxed);
            let mut owners = OwnerCache::new();
            let listed = self.list(&prefix, &mut owners, &tx).await;
            let events = match listed {
                Ok(rev) => self.registry.store.watch_current(&prefix, rev).await.map(|events| (rev, events)),
                Err(e) => Err(e),
            };
            let mut events = match events {
                Ok((rev, events)) => {
                    self.listed.send_replace(rev);
                    events
                }
                Err(e) => {
                    tracing::debug!(error = %e, "garbage collector: listing again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            while let Some(Ok(ev)) = events.next().await {
                match ev {
                    WatchEvent::Put { kv, created, .. } => {
                        owners.forget(&kv.key);
                        self.observe(&kv, created, &mut owners, &tx).await;
                        self.touched(&kv.key);
                    }
                    WatchEvent::Delete { key, .. } => {
                        owners.forget(&key);
                        self.deleted(&key, &tx).await;
                        self.touched(&key);
                    }
                    WatchEvent::Progress(_) => {}
                }
                if self.relist.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every key at one revision, page by page; returns the revision.
    async fn list(&self, prefix: &str, owners: &mut OwnerCache, tx: &mpsc::Sender<Work>) -> Result<i64, StoreError> {
        let (mut start, mut at) = (None, None);
        loop {
            let req = RangeRequest { prefix: prefix.to_string(), start: start.take(), limit: PAGE, revision: at };
            let got = self.registry.store.range(req).await?;
            let rev = *at.get_or_insert(got.revision);
            for kv in &got.kvs {
                self.observe(kv, false, owners, tx).await;
            }
            start = got.next_start();
            if start.is_none() {
                return Ok(rev);
            }
        }
    }

    /// An object as it is now: note what it owns and is owned by, and queue what needs looking at.
    async fn observe(&self, kv: &KeyValue, created: bool, owners: &mut OwnerCache, tx: &mpsc::Sender<Work>) {
        let prefix = &self.registry.prefix;
        let Some(key) = Key::parse(prefix, &kv.key) else { return };
        let owned = memchr::memmem::find(&kv.value, b"\"ownerReferences\"").is_some();
        let marked = memchr::memmem::find(&kv.value, b"\"deletionTimestamp\"").is_some();
        if !owned && !marked {
            return;
        }
        let Some(obj) = Object::parse(&kv.value) else { return };
        if key.group == resources::TENANCY_GROUP && marked && obj.deleting() {
            // A cluster being purged: its objects all go, owners or not.
            self.clusters.remove(key.name);
        }
        if obj.deleting() && (obj.has_finalizer(ORPHAN) || obj.has_finalizer(FOREGROUND)) {
            self.queue(tx, Work::Finalize(kv.key.as_str().into())).await;
        }
        if obj.owners().is_empty() {
            return;
        }
        let owned_id = self.intern(&key.collection()) * 2 + u32::from(key.namespace.is_some());
        let mut owner_ids = Vec::new();
        let mut look = false;
        for r in obj.owners() {
            let Some(def) = self.owner_def(key.cluster, r) else { continue };
            owner_ids.push(self.intern(&format!("{}/{}", def.storage_group(), def.plural)));
            if def.namespaced && key.namespace.is_none() {
                // Invalid: looked at once, when made, for its event.
                look |= created;
                continue;
            }
            let owner_key = self.owner_key(key.cluster, key.namespace, &def, &r.name);
            let uid = match owners.get(&owner_key) {
                Some(uid) => uid,
                None => {
                    let found = self.registry.store.get(&owner_key).await;
                    let uid = match found {
                        Ok(Some(kv)) => Object::parse(&kv.value).map(|o| o.uid().to_string()),
                        Ok(None) => None,
                        // Unknown: the worker reads it again.
                        Err(_) => {
                            look = true;
                            continue;
                        }
                    };
                    owners.put(&owner_key, uid.clone());
                    uid
                }
            };
            look |= uid.as_deref() != Some(r.uid.as_str());
        }
        {
            let mut held = self.clusters.entry(key.cluster.into()).or_default();
            if !held.owned.contains(&owned_id) {
                held.owned.push(owned_id);
            }
            for id in owner_ids {
                if !held.owners.contains(&id) {
                    held.owners.push(id);
                }
            }
        }
        if look {
            self.queue(tx, Work::Dependent(kv.key.as_str().into())).await;
        }
    }

    /// A key deleted: if its collection owns things in its cluster, what names it is looked at.
    async fn deleted(&self, key: &str, tx: &mpsc::Sender<Work>) {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return };
        let Some(id) = self.id_of(&k.collection()) else { return };
        let owns = self.clusters.get(k.cluster).is_some_and(|h| h.owners.contains(&id));
        if owns {
            let work = Work::Gone {
                cluster: k.cluster.into(),
                namespace: k.namespace.map(Into::into),
                group: k.group.into(),
                name: k.name.into(),
            };
            self.queue(tx, work).await;
        }
    }

    /// A change in a cluster with foreground owners waiting: look at them again soon.
    fn touched(&self, key: &str) {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return };
        let waiting: Vec<Box<str>> = match self.clusters.get(k.cluster) {
            Some(h) if !h.waiting.is_empty() => h.waiting.clone(),
            _ => return,
        };
        for w in waiting {
            self.later(Work::Finalize(w), RECHECK, false);
        }
    }

    async fn queue(&self, tx: &mpsc::Sender<Work>, work: Work) {
        if self.queued.insert(work.clone()) && tx.send(work.clone()).await.is_err() {
            self.queued.remove(&work);
        }
    }

    /// Hold `work` until `after` from now (the sooner of two holds); a failed item's pause doubles
    /// with each failure instead.
    fn later(&self, work: Work, after: Duration, failed: bool) {
        let mut l = self.later.lock().unwrap_or_else(|p| p.into_inner());
        if l.due.len() >= LATER_MAX && !l.due.contains_key(&work) {
            tracing::warn!("garbage collector: too much work held; listing again");
            self.relist.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let after = if failed {
            let n = l.failures.entry(work.clone()).or_insert(0);
            *n = (*n + 1).min(8);
            RETRY.saturating_mul(1 << (*n - 1)).min(RETRY_MAX)
        } else {
            after
        };
        let at = Instant::now() + after;
        let due = l.due.entry(work).or_insert(at);
        *due = (*due).min(at);
    }

    /// Take queued work, a few items at once; move held work to the queue as it falls due.
    async fn work(self: Arc<Self>, mut rx: mpsc::Receiver<Work>, tx: mpsc::Sender<Work>) {
        let mut running = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                got = rx.recv(), if running.len() < WORKERS => {
                    let Some(work) = got else { return };
                    self.queued.remove(&work);
                    let me = self.clone();
                    running.spawn(async move {
                        let result = me.handle(&work).await;
                        (work, result)
                    });
                }
                Some(done) = running.join_next() => {
                    match done {
                        Ok((work, Err(e))) => {
                            tracing::debug!(?work, error = %e.message, "garbage collector: retrying");
                            self.later(work, RETRY, true);
                        }
                        Ok((work, Ok(again))) => {
                            self.later.lock().unwrap_or_else(|p| p.into_inner()).failures.remove(&work);
                            if let Some(after) = again {
                                self.later(work, after, false);
                            }
                        }
                        Err(_) => {}
                    }
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    let due: Vec<Work> = {
                        let mut l = self.later.lock().unwrap_or_else(|p| p.into_inner());
                        let due: Vec<Work> = l.due.iter().filter(|(_, at)| **at <= now).map(|(w, _)| w.clone()).collect();
                        for w in &due {
                            l.due.remove(w);
                        }
                        due
                    };
                    for w in due {
                        if self.queued.insert(w.clone()) && tx.try_send(w.clone()).is_err() {
                            // Full: it stays held for the next tick.
                            self.queued.remove(&w);
                            self.later(w, Duration::from_millis(100), false);
                        }
                    }
                }
            }
        }
    }

    /// Handle one item; `Ok(Some(pause))` to take it again after the pause.
    async fn handle(&self, work: &Work) -> ApiResult<Option<Duration>> {
        match work {
            Work::Dependent(key) => {
                let Some(kv) = self.registry.store.get(key).await? else { return Ok(None) };
                let Some(obj) = Object::parse(&kv.value) else { return Ok(None) };
                self.attempt(key, &obj).await?;
                Ok(None)
            }
            Work::Gone { cluster, namespace, group, name } => {
                let quoted = serde_json::to_string(&**name).expect("strings serialise");
                let owner_group = if &**group == "core" { "" } else { &**group };
                let matches = |r: &OwnerRef| r.name == **name && r.group_version().0 == owner_group;
                let (found, more) = self.dependents(cluster, namespace.as_deref(), quoted.as_bytes(), &matches).await?;
                self.each(found, |(key, obj)| async move { self.attempt(&key, &obj).await }).await?;
                Ok(more.then_some(Duration::ZERO))
            }
            Work::Finalize(key) => self.finalize(key).await,
        }
    }

    /// Run `act` on every item, `PER_ITEM` at once; the first error after all have run.
    async fn each<T, F, Fut>(&self, items: Vec<T>, act: F) -> ApiResult<()>
    where
        F: Fn(T) -> Fut,
        Fut: std::future::Future<Output = ApiResult<()>>,
    {
        let results: Vec<ApiResult<()>> =
            futures::stream::iter(items.into_iter().map(act)).buffer_unordered(PER_ITEM).collect().await;
        results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
    }

    /// The objects in scope of an owner (its namespace, or its whole cluster when it is
    /// cluster-scoped) in the collections holding owned objects in its cluster, whose references
    /// `matches`; at most `MAX_FOUND`, and whether more may follow. `needle` is what such an object's
    /// JSON must contain (the owner's name or uid), so that most objects are not parsed.
    async fn dependents(
        &self,
        cluster: &str,
        namespace: Option<&str>,
        needle: &[u8],
        matches: &(dyn Fn(&OwnerRef) -> bool + Sync),
    ) -> ApiResult<(Vec<(String, Object)>, bool)> {
        let owned: Vec<u32> = match self.clusters.get(cluster) {
            Some(h) => h.owned.clone(),
            None => return Ok((Vec::new(), false)),
        };
        let finder = memchr::memmem::Finder::new(needle);
        let mut found = Vec::new();
        for id in owned {
            // A namespaced owner's dependents are in its namespace, so never cluster-scoped.
            let namespaced = id % 2 == 1;
            if namespace.is_some() && !namespaced {
                continue;
            }
            let collection = self.name_of(id / 2);
            let prefix = match namespace {
                Some(ns) => format!("{}/{collection}/{cluster}/{ns}/", self.registry.prefix),
                None => format!("{}/{collection}/{cluster}/", self.registry.prefix),
            };
            let mut start = None;
            loop {
                let req = RangeRequest { prefix: prefix.clone(), start: start.take(), limit: PAGE, revision: None };
                let got = self.registry.store.range(req).await?;
                for kv in &got.kvs {
                    if finder.find(&kv.value).is_none() {
                        continue;
                    }
                    let Some(obj) = Object::parse(&kv.value) else { continue };
                    if obj.owners().iter().any(matches) {
                        found.push((kv.key.clone(), obj));
                        if found.len() >= MAX_FOUND {
                            return Ok((found, true));
                        }
                    }
                }
                start = got.next_start();
                if start.is_none() {
                    break;
                }
            }
        }
        Ok((found, false))
    }

    /// Built-in or custom, the type an owner reference names in `cluster`.
    fn owner_def(&self, cluster: &str, r: &OwnerRef) -> Option<Arc<ResourceDef>> {
        let (group, version) = r.group_version();
        resources::for_cluster(cluster)
            .find(|d| d.group == group && d.version == version && d.kind == r.kind)
            .cloned()
            .or_else(|| self.crds.find_kind(cluster, group, version, &r.kind))
    }

    fn owner_key(&self, cluster: &str, namespace: Option<&str>, def: &ResourceDef, name: &str) -> String {
        let ns = if def.namespaced { namespace } else { None };
        keys::object(&self.registry.prefix, def.storage_group(), &def.plural, cluster, ns, name)
    }

    /// The type of the objects under a key's collection, in the version `api_version` when served.
    fn stored_def(&self, key: &Key<'_>, api_version: Option<&str>) -> Option<Arc<ResourceDef>> {
        let builtins: Vec<&Arc<ResourceDef>> = resources::for_cluster(key.cluster)
            .filter(|d| d.storage_group() == key.group && d.plural == key.plural)
            .collect();
        let exact = builtins.iter().find(|d| api_version.is_none_or(|v| d.api_version() == v));
        exact
            .or(builtins.first())
            .map(|d| (*d).clone())
            .or_else(|| self.crds.find_any_version(key.cluster, key.group, key.plural))
    }

    /// Look one owner reference of a dependent up, live.
    async fn owner(&self, key: &Key<'_>, r: &OwnerRef) -> ApiResult<Owner> {
        let Some(def) = self.owner_def(key.cluster, r) else { return Ok(Owner::Unresolvable) };
        if def.namespaced && key.namespace.is_none() {
            return Ok(Owner::Invalid);
        }
        let owner_key = self.owner_key(key.cluster, key.namespace, &def, &r.name);
        let Some(kv) = self.registry.store.get(&owner_key).await? else { return Ok(Owner::Dangling) };
        let Some(obj) = Object::parse(&kv.value) else { return Ok(Owner::Solid) };
        Ok(match () {
            _ if obj.uid() != r.uid => Owner::Dangling,
            _ if obj.deleting() && obj.has_finalizer(FOREGROUND) => Owner::Waiting,
            _ => Owner::Solid,
        })
    }

    /// kube's `attemptToDeleteItem` for the dependent at `key`, as `obj` read it.
    async fn attempt(&self, key: &str, obj: &Object) -> ApiResult<()> {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(()) };
        if obj.deleting() || obj.owners().is_empty() {
            // Being deleted: its own finalizers decide (a foreground one is finalized on its own).
            return Ok(());
        }
        let (mut solid, mut waiting, mut drop) = (0, false, Vec::new());
        for r in obj.owners() {
            match self.owner(&k, r).await? {
                Owner::Solid | Owner::Unresolvable => solid += 1,
                Owner::Invalid => {
                    solid += 1;
                    self.report_invalid(&k, obj, r, "").await;
                }
                Owner::Dangling => {
                    if let (Some(ns), Some(def)) = (k.namespace, self.owner_def(k.cluster, r)) {
                        if def.namespaced && self.lives_elsewhere(&k, &def, r).await {
                            self.report_invalid(&k, obj, r, ns).await;
                        }
                    }
                    drop.push(r.uid.clone());
                }
                Owner::Waiting => {
                    waiting = true;
                    drop.push(r.uid.clone());
                }
            }
        }
        if solid > 0 {
            if !drop.is_empty() {
                self.drop_refs(key, obj.uid(), &drop).await?;
            }
            return Ok(());
        }
        let owns = self
            .id_of(&k.collection())
            .is_some_and(|id| self.clusters.get(k.cluster).is_some_and(|h| h.owners.contains(&id)));
        let policy = match () {
            _ if waiting && owns => Propagation::Foreground,
            _ if obj.has_finalizer(ORPHAN) => Propagation::Orphan,
            _ if obj.has_finalizer(FOREGROUND) => Propagation::Foreground,
            _ => Propagation::Background,
        };
        self.delete(&k, obj, policy).await
    }

    /// Delete a dependent through the registry, only while it is the object that was looked at.
    async fn delete(&self, k: &Key<'_>, obj: &Object, policy: Propagation) -> ApiResult<()> {
        let Some(def) = self.stored_def(k, obj.api_version.as_deref()) else {
            return Err(ApiError::internal(format!("no type serves {}/{} in {}", k.group, k.plural, k.cluster)));
        };
        let ctx = Ctx {
            cluster: k.cluster,
            def: &def,
            namespace: k.namespace,
            user: &self.identity,
            user_agent: Some(COMPONENT),
            admit: None,
        };
        let opts = DeleteOptions {
            dry_run: false,
            uid: Some(obj.uid().to_string()),
            resource_version: None,
            propagation: Some(policy),
            grace_period: None,
        };
        match self.registry.delete(&ctx, k.name, &opts).await {
            Ok(_) => Ok(()),
            // Gone, or another object of that name since: nothing of this one to collect.
            Err(e) if e.code == 404 || (e.code == 409 && e.message.contains("Precondition failed: UID")) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Remove the references with these uids from the object at `key` (while it has `uid`).
    async fn drop_refs(&self, key: &str, uid: &str, drop: &[String]) -> ApiResult<()> {
        self.rewrite(key, uid, |obj| {
            let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return false };
            let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else { return false };
            let before = refs.len();
            refs.retain(|r| !r["uid"].as_str().is_some_and(|u| drop.iter().any(|d| d == u)));
            let changed = refs.len() != before;
            if refs.is_empty() {
                meta.remove("ownerReferences");
            }
            changed
        })
        .await
    }

    /// Change the stored object at `key` by `edit` (which says whether it changed anything), by
    /// compare-and-swap, while it is the object with `uid`. An object with no finalizers left after
    /// its deletion went is deleted.
    async fn rewrite(&self, key: &str, uid: &str, edit: impl Fn(&mut Value) -> bool) -> ApiResult<()> {
        for _ in 0..16 {
            let Some(kv) = self.registry.store.get(key).await? else { return Ok(()) };
            let Ok(mut obj) = serde_json::from_slice::<Value>(&kv.value) else { return Ok(()) };
            if obj["metadata"]["uid"].as_str() != Some(uid) || !edit(&mut obj) {
                return Ok(());
            }
            let deleting = obj["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null());
            let finalized = obj["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
            let res = if deleting && finalized {
                self.registry.store.delete(key, Some(kv.mod_revision)).await.map(|_| ())
            } else {
                self.registry.store.update(key, crate::registry::encode(&obj), kv.mod_revision).await.map(|_| ())
            };
            match res {
                Ok(()) | Err(StoreError::NotFound) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict("", "", key, "too many concurrent updates"))
    }

    /// An owner marked with `orphan` or `foregroundDeletion`: orphan its dependents, or delete them
    /// and wait for the blocking ones; then take its finalizer off.
    async fn finalize(&self, key: &str) -> ApiResult<Option<Duration>> {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(None) };
        let obj = match self.registry.store.get(key).await? {
            Some(kv) => Object::parse(&kv.value),
            None => None,
        };
        let Some(obj) = obj.filter(|o| o.deleting() && (o.has_finalizer(ORPHAN) || o.has_finalizer(FOREGROUND))) else {
            self.unwait(k.cluster, key);
            return Ok(None);
        };
        let uid = obj.uid().to_string();
        let matches = |r: &OwnerRef| r.uid == uid;
        let (found, more) = self.dependents(k.cluster, k.namespace, uid.as_bytes(), &matches).await?;
        if obj.has_finalizer(ORPHAN) {
            let refs = [uid.clone()];
            self.each(found, |(dep, o)| {
                let refs = &refs;
                async move { self.drop_refs(&dep, o.uid(), refs).await }
            })
            .await?;
            if more {
                return Ok(Some(Duration::ZERO));
            }
            self.remove_finalizer(key, &uid, ORPHAN).await?;
            return Ok(None);
        }
        let blocking = found
            .iter()
            .filter(|(_, o)| o.owners().iter().any(|r| r.uid == uid && r.block_owner_deletion == Some(true)))
            .count();
        if found.is_empty() {
            self.unwait(k.cluster, key);
            self.remove_finalizer(key, &uid, FOREGROUND).await?;
            return Ok(None);
        }
        // Waiting from now, so that the deletes below bring it back at once.
        self.wait(k.cluster, key);
        self.each(found, |(dep, o)| async move { self.attempt(&dep, &o).await }).await?;
        if blocking == 0 && !more {
            // Only dependents that do not block were left: they are on their way; the owner goes.
            self.unwait(k.cluster, key);
            self.remove_finalizer(key, &uid, FOREGROUND).await?;
            return Ok(None);
        }
        Ok(Some(if more { Duration::ZERO } else { WAITING_RECHECK }))
    }

    fn wait(&self, cluster: &str, key: &str) {
        let mut held = self.clusters.entry(cluster.into()).or_default();
        if !held.waiting.iter().any(|w| &**w == key) {
            held.waiting.push(key.into());
        }
    }

    fn unwait(&self, cluster: &str, key: &str) {
        if let Some(mut held) = self.clusters.get_mut(cluster) {
            held.waiting.retain(|w| &**w != key);
        }
    }

    async fn remove_finalizer(&self, key: &str, uid: &str, finalizer: &str) -> ApiResult<()> {
        self.rewrite(key, uid, |obj| {
            let Some(fs) = obj["metadata"].get_mut("finalizers").and_then(Value::as_array_mut) else { return false };
            let before = fs.len();
            fs.retain(|f| f.as_str() != Some(finalizer));
            fs.len() != before
        })
        .await
    }

    /// Whether the owner a namespaced dependent names is in another namespace of its cluster (kube's
    /// collector reports that; the reference is dangling all the same).
    async fn lives_elsewhere(&self, k: &Key<'_>, def: &ResourceDef, r: &OwnerRef) -> bool {
        let prefix = keys::collection(&self.registry.prefix, def.storage_group(), &def.plural, Some(k.cluster), None);
        let needle = format!("\"{}\"", r.uid);
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let mut start = None;
        loop {
            let req = RangeRequest { prefix: prefix.clone(), start: start.take(), limit: PAGE, revision: None };
            let Ok(got) = self.registry.store.range(req).await else { return false };
            let suffix = format!("/{}", r.name);
            if got.kvs.iter().any(|kv| kv.key.ends_with(&suffix) && finder.find(&kv.value).is_some()) {
                return true;
            }
            start = got.next_start();
            if start.is_none() {
                return false;
            }
        }
    }

    /// kube's warning event `OwnerRefInvalidNamespace` on the dependent.
    async fn report_invalid(&self, k: &Key<'_>, obj: &Object, r: &OwnerRef, namespace: &str) {
        let Some(events) = resources::find("", "v1", "events") else { return };
        let event_ns = k.namespace.unwrap_or("default");
        let now = crate::meta::now_rfc3339();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{}.{nanos:x}", k.name), "namespace": event_ns},
            "involvedObject": {
                "apiVersion": obj.api_version,
                "kind": obj.kind,
                "name": k.name,
                "namespace": k.namespace,
                "uid": obj.uid(),
            },
            "reason": "OwnerRefInvalidNamespace",
            "message": format!("ownerRef {} does not exist in namespace {namespace:?}", r.describe(namespace)),
            "type": "Warning",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
        });
        let ctx = Ctx {
            cluster: k.cluster,
            def: &events,
            namespace: Some(event_ns),
            user: &self.identity,
            user_agent: Some(COMPONENT),
            admit: None,
        };
        let opts = crate::registry::WriteOptions::from_query(&crate::request::Query::default()).expect("no options");
        if let Err(e) = self.registry.create(&ctx, event, &opts).await {
            tracing::debug!(error = %e.message, "garbage collector: writing an event");
        }
    }
}

/// Owners the watch has looked up: key to uid (`None`: absent), forgotten as the watch passes a
/// change of the key. Written and read by the watch alone, in revision order, so an answer is never
/// older than the changes the watch has applied (a worker's read could be, and would keep a deleted
/// owner alive here). Bounded in bytes; S3-FIFO keeps the owners that many dependents name.
struct OwnerCache(quick_cache::unsync::Cache<String, Option<String>, Weight>);

#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<String, Option<String>> for Weight {
    fn weight(&self, key: &String, uid: &Option<String>) -> u64 {
        (key.len() + uid.as_ref().map_or(0, String::len) + 48) as u64
    }
}

impl OwnerCache {
    fn new() -> Self {
        OwnerCache(quick_cache::unsync::Cache::with_weighter(
            (OWNER_CACHE_BYTES / 128) as usize,
            OWNER_CACHE_BYTES,
            Weight,
        ))
    }

    fn get(&self, key: &str) -> Option<Option<String>> {
        self.0.get(key).cloned()
    }

    fn put(&mut self, key: &str, uid: Option<String>) {
        self.0.insert(key.to_string(), uid);
    }

    fn forget(&mut self, key: &str) {
        self.0.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_collection_cluster_and_scope() {
        let k = Key::parse("/registry", "/registry/apps/replicasets/team-a/default/web-1").unwrap();
        assert_eq!(
            k,
            Key { group: "apps", plural: "replicasets", cluster: "team-a", namespace: Some("default"), name: "web-1" }
        );
        assert_eq!(k.collection(), "apps/replicasets");
        let c = Key::parse("/registry", "/registry/core/namespaces/root/default").unwrap();
        assert_eq!(c.namespace, None);
        assert_eq!(Key::parse("/registry", "/registry/kgate/schedules/compaction/x"), None);
        assert_eq!(Key::parse("/registry", "/other/core/pods/root/a/b"), None);
    }

    #[test]
    fn objects_read_with_nulls_and_unknown_fields() {
        let o = Object::parse(
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"uid":"u","finalizers":null,"ownerReferences":[
            {"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o","blockOwnerDeletion":true,"controller":true}]},
            "spec":{"containers":[]}}"#,
        )
        .unwrap();
        assert_eq!(o.uid(), "u");
        assert!(!o.has_finalizer(ORPHAN));
        assert_eq!(o.owners()[0].group_version(), ("apps", "v1"));
        assert_eq!(o.owners()[0].block_owner_deletion, Some(true));
        let core = OwnerRef { api_version: "v1".into(), ..Default::default() };
        assert_eq!(core.group_version(), ("", "v1"));
        let described = OwnerRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: "o".into(),
            block_owner_deletion: None,
        }
        .describe("ns");
        assert_eq!(described, "[apps/v1/ReplicaSet, namespace: ns, name: rs, uid: o]");
    }
}
