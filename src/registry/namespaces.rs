//! The namespaces this replica last saw active, so a create in one costs a single store round trip.
//!
//! kube-apiserver's NamespaceLifecycle admission reads namespaces from an informer and creates anyway
//! if its copy is stale. Here a create instead names the namespace's revision as a guard the store
//! checks in the same transaction: a stale entry cannot let an object into a namespace that has since
//! started terminating or gone; the create is refused, the namespace re-read, and the create retried.

use dashmap::DashMap;

use crate::storage::{Guard, Revision};

/// Past this many entries the cache starts over: a miss costs one read, and the bound keeps a replica
/// serving 100,000 clusters small (about 100 bytes an entry).
const CAPACITY: usize = 16_384;

/// Namespace keys seen active, at their `mod_revision`.
///
/// A sharded `DashMap`: every create on every connection reads it and writes are rare (first sight of
/// a namespace, or a namespace that changed), so readers on different shards never wait on each other.
#[derive(Default)]
pub(super) struct ActiveNamespaces {
    seen: DashMap<String, Revision>,
}

impl ActiveNamespaces {
    /// The guard for a namespace seen active, if it is known.
    pub(super) fn guard(&self, key: &str) -> Option<Guard> {
        self.seen.get(key).map(|rev| Guard { key: key.to_string(), mod_revision: *rev })
    }

    /// Remember a namespace read active at `rev`.
    pub(super) fn saw_active(&self, key: &str, rev: Revision) {
        if self.seen.len() >= CAPACITY {
            self.seen.clear();
        }
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

    #[test]
    fn stays_bounded() {
        let c = ActiveNamespaces::default();
        for i in 0..CAPACITY * 2 + 1 {
            c.saw_active(&format!("/registry/core/namespaces/c{i}/default"), i as Revision);
        }
        assert!(c.seen.len() <= CAPACITY);
        let last = format!("/registry/core/namespaces/c{}/default", CAPACITY * 2);
        assert_eq!(c.guard(&last).map(|g| g.mod_revision), Some((CAPACITY * 2) as Revision));
        c.forget(&last);
        assert!(c.guard(&last).is_none());
    }
}
