//! Moving a logical cluster's objects to another shard, when the platform changes its LogicalCluster's
//! `spec.shard` (the write records where they are in `status.shard`; see `Registry::keep_location`).
//!
//! The cluster is offline while it moves: every replica's directory answers its requests 503 and ends
//! its watches once it sees the new `spec.shard`, and the move starts a grace period after that.
//! Clients come back to the new shard with resourceVersions of the old one, which lie outside the new
//! shard's range (`storage::based`) and are refused as too old: informers list again.
//!
//! Nothing acknowledged is lost, even to a write a lagging replica lets through:
//! 1. **Staging.** Every key is copied to the target under the cluster's staging prefix
//!    (`<prefix>/tenancy.kgate.dev/moves/<cluster>/...`), where no watch, list or CRD index of the
//!    cluster looks; then a marker records that staging is done. A move cut short before the marker
//!    starts over.
//! 2. **Leaving.** Each key is deleted from the source only at the revision its staged copy was made
//!    from. A key written since is staged again and deleted on the next pass; a key someone deleted
//!    is dropped from staging. Namespaces go first, so that no create lands after them (every
//!    create's transaction compares its namespace, or `kube-system`), and CRDs last, so that a pass
//!    still finds their resources' prefixes.
//! 3. **Arriving.** Staged keys become the cluster's keys on the target, then the LogicalCluster
//!    records the target as where they are, and the directory sends requests there.
//!
//! The one gap: a delete on the source by a replica that has not seen the move for the whole grace
//! period, made after its key was staged, is undone if the move is also cut short before it deletes
//! that key (the rerun cannot tell that delete from its own).

use std::time::Duration;

use serde_json::Value;

use crate::registry::Registry;
use crate::resources;
use crate::shard::Placed;
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, RangeRequest, Store, StoreError};

/// How long a move waits, after it is asked for, before it touches the source: every replica's
/// directory sees the new `spec.shard` by its watch, normally within milliseconds, and from then
/// answers the cluster 503; requests already past that check finish meanwhile.
pub const GRACE: Duration = Duration::from_secs(2);

/// Keys read per store round trip.
const PAGE: usize = 500;

/// Passes over the source before a move gives up for now (and is retried): each pass deletes what
/// the one before staged, so more than a few means something keeps writing the cluster.
const PASSES: usize = 8;

/// Where a cluster's keys wait on the shard they move to.
pub fn staging(registry: &Registry, cluster: &str) -> String {
    keys::collection(&registry.prefix, resources::TENANCY_GROUP, "moves", Some(cluster), None)
}

/// The marker that staging is whole: under the staging prefix, named as no resource's group is, and
/// after every staged key (`~` sorts after a group's letters), so that arriving takes it last.
fn marker(staged: &str) -> String {
    format!("{staged}~staged")
}

/// Move `cluster` to the shard its LogicalCluster's `spec.shard` names, if it is being moved; `root`
/// is the default shard's registry. Safe to run again after it was cut short, and returns once the
/// LogicalCluster records the cluster on its new shard (or is no longer being moved).
pub async fn relocate(root: &Registry, cluster: &str) -> ApiResult<()> {
    let Some((from, to, uid)) = endpoints(root, cluster).await? else { return Ok(()) };
    let staged = staging(&to, cluster);
    if to.store.get(&marker(&staged)).await?.is_none() {
        tokio::time::sleep(GRACE).await;
        // Staged copies from an attempt cut short before its marker: from scratch.
        drain(&*to.store, &staged, |_| async { Ok(()) }).await?;
        for prefix in prefixes(&from, cluster).await? {
            let target = &*to.store;
            each_page(&*from.store, &prefix, |kv| {
                let key = staged_key(&from, &staged, &kv.key);
                async move { put(target, &key, kv.value).await }
            })
            .await?;
        }
        put(&*to.store, &marker(&staged), b"{}".to_vec()).await?;
    }
    leave(&from, &to, cluster, &staged).await?;
    // Arriving: each staged key becomes the cluster's, then goes from staging.
    let real = |key: &str| key.strip_prefix(&staged).map(|rest| format!("{}/{rest}", to.prefix));
    drain(&*to.store, &staged, |kv: KeyValue| {
        let key = real(&kv.key).filter(|_| kv.key != marker(&staged));
        let store = to.store.clone();
        async move {
            match key {
                Some(k) => put(&*store, &k, kv.value).await,
                None => Ok(()),
            }
        }
    })
    .await?;
    arrived(root, cluster, &uid).await?;
    tracing::info!(cluster = %cluster, from = %from.shard, to = %to.shard, "logical cluster moved");
    Ok(())
}

/// The source and target registries and the uid of a cluster being moved; `None` when it is not
/// (anymore), or is being deleted.
async fn endpoints(root: &Registry, cluster: &str) -> ApiResult<Option<(Registry, Registry, String)>> {
    let Some((kv, true)) = root.logical_cluster(cluster).await? else { return Ok(None) };
    let lc: Value = serde_json::from_slice(&kv.value).map_err(|e| ApiError::internal(e.to_string()))?;
    let Some(to) = crate::shard::moving_to(&lc) else { return Ok(None) };
    let index = |name: &str| root.shards.names().iter().position(|n| &**n == name);
    let (Placed::At(from), Some(to)) = (root.shards.place_of(&lc), index(to)) else {
        return Err(super::unserved(to));
    };
    let uid = crate::meta::meta_str(&lc, "uid").unwrap_or_default().to_string();
    Ok(Some((root.shards.registry(from, root), root.shards.registry(to, root), uid)))
}

/// The cluster's prefixes on `from`, in the order they are left: namespaces first, custom resources,
/// the other built-in resources, CRDs last.
async fn prefixes(from: &Registry, cluster: &str) -> ApiResult<Vec<String>> {
    let builtins = super::lifecycle::builtin_prefixes(from, cluster);
    let is = |p: &str, plural: &str| p.ends_with(&format!("/{plural}/{cluster}/"));
    let (mut first, mut last) = (Vec::new(), Vec::new());
    let mut middle = crate::crd::custom_prefixes(from, cluster, None).await?;
    for p in builtins {
        if is(&p, "namespaces") && p.contains("/core/") {
            first.push(p);
        } else if is(&p, "customresourcedefinitions") {
            last.push(p);
        } else {
            middle.push(p);
        }
    }
    first.append(&mut middle);
    first.append(&mut last);
    Ok(first)
}

/// Delete every key of the cluster from `from`, each at the revision of its staged copy, re-staging
/// what changed, until a pass finds none.
async fn leave(from: &Registry, to: &Registry, cluster: &str, staged: &str) -> ApiResult<()> {
    for _ in 0..PASSES {
        let mut found = false;
        for prefix in prefixes(from, cluster).await? {
            let (source, target) = (&*from.store, &*to.store);
            each_page(source, &prefix, |kv| {
                found = true;
                let key = staged_key(from, staged, &kv.key);
                async move {
                    let copy = target.get(&key).await?;
                    if copy.as_ref().map(|c| &c.value) != Some(&kv.value) {
                        put(target, &key, kv.value.clone()).await?;
                    }
                    match source.delete(&kv.key, Some(kv.mod_revision)).await {
                        // Changed since it was read: staged again on the next pass.
                        Ok(_) | Err(StoreError::Conflict { current: Some(_) }) => Ok(()),
                        // Deleted by someone else: not to arrive.
                        Err(StoreError::NotFound | StoreError::Conflict { current: None }) => {
                            remove(target, &key).await
                        }
                        Err(e) => Err(e.into()),
                    }
                }
            })
            .await?;
        }
        if !found {
            return Ok(());
        }
    }
    Err(ApiError::internal(format!(
        "logical cluster {cluster:?}: its objects were still being written on the shard it leaves"
    )))
}

/// Record the cluster on its new shard: `status.shard` goes, so `spec.shard` says where it is.
async fn arrived(root: &Registry, cluster: &str, uid: &str) -> ApiResult<()> {
    loop {
        let Some((kv, _)) = root.logical_cluster(cluster).await? else { return Ok(()) };
        let mut lc: Value = serde_json::from_slice(&kv.value).map_err(|e| ApiError::internal(e.to_string()))?;
        if crate::meta::meta_str(&lc, "uid") != Some(uid) || crate::shard::moving_to(&lc).is_none() {
            return Ok(());
        }
        lc["status"].as_object_mut().map(|s| s.remove("shard"));
        match root.store.update(&kv.key, crate::registry::encode(&lc), kv.mod_revision).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `key` of `from`'s under the staging prefix `staged`.
fn staged_key(from: &Registry, staged: &str, key: &str) -> String {
    let rest = key.strip_prefix(&from.prefix).unwrap_or(key).trim_start_matches('/');
    format!("{staged}{rest}")
}

/// Write `value` at `key`, whether or not it is there.
async fn put(store: &dyn Store, key: &str, value: Vec<u8>) -> ApiResult<()> {
    loop {
        let done = match store.get(key).await? {
            Some(kv) if kv.value == value => return Ok(()),
            Some(kv) => store.update(key, value.clone(), kv.mod_revision).await.map(drop),
            None => store.create(key, value.clone()).await.map(drop),
        };
        match done {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Delete `key` if it is there.
async fn remove(store: &dyn Store, key: &str) -> ApiResult<()> {
    match store.delete(key, None).await {
        Ok(_) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Hand every key under `prefix` to `each`, a page at a time, each page as the store has it then.
async fn each_page<F, Fut>(store: &dyn Store, prefix: &str, mut each: F) -> ApiResult<()>
where
    F: FnMut(KeyValue) -> Fut,
    Fut: std::future::Future<Output = ApiResult<()>>,
{
    let mut start = None;
    loop {
        let req = RangeRequest { prefix: prefix.to_string(), start: start.take(), limit: PAGE, revision: None };
        let page = store.range(req).await?;
        start = page.next_start();
        for kv in page.kvs {
            each(kv).await?;
        }
        if start.is_none() {
            return Ok(());
        }
    }
}

/// Hand every key under `prefix` to `each`, then delete it (at the revision handed over).
async fn drain<F, Fut>(store: &dyn Store, prefix: &str, mut each: F) -> ApiResult<()>
where
    F: FnMut(KeyValue) -> Fut,
    Fut: std::future::Future<Output = ApiResult<()>>,
{
    each_page(store, prefix, |kv| {
        let (key, rev) = (kv.key.clone(), kv.mod_revision);
        let done = each(kv);
        async move {
            done.await?;
            match store.delete(&key, Some(rev)).await {
                Ok(_) | Err(StoreError::NotFound | StoreError::Conflict { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
}
