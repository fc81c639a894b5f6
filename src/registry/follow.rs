//! The list-then-watch loops the registry counts from, one per prefix: what each cluster holds
//! (`footprint`, every key, with usage accounting on) and which namespaces hold ResourceQuotas
//! (`quota::QuotaIndex`, the quotas' keys alone). Two watches, not one of every key for both: a
//! watch costs the store only the writes under its prefix, so the quotas' is small, and the index is
//! ready once the quotas are listed rather than once every key is.

use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use super::footprint::Footprint;
use super::Registry;
use crate::cluster::ROOT;
use crate::resources;
use crate::storage::{keys, KeyValue, RangeRequest, RangeResult, Revision, StoreError, WatchEvent};

/// Keys read per store round trip when listing: few, since each comes with its value, and values may
/// be megabytes.
const PAGE: usize = 64;

/// Changes taken from a watch at most at once, when they have arrived together: the past values
/// a batch needs (`Follower::reads`) are read in one round trip.
const BATCH: usize = 128;

/// A key's size as the store holds it.
fn size(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len()
}

/// What follows one prefix: told of each listed page, then of each change (by `change`, or by
/// `changes` for a follower that takes a batch at once; it implements one of the two). Changes come
/// without previous values (`Store::watch_current`): a follower that needs a past value says so in
/// `reads`.
trait Follower {
    /// Starting over: forget what was listed.
    fn reset(&mut self);
    /// A page of the listing.
    fn page(&mut self, kvs: &[KeyValue]);
    /// Listed at `revision` and the watch open: what was listed holds from now on.
    fn listed(&mut self, revision: Revision);
    /// A change the watch saw.
    fn change(&mut self, ev: &WatchEvent) {
        let _ = ev;
    }
    /// What applying `evs` needs read first: the past values a watch without previous values left
    /// out. Called once per batch, before `changes`.
    fn reads(&mut self, evs: &[WatchEvent]) -> Vec<RangeRequest> {
        let _ = evs;
        Vec::new()
    }
    /// Whether a batch must end after `ev`: what `reads` decides for later changes depends on it.
    fn ends_batch(&self, ev: &WatchEvent) -> bool {
        let _ = ev;
        false
    }
    /// The changes of a batch, in order, with the answers to its `reads`.
    fn changes(&mut self, evs: &[WatchEvent], read: &[RangeResult]) {
        let _ = read;
        for ev in evs {
            self.change(ev);
        }
    }
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
            let lc_prefix = self.collection(&lc, Some(ROOT), None);
            let footprint = FootprintFollower {
                registry: self.clone(),
                lc_prefix: lc_prefix.clone(),
                fresh: None,
                asked: Vec::new(),
                lc_sizes: Default::default(),
            };
            let keys = self.follow(format!("{}/", self.prefix), footprint);
            if self.holds_root() {
                futures::join!(index, keys);
            } else {
                // Another shard's store has no LogicalClusters: they are followed on the default
                // shard's (where the routed store sends their prefix), alongside.
                let clusters = ClusterFollower { registry: self.clone(), lc_prefix: lc_prefix.clone(), live: None };
                futures::join!(index, keys, self.follow(lc_prefix, clusters));
            }
        } else {
            index.await
        }
    }

    /// List `prefix`, then follow its changes from the listed revision; start over when the watch ends.
    async fn follow<F: Follower>(&self, prefix: String, mut follower: F) {
        loop {
            follower.reset();
            let listed = crate::storage::range_pages::<StoreError>(&*self.store, &prefix, PAGE, |kvs| {
                follower.page(kvs);
                Ok(())
            })
            .await;
            let watch = match listed {
                Ok(rev) => self.store.watch_current(&prefix, rev).await.map(|events| (rev, events)),
                Err(e) => Err(e),
            };
            let Ok((listed_at, mut events)) = watch else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            follower.listed(listed_at);
            let mut taken = Taken::default();
            loop {
                let first = match taken.pop() {
                    Some(ev) => ev,
                    None if !taken.open => break,
                    None => match events.next().await {
                        Some(Ok(ev)) => ev,
                        _ => break,
                    },
                };
                let mut batch = vec![first];
                while batch.len() < BATCH && !batch.last().is_some_and(|ev| follower.ends_batch(ev)) {
                    if let Some(ev) = taken.pop() {
                        batch.push(ev);
                        continue;
                    }
                    if !taken.open {
                        break;
                    }
                    match events.next().now_or_never() {
                        Some(Some(Ok(ev))) => batch.push(ev),
                        // Ended or failed: what came is applied, then the follower starts over.
                        Some(_) => taken.open = false,
                        None => break,
                    }
                }
                let reads = follower.reads(&batch);
                let read = if reads.is_empty() {
                    Ok(Vec::new())
                } else {
                    taken.meanwhile(&mut events, self.store.ranges(reads)).await
                };
                // A past value compacted away (or a store gone): start over from a fresh listing.
                let Ok(read) = read else { break };
                follower.changes(&batch, &read);
            }
            // Unknowing at once, not after the pause: a change made meanwhile would be missed.
            follower.lost();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What a follower's watch holds for it in memory at most, in bytes (`weight`), while a read it
/// waits on is out. Past this the watch is left unread, and the store holds the rest.
const BACKLOG_BYTES: usize = 32 << 20;

/// The bytes of a change as held in memory: its keys and values, and the change itself (a burst of
/// deletes is mostly that).
fn weight(ev: &WatchEvent) -> usize {
    std::mem::size_of::<WatchEvent>()
        + match ev {
            WatchEvent::Put { kv, prev, .. } => size(kv) + prev.as_ref().map_or(0, size),
            WatchEvent::Delete { key, prev, .. } => key.len() + prev.as_ref().map_or(0, size),
            WatchEvent::Progress(_) => 0,
        }
}

/// The changes a follower's watch delivered while the follower waited on the store: a watch left
/// unread stalls etcd's sending to it, and etcd then reads the watch's history back from disk for
/// it, which cost the default shard more than the reads it waited on (see `FootprintFollower`).
struct Taken {
    backlog: std::collections::VecDeque<WatchEvent>,
    /// `weight` of what is in `backlog`.
    bytes: usize,
    /// Whether the watch can still deliver: false once it ended or failed.
    open: bool,
    /// Whether `backlog` has filled since it was last empty (warned of once until then).
    full: bool,
}

impl Default for Taken {
    fn default() -> Self {
        Taken { backlog: Default::default(), bytes: 0, open: true, full: false }
    }
}

impl Taken {
    /// The oldest change taken.
    fn pop(&mut self) -> Option<WatchEvent> {
        let ev = self.backlog.pop_front()?;
        self.bytes -= weight(&ev);
        self.full &= !self.backlog.is_empty();
        Some(ev)
    }

    /// `read`'s answer, the watch's changes taken into the backlog meanwhile, up to `BACKLOG_BYTES`.
    async fn meanwhile<T>(
        &mut self,
        events: &mut crate::storage::WatchStream,
        read: impl std::future::Future<Output = T>,
    ) -> T {
        tokio::pin!(read);
        loop {
            tokio::select! {
                biased;
                answer = &mut read => return answer,
                ev = events.next(), if self.open && self.bytes < BACKLOG_BYTES => match ev {
                    Some(Ok(ev)) => {
                        self.bytes += weight(&ev);
                        self.backlog.push_back(ev);
                        if self.bytes >= BACKLOG_BYTES && !self.full {
                            self.full = true;
                            tracing::warn!(bytes = self.bytes, "a store watch delivers faster than it is applied; the store holds the rest");
                        }
                    }
                    _ => self.open = false,
                },
            }
        }
    }
}

/// Feeds `quota::QuotaIndex`: it knows nothing while listing (each create reads its namespace's
/// quotas from the store meanwhile).
struct QuotaFollower {
    registry: Registry,
    prefix: String,
}

/// Which keys come and go is all it reads.
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
            WatchEvent::Put { kv, created: true, .. } => {
                self.registry.quota_index.quota_added(&self.prefix, &kv.key, 1)
            }
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
    /// For each change of the batch being applied, whether its key's past size was read.
    asked: Vec<bool>,
    /// Each LogicalCluster's size as last seen (by name), so that an update or a delete of one needs
    /// no read: clusters created or deleted by the thousand change theirs two or three times each,
    /// and a read each kept the watch waiting. Under 100 bytes per cluster, on the default shard.
    lc_sizes: std::collections::HashMap<Box<str>, usize>,
}

/// Take note of a LogicalCluster written or gone, as this registry's when it is on this registry's
/// shard (a cluster on another shard is, to this one's footprint, gone). Its name, when `key` is one.
fn observe<'k>(
    registry: &Registry,
    footprint: &Footprint,
    lc_prefix: &str,
    key: &'k str,
    value: Option<&[u8]>,
) -> Option<&'k str> {
    let name = key.strip_prefix(lc_prefix)?;
    let obj = value.and_then(|v| serde_json::from_slice::<Value>(v).ok());
    let here = obj.as_ref().filter(|o| crate::shard::of(o).unwrap_or(crate::shard::DEFAULT) == &*registry.shard);
    footprint.observe_cluster(name, here);
    Some(name)
}

impl FootprintFollower {
    fn observe(&self, footprint: &Footprint, key: &str, value: Option<&[u8]>) {
        observe(&self.registry, footprint, &self.lc_prefix, key, value);
    }

    /// The size of the LogicalCluster whose key is `key`, when known.
    fn lc_size(&self, key: &str) -> Option<usize> {
        key.strip_prefix(&self.lc_prefix).and_then(|name| self.lc_sizes.get(name)).copied()
    }

    /// Keep `lc_sizes` to what `key` is now (`kv`, or gone).
    fn remember(&mut self, key: &str, kv: Option<&KeyValue>) {
        let Some(name) = key.strip_prefix(&self.lc_prefix) else { return };
        match kv {
            Some(kv) => {
                self.lc_sizes.insert(name.into(), size(kv));
            }
            None => {
                self.lc_sizes.remove(name);
            }
        }
    }
}

/// Feeds `footprint` the LogicalClusters of a shard other than the default one, read from the
/// default shard's store.
struct ClusterFollower {
    registry: Registry,
    lc_prefix: String,
    /// The names listed so far, while listing.
    live: Option<std::collections::HashSet<Box<str>>>,
}

/// What each LogicalCluster is now is all it reads.
impl Follower for ClusterFollower {
    fn reset(&mut self) {
        self.live = Some(Default::default());
    }

    fn page(&mut self, kvs: &[KeyValue]) {
        for kv in kvs {
            if let Some(name) =
                observe(&self.registry, &self.registry.footprint, &self.lc_prefix, &kv.key, Some(&kv.value))
            {
                self.live.get_or_insert_with(Default::default).insert(name.into());
            }
        }
    }

    fn listed(&mut self, _: Revision) {
        if let Some(live) = self.live.take() {
            self.registry.footprint.keep_clusters(&live);
        }
    }

    fn change(&mut self, ev: &WatchEvent) {
        let (footprint, prefix) = (&self.registry.footprint, &self.lc_prefix);
        match ev {
            WatchEvent::Put { kv, .. } => {
                observe(&self.registry, footprint, prefix, &kv.key, Some(&kv.value));
            }
            WatchEvent::Delete { key, .. } => {
                observe(&self.registry, footprint, prefix, key, None);
            }
            WatchEvent::Progress(_) => {}
        }
    }

    fn lost(&mut self) {}
}

/// The key whose size before `ev` is needed and not carried, and the revision it is read at.
fn before_unknown(ev: &WatchEvent) -> Option<(&str, Revision)> {
    match ev {
        WatchEvent::Put { kv, prev: None, created: false } => Some((&kv.key, kv.mod_revision - 1)),
        WatchEvent::Delete { key, prev: None, revision } => Some((key, revision - 1)),
        _ => None,
    }
}

/// Previous values are not asked of etcd: for a watch that asks, etcd 3.4 reads each event's in a
/// read transaction of its own, which copies every write not yet committed to disk; while thousands
/// of clusters were deleted that was two thirds of what the default shard's etcd allocated. The old
/// sizes are read instead (`reads`), only where needed (a LogicalCluster's is remembered), and the
/// watch is read on while they are (`Taken`). Before LogicalClusters' sizes were remembered, the
/// reads of their updates held the watch back even so: etcd read its history again for it, and
/// deleting 10,000 clusters took 100-142 s on etcd 3.5, against 18 s now.
impl Follower for FootprintFollower {
    fn reset(&mut self) {
        self.fresh = Some(Footprint::default());
        self.lc_sizes.clear();
    }

    fn page(&mut self, kvs: &[KeyValue]) {
        let Some(fresh) = self.fresh.take() else { return };
        for kv in kvs {
            fresh.account(&self.registry.prefix, &kv.key, None, Some(size(kv)));
            self.observe(&fresh, &kv.key, Some(&kv.value));
            self.remember(&kv.key, Some(kv));
        }
        self.fresh = Some(fresh);
    }

    fn listed(&mut self, revision: Revision) {
        if let Some(fresh) = self.fresh.take() {
            self.registry.footprint.replace(fresh, self.registry.holds_root());
        }
        self.registry.footprint.counted(revision);
    }

    /// A LogicalCluster's change may mark its cluster deleted or live, which decides whether the
    /// deletes after it are read.
    fn ends_batch(&self, ev: &WatchEvent) -> bool {
        let key = match ev {
            WatchEvent::Put { kv, .. } => &kv.key,
            WatchEvent::Delete { key, .. } => key,
            WatchEvent::Progress(_) => return false,
        };
        key.starts_with(&self.lc_prefix)
    }

    fn reads(&mut self, evs: &[WatchEvent]) -> Vec<RangeRequest> {
        let footprint = &self.registry.footprint;
        self.asked.clear();
        let mut reads = Vec::new();
        for ev in evs {
            // An update's old size is always read; a delete's only where the cluster stays.
            let needed = |key: &str| {
                !matches!(ev, WatchEvent::Delete { .. }) || footprint.size_needed(&self.registry.prefix, key)
            };
            let read = before_unknown(ev).filter(|(key, _)| needed(key) && self.lc_size(key).is_none());
            self.asked.push(read.is_some());
            if let Some((key, at)) = read {
                reads.push(RangeRequest::key_at(key, at));
            }
        }
        reads
    }

    fn changes(&mut self, evs: &[WatchEvent], read: &[RangeResult]) {
        let registry = self.registry.clone();
        let (footprint, prefix) = (&registry.footprint, &registry.prefix);
        let mut answers = read.iter();
        let asked = std::mem::take(&mut self.asked);
        for (i, ev) in evs.iter().enumerate() {
            // The size a key had before `ev`: carried, read, remembered (a LogicalCluster's), or (a
            // key of a cluster being deleted) counted as nothing, its bytes going with the cluster.
            let mut before = |key: &str, carried: &Option<KeyValue>| match (carried, asked.get(i) == Some(&true)) {
                (Some(p), _) => Some(size(p)),
                (None, true) => {
                    let answer = answers.next().map_or(&[][..], |r| r.kvs.as_slice());
                    answer.first().filter(|kv| kv.key == key).map(size)
                }
                (None, false) => Some(self.lc_size(key).unwrap_or(0)),
            };
            match ev {
                WatchEvent::Put { kv, prev, created } => {
                    let before = if *created { None } else { before(&kv.key, prev) };
                    footprint.account(prefix, &kv.key, before, Some(size(kv)));
                    footprint.counted(ev.revision());
                    self.observe(footprint, &kv.key, Some(&kv.value));
                    self.remember(&kv.key, Some(kv));
                }
                WatchEvent::Delete { key, prev, .. } => {
                    footprint.account(prefix, key, before(key, prev), None);
                    footprint.counted(ev.revision());
                    self.observe(footprint, key, None);
                    self.remember(key, None);
                }
                WatchEvent::Progress(rev) => footprint.counted(*rev),
            }
        }
    }

    /// The counts stand until the next listing replaces them: they trail, but are not wrong.
    fn lost(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(i: usize, bytes: usize) -> WatchEvent {
        let kv = KeyValue { key: format!("/r/{i}"), value: vec![b'x'; bytes], mod_revision: i as Revision + 1 };
        WatchEvent::Put { kv, prev: None, created: true }
    }

    fn stream_of(evs: Vec<WatchEvent>) -> crate::storage::WatchStream {
        Box::pin(futures::stream::iter(evs.into_iter().map(Ok)))
    }

    #[tokio::test]
    async fn a_watch_is_read_on_while_a_read_is_out_up_to_its_bytes() {
        // Everything delivered meanwhile is taken, in order, and the read's answer returned.
        let mut taken = Taken::default();
        let mut events = stream_of((0..1_000).map(|i| put(i, 100)).collect());
        let slow = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            "answer"
        };
        assert_eq!(taken.meanwhile(&mut events, slow).await, "answer");
        assert_eq!(taken.backlog.len(), 1_000);
        assert!(taken.backlog.iter().enumerate().all(|(i, ev)| ev.revision() == i as Revision + 1));
        assert_eq!(taken.bytes, taken.backlog.iter().map(weight).sum::<usize>());
        // The stream ended meanwhile: it is not read again, and the next read still answers.
        assert!(!taken.open && !taken.full);
        assert_eq!(taken.meanwhile(&mut events, async { 1 }).await, 1);

        // Past its bytes it stops taking, and what it left is still the stream's, next in order.
        let mut taken = Taken::default();
        let mib = 1 << 20;
        let mut events = stream_of((0..40).map(|i| put(i, mib)).collect());
        taken.meanwhile(&mut events, tokio::time::sleep(Duration::from_millis(50))).await;
        let held = taken.backlog.len();
        assert_eq!(held, BACKLOG_BYTES.div_ceil(weight(&put(0, mib))));
        assert!(taken.full && taken.bytes >= BACKLOG_BYTES);
        let next = events.next().await.unwrap().unwrap();
        assert_eq!(next.revision(), held as Revision + 1);
        // Taken out one by one, it is empty again, and may warn again when it next fills.
        while taken.pop().is_some() {}
        assert!(taken.bytes == 0 && !taken.full);
    }
}
