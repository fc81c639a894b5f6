//! Logical clusters: which exist (LogicalCluster objects in root), and what a new one starts with
//! (namespaces `default`, `kube-system`, `kube-public`, each with its `default` ServiceAccount).

use std::sync::Arc;

use dashmap::DashSet;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::cluster::ROOT;
use crate::meta::now_rfc3339;
use crate::registry::Registry;
use crate::resources::{self, ResourceDef};
use crate::status::ApiResult;
use crate::storage::{keys, RangeRequest, StoreError, WatchEvent};

/// Namespaces every logical cluster starts with.
pub const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The set of existing logical clusters, kept current by one store watch.
///
/// A `DashSet` because every request reads it and only the watch task writes; one entry per cluster
/// (its name), so 100,000 clusters cost a few MiB.
#[derive(Clone)]
pub struct Directory {
    known: Arc<DashSet<String>>,
    registry: Registry,
    def: Arc<ResourceDef>,
}

impl Directory {
    /// A directory over the registry's store; call `run` to keep it current.
    pub fn new(registry: Registry) -> Self {
        Directory { known: Arc::new(DashSet::new()), registry, def: resources::logical_cluster_def() }
    }

    fn key(&self, name: &str) -> String {
        keys::object(&self.registry.prefix, self.def.storage_group(), &self.def.plural, ROOT, None, name)
    }

    /// Whether a logical cluster exists and is not being deleted. A miss is checked against the store, so
    /// a cluster is usable as soon as its create returned, before the watch reports it.
    pub async fn exists(&self, name: &str) -> ApiResult<bool> {
        if name == ROOT || self.known.contains(name) {
            return Ok(true);
        }
        // Only the watch task writes `known`: inserting here could resurrect a cluster whose delete the
        // watch has already applied.
        match self.registry.store.get(&self.key(name)).await? {
            Some(kv) => {
                let obj: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
                Ok(obj["metadata"].get("deletionTimestamp").is_none())
            }
            None => Ok(false),
        }
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
                let page =
                    self.registry.store.range(RangeRequest { prefix: prefix.clone(), ..Default::default() }).await?;
                self.known.clear();
                for kv in &page.kvs {
                    self.observe(&kv.key, Some(&kv.value));
                }
                let mut w = self.registry.store.watch(&prefix, page.revision).await?;
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
        let live = value
            .and_then(|v| serde_json::from_slice::<Value>(v).ok())
            .is_some_and(|o| o["metadata"].get("deletionTimestamp").is_none());
        if live {
            self.known.insert(name.to_string());
        } else {
            self.known.remove(name);
        }
    }
}

/// Create what a new logical cluster starts with (idempotent).
pub async fn bootstrap(registry: &Registry, cluster: &str) -> ApiResult<()> {
    for ns in INITIAL_NAMESPACES {
        let key = keys::object(&registry.prefix, "core", "namespaces", cluster, None, ns);
        let obj = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now_rfc3339(),
                          "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"}
        });
        match registry.store.create(&key, crate::registry::encode(&obj)).await {
            Ok(_) | Err(StoreError::AlreadyExists) => {}
            Err(e) => return Err(e.into()),
        }
        registry.ensure_default_service_account(cluster, ns).await?;
    }
    // kube-apiserver's bootstrap policy: cluster-admin for system:masters, admin/edit/view for
    // RoleBindings, discovery for everyone authenticated.
    for (plural, objs) in [
        ("clusterroles", crate::rbac::default_cluster_roles()),
        ("clusterrolebindings", crate::rbac::default_cluster_role_bindings()),
    ] {
        for mut obj in objs {
            let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
            let meta = crate::meta::metadata_mut(&mut obj);
            meta.entry("uid").or_insert_with(|| json!(uuid::Uuid::new_v4().to_string()));
            meta.entry("creationTimestamp").or_insert_with(|| json!(now_rfc3339()));
            let key = keys::object(&registry.prefix, "rbac.authorization.k8s.io", plural, cluster, None, &name);
            match registry.store.create(&key, crate::registry::encode(&obj)).await {
                Ok(_) | Err(StoreError::AlreadyExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// Bootstrap a just-created LogicalCluster's cluster, then record it Ready; returns the object.
pub async fn initialize(registry: &Registry, mut obj: Value) -> ApiResult<Value> {
    let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
    bootstrap(registry, &name).await?;
    let def = resources::logical_cluster_def();
    let key = keys::object(&registry.prefix, def.storage_group(), &def.plural, ROOT, None, &name);
    let Some(kv) = registry.store.get(&key).await? else { return Ok(obj) };
    let mut ready = registry.decode(&def, ROOT, &kv)?;
    ready["status"] = json!({
        "phase": "Ready",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Initialized", "message": "the logical cluster is serving", "lastTransitionTime": now_rfc3339()}]
    });
    // Losing this race to a concurrent writer only leaves the status for that writer's version.
    if let Ok(rev) = registry.store.update(&key, crate::registry::encode(&ready), kv.mod_revision).await {
        crate::registry::decorate(&mut ready, &def, ROOT, rev);
        obj = ready;
    }
    Ok(obj)
}

/// Remove every key of a deleted logical cluster in the background (never root's).
pub fn spawn_purge(registry: Registry, cluster: String) {
    if cluster == ROOT {
        return;
    }
    tokio::spawn(async move {
        if let Err(e) = purge(&registry, &cluster).await {
            tracing::warn!(error = %e, cluster = %cluster, "purging a deleted logical cluster");
        }
    });
}

/// Delete every key under a cluster, resource by resource, in batches of 500, until a whole pass finds
/// nothing (objects written concurrently by requests that raced the delete are caught by later passes).
pub async fn purge(registry: &Registry, cluster: &str) -> ApiResult<()> {
    if cluster == ROOT {
        return Ok(());
    }
    let prefixes: Vec<String> =
        resources::builtins().iter().map(|d| registry.collection(d, Some(cluster), None)).collect();
    registry.delete_prefixes(&prefixes).await
}
