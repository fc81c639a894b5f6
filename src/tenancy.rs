//! Logical clusters: which exist (LogicalCluster objects in root), what a new one starts with
//! (kube's namespaces, each with its `default` ServiceAccount and `kube-root-ca.crt`, the
//! `default/kubernetes` Service with its endpoints, and kube's default RBAC), and the lifecycle of a
//! LogicalCluster object:
//!
//! - created `Initializing`, with the finalizer [`PURGE_FINALIZER`]; `Ready` once bootstrapped (on an
//!   etcd default shard, created `Ready` in one transaction with its cluster's objects: [`create_ready`]);
//! - a DELETE marks it `Terminating` (deletionTimestamp set: the cluster answers 404 from then on), the
//!   [`Lifecycle`] controller purges every key of the cluster, then removes the finalizer, and only then
//!   does the object go (the purge then sweeps once more, for writes that raced its end). So its name
//!   cannot be reused while old keys remain, unless someone removes the finalizer by hand.
//!
//! `manifests` applies the LogicalCluster files of `--tenants-dir` at start.

mod fresh;
mod lifecycle;
mod manifests;
mod moving;

use std::sync::Arc;

use dashmap::DashSet;
use futures::StreamExt;
use serde_json::{json, Value};

pub use crate::registry::footprint::TenantLimits;
use crate::registry::footprint::Usage;
pub use lifecycle::{purge, resume_bootstraps, Lifecycle};
pub use manifests::{apply_dir, ManifestError};
pub use moving::GRACE as MOVE_GRACE;

use crate::cluster::ROOT;
use crate::meta::now_rfc3339;
use crate::registry::Registry;
use crate::resources::{self, ResourceDef};
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, StoreError, WatchEvent};

/// Namespaces every logical cluster starts with, as a kube cluster does.
pub const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Namespaces kube refuses to delete (its namespace lifecycle admission's immortal ones).
pub const UNDELETABLE_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The `default/kubernetes` Service's cluster address: the first of kube's default service range.
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// Keeps a LogicalCluster until every key of its cluster has been removed.
pub const PURGE_FINALIZER: &str = "tenancy.kgate.dev/purge";

/// `status.phase` while the cluster is being bootstrapped.
pub const PHASE_INITIALIZING: &str = "Initializing";
/// `status.phase` once the cluster serves.
pub const PHASE_READY: &str = "Ready";
/// `status.phase` from the DELETE until the object is gone.
pub const PHASE_TERMINATING: &str = "Terminating";

/// Records, on a LogicalCluster, the defaults its cluster was last brought up to (`defaults_revision`),
/// so that a start reconciles only clusters an older kgate, or one with another CA or address, made. (Named for
/// the RBAC policy, which was all it covered at first.)
pub const POLICY_ANNOTATION: &str = "tenancy.kgate.dev/rbac-policy";

/// A digest of the defaults this server gives a cluster: the bootstrap RBAC policy
/// (`rbac::policy_revision`), the CA it publishes into every namespace and the address it publishes as
/// `default/kubernetes`, so that a new CA reaches every cluster's `kube-root-ca.crt` as kube's
/// publisher would bring it, and a server that moved is where every cluster's Endpoints and
/// EndpointSlice say it is, as kube-apiserver's endpoint reconciler keeps them.
pub fn defaults_revision(registry: &Registry) -> String {
    use sha2::{Digest, Sha256};
    let policy = crate::rbac::policy_revision();
    match &registry.published {
        Some(facts) => {
            let mut digest = Sha256::new();
            digest.update(facts.ca_pem.as_bytes());
            digest.update(format!("\n{}:{}", facts.ip, facts.port).as_bytes());
            format!("{policy}-{}", hex::encode(&digest.finalize()[..4]))
        }
        None => policy.to_string(),
    }
}

/// LogicalClusters read per store round trip when listing them all.
const PAGE: usize = 1_000;

/// How many times a status or finalizer write retries after losing a compare-and-swap.
const MAX_RETRIES: usize = 16;

/// The set of existing logical clusters, kept current by one store watch.
///
/// A `DashSet` because every request reads it and only the watch task writes; one entry per cluster
/// (its name), so 100,000 clusters cost a few MiB.
#[derive(Clone)]
pub struct Directory {
    known: Arc<DashSet<String>>,
    /// The limits a platform set on a cluster (`spec.limits`), for the clusters that have any; kept by
    /// the same watch, so a change holds on every replica within moments, whether or not usage is
    /// counted (the store-bound limits are `registry::footprint`'s, from its own watch).
    limits: Arc<dashmap::DashMap<String, TenantLimits>>,
    /// The shard of each cluster not on the default one (`UNKNOWN_SHARD`: on one this server is not
    /// given), kept by the same watch; two bytes and a name per cluster on another shard.
    placed: Arc<dashmap::DashMap<String, u16>>,
    registry: Registry,
    def: Arc<ResourceDef>,
}

/// `Directory::placed`'s mark of a shard this server does not serve.
const UNKNOWN_SHARD: u16 = u16::MAX;

impl Directory {
    /// A directory over the registry's store; call `run` to keep it current.
    pub fn new(registry: Registry) -> Self {
        Directory {
            known: Arc::new(DashSet::new()),
            limits: Default::default(),
            placed: Default::default(),
            registry,
            def: resources::logical_cluster_def(),
        }
    }

    fn key(&self, name: &str) -> String {
        keys::object(&self.registry.prefix, self.def.storage_group(), &self.def.plural, ROOT, None, name)
    }

    /// Whether a logical cluster exists and is not being deleted. A miss is checked against the store, so
    /// a cluster is usable as soon as its create returned, before the watch reports it.
    pub async fn exists(&self, name: &str) -> ApiResult<bool> {
        Ok(self.locate(name).await?.is_some())
    }

    /// Where a logical cluster is, if it exists and is not being deleted: `exists`, with its shard.
    pub async fn locate(&self, name: &str) -> ApiResult<Option<crate::shard::Placed>> {
        use crate::shard::Placed;
        if name == ROOT {
            return Ok(Some(Placed::At(0)));
        }
        if self.known.contains(name) {
            if self.registry.moves.has(name) {
                return Err(moving(name));
            }
            return Ok(Some(match self.placed.get(name).map(|p| *p) {
                None => Placed::At(0),
                Some(UNKNOWN_SHARD) => Placed::Unknown,
                Some(i) => Placed::At(usize::from(i)),
            }));
        }
        // Only the watch task writes `known`: inserting here could resurrect a cluster whose delete the
        // watch has already applied.
        match self.registry.store.get(&self.key(name)).await? {
            Some(kv) => {
                let obj: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
                let live = obj["metadata"].get("deletionTimestamp").is_none();
                if live && crate::shard::moving_to(&obj).is_some() {
                    return Err(moving(name));
                }
                Ok(live.then(|| self.registry.shards.place_of(&obj)))
            }
            None => Ok(None),
        }
    }

    /// The shard index a live cluster is counted on, as `placed` has it.
    fn counted_on(&self, name: &str) -> Option<usize> {
        if !self.known.contains(name) {
            return None;
        }
        match self.placed.get(name).map(|p| *p) {
            None => Some(0),
            Some(UNKNOWN_SHARD) => None,
            Some(i) => Some(usize::from(i)),
        }
    }

    /// Drop a cluster, and its count: by whoever removes it from `known` (a DELETE and the watch may
    /// both try), so it is counted down once. Always safe, as a miss is checked against the store;
    /// but a live cluster dropped stays out until its LogicalCluster is next written, each of its
    /// requests costing a store read meanwhile, so it is called for a cluster just marked deleted or
    /// removed (a DELETE that answered), or seen so.
    pub fn forget(&self, name: &str) {
        self.registry.moves.set(name, false);
        let placed = self.placed.remove(name).map(|(_, i)| i);
        if self.known.remove(name).is_some() {
            let counted = match placed {
                None => Some(0),
                Some(UNKNOWN_SHARD) => None,
                Some(i) => Some(usize::from(i)),
            };
            self.registry.shards.seen(counted, None);
        }
    }

    /// Re-read one LogicalCluster and drop the name if it is gone or being deleted: after a
    /// deletecollection, whose deletes run one by one, so that a cluster deleted early in it and made
    /// again before it ends is not dropped. A failed read drops it too (see `forget`).
    pub async fn refresh(&self, name: &str) {
        if let Ok(Some(kv)) = self.registry.store.get(&self.key(name)).await {
            let obj: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
            if obj["metadata"].get("deletionTimestamp").is_none() {
                return;
            }
        }
        self.forget(name);
    }

    /// The limits set on `name`, if any.
    pub fn limits(&self, name: &str) -> Option<TenantLimits> {
        self.limits.get(name).map(|l| *l)
    }

    /// Number of known clusters.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether no cluster but root is known.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// List then watch LogicalCluster objects forever, keeping `known` current.
    pub async fn run(self) {
        let prefix = self.registry.collection(&self.def, Some(ROOT), None);
        loop {
            let res = async {
                // Names are dropped only once the whole list is read: until then a request for a
                // cluster not yet seen again would cost a store read (a miss is checked there).
                let mut seen = std::collections::HashSet::new();
                let revision = crate::storage::range_pages(&*self.registry.store, &prefix, PAGE, |kvs| {
                    for kv in kvs {
                        self.observe(&kv.key, Some(&kv.value));
                        seen.insert(kv.key.rsplit('/').next().unwrap_or_default().to_string());
                    }
                    Ok::<_, StoreError>(())
                })
                .await?;
                let gone: Vec<String> =
                    self.known.iter().filter(|n| !seen.contains(n.key())).map(|n| n.clone()).collect();
                gone.iter().for_each(|name| self.forget(name));
                drop(seen);
                // What each LogicalCluster is now is all it needs: no previous values.
                let mut w = self.registry.store.watch_current(&prefix, revision).await?;
                while let Some(ev) = w.next().await {
                    match ev? {
                        WatchEvent::Put { kv, .. } => self.observe(&kv.key, Some(&kv.value)),
                        WatchEvent::Delete { key, .. } => self.observe(&key, None),
                        WatchEvent::Progress(_) => {}
                    }
                }
                Ok::<(), StoreError>(())
            }
            .await;
            if let Err(e) = res {
                tracing::warn!(error = %e, "logical cluster watch ended; relisting");
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    fn observe(&self, key: &str, value: Option<&[u8]>) {
        let Some(name) = key.rsplit('/').next() else {
            return;
        };
        let obj = value.and_then(|v| serde_json::from_slice::<Value>(v).ok());
        let live = obj.as_ref().is_some_and(|o| o["metadata"].get("deletionTimestamp").is_none());
        match obj.as_ref().and_then(TenantLimits::of).filter(|_| live) {
            Some(l) => {
                self.limits.insert(name.to_string(), l);
            }
            None => {
                self.limits.remove(name);
            }
        }
        let Some(obj) = obj.filter(|_| live) else {
            self.forget(name);
            return;
        };
        self.registry.moves.set(name, crate::shard::moving_to(&obj).is_some());
        let (before, after) = (self.counted_on(name), self.registry.shards.place_of(&obj));
        match after {
            crate::shard::Placed::At(0) => {
                self.placed.remove(name);
            }
            crate::shard::Placed::At(i) => {
                self.placed.insert(name.to_string(), u16::try_from(i).unwrap_or(UNKNOWN_SHARD));
            }
            crate::shard::Placed::Unknown => {
                self.placed.insert(name.to_string(), UNKNOWN_SHARD);
            }
        }
        self.known.insert(name.to_string());
        self.registry.shards.seen(before, self.counted_on(name));
    }
}

/// Create what a new logical cluster starts with, or bring what it has up to this kgate's defaults
/// (idempotent). Writes nothing once the cluster is being deleted.
pub async fn bootstrap(registry: &Registry, cluster: &str) -> ApiResult<()> {
    write_defaults(registry, cluster, true, None).await.map(drop)
}

/// `bootstrap` for a cluster that has its defaults already (root at start, a cluster an older kgate
/// made): each object is read before anything is written, rather than created first.
pub async fn reconcile_defaults(registry: &Registry, cluster: &str) -> ApiResult<()> {
    write_defaults(registry, cluster, false, None).await.map(drop)
}

/// A namespace as a new cluster's starts with it.
fn namespace(ns: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now_rfc3339(),
                      "labels": {"kubernetes.io/metadata.name": ns}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

/// Every object a new cluster starts with, by key: what `write_defaults` writes one by one, for one
/// atomic create (about thirty keys; one store round trip rather than one each). `fresh::objects`
/// makes the same, faster.
fn fresh_values(registry: &Registry, cluster: &str) -> Vec<(String, Value)> {
    let mut items = Vec::new();
    let key = |group: &str, plural: &str, ns: Option<&str>, name: &str| {
        keys::object(&registry.prefix, group, plural, cluster, ns, name)
    };
    for ns in INITIAL_NAMESPACES {
        items.push((key("core", "namespaces", None, ns), namespace(ns)));
        for (plural, name, obj) in registry.namespace_defaults(ns) {
            items.push((key("core", plural, Some(ns), name), obj));
        }
    }
    if let Some(facts) = registry.published.clone() {
        for (group, plural, name, obj) in api_service(&facts) {
            items.push((key(group, plural, Some("default"), name), obj));
        }
    }
    for (plural, name, obj) in default_rbac() {
        items.push((key("rbac.authorization.k8s.io", plural, None, &name), obj));
    }
    items
}

/// kube-apiserver's bootstrap policy as a cluster starts with it (plural, name, object): cluster-admin
/// for system:masters, admin/edit/view for RoleBindings, discovery for everyone authenticated.
fn default_rbac() -> Vec<(&'static str, String, Value)> {
    let roles = crate::rbac::default_cluster_roles().into_iter().map(|o| ("clusterroles", o));
    let bindings = crate::rbac::default_cluster_role_bindings().into_iter().map(|o| ("clusterrolebindings", o));
    roles
        .chain(bindings)
        .map(|(plural, obj)| {
            let obj = with_identity(obj);
            (plural, crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string(), obj)
        })
        .collect()
}

/// A default object with the uid and creation time the API would have given it.
fn with_identity(mut obj: Value) -> Value {
    let meta = crate::meta::metadata_mut(&mut obj);
    meta.entry("uid").or_insert_with(|| json!(uuid::Uuid::new_v4().to_string()));
    meta.entry("creationTimestamp").or_insert_with(|| json!(now_rfc3339()));
    obj
}

/// Write a cluster's defaults (see `bootstrap` and `reconcile_defaults`), guarded by `known` (the
/// LogicalCluster as just written) rather than by a fresh read of it. Returns what the cluster holds
/// when it was all created at once, so that the LogicalCluster can record its usage in the write that
/// marks it Ready.
async fn write_defaults(
    registry: &Registry,
    cluster: &str,
    fresh: bool,
    known: Option<crate::storage::Guard>,
) -> ApiResult<Option<Usage>> {
    // A stale `known` only fails the first guarded write, which then reads the LogicalCluster again.
    let mut writes = Defaults { registry, cluster, fresh, guard: known };
    if writes.guard.is_none() && !writes.still_live().await? {
        return Ok(None);
    }
    if !fresh {
        // Namespaces made since hold the CA of their day: bring them all to this server's.
        registry.republish(cluster).await?;
    }
    if fresh && cluster != ROOT {
        // All at once while the LogicalCluster is as read; else (a key there already: a bootstrap cut
        // short and resumed, or the LogicalCluster changed) one by one below, which finds what is made.
        let objects = fresh::objects(registry, cluster);
        if let Ok(Some(_)) = registry.store.create_all(&objects, writes.guard.as_ref()).await {
            return Ok(Some(Usage::of_keys(&registry.prefix, &objects)));
        }
    }
    for ns in INITIAL_NAMESPACES {
        let key = keys::object(&registry.prefix, "core", "namespaces", cluster, None, ns);
        let obj = namespace(ns);
        if writes.create(&key, crate::registry::encode(&obj)).await? == Created::Gone {
            return Ok(None);
        }
        // Guarded by its namespace, which a purge deletes.
        registry.ensure_namespace_defaults(cluster, ns).await?;
    }
    if let Some(facts) = registry.published.clone() {
        for (group, plural, name, obj) in api_service(&facts) {
            let key = keys::object(&registry.prefix, group, plural, cluster, Some("default"), name);
            if !reconcile_at(&mut writes, &key, (group, plural, name), &obj, same_content).await? {
                return Ok(None);
            }
        }
    }
    for (plural, name, obj) in default_rbac() {
        if !reconcile_default(&mut writes, plural, &name, &obj).await? {
            return Ok(None);
        }
    }
    Ok(None)
}

/// The `default/kubernetes` Service and the Endpoints and EndpointSlice that point it at this server,
/// as kube-apiserver keeps them: (storage group, plural, name, object).
fn api_service(facts: &crate::registry::Published) -> Vec<(&'static str, &'static str, &'static str, Value)> {
    let meta = |labels: Value| {
        json!({"name": "kubernetes", "namespace": "default", "uid": uuid::Uuid::new_v4().to_string(),
               "creationTimestamp": now_rfc3339(), "labels": labels})
    };
    let ip = facts.ip.to_string();
    let family = if facts.ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let port = json!({"name": "https", "port": facts.port, "protocol": "TCP"});
    let mut objects = vec![
        (
            "core",
            "services",
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": meta(json!({"component": "apiserver", "provider": "kubernetes"})),
                "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": facts.port}],
                         "clusterIP": KUBERNETES_SERVICE_IP, "clusterIPs": [KUBERNETES_SERVICE_IP], "type": "ClusterIP",
                         "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                         "internalTrafficPolicy": "Cluster"},
                "status": {"loadBalancer": {}}}),
        ),
        (
            "core",
            "endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints",
                "metadata": meta(json!({"endpointslice.kubernetes.io/skip-mirror": "true"})),
                "subsets": [{"addresses": [{"ip": ip}], "ports": [port]}]}),
        ),
        (
            "discovery.k8s.io",
            "endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": meta(json!({"kubernetes.io/service-name": "kubernetes"})),
                "addressType": family,
                "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
                "ports": [port]}),
        ),
    ];
    for (_, _, obj) in &mut objects {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        crate::proto::go_shape(&api_version, &kind, obj);
    }
    objects.into_iter().map(|(g, p, o)| (g, p, "kubernetes", o)).collect()
}

/// `expected`'s content over `existing`'s, keeping `existing`'s metadata; `None` when they agree
/// already (the server's address may change between starts).
fn same_content(existing: &Value, expected: &Value) -> Option<Value> {
    let (Value::Object(have), Value::Object(want)) = (existing, expected) else { return None };
    if want.iter().all(|(k, v)| k == "metadata" || have.get(k) == Some(v)) {
        return None;
    }
    let mut updated = have.clone();
    for (k, v) in want.iter().filter(|(k, _)| *k != "metadata") {
        updated.insert(k.clone(), v.clone());
    }
    Some(Value::Object(updated))
}

/// What a guarded create of a default object did.
#[derive(Debug, PartialEq, Eq)]
enum Created {
    Made,
    Existed,
    /// The cluster is being deleted or is gone: nothing was written, and nothing more should be.
    Gone,
}

/// Writes of a cluster's default objects. Each create is checked, in its own store step, against the
/// cluster's LogicalCluster as last seen live, so a DELETE racing a bootstrap or a reconcile cannot
/// leave objects behind its purge. (Updates compare the object's own revision, so they cannot bring
/// back one the purge deleted.)
struct Defaults<'a> {
    registry: &'a Registry,
    cluster: &'a str,
    /// A new cluster, where creating first saves a read per object.
    fresh: bool,
    /// `None` for root, which has no LogicalCluster.
    guard: Option<crate::storage::Guard>,
}

impl<'a> Defaults<'a> {
    /// Read the LogicalCluster again and guard on what was read; false when it is being deleted or gone.
    async fn still_live(&mut self) -> ApiResult<bool> {
        if self.cluster == ROOT {
            return Ok(true);
        }
        self.guard = live_guard(self.registry, self.cluster).await?;
        Ok(self.guard.is_some())
    }

    /// Create `value` at `key` unless something is there.
    async fn create(&mut self, key: &str, value: Vec<u8>) -> ApiResult<Created> {
        for _ in 0..MAX_RETRIES {
            match self.registry.store.create_guarded(key, value.clone(), self.guard.as_ref()).await {
                Ok(_) => return Ok(Created::Made),
                Err(StoreError::AlreadyExists) => return Ok(Created::Existed),
                // The LogicalCluster changed (its status, say, or a DELETE): look again.
                Err(StoreError::GuardChanged) => {
                    if !self.still_live().await? {
                        return Ok(Created::Gone);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(
            "logicalclusters",
            resources::TENANCY_GROUP,
            self.cluster,
            "changing too often; try again",
        ))
    }
}

/// Create the bootstrap RBAC object `expected` (a `plural` named `name`), or bring the one there up to
/// it, as kube-apiserver reconciles its bootstrap policy at every start (see `rbac::reconcile`).
/// False when the cluster stopped being live.
async fn reconcile_default(writes: &mut Defaults<'_>, plural: &str, name: &str, expected: &Value) -> ApiResult<bool> {
    const GROUP: &str = "rbac.authorization.k8s.io";
    let key = keys::object(&writes.registry.prefix, GROUP, plural, writes.cluster, None, name);
    reconcile_at(writes, &key, (GROUP, plural, name), expected, crate::rbac::reconcile).await
}

/// Create `expected` at `key` (an object `what` = (group, plural, name)), or replace what is there with
/// what `bring` makes of it and `expected` (`None`: it is fine as it is). False when the cluster
/// stopped being live.
async fn reconcile_at(
    writes: &mut Defaults<'_>,
    key: &str,
    (group, plural, name): (&str, &str, &str),
    expected: &Value,
    bring: impl Fn(&Value, &Value) -> Option<Value>,
) -> ApiResult<bool> {
    let store = &writes.registry.store;
    for _ in 0..MAX_RETRIES {
        let current = if writes.fresh { None } else { store.get(key).await? };
        let kv = match current {
            Some(kv) => kv,
            None => match writes.create(key, crate::registry::encode(expected)).await? {
                Created::Made => return Ok(true),
                Created::Gone => return Ok(false),
                Created::Existed => match store.get(key).await? {
                    Some(kv) => kv,
                    None => continue,
                },
            },
        };
        let Ok(existing) = serde_json::from_slice::<Value>(&kv.value) else {
            // As the API would not write such an object, leave it for someone to look at rather than
            // fail the start or the cluster's bootstrap.
            tracing::warn!(cluster = writes.cluster, name, "a default {plural} object is not JSON; left as it is");
            return Ok(true);
        };
        let Some(updated) = bring(&existing, expected) else { return Ok(true) };
        match store.update(key, crate::registry::encode(&updated), kv.mod_revision).await {
            Ok(_) => return Ok(true),
            Err(StoreError::Conflict { .. } | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(plural, group, name, "too many concurrent updates; try again"))
}

/// The registry of the shard a LogicalCluster's cluster lives on, from root's registry.
pub fn registry_of(registry: &Registry, lc: &Value) -> ApiResult<Registry> {
    match registry.shards.place_of(lc) {
        crate::shard::Placed::At(i) => Ok(registry.shards.registry(i, registry)),
        crate::shard::Placed::Unknown => Err(unserved(crate::shard::of(lc).unwrap_or_default())),
    }
}

/// The answer for a cluster being moved to another shard: try again (its objects are on neither
/// shard whole until the move ends, which takes about as long as listing them all).
fn moving(name: &str) -> ApiError {
    ApiError::unavailable(format!("the logical cluster {name:?} is being moved to another shard; try again shortly"))
}

/// The answer for a cluster on a shard this server is not given.
pub fn unserved(shard: &str) -> ApiError {
    ApiError::unavailable(format!("the logical cluster is on shard {shard:?}, which this server does not serve"))
}

/// Key of a LogicalCluster object.
fn object_key(registry: &Registry, name: &str) -> String {
    let def = resources::logical_cluster_def();
    keys::object(&registry.prefix, def.storage_group(), &def.plural, ROOT, None, name)
}

/// Whether a LogicalCluster object exists and is not being deleted (whatever its phase).
pub async fn is_live(registry: &Registry, name: &str) -> ApiResult<bool> {
    Ok(live_guard(registry, name).await?.is_some())
}

/// `is_live`, with the LogicalCluster as read when it is there but not live (being deleted).
pub(crate) async fn leaving(registry: &Registry, name: &str) -> ApiResult<(bool, Option<crate::storage::KeyValue>)> {
    Ok(match registry.logical_cluster(name).await? {
        Some((_, true)) => (true, None),
        Some((kv, false)) => (false, Some(kv)),
        None => (false, None),
    })
}

/// The LogicalCluster `name` as a write guard (its key at the revision read), if it exists and is not
/// being deleted.
async fn live_guard(registry: &Registry, name: &str) -> ApiResult<Option<crate::storage::Guard>> {
    Ok(match registry.logical_cluster(name).await? {
        Some((kv, true)) => Some(crate::storage::Guard { key: kv.key, mod_revision: kv.mod_revision }),
        _ => None,
    })
}

/// `status` with the phase set and the Ready condition set the way `meta.SetStatusCondition` does:
/// other conditions are kept, and `lastTransitionTime` only moves when the condition's status changes.
fn with_phase(current: &Value, phase: &str, ready: bool, reason: &str, message: &str) -> Value {
    let mut status = match current.get("status") {
        Some(s @ Value::Object(_)) => s.clone(),
        _ => json!({}),
    };
    let want = if ready { "True" } else { "False" };
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    let old = conditions.iter().position(|c| c["type"] == "Ready");
    let since = match old.map(|i| &conditions[i]) {
        Some(c) if c["status"] == want && c["lastTransitionTime"].is_string() => c["lastTransitionTime"].clone(),
        _ => json!(now_rfc3339()),
    };
    let cond =
        json!({"type": "Ready", "status": want, "reason": reason, "message": message, "lastTransitionTime": since});
    match old {
        Some(i) => conditions[i] = cond,
        None => conditions.push(cond),
    }
    status["phase"] = json!(phase);
    status["conditions"] = Value::Array(conditions);
    status
}

/// Make a LogicalCluster about to be created `Initializing` and give it the purge finalizer, in the same
/// write that creates it, so no moment exists where it could go without its keys being purged.
pub fn prepare_new(obj: &mut Value) {
    obj["status"] =
        with_phase(&json!({}), PHASE_INITIALIZING, false, "Initializing", "the logical cluster is being bootstrapped");
    add_finalizer(obj);
}

/// The status a LogicalCluster gets when its DELETE is accepted.
pub fn terminating_status(current: &Value) -> Value {
    with_phase(
        current,
        PHASE_TERMINATING,
        false,
        "Terminating",
        "the logical cluster is being deleted and its objects purged",
    )
}

fn add_finalizer(obj: &mut Value) {
    let meta = crate::meta::metadata_mut(obj);
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("made an array above");
    if !list.iter().any(|f| f == PURGE_FINALIZER) {
        list.push(json!(PURGE_FINALIZER));
    }
}

/// Store a new LogicalCluster `obj` (admitted, at `key` in root) already Ready, in one transaction
/// with everything its cluster starts with, where the cluster lives on the default shard: a creation
/// then costs etcd one write rather than three (created `Initializing`, bootstrapped, marked Ready),
/// and watchers of LogicalClusters one event rather than two.
///
/// Returns the revision `obj` was stored at, `obj` being then what was stored; `None` when this
/// cannot be done at once and nothing was written: the store makes no such step (the embedded one), a
/// key of the cluster is there already (its name is being purged, or a bootstrap a crash cut short
/// left some), or the cluster is placed on another shard. The caller then creates `obj` as it is,
/// `Initializing`, and [`initialize`] bootstraps it, finding what is there.
///
/// Another shard's store cannot join root's transaction. Writing the cluster's objects there first
/// and then the LogicalCluster, Ready, saved the default shard's etcd two calls of three; but in the
/// shards bench deleting 10,000 clusters took 69-79 s after it rather than 44-53 s (the default
/// shard's etcd spent 9-10 ms per cluster deleted rather than 5-6, with the same calls), which the
/// same objects-first order with the LogicalCluster written twice did not. Not understood, so not kept
/// then; those runs were made while usage counting's watch asked etcd for previous values, which
/// cost the default shard's etcd a read per event (see `registry::follow`), so the order is worth
/// measuring again.
pub async fn create_ready(registry: &Registry, obj: &mut Value, key: &str) -> Result<Option<i64>, StoreError> {
    if registry.shards.place_of(obj) != crate::shard::Placed::At(0) {
        return Ok(None);
    }
    let name = crate::meta::meta_str(obj, "name").unwrap_or_default().to_string();
    let mut items = fresh::objects(registry, &name);
    // What the cluster holds from its start, so that no usage flush writes the LogicalCluster again.
    let usage = registry.footprint.counting().then(|| Usage::of_keys(&registry.prefix, &items));
    let mut ready = obj.clone();
    if make_ready(&mut ready, defaults_revision(registry), usage).is_err() {
        return Ok(None);
    }
    items.push((key.to_string(), crate::registry::encode(&ready)));
    let made = registry.store.create_all(&items, None).await?;
    if made.is_some() {
        *obj = ready;
    }
    Ok(made)
}

/// Bootstrap a LogicalCluster's cluster, then record it Ready; returns the object. Idempotent: also
/// finishes a bootstrap a restart interrupted.
pub async fn initialize(registry: &Registry, obj: Value) -> ApiResult<Value> {
    if is_current(&obj, &defaults_revision(registry)) {
        // Made Ready with its cluster's objects (`create_ready`).
        return Ok(obj);
    }
    let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
    let uid = crate::meta::meta_str(&obj, "uid").unwrap_or_default().to_string();
    // The object just created is most likely still the stored one: guarding the bootstrap on it and
    // marking it Ready from it save creation two reads of the store (a conflict reads it then).
    let mut created = revision_of(&obj).map(|rev| (obj.clone(), rev));
    if let Some((known, rev)) = &created {
        if !registry.holds_root() {
            match bootstrap_elsewhere(registry, &name, &uid, known.clone(), *rev).await? {
                Elsewhere::Ready(ready) => return Ok(ready),
                // Written below as on the default shard, guarded by the LogicalCluster as created.
                Elsewhere::NotMade => {}
                Elsewhere::TakenBack => created = None,
            }
        }
    }
    let guard =
        created.as_ref().map(|(_, rev)| crate::storage::Guard { key: object_key(registry, &name), mod_revision: *rev });
    let held = write_defaults(registry, &name, true, guard).await?;
    // What the bootstrap wrote is what the cluster holds, so the Ready write records it: else the usage
    // flush would write the LogicalCluster again, a read and a write more per cluster created.
    let usage = held.filter(|_| registry.footprint.counting());
    Ok(mark_ready(registry, &name, &uid, created, usage).await?.unwrap_or(obj))
}

/// What [`bootstrap_elsewhere`] did.
enum Elsewhere {
    /// Bootstrapped and marked Ready (or found being deleted, its objects left to its purge).
    Ready(Value),
    /// Nothing written: a key was there already (a bootstrap cut short), or the store made no such
    /// step at once.
    NotMade,
    /// The LogicalCluster was gone, replaced or being deleted when it was to be marked Ready: the
    /// objects were taken back (as far as the store let them be).
    TakenBack,
}

/// Bootstrap a cluster placed on another shard than root's, whose LogicalCluster `obj` (uid `uid`)
/// was just created at `rev`, and mark it Ready.
///
/// The shard's store cannot join root's transaction, so the objects there cannot be created on the
/// condition that the LogicalCluster has not changed. The write that marks it Ready compares the
/// revision it was created at: the same condition, checked after the objects are there, as a read of
/// it would check it, so root's etcd spares that read. When it has changed, the answer carries it as
/// read after the objects were made: still live with the same uid (a label added, another replica
/// marking it Ready first), no purge can have begun before them, so it is marked Ready from that;
/// else (a DELETE accepted meanwhile, whose purge may have passed their keys already) they are taken
/// back and the caller reads it again.
async fn bootstrap_elsewhere(registry: &Registry, name: &str, uid: &str, obj: Value, rev: i64) -> ApiResult<Elsewhere> {
    let objects = fresh::objects(registry, name);
    let usage = registry.footprint.counting().then(|| Usage::of_keys(&registry.prefix, &objects));
    let mut ready = obj;
    make_ready(&mut ready, defaults_revision(registry), usage)?;
    let Ok(Some(made)) = registry.store.create_all(&objects, None).await else { return Ok(Elsewhere::NotMade) };
    let (def, key) = (resources::logical_cluster_def(), object_key(registry, name));
    let taken_back = || crate::storage::take_back(&*registry.store, &objects, made);
    match registry.store.update(&key, crate::registry::encode(&ready), rev).await {
        Ok(rev) => {
            crate::registry::decorate(&mut ready, &def, ROOT, rev);
            Ok(Elsewhere::Ready(ready))
        }
        Err(StoreError::Conflict { current: Some(kv) }) => {
            let now = registry.decode(&def, ROOT, &kv)?;
            let live = crate::meta::meta_str(&now, "uid") == Some(uid)
                && crate::meta::meta_str(&now, "deletionTimestamp").is_none();
            if !live {
                taken_back().await;
                return Ok(Elsewhere::TakenBack);
            }
            let known = Some((now.clone(), kv.mod_revision));
            Ok(Elsewhere::Ready(mark_ready(registry, name, uid, known, usage).await?.unwrap_or(now)))
        }
        Err(StoreError::Conflict { current: None } | StoreError::NotFound) => {
            taken_back().await;
            Ok(Elsewhere::TakenBack)
        }
        Err(e @ StoreError::Unavailable(_)) => {
            // Not written: taken back, as the request fails.
            taken_back().await;
            Err(e.into())
        }
        // Perhaps written: the objects stay. A later initialize (a restart's, or the lifecycle
        // controller's next listing) finds them; a DELETE's purge, if one comes, takes them.
        Err(e) => Err(e.into()),
    }
}

/// The store revision an object read back from the API carries.
fn revision_of(obj: &Value) -> Option<i64> {
    crate::meta::meta_str(obj, "resourceVersion")?.parse().ok()
}

/// Bring the default RBAC of the live cluster `name` (LogicalCluster uid `uid`) up to this kgate's
/// policy, and record that on its LogicalCluster.
async fn refresh(registry: &Registry, name: &str, uid: &str) -> ApiResult<()> {
    reconcile_defaults(registry, name).await?;
    mark_ready(registry, name, uid, None, None).await?;
    Ok(())
}

/// Whether a LogicalCluster is Ready, holds the purge finalizer, and its cluster has this kgate's
/// bootstrap policy: nothing for the lifecycle controller to finish.
fn is_current(obj: &Value, revision: &str) -> bool {
    obj["status"]["phase"] == PHASE_READY
        && crate::meta::finalizers(obj).iter().any(|f| f == PURGE_FINALIZER)
        && obj["metadata"]["annotations"][POLICY_ANNOTATION] == revision
}

/// Make a LogicalCluster Ready, with the purge finalizer, the defaults it was brought up to (`revision`)
/// and `usage` as its `status.usage` if given.
fn make_ready(obj: &mut Value, revision: String, usage: Option<Usage>) -> ApiResult<()> {
    obj["status"] = with_phase(obj, PHASE_READY, true, "Initialized", "the logical cluster is serving");
    if let Some(usage) = usage {
        obj["status"]["usage"] = usage.to_json();
    }
    add_finalizer(obj);
    let name = crate::meta::meta_str(obj, "name").unwrap_or_default().to_string();
    crate::meta::metadata_mut(obj)
        .entry("annotations")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| ApiError::internal(format!("LogicalCluster {name:?}: annotations are not an object")))?
        .insert(POLICY_ANNOTATION.into(), json!(revision));
    Ok(())
}

/// Record Ready on the LogicalCluster `name` with this uid (and give it the purge finalizer if it was created
/// before kgate added one, and the policy annotation), with `usage` as its `status.usage` if given. Nothing
/// when it is gone, replaced or being deleted: a DELETE that raced the bootstrap keeps its Terminating status.
async fn mark_ready(
    registry: &Registry,
    name: &str,
    uid: &str,
    mut known: Option<(Value, i64)>,
    usage: Option<Usage>,
) -> ApiResult<Option<Value>> {
    let def = resources::logical_cluster_def();
    let key = object_key(registry, name);
    for _ in 0..MAX_RETRIES {
        let (mut obj, mod_revision) = match known.take() {
            Some(known) => known,
            None => {
                let Some(kv) = registry.store.get(&key).await? else { return Ok(None) };
                (registry.decode(&def, ROOT, &kv)?, kv.mod_revision)
            }
        };
        if crate::meta::meta_str(&obj, "uid").unwrap_or_default() != uid {
            return Ok(None);
        }
        let revision = defaults_revision(registry);
        if is_current(&obj, &revision) || crate::meta::meta_str(&obj, "deletionTimestamp").is_some() {
            return Ok(Some(obj));
        }
        make_ready(&mut obj, revision, usage)?;
        match registry.store.update(&key, crate::registry::encode(&obj), mod_revision).await {
            Ok(rev) => {
                crate::registry::decorate(&mut obj, &def, ROOT, rev);
                return Ok(Some(obj));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(StoreError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(&def.plural, &def.group, name, "too many concurrent updates; try again"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_logical_cluster_is_initializing_with_one_purge_finalizer() {
        let mut obj = json!({"metadata": {"name": "a", "finalizers": ["example.com/keep", PURGE_FINALIZER]}});
        prepare_new(&mut obj);
        assert_eq!(obj["metadata"]["finalizers"], json!(["example.com/keep", PURGE_FINALIZER]));
        assert_eq!(obj["status"]["phase"], PHASE_INITIALIZING);
        assert_eq!(obj["status"]["conditions"][0]["status"], "False");
        let mut bare = json!({"metadata": {"name": "b"}});
        prepare_new(&mut bare);
        assert_eq!(bare["metadata"]["finalizers"], json!([PURGE_FINALIZER]));
    }

    #[test]
    fn terminating_flips_ready_and_keeps_other_conditions() {
        let ready = json!({"status": {"phase": "Ready", "conditions": [
            {"type": "Other", "status": "True"},
            {"type": "Ready", "status": "True", "reason": "Initialized", "lastTransitionTime": "2020-01-01T00:00:00Z"}
        ]}});
        let t = terminating_status(&ready);
        assert_eq!(t["phase"], PHASE_TERMINATING);
        assert_eq!(t["conditions"][0]["type"], "Other");
        assert_eq!(t["conditions"][1]["status"], "False");
        assert_eq!(t["conditions"][1]["reason"], "Terminating");
        assert_ne!(t["conditions"][1]["lastTransitionTime"], "2020-01-01T00:00:00Z", "the condition changed");
        // Ready again (a repeated initialization): no transition, so the time stays.
        let again = with_phase(&ready, PHASE_READY, true, "Initialized", "serving");
        assert_eq!(again["conditions"][1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    }
}
