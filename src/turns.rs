//! Turns at work every tenant shares (heavy writes, namespace cleanups): a bounded number at once, and
//! at most half of them (at least one) of one logical cluster, so that one tenant's queue of work cannot
//! hold up everyone else's.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Where turns are handed out.
pub struct Turns {
    /// One permit per turn being taken. A tokio `Semaphore`: waiting is waiting in the async world, in
    /// the order asked (it is fair), which is what lets a second cluster in behind a first.
    permits: Arc<Semaphore>,
    /// Most turns of one cluster at once.
    per_cluster: usize,
    /// Each cluster's own permits, for the clusters taking turns now. A `DashMap` because every turn
    /// looks its cluster up once; an entry goes with the last turn holding it or waiting for one.
    clusters: DashMap<Box<str>, Arc<Semaphore>>,
}

/// A turn, given back when dropped.
pub struct Turn {
    /// Its cluster's entry, let go after both permits.
    _entry: Entry,
    /// Both permits, taken out when dropped so that the cluster's entry can go after them.
    held: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
}

/// A cluster's place in `Turns::clusters`, removed when dropped if nothing else holds it: when a turn
/// ends, or when a wait for one is given up (a request that timed out, a client gone).
struct Entry {
    turns: Arc<Turns>,
    cluster: Box<str>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        // Under the entry's lock: a turn that took the semaphore meanwhile holds a clone, and keeps it.
        self.turns.clusters.remove_if(&self.cluster, |_, s| Arc::strong_count(s) == 1);
    }
}

impl Turns {
    /// At most `at_once` turns at once, and at most half of them (at least one) of one cluster.
    pub fn new(at_once: usize) -> Turns {
        let at_once = at_once.max(1);
        Turns {
            permits: Arc::new(Semaphore::new(at_once)),
            per_cluster: (at_once / 2).max(1),
            clusters: DashMap::new(),
        }
    }

    /// A turn of `cluster`: once its cluster's and then the server's permit are free.
    pub async fn take(self: &Arc<Self>, cluster: &str) -> Turn {
        let entry = Entry { turns: self.clone(), cluster: cluster.into() };
        let own =
            self.clusters.entry(cluster.into()).or_insert_with(|| Arc::new(Semaphore::new(self.per_cluster))).clone();
        let own = own.acquire_owned().await.expect("the semaphore is never closed");
        let permit = self.permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        Turn { _entry: entry, held: Some((own, permit)) }
    }

    /// How many clusters have turns now or waiting.
    pub fn clusters(&self) -> usize {
        self.clusters.len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // The permits first: the entry, dropped after this, goes only if no permit holds its semaphore.
        drop(self.held.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One cluster takes at most half of the turns: another's turn comes while it waits, and entries go
    /// with their last turn.
    #[tokio::test]
    async fn one_cluster_does_not_queue_the_others() {
        let turns = Arc::new(Turns::new(2));
        let greedy = [turns.take("greedy").await];
        let waiting = {
            let turns = turns.clone();
            tokio::spawn(async move { drop(turns.take("greedy").await) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "greedy's second turn waits for its first");
        let polite = tokio::time::timeout(Duration::from_secs(1), turns.take("polite")).await;
        assert!(polite.is_ok(), "another cluster's turn comes at once");
        drop((polite, greedy));
        waiting.await.unwrap();
        assert_eq!(turns.clusters(), 0);
        // A wait given up leaves no entry either.
        let held = turns.take("a").await;
        let gone = tokio::time::timeout(Duration::from_millis(20), turns.take("a")).await;
        assert!(gone.is_err());
        drop(held);
        assert_eq!(turns.clusters(), 0);
    }
}
