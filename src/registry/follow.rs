//! One list and watch of the store's keys for everything the registry counts from them: what each
//! cluster holds (`footprint`, with usage accounting on) and which namespaces hold ResourceQuotas
//! (`quota::QuotaIndex`). One watch, not one per count: each watch of a prefix makes the store send
//! every write under it once more. The price: with accounting on, the quota index knows nothing
//! until every key is listed (each create reads its namespace's quotas from the store meanwhile).

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::footprint::Footprint;
use super::Registry;
use crate::cluster::ROOT;
use crate::resources;
use crate::storage::{keys, KeyValue, StoreError, WatchEvent};

/// Keys read per store round trip when counting at start: few, since each comes with its value, and
/// values may be megabytes.
const PAGE: usize = 64;

/// A key's size as the store holds it.
fn size(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len()
}

impl Registry {
    /// Keep the counts current: list the keys, then follow the store's changes; start over when the
    /// watch ends. With `accounting` every key is followed, else only the quotas. Runs until the task
    /// is aborted.
    pub async fn run_counts(self, accounting: bool) {
        let quotas = keys::collection(&self.prefix, "core", "resourcequotas", None, None);
        let from = if accounting { format!("{}/", self.prefix) } else { quotas.clone() };
        let lc = resources::logical_cluster_def();
        let lc_prefix = self.collection(&lc, Some(ROOT), None);
        loop {
            // The quota index knows nothing while it lists (every create reads the store meanwhile);
            // the footprint is counted into a fresh table swapped in whole, so limits hold on the old
            // counts meanwhile.
            self.quota_index.forget();
            let fresh = Footprint::default();
            let listed = crate::storage::range_pages::<StoreError>(&*self.store, &from, PAGE, |kvs| {
                for kv in kvs {
                    if kv.key.starts_with(&quotas) {
                        self.quota_index.quota_added(&quotas, &kv.key, 1);
                    }
                    if accounting {
                        fresh.account(&self.prefix, &kv.key, None, Some(size(kv)));
                        if let Some(name) = kv.key.strip_prefix(&lc_prefix) {
                            fresh.observe_cluster(name, serde_json::from_slice(&kv.value).ok().as_ref());
                        }
                    }
                }
                Ok(())
            })
            .await;
            let watch = match listed {
                Ok(rev) => self.store.watch(&from, rev).await.map(|events| (rev, events)),
                Err(e) => Err(e),
            };
            let Ok((listed_at, mut events)) = watch else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            self.quota_index.listed();
            if accounting {
                self.footprint.replace(fresh);
                self.footprint.counted(listed_at);
            }
            while let Some(Ok(ev)) = events.next().await {
                let (key, value) = match &ev {
                    WatchEvent::Put { kv, prev } => {
                        if prev.is_none() && kv.key.starts_with(&quotas) {
                            self.quota_index.quota_added(&quotas, &kv.key, 1);
                        }
                        if accounting {
                            self.footprint.account(&self.prefix, &kv.key, prev.as_ref().map(size), Some(size(kv)));
                        }
                        (&kv.key, Some(&kv.value))
                    }
                    WatchEvent::Delete { key, prev, .. } => {
                        if key.starts_with(&quotas) {
                            self.quota_index.quota_added(&quotas, key, -1);
                        }
                        if accounting {
                            // A store that lost the old value cannot say its size; the next full count will.
                            let before = prev.as_ref().map_or(key.len(), size);
                            self.footprint.account(&self.prefix, key, Some(before), None);
                        }
                        (key, None)
                    }
                    WatchEvent::Progress(rev) => {
                        if accounting {
                            self.footprint.counted(*rev);
                        }
                        continue;
                    }
                };
                if !accounting {
                    continue;
                }
                self.footprint.counted(ev.revision());
                if let Some(name) = key.strip_prefix(&lc_prefix) {
                    let obj = value.and_then(|v| serde_json::from_slice::<Value>(v).ok());
                    self.footprint.observe_cluster(name, obj.as_ref());
                }
            }
            // Unknowing at once, not after the pause: a quota written meanwhile would be missed.
            self.quota_index.forget();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
