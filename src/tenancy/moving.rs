//! Moving a logical cluster's objects to another shard, when the platform changes its LogicalCluster's
//! `spec.shard` (the write records where they are in `status.shard`; see `Registry::keep_location`).
//!
//! The cluster is offline while it moves: every replica's directory answers its requests 503 and ends
//! its watches once it sees the new `spec.shard`, and the move starts a grace period after that.
//! Clients come back to the new shard with resourceVersions of the old one, which lie outside the new
//! shard's range (`storage::based`) and are refused as too old: informers list again.
//!
//! Nothing acknowledged is lost or brought back, even by a write a lagging replica lets through,
//! and a move cut short at any point finishes when it runs again (the controller retries it):
//! 1. **Staging.** Every key is copied to the target under the cluster's staging prefix
//!    (`<prefix>/tenancy.kgate.dev/moves/<cluster>/...`), where no watch, list or CRD index of the
//!    cluster looks; then a marker records that staging is done. A move cut short before the marker
//!    starts over.
//! 2. **Leaving, a batch at a time.** A batch's keys are deleted from the source in one transaction,
//!    each at the revision staged, together with a ticket made on the source for the batch, whose
//!    keys a record on the target lists. A ticket gone thus proves its batch was deleted by the move,
//!    not by someone else, and its keys are brought in (the staged copy becomes the cluster's key).
//!    A batch that fails changes nothing: a key written since is staged again by the next pass.
//!    Namespaces go first, so that no create lands after them (every create's transaction compares
//!    its namespace, or `kube-system`), and CRDs last, so that a pass still finds their resources.
//! 3. **The rest.** A staged copy no batch brought in was deleted on the source by someone else: it
//!    is dropped. Then the LogicalCluster records the target as where the objects are, and the
//!    directory sends requests there.

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

/// Keys deleted from the source per transaction, with their batch's ticket: under etcd's default
/// `--max-txn-ops` (128).
pub(crate) const BATCH: usize = 100;

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
    let move_ = Move { root, uid: &uid, from: &from, to: &to, cluster, staged: &staged };
    if to.store.get(&marker(&staged)).await?.is_none() {
        tokio::time::sleep(GRACE).await;
        // Staged copies from an attempt cut short before its marker: from scratch.
        clear(&*to.store, &staged).await?;
        for prefix in prefixes(&from, &to, cluster).await? {
            let (target, move_) = (&*to.store, &move_);
            let staging = each_page(&*from.store, &prefix, BATCH, |page| {
                let copies: Vec<(String, Vec<u8>)> =
                    page.into_iter().map(|kv| (staged_key(&from, &staged, &kv.key), kv.value)).collect();
                async move {
                    move_.check().await?;
                    put_all(target, copies).await
                }
            })
            .await;
            match staging {
                // An object too large for the target under its staging key (longer than its own by
                // the staging prefix) cannot move, however often the move is tried: nothing has left
                // the source yet, so the move is given up and the cluster serves where it is.
                Err(e) if e.code == 413 => {
                    clear(&*to.store, &staged).await?;
                    return abandon(root, cluster, &uid, &e.message).await;
                }
                done => done?,
            }
        }
        put(&*to.store, &marker(&staged), b"{}".to_vec()).await?;
    }
    move_.settle().await?;
    move_.leave().await?;
    // What is still staged was deleted on the source by someone else after it was staged: it stays
    // deleted. The marker sorts last, so it goes last.
    move_.check().await?;
    clear(&*to.store, &staged).await?;
    arrived(root, cluster, &uid).await?;
    resume_namespace_deletions(&to, cluster).await?;
    tracing::info!(cluster = %cluster, from = %from.shard, to = %to.shard, "logical cluster moved");
    Ok(())
}

/// Give up a move before anything left the source: `spec.shard` back to where the objects are,
/// `status.shard` gone, and a `ShardMove` condition saying why.
async fn abandon(root: &Registry, cluster: &str, uid: &str, why: &str) -> ApiResult<()> {
    tracing::warn!(cluster = %cluster, reason = %why, "a logical cluster cannot move to another shard; it stays");
    loop {
        let Some((kv, _)) = root.logical_cluster(cluster).await? else { return Ok(()) };
        let mut lc: Value = serde_json::from_slice(&kv.value).map_err(|e| ApiError::internal(e.to_string()))?;
        if crate::meta::meta_str(&lc, "uid") != Some(uid) || crate::shard::moving_to(&lc).is_none() {
            return Ok(());
        }
        let at = crate::shard::of(&lc).unwrap_or(crate::shard::DEFAULT).to_string();
        lc["spec"]["shard"] = Value::String(at);
        lc["status"].as_object_mut().map(|s| s.remove("shard"));
        let mut conditions: Vec<Value> = lc["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.retain(|c| c["type"] != "ShardMove");
        conditions.push(serde_json::json!({"type": "ShardMove", "status": "False", "reason": "ObjectTooLarge",
            "message": format!("the move was given up: {why}"), "lastTransitionTime": crate::meta::now_rfc3339()}));
        lc["status"]["conditions"] = Value::Array(conditions);
        match root.store.update(&kv.key, crate::registry::encode(&lc), kv.mod_revision).await {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Namespaces that were being deleted when they moved: their emptying ran against the shard they
/// left, and goes on against the one they are on now.
async fn resume_namespace_deletions(to: &Registry, cluster: &str) -> ApiResult<()> {
    let def = resources::find("", "v1", "namespaces").expect("built in");
    let (prefix, def) = (to.collection(&def, Some(cluster), None), &def);
    each_page(&*to.store, &prefix, PAGE, |page| async move {
        for kv in page {
            let Ok(obj) = to.decode(def, cluster, &kv) else { continue };
            if obj["metadata"].get("deletionTimestamp").is_some() {
                let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
                to.spawn_namespace_cleanup(cluster.to_string(), name);
            }
        }
        Ok(())
    })
    .await
}

/// Whether `cluster` is (still) asked to move: live, with a `spec.shard` other than where it is.
/// A store that does not answer says nothing: the move is tried again.
pub async fn is_moving(root: &Registry, cluster: &str) -> bool {
    !matches!(endpoints(root, cluster).await, Ok(None))
}

/// The source and target registries and the uid of a cluster being moved; `None` when it is not
/// (anymore), or is being deleted.
async fn endpoints(root: &Registry, cluster: &str) -> ApiResult<Option<(Registry, Registry, String)>> {
    let Some((kv, true)) = root.logical_cluster(cluster).await? else { return Ok(None) };
    let lc: Value = serde_json::from_slice(&kv.value).map_err(|e| ApiError::internal(e.to_string()))?;
    let Some(to) = crate::shard::moving_to(&lc) else { return Ok(None) };
    let (Placed::At(from), Some(to)) = (root.shards.place_of(&lc), root.shards.index(to)) else {
        return Err(super::unserved(to));
    };
    let uid = crate::meta::meta_str(&lc, "uid").unwrap_or_default().to_string();
    Ok(Some((root.shards.registry(from, root), root.shards.registry(to, root), uid)))
}

/// The cluster's prefixes on `from`, in the order they are left: namespaces first, custom resources,
/// the other built-in resources, CRDs last.
async fn prefixes(from: &Registry, to: &Registry, cluster: &str) -> ApiResult<Vec<String>> {
    let builtins = super::lifecycle::builtin_prefixes(from, cluster);
    let is = |p: &str, plural: &str| p.ends_with(&format!("/{plural}/{cluster}/"));
    let (mut first, mut last) = (Vec::new(), Vec::new());
    let mut middle = custom_prefixes(&[from, to], cluster).await?;
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

/// The prefixes of every custom resource `cluster` defines on any of `shards`, its CRDs there or
/// staged there by a move: mid-move, a shard may hold custom resources whose CRD is on the other.
pub(super) async fn custom_prefixes(shards: &[&Registry], cluster: &str) -> ApiResult<Vec<String>> {
    let mut found = std::collections::BTreeSet::new();
    for shard in shards {
        found.extend(crate::crd::custom_prefixes(shard, cluster, None).await?);
        let staged = staged_key(shard, &staging(shard, cluster), &crate::crd::definitions(shard, cluster));
        each_page(&*shard.store, &staged, PAGE, |page| {
            found.extend(crate::crd::prefixes_defined(shard, cluster, None, &page).collect::<Vec<_>>());
            async { Ok(()) }
        })
        .await?;
    }
    Ok(found.into_iter().collect())
}

/// One move's shards and staging prefix.
struct Move<'a> {
    root: &'a Registry,
    /// The LogicalCluster's uid: a cluster deleted and made again under its name is another.
    uid: &'a str,
    from: &'a Registry,
    to: &'a Registry,
    cluster: &'a str,
    /// The staging prefix on `to`.
    staged: &'a str,
}

impl Move<'_> {
    /// The ticket of batch `n` on the source: deleted in the same transaction as the batch's keys,
    /// so that its absence proves the move deleted them (and not someone else).
    fn ticket(&self, n: u64) -> String {
        format!("{}~ticket-{n:016x}", staging(self.from, self.cluster))
    }

    /// The record of batch `n` on the target: the source keys it deletes.
    fn batch(&self, n: u64) -> String {
        format!("{}~batch-{n:016x}", self.staged)
    }

    /// Delete every key of the cluster from the source, a batch at a time, each batch's keys only at
    /// the revisions staged and in one transaction with the batch's ticket; then bring them in.
    /// Until a pass finds none.
    async fn leave(&self) -> ApiResult<()> {
        // `kube-system` first of all: every cluster-wide create, namespaces included, compares it, so
        // from then on a replica that has not seen the move can make no namespace the move already
        // took (nor anything else outside a namespace).
        let ns = resources::find("", "v1", "namespaces").expect("built in");
        let kube_system =
            keys::object(&self.from.prefix, ns.storage_group(), &ns.plural, self.cluster, None, "kube-system");
        if let Some(kv) = read_each(&*self.from.store, std::slice::from_ref(&kube_system)).await?.pop().flatten() {
            self.delete_batch(vec![kv]).await?;
        }
        // One list for every pass: a pass moves the CRDs last, and a custom resource whose batch
        // failed must still be found by the next.
        let all = prefixes(self.from, self.to, self.cluster).await?;
        for _ in 0..PASSES {
            let mut found = false;
            for prefix in all.iter() {
                each_page(&*self.from.store, prefix, BATCH, |page| {
                    found = true;
                    self.delete_batch(page)
                })
                .await?;
            }
            if !found {
                return Ok(());
            }
        }
        let cluster = self.cluster;
        Err(ApiError::internal(format!(
            "logical cluster {cluster:?}: its objects were still being written on the shard it leaves"
        )))
    }

    /// Fails when the LogicalCluster is no longer live, the same one, and moving to this move's
    /// target: a cluster deleted meanwhile is its purge's (on both shards, once this move's task has
    /// ended), so the move stops before its next write.
    async fn check(&self) -> ApiResult<()> {
        let Some((kv, true)) = self.root.logical_cluster(self.cluster).await? else { return Err(self.stopped()) };
        let lc: Value = serde_json::from_slice(&kv.value).map_err(|e| ApiError::internal(e.to_string()))?;
        if crate::meta::meta_str(&lc, "uid") == Some(self.uid) && crate::shard::moving_to(&lc) == Some(&*self.to.shard)
        {
            Ok(())
        } else {
            Err(self.stopped())
        }
    }

    fn stopped(&self) -> ApiError {
        let why = "the logical cluster is no longer being moved";
        ApiError::conflict("logicalclusters", crate::resources::TENANCY_GROUP, self.cluster, why)
    }

    async fn delete_batch(&self, page: Vec<KeyValue>) -> ApiResult<()> {
        self.check().await?;
        let (source, target) = (&*self.from.store, &*self.to.store);
        // The staged copies, in one round trip; any that differs from the source is staged again.
        let staged: Vec<String> = page.iter().map(|kv| staged_key(self.from, self.staged, &kv.key)).collect();
        let mut copies = read_each(target, &staged).await?;
        for ((kv, key), copy) in page.iter().zip(&staged).zip(copies.iter_mut()) {
            if copy.as_ref().map(|c| &c.value) != Some(&kv.value) {
                *copy = Some(KeyValue {
                    key: key.clone(),
                    value: kv.value.clone(),
                    mod_revision: put(target, key, kv.value.clone()).await?,
                });
            }
        }
        let n: u64 = rand::random();
        let keys: Vec<&str> = page.iter().map(|kv| kv.key.as_str()).collect();
        // Ticket first, then the record naming it: a record's ticket was made, so one gone was deleted.
        let ticket_rev = source.create(&self.ticket(n), b"{}".to_vec()).await?;
        target.create(&self.batch(n), serde_json::to_vec(&keys).expect("strings")).await?;
        let mut items: Vec<(String, i64)> = page.iter().map(|kv| (kv.key.clone(), kv.mod_revision)).collect();
        items.push((self.ticket(n), ticket_rev));
        if source.delete_all(&items).await? {
            // Deleted as staged: the staged values are the source's, brought in at once.
            put_all(target, page.into_iter().map(|kv| (kv.key, kv.value)).collect()).await?;
            let staged: Vec<(String, i64)> = copies.into_iter().flatten().map(|c| (c.key, c.mod_revision)).collect();
            if !target.delete_all(&staged).await? {
                for (key, _) in &staged {
                    remove(target, key).await?;
                }
            }
            return remove(target, &self.batch(n)).await;
        }
        // A key changed or went since it was read: none went. A changed one is staged again by the
        // next pass; one someone deleted has its staged copy dropped (at the end, with the rest).
        remove(source, &self.ticket(n)).await?;
        remove(target, &self.batch(n)).await
    }

    /// Bring in the keys of batch `n`, which the move deleted from the source: each staged copy
    /// becomes the cluster's key on the target; then the batch's record goes.
    async fn arrive(&self, n: u64, keys: &[&str]) -> ApiResult<()> {
        let target = &*self.to.store;
        for key in keys {
            let copy = staged_key(self.from, self.staged, key);
            if let Some(kv) = target.get(&copy).await? {
                put(target, key, kv.value).await?;
                remove(target, &copy).await?;
            }
        }
        remove(target, &self.batch(n)).await
    }

    /// Finish the batches an attempt cut short: one whose ticket is gone was deleted and is brought
    /// in; one whose ticket is there was not, and is left to `leave`.
    async fn settle(&self) -> ApiResult<()> {
        // A ticket without its record (cut short between the two) went with no batch: it goes.
        let tickets = &format!("{}~ticket-", staging(self.from, self.cluster));
        each_page(&*self.from.store, tickets, PAGE, |page| async move {
            for kv in page {
                let hex = kv.key.strip_prefix(tickets.as_str()).unwrap_or_default();
                let Ok(n) = u64::from_str_radix(hex, 16) else { continue };
                if self.to.store.get(&self.batch(n)).await?.is_none() {
                    remove(&*self.from.store, &kv.key).await?;
                }
            }
            Ok(())
        })
        .await?;
        let records = &format!("{}~batch-", self.staged);
        each_page(&*self.to.store, records, PAGE, |page| async move {
            self.check().await?;
            for kv in page {
                let hex = kv.key.strip_prefix(records.as_str()).unwrap_or_default();
                let Ok(n) = u64::from_str_radix(hex, 16) else { continue };
                if self.from.store.get(&self.ticket(n)).await?.is_some() {
                    remove(&*self.from.store, &self.ticket(n)).await?;
                    remove(&*self.to.store, &kv.key).await?;
                    continue;
                }
                let keys: Vec<String> = serde_json::from_slice(&kv.value).unwrap_or_default();
                self.arrive(n, &keys.iter().map(String::as_str).collect::<Vec<_>>()).await?;
            }
            Ok(())
        })
        .await
    }
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

/// Write `value` at `key`, whether or not it is there; the key's revision after.
async fn put(store: &dyn Store, key: &str, value: Vec<u8>) -> ApiResult<i64> {
    loop {
        let done = match store.get(key).await? {
            Some(kv) if kv.value == value => return Ok(kv.mod_revision),
            Some(kv) => store.update(key, value.clone(), kv.mod_revision).await,
            None => store.create(key, value.clone()).await,
        };
        match done {
            Ok(rev) => return Ok(rev),
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists | StoreError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Bytes of keys and values written in one transaction: well under etcd's default request limit
/// (1.5 MiB), which a batch of large objects would pass.
const TXN_BYTES: usize = 1 << 20;

/// `put` each of `items`: in transactions of up to `TXN_BYTES` when none is there yet (the usual
/// case), else one by one.
async fn put_all(store: &dyn Store, items: Vec<(String, Vec<u8>)>) -> ApiResult<()> {
    let mut rest = items.as_slice();
    while !rest.is_empty() {
        let (mut n, mut bytes) = (0, 0);
        while n < rest.len() && (n == 0 || bytes + rest[n].0.len() + rest[n].1.len() <= TXN_BYTES) {
            bytes += rest[n].0.len() + rest[n].1.len();
            n += 1;
        }
        let (chunk, later) = rest.split_at(n);
        rest = later;
        match store.create_all(chunk, None).await {
            Ok(Some(_)) => continue,
            // Some there already, or too large together: one by one (one too large alone fails).
            Ok(None) | Err(StoreError::TooLarge(_)) => {}
            Err(e) => return Err(e.into()),
        }
        for (key, value) in chunk {
            put(store, key, value.clone()).await?;
        }
    }
    Ok(())
}

/// Each of `keys` as it is now, in one round trip where the store can.
async fn read_each(store: &dyn Store, keys: &[String]) -> ApiResult<Vec<Option<KeyValue>>> {
    // A key read as a prefix, at most one: the key itself, else a longer one (not it).
    let reqs = keys.iter().map(|k| RangeRequest { prefix: k.clone(), limit: 1, ..Default::default() }).collect();
    let got = store.ranges(reqs).await?;
    Ok(got.into_iter().zip(keys).map(|(r, k)| r.kvs.into_iter().next().filter(|kv| &kv.key == k)).collect())
}

/// Delete `key` if it is there.
async fn remove(store: &dyn Store, key: &str) -> ApiResult<()> {
    match store.delete(key, None).await {
        Ok(_) | Err(StoreError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Hand the keys under `prefix` to `each`, `limit` at a time, each page as the store has it then.
async fn each_page<F, Fut>(store: &dyn Store, prefix: &str, limit: usize, mut each: F) -> ApiResult<()>
where
    F: FnMut(Vec<KeyValue>) -> Fut,
    Fut: std::future::Future<Output = ApiResult<()>>,
{
    let mut start = None;
    loop {
        let req = RangeRequest { prefix: prefix.to_string(), start: start.take(), limit, revision: None };
        let page = store.range(req).await?;
        start = page.next_start();
        if !page.kvs.is_empty() {
            each(page.kvs).await?;
        }
        if start.is_none() {
            return Ok(());
        }
    }
}

/// Delete every key under `prefix`, each at the revision read (one written since is someone's).
async fn clear(store: &dyn Store, prefix: &str) -> ApiResult<()> {
    each_page(store, prefix, PAGE, |page| async move {
        for kv in page {
            match store.delete(&kv.key, Some(kv.mod_revision)).await {
                Ok(_) | Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::embedded::EmbeddedStore;
    use serde_json::json;
    use std::sync::Arc;

    const P: &str = "/registry";

    fn key(cluster: &str, name: &str) -> String {
        format!("{P}/core/configmaps/{cluster}/default/{name}")
    }

    async fn value(store: &dyn Store, key: &str) -> Option<Vec<u8>> {
        store.get(key).await.unwrap().map(|kv| kv.value)
    }

    async fn count(store: &dyn Store, prefix: &str) -> usize {
        store.range(RangeRequest { prefix: prefix.into(), ..Default::default() }).await.unwrap().kvs.len()
    }

    /// A default shard and shard b, each an embedded store, with cluster `c` asked to move from the
    /// default shard to b; the directories (kept alive), the registries and the LogicalCluster's key.
    async fn moving_c() -> ([tempfile::TempDir; 2], Registry, Registry, String) {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let root_store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dirs[0].path()).unwrap());
        let b_store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dirs[1].path()).unwrap());
        let shard_b = Registry::new(b_store, P).on_shard("b");
        let root = Registry::new(root_store.clone(), P)
            .with_shards(crate::shard::Shards::new(vec![("b".into(), shard_b.clone())]));
        let def = resources::logical_cluster_def();
        let lc_key = keys::object(P, def.storage_group(), &def.plural, crate::cluster::ROOT, None, "c");
        let lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
            "metadata": {"name": "c", "uid": "u1"}, "spec": {"shard": "b"},
            "status": {"phase": "Ready", "shard": "default"}});
        root_store.create(&lc_key, crate::registry::encode(&lc)).await.unwrap();
        (dirs, root, shard_b, lc_key)
    }

    #[tokio::test]
    async fn a_move_cut_short_finishes_without_losing_or_bringing_back_a_write() {
        let (_dirs, root, shard_b, lc_key) = moving_c().await;
        let (root_store, b_store) = (root.store.clone(), shard_b.store.clone());
        let ns = format!("{P}/core/namespaces/c/default");
        root_store.create(&ns, b"{\"ns\":1}".to_vec()).await.unwrap();
        for name in ["k1", "k2", "k3"] {
            root_store.create(&key("c", name), name.as_bytes().to_vec()).await.unwrap();
        }
        let staged = staging(&shard_b, "c");
        // A first attempt cut short before its marker left a copy of a key deleted since: not to arrive.
        put(&*b_store, &format!("{staged}core/configmaps/c/default/gone"), b"old".to_vec()).await.unwrap();
        // A second attempt staged everything and marked it; it deleted k1 in a batch of its own (whose
        // ticket went with it) and was cut short before bringing it in, and had a batch for k2 under
        // way (its ticket made, not yet deleted). Then a lagging writer changed k2 and deleted k3.
        for k in [ns.clone(), key("c", "k1"), key("c", "k2"), key("c", "k3")] {
            let v = value(&*root_store, &k).await.unwrap();
            put(&*b_store, &staged_key(&root, &staged, &k), v).await.unwrap();
        }
        put(&*b_store, &marker(&staged), b"{}".to_vec()).await.unwrap();
        let m = Move { root: &root, uid: "u1", from: &root, to: &shard_b, cluster: "c", staged: &staged };
        let k1 = root_store.get(&key("c", "k1")).await.unwrap().unwrap();
        let t1 = root_store.create(&m.ticket(1), b"{}".to_vec()).await.unwrap();
        put(&*b_store, &m.batch(1), serde_json::to_vec(&[key("c", "k1")]).unwrap()).await.unwrap();
        assert!(root_store.delete_all(&[(key("c", "k1"), k1.mod_revision), (m.ticket(1), t1)]).await.unwrap());
        root_store.create(&m.ticket(2), b"{}".to_vec()).await.unwrap();
        put(&*b_store, &m.batch(2), serde_json::to_vec(&[key("c", "k2")]).unwrap()).await.unwrap();
        let k2 = root_store.get(&key("c", "k2")).await.unwrap().unwrap();
        root_store.update(&key("c", "k2"), b"k2 changed".to_vec(), k2.mod_revision).await.unwrap();
        root_store.delete(&key("c", "k3"), None).await.unwrap();
        // The key a cluster of another name holds stays.
        root_store.create(&key("other", "x"), b"x".to_vec()).await.unwrap();

        relocate(&root, "c").await.unwrap();
        assert_eq!(value(&*b_store, &key("c", "k1")).await.as_deref(), Some(&b"k1"[..]), "moved before the cut");
        assert_eq!(value(&*b_store, &key("c", "k2")).await.as_deref(), Some(&b"k2 changed"[..]), "the later write");
        assert_eq!(value(&*b_store, &key("c", "k3")).await, None, "deleted on the source after it was staged");
        assert_eq!(value(&*b_store, &ns).await.as_deref(), Some(&b"{\"ns\":1}"[..]));
        assert_eq!(value(&*b_store, &key("c", "gone")).await, None);
        assert_eq!(count(&*root_store, &format!("{P}/core/configmaps/c/")).await, 0);
        assert_eq!(count(&*root_store, &format!("{P}/core/namespaces/c/")).await, 0);
        assert!(root_store.get(&key("other", "x")).await.unwrap().is_some());
        assert_eq!(count(&*b_store, &staged).await, 0, "staging emptied, marker and records included");
        assert_eq!(count(&*root_store, &staging(&root, "c")).await, 0, "no ticket left");
        let now: Value = serde_json::from_slice(&root_store.get(&lc_key).await.unwrap().unwrap().value).unwrap();
        assert_eq!((crate::shard::of(&now), crate::shard::moving_to(&now)), (Some("b"), None), "{now}");

        // Not being moved (any more): nothing to do.
        relocate(&root, "c").await.unwrap();
        assert_eq!(value(&*b_store, &key("c", "k2")).await.as_deref(), Some(&b"k2 changed"[..]));
    }

    #[tokio::test]
    async fn a_move_that_cannot_stage_an_object_is_given_up_before_anything_leaves() {
        let (_dirs, root, shard_b, lc_key) = moving_c().await;
        let (root_store, b_store) = (root.store.clone(), shard_b.store.clone());
        // As large as a write may be under its own key: under the longer staging key, too large.
        let big = key("c", "big");
        root_store.create(&big, vec![b'x'; 1536 * 1024 - big.len()]).await.unwrap();
        root_store.create(&key("c", "small"), b"s".to_vec()).await.unwrap();

        relocate(&root, "c").await.unwrap();
        assert!(
            root_store.get(&big).await.unwrap().is_some()
                && root_store.get(&key("c", "small")).await.unwrap().is_some()
        );
        assert_eq!(count(&*b_store, &format!("{P}/")).await, 0, "nothing staged is left");
        let now: Value = serde_json::from_slice(&root_store.get(&lc_key).await.unwrap().unwrap().value).unwrap();
        assert_eq!((crate::shard::of(&now), crate::shard::moving_to(&now)), (Some("default"), None), "{now}");
        let cond = now["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ShardMove").unwrap();
        assert_eq!((&cond["status"], &cond["reason"]), (&json!("False"), &json!("ObjectTooLarge")), "{cond}");
    }
}
