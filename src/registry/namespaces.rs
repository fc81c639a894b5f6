//! The namespaces this replica last saw active, so a create in one costs a single store round trip.
//!
//! kube-apiserver's NamespaceLifecycle admission reads namespaces from an informer and creates anyway
//! if its copy is stale. Here a create instead names the namespace's revision as a guard the store
//! checks in the same transaction: a stale entry cannot let an object into a namespace that has since
//! started terminating or gone; the create is refused, the namespace re-read, and the create retried.

use crate::storage::{Guard, Revision};

/// Most entries the cache holds: a miss costs one read, and the bound keeps a replica serving 100,000
/// clusters small (about 100 bytes an entry).
const CAPACITY: usize = 16_384;

/// Namespace keys seen active, at their `mod_revision`.
///
/// A sharded cache: every create on every connection reads it and writes are rare (first sight of a
/// namespace, or a namespace that changed), so readers on different shards never wait on each other.
/// When full it evicts by S3-FIFO, so a tenant creating into thousands of namespaces once does not push
/// out the namespaces that every other tenant writes into all the time.
pub(super) struct ActiveNamespaces {
    seen: quick_cache::sync::Cache<String, Revision>,
}

impl Default for ActiveNamespaces {
    fn default() -> Self {
        ActiveNamespaces { seen: quick_cache::sync::Cache::new(CAPACITY) }
    }
}

impl ActiveNamespaces {
    /// The guard for a namespace seen active, if it is known.
    pub(super) fn guard(&self, key: &str) -> Option<Guard> {
        self.seen.get(key).map(|rev| Guard { key: key.to_string(), mod_revision: rev })
    }

    /// Remember a namespace read active at `rev`.
    pub(super) fn saw_active(&self, key: &str, rev: Revision) {
        self.seen.insert(key.to_string(), rev);
    }

    /// Forget a namespace that changed, went, or is terminating.
    pub(super) fn forget(&self, key: &str) {
        self.seen.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood of namespaces each seen once stays within the bound, and the namespace written into
    /// between them all stays known (a cache that started over when full would lose it).
    #[test]
    fn a_flood_of_one_off_namespaces_stays_bounded_and_keeps_the_busy_one() {
        let c = ActiveNamespaces::default();
        let busy = "/registry/core/namespaces/busy/default";
        c.saw_active(busy, 1);
        for i in 0..CAPACITY * 4 {
            assert_eq!(c.guard(busy).map(|g| g.mod_revision), Some(1), "lost after {i} others");
            c.saw_active(&format!("/registry/core/namespaces/c{i}/default"), i as Revision + 2);
        }
        assert!(c.seen.len() <= CAPACITY, "{} entries", c.seen.len());
        let last = format!("/registry/core/namespaces/c{}/default", CAPACITY * 4 - 1);
        assert_eq!(c.guard(&last).map(|g| g.mod_revision), Some((CAPACITY * 4 + 1) as Revision));
        c.forget(&last);
        assert!(c.guard(&last).is_none());
    }
}
