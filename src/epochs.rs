//! Invalidation counts for caches of per-cluster answers (the RBAC indexes, the token checks): a
//! cluster's count is bumped when what was cached for it may have gone stale, and an answer computed
//! across a bump is not trusted. Counts live in a fixed number of slots that clusters hash to, so
//! nothing grows with the number of clusters, and one tenant bumping its own over and over costs
//! only the clusters sharing its slot (a thousandth of them) their caching, not every cluster.

use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of counts.
const SLOTS: usize = 1024;

/// The counts, one per slot.
pub struct Epochs(Box<[AtomicU64]>);

impl Default for Epochs {
    fn default() -> Self {
        Epochs((0..SLOTS).map(|_| AtomicU64::new(0)).collect())
    }
}

impl Epochs {
    fn slot(&self, cluster: &str) -> &AtomicU64 {
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(cluster);
        &self.0[(hash % SLOTS as u64) as usize]
    }

    /// `cluster`'s count now: read before computing an answer, compared after.
    pub fn of(&self, cluster: &str) -> u64 {
        self.slot(cluster).load(Ordering::Acquire)
    }

    /// What was cached for `cluster` may be stale.
    pub fn bump(&self, cluster: &str) {
        self.slot(cluster).fetch_add(1, Ordering::AcqRel);
    }

    /// What was cached for any cluster may be stale (a watch that was down).
    pub fn bump_all(&self) {
        for count in self.0.iter() {
            count.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether `a` and `b` share a slot.
    pub fn share_slot(&self, a: &str, b: &str) -> bool {
        std::ptr::eq(self.slot(a), self.slot(b))
    }
}
