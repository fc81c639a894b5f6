//! The list-then-watch loops the registry counts from, one per prefix: what each cluster holds
//! (`footprint`, every key, with usage accounting on) and which namespaces hold ResourceQuotas
//! (`quota::QuotaIndex`, the quotas' keys alone). Two watches, not one of every key for both: a
//! watch costs the store only the writes under its prefix, so the quotas' is small, and the index is
//! ready once the quotas are listed rather than once every key is.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::footprint::Footprint;
use super::Registry;
use crate::cluster::ROOT;
use crate::resources;
use crate::storage::{keys, KeyValue, Revision, StoreError, WatchEvent};

/// Keys read per store round trip when listing: few, since each comes with its value, and values may
/// be megabytes.
const PAGE: usize = 64;

/// A key's size as the store holds it.
fn size(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len()
}

/// What follows one prefix: told of each listed page, then of each change.
trait Follower {
    /// Starting over: forget what was listed.
    fn reset(&mut self);
    /// A page of the listing.
    fn page(&mut self, kvs: &[KeyValue]);
    /// Listed at `revision` and the watch open: what was listed holds from now on.
    fn listed(&mut self, revision: Revision);
    /// A change the watch saw.
    fn change(&mut self, ev: &WatchEvent);
    /// The watch ended: what is known may go stale until the next listing.
    fn lost(&mut self);
}

impl Registry {
    /// Keep the counts current: the quota index always, the footprint with `accounting`. Runs until
    /// the task is aborted.
    pub async fn run_counts(self, accounting: bool) {
        let quotas = QuotaFollower {
            registry: self.clone(),
            prefix: keys::collection(&self.prefix, "core", "resourcequotas", None, None),
        };
        let quota_prefix = quotas.prefix.clone();
        let index = self.follow(quota_prefix, quotas);
        if accounting {
            let lc = resources::logical_cluster_def();
            let footprint = FootprintFollower {
                registry: self.clone(),
                lc_prefix: self.collection(&lc, Some(ROOT), None),
                fresh: None,
            };
            futures::join!(index, self.follow(format!("{}/", self.prefix), footprint));
        } else {
            index.await
        }
    }

    /// List `prefix`, then follow its changes from the listed revision; start over when the watch ends.
    async fn follow(&self, prefix: String, mut follower: impl Follower) {
        loop {
            follower.reset();
            let listed = crate::storage::range_pages::<StoreError>(&*self.store, &prefix, PAGE, |kvs| {
                follower.page(kvs);
                Ok(())
            })
            .await;
            let watch = match listed {
                Ok(rev) => self.store.watch(&prefix, rev).await.map(|events| (rev, events)),
                Err(e) => Err(e),
            };
            let Ok((listed_at, mut events)) = watch else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            follower.listed(listed_at);
            while let Some(Ok(ev)) = events.next().await {
                follower.change(&ev);
            }
            // Unknowing at once, not after the pause: a change made meanwhile would be missed.
            follower.lost();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Feeds `quota::QuotaIndex`: it knows nothing while listing (each create reads its namespace's
/// quotas from the store meanwhile).
struct QuotaFollower {
    registry: Registry,
    prefix: String,
}

impl Follower for QuotaFollower {
    fn reset(&mut self) {
        self.registry.quota_index.forget();
    }

    fn page(&mut self, kvs: &[KeyValue]) {
        for kv in kvs {
            self.registry.quota_index.quota_added(&self.prefix, &kv.key, 1);
        }
    }

    fn listed(&mut self, _: Revision) {
        self.registry.quota_index.listed();
    }

    fn change(&mut self, ev: &WatchEvent) {
        match ev {
            WatchEvent::Put { kv, prev: None } => self.registry.quota_index.quota_added(&self.prefix, &kv.key, 1),
            WatchEvent::Delete { key, .. } => self.registry.quota_index.quota_added(&self.prefix, key, -1),
            _ => {}
        }
    }

    fn lost(&mut self) {
        self.registry.quota_index.forget();
    }
}

/// Feeds `footprint`: counted into a fresh table swapped in whole once listed, so that limits hold on
/// the old counts meanwhile.
struct FootprintFollower {
    registry: Registry,
    lc_prefix: String,
    fresh: Option<Footprint>,
}

impl FootprintFollower {
    /// Take note of a LogicalCluster written or gone.
    fn observe(footprint: &Footprint, lc_prefix: &str, key: &str, value: Option<&[u8]>) {
        if let Some(name) = key.strip_prefix(lc_prefix) {
            let obj = value.and_then(|v| serde_json::from_slice::<Value>(v).ok());
            footprint.observe_cluster(name, obj.as_ref());
        }
    }
}

impl Follower for FootprintFollower {
    fn reset(&mut self) {
        self.fresh = Some(Footprint::default());
    }

    fn page(&mut self, kvs: &[KeyValue]) {
        let Some(fresh) = &self.fresh else { return };
        for kv in kvs {
            fresh.account(&self.registry.prefix, &kv.key, None, Some(size(kv)));
            Self::observe(fresh, &self.lc_prefix, &kv.key, Some(&kv.value));
        }
    }

    fn listed(&mut self, revision: Revision) {
        if let Some(fresh) = self.fresh.take() {
            self.registry.footprint.replace(fresh);
        }
        self.registry.footprint.counted(revision);
    }

    fn change(&mut self, ev: &WatchEvent) {
        let footprint = &self.registry.footprint;
        let prefix = &self.registry.prefix;
        match ev {
            WatchEvent::Put { kv, prev } => {
                footprint.account(prefix, &kv.key, prev.as_ref().map(size), Some(size(kv)));
                footprint.counted(ev.revision());
                Self::observe(footprint, &self.lc_prefix, &kv.key, Some(&kv.value));
            }
            WatchEvent::Delete { key, prev, .. } => {
                // A store that lost the old value cannot say its size; the next full count will.
                let before = prev.as_ref().map_or(key.len(), size);
                footprint.account(prefix, key, Some(before), None);
                footprint.counted(ev.revision());
                Self::observe(footprint, &self.lc_prefix, key, None);
            }
            WatchEvent::Progress(rev) => footprint.counted(*rev),
        }
    }

    /// The counts stand until the next listing replaces them: they trail, but are not wrong.
    fn lost(&mut self) {}
}
