//! Authorization: `system:masters` may do anything; everyone else is judged by Kubernetes RBAC of the
//! logical cluster the request targets, from an index built once per cluster and cached.
//!
//! The cache (read on every request, written on misses and invalidations) holds at most about
//! `CAPACITY` clusters. It is sharded, each shard's lock held only for a lookup or an insert, so
//! requests for different clusters rarely meet; when full it evicts by S3-FIFO, so a tenant reaching
//! many clusters once does not push out the indexes that busy clusters use on every request. One store
//! watch per RBAC type, across every cluster, drops a cluster's entry when any of its RBAC objects
//! changes, so writes through other replicas count too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;

use crate::auth::{forbidden_message, Attributes, Identity};
use crate::rbac::{RbacIndex, Request, User};
use crate::registry::Registry;
use crate::resources;
use crate::status::ApiResult;
use crate::storage::{RangeRequest, WatchEvent};

/// Most clusters whose RBAC index is cached at once.
const CAPACITY: usize = 10_000;
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const RBAC_TYPES: [&str; 4] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

/// Decides requests.
pub struct Authorizer {
    registry: Registry,
    cache: quick_cache::sync::Cache<String, Arc<RbacIndex>>,
    /// Bumped on every invalidation; an index built across a bump is not cached (it may be stale).
    epoch: AtomicU64,
}

impl Authorizer {
    /// An authorizer over the registry's store; run `watch_invalidations` beside it.
    pub fn new(registry: Registry) -> Self {
        Authorizer { registry, cache: quick_cache::sync::Cache::new(CAPACITY), epoch: AtomicU64::new(0) }
    }

    /// Allow or refuse (with kube-apiserver's forbidden message).
    pub async fn authorize(
        &self,
        who: &Identity,
        cluster: &str,
        attrs: &Attributes<'_>,
    ) -> ApiResult<Result<(), String>> {
        if who.is_master() {
            return Ok(Ok(()));
        }
        let index = self.index(cluster).await?;
        let req = Request::Resource {
            verb: attrs.verb,
            group: attrs.group,
            resource: attrs.resource,
            subresource: attrs.subresource,
            namespace: attrs.namespace,
            name: attrs.name,
        };
        Ok(if index.allows(&user(who), &req) { Ok(()) } else { Err(forbidden_message(who, attrs)) })
    }

    /// Non-resource requests (`/metrics`, ...).
    pub async fn authorize_path(&self, who: &Identity, cluster: &str, verb: &str, path: &str) -> ApiResult<bool> {
        if who.is_master() {
            return Ok(true);
        }
        Ok(self.index(cluster).await?.allows(&user(who), &Request::NonResource { verb, path }))
    }

    /// The rules a SelfSubjectRulesReview reports.
    pub async fn rules_for(
        &self,
        who: &Identity,
        cluster: &str,
        namespace: &str,
    ) -> ApiResult<(Vec<Value>, Vec<Value>)> {
        if who.is_master() {
            return Ok((
                vec![serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                vec![serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
            ));
        }
        Ok(self.index(cluster).await?.rules_for(&user(who), namespace))
    }

    /// Forget a cluster's index (after a write to its RBAC objects).
    pub fn invalidate(&self, cluster: &str) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.cache.remove(cluster);
    }

    async fn index(&self, cluster: &str) -> ApiResult<Arc<RbacIndex>> {
        if let Some(hit) = self.cache.get(cluster) {
            return Ok(hit);
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(4);
        for plural in RBAC_TYPES {
            let def = resources::find(RBAC_GROUP, "v1", plural).expect("RBAC types are built in");
            let prefix = self.registry.collection(&def, Some(cluster), None);
            let page = self.registry.store.range(RangeRequest { prefix, ..Default::default() }).await?;
            let objs = page.kvs.iter().filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok()).collect();
            lists.push(objs);
        }
        let index = Arc::new(RbacIndex::build(&lists[0], &lists[1], &lists[2], &lists[3]));
        if self.epoch.load(Ordering::Acquire) == epoch {
            self.cache.insert(cluster.to_string(), index.clone());
        }
        Ok(index)
    }

    /// Watch every cluster's RBAC objects and drop the index of a cluster whose RBAC changed.
    pub async fn watch_invalidations(self: Arc<Self>) {
        // Futures in this one task, not spawned tasks: aborting this task at shutdown must end them all
        // (spawned ones would outlive it and keep the store open).
        let mut tasks = Vec::new();
        for plural in RBAC_TYPES {
            let this = self.clone();
            tasks.push(async move {
                let def = resources::find(RBAC_GROUP, "v1", plural).expect("RBAC types are built in");
                let prefix = this.registry.collection(&def, None, None);
                loop {
                    let start = match this.registry.store.revision().await {
                        Ok(r) => r,
                        Err(_) => {
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                            continue;
                        }
                    };
                    // Anything may have changed while the watch was down.
                    this.epoch.fetch_add(1, Ordering::AcqRel);
                    this.cache.clear();
                    let Ok(mut w) = this.registry.store.watch(&prefix, start).await else { continue };
                    while let Some(Ok(ev)) = w.next().await {
                        let key = match &ev {
                            WatchEvent::Put { kv, .. } => kv.key.clone(),
                            WatchEvent::Delete { key, .. } => key.clone(),
                            WatchEvent::Progress(_) => continue,
                        };
                        if let Some(c) = this.registry.cluster_of(&def, &key) {
                            this.invalidate(c);
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            });
        }
        futures::future::join_all(tasks).await;
    }
}

fn user(who: &Identity) -> User {
    User { name: who.user.clone(), groups: who.groups.clone() }
}
