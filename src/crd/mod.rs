//! Custom resources: every logical cluster's CustomResourceDefinitions, followed by one store watch, and
//! what they make each cluster serve (routing, discovery, OpenAPI, schemas), what a wildcard request over a
//! custom resource spans, and the cleanup of a deleted CRD's objects.
//!
//! Memory: the index keeps what CRDs serve (names, scope, versions, printer columns), a few hundred bytes
//! per CRD, and nothing for clusters without CRDs. Schemas, which can be large, and the discovery and
//! OpenAPI documents built from them live in caches of about `CAPACITY` entries and at most
//! `CAPACITY_BYTES` each (a tenant's CRDs decide their size, up to etcd's 1.5 MiB each, so a count
//! alone would let a thousand clusters' large schemas hold gigabytes), which evict by S3-FIFO (as the
//! RBAC cache does), and are read again from the store when needed.

pub mod define;
pub mod schema;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::discovery::Discovery;
use crate::registry::{Claims, ClusterFilter, Finalizers, Registry, Sweep};
use crate::resources::{self, ResourceDef};
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, RangeRequest, Revision, StoreError, WatchEvent};
pub use define::{Crd, CLEANUP_FINALIZER};

/// About the most entries each bounded cache holds.
const CAPACITY: usize = 1_000;
/// The most bytes each bounded cache holds.
const CAPACITY_BYTES: u64 = 256 << 20;
/// The most bytes of OpenAPI documents one cluster's entry keeps; past it, a document is built again
/// each time it is asked for (at the cost of that cluster's requests). Within what one shard of the
/// documents' cache takes (an entry heavier than that is never cached).
const CLUSTER_DOCS_BYTES: usize = 48 << 20;
/// Shards of the documents' cache: few, so that each takes a large cluster's entry whole.
const DOCS_SHARDS: usize = 4;
/// What a parsed JSON tree takes for each byte of its text, about.
const TREE_FACTOR: usize = 4;
/// CRDs read per page while loading.
const PAGE: usize = 500;
/// How long a CRD write waits for the index to see it before answering anyway.
const SEE_PATIENCE: Duration = Duration::from_secs(5);
/// CRD cleanups sweeping at once; the others wait for a turn.
const CLEANUPS_AT_ONCE: usize = 4;
/// The longest pause before a cleanup that found objects left (held by their finalizers, or still
/// being written) or a failing store tries again.
const CLEANUP_MAX_PAUSE: Duration = Duration::from_secs(30);

/// A rendered OpenAPI v3 document and its hash.
pub type OpenApiDoc = (Arc<Vec<u8>>, String);

/// The group, resource and storage group of CustomResourceDefinitions.
fn crd_def() -> Arc<ResourceDef> {
    resources::find("apiextensions.k8s.io", "v1", "customresourcedefinitions").expect("CRDs are built in")
}

#[derive(Default)]
struct State {
    /// Clusters with at least one CRD, and their CRDs by name.
    clusters: HashMap<Box<str>, BTreeMap<Box<str>, Arc<Crd>>>,
    /// CRD name (`<plural>.<group>`) to the clusters that define it, for wildcard requests.
    by_name: HashMap<Box<str>, BTreeSet<Box<str>>>,
}

impl State {
    fn insert(&mut self, cluster: &str, crd: Crd) {
        self.by_name.entry(crd.name.as_str().into()).or_default().insert(cluster.into());
        self.clusters.entry(cluster.into()).or_default().insert(crd.name.as_str().into(), Arc::new(crd));
    }

    fn remove(&mut self, cluster: &str, name: &str) {
        if let Some(crds) = self.clusters.get_mut(cluster) {
            crds.remove(name);
            if crds.is_empty() {
                self.clusters.remove(cluster);
            }
        }
        if let Some(cs) = self.by_name.get_mut(name) {
            cs.remove(cluster);
            if cs.is_empty() {
                self.by_name.remove(name);
            }
        }
    }
}

/// Discovery and OpenAPI of one cluster that has CRDs.
pub struct ClusterDocs {
    /// The cluster's CRDs these were built from: their newest revision and their number (a change
    /// either adds a newer revision or removes one).
    stamp: (Revision, usize),
    /// Built-ins plus the cluster's custom resources.
    pub discovery: Discovery,
    /// OpenAPI v3 documents by group-version path, built on first request. A std mutex: held only to
    /// look up or insert, never while a document is built.
    openapi: Mutex<HashMap<String, OpenApiDoc>>,
    /// The bytes this entry holds, about: its discovery, and the documents kept so far.
    bytes: std::sync::atomic::AtomicUsize,
}

impl ClusterDocs {
    /// A document built before, if any.
    pub fn openapi(&self, gv: &str) -> Option<OpenApiDoc> {
        self.openapi.lock().expect("openapi lock").get(gv).cloned()
    }

    /// Keep a built document, unless the entry holds [`CLUSTER_DOCS_BYTES`] of them already; whether
    /// it was kept (then the entry weighs more: see [`CrdIndex::docs_grew`]).
    pub fn keep_openapi(&self, gv: &str, doc: OpenApiDoc) -> bool {
        use std::sync::atomic::Ordering;
        let mut kept = self.openapi.lock().expect("openapi lock");
        let held: usize = kept.iter().filter(|(k, _)| *k != gv).map(|(_, (d, h))| d.len() + h.len()).sum();
        if held + doc.0.len() > CLUSTER_DOCS_BYTES {
            return false;
        }
        self.bytes.fetch_add(doc.0.len() + doc.1.len() + gv.len(), Ordering::Relaxed);
        // Two requests may build one document at once: the second replaces the first, not adds to it.
        if let Some((d, h)) = kept.insert(gv.to_string(), doc) {
            self.bytes.fetch_sub(d.len() + h.len() + gv.len(), Ordering::Relaxed);
        }
        true
    }
}

/// Weighs cache entries by the bytes they hold (never 0).
#[derive(Clone)]
struct Bytes;

/// A cluster's documents with what they weighed when they went into the cache: a weight must not
/// change while its entry is in (the cache subtracts it again on the way out), and the documents
/// grow, so a grown entry goes in again (see [`CrdIndex::docs_grew`]).
type Weighed = (Arc<ClusterDocs>, usize);

impl quick_cache::Weighter<Box<str>, Weighed> for Bytes {
    fn weight(&self, cluster: &Box<str>, (_, bytes): &Weighed) -> u64 {
        (64 + cluster.len() + bytes) as u64
    }
}

impl quick_cache::Weighter<(Box<str>, Box<str>), Arc<Schemas>> for Bytes {
    fn weight(&self, (cluster, crd): &(Box<str>, Box<str>), schemas: &Arc<Schemas>) -> u64 {
        (64 + cluster.len() + crd.len() + schemas.bytes) as u64
    }
}

/// The schemas of one CRD, by version, as of one revision of it.
struct Schemas {
    revision: Revision,
    by_version: HashMap<String, Arc<Value>>,
    /// What the trees take, about.
    bytes: usize,
}

/// Every cluster's CRDs, kept current by a store watch.
pub struct CrdIndex {
    registry: Registry,
    /// A std `RwLock`: read by every request for a non-built-in resource and by discovery, written only by
    /// the watch; never held across an await, and each hold is a map lookup or insert.
    state: RwLock<State>,
    /// The store revision the index has applied everything up to; a CRD write waits for its revision.
    seen: watch::Sender<Revision>,
    /// Sharded caches whose shard locks are held only for a lookup or an insert, never while a
    /// document is built or a schema read.
    docs: quick_cache::sync::Cache<Box<str>, Weighed, Bytes>,
    schemas: quick_cache::sync::Cache<(Box<str>, Box<str>), Arc<Schemas>, Bytes>,
    /// CRDs whose objects need deleting, for the cleanup task.
    cleanup: mpsc::UnboundedSender<(String, String)>,
    cleanup_rx: Mutex<Option<mpsc::UnboundedReceiver<(String, String)>>>,
}

impl CrdIndex {
    /// An empty index; [`CrdIndex::load`] it, then [`CrdIndex::run`] it.
    pub fn new(registry: Registry) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(CrdIndex {
            registry,
            state: RwLock::new(State::default()),
            seen: watch::channel(0).0,
            docs: quick_cache::sync::Cache::with_options(
                quick_cache::OptionsBuilder::new()
                    .estimated_items_capacity(CAPACITY)
                    .weight_capacity(CAPACITY_BYTES)
                    .shards(DOCS_SHARDS)
                    .build()
                    .expect("the cache's options are valid"),
                Bytes,
                Default::default(),
                Default::default(),
            ),
            schemas: quick_cache::sync::Cache::with_weighter(CAPACITY, CAPACITY_BYTES, Bytes),
            cleanup: tx,
            cleanup_rx: Mutex::new(Some(rx)),
        })
    }

    fn prefix(&self) -> String {
        self.registry.collection(&crd_def(), None, None)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Read every CRD (in pages, at one revision); returns that revision.
    pub async fn load(&self) -> Result<Revision, StoreError> {
        let prefix = self.prefix();
        let mut fresh = State::default();
        let revision = crate::storage::range_pages(&*self.registry.store, &prefix, PAGE, |kvs| {
            for kv in kvs {
                if let Some((cluster, crd)) = self.parse(&kv.key, &kv.value, kv.mod_revision) {
                    self.note_cleanup(&cluster, &crd);
                    fresh.insert(&cluster, crd);
                }
            }
            Ok::<_, StoreError>(())
        })
        .await?;
        *self.write() = fresh;
        self.docs.clear();
        self.schemas.clear();
        self.seen.send_replace(revision);
        Ok(revision)
    }

    fn parse(&self, key: &str, value: &[u8], revision: Revision) -> Option<(String, Crd)> {
        let k = keys::parse(&self.prefix(), key, false)?;
        let obj: Value = serde_json::from_slice(value).ok()?;
        Some((k.cluster.to_string(), Crd::parse(&obj, revision)?))
    }

    fn note_cleanup(&self, cluster: &str, crd: &Crd) {
        if crd.terminating && crd.needs_cleanup {
            let _ = self.cleanup.send((cluster.to_string(), crd.name.clone()));
        }
    }

    /// Free what was cached from a CRD that changed. Only memory: a stale entry is never served, since
    /// documents carry their cluster's stamp and schemas the CRD's revision.
    fn forget(&self, cluster: &str, name: &str) {
        self.docs.remove(cluster);
        self.schemas.remove(&(Box::from(cluster), Box::from(name)));
    }

    fn apply(&self, ev: WatchEvent) {
        let prefix = self.prefix();
        let revision = ev.revision();
        match ev {
            WatchEvent::Put { kv, .. } => {
                if let Some((cluster, crd)) = self.parse(&kv.key, &kv.value, kv.mod_revision) {
                    self.note_cleanup(&cluster, &crd);
                    let name = crd.name.clone();
                    self.write().insert(&cluster, crd);
                    self.forget(&cluster, &name);
                }
            }
            WatchEvent::Delete { key, .. } => {
                if let Some(k) = keys::parse(&prefix, &key, false) {
                    self.write().remove(k.cluster, k.name);
                    self.forget(k.cluster, k.name);
                }
            }
            WatchEvent::Progress(_) => {}
        }
        self.seen.send_if_modified(|r| {
            let newer = revision > *r;
            if newer {
                *r = revision;
            }
            newer
        });
    }

    /// Follow the store from `from` until `stop`, reloading when the watch breaks.
    pub async fn run(self: Arc<Self>, mut from: Revision, mut stop: watch::Receiver<bool>) {
        loop {
            let res = tokio::select! {
                r = self.follow(from) => r,
                _ = stop.wait_for(|s| *s) => break,
            };
            if let Err(e) = res {
                tracing::warn!(error = %e, "CRD watch ended; reloading");
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            match self.load().await {
                Ok(r) => from = r,
                Err(e) => tracing::warn!(error = %e, "reloading CRDs"),
            }
        }
    }

    async fn follow(&self, from: Revision) -> Result<(), StoreError> {
        // What each CRD is now is all the index needs: no previous values.
        let mut events = self.registry.store.watch_current(&self.prefix(), from).await?;
        while let Some(ev) = events.next().await {
            self.apply(ev?);
        }
        Err(StoreError::Unavailable("watch closed".into()))
    }

    /// Wait until the index has seen revision `rev` (a CRD write through this server), so the request
    /// that follows it finds the new API; gives up after a few seconds.
    pub async fn wait_for(&self, rev: Revision) {
        let mut rx = self.seen.subscribe();
        let _ = tokio::time::timeout(SEE_PATIENCE, rx.wait_for(|r| *r >= rev)).await;
    }

    /// The custom resource a cluster serves at group/version/plural.
    pub fn find(&self, cluster: &str, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        let st = self.read();
        let crd = st.clusters.get(cluster)?.get(format!("{plural}.{group}").as_str())?;
        let v = crd.versions.iter().find(|v| v.served && v.name == version)?;
        Some(Arc::new(crd.def(v)))
    }

    /// The custom resource a cluster serves as `kind` in group/version: what an owner reference names.
    pub fn find_kind(&self, cluster: &str, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let st = self.read();
        let crd = st.clusters.get(cluster)?.values().find(|c| c.group == group && c.kind == kind)?;
        let v = crd.versions.iter().find(|v| v.served && v.name == version)?;
        Some(Arc::new(crd.def(v)))
    }

    /// The custom resource of group/plural a cluster defines, in a version it serves (the first one),
    /// or in its first version while the CRD is being deleted: what a store key names.
    pub fn find_any_version(&self, cluster: &str, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        let st = self.read();
        let crd = st.clusters.get(cluster)?.get(format!("{plural}.{group}").as_str())?;
        let v = crd.versions.iter().find(|v| v.served).or(crd.versions.first())?;
        Some(Arc::new(crd.def(v)))
    }

    /// Every custom resource a cluster serves (one per served version).
    pub fn defs(&self, cluster: &str) -> Vec<Arc<ResourceDef>> {
        let st = self.read();
        st.clusters
            .get(cluster)
            .into_iter()
            .flat_map(|crds| crds.values())
            .flat_map(|c| c.defs())
            .map(Arc::new)
            .collect()
    }

    /// A wildcard request over group/version/plural: the resource as the first cluster (by name) serving
    /// it defines it, and a filter admitting each cluster whose CRD serves that version with the same kind
    /// and scope. The filter reads the index as it is at each call, so clusters that add the CRD later
    /// join a running watch, and a deleted CRD's objects still produce their DELETED events (the CRD
    /// stays, terminating, until they are gone).
    pub fn wildcard(
        self: &Arc<Self>,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<(Arc<ResourceDef>, ClusterFilter)> {
        let name = format!("{plural}.{group}");
        let def = {
            let st = self.read();
            st.by_name.get(name.as_str())?.iter().find_map(|c| {
                let crd = st.clusters.get(c)?.get(name.as_str())?;
                let v = crd.versions.iter().find(|v| v.served && v.name == version)?;
                Some(Arc::new(crd.def(v)))
            })?
        };
        let filter = self.filter_like(&def);
        Some((def, filter))
    }

    /// The filter of a wildcard request over `like` (found by `wildcard`, perhaps in another shard's
    /// index): each cluster of this index whose CRD serves that version with the same kind and scope.
    pub fn filter_like(self: &Arc<Self>, like: &Arc<ResourceDef>) -> ClusterFilter {
        let name = format!("{}.{}", like.plural, like.group);
        let (index, version, like) = (self.clone(), like.version.clone(), like.clone());
        ClusterFilter(Arc::new(move |cluster: &str| {
            let st = index.read();
            st.clusters
                .get(cluster)
                .and_then(|crds| crds.get(name.as_str()))
                .is_some_and(|c| c.serves_like(&version, &like))
        }))
    }

    /// Discovery (and the OpenAPI cache) of a cluster with CRDs; `None` for a cluster without any, which
    /// shares the built-in documents.
    pub fn docs(&self, cluster: &str) -> Option<Arc<ClusterDocs>> {
        // The stamp and the definitions are read under one lock, so a document always matches its stamp.
        let (stamp, custom) = {
            let st = self.read();
            let crds = st.clusters.get(cluster)?;
            let stamp = (crds.values().map(|c| c.revision).max().unwrap_or(0), crds.len());
            if let Some((d, _)) = self.docs.get(cluster).filter(|(d, _)| d.stamp == stamp) {
                return Some(d);
            }
            let custom: Vec<Arc<ResourceDef>> = crds.values().flat_map(|c| c.defs()).map(Arc::new).collect();
            (stamp, custom)
        };
        let builtins: Vec<Arc<ResourceDef>> = resources::for_cluster(cluster).cloned().collect();
        // Discovery takes some hundreds of bytes a resource.
        let bytes = (builtins.len() + custom.len()) * 512;
        let docs = Arc::new(ClusterDocs {
            stamp,
            discovery: Discovery::build(builtins.iter().chain(custom.iter())),
            openapi: Mutex::new(HashMap::new()),
            bytes: bytes.into(),
        });
        self.docs.insert(cluster.into(), (docs.clone(), bytes));
        Some(docs)
    }

    /// `docs` kept another document: weigh its entry again (an entry's weight is taken as it goes in),
    /// if it is still the cluster's.
    pub fn docs_grew(&self, cluster: &str, docs: &Arc<ClusterDocs>) {
        if self.docs.get(cluster).is_some_and(|(d, _)| Arc::ptr_eq(&d, docs)) {
            let bytes = docs.bytes.load(std::sync::atomic::Ordering::Relaxed);
            self.docs.insert(cluster.into(), (docs.clone(), bytes));
        }
    }
}

impl CrdIndex {
    /// The `openAPIV3Schema` of a custom resource's version, read from the store when not cached.
    pub async fn schema(&self, cluster: &str, def: &ResourceDef) -> ApiResult<Option<Arc<Value>>> {
        let Some(custom) = &def.custom else { return Ok(None) };
        let cache_key: (Box<str>, Box<str>) = (cluster.into(), custom.crd_name.as_str().into());
        if let Some(s) = self.schemas.get(&cache_key).filter(|s| s.revision >= custom.crd_revision) {
            return Ok(s.by_version.get(&def.version).cloned());
        }
        let key = keys::object(
            &self.registry.prefix,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            cluster,
            None,
            &custom.crd_name,
        );
        let Some(kv) = self.registry.store.get(&key).await? else { return Ok(None) };
        let obj: Value = serde_json::from_slice(&kv.value).map_err(ApiError::internal)?;
        let by_version = obj["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| Some((v["name"].as_str()?.to_string(), Arc::new(v["schema"]["openAPIV3Schema"].clone()))))
            .collect();
        let s = Arc::new(Schemas { revision: kv.mod_revision, by_version, bytes: kv.value.len() * TREE_FACTOR });
        self.schemas.insert(cache_key, s.clone());
        Ok(s.by_version.get(&def.version).cloned())
    }

    /// Delete the objects of CRDs being deleted, then release their finalizer. Runs beside
    /// [`CrdIndex::run`], which finds the work.
    ///
    /// Each terminating CRD gets one task, and [`CLEANUPS_AT_ONCE`] of them sweep at a time. A sweep
    /// that leaves objects (held by their own finalizers, as kube waits for them, or still being
    /// written) or meets a failing store gives up its turn and pauses, longer each time, so no
    /// tenant's CRD holds up another tenant's cleanup.
    pub async fn clean_deleted(self: Arc<Self>) {
        let Some(mut rx) = self.cleanup_rx.lock().expect("cleanup lock").take() else { return };
        let turns = Arc::new(Semaphore::new(CLEANUPS_AT_ONCE));
        let running = Claims::default();
        while let Some((cluster, name)) = rx.recv().await {
            // Every write to a terminating CRD announces it again; its task is already on it.
            let Some(claim) = running.claim(format!("{cluster}/{name}")) else { continue };
            let (this, turns) = (self.clone(), turns.clone());
            tokio::spawn(async move {
                let _claim = claim;
                let mut pause = Duration::from_secs(1);
                loop {
                    let swept = {
                        let _turn = turns.acquire().await.expect("the semaphore is never closed");
                        this.clean_one(&cluster, &name).await
                    };
                    match swept {
                        Ok(true) => return,
                        Ok(false) => tracing::debug!(%cluster, crd = %name, "a deleted CRD's objects remain"),
                        Err(e) => tracing::warn!(error = %e, %cluster, crd = %name, "deleting a deleted CRD's objects"),
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(CLEANUP_MAX_PAUSE);
                }
            });
        }
    }

    /// One sweep of a terminating CRD's objects; `true` once none is left and the CRD is released
    /// (or is gone, or not terminating).
    async fn clean_one(&self, cluster: &str, name: &str) -> ApiResult<bool> {
        let def = crd_def();
        let key = keys::object(&self.registry.prefix, def.storage_group(), &def.plural, cluster, None, name);
        let terminating = |kv: Option<crate::storage::KeyValue>| {
            kv.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
                .is_some_and(|o| crate::meta::meta_str(&o, "deletionTimestamp").is_some())
        };
        let Some(kv) = self.registry.store.get(&key).await? else { return Ok(true) };
        if !terminating(Some(kv.clone())) {
            return Ok(true);
        }
        let obj: Value = serde_json::from_slice(&kv.value).map_err(ApiError::internal)?;
        let Some(crd) = Crd::parse(&obj, kv.mod_revision) else { return Ok(true) };
        let prefix = keys::collection(&self.registry.prefix, &crd.group, &crd.plural, Some(cluster), None);
        let store = self.registry.store.clone();
        let still = || {
            let (store, key) = (store.clone(), key.clone());
            async move { Ok(terminating(store.get(&key).await?)) }
        };
        // As kube's CRD finalizer does: an object with finalizers is marked deleted and waited for.
        match self.registry.delete_prefixes(&[prefix], Finalizers::Honor, still).await? {
            Sweep::Empty => {
                // The objects went without a delete each: quotas counting them count again.
                let counted = format!("count/{}.{}", crd.plural, crd.group);
                self.registry.recount_quotas_counting(cluster, &counted).await?;
                self.registry.remove_finalizer(&def, cluster, name, CLEANUP_FINALIZER).await?;
                Ok(true)
            }
            Sweep::Stopped => Ok(true),
            Sweep::KeysLeft | Sweep::Held(_) => Ok(false),
        }
    }
}

/// Set the condition kube's CRD finalizer reports while it deletes a deleted CRD's objects.
pub fn mark_terminating(crd: &mut Value) {
    let Some(m) = crd.as_object_mut() else { return };
    let status = m.entry("status").or_insert_with(|| serde_json::json!({}));
    if !status.is_object() {
        *status = serde_json::json!({});
    }
    let conditions =
        status.as_object_mut().expect("made an object").entry("conditions").or_insert_with(|| serde_json::json!([]));
    if !conditions.is_array() {
        *conditions = serde_json::json!([]);
    }
    let list = conditions.as_array_mut().expect("made an array");
    list.retain(|c| c["type"] != "Terminating");
    list.push(serde_json::json!({
        "type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
        "message": "CustomResource deletion is in progress", "lastTransitionTime": crate::meta::now_rfc3339()
    }));
}

/// Keep a CRD's status in step with its spec, as kube-apiserver's naming controller does at once here:
/// `acceptedNames` are the spec's names with their defaults, and `storedVersions` gains the storage
/// version (a version once stored stays listed until an administrator removes it).
pub fn refresh_status(current: &Value, obj: &mut Value) {
    let names = obj["spec"]["names"].clone();
    let mut accepted = if names.is_object() { names } else { serde_json::json!({}) };
    if let Some(kind) = accepted["kind"].as_str().map(str::to_string) {
        if accepted.get("listKind").is_none() {
            accepted["listKind"] = serde_json::json!(format!("{kind}List"));
        }
        if accepted.get("singular").is_none() {
            accepted["singular"] = serde_json::json!(kind.to_ascii_lowercase());
        }
    }
    let mut stored: Vec<Value> = current["status"]["storedVersions"].as_array().cloned().unwrap_or_default();
    for v in obj["spec"]["versions"].as_array().into_iter().flatten() {
        if v["storage"] == true && !stored.contains(&v["name"]) {
            stored.push(v["name"].clone());
        }
    }
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = serde_json::json!({});
    }
    obj["status"]["acceptedNames"] = accepted;
    obj["status"]["storedVersions"] = Value::Array(stored);
}

/// The key prefixes of every custom resource a cluster's CRDs define (in one namespace, for namespaced
/// ones, when `namespace` is given), read from the store itself: sweeps of a deleted namespace or cluster
/// must not depend on any cache.
pub async fn custom_prefixes(registry: &Registry, cluster: &str, namespace: Option<&str>) -> ApiResult<Vec<String>> {
    let prefix = definitions(registry, cluster);
    let mut out = Vec::new();
    let mut start = None;
    loop {
        let page = registry
            .store
            .range(RangeRequest { prefix: prefix.clone(), start: start.take(), limit: PAGE, revision: None })
            .await?;
        out.extend(prefixes_defined(registry, cluster, namespace, &page.kvs));
        start = page.next_start();
        if start.is_none() {
            break;
        }
    }
    Ok(out)
}

/// The key prefix of a cluster's CRDs.
pub fn definitions(registry: &Registry, cluster: &str) -> String {
    registry.collection(&crd_def(), Some(cluster), None)
}

/// The key prefixes of the custom resources the CRDs in `kvs` (read under [`definitions`]) define, as
/// [`custom_prefixes`] gives them.
pub fn prefixes_defined<'a>(
    registry: &'a Registry,
    cluster: &'a str,
    namespace: Option<&'a str>,
    kvs: &'a [KeyValue],
) -> impl Iterator<Item = String> + 'a {
    kvs.iter().filter_map(move |kv| {
        let obj = serde_json::from_slice::<Value>(&kv.value).ok()?;
        let crd = Crd::parse(&obj, kv.mod_revision)?;
        match namespace {
            Some(ns) if crd.namespaced => {
                Some(keys::collection(&registry.prefix, &crd.group, &crd.plural, Some(cluster), Some(ns)))
            }
            Some(_) => None,
            None => Some(keys::collection(&registry.prefix, &crd.group, &crd.plural, Some(cluster), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_documents_are_kept_up_to_a_bound_and_weigh_what_they_hold() {
        let docs = ClusterDocs {
            stamp: (1, 1),
            discovery: Discovery::build(std::iter::empty()),
            openapi: Mutex::new(HashMap::new()),
            bytes: 100.into(),
        };
        let doc = |n: usize| (Arc::new(vec![b' '; n]), "hash".to_string());
        let weigh = |d: &Arc<ClusterDocs>| {
            let bytes = d.bytes.load(std::sync::atomic::Ordering::Relaxed);
            quick_cache::Weighter::weight(&Bytes, &Box::from("c"), &(d.clone(), bytes))
        };
        let docs = Arc::new(docs);
        assert_eq!(weigh(&docs), 165);
        assert!(docs.keep_openapi("apis/a/v1", doc(40 << 20)));
        assert!(weigh(&docs) > 40 << 20);
        // The same document built twice at once weighs once.
        assert!(docs.keep_openapi("apis/a/v1", doc(40 << 20)));
        assert!(weigh(&docs) < 41 << 20);
        // Past the bound a document is not kept: it is built again when asked for.
        assert!(!docs.keep_openapi("apis/b/v1", doc(9 << 20)));
        assert!(docs.openapi("apis/b/v1").is_none() && docs.openapi("apis/a/v1").is_some());
        assert!(docs.keep_openapi("apis/c/v1", doc(1 << 20)));
    }
}
