//! What each logical cluster holds in the store (objects, stored bytes, namespaces, CRDs), counted
//! from one watch of every key rather than by scanning a cluster per update, and the limits a platform
//! sets on a LogicalCluster's `spec.limits` against it. kgate writes the counts to the LogicalCluster's
//! `status.usage` every few seconds, so `kubectl get logicalclusters` shows them.
//!
//! Every replica follows the same watch and so counts the same; a status write compares the stored
//! counts first, so N replicas write one change once, not N times. The limits are checked against
//! this replica's counts, which trail the store by the watch's delay, plus what this replica has
//! admitted and the watch has not yet counted (a [`Reservation`] per admitted write, held until the
//! watch passes the write's revision): a burst of concurrent writes through one replica never passes
//! a limit, and writes through several at once pass it by at most what the others have in flight.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use futures::StreamExt;
use serde_json::{json, Value};

use super::Registry;
use crate::cluster::ROOT;
use crate::resources::{self, ResourceDef};
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, StoreError};

/// How often changed counts are written to LogicalClusters' `status.usage`.
pub const USAGE_INTERVAL: Duration = Duration::from_secs(5);

/// Status writes at once while flushing: many clusters may change in one interval.
const FLUSH_CONCURRENCY: usize = 16;

/// How many times a status write retries after losing a compare-and-swap.
const MAX_RETRIES: usize = 8;

/// What a platform sets on a LogicalCluster's `spec.limits` to override the server-wide defaults for
/// that cluster alone. In-flight requests and watches are enforced at the edge (`http::inflight`),
/// the rest here, against the cluster's `Usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    /// `requestsInFlight`: requests of the cluster in flight at once (0: no limit).
    pub requests_in_flight: Option<usize>,
    /// `watches`: watches the cluster may hold open (0: no limit).
    pub watches: Option<usize>,
    /// `objects`: keys the cluster may hold.
    pub objects: Option<u64>,
    /// `storageBytes`: bytes its keys and values may take in the store.
    pub storage_bytes: Option<u64>,
    /// `namespaces`: namespaces it may hold.
    pub namespaces: Option<u64>,
    /// `customResourceDefinitions`: CRDs it may hold.
    pub custom_resource_definitions: Option<u64>,
}

impl TenantLimits {
    /// The limits of a LogicalCluster object, if it sets any.
    pub fn of(obj: &Value) -> Option<TenantLimits> {
        let l = &obj["spec"]["limits"];
        let n = |k: &str| l.get(k).and_then(Value::as_u64);
        let size = |k: &str| n(k).and_then(|n| usize::try_from(n).ok());
        let limits = TenantLimits {
            requests_in_flight: size("requestsInFlight"),
            watches: size("watches"),
            objects: n("objects"),
            storage_bytes: n("storageBytes"),
            namespaces: n("namespaces"),
            custom_resource_definitions: n("customResourceDefinitions"),
        };
        (limits != TenantLimits::default()).then_some(limits)
    }
}

/// A cluster's holdings in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Keys.
    pub objects: u64,
    /// Bytes of its keys and values.
    pub storage_bytes: u64,
    /// Namespaces.
    pub namespaces: u64,
    /// CustomResourceDefinitions.
    pub custom_resource_definitions: u64,
}

impl Usage {
    /// `status.usage` as written on a LogicalCluster.
    pub fn to_json(self) -> Value {
        json!({"objects": self.objects, "storageBytes": self.storage_bytes, "namespaces": self.namespaces,
               "customResourceDefinitions": self.custom_resource_definitions})
    }

    /// What a cluster holding exactly `items` (keys under `prefix` and their values) is counted as.
    pub fn of_keys(prefix: &str, items: &[(String, Vec<u8>)]) -> Usage {
        let mut usage = Usage::default();
        for (key, value) in items {
            if let Some(p) = parts(prefix, key) {
                usage.add(p.delta(None, Some(key.len() + value.len())));
            }
        }
        usage
    }

    fn of_status(obj: &Value) -> Option<Usage> {
        let u = obj["status"].get("usage")?;
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(Usage {
            objects: n("objects"),
            storage_bytes: n("storageBytes"),
            namespaces: n("namespaces"),
            custom_resource_definitions: n("customResourceDefinitions"),
        })
    }

    fn add(&mut self, d: Delta) {
        let apply = |v: &mut u64, by: i64| *v = v.saturating_add_signed(by);
        apply(&mut self.objects, d.objects);
        apply(&mut self.storage_bytes, d.bytes);
        apply(&mut self.namespaces, d.namespaces);
        apply(&mut self.custom_resource_definitions, d.crds);
    }
}

/// A change to a cluster's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Delta {
    objects: i64,
    bytes: i64,
    namespaces: i64,
    crds: i64,
}

impl Delta {
    /// `self` and `sign` times `other`.
    fn plus(self, other: Delta, sign: i64) -> Delta {
        Delta {
            objects: self.objects + sign * other.objects,
            bytes: self.bytes + sign * other.bytes,
            namespaces: self.namespaces + sign * other.namespaces,
            crds: self.crds + sign * other.crds,
        }
    }
}

/// Per-cluster usage and limits. One entry per cluster that holds a key (about 100 bytes), so 100,000
/// clusters cost about 10 MiB; a cluster whose last key goes leaves no entry.
///
/// `DashMap`s because every create reads them and only the watch task writes; `dirty` is a `Mutex`
/// around a set the watch task adds to and the flusher takes whole every interval, both brief.
#[derive(Default)]
pub struct Footprint {
    usage: DashMap<Box<str>, Holding>,
    /// `status.usage` as each LogicalCluster has it (absent: none written yet); an entry per
    /// LogicalCluster, so also which clusters exist to be written to.
    recorded: DashMap<Box<str>, Option<Usage>>,
    limits: DashMap<Box<str>, TenantLimits>,
    dirty: Mutex<HashSet<Box<str>>>,
    /// Counted once from a full read, so that limits hold.
    ready: AtomicBool,
    /// Writes this replica admitted under a cluster's limits that the watch has not counted yet, by
    /// cluster; entries only for clusters with limits and writes in flight, so a handful. A `DashMap`
    /// whose entry lock is held across an admission's check and its reservation, so two writes to one
    /// cluster cannot both take the last room.
    pending: DashMap<Box<str>, Held>,
    /// Clusters whose LogicalCluster is marked deleted: their keys' deletes are counted without their
    /// sizes, which would cost the store a past read each (a watch without previous values carries
    /// none), for bytes about to go with the cluster. Their bytes stay as they were until their last
    /// key goes, and the entry with it or with the LogicalCluster: bounded by the clusters being
    /// purged.
    deleting: dashmap::DashSet<Box<str>>,
    /// The revision the watch has counted up to.
    applied: AtomicI64,
    /// Names reservations.
    next: AtomicU64,
}

/// A write admitted and not yet counted: what it asked for, and once stored the revision it landed at.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    delta: Delta,
    landed: Option<i64>,
}

/// One cluster's writes admitted and not yet counted, with their sum kept as they come and go: an
/// admission reads the sum, so a burst of a thousand writes costs each one no walk of the others.
#[derive(Debug, Default)]
struct Held {
    writes: Vec<Pending>,
    total: Delta,
}

impl Held {
    fn push(&mut self, p: Pending) {
        self.total = self.total.plus(p.delta, 1);
        self.writes.push(p);
    }

    fn remove(&mut self, id: u64) {
        self.retain(|p| p.id != id);
    }

    fn retain(&mut self, keep: impl Fn(&Pending) -> bool) {
        let total = &mut self.total;
        self.writes.retain(|p| {
            let kept = keep(p);
            if !kept {
                *total = total.plus(p.delta, -1);
            }
            kept
        });
    }

    fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// Room held for one admitted write until the watch counts it: dropped before [`Reservation::landed`],
/// the write did not happen and the room is given back at once.
pub struct Reservation {
    footprint: Arc<Footprint>,
    cluster: Box<str>,
    /// `None` once landed: the entry is the watch's to remove.
    id: Option<u64>,
}

impl Reservation {
    /// The write was stored at `revision`: its room is held until the watch counts that revision.
    pub fn landed(mut self, revision: i64) {
        let Some(id) = self.id.take() else { return };
        if self.footprint.applied.load(Ordering::Acquire) >= revision {
            return self.footprint.unreserve(&self.cluster, id);
        }
        if let Some(mut held) = self.footprint.pending.get_mut(&self.cluster) {
            if let Some(p) = held.writes.iter_mut().find(|p| p.id == id) {
                p.landed = Some(revision);
            }
        }
        // The watch may have passed `revision` between the look above and the mark, its pruning
        // missing this entry: look again (the watch sets `applied` before it prunes).
        if self.footprint.applied.load(Ordering::Acquire) >= revision {
            self.footprint.unreserve(&self.cluster, id);
        }
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation").field("cluster", &self.cluster).field("id", &self.id).finish()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.footprint.unreserve(&self.cluster, id);
        }
    }
}

/// What one cluster holds: its totals, and its objects by resource (kube's `apiserver_storage_objects`
/// label: `configmaps`, `deployments.apps`), a few entries for most clusters (more for one with many
/// CRDs, which `spec.limits.customResourceDefinitions` bounds).
#[derive(Debug, Default)]
struct Holding {
    usage: Usage,
    by_resource: Vec<(Box<str>, u64)>,
}

/// The parts of an object's key that matter here: `{prefix}/{group}/{resource}/{cluster}/...`.
struct KeyParts<'a> {
    group: &'a str,
    resource: &'a str,
    cluster: &'a str,
}

impl KeyParts<'_> {
    /// The change to its cluster's usage of this key going from `before` to `after` (sizes of key and
    /// value, absent when the key is not there).
    fn delta(&self, before: Option<usize>, after: Option<usize>) -> Delta {
        let size = |s: Option<usize>| s.map_or(0, |s| i64::try_from(s).unwrap_or(i64::MAX));
        let count = i64::from(after.is_some()) - i64::from(before.is_some());
        let is = |g: &str, r: &str| self.group == g && self.resource == r;
        Delta {
            objects: count,
            bytes: size(after) - size(before),
            namespaces: if is("core", "namespaces") { count } else { 0 },
            crds: if is("apiextensions.k8s.io", "customresourcedefinitions") { count } else { 0 },
        }
    }
}

fn parts<'a>(prefix: &str, key: &'a str) -> Option<KeyParts<'a>> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let mut it = rest.splitn(4, '/');
    let (group, resource, cluster) = (it.next()?, it.next()?, it.next()?);
    // An object's name (or namespace and name) follows; a shorter key is not an object's.
    it.next()?;
    Some(KeyParts { group, resource, cluster })
}

impl Footprint {
    /// The limits set on `cluster`, if any.
    pub fn limits(&self, cluster: &str) -> Option<TenantLimits> {
        self.limits.get(cluster).map(|l| *l)
    }

    /// Whether a delete of `key` must be counted with the key's size: not when its cluster is being
    /// deleted (see `deleting`), nor when it is no object's key.
    pub(super) fn size_needed(&self, prefix: &str, key: &str) -> bool {
        parts(prefix, key).is_some_and(|p| !self.deleting.contains(p.cluster))
    }

    /// Whether every key has been counted and the counts are kept current (usage accounting is on and
    /// its first listing is read).
    pub fn counting(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// What `cluster` holds, as last seen.
    pub fn usage(&self, cluster: &str) -> Usage {
        self.usage.get(cluster).map(|h| h.usage).unwrap_or_default()
    }

    /// `cluster`'s objects by resource, as last seen, in resource order.
    pub fn objects_by_resource(&self, cluster: &str) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = match self.usage.get(cluster) {
            Some(h) => h.by_resource.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
            None => Vec::new(),
        };
        all.sort();
        all
    }

    /// Refuse a write that would take `cluster` past a limit its LogicalCluster sets: a new object of
    /// `def` (`new`), or `grow` more stored bytes. 403 in kube's quota words, as a ResourceQuota's.
    /// Admitted under limits, the write holds its room until the watch counts it (see [`Reservation`]).
    pub fn admit(
        self: &Arc<Self>,
        cluster: &str,
        def: &ResourceDef,
        name: &str,
        new: bool,
        grow: i64,
    ) -> ApiResult<Option<Reservation>> {
        let Some(limits) = self.limits(cluster) else { return Ok(None) };
        if !self.ready.load(Ordering::Acquire) {
            return Ok(None);
        }
        if !new && grow <= 0 {
            // Nothing asked for: deletes' and shrinking updates' room is never held.
            return Ok(None);
        }
        let is = |g: &str, p: &str| def.storage_group() == g && def.plural == p;
        let asked = Delta {
            objects: i64::from(new),
            bytes: grow.max(0),
            namespaces: i64::from(new && is("core", "namespaces")),
            crds: i64::from(new && is("apiextensions.k8s.io", "customresourcedefinitions")),
        };
        // Held while checking and reserving: see `pending`.
        let mut pending = self.pending.entry(cluster.into()).or_default();
        let mut used = self.usage(cluster);
        used.add(pending.total);
        if let Err(e) = self.check(cluster, def, name, &limits, used, new, grow) {
            let empty = pending.is_empty();
            drop(pending);
            if empty {
                self.pending.remove_if(cluster, |_, held| held.is_empty());
            }
            return Err(e);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        pending.push(Pending { id, delta: asked, landed: None });
        Ok(Some(Reservation { footprint: self.clone(), cluster: cluster.into(), id: Some(id) }))
    }

    fn unreserve(&self, cluster: &str, id: u64) {
        if let Some(mut held) = self.pending.get_mut(cluster) {
            held.remove(id);
        }
        self.pending.remove_if(cluster, |_, held| held.is_empty());
    }

    /// The watch has counted every change up to `revision`: the writes that landed by then are in the
    /// counts, and hold no room of their own any longer.
    pub(super) fn counted(&self, revision: i64) {
        self.applied.fetch_max(revision, Ordering::AcqRel);
        if self.pending.is_empty() {
            return;
        }
        for mut held in self.pending.iter_mut() {
            held.retain(|p| p.landed.is_none_or(|r| r > revision));
        }
        self.pending.retain(|_, held| !held.is_empty());
    }

    /// The check of `admit`, against `used` (the counts and what is reserved).
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        cluster: &str,
        def: &ResourceDef,
        name: &str,
        limits: &TenantLimits,
        used: Usage,
        new: bool,
        grow: i64,
    ) -> ApiResult<()> {
        let is = |g: &str, p: &str| def.storage_group() == g && def.plural == p;
        let mut checks: Vec<(&str, u64, u64, Option<u64>)> = Vec::new();
        if new {
            checks.push(("objects", 1, used.objects, limits.objects));
            if is("core", "namespaces") {
                checks.push(("namespaces", 1, used.namespaces, limits.namespaces));
            }
            if is("apiextensions.k8s.io", "customresourcedefinitions") {
                checks.push((
                    "customResourceDefinitions",
                    1,
                    used.custom_resource_definitions,
                    limits.custom_resource_definitions,
                ));
            }
        }
        if grow > 0 {
            checks.push(("storageBytes", grow.unsigned_abs(), used.storage_bytes, limits.storage_bytes));
        }
        let over: Vec<_> = checks
            .into_iter()
            .filter_map(|(name, asked, used, limit)| {
                limit.filter(|&l| used.saturating_add(asked) > l).map(|l| (name, asked, used, l))
            })
            .collect();
        if over.is_empty() {
            return Ok(());
        }
        // kube's words: each of requested, used and limited lists the exceeded names, comma-separated.
        let list = |pick: fn(&(&str, u64, u64, u64)) -> u64| {
            over.iter().map(|o| format!("{}={}", o.0, pick(o))).collect::<Vec<_>>().join(",")
        };
        let why = format!(
            "exceeded quota: logicalcluster/{cluster}, requested: {}, used: {}, limited: {}",
            list(|o| o.1),
            list(|o| o.2),
            list(|o| o.3),
        );
        Err(ApiError::forbidden_object(&def.plural, &def.group, name, why))
    }

    /// Account one key's change: `before` and `after` are its sizes (key and value), absent when the
    /// key was not there.
    pub(super) fn account(&self, prefix: &str, key: &str, before: Option<usize>, after: Option<usize>) {
        let Some(p) = parts(prefix, key) else { return };
        let d = p.delta(before, after);
        let count = d.objects;
        let gone = {
            // Every write on every replica passes here: the cluster's name is copied only for a
            // cluster not yet counted.
            let mut h = match self.usage.get_mut(p.cluster) {
                Some(h) => h,
                None => self.usage.entry(p.cluster.into()).or_default(),
            };
            h.usage.add(d);
            if count != 0 {
                let label = match p.group {
                    "core" => p.resource.to_string(),
                    g => format!("{}.{g}", p.resource),
                };
                match h.by_resource.iter().position(|(r, _)| **r == *label) {
                    Some(i) => {
                        h.by_resource[i].1 = h.by_resource[i].1.saturating_add_signed(count);
                        if h.by_resource[i].1 == 0 {
                            h.by_resource.swap_remove(i);
                        }
                    }
                    None if count > 0 => h.by_resource.push((label.into(), count.unsigned_abs())),
                    None => {}
                }
            }
            h.usage.objects == 0
        };
        if gone {
            self.usage.remove_if(p.cluster, |_, h| h.usage.objects == 0);
            self.deleting.remove(p.cluster);
        }
        // Only clusters with a LogicalCluster are written to: the set stays within the clusters that
        // exist (on a replica that does not lead, nobody empties it).
        if self.recorded.contains_key(p.cluster) {
            let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
            if !dirty.contains(p.cluster) {
                dirty.insert(p.cluster.into());
            }
        }
    }

    /// Take note of a LogicalCluster's limits and recorded usage (`None`: it is gone).
    pub(super) fn observe_cluster(&self, name: &str, obj: Option<&Value>) {
        let live = obj.filter(|o| o["metadata"].get("deletionTimestamp").is_none());
        // Marked deleted: the purge is taking its keys. Gone, or live again, it is not (a cluster
        // whose finalizer was taken off by hand goes with its keys left, and its name may come back).
        if obj.is_some() && live.is_none() {
            if !self.deleting.contains(name) {
                self.deleting.insert(name.into());
            }
        } else {
            self.deleting.remove(name);
        }
        match live.and_then(TenantLimits::of) {
            Some(l) => {
                self.limits.insert(name.into(), l);
            }
            None => {
                self.limits.remove(name);
            }
        }
        match live {
            Some(o) => {
                let recorded = Usage::of_status(o);
                if recorded != Some(self.usage(name)) {
                    // A new cluster, or counts someone overwrote: written at the next flush.
                    self.dirty.lock().unwrap_or_else(|e| e.into_inner()).insert(name.into());
                }
                self.recorded.insert(name.into(), recorded);
            }
            None => {
                self.recorded.remove(name);
                self.dirty.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
            }
        }
    }
}

impl Registry {
    /// `run_usage_status` when `on`.
    pub async fn run_usage_status_if(self, on: bool) {
        if on {
            self.run_usage_status().await
        }
    }

    /// Every `USAGE_INTERVAL`, write the counts of clusters whose counts changed to their
    /// LogicalClusters' `status.usage`. Runs until the task is aborted.
    pub async fn run_usage_status(self) {
        let mut tick = tokio::time::interval(USAGE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.flush_usage().await;
        }
    }

    /// Write the changed counts once.
    pub async fn flush_usage(&self) {
        let dirty = std::mem::take(&mut *self.footprint.dirty.lock().unwrap_or_else(|e| e.into_inner()));
        let changed: Vec<Box<str>> = dirty
            .into_iter()
            .filter(|c| {
                let now = self.footprint.usage(c);
                self.footprint.recorded.get(c).is_some_and(|r| *r != Some(now))
            })
            .collect();
        futures::stream::iter(changed)
            .for_each_concurrent(FLUSH_CONCURRENCY, |cluster| async move {
                if let Err(e) = self.write_usage(&cluster).await {
                    tracing::debug!(error = %e, cluster = %cluster, "writing a logical cluster's usage; the next change retries");
                }
            })
            .await;
    }

    /// Set `status.usage` of `cluster`'s LogicalCluster to its counts, unless it has them already.
    async fn write_usage(&self, cluster: &str) -> Result<(), StoreError> {
        let lc = resources::logical_cluster_def();
        let key = keys::object(&self.prefix, lc.storage_group(), &lc.plural, ROOT, None, cluster);
        for _ in 0..MAX_RETRIES {
            let Some(kv) = self.store.get(&key).await? else { return Ok(()) };
            let Ok(mut obj) = serde_json::from_slice::<Value>(&kv.value) else { return Ok(()) };
            let now = self.footprint.usage(cluster);
            if obj["metadata"].get("deletionTimestamp").is_some() || Usage::of_status(&obj) == Some(now) {
                return Ok(());
            }
            // Being bootstrapped: the write that marks it Ready records what the bootstrap wrote, and
            // compares the revision it was created at, which this write would move (the bootstrap
            // then takes its objects back and writes them again). Ready, it is noted again, and
            // written if its counts differ still.
            if obj["status"]["phase"] == crate::tenancy::PHASE_INITIALIZING {
                return Ok(());
            }
            let Some(status) = obj.as_object_mut().map(|m| m.entry("status").or_insert_with(|| json!({}))) else {
                return Ok(());
            };
            if !status.is_object() {
                *status = json!({});
            }
            status["usage"] = now.to_json();
            match self.store.update(&key, super::encode(&obj), kv.mod_revision).await {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Footprint {
    /// Take `fresh`'s counts and notes; what changed since is marked to be written.
    /// `clusters`: whether `fresh` noted the LogicalClusters too (the default shard's listing holds
    /// them); another shard's are noted by a follower of their own, and kept.
    pub(super) fn replace(&self, fresh: Footprint, clusters: bool) {
        let Footprint { usage, recorded, limits, deleting, .. } = fresh;
        let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
        if clusters {
            dirty.retain(|c| recorded.contains_key(c));
            self.recorded.retain(|c, _| recorded.contains_key(c));
            for (c, r) in recorded {
                self.recorded.insert(c, r);
            }
            self.limits.retain(|c, _| limits.contains_key(c));
            for (c, l) in limits {
                self.limits.insert(c, l);
            }
        }
        // A cluster whose last key went while the watch was down is written too (as holding nothing).
        self.usage.retain(|c, _| {
            let kept = usage.contains_key(c);
            if !kept && self.recorded.contains_key(c) {
                dirty.insert(c.clone());
            }
            kept
        });
        for (c, u) in usage {
            if self.recorded.contains_key(&c) {
                dirty.insert(c.clone());
            }
            self.usage.insert(c, u);
        }
        if clusters {
            self.deleting.retain(|c| deleting.contains(c));
            for c in deleting {
                self.deleting.insert(c);
            }
        }
        self.deleting.retain(|c| self.usage.contains_key(c));
        self.ready.store(true, Ordering::Release);
    }

    /// Forget the LogicalClusters not in `live` (a shard's cluster follower relisted them).
    pub(super) fn keep_clusters(&self, live: &std::collections::HashSet<Box<str>>) {
        let mut dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
        dirty.retain(|c| live.contains(c));
        self.recorded.retain(|c, _| live.contains(c));
        self.limits.retain(|c, _| live.contains(c));
        self.deleting.retain(|c| self.usage.contains_key(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_written_together_count_as_the_watch_counts_them() {
        let p = "/registry";
        let items: Vec<(String, Vec<u8>)> = [
            ("/registry/core/namespaces/team-a/default", 100),
            ("/registry/core/configmaps/team-a/default/x", 50),
            ("/registry/apiextensions.k8s.io/customresourcedefinitions/team-a/w.example.com", 500),
            ("/registry/core/configmaps", 7),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), vec![b'x'; n]))
        .collect();
        let f = Footprint::default();
        for (k, v) in &items {
            f.account(p, k, None, Some(k.len() + v.len()));
        }
        let counted = Usage::of_keys(p, &items);
        assert_eq!(counted, f.usage("team-a"));
        assert_eq!((counted.objects, counted.namespaces, counted.custom_resource_definitions), (3, 1, 1));
    }

    #[test]
    fn keys_are_counted_per_cluster_and_refused_past_a_limit() {
        let f = Arc::new(Footprint::default());
        let p = "/registry";
        f.account(p, "/registry/core/namespaces/team-a/default", None, Some(100));
        f.account(p, "/registry/core/configmaps/team-a/default/x", None, Some(50));
        f.account(p, "/registry/core/configmaps/team-a/default/x", Some(50), Some(80));
        f.account(p, "/registry/core/configmaps/team-b/default/y", None, Some(10));
        f.account(p, "/registry/apiextensions.k8s.io/customresourcedefinitions/team-a/w.example.com", None, Some(500));
        let a = f.usage("team-a");
        assert_eq!(a, Usage { objects: 3, storage_bytes: 680, namespaces: 1, custom_resource_definitions: 1 });
        assert_eq!(f.usage("team-b").objects, 1);
        // The last key gone, the cluster leaves no entry.
        f.account(p, "/registry/core/configmaps/team-b/default/y", Some(10), None);
        assert!(!f.usage.contains_key("team-b"));
        assert_eq!(
            f.objects_by_resource("team-a"),
            [
                ("configmaps".to_string(), 1),
                ("customresourcedefinitions.apiextensions.k8s.io".to_string(), 1),
                ("namespaces".to_string(), 1)
            ]
        );

        let cm = resources::find("", "v1", "configmaps").unwrap();
        let ns = resources::find("", "v1", "namespaces").unwrap();
        f.observe_cluster(
            "team-a",
            Some(&json!({"metadata": {}, "spec": {"limits": {"objects": 3, "namespaces": 5, "storageBytes": 700}}})),
        );
        assert!(
            f.admit("team-a", &cm, "x", true, 10).is_ok(),
            "not counted yet: no limit holds before the first count"
        );
        f.ready.store(true, Ordering::Release);
        let e = f.admit("team-a", &cm, "x", true, 10).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "configmaps \"x\" is forbidden: exceeded quota: logicalcluster/team-a, requested: objects=1, used: objects=3, limited: objects=3"
        );
        assert!(f.admit("team-a", &cm, "x", false, 20).is_ok(), "an update within the bytes");
        let e = f.admit("team-a", &ns, "x", false, 21).unwrap_err();
        assert!(
            e.message.contains("requested: storageBytes=21, used: storageBytes=680, limited: storageBytes=700"),
            "{}",
            e.message
        );
        assert!(f.admit("team-a", &cm, "x", false, -100).is_ok(), "shrinking is always allowed");
        assert!(f.admit("team-b", &cm, "x", true, 1_000_000).is_ok(), "no limits set");
        // Deleting the LogicalCluster drops its limits.
        f.observe_cluster("team-a", None);
        assert!(f.admit("team-a", &cm, "x", true, 10).is_ok());
    }

    /// A cluster marked deleted has its keys' deletes counted without reading their sizes, and leaves
    /// no trace once its last key goes; a live cluster's, and one whose LogicalCluster is gone, are
    /// read.
    #[test]
    fn a_deleted_clusters_keys_go_without_their_sizes() {
        let f = Footprint::default();
        let p = "/registry";
        let (ns, cm) = ("/registry/core/namespaces/c/default", "/registry/core/configmaps/c/default/x");
        f.account(p, ns, None, Some(100));
        f.account(p, cm, None, Some(50));
        f.observe_cluster("c", Some(&json!({"metadata": {}})));
        assert!(f.size_needed(p, cm), "a live cluster's deletes count their sizes");
        assert!(!f.size_needed(p, "/registry/core/configmaps"), "no object's key");
        f.observe_cluster("c", Some(&json!({"metadata": {"deletionTimestamp": "2026-11-27T00:00:00Z"}})));
        assert!(!f.size_needed(p, cm), "being deleted");
        f.account(p, cm, Some(0), None);
        assert_eq!((f.usage("c").objects, f.usage("c").storage_bytes), (1, 150), "bytes go with the cluster");
        f.account(p, ns, Some(0), None);
        assert!(!f.usage.contains_key("c") && !f.deleting.contains("c"), "no entry once the last key went");
        // Marked, then gone with keys left (its finalizer taken off by hand): its name may come
        // back, so the keys left are counted with their sizes.
        f.account(p, cm, None, Some(50));
        f.observe_cluster("c", Some(&json!({"metadata": {"deletionTimestamp": "2026-11-27T00:00:00Z"}})));
        assert!(!f.size_needed(p, cm));
        f.observe_cluster("c", None);
        assert!(f.size_needed(p, cm) && !f.deleting.contains("c"));
    }

    /// Writes admitted and not yet counted hold their room: a burst cannot pass a limit before the
    /// watch catches up, a write that did not happen gives its room back, and one that landed holds it
    /// until the watch counts its revision.
    #[test]
    fn admitted_writes_hold_their_room_until_counted() {
        let f = Arc::new(Footprint::default());
        let p = "/registry";
        let cm = resources::find("", "v1", "configmaps").unwrap();
        f.observe_cluster("c", Some(&json!({"metadata": {}, "spec": {"limits": {"objects": 2}}})));
        f.ready.store(true, Ordering::Release);
        let first = f.admit("c", &cm, "a", true, 10).unwrap().expect("held under limits");
        let second = f.admit("c", &cm, "b", true, 10).unwrap().unwrap();
        assert_eq!(f.admit("c", &cm, "x", true, 10).unwrap_err().code, 403, "the burst's third is refused");
        let held = |f: &Footprint| f.pending.get("c").map(|h| h.total).unwrap_or_default();
        assert_eq!(held(&f), Delta { objects: 2, bytes: 20, namespaces: 0, crds: 0 }, "the refused one holds nothing");
        drop(second);
        assert_eq!(held(&f), Delta { objects: 1, bytes: 10, namespaces: 0, crds: 0 }, "a dropped one gives it back");
        let second = f.admit("c", &cm, "b", true, 10).unwrap().unwrap();
        // Both stored, at revisions 5 and 6; the watch has counted up to 4.
        f.counted(4);
        first.landed(5);
        second.landed(6);
        assert!(f.admit("c", &cm, "x", true, 10).is_err(), "landed, not yet counted: still held");
        f.account(p, "/registry/core/configmaps/c/default/a", None, Some(10));
        f.counted(5);
        assert!(f.admit("c", &cm, "x", true, 10).is_err(), "counted once, not twice");
        f.account(p, "/registry/core/configmaps/c/default/b", None, Some(10));
        f.counted(6);
        assert!(f.pending.is_empty(), "nothing held once counted");
        f.account(p, "/registry/core/configmaps/c/default/b", Some(10), None);
        f.counted(7);
        let late = f.admit("c", &cm, "y", true, 10).unwrap().unwrap();
        // Landed at a revision the watch has passed already: nothing left held.
        late.landed(7);
        assert!(f.pending.is_empty());
    }
}
