//! The generic registry: every verb on every resource, over unstructured objects and one `Store`.
//!
//! It owns the rules kube-apiserver's generic registry applies (server-set metadata, resourceVersion
//! preconditions, status and scale subresources, finalizers, dry run) so handlers only translate HTTP.

mod convert;
mod defaults;
mod eviction;
mod follow;
pub mod footprint;
pub(crate) mod gates;
mod namespaces;
mod options;
pub mod propagation;
mod publish;
mod qos;
mod quantity;
mod quota;
mod read;
mod services;
mod validation;
pub use gates::drop_disabled;
pub use validation::{errors as kind_errors, status_errors, update_errors};
mod write;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use convert::{converts, from_storage, stored_def, to_storage};
pub use options::{ClusterFilter, DeleteOptions, FieldValidation, ListOptions, Propagation, RvMatch, WriteOptions};
pub use read::{check_fields, custom_field, matches, reads_custom_fields, selectable, ListResult};
pub(crate) use read::{decode_continue, encode_continue};
pub use write::{scale_of, Finalizers, Sweep, FIELD_SUBRESOURCES};

use crate::auth::Identity;
use crate::cluster::CLUSTER_ANNOTATION;
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, Store};

/// The registry over one store.
#[derive(Clone)]
pub struct Registry {
    /// The store every object lives in.
    pub store: Arc<dyn Store>,
    /// The key prefix (`/registry`).
    pub prefix: String,
    /// Namespaces seen active, shared by the clones of one registry.
    namespaces: Arc<namespaces::ActiveNamespaces>,
    /// Set when the server stops: background work that waits (a namespace held by finalizers) ends
    /// rather than keep the store open. A watch channel, so a waiter that subscribes late still sees it.
    closing: Arc<tokio::sync::watch::Sender<bool>>,
    /// `cluster/namespace` of each namespace cleanup running here. A held namespace's cleanup waits as
    /// long as its finalizers do, and people repeat `kubectl delete ns` on a namespace that hangs; each
    /// repeat must not add a task that sweeps every prefix again. One entry per terminating namespace,
    /// gone when its task ends.
    cleaning: Claims,
    /// Turns at the pages of namespace cleanups' sweeps, shared by every clone: a tenant that deletes
    /// a hundred thousand namespaces at once sweeps a few pages at a time, no more than half of them.
    sweeps: Arc<crate::turns::Turns>,
    /// The namespaces holding ResourceQuotas, shared by the clones of one registry (see `quota`).
    quota_index: Arc<quota::QuotaIndex>,
    /// What the server publishes into every cluster (its CA, its address), when it is serving; `None`
    /// for a registry used without a server (tools, tests).
    pub published: Option<Arc<Published>>,
    /// What each cluster holds and the limits set on it, shared by the clones of one registry (see
    /// `footprint`); counted only while `run_counts` runs with accounting on.
    pub footprint: Arc<footprint::Footprint>,
    /// The shard this registry's store is (see `shard`): `default` holds root.
    pub shard: Arc<str>,
    /// Every shard, on the default shard's registry, which places new logical clusters on them and
    /// bootstraps and purges each on its own; another shard's registry knows none (it would hold
    /// itself).
    pub shards: Arc<crate::shard::Shards>,
    /// The clusters being moved between shards, shared by every shard's registry (the default
    /// shard's directory keeps it): their watches end rather than send what the move does.
    pub moves: Arc<crate::shard::Moves>,
}

/// The name of the ConfigMap with the server's CA in every namespace, as kube publishes it.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// What a serving kgate tells every logical cluster about itself, as kube-apiserver and
/// kube-controller-manager do: the CA clients verify it with (`kube-root-ca.crt`) and the address
/// behind the `default/kubernetes` Service.
#[derive(Debug, Clone)]
pub struct Published {
    /// PEM of the CA that signs the serving certificate.
    pub ca_pem: String,
    /// The address clients reach the server at.
    pub ip: std::net::IpAddr,
    /// Its port.
    pub port: u16,
}

/// Keys of background tasks that must run once at a time each (a namespace's cleanup, a CRD's): a
/// request to start one that is running is dropped, since the running one carries on. A DashSet: any
/// task claims and releases, one key at a time.
#[derive(Clone, Default)]
pub struct Claims(Arc<dashmap::DashSet<String>>);

impl Claims {
    /// Claim `key`; `None` if its task is running already.
    pub fn claim(&self, key: String) -> Option<Claim> {
        self.0.insert(key.clone()).then(|| Claim(self.0.clone(), key))
    }

    /// Whether no task is running.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A running task's claim, released however the task ends (an error, a panic), so a later request
/// can start it again.
pub struct Claim(Arc<dashmap::DashSet<String>>, String);

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.remove(&self.1);
    }
}

/// Who acts on what: one resource type in one cluster (and namespace).
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// Logical cluster.
    pub cluster: &'a str,
    /// Resource type.
    pub def: &'a ResourceDef,
    /// Namespace from the path (namespaced resources only).
    pub namespace: Option<&'a str>,
    /// The caller.
    pub user: &'a Identity,
    /// The caller's User-Agent, for the default field manager.
    pub user_agent: Option<&'a str>,
    /// A check the object a create, update or patch would store must pass, run before it is validated
    /// (where kube-apiserver's RBAC storage prevents escalation).
    pub admit: Option<&'a dyn Admit>,
}

/// A check of what a write would store, given what it replaces (`None` for a create).
pub trait Admit: Send + Sync + std::fmt::Debug {
    /// `Ok` to go on, or the error to answer.
    fn admit(&self, old: Option<&Value>, new: &Value) -> ApiResult<()>;
}

/// Checks run one after the other, in order; the first refusal is the answer.
#[derive(Debug, Default)]
pub struct Admits<'a>(pub Vec<&'a dyn Admit>);

impl Admit for Admits<'_> {
    fn admit(&self, old: Option<&Value>, new: &Value) -> ApiResult<()> {
        self.0.iter().try_for_each(|a| a.admit(old, new))
    }
}

/// A successful write's answer.
#[derive(Debug, Clone)]
pub struct Written {
    /// HTTP code (200 or 201).
    pub code: u16,
    /// The object (or a Status for immediate deletes).
    pub body: Value,
    /// `Warning` headers to send.
    pub warnings: Vec<String>,
}

/// Pages of namespace cleanup sweeps at once (a page is one store read and its deletes), as kube's
/// namespace controller runs ten workers for a whole cluster.
const NAMESPACE_SWEEPS: usize = 8;

impl Registry {
    /// A registry over `store`, with every key under `prefix`.
    pub fn new(store: Arc<dyn Store>, prefix: impl Into<String>) -> Self {
        let closing = Arc::new(tokio::sync::watch::Sender::new(false));
        Registry {
            store,
            prefix: prefix.into(),
            namespaces: Default::default(),
            closing,
            cleaning: Default::default(),
            sweeps: Arc::new(crate::turns::Turns::new(NAMESPACE_SWEEPS)),
            quota_index: Default::default(),
            published: None,
            footprint: Default::default(),
            shard: Arc::from(crate::shard::DEFAULT),
            shards: crate::shard::Shards::single(),
            moves: Default::default(),
        }
    }

    /// This registry as the store of shard `name`, which is not the default one.
    pub fn on_shard(mut self, name: &str) -> Self {
        self.shard = Arc::from(name);
        self
    }

    /// This registry, sharing the record of clusters being moved with every other shard's.
    pub fn with_moves(mut self, moves: Arc<crate::shard::Moves>) -> Self {
        self.moves = moves;
        self
    }

    /// This registry, the default shard's, placing logical clusters on `shards`.
    pub fn with_shards(mut self, shards: Arc<crate::shard::Shards>) -> Self {
        self.shards = shards;
        self
    }

    /// Whether this registry's store holds root (and every LogicalCluster): the default shard's.
    pub fn holds_root(&self) -> bool {
        &*self.shard == crate::shard::DEFAULT
    }

    /// This registry, publishing `facts` into the clusters it creates objects in.
    pub fn publishing(mut self, facts: Published) -> Self {
        self.published = Some(Arc::new(facts));
        self
    }

    /// Stop background work that waits (see `closing`); the server calls this as it shuts down.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Key of one object in the context's cluster and namespace.
    pub fn key(&self, ctx: &Ctx, name: &str) -> String {
        let ns = if ctx.def.namespaced { ctx.namespace } else { None };
        keys::object(&self.prefix, ctx.def.storage_group(), &ctx.def.plural, ctx.cluster, ns, name)
    }

    /// Prefix of a collection; `cluster = None` is every cluster.
    pub fn collection(&self, def: &ResourceDef, cluster: Option<&str>, namespace: Option<&str>) -> String {
        let ns = if def.namespaced { namespace } else { None };
        keys::collection(&self.prefix, def.storage_group(), &def.plural, cluster, ns)
    }

    /// Turn a stored value into the object clients see: resourceVersion from the store revision, the
    /// cluster annotation from the key.
    pub fn decode(&self, def: &ResourceDef, cluster: &str, kv: &KeyValue) -> ApiResult<Value> {
        let mut obj: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("corrupt object at {}: {e}", kv.key)))?;
        if !obj.is_object() {
            return Err(ApiError::internal(format!("corrupt object at {}", kv.key)));
        }
        convert::from_storage(def, &mut obj);
        decorate(&mut obj, def, cluster, kv.mod_revision);
        Ok(obj)
    }

    /// The cluster a key under `def`'s wildcard prefix belongs to.
    pub fn cluster_of<'k>(&self, def: &ResourceDef, key: &'k str) -> Option<&'k str> {
        let prefix = self.collection(def, None, None);
        keys::parse(&prefix, key, def.namespaced).map(|k| k.cluster)
    }
}

/// Where older kgates kept what is now stored under another type's keys (events.k8s.io Events, kept
/// as core Events since): swept with a cluster or namespace, so nothing an older kgate wrote outlives it.
pub fn legacy_prefixes(registry: &Registry, cluster: &str, namespace: Option<&str>) -> Vec<String> {
    vec![keys::collection(&registry.prefix, "events.k8s.io", "events", Some(cluster), namespace)]
}

/// Set apiVersion, kind, resourceVersion and the cluster annotation on an object read from the store.
pub fn decorate(obj: &mut Value, def: &ResourceDef, cluster: &str, revision: i64) {
    // A write's answer reads as the stored object reads (a v1 autoscaler's implied target shown).
    convert::round_trip(def, obj);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(def.api_version()));
        m.insert("kind".into(), Value::String(def.kind.clone()));
    }
    let meta = crate::meta::metadata_mut(obj);
    meta.insert("resourceVersion".into(), Value::String(revision.to_string()));
    let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    if !ann.is_object() {
        *ann = Value::Object(Map::new());
    }
    if let Some(a) = ann.as_object_mut() {
        a.insert(CLUSTER_ANNOTATION.into(), Value::String(cluster.to_string()));
    }
}

/// The bytes to store: no resourceVersion and no cluster annotation (both are derived on read). Only
/// the metadata is copied to leave those out: the rest is written from the object as it is.
pub fn encode(obj: &Value) -> Vec<u8> {
    /// An object written with another metadata in its place.
    struct Stored<'a>(&'a Map<String, Value>, Option<&'a Value>);
    impl serde::Serialize for Stored<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut m = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in self.0 {
                match (k.as_str(), self.1) {
                    ("metadata", Some(meta)) => m.serialize_entry(k, meta)?,
                    _ => m.serialize_entry(k, v)?,
                }
            }
            m.end()
        }
    }
    let Some(map) = obj.as_object() else {
        return serde_json::to_vec(obj).expect("JSON values always serialise");
    };
    let meta = map.get("metadata").map(|m| {
        let mut holder = Value::Object(Map::from_iter([("metadata".to_string(), m.clone())]));
        strip_derived(&mut holder);
        holder["metadata"].take()
    });
    serde_json::to_vec(&Stored(map, meta.as_ref())).expect("JSON values always serialise")
}

/// The bytes to store for an object of `def`'s version: `encode` of its storage form. Fails when the
/// object cannot be converted to it (see `convert::to_storage`).
pub fn encode_for(def: &ResourceDef, obj: &Value) -> ApiResult<Vec<u8>> {
    if !convert::converts(def) {
        return Ok(encode(obj));
    }
    let mut stored = obj.clone();
    convert::to_storage(def, &mut stored)?;
    Ok(encode(&stored))
}

/// Remove what `decorate` adds.
pub fn strip_derived(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        let empty = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
            Some(a) => {
                a.remove(CLUSTER_ANNOTATION);
                a.is_empty()
            }
            None => false,
        };
        if empty {
            meta.remove("annotations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cluster_annotation_is_never_stored() {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let mut obj = json!({"metadata":{"name":"x","annotations":{"kgate.dev/cluster":"evil"}}});
        let stored: Value = serde_json::from_slice(&encode(&obj)).unwrap();
        assert!(stored["metadata"].get("annotations").is_none());
        decorate(&mut obj, &def, "team-a", 7);
        assert_eq!(obj["metadata"]["annotations"][CLUSTER_ANNOTATION], "team-a");
        assert_eq!(obj["metadata"]["resourceVersion"], "7");
        assert_eq!(obj["kind"], "ConfigMap");
    }
}
