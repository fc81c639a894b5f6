//! The LogicalCluster lifecycle controller (kcp's logicalcluster deletion and initialization
//! controllers in one): it purges the cluster of every LogicalCluster being deleted and then releases
//! its finalizer, finishes bootstraps that a restart interrupted, and brings the default RBAC of
//! clusters an older kgate made up to this one's policy.
//!
//! It works from a list-then-watch of LogicalClusters, so deletions accepted before a restart are
//! resumed by the first list, and every replica resumes them alike (concurrent purges of one cluster
//! are safe, see [`purge`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{defaults_revision, initialize, is_current, refresh, PHASE_READY, PURGE_FINALIZER};
use crate::cluster::ROOT;
use crate::registry::{Registry, Sweep};
use crate::resources;
use crate::shard::Placed;
use crate::status::{ApiError, ApiResult};
use crate::storage::{KeyValue, RangeRequest, Revision, StoreError, WatchEvent};

/// Clusters whose default RBAC is reconciled at once after an upgrade (about 25 store reads each, and a
/// write where a role lacks something): few enough that serving requests keeps most of the store.
const RECONCILE_CONCURRENCY: usize = 4;

/// Longest wait between attempts of a purge that keeps failing (store unreachable, say).
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Purges that run at once: deleting ten thousand clusters must not send ten thousand purges to the
/// store together, starving the requests every other cluster makes (the rest wait their turn).
const PURGE_CONCURRENCY: usize = 32;

/// Moves that run at once: each reads and writes a page of up to `moving::BATCH` objects at a time
/// on two shards; a platform draining a shard asks for many.
const MOVE_CONCURRENCY: usize = 2;

/// The controller; [`Lifecycle::run`] until the server stops.
pub struct Lifecycle {
    registry: Registry,
    /// Turns of `PURGE_CONCURRENCY`.
    purges: Arc<tokio::sync::Semaphore>,
    /// The clusters whose purge is running here, each with the purge asked for while it ran, which
    /// runs when it ends: a workqueue's dirty set, so that a purge asked for is never dropped (a new
    /// cluster of the same name, deleted while the old one's purge ran, would stay Terminating) and
    /// one cluster's purges never overlap. A std `Mutex`: held for a lookup and an insert, never
    /// across an await; the watch loop and the purge tasks both take it, rarely at once.
    purging: Arc<Mutex<HashMap<String, Option<PurgeRequest>>>>,
    /// Turns of `MOVE_CONCURRENCY`.
    move_turns: Arc<tokio::sync::Semaphore>,
    /// The clusters whose move task runs here. A `DashSet`: the watch loop inserts, the task removes
    /// itself when it ends, and a purge polls it, never holding it across an await.
    moving: Arc<dashmap::DashSet<String>>,
}

/// A purge asked for: on which shards, and how the cluster is leaving.
#[derive(Debug, Clone)]
struct PurgeRequest {
    shards: BTreeSet<usize>,
    how: Leaving,
}

impl PurgeRequest {
    /// One purge that does what both `self` and `later` would: every shard of either, and the
    /// release as well when either is for a LogicalCluster marked deleted.
    fn and(mut self, later: PurgeRequest) -> PurgeRequest {
        self.shards.extend(later.shards);
        if matches!(later.how, Leaving::Marked) {
            self.how = Leaving::Marked;
        }
        self
    }
}

/// Takes a cluster's entry out of `Lifecycle::purging` when its purge task ends however it ends (a
/// panic included), unless the task took it out itself.
struct PurgeEntry {
    purging: Arc<Mutex<HashMap<String, Option<PurgeRequest>>>>,
    name: String,
    armed: bool,
}

impl PurgeEntry {
    /// The purge asked for while this one ran, if any; else the entry goes, in the same step.
    fn next(&mut self) -> Option<PurgeRequest> {
        let mut purging = self.purging.lock().unwrap_or_else(|e| e.into_inner());
        let next = purging.get_mut(&self.name).and_then(Option::take);
        if next.is_none() {
            purging.remove(&self.name);
            self.armed = false;
        }
        next
    }
}

impl Drop for PurgeEntry {
    fn drop(&mut self) {
        if self.armed {
            self.purging.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.name);
        }
    }
}

/// What a background job does, for one cluster at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Job {
    Purge,
    Initialize,
    /// Every stale cluster's default RBAC (keyed by the empty cluster name: one such job at a time).
    Reconcile,
    /// Moving a cluster to the shard its `spec.shard` names (`moving`).
    Move,
}

/// Running jobs: at most one of each kind per cluster in this process (purges are counted by
/// `Lifecycle::purging`, which queues rather than drops).
#[derive(Default)]
struct Jobs {
    tasks: JoinSet<(Job, String)>,
    running: HashSet<(Job, String)>,
}

impl Jobs {
    /// Forget the jobs that have ended.
    fn reap(&mut self) {
        while let Some(done) = self.tasks.try_join_next() {
            if let Ok(key) = done {
                self.running.remove(&key);
            }
        }
    }

    /// Run `work` whether or not a job of its kind and cluster runs: for a caller that keeps its
    /// own account of what runs (`Lifecycle::purging`).
    fn spawn<F>(&mut self, job: Job, cluster: &str, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.reap();
        let key = (job, cluster.to_string());
        self.tasks.spawn(async move {
            // A panicking job must still hand its key back, or its cluster would stay "running" for good.
            if std::panic::AssertUnwindSafe(work).catch_unwind().await.is_err() {
                tracing::error!(cluster = %key.1, job = ?key.0, "logical cluster job panicked");
            }
            key
        });
    }

    fn start<F>(&mut self, job: Job, cluster: &str, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.reap();
        if self.running.insert((job, cluster.to_string())) {
            self.spawn(job, cluster, work);
        }
    }
}

impl Lifecycle {
    /// A controller over the registry's store.
    pub fn new(registry: Registry) -> Self {
        Lifecycle {
            registry,
            purges: Arc::new(tokio::sync::Semaphore::new(PURGE_CONCURRENCY)),
            purging: Default::default(),
            move_turns: Arc::new(tokio::sync::Semaphore::new(MOVE_CONCURRENCY)),
            moving: Default::default(),
        }
    }

    /// List then watch LogicalClusters until `shutdown` turns true; then stop every job at its next
    /// store call (each store write is atomic, and the next start resumes the job).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut jobs = Jobs::default();
        loop {
            tokio::select! {
                res = self.list_and_watch(&mut jobs) => {
                    if let Err(e) = res {
                        tracing::warn!(error = %e, "logical cluster lifecycle watch ended; relisting");
                    }
                }
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        jobs.tasks.shutdown().await;
    }

    async fn list_and_watch(&self, jobs: &mut Jobs) -> Result<(), StoreError> {
        let def = resources::logical_cluster_def();
        let prefix = self.registry.collection(&def, Some(ROOT), None);
        let mut stale = Vec::new();
        let revision = crate::storage::range_pages(&*self.registry.store, &prefix, super::PAGE, |kvs| {
            for kv in kvs {
                let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else { continue };
                let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
                if obj["metadata"].get("deletionTimestamp").is_some() {
                    self.start_purge(jobs, &name, Some(&obj), Leaving::Marked);
                    continue;
                }
                if crate::shard::moving_to(&obj).is_some() {
                    self.start_move(jobs, &name);
                }
                // A create answers only once its cluster is bootstrapped, so a LogicalCluster found not
                // Ready (or without the finalizer, made before kgate set one) had its bootstrap cut short.
                let has_finalizer = crate::meta::finalizers(&obj).iter().any(|f| f == PURGE_FINALIZER);
                if obj["status"]["phase"] == PHASE_READY && has_finalizer {
                    // Made by a kgate with an older bootstrap policy or another CA: reconciled below, a few at a time.
                    if !is_current(&obj, &defaults_revision(&self.registry)) {
                        let uid = crate::meta::meta_str(&obj, "uid").unwrap_or_default().to_string();
                        // Only the shard's index: a stale cluster costs its name and four bytes.
                        match self.registry.shards.place_of(&obj) {
                            Placed::At(shard) => stale.push((name, uid, shard)),
                            Placed::Unknown => tracing::debug!(cluster = %name, "on a shard not served here"),
                        }
                    }
                } else {
                    let cluster = name.clone();
                    let registry = match super::registry_of(&self.registry, &obj) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::warn!(error = %e, cluster = %name, "finishing the bootstrap of a logical cluster");
                            continue;
                        }
                    };
                    jobs.start(Job::Initialize, &cluster, async move {
                        if let Err(e) = initialize(&registry, obj).await {
                            tracing::warn!(error = %e, cluster = %name, "finishing the bootstrap of a logical cluster");
                        }
                    });
                }
            }
            Ok::<_, StoreError>(())
        })
        .await?;
        if !stale.is_empty() {
            let registry = self.registry.clone();
            // One job for them all, holding names only: after an upgrade every cluster may be stale,
            // and a task (and a burst of store writes) per cluster would not be bounded.
            jobs.start(Job::Reconcile, "", async move {
                let count = stale.len();
                futures::stream::iter(stale)
                    .for_each_concurrent(RECONCILE_CONCURRENCY, |(name, uid, shard)| {
                        let registry = registry.shards.registry(shard, &registry);
                        async move {
                            if let Err(e) = refresh(&registry, &name, &uid).await {
                                tracing::warn!(error = %e, cluster = %name, "reconciling a logical cluster's default RBAC; the next start or relist retries");
                            }
                        }
                    })
                    .await;
                tracing::info!(clusters = count, "default RBAC of logical clusters reconciled with this kgate's policy");
            });
        }
        // What a LogicalCluster is now is all a put needs; a delete's last value (which shard to
        // purge) is read alone, at the revision before it: a watch asking for previous values would
        // have etcd 3.4 read one for each create and update as well, two per cluster made.
        let mut events = self.registry.store.watch_current(&prefix, revision).await?;
        while let Some(ev) = events.next().await {
            match ev? {
                WatchEvent::Put { kv, .. } => {
                    let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else { continue };
                    let name = crate::meta::meta_str(&obj, "name").unwrap_or_default();
                    if obj["metadata"].get("deletionTimestamp").is_some() {
                        self.start_purge(jobs, name, Some(&obj), Leaving::Marked);
                    } else if crate::shard::moving_to(&obj).is_some() {
                        self.start_move(jobs, name);
                    }
                }
                // Normally the end of a purge, which makes one more pass itself once it has released
                // the LogicalCluster (and a purge running when a finalizer is removed by hand finds
                // it gone, and makes that pass too). A LogicalCluster whose finalizer someone removed
                // by hand goes at once, though, and its keys still need purging. So where no purge is
                // running, one more pass, which costs a read per resource. (A purge that
                // another finalizer's holder outran, releasing during its last pass, leaves that
                // holder's release without one.)
                WatchEvent::Delete { key, prev, revision } => {
                    if let Some(name) = key.rsplit('/').next() {
                        if self.purging.lock().unwrap_or_else(|e| e.into_inner()).contains_key(name) {
                            continue;
                        }
                        let prev = match prev {
                            Some(kv) => Some(kv),
                            None => self.last_value(&key, revision).await,
                        };
                        let obj = prev.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok());
                        self.start_purge(jobs, name, obj.as_ref(), Leaving::Gone);
                    }
                }
                WatchEvent::Progress(_) => {}
            }
        }
        Ok(())
    }

    /// `key`'s value just before its delete at `revision`: `None` if that is compacted away or the
    /// store does not answer, and the purge then looks on every shard.
    async fn last_value(&self, key: &str, revision: Revision) -> Option<KeyValue> {
        let read = RangeRequest::key_at(key, revision - 1);
        let got = self.registry.store.ranges(vec![read]).await.ok()?;
        got.into_iter().next()?.kvs.into_iter().next().filter(|kv| kv.key == key)
    }

    /// Purge `cluster` on the shard its LogicalCluster `obj` names, or on every shard when the
    /// object is not known (a store that lost a deleted key's value): purging a shard without the
    /// cluster's keys costs a read per resource. Asked while the cluster's purge runs, it runs next.
    fn start_purge(&self, jobs: &mut Jobs, cluster: &str, obj: Option<&Value>, how: Leaving) {
        if cluster.is_empty() || cluster == ROOT {
            return;
        }
        let shards: BTreeSet<usize> = match obj.map(|o| self.registry.shards.place_of(o)) {
            // A cluster deleted while it moved has keys on the shard it was moving to as well.
            Some(Placed::At(i)) => {
                let to = obj.and_then(crate::shard::moving_to).and_then(|t| self.registry.shards.index(t));
                [i].into_iter().chain(to).collect()
            }
            Some(Placed::Unknown) => {
                tracing::warn!(cluster = %cluster, "a deleted logical cluster is on a shard not served here; a replica that serves it purges it");
                return;
            }
            None => (0..self.registry.shards.names().len()).collect(),
        };
        let asked = PurgeRequest { shards, how };
        {
            let mut purging = self.purging.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(next) = purging.get_mut(cluster) {
                *next = Some(match next.take() {
                    Some(earlier) => earlier.and(asked),
                    None => asked,
                });
                return;
            }
            purging.insert(cluster.to_string(), None);
        }
        let mut entry = PurgeEntry { purging: self.purging.clone(), name: cluster.to_string(), armed: true };
        let (registry, turns, moving) = (self.registry.clone(), self.purges.clone(), self.moving.clone());
        jobs.spawn(Job::Purge, cluster, async move {
            // A move of the cluster stops at its next step once it sees it deleted; until then it may
            // write on the shard it was moving to, which the purge must find empty after.
            while moving.contains(&entry.name) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut request = asked;
            loop {
                run_purge(&registry, &entry.name, &request, &turns).await;
                match entry.next() {
                    Some(next) => request = next,
                    None => return,
                }
            }
        });
    }
}

impl Lifecycle {
    /// Move `cluster` to the shard its LogicalCluster asks for, retrying until it is there (a shard
    /// down, say) or is no longer being moved; one move per cluster at a time.
    fn start_move(&self, jobs: &mut Jobs, cluster: &str) {
        let (registry, name, turns) = (self.registry.clone(), cluster.to_string(), self.move_turns.clone());
        let running = self.moving.clone();
        jobs.start(Job::Move, cluster, async move {
            // Recorded by the task itself, so that a record never outlives it (a purge waits on it).
            running.insert(name.clone());
            // Out of `moving` however the task ends: a purge waits for it.
            struct Ended(Arc<dashmap::DashSet<String>>, String);
            impl Drop for Ended {
                fn drop(&mut self) {
                    self.0.remove(&self.1);
                }
            }
            let _ended = Ended(running, name.clone());
            let mut backoff = Duration::from_secs(1);
            loop {
                let Ok(turn) = turns.acquire().await else { return };
                let done = super::moving::relocate(&registry, &name).await;
                drop(turn);
                // Until it is there, or no longer asked for (deleted, say): relocate then does nothing.
                match done {
                    Ok(()) => return,
                    Err(_) if !super::moving::is_moving(&registry, &name).await => return,
                    Err(e) => {
                        tracing::warn!(error = %e, cluster = %name, "moving a logical cluster to another shard; will retry")
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
    }
}

/// One purge, tried until it succeeds (a shard that is down, say), a turn of `turns` per attempt.
async fn run_purge(registry: &Registry, name: &str, request: &PurgeRequest, turns: &tokio::sync::Semaphore) {
    let mut backoff = Duration::from_secs(1);
    loop {
        // A turn per attempt: purges failing on a shard that is down wait without one.
        let Ok(turn) = turns.acquire().await else { return };
        let shards: Vec<Registry> = request.shards.iter().map(|&i| registry.shards.registry(i, registry)).collect();
        // Over several shards (a cluster deleted while it moved), a shard may hold custom resources
        // whose CRD is on the other, or staged: each shard's sweep looks under all their prefixes.
        let mut done = match shards.len() {
            0 | 1 => Ok(Vec::new()),
            _ => super::moving::custom_prefixes(&shards.iter().collect::<Vec<_>>(), name).await,
        };
        let last = shards.len().saturating_sub(1);
        for (i, registry) in shards.iter().enumerate() {
            done = match (done, request.how) {
                // Every shard but the last is swept first: the purge of the last releases the
                // LogicalCluster, which must not go while another shard holds its objects (its name
                // made again would find them).
                (Ok(extra), Leaving::Marked) if i < last => sweep(registry, name, &extra).await.map(|()| extra),
                (Ok(extra), Leaving::Marked) => purge_with(registry, name, &extra).await.map(|()| extra),
                (Ok(extra), Leaving::Gone) => sweep(registry, name, &extra).await.map(|()| extra),
                (Err(e), _) => Err(e),
            };
        }
        drop(turn);
        match done {
            Ok(_) => return,
            Err(e) => tracing::warn!(error = %e, cluster = %name, "purging a deleted logical cluster; will retry"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Finish the bootstraps a crash cut short, at this replica's start: a create answers only once its
/// cluster is bootstrapped, so a LogicalCluster not Ready (or without the finalizer) had its
/// bootstrap cut short on whichever replica served it. The leader's `Lifecycle` finishes them when it
/// starts leading; a replica that crashed while the leader went on would otherwise leave them
/// Initializing until the leader changes. Idempotent, like the bootstrap itself.
pub async fn resume_bootstraps(registry: Registry) {
    let def = resources::logical_cluster_def();
    let prefix = registry.collection(&def, Some(ROOT), None);
    let mut cut_short = Vec::new();
    let listed = crate::storage::range_pages(&*registry.store, &prefix, super::PAGE, |kvs| {
        for kv in kvs {
            let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else { continue };
            let has_finalizer = crate::meta::finalizers(&obj).iter().any(|f| f == PURGE_FINALIZER);
            let deleting = obj["metadata"].get("deletionTimestamp").is_some();
            if !deleting && (obj["status"]["phase"] != PHASE_READY || !has_finalizer) {
                cut_short.push(obj);
            }
        }
        Ok::<_, StoreError>(())
    })
    .await;
    if let Err(e) = listed {
        tracing::warn!(error = %e, "listing logical clusters to finish their bootstraps; the leader finishes them");
        return;
    }
    for obj in cut_short {
        let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
        let done = match super::registry_of(&registry, &obj) {
            Ok(shard) => initialize(&shard, obj).await,
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, cluster = %name, "finishing the bootstrap of a logical cluster");
        }
    }
}

/// How a cluster whose keys are purged is leaving, which decides the purge.
#[derive(Debug, Clone, Copy)]
enum Leaving {
    /// Its LogicalCluster is marked deleted and waits on the purge finalizer: `purge`.
    Marked,
    /// Its LogicalCluster is gone: `sweep`.
    Gone,
}

/// Delete every key of a logical cluster that is not live (its LogicalCluster is being deleted or gone),
/// then remove the purge finalizer, so the LogicalCluster goes last; then sweep once more, for a
/// default object a bootstrap or an RBAC reconcile wrote on a shard other than the LogicalCluster's,
/// whose check that the cluster is live cannot join that shard's write. (API creates cannot land after
/// the pass that found the cluster empty: namespaced ones need their namespace, cluster-wide ones its
/// `kube-system`, both deleted by then; see `Registry::namespace_guard`.) Never touches root, nor keys
/// of another cluster: every prefix ends with `<cluster>/`.
///
/// Safe to run more than once at a time (a repeated DELETE, another replica): before each page of
/// deletes it checks the cluster is still not live, and deletes only what it read (see
/// [`Registry::delete_prefixes`]), so a cluster of the same name created meanwhile keeps its keys.
pub async fn purge(registry: &Registry, cluster: &str) -> ApiResult<()> {
    purge_with(registry, cluster, &[]).await
}

/// `purge`, also under `extra` prefixes.
async fn purge_with(registry: &Registry, cluster: &str, extra: &[String]) -> ApiResult<()> {
    if cluster == ROOT {
        return Ok(());
    }
    let last = Mutex::new(None);
    if swept(registry, cluster, extra, &last).await? {
        let known = last.into_inner().unwrap_or_else(|e| e.into_inner());
        release(registry, cluster, known).await?;
        swept(registry, cluster, extra, &Mutex::new(None)).await?;
    }
    Ok(())
}

/// One pass of `purge` without the release (for a cluster whose LogicalCluster is gone, or on a
/// shard other than the last of several), also under `extra` prefixes.
async fn sweep(registry: &Registry, cluster: &str, extra: &[String]) -> ApiResult<()> {
    if cluster != ROOT {
        swept(registry, cluster, extra, &Mutex::new(None)).await?;
    }
    Ok(())
}

/// Delete every key of `cluster` while it is not live: whether it found it empty (false when it
/// stopped, the cluster live again). `last` gets the LogicalCluster as the last check before a
/// delete read it, which the release starts from: on the default shard's etcd, the limit when
/// thousands of clusters go at once, that is a read fewer per cluster. (A std `Mutex`, held for a
/// store of the value, never across an await.)
async fn swept(
    registry: &Registry,
    cluster: &str,
    extra: &[String],
    last: &Mutex<Option<KeyValue>>,
) -> ApiResult<bool> {
    let mut prefixes = builtin_prefixes(registry, cluster);
    // What a move to this shard had staged when the cluster was deleted.
    prefixes.push(super::moving::staging(registry, cluster));
    prefixes.extend(extra.iter().filter(|p| p.ends_with(&format!("/{cluster}/"))).cloned());
    let sweep = registry
        .delete_cluster_prefixes(cluster, &prefixes, move || async move {
            let (live, read) = super::leaving(registry, cluster).await?;
            *last.lock().unwrap_or_else(|e| e.into_inner()) = read;
            Ok(!live)
        })
        .await?;
    match sweep {
        Sweep::Empty => Ok(true),
        Sweep::Stopped => Ok(false),
        Sweep::KeysLeft | Sweep::Held(_) => Err(ApiError::internal(format!(
            "logical cluster {cluster:?}: objects were still being written after every purge pass"
        ))),
    }
}

/// Where `cluster`'s objects of every built-in resource are kept on `registry`'s shard.
pub(super) fn builtin_prefixes(registry: &Registry, cluster: &str) -> Vec<String> {
    resources::builtins()
        .iter()
        // A version stored as another shares that one's keys.
        .filter(|d| !d.is_virtual() && !crate::registry::converts(d))
        .map(|d| registry.collection(d, Some(cluster), None))
        .chain(crate::registry::legacy_prefixes(registry, cluster, None))
        .collect()
}

/// Remove the purge finalizer from a LogicalCluster being deleted; the object goes with its last one.
async fn release(registry: &Registry, cluster: &str, known: Option<KeyValue>) -> ApiResult<()> {
    let def = resources::logical_cluster_def();
    if registry.remove_finalizer_from(&def, ROOT, cluster, PURGE_FINALIZER, known).await? {
        tracing::info!(cluster = %cluster, "logical cluster purged");
    }
    Ok(())
}
