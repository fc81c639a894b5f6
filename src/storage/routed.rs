//! The store a shard's registry works through: the shard's own etcd for every key, except root's
//! (`<prefix>/<group>/<resource>/root/...`), which live on the default shard.
//!
//! A shard's logical clusters are bootstrapped, counted and purged by code that also reads and writes
//! their LogicalCluster objects in root. Routing by key lets that code run unchanged against a shard:
//! a key names its cluster, so it names its store. Prefix-wide reads (`<prefix>/<group>/<resource>/`)
//! are the shard's own: its watch cache, CRD index and counts see its clusters and no one else's.

use async_trait::async_trait;
use std::sync::Arc;

use super::{Guard, KeyValue, RangeRequest, RangeResult, Revision, Store, StoreError, WatchStream};
use crate::cluster::ROOT;

/// A shard's store, with root's keys sent to the default shard's.
pub struct Routed {
    own: Arc<dyn Store>,
    root: Arc<dyn Store>,
    /// The key prefix plus `/`.
    prefix: String,
}

impl Routed {
    /// `own` for every key but root's, which go to `root`.
    pub fn new(own: Arc<dyn Store>, root: Arc<dyn Store>, prefix: &str) -> Self {
        Routed { own, root, prefix: format!("{prefix}/") }
    }

    /// Whether a key (or a prefix) lies in root: its third segment after the prefix is `root`.
    fn in_root(&self, key: &str) -> bool {
        let Some(rest) = key.strip_prefix(&self.prefix) else { return false };
        let mut parts = rest.splitn(4, '/');
        let (_group, _resource, cluster) = (parts.next(), parts.next(), parts.next());
        // `<group>/<resource>/root` alone (no slash after it) is not a key of root's.
        cluster == Some(ROOT) && parts.next().is_some()
    }

    /// Whether `g`'s key is still at its revision.
    async fn guard_holds(&self, g: &Guard) -> Result<bool, StoreError> {
        Ok(self.route(&g.key).get(&g.key).await?.map(|kv| kv.mod_revision) == Some(g.mod_revision))
    }

    fn route(&self, key: &str) -> &dyn Store {
        if self.in_root(key) {
            &*self.root
        } else {
            &*self.own
        }
    }
}

#[async_trait]
impl Store for Routed {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.route(key).get(key).await
    }

    async fn get_relaxed(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.route(key).get_relaxed(key).await
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError> {
        self.route(&req.prefix).range(req).await
    }

    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError> {
        match guard {
            // A guard in the other store cannot join the create's transaction: it is checked just
            // before. A cluster's bootstrap is guarded by its LogicalCluster in root; a purge that
            // starts between the check and the create finds the key on its next pass (it repeats
            // until a pass finds nothing).
            Some(g) if self.in_root(&g.key) != self.in_root(key) => {
                if !self.guard_holds(g).await? {
                    return match self.route(key).get(key).await? {
                        Some(_) => Err(StoreError::AlreadyExists),
                        None => Err(StoreError::GuardChanged),
                    };
                }
                let rev = self.route(key).create_guarded(key, value, None).await?;
                // Checked again after: a guard that moved meanwhile (a DELETE whose purge may have
                // passed this key already) takes the create back, as one atomic step would not have made it.
                if !self.guard_holds(g).await? {
                    let _ = self.route(key).delete(key, Some(rev)).await;
                    return Err(StoreError::GuardChanged);
                }
                Ok(rev)
            }
            _ => self.route(key).create_guarded(key, value, guard).await,
        }
    }

    async fn create_all(
        &self,
        items: &[(String, Vec<u8>)],
        guard: Option<&Guard>,
    ) -> Result<Option<Revision>, StoreError> {
        let Some((first, _)) = items.first() else { return Ok(None) };
        let root = self.in_root(first);
        if items.iter().any(|(k, _)| self.in_root(k) != root) {
            return Ok(None);
        }
        match guard {
            // As `create_guarded`, but checked after only: a cluster's keys are created at once just
            // after its LogicalCluster (a new cluster's bootstrap), where the guard all but always
            // holds, so a read before would cost every creation a store call to spare a rare one.
            Some(g) if self.in_root(&g.key) != root => {
                let Some(rev) = self.route(first).create_all(items, None).await? else { return Ok(None) };
                if self.guard_holds(g).await? {
                    return Ok(Some(rev));
                }
                // As `create_guarded`: taken back, each key only as it was made.
                super::take_back(self.route(first), items, rev).await;
                Ok(None)
            }
            _ => self.route(first).create_all(items, guard).await,
        }
    }

    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        let Some((first, _)) = items.first() else { return Ok(true) };
        let root = self.in_root(first);
        if items.iter().any(|(k, _)| self.in_root(k) != root) {
            return Ok(false);
        }
        self.route(first).delete_all(items).await
    }

    async fn ranges(&self, reqs: Vec<RangeRequest>) -> Result<Vec<RangeResult>, StoreError> {
        let Some(first) = reqs.first() else { return Ok(Vec::new()) };
        let root = self.in_root(&first.prefix);
        if reqs.iter().all(|r| self.in_root(&r.prefix) == root) {
            return self.route(&first.prefix).ranges(reqs).await;
        }
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(self.route(&r.prefix).range(r).await?);
        }
        Ok(out)
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError> {
        self.route(key).update(key, value, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError> {
        self.route(key).delete(key, expected).await
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        self.own.revision().await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.route(prefix).watch(prefix, after).await
    }

    async fn watch_current(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.route(prefix).watch_current(prefix, after).await
    }

    async fn watch_deletes(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.route(prefix).watch_deletes(prefix, after).await
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.own.compact(revision).await
    }

    async fn healthy(&self) -> bool {
        self.own.healthy().await
    }

    fn reports_progress(&self) -> bool {
        self.own.reports_progress()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::embedded::EmbeddedStore;

    #[tokio::test]
    async fn roots_keys_go_to_the_default_shard_and_the_rest_to_the_shards_own() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let own: Arc<dyn Store> = Arc::new(EmbeddedStore::open(a.path()).unwrap());
        let root: Arc<dyn Store> = Arc::new(EmbeddedStore::open(b.path()).unwrap());
        let routed = Routed::new(own.clone(), root.clone(), "/registry");
        let lc = "/registry/tenancy.kgate.dev/logicalclusters/root/team";
        let cm = "/registry/core/configmaps/team/default/x";
        let guard_rev = routed.create(lc, b"{}".to_vec()).await.unwrap();
        assert!(root.get(lc).await.unwrap().is_some() && own.get(lc).await.unwrap().is_none());
        let guard = Guard { key: lc.into(), mod_revision: guard_rev };
        routed.create_guarded(cm, b"{}".to_vec(), Some(&guard)).await.unwrap();
        assert!(own.get(cm).await.unwrap().is_some() && root.get(cm).await.unwrap().is_none());
        // A cluster named like root's prefix is not root.
        assert!(!routed.in_root("/registry/core/configmaps/rootless/default/x"));
        assert!(!routed.in_root("/registry/core/configmaps/"));
        assert!(routed.in_root("/registry/core/configmaps/root/"));
        // The guard moved: the create across stores is refused, as a guarded create in one store is.
        routed.update(lc, b"{\"x\":1}".to_vec(), guard_rev).await.unwrap();
        let second = "/registry/core/configmaps/team/default/y";
        let refused = routed.create_guarded(second, b"{}".to_vec(), Some(&guard)).await;
        assert!(matches!(refused, Err(StoreError::GuardChanged)), "{refused:?}");
        assert!(matches!(
            routed.create_guarded(cm, b"{}".to_vec(), Some(&guard)).await,
            Err(StoreError::AlreadyExists)
        ));
        // Prefix-wide reads are the shard's own.
        let all = routed
            .range(RangeRequest { prefix: "/registry/core/configmaps/".into(), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(all.kvs.len(), 1);
    }
}
