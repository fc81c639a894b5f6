//! The garbage collector: objects go with their owners, per logical cluster, by the rules of
//! kube-controller-manager's collector (ownerReferences, background, foreground and orphan deletion,
//! dangling references, blockOwnerDeletion, kube's events for invalid references).
//!
//! kube's collector holds every object of every type in a graph. One of 100,000 logical clusters
//! cannot: this one holds, per cluster that has owned objects, which collections hold them and which
//! collections own them (a few numbers), the foreground deletions waiting on dependents and the
//! namespaces being deleted, and a bounded cache of owners the watch has looked up. Everything else
//! is read when needed:
//! - an owned object written (a watch of every key, after the leader's listing): its owners are
//!   looked up, and it is queued when one is missing or has another uid;
//! - objects deleted in a collection that owns something in their cluster: the collections holding
//!   owned objects in their scope (a namespace, or the whole cluster for cluster-scoped owners) are
//!   read once for every owner deleted meanwhile, and each object naming one is looked at;
//! - an owner marked with `orphan` or `foregroundDeletion`: its dependents are found the same way,
//!   once the listing is done (so that every collection is known).
//!
//! Looking at a dependent is kube's `attemptToDeleteItem`: the dependent is read again and each owner
//! read live; with an owner still there, references to absent owners (and to owners waiting in the
//! foreground) are removed; with none, the dependent is deleted, in the foreground when an owner waits
//! for it and it owns things in turn (its references made non-blocking first when one of its own
//! dependents waits too, as kube breaks such cycles). Every write goes through the registry, as a
//! client's would (its hooks, quota and watches): deletes with a uid precondition, metadata changes
//! as merge patches at the revision read.
//!
//! It runs on the leader, one per shard, over that shard's store: a cluster's objects and owners are
//! all on its shard. A cluster moving between shards is left alone until it settles (its keys going
//! on one shard and arriving on the other are no owner going). A new leader lists again and redoes
//! nothing wrongly.

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
/// Owner references the watch itself looks up for one object; an object naming more is left to a
/// worker, so that no tenant's object holds up the watch that every cluster of the shard shares.
const WATCH_LOOKUPS: usize = 4;
/// Work queued for the workers; the watch waits while it is full (the store holds the rest).
const QUEUE: usize = 4_096;
/// Work items handled at once.
const WORKERS: usize = 4;
/// Dependents one item acts on at once.
const PER_ITEM: usize = 16;
/// Dependents one read gathers (their keys) before acting on them; the read then goes on from there.
const MAX_FOUND: usize = 1_024;
/// Work held for later (retries, foreground owners waiting): past this the collector lists again
/// rather than hold more.
const LATER_MAX: usize = 100_000;
/// How long after a change in its cluster a waiting foreground owner is looked at again.
const RECHECK: Duration = Duration::from_millis(200);
/// A waiting foreground owner is looked at again after this, doubling while nothing changes in its
/// cluster up to `WAITING_RECHECK_MAX` (any change there brings it back within `RECHECK`).
const WAITING_RECHECK: Duration = Duration::from_secs(2);
const WAITING_RECHECK_MAX: Duration = Duration::from_secs(60);
/// A failed item's first retry; doubled up to `RETRY_MAX`.
const RETRY: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Bits of the record of owners named (4 MiB): about 0.1% false positives at a million owners.
const NAMED_BITS: usize = 1 << 25;
/// Owners named that it is sized for.
const NAMED_EXPECTED: usize = 1_000_000;
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
    /// Objects that own things in this scope (a namespace, or a whole cluster for cluster-scoped
    /// ones) were deleted (`Collector::gone` names them): look at what names them, in one read.
    Gone { cluster: Box<str>, namespace: Option<Box<str>> },
    /// An owner marked with `orphan` or `foregroundDeletion`.
    Finalize(Box<str>),
}

/// What one cluster holds that the collector needs to know, for clusters with owned objects only.
#[derive(Debug, Default)]
struct Held {
    /// Collections holding owned objects: their name's number, times two, plus one when namespaced.
    /// Only ever grows (a read of dependents resumes by position in it).
    owned: Vec<u32>,
    /// Collections whose objects are named as owners.
    owners: Vec<u32>,
    /// Keys of owners deleted in the foreground and waiting for dependents.
    waiting: Vec<Box<str>>,
    /// Namespaces being deleted: their objects all go, owners or not, so their deletes are not
    /// followed to dependents (a namespace of many owners would cost as many reads of it).
    terminating: Vec<Box<str>>,
    /// Some dependent names an owner of a type the cluster does not serve (yet): deletes of its
    /// custom resources are followed too, in case that type is one of them now.
    unresolved: bool,
}

/// Collection names by number, so that each cluster's `Held` is a few integers. Grows with the
/// distinct collections that own or are owned, not with clusters.
#[derive(Default)]
struct Names {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

/// A deleted owner: its collection (storage group and plural) and name.
type GoneOwner = (Box<str>, Box<str>, Box<str>);

/// Where owners went: a cluster, and a namespace for namespaced ones.
type Scope = (Box<str>, Option<Box<str>>);

/// Deleted owners waiting for their scope's read, most `GONE_MAX` in all.
const GONE_MAX: usize = 100_000;

/// Work held until a time (retries, and foreground owners to look at again), and how often each
/// item has in a row failed or found its owner still waiting, which lengthens its pauses.
#[derive(Default)]
struct Later {
    due: HashMap<Work, Instant>,
    tries: HashMap<Work, u32>,
}

/// What handling an item comes to.
#[derive(Debug)]
enum Next {
    Done,
    /// A foreground owner still waiting for blocking dependents.
    Waiting,
    /// To be taken again after the pause (its cluster is moving between shards).
    Later(Duration),
}

/// A dependent found by a read: its key, and whether its reference to the owner looked for blocks
/// the owner's deletion, and whether it is itself deleted in the foreground (waiting for its own).
#[derive(Debug, Clone)]
struct Found {
    key: String,
    blocks: bool,
    deleting_dependents: bool,
}

/// Where a read of dependents goes on from: a position in the cluster's owned collections, and the
/// key to start at there.
type Resume = Option<(usize, String)>;

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
    /// Owners deleted, by scope, until their scope's `Work::Gone` takes them: owners deleted together
    /// (a cascade, a `kubectl delete` of many) cost one read of their scope, not one each. A std
    /// Mutex, held to add or take a scope's names.
    gone: Mutex<HashMap<Scope, Vec<GoneOwner>>>,
    /// Set when work could not be held: the watch starts over with a listing, which finds it again.
    relist: std::sync::atomic::AtomicBool,
    /// The revision of the last listing, once it is done (0 before).
    listed: tokio::sync::watch::Sender<i64>,
    /// Every owner some object has named since this collector started, by cluster and uid and by
    /// cluster, collection and name: what kube's graph tells its collector (whether an object has
    /// dependents) in a fixed 4 MiB for the whole shard. A miss means no object names it, so a
    /// deleted object that no one names costs no read, nor does a dependent deleted in the
    /// foreground that owns nothing. Never cleared: a false positive only costs a read.
    named: fastbloom::AtomicBloomFilter,
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
            gone: Mutex::new(HashMap::new()),
            relist: Default::default(),
            listed: tokio::sync::watch::channel(0).0,
            named: fastbloom::AtomicBloomFilter::with_num_bits(NAMED_BITS).expected_items(NAMED_EXPECTED),
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
            let keys = |v: &Vec<Box<str>>| v.iter().map(|w| w.len() + 16).sum::<usize>();
            bytes += e.key().len()
                + std::mem::size_of::<Held>()
                + 4 * (h.owned.capacity() + h.owners.capacity())
                + keys(&h.waiting)
                + keys(&h.terminating)
                + 16;
        }
        (self.clusters.len(), bytes)
    }

    fn lock_later(&self) -> std::sync::MutexGuard<'_, Later> {
        self.later.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Whether `cluster` is moving between shards: its keys are being deleted on one and written on
    /// the other, which is no owner going nor any dependent dangling.
    fn moving(&self, cluster: &str) -> bool {
        self.registry.moves.has(cluster)
    }

    /// Whether some object may name the object with `uid` in `cluster` as its owner.
    fn might_own(&self, cluster: &str, uid: &str) -> bool {
        self.named.contains(&(cluster, uid))
    }

    fn in_terminating_namespace(&self, k: &Key<'_>) -> bool {
        let Some(ns) = k.namespace else { return false };
        self.clusters.get(k.cluster).is_some_and(|h| h.terminating.iter().any(|t| &**t == ns))
    }

    /// List every key, then follow every change; over again when the watch ends or work was dropped.
    /// What is known of each cluster is kept across listings (a listing only adds to it), so that
    /// a read of dependents during one never misses a collection.
    async fn follow(self: Arc<Self>, tx: mpsc::Sender<Work>) {
        let prefix = format!("{}/", self.registry.prefix);
        loop {
            if self.relist.swap(false, std::sync::atomic::Ordering::Relaxed) {
                // What could not be held is found again by the listing.
                let mut l = self.lock_later();
                l.due.clear();
                l.tries.clear();
            }
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
                        if let Some(work) = self.observe(&kv, created, &mut owners, &tx).await {
                            self.queue(&tx, work).await;
                        }
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

    /// Every key at one revision, page by page; returns the revision. Owners marked for deletion are
    /// taken on only once every key is listed: their dependents are found by what the listing learns.
    async fn list(&self, prefix: &str, owners: &mut OwnerCache, tx: &mpsc::Sender<Work>) -> Result<i64, StoreError> {
        let (mut start, mut at) = (None, None);
        let mut marked = Vec::new();
        loop {
            let req = RangeRequest { prefix: prefix.to_string(), start: start.take(), limit: PAGE, revision: at };
            let got = self.registry.store.range(req).await?;
            let rev = *at.get_or_insert(got.revision);
            for kv in &got.kvs {
                // As made, for what is reported once (invalid references), as kube's collector
                // reports them when it first sees them.
                if let Some(work) = self.observe(kv, true, owners, tx).await {
                    marked.push(work);
                }
            }
            start = got.next_start();
            if start.is_none() {
                for work in marked {
                    self.queue(tx, work).await;
                }
                return Ok(rev);
            }
        }
    }

    /// An object as it is now: note what it owns and is owned by, and queue the dependents that need
    /// looking at; returns the work of an owner marked for deletion, for the caller to queue.
    async fn observe(
        &self,
        kv: &KeyValue,
        created: bool,
        owners: &mut OwnerCache,
        tx: &mpsc::Sender<Work>,
    ) -> Option<Work> {
        let prefix = &self.registry.prefix;
        let key = Key::parse(prefix, &kv.key)?;
        let owned = memchr::memmem::find(&kv.value, b"\"ownerReferences\"").is_some();
        let marked = memchr::memmem::find(&kv.value, b"\"deletionTimestamp\"").is_some();
        if !owned && !marked {
            return None;
        }
        let obj = Object::parse(&kv.value)?;
        if marked && obj.deleting() {
            match (key.group, key.plural) {
                // A cluster being purged: its objects all go, owners or not.
                (resources::TENANCY_GROUP, "logicalclusters") => {
                    self.clusters.remove(key.name);
                }
                ("core", "namespaces") => {
                    if let Some(mut held) = self.clusters.get_mut(key.cluster) {
                        if !held.terminating.iter().any(|t| &**t == key.name) {
                            held.terminating.push(key.name.into());
                        }
                    }
                }
                _ => {}
            }
        }
        let finalize = (obj.deleting() && (obj.has_finalizer(ORPHAN) || obj.has_finalizer(FOREGROUND)))
            .then(|| Work::Finalize(kv.key.as_str().into()));
        if obj.owners().is_empty() {
            return finalize;
        }
        let owned_id = self.intern(&key.collection()) * 2 + u32::from(key.namespace.is_some());
        let mut owner_ids = Vec::new();
        let mut unresolved = false;
        // Many references are a worker's to look up, not the shared watch's.
        let mut look = obj.owners().len() > WATCH_LOOKUPS;
        for r in obj.owners() {
            self.named.insert(&(key.cluster, r.uid.as_str()));
            let Some(def) = self.owner_def(key.cluster, r) else {
                // By name alone: the collection is not known yet.
                self.named.insert(&(key.cluster, "", r.name.as_str()));
                unresolved = true;
                continue;
            };
            let collection = format!("{}/{}", def.storage_group(), def.plural);
            self.named.insert(&(key.cluster, collection.as_str(), r.name.as_str()));
            owner_ids.push(self.intern(&collection));
            if look {
                continue;
            }
            if def.namespaced && key.namespace.is_none() {
                // Invalid: looked at once, when made or listed, for its event.
                look |= created;
                continue;
            }
            let owner_key = self.owner_key(key.cluster, key.namespace, &def, &r.name);
            let uid = match owners.get(&owner_key) {
                Some(uid) => uid,
                None => match self.registry.store.get(&owner_key).await {
                    Ok(found) => {
                        let uid = found.and_then(|kv| Object::parse(&kv.value)).map(|o| o.uid().to_string());
                        owners.put(&owner_key, uid.clone());
                        uid
                    }
                    // Unknown: a worker reads it again.
                    Err(_) => {
                        look = true;
                        continue;
                    }
                },
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
            held.unresolved |= unresolved;
        }
        if look && !self.moving(key.cluster) && !self.in_terminating_namespace(&key) {
            self.queue(tx, Work::Dependent(kv.key.as_str().into())).await;
        }
        finalize
    }

    /// A key deleted: if its collection owns things in its cluster, what names it is looked at.
    async fn deleted(&self, key: &str, tx: &mpsc::Sender<Work>) {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return };
        if (k.group, k.plural) == ("core", "namespaces") {
            if let Some(mut held) = self.clusters.get_mut(k.cluster) {
                held.terminating.retain(|t| &**t != k.name);
            }
            // A namespace may own things too (in other namespaces, or cluster-wide): go on.
        }
        let owns = {
            let Some(held) = self.clusters.get(k.cluster) else { return };
            let id = self.id_of(&k.collection());
            let custom = || !resources::builtins().iter().any(|d| d.storage_group() == k.group && d.plural == k.plural);
            let collection = k.collection();
            let named = self.named.contains(&(k.cluster, collection.as_str(), k.name));
            (id.is_some_and(|id| held.owners.contains(&id)) && named)
                || (held.unresolved && custom() && self.named.contains(&(k.cluster, "", k.name)))
        };
        if owns && !self.moving(k.cluster) && !self.in_terminating_namespace(&k) {
            let scope: Scope = (k.cluster.into(), k.namespace.map(Into::into));
            {
                let mut gone = self.gone.lock().unwrap_or_else(|p| p.into_inner());
                if gone.values().map(Vec::len).sum::<usize>() >= GONE_MAX {
                    // The listing finds their dependents again, dangling.
                    tracing::warn!("garbage collector: too many deleted owners waiting; listing again");
                    self.relist.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                gone.entry(scope.clone()).or_default().push((k.group.into(), k.plural.into(), k.name.into()));
            }
            self.queue(tx, Work::Gone { cluster: scope.0, namespace: scope.1 }).await;
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
            self.later(Work::Finalize(w), RECHECK);
        }
    }

    async fn queue(&self, tx: &mpsc::Sender<Work>, work: Work) {
        if self.queued.insert(work.clone()) && tx.send(work.clone()).await.is_err() {
            self.queued.remove(&work);
        }
    }

    /// Hold `work` until `after` from now (the sooner of two holds).
    fn later(&self, work: Work, after: Duration) {
        let mut l = self.lock_later();
        if l.due.len() >= LATER_MAX && !l.due.contains_key(&work) {
            tracing::warn!("garbage collector: too much work held; listing again");
            self.relist.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let at = Instant::now() + after;
        let due = l.due.entry(work).or_insert(at);
        *due = (*due).min(at);
    }

    /// Hold `work` again after a pause that doubles from `first` up to `max` with each time in a row.
    fn again(&self, work: Work, first: Duration, max: Duration) {
        let pause = {
            let mut l = self.lock_later();
            let n = l.tries.entry(work.clone()).or_insert(0);
            *n = (*n + 1).min(8);
            first.saturating_mul(1 << (*n - 1)).min(max)
        };
        self.later(work, pause);
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
                    let Ok((work, result)) = done else { continue };
                    match result {
                        Err(e) => {
                            tracing::debug!(?work, error = %e.message, "garbage collector: retrying");
                            self.again(work, RETRY, RETRY_MAX);
                        }
                        Ok(Next::Waiting) => self.again(work, WAITING_RECHECK, WAITING_RECHECK_MAX),
                        Ok(Next::Later(after)) => self.later(work, after),
                        Ok(Next::Done) => {
                            self.lock_later().tries.remove(&work);
                        }
                    }
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    let due: Vec<Work> = {
                        let mut l = self.lock_later();
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
                            self.later(w, Duration::from_millis(100));
                        }
                    }
                }
            }
        }
    }

    /// Handle one item.
    async fn handle(&self, work: &Work) -> ApiResult<Next> {
        match work {
            Work::Dependent(key) => {
                let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(Next::Done) };
                if self.moving(k.cluster) {
                    return Ok(Next::Later(RETRY_MAX));
                }
                self.attempt(key, true).await?;
                Ok(Next::Done)
            }
            Work::Gone { cluster, namespace } => {
                let owners = {
                    let mut gone = self.gone.lock().unwrap_or_else(|p| p.into_inner());
                    gone.remove(&(cluster.clone(), namespace.clone())).unwrap_or_default()
                };
                if owners.is_empty() || self.moving(cluster) {
                    return Ok(Next::Done);
                }
                let result = self.gone_owners(cluster, namespace.as_deref(), &owners).await;
                if result.is_err() {
                    // Taken back, for the retry to find.
                    let mut gone = self.gone.lock().unwrap_or_else(|p| p.into_inner());
                    gone.entry((cluster.clone(), namespace.clone())).or_default().extend(owners);
                }
                result.map(|()| Next::Done)
            }
            Work::Finalize(key) => self.finalize(key).await,
        }
    }

    /// Look at the dependents of owners deleted in one scope.
    async fn gone_owners(&self, cluster: &str, namespace: Option<&str>, owners: &[GoneOwner]) -> ApiResult<()> {
        // Each owner as references name it: group, kind (when its type is known) and name.
        let named: Vec<(String, Option<String>, &str)> = owners
            .iter()
            .map(|(group, plural, name)| {
                let api_group = if &**group == "core" { String::new() } else { group.to_string() };
                (api_group, self.kind_of(cluster, group, plural), &**name)
            })
            .collect();
        let matches = |r: &OwnerRef| {
            named.iter().any(|(group, kind, name)| {
                r.name == *name && r.group_version().0 == group && kind.as_deref().is_none_or(|k| r.kind == k)
            })
        };
        // One owner: objects naming it hold its name; many: every owned object is read.
        let needle = match &named[..] {
            [(_, _, name)] => serde_json::to_string(name).expect("strings serialise"),
            _ => "\"ownerReferences\"".to_string(),
        };
        let mut resume = None;
        loop {
            let (found, next) = self.dependents(cluster, namespace, needle.as_bytes(), &matches, resume).await?;
            self.each(found, |f| async move { self.attempt(&f.key, false).await }).await?;
            resume = match next {
                Some(r) => Some(r),
                None => return Ok(()),
            };
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
    /// `matches`, from `resume` on: at most `MAX_FOUND` keys, and where to go on when more may follow.
    /// `needle` is what such an object's JSON must contain (the owner's name or uid), so that most
    /// objects are not parsed.
    async fn dependents(
        &self,
        cluster: &str,
        namespace: Option<&str>,
        needle: &[u8],
        matches: &(dyn Fn(&OwnerRef) -> bool + Sync),
        resume: Resume,
    ) -> ApiResult<(Vec<Found>, Resume)> {
        let owned: Vec<u32> = match self.clusters.get(cluster) {
            Some(h) => h.owned.clone(),
            None => return Ok((Vec::new(), None)),
        };
        let finder = memchr::memmem::Finder::new(needle);
        let mut found = Vec::new();
        let (from, mut start) = match resume {
            Some((i, key)) => (i, Some(key)),
            None => (0, None),
        };
        for (i, id) in owned.iter().enumerate().skip(from) {
            let start_here = if i == from { start.take() } else { None };
            // A namespaced owner's dependents are in its namespace, so never cluster-scoped.
            if namespace.is_some() && id % 2 == 0 {
                continue;
            }
            let collection = self.name_of(id / 2);
            let prefix = match namespace {
                Some(ns) => format!("{}/{collection}/{cluster}/{ns}/", self.registry.prefix),
                None => format!("{}/{collection}/{cluster}/", self.registry.prefix),
            };
            let mut page_start = start_here;
            loop {
                let req =
                    RangeRequest { prefix: prefix.clone(), start: page_start.take(), limit: PAGE, revision: None };
                let got = self.registry.store.range(req).await?;
                for kv in &got.kvs {
                    if finder.find(&kv.value).is_none() {
                        continue;
                    }
                    let Some(obj) = Object::parse(&kv.value) else { continue };
                    let Some(r) = obj.owners().iter().find(|r| matches(r)) else { continue };
                    found.push(Found {
                        key: kv.key.clone(),
                        blocks: r.block_owner_deletion == Some(true),
                        deleting_dependents: obj.deleting() && obj.has_finalizer(FOREGROUND),
                    });
                    if found.len() >= MAX_FOUND {
                        return Ok((found, Some((i, format!("{}\0", kv.key)))));
                    }
                }
                page_start = got.next_start();
                if page_start.is_none() {
                    break;
                }
            }
        }
        Ok((found, None))
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

    /// The kind of the objects of a collection (by its storage group and plural) in `cluster`.
    fn kind_of(&self, cluster: &str, group: &str, plural: &str) -> Option<String> {
        let key = Key { group, plural, cluster, namespace: None, name: "" };
        self.stored_def(&key, None).map(|d| d.kind.clone())
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

    /// The registry's view of the object at a key: its type (in the version it is stored in) and a
    /// context to act on it as the collector.
    fn ctx_for<'a>(&'a self, k: &Key<'a>, def: &'a ResourceDef) -> Ctx<'a> {
        Ctx {
            cluster: k.cluster,
            def,
            namespace: k.namespace,
            user: &self.identity,
            user_agent: Some(COMPONENT),
            admit: None,
        }
    }

    /// The object at `key` as the registry reads it now (kube's collector reads a dependent again
    /// before acting on it), with its type; `None` when it is gone.
    async fn read(&self, k: &Key<'_>) -> ApiResult<Option<(Arc<ResourceDef>, Value)>> {
        let Some(kv) = self
            .registry
            .store
            .get(&keys::object(&self.registry.prefix, k.group, k.plural, k.cluster, k.namespace, k.name))
            .await?
        else {
            return Ok(None);
        };
        let api_version = Object::parse(&kv.value).and_then(|o| o.api_version);
        let Some(def) = self.stored_def(k, api_version.as_deref()) else {
            return Err(ApiError::internal(format!("no type serves {}/{} in {}", k.group, k.plural, k.cluster)));
        };
        let obj = self.registry.decode(&def, k.cluster, &kv)?;
        Ok(Some((def, obj)))
    }

    /// kube's `attemptToDeleteItem` for the dependent at `key`, read afresh. `report` says whether
    /// invalid references get kube's event (a dependent written or listed, not one a cascade reaches).
    async fn attempt(&self, key: &str, report: bool) -> ApiResult<()> {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(()) };
        let Some((def, value)) = self.read(&k).await? else { return Ok(()) };
        let obj: Object = serde_json::from_value(value.clone()).unwrap_or_default();
        if obj.deleting() || obj.owners().is_empty() {
            // Being deleted: its own finalizers decide (a foreground one is finalized on its own).
            return Ok(());
        }
        let (mut solid, mut waiting, mut drop) = (0, false, Vec::new());
        for r in obj.owners() {
            match self.owner(&k, r).await? {
                Owner::Solid | Owner::Unresolvable => solid += 1,
                Owner::Invalid => {
                    // kube stops at such an item: it is never collected, whatever its other owners.
                    if report {
                        self.report_invalid(&k, &obj, r, "").await;
                    }
                    return Ok(());
                }
                Owner::Dangling => {
                    if let (Some(ns), true, Some(owner)) = (k.namespace, report, self.owner_def(k.cluster, r)) {
                        if owner.namespaced && self.lives_elsewhere(&k, &owner, r).await {
                            self.report_invalid(&k, &obj, r, ns).await;
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
                let refs: Vec<Value> =
                    refs_of(&value).into_iter().filter(|r| !drop.iter().any(|d| r["uid"] == **d)).collect();
                self.patch_meta(&k, &def, &value, json!({"ownerReferences": none_if_empty(refs)})).await?;
            }
            return Ok(());
        }
        let owns = self.might_own(k.cluster, obj.uid());
        let policy = match () {
            _ if waiting && owns => {
                // kube's cycle breaking: a dependent that is itself deleted in the foreground would
                // wait for this one while this one waits for it, so this one's references stop
                // blocking first.
                let uid = obj.uid().to_string();
                let matches = |r: &OwnerRef| r.uid == uid;
                let scope = k.namespace;
                let (found, _) = self.dependents(k.cluster, scope, uid.as_bytes(), &matches, None).await?;
                if found.iter().any(|f| f.deleting_dependents) {
                    let refs: Vec<Value> = refs_of(&value)
                        .into_iter()
                        .map(|mut r| {
                            if r["blockOwnerDeletion"] == Value::Bool(true) {
                                r["blockOwnerDeletion"] = Value::Bool(false);
                            }
                            r
                        })
                        .collect();
                    self.patch_meta(&k, &def, &value, json!({"ownerReferences": refs})).await?;
                }
                Propagation::Foreground
            }
            _ if obj.has_finalizer(ORPHAN) => Propagation::Orphan,
            _ if obj.has_finalizer(FOREGROUND) => Propagation::Foreground,
            _ => Propagation::Background,
        };
        self.delete(&k, &def, obj.uid(), policy).await
    }

    /// Delete a dependent through the registry, only while it is the object that was looked at.
    async fn delete(&self, k: &Key<'_>, def: &ResourceDef, uid: &str, policy: Propagation) -> ApiResult<()> {
        if self.moving(k.cluster) {
            return Err(ApiError::conflict(k.plural, k.group, k.name, "the cluster is moving between shards"));
        }
        let opts = DeleteOptions {
            dry_run: false,
            uid: Some(uid.to_string()),
            resource_version: None,
            propagation: Some(policy),
            grace_period: None,
        };
        match self.registry.delete(&self.ctx_for(k, def), k.name, &opts).await {
            Ok(_) => Ok(()),
            // Gone, or another object of that name since: nothing of this one to collect.
            Err(e) if e.code == 404 || (e.code == 409 && e.message.contains("Precondition failed: UID")) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Change `metadata` fields of the object `current` (as read, of type `def`) by a merge patch
    /// through the registry, as kube's collector patches: at the revision read (a 409 if it changed
    /// since, and the item is tried again), with every hook a client's write has (an object whose
    /// last finalizer goes is deleted as its finalizers' holders would have it).
    async fn patch_meta(&self, k: &Key<'_>, def: &ResourceDef, current: &Value, mut meta: Value) -> ApiResult<()> {
        if self.moving(k.cluster) {
            return Err(ApiError::conflict(k.plural, k.group, k.name, "the cluster is moving between shards"));
        }
        meta["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        meta["uid"] = current["metadata"]["uid"].clone();
        let body = serde_json::to_vec(&json!({"metadata": meta})).expect("JSON serialises");
        let opts = crate::registry::WriteOptions::from_query(&crate::request::Query::default()).expect("no options");
        let ctx = self.ctx_for(k, def);
        match self.registry.patch(&ctx, k.name, crate::patch::PatchType::Merge, &body, &opts, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// An owner marked with `orphan` or `foregroundDeletion`: orphan its dependents, or delete them
    /// and wait for the blocking ones; then take its finalizer off.
    async fn finalize(&self, key: &str) -> ApiResult<Next> {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(Next::Done) };
        if self.moving(k.cluster) {
            return Ok(Next::Later(RETRY_MAX));
        }
        let current = self.read(&k).await?;
        let marked = |o: &Object| o.deleting() && (o.has_finalizer(ORPHAN) || o.has_finalizer(FOREGROUND));
        let Some((def, value, obj)) = current.and_then(|(def, value)| {
            let obj: Object = serde_json::from_value(value.clone()).ok()?;
            marked(&obj).then_some((def, value, obj))
        }) else {
            self.unwait(k.cluster, key);
            return Ok(Next::Done);
        };
        let uid = obj.uid().to_string();
        let matches = |r: &OwnerRef| r.uid == uid;
        let orphaning = obj.has_finalizer(ORPHAN);
        let finalizer = if orphaning { ORPHAN } else { FOREGROUND };
        if !self.might_own(k.cluster, &uid) {
            // No object has named it: nothing to orphan or wait for.
            self.unwait(k.cluster, key);
            self.take_off(&k, &def, &value, &obj, finalizer).await?;
            return Ok(Next::Done);
        }
        if !orphaning {
            // Waiting from now, so that the deletes below bring it back at once.
            self.wait(k.cluster, key);
        }
        let (mut resume, mut blocking) = (None, 0);
        loop {
            let (found, next) = self.dependents(k.cluster, k.namespace, uid.as_bytes(), &matches, resume).await?;
            if orphaning {
                let uid = &uid;
                self.each(found, |f| async move { self.orphan(&f.key, uid).await }).await?;
            } else {
                blocking += found.iter().filter(|f| f.blocks).count();
                self.each(found, |f| async move { self.attempt(&f.key, false).await }).await?;
            }
            resume = match next {
                Some(r) => Some(r),
                None => break,
            };
        }
        if blocking > 0 {
            return Ok(Next::Waiting);
        }
        // Orphaned, or only dependents that do not block were left (they are on their way): the
        // owner goes.
        self.unwait(k.cluster, key);
        self.take_off(&k, &def, &value, &obj, finalizer).await?;
        Ok(Next::Done)
    }

    /// Take `finalizer` off the owner `current` (read as `obj`); with its last one, it goes.
    async fn take_off(
        &self,
        k: &Key<'_>,
        def: &ResourceDef,
        current: &Value,
        obj: &Object,
        finalizer: &str,
    ) -> ApiResult<()> {
        let rest: Vec<Value> =
            obj.metadata.finalizers.iter().flatten().filter(|f| *f != finalizer).map(|f| json!(f)).collect();
        self.patch_meta(k, def, current, json!({"finalizers": none_if_empty(rest)})).await
    }

    /// Remove the references to the owner with `uid` from the dependent at `key`, read afresh.
    async fn orphan(&self, key: &str, uid: &str) -> ApiResult<()> {
        let Some(k) = Key::parse(&self.registry.prefix, key) else { return Ok(()) };
        let Some((def, value)) = self.read(&k).await? else { return Ok(()) };
        let refs = refs_of(&value);
        let kept: Vec<Value> = refs.iter().filter(|r| r["uid"] != uid).cloned().collect();
        if kept.len() == refs.len() {
            return Ok(());
        }
        self.patch_meta(&k, &def, &value, json!({"ownerReferences": none_if_empty(kept)})).await
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

    /// Whether the owner a namespaced dependent names is in another namespace of its cluster (kube's
    /// collector reports that; the reference is dangling all the same). Asked only of dependents
    /// written or listed with such a reference, never of those a cascade reaches.
    async fn lives_elsewhere(&self, k: &Key<'_>, def: &ResourceDef, r: &OwnerRef) -> bool {
        let prefix = keys::collection(&self.registry.prefix, def.storage_group(), &def.plural, Some(k.cluster), None);
        let needle = format!("\"{}\"", r.uid);
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let suffix = format!("/{}", r.name);
        let mut start = None;
        loop {
            let req = RangeRequest { prefix: prefix.clone(), start: start.take(), limit: PAGE, revision: None };
            let Ok(got) = self.registry.store.range(req).await else { return false };
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
        let event_key = Key { namespace: Some(event_ns), ..k.clone() };
        let ctx = self.ctx_for(&event_key, &events);
        let opts = crate::registry::WriteOptions::from_query(&crate::request::Query::default()).expect("no options");
        if let Err(e) = self.registry.create(&ctx, event, &opts).await {
            tracing::debug!(error = %e.message, "garbage collector: writing an event");
        }
    }
}

/// An object's owner references as the registry read them.
fn refs_of(obj: &Value) -> Vec<Value> {
    obj["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default()
}

/// A list for a merge patch: `null` removes the field when nothing is left, as kube leaves none.
fn none_if_empty(list: Vec<Value>) -> Value {
    if list.is_empty() {
        Value::Null
    } else {
        Value::Array(list)
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
