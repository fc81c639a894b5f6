//! The store behind every logical cluster: one trait with revisions, compare-and-swap, prefix ranges and
//! watches, implemented by an embedded engine (redb) and by etcd, checked by one contract test suite.

pub mod based;
pub mod embedded;
pub mod etcd;
pub mod keys;
pub mod metered;
pub mod routed;

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

/// A store revision. One sequence across every key, so it is also every object's `resourceVersion`.
pub type Revision = i64;

/// A key with its value and the revision that last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// Full key (`/registry/core/configmaps/root/default/x`).
    pub key: String,
    /// Stored bytes (JSON of the object without resourceVersion and cluster annotation).
    pub value: Vec<u8>,
    /// Revision of the last write (etcd's mod revision).
    pub mod_revision: Revision,
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The key was created or updated; `prev` is its value before, if it existed.
    Put {
        /// The new value.
        kv: KeyValue,
        /// The value it replaced (absent after a create, and from `watch_current` always).
        prev: Option<KeyValue>,
        /// Whether this put made the key (it was not there just before), whether or not `prev` is
        /// carried: a follower without previous values still tells a create from an update.
        created: bool,
    },
    /// The key was deleted at `revision`; `prev` is its last value.
    Delete {
        /// The revision of the delete.
        revision: Revision,
        /// The value it had (a store that lost it reports `None`).
        prev: Option<KeyValue>,
        /// The key.
        key: String,
    },
    /// Every change up to this revision has been delivered (a progress marker with no change).
    Progress(Revision),
}

impl WatchEvent {
    /// The revision this event happened at.
    pub fn revision(&self) -> Revision {
        match self {
            WatchEvent::Put { kv, .. } => kv.mod_revision,
            WatchEvent::Delete { revision, .. } => *revision,
            WatchEvent::Progress(r) => *r,
        }
    }
}

/// A stream of changes under a prefix, in revision order.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, StoreError>> + Send>>;

/// A page of keys.
#[derive(Debug, Clone, Default)]
pub struct RangeResult {
    /// Keys in order.
    pub kvs: Vec<KeyValue>,
    /// Whether more keys follow the last one returned.
    pub more: bool,
    /// The revision this page was read at.
    pub revision: Revision,
}

impl RangeResult {
    /// Where the next page starts (just after this page's last key), or `None` after the last page.
    pub fn next_start(&self) -> Option<String> {
        self.kvs.last().filter(|_| self.more).map(|kv| format!("{}\0", kv.key))
    }
}

/// Read every key under `prefix`, `page` keys at a time and all at the first page's revision, handing
/// each page to `each`; returns that revision. Collections that grow with the number of clusters are
/// read so, as kube-apiserver's reflectors page their lists: no one reply, nor the memory holding it,
/// grows with them.
pub async fn range_pages<E: From<StoreError>>(
    store: &dyn Store,
    prefix: &str,
    page: usize,
    mut each: impl FnMut(&[KeyValue]) -> Result<(), E>,
) -> Result<Revision, E> {
    let (mut start, mut at) = (None, None);
    loop {
        let req = RangeRequest { prefix: prefix.to_string(), start: start.take(), limit: page, revision: at };
        let got = store.range(req).await?;
        let first = *at.get_or_insert(got.revision);
        each(&got.kvs)?;
        start = got.next_start();
        if start.is_none() {
            return Ok(first);
        }
    }
}

/// Take back what `create_all` made at `revision` of `items`: each key only while still at that
/// revision (a key changed since is someone's since), in one step where the store can.
pub async fn take_back(store: &dyn Store, items: &[(String, Vec<u8>)], revision: Revision) {
    let made: Vec<(String, Revision)> = items.iter().map(|(k, _)| (k.clone(), revision)).collect();
    if !matches!(store.delete_all(&made).await, Ok(true)) {
        for (k, rev) in &made {
            match store.delete(k, Some(*rev)).await {
                // Gone, or someone's since.
                Ok(_) | Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
                Err(e) => tracing::warn!(key = %k, error = %e, "taking back a key a bootstrap made; it stays"),
            }
        }
    }
}

/// What to read.
#[derive(Debug, Clone, Default)]
pub struct RangeRequest {
    /// Every key starting with this (it ends with `/`, but for one key read alone: `key_at`).
    pub prefix: String,
    /// Start at this key (inclusive); must be under `prefix`.
    pub start: Option<String>,
    /// At most this many keys; 0 means all.
    pub limit: usize,
    /// Read at this past revision; `None` reads the latest.
    pub revision: Option<Revision>,
}

impl RangeRequest {
    /// One key as it was at `revision`: the keys starting with it, at most one, which is the key
    /// itself if it was there then (a longer key sorts after it).
    pub fn key_at(key: &str, revision: Revision) -> RangeRequest {
        RangeRequest { prefix: key.to_string(), start: None, limit: 1, revision: Some(revision) }
    }
}

/// Another key a write depends on, at the revision it was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The key.
    pub key: String,
    /// Its `mod_revision` when it was checked.
    pub mod_revision: Revision,
}

/// Store failures. Each maps to one Kubernetes status in `status.rs`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A create found the key already there.
    #[error("key already exists")]
    AlreadyExists,
    /// A guarded create found its guard key changed or gone since the revision it was given.
    #[error("guard key changed")]
    GuardChanged,
    /// The key does not exist.
    #[error("key not found")]
    NotFound,
    /// A compare-and-swap lost: the key's revision is not the expected one.
    #[error("revision conflict")]
    Conflict {
        /// The key's value now, if it still exists.
        current: Option<KeyValue>,
    },
    /// The requested revision was compacted away.
    #[error("required revision {requested} has been compacted (compacted to {compacted})")]
    Compacted {
        /// What was asked for.
        requested: Revision,
        /// The compaction point.
        compacted: Revision,
    },
    /// The requested revision is newer than the store's.
    #[error("revision {requested} is in the future (current {current})")]
    FutureRevision {
        /// What was asked for.
        requested: Revision,
        /// The store's revision.
        current: Revision,
    },
    /// The store refused a write larger than its request limit (etcd's `--max-request-bytes`).
    #[error("request larger than the store's limit: {0}")]
    TooLarge(String),
    /// The store cannot be reached now; the request may be retried.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A write was sent and the store did not say whether it was done: it may have been. Not to be
    /// sent again blindly (a create with a generated name would make two objects).
    #[error("the store did not answer whether the write was done: {0}")]
    OutcomeUnknown(String),
    /// Anything else (corruption, engine failure).
    #[error("store failure: {0}")]
    Internal(String),
}

/// The contract both backends meet (tests/storage_contract.rs runs it against each).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Read one key at the latest revision.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;
    /// Read one key from the nearest replica without a quorum round: possibly stale, never from the
    /// future. For checks that re-read with `get` on a miss (as kube-apiserver's namespace lifecycle
    /// admission reads its cache first and the store only on a miss).
    async fn get_relaxed(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.get(key).await
    }
    /// Read keys under a prefix, in key order, optionally at a past revision.
    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError>;
    /// Create a key that must not exist.
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError> {
        self.create_guarded(key, value, None).await
    }
    /// Create a key that must not exist, and only while `guard`'s key is still at its revision, in one
    /// atomic step. A create that depends on another object (its namespace being there and not
    /// terminating) checks that object once, then lets the store refuse the create if it changed since:
    /// no race, and no second round trip. Fails with `AlreadyExists` before `GuardChanged`.
    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError>;
    /// Replace a key whose revision must be `expected`.
    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError>;
    /// Delete a key, only if its revision is `expected` when given. Returns the delete's revision and the
    /// value deleted.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError>;
    /// Create every key of `items`, none of which may exist, while `guard`'s key is at its revision,
    /// in one atomic step, at one revision: `Ok(Some(revision))` when all were made, `Ok(None)` when none
    /// was (a key existed, the guard changed, or the store does not make so many at once). A new
    /// cluster's bootstrap writes its objects so, in one round trip rather than one each; on `None` it
    /// writes them one by one.
    async fn create_all(
        &self,
        items: &[(String, Vec<u8>)],
        guard: Option<&Guard>,
    ) -> Result<Option<Revision>, StoreError> {
        let _ = (items, guard);
        Ok(None)
    }
    /// Delete every key of `items`, each only while at its revision, in one atomic step: `Ok(true)`
    /// when all went, `Ok(false)` when none did (one changed or is gone, or the store does not delete
    /// so many at once). A purge deletes a cluster's keys so; on `false` it deletes them one by one.
    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        let _ = items;
        Ok(false)
    }
    /// Several reads, each at its own revision or the latest, answered in order, in one round trip
    /// where the store can (a purge reads every resource's prefix of its cluster; usage counting reads
    /// the values a watch without previous values left out).
    async fn ranges(&self, reqs: Vec<RangeRequest>) -> Result<Vec<RangeResult>, StoreError> {
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(self.range(r).await?);
        }
        Ok(out)
    }
    /// The latest revision (a consistent read: every write acknowledged before is at or below it).
    async fn revision(&self) -> Result<Revision, StoreError>;
    /// Changes under `prefix` after revision `after`, in order, forever (until dropped). Fails with
    /// `Compacted` when `after` is older than the retained history.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError>;
    /// `watch`, except that events need not carry `prev`: for followers that want only what a key is
    /// now. etcd 3.4 reads every event's previous value for a watch that asks for it, creations
    /// included; measured, that was half of etcd's CPU per logical cluster created or deleted.
    async fn watch_current(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.watch(prefix, after).await
    }
    /// `watch_current`, for followers that want only deletions (and progress): etcd filters the rest
    /// out before sending, so the writes under `prefix` cost neither it nor kgate anything more.
    async fn watch_deletes(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        use futures::StreamExt;
        let all = self.watch_current(prefix, after).await?;
        Ok(Box::pin(all.filter(|ev| std::future::ready(!matches!(ev, Ok(WatchEvent::Put { .. }))))))
    }
    /// Forget history at or before `revision`.
    async fn compact(&self, revision: Revision) -> Result<(), StoreError>;
    /// Whether the store answers (readyz): as of now, or, when probing costs the store, as its last
    /// finished probe found, which started within about three seconds (etcd: one probe a second, each
    /// waiting up to two; see `etcd::PROBE_EVERY`).
    async fn healthy(&self) -> bool;
    /// Whether a watch reports `Progress` as soon as it has delivered every change up to the store's
    /// revision. Then a watch cache knows within moments that it is current; otherwise it knows only
    /// when an event of its own prefix arrives (etcd before 3.4.31/3.5.13 answers progress requests out
    /// of order, so kgate does not rely on them, as kube-apiserver does not).
    fn reports_progress(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn paged_reads_see_one_revision_whatever_is_written_between_pages() {
        let dir = tempfile::tempdir().unwrap();
        let store = embedded::EmbeddedStore::open(dir.path()).unwrap();
        for k in 'a'..='j' {
            store.create(&format!("/p/{k}"), b"{}".to_vec()).await.unwrap();
        }
        let before = store.revision().await.unwrap();
        let (mut keys, mut pages) = (Vec::new(), Vec::new());
        let at = range_pages(&store, "/p/", 3, |kvs| {
            if pages.is_empty() {
                // Other writers between the first page and the next.
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async {
                        store.create("/p/f2", b"{}".to_vec()).await.unwrap();
                        store.delete("/p/j", None).await.unwrap();
                    })
                });
            }
            pages.push(kvs.len());
            keys.extend(kvs.iter().map(|kv| kv.key.clone()));
            Ok::<_, StoreError>(())
        })
        .await
        .unwrap();
        assert_eq!(at, before, "the revision of the first page");
        assert_eq!(pages, [3, 3, 3, 1]);
        let want: Vec<String> = ('a'..='j').map(|k| format!("/p/{k}")).collect();
        assert_eq!(keys, want, "every key as of the first page: none written later, none deleted later missing");
    }
}
