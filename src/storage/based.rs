//! A store whose revisions are shifted into a range of their own: each shard's revisions are its
//! etcd's plus a base fixed by the shard's name (`shard::revision_base`), so no two shards hand out
//! the same resourceVersion.
//!
//! That is what lets a logical cluster move between shards safely: a client holding a resourceVersion
//! from the shard it left presents a number outside the new shard's range, which is refused as too old
//! (410 Gone, so informers list again), never read as a revision of the new shard, whose history
//! it is not part of. Within one shard a revision is its own: a cluster that comes back to a shard it
//! left finds that shard's history holding its leaving (each key's delete) and its return.
//!
//! Revision 0 is left as it is both ways: to the stores and to kgate it means "none" or "the start".

use async_trait::async_trait;
use futures::StreamExt;
use std::sync::Arc;

use super::{Guard, KeyValue, RangeRequest, RangeResult, Revision, Store, StoreError, WatchEvent, WatchStream};

/// The revisions of one shard's etcd: 2^40 (a trillion writes: decades of etcd at its sustained rate).
pub const SPAN: Revision = 1 << 40;

/// What a request for revision `requested` is answered when the store is only at `current`: a
/// revision of the store's own range it has not reached yet (kube's "too large resource version",
/// 504), or one of another shard's range, which it never will (410: the client lists again).
pub fn ahead(requested: Revision, current: Revision) -> StoreError {
    let range = |r: Revision| (r.max(1) - 1) / SPAN;
    if range(requested) == range(current) {
        StoreError::FutureRevision { requested, current }
    } else {
        StoreError::Compacted { requested, compacted: current }
    }
}

/// `inner`, its revisions moved up by a base.
pub struct Based {
    inner: Arc<dyn Store>,
    shift: Shift,
}

/// The base, and the moves between the inner store's revisions and the range's. `Copy`, so that
/// watch streams carry their own.
#[derive(Clone, Copy)]
struct Shift(Revision);

impl Shift {
    fn out(self, r: Revision) -> Revision {
        if r == 0 {
            0
        } else {
            r + self.0
        }
    }

    /// A revision named to this store: its own (`Some`), or one of another range (`None`).
    fn inward(self, r: Revision) -> Option<Revision> {
        match r {
            0 => Some(0),
            r if r > self.0 && r - self.0 < SPAN => Some(r - self.0),
            _ => None,
        }
    }

    /// A revision to read or watch from: another range's is as good as compacted here.
    fn from(self, r: Revision) -> Result<Revision, StoreError> {
        self.inward(r).ok_or(StoreError::Compacted { requested: r, compacted: self.0 })
    }

    /// A revision a write compares with: another range's matches no key here (etcd and the embedded
    /// store both answer a compare with -1 as a conflict).
    fn compared(self, r: Revision) -> Revision {
        self.inward(r).unwrap_or(-1)
    }

    fn guard(self, g: Option<&Guard>) -> Option<Guard> {
        g.map(|g| Guard { key: g.key.clone(), mod_revision: self.compared(g.mod_revision) })
    }

    fn kv(self, mut kv: KeyValue) -> KeyValue {
        kv.mod_revision = self.out(kv.mod_revision);
        kv
    }

    fn err(self, e: StoreError) -> StoreError {
        match e {
            StoreError::Conflict { current } => StoreError::Conflict { current: current.map(|kv| self.kv(kv)) },
            StoreError::Compacted { requested, compacted } => {
                StoreError::Compacted { requested: self.out(requested), compacted: self.out(compacted) }
            }
            StoreError::FutureRevision { requested, current } => {
                StoreError::FutureRevision { requested: self.out(requested), current: self.out(current) }
            }
            e => e,
        }
    }

    fn event(self, ev: WatchEvent) -> WatchEvent {
        match ev {
            WatchEvent::Put { kv, prev, created } => {
                WatchEvent::Put { kv: self.kv(kv), prev: prev.map(|p| self.kv(p)), created }
            }
            WatchEvent::Delete { revision, prev, key } => {
                WatchEvent::Delete { revision: self.out(revision), prev: prev.map(|p| self.kv(p)), key }
            }
            WatchEvent::Progress(r) => WatchEvent::Progress(self.out(r)),
        }
    }

    fn request(self, mut req: RangeRequest) -> Result<RangeRequest, StoreError> {
        req.revision = req.revision.map(|r| self.from(r)).transpose()?;
        Ok(req)
    }

    fn result(self, mut got: RangeResult) -> RangeResult {
        got.revision = self.out(got.revision);
        got.kvs = got.kvs.into_iter().map(|kv| self.kv(kv)).collect();
        got
    }

    fn stream(self, s: Result<WatchStream, StoreError>) -> Result<WatchStream, StoreError> {
        Ok(Box::pin(s.map_err(|e| self.err(e))?.map(move |ev| ev.map(|ev| self.event(ev)).map_err(|e| self.err(e)))))
    }
}

/// A shard's store, its revisions in the range starting after `base` (a multiple of `SPAN`). The
/// default shard's range starts at 0: its revisions are its etcd's, and it is wrapped only when there
/// are other shards, whose revisions it must refuse.
pub fn based(inner: Arc<dyn Store>, base: Revision) -> Arc<dyn Store> {
    Arc::new(Based { inner, shift: Shift(base) })
}

#[async_trait]
impl Store for Based {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let s = self.shift;
        self.inner.get(key).await.map(|kv| kv.map(|kv| s.kv(kv))).map_err(|e| s.err(e))
    }

    async fn get_relaxed(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let s = self.shift;
        self.inner.get_relaxed(key).await.map(|kv| kv.map(|kv| s.kv(kv))).map_err(|e| s.err(e))
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError> {
        let s = self.shift;
        self.inner.range(s.request(req)?).await.map(|r| s.result(r)).map_err(|e| s.err(e))
    }

    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError> {
        let s = self.shift;
        self.inner.create_guarded(key, value, s.guard(guard).as_ref()).await.map(|r| s.out(r)).map_err(|e| s.err(e))
    }

    async fn create_all(
        &self,
        items: &[(String, Vec<u8>)],
        guard: Option<&Guard>,
    ) -> Result<Option<Revision>, StoreError> {
        let s = self.shift;
        self.inner.create_all(items, s.guard(guard).as_ref()).await.map(|r| r.map(|r| s.out(r))).map_err(|e| s.err(e))
    }

    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        let s = self.shift;
        let items: Vec<(String, Revision)> = items.iter().map(|(k, r)| (k.clone(), s.compared(*r))).collect();
        self.inner.delete_all(&items).await.map_err(|e| s.err(e))
    }

    async fn ranges(&self, reqs: Vec<RangeRequest>) -> Result<Vec<RangeResult>, StoreError> {
        let s = self.shift;
        let reqs = reqs.into_iter().map(|r| s.request(r)).collect::<Result<Vec<_>, _>>()?;
        self.inner.ranges(reqs).await.map(|rs| rs.into_iter().map(|r| s.result(r)).collect()).map_err(|e| s.err(e))
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError> {
        let s = self.shift;
        self.inner.update(key, value, s.compared(expected)).await.map(|r| s.out(r)).map_err(|e| s.err(e))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError> {
        let s = self.shift;
        let expected = expected.map(|r| s.compared(r));
        self.inner.delete(key, expected).await.map(|(r, kv)| (s.out(r), s.kv(kv))).map_err(|e| s.err(e))
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let s = self.shift;
        self.inner.revision().await.map(|r| s.out(r)).map_err(|e| s.err(e))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let s = self.shift;
        s.stream(self.inner.watch(prefix, s.from(after)?).await)
    }

    async fn watch_current(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let s = self.shift;
        s.stream(self.inner.watch_current(prefix, s.from(after)?).await)
    }

    async fn watch_deletes(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let s = self.shift;
        s.stream(self.inner.watch_deletes(prefix, s.from(after)?).await)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let s = self.shift;
        // Another range's revision is none of this store's history to forget.
        match s.inward(revision) {
            Some(r) => self.inner.compact(r).await.map_err(|e| s.err(e)),
            None => Ok(()),
        }
    }

    async fn healthy(&self) -> bool {
        self.inner.healthy().await
    }

    fn reports_progress(&self) -> bool {
        self.inner.reports_progress()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::embedded::EmbeddedStore;

    #[tokio::test]
    async fn revisions_are_the_inner_stores_in_their_own_range_and_anothers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let base = 3 * SPAN;
        let store = based(inner.clone(), base);
        let r1 = store.create("/p/a", b"1".to_vec()).await.unwrap();
        assert_eq!(r1, inner.get("/p/a").await.unwrap().unwrap().mod_revision + base);
        let w = store.watch("/p/", r1).await.unwrap();
        let r2 = store.update("/p/a", b"2".to_vec(), r1).await.unwrap();
        assert_eq!(store.get("/p/a").await.unwrap().unwrap().mod_revision, r2);
        assert_eq!(store.revision().await.unwrap(), r2);
        // A compare with the inner store's own number, or any other range's, does not match.
        for stale in [r2 - base, r2 + SPAN, r2 - SPAN] {
            assert!(matches!(store.update("/p/a", b"3".to_vec(), stale).await, Err(StoreError::Conflict { .. })));
            assert!(matches!(store.delete("/p/a", Some(stale)).await, Err(StoreError::Conflict { .. })));
        }
        // Reads and watches from another range's revision are as if compacted: a client lists again.
        for other in [r1 - base, r1 + SPAN, base] {
            let req = RangeRequest { prefix: "/p/".into(), revision: Some(other), ..Default::default() };
            assert!(matches!(store.range(req).await, Err(StoreError::Compacted { .. })), "{other}");
            assert!(matches!(store.watch("/p/", other).await, Err(StoreError::Compacted { .. })), "{other}");
        }
        let past = RangeRequest { prefix: "/p/".into(), revision: Some(r1), ..Default::default() };
        let got = store.range(past).await.unwrap();
        assert_eq!((got.revision, got.kvs[0].value.as_slice(), got.kvs[0].mod_revision), (r1, &b"1"[..], r1));
        let (deleted_at, last) = store.delete("/p/a", Some(r2)).await.unwrap();
        assert_eq!(last.mod_revision, r2);
        let events: Vec<WatchEvent> = w.take(2).map(Result::unwrap).collect().await;
        match &events[..] {
            [WatchEvent::Put { kv, prev: Some(p), .. }, WatchEvent::Delete { revision, prev: Some(d), .. }] => {
                assert_eq!((kv.mod_revision, p.mod_revision, *revision, d.mod_revision), (r2, r1, deleted_at, r2));
            }
            other => panic!("{other:?}"),
        }
        // Past the store's revision: later in its own range, or another shard's.
        assert!(matches!(ahead(r2 + 5, r2), StoreError::FutureRevision { .. }));
        assert!(matches!(ahead(r2 + SPAN, r2), StoreError::Compacted { .. }));
        assert!(matches!(ahead(SPAN + 1, 10), StoreError::Compacted { .. }));
        // 0 stays "from the start".
        assert!(store.watch("/p/", 0).await.is_ok());
        // The default shard's range starts at 0: its own revisions pass, another shard's do not.
        let default = based(inner.clone(), 0);
        let now = inner.revision().await.unwrap();
        assert_eq!(default.revision().await.unwrap(), now);
        let req = |r| RangeRequest { prefix: "/p/".into(), revision: Some(r), ..Default::default() };
        assert!(default.range(req(now)).await.is_ok());
        assert!(matches!(default.range(req(r1)).await, Err(StoreError::Compacted { .. })));
    }
}
