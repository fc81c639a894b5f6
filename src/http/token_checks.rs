//! What a token's checks against the store found, remembered: a ServiceAccount token is valid only
//! while its account and the object it is bound to exist with the uids it names, and reading both
//! for every request would cost the store one or two reads per request of every tenant that uses a
//! kubeconfig from `kgate kubeconfig`, including those the watch cache answers without the store.
//!
//! kube-apiserver remembers a token's successful authentication for 10 s (`TokenSuccessCacheTTL`),
//! so a deleted account's token goes on working for up to 10 s there. Here a store watch of the
//! deletions of the kinds that end a token ends what was remembered of their cluster as soon as it
//! sees one go, and a DELETE or eviction through this replica ends it before it is answered, so
//! `kgate kubeconfig --revoke` ends its tokens at once, as before. The 10 s bound only covers a watch
//! that missed something.
//!
//! Bounded in bytes, not only in entries: the keys are the tokens' subjects, whose names tenants
//! choose. A tenant deleting its own pods over and over ends what is remembered for the clusters
//! that share its slot (a thousandth of them): they read the store again, as they did before any of
//! this, and nothing is trusted that should not be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::registry::Registry;
use crate::resources;
use crate::storage::WatchEvent;
use crate::token::Claims;

/// How long a check is trusted at most (kube-apiserver's `TokenSuccessCacheTTL`).
const TTL: Duration = Duration::from_secs(10);
/// Most subjects remembered at once.
const CAPACITY: usize = 50_000;
/// Most bytes of remembered subjects, as weighed (keys of about 100 bytes: some 40,000 of them).
const CAPACITY_BYTES: u64 = 8 << 20;
/// The core kinds whose deletion ends a token: its ServiceAccount and what it may be bound to.
pub const SUBJECTS: [&str; 4] = ["serviceaccounts", "pods", "secrets", "nodes"];

/// Weighs a remembered subject by its key's bytes, never 0.
#[derive(Clone)]
struct KeyBytes;

impl quick_cache::Weighter<Box<str>, (Instant, u64)> for KeyBytes {
    fn weight(&self, key: &Box<str>, _: &(Instant, u64)) -> u64 {
        // The key's bytes, and about what the cache keeps beside each entry.
        (96 + key.len()) as u64
    }
}

/// Subjects whose checks passed, each with when and at which epoch of its cluster's slot.
pub struct TokenChecks {
    /// Sharded, each shard's lock held for a lookup or an insert only; S3-FIFO when full, so a
    /// tenant presenting many accounts' tokens once does not push out those used on every request.
    passed: quick_cache::sync::Cache<Box<str>, (Instant, u64), KeyBytes>,
    /// Bumped when a subject of a cluster goes; a check that started before a bump is not
    /// remembered, and one remembered before it no longer counts.
    epochs: crate::epochs::Epochs,
    ttl: Duration,
}

impl Default for TokenChecks {
    fn default() -> Self {
        Self::with_ttl(TTL)
    }
}

impl TokenChecks {
    fn with_ttl(ttl: Duration) -> Self {
        TokenChecks {
            passed: quick_cache::sync::Cache::with_weighter(CAPACITY, CAPACITY_BYTES, KeyBytes),
            epochs: Default::default(),
            ttl,
        }
    }

    /// The epoch a check about to start runs in; pass it to [`TokenChecks::passed`].
    pub fn epoch(&self, claims: &Claims) -> u64 {
        self.epochs.of(&claims.cluster)
    }

    /// Whether `claims`' subjects passed a check that still counts.
    pub fn holds(&self, claims: &Claims) -> bool {
        self.passed.get(&*key(claims)).is_some_and(|(at, epoch)| at.elapsed() < self.ttl && epoch == self.epoch(claims))
    }

    /// `claims`' subjects were found, by a check that started at `epoch`.
    pub fn passed(&self, claims: &Claims, epoch: u64) {
        if epoch == self.epoch(claims) {
            self.passed.insert(key(claims), (Instant::now(), epoch));
        }
    }

    /// A subject of `cluster` went (or may have).
    pub fn invalidate(&self, cluster: &str) {
        self.epochs.bump(cluster);
    }

    /// Ends what is remembered of `cluster`'s checks when dropped: held across a write that may
    /// delete a subject, so that a check made while it ran is not trusted after it.
    pub fn ended_on_drop<'a>(&'a self, cluster: &'a str) -> EndOnDrop<'a> {
        EndOnDrop { checks: self, cluster }
    }

    /// Watch `registry`'s store (one shard's) for deletions of subjects, until aborted.
    pub async fn watch(self: Arc<Self>, registry: Registry) {
        // Futures in this one task, not spawned tasks: aborting this task at shutdown ends them all.
        let watches = SUBJECTS.map(|plural| {
            let (this, registry) = (self.clone(), registry.clone());
            async move {
                let def = resources::find("", "v1", plural).expect("the subjects are built in");
                let prefix = registry.collection(&def, None, None);
                loop {
                    let Ok(start) = registry.store.revision().await else {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    };
                    // Anything may have gone while the watch was down.
                    this.epochs.bump_all();
                    // A subject made again has another uid: only deletions matter, and etcd sends
                    // nothing else (every tenant's pod and secret writes are under these prefixes).
                    let Ok(mut w) = registry.store.watch_deletes(&prefix, start).await else {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    };
                    while let Some(Ok(ev)) = w.next().await {
                        if let WatchEvent::Delete { key, .. } = &ev {
                            if let Some(c) = registry.cluster_of(&def, key) {
                                this.invalidate(c);
                            }
                        }
                    }
                    // Ended (compaction, a store error): nothing remembered is trusted until it is
                    // back, rather than for up to `TTL`.
                    this.epochs.bump_all();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
        futures::future::join_all(watches).await;
    }
}

/// See [`TokenChecks::ended_on_drop`].
pub struct EndOnDrop<'a> {
    checks: &'a TokenChecks,
    cluster: &'a str,
}

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.checks.invalidate(self.cluster);
    }
}

/// The subjects a token's validity rests on: its cluster, its account and uid, its bound object.
fn key(c: &Claims) -> Box<str> {
    // NUL ends each part: no name, kind or uid holds one.
    let mut k = format!("{}\0{}\0{}\0{}", c.cluster, c.ns, c.sa, c.uid);
    if let Some(b) = &c.bound {
        k.push_str(&format!("\0{}\0{}\0{}", b.kind, b.name, b.uid));
    }
    k.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(cluster: &str, sa: &str) -> Claims {
        Claims {
            iss: "kgate".into(),
            sub: format!("system:serviceaccount:default:{sa}"),
            cluster: cluster.into(),
            ns: "default".into(),
            sa: sa.into(),
            uid: format!("uid-{sa}"),
            iat: 0,
            exp: 0,
            aud: Vec::new(),
            bound: None,
        }
    }

    #[test]
    fn a_check_counts_until_its_cluster_loses_a_subject_or_it_grows_old() {
        let checks = TokenChecks::default();
        let bot = claims("a", "bot");
        assert!(!checks.holds(&bot));
        checks.passed(&bot, checks.epoch(&bot));
        assert!(checks.holds(&bot));
        // Another cluster's deletion, in another slot, leaves it.
        let other = (0..).map(|i| format!("c{i}")).find(|c| !checks.epochs.share_slot(c, "a")).unwrap();
        checks.invalidate(&other);
        assert!(checks.holds(&bot));
        // Its own cluster's ends it, and a check that started before that is not remembered.
        let started = checks.epoch(&bot);
        checks.invalidate("a");
        assert!(!checks.holds(&bot));
        checks.passed(&bot, started);
        assert!(!checks.holds(&bot), "a check that began before a deletion may have read the subject before it");
        checks.passed(&bot, checks.epoch(&bot));
        assert!(checks.holds(&bot));
        // Another account, or the same name with another uid, was never checked.
        assert!(!checks.holds(&claims("a", "other")));
        let mut remade = bot.clone();
        remade.uid = "uid-new".into();
        assert!(!checks.holds(&remade));

        let short = TokenChecks::with_ttl(Duration::from_millis(20));
        short.passed(&bot, short.epoch(&bot));
        assert!(short.holds(&bot));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!short.holds(&bot), "trusted past its time");
    }
}
