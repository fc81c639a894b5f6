//! Bytes in flight: the memory that answers being sent hold, counted for the server and for each logical
//! cluster, so that a tenant whose clients ask for answers and never read them is refused (429) before it
//! can take the memory every tenant shares.
//!
//! What is counted, charged to the request's cluster and to the server:
//! - each chunk of a response from the moment it is handed to the connection until its bytes leave
//!   kgate (`http::meter`);
//! - what a tenant's list or watch still has to send: the cached objects it holds references to (each
//!   distinct allocation once: an object packed in a shared block holds the whole block);
//! - the events queued for a tenant's watcher and not yet sent.
//!
//! A request is refused once its cluster's count, or the server's, is at its limit; what is admitted below
//! it is charged whatever its size, so a cluster holds at most its limit and what its last admitted
//! requests hold, and no object is too large to read. `system:masters` is counted against the server but
//! never refused, as for requests in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use crate::status::ApiError;

/// How many bytes may be in flight; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// For the whole server.
    pub server: u64,
    /// For one logical cluster.
    pub per_cluster: u64,
}

impl Default for Limits {
    /// A cluster may hold an eighth of the server's budget, so it takes eight tenants whose clients all
    /// stop reading to refuse the others; 512 MiB in all leaves room for the caches and the store
    /// under a 1.5 GiB memory limit.
    fn default() -> Self {
        Limits { server: 512 << 20, per_cluster: 64 << 20 }
    }
}

/// What a list read from the store holds for each stored byte until it is sent: the objects as trees
/// (stored objects are mostly strings, a few times their JSON as a tree) and the answer rendered.
pub const LIST_TREE_FACTOR: u64 = 8;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The server's budget is spent.
    #[error("Too many bytes of responses in flight, please try again later.")]
    Server,
    /// The cluster's budget is spent.
    #[error(
        "Too many bytes of responses in flight in logical cluster {0:?} (limit {1} bytes), please try again later."
    )]
    Cluster(String, u64),
}

impl From<Refused> for ApiError {
    fn from(e: Refused) -> Self {
        ApiError::too_many_requests(e.to_string())
    }
}

/// One count of bytes, and whose it is.
#[derive(Debug)]
struct Tally {
    count: AtomicU64,
    /// The cluster's name (empty for the server's), shared with the map's key.
    name: Arc<str>,
}

impl Tally {
    fn get(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

/// The server's and every cluster's bytes in flight.
pub struct Budgets {
    limits: Limits,
    server: Tally,
    /// Per cluster with anything in flight. A `DashMap` because every request looks its cluster up once,
    /// and shards keep clusters from waiting on each other. An entry lives while an `Account` of its
    /// cluster does (each holds the `Arc`), so the map holds the clusters with something in flight,
    /// never every cluster there is.
    clusters: DashMap<Arc<str>, Arc<Tally>>,
    gauge: prometheus::IntGauge,
    refused: prometheus::IntCounterVec,
}

impl Budgets {
    /// Nothing in flight yet; `gauge` shows the server's count, `refused` counts refusals by limit.
    pub fn new(limits: Limits, gauge: prometheus::IntGauge, refused: prometheus::IntCounterVec) -> Arc<Budgets> {
        let server = Tally { count: AtomicU64::new(0), name: Arc::from("") };
        Arc::new(Budgets { limits, server, clusters: DashMap::new(), gauge, refused })
    }

    /// The account of a request to `cluster` (`None`: the wildcard, whose answers are the server's
    /// alone); refused when that cluster or the server is at its limit, unless `exempt`.
    pub fn account(self: &Arc<Self>, cluster: Option<&str>, exempt: bool) -> Result<Arc<Account>, Refused> {
        // Looked up under the shard's read lock first: a busy cluster's entry is there already.
        let tally = cluster.map(|c| match self.clusters.get(c) {
            Some(t) => t.clone(),
            None => {
                let name: Arc<str> = c.into();
                let tally = Tally { name: name.clone(), count: AtomicU64::new(0) };
                self.clusters.entry(name).or_insert_with(|| Arc::new(tally)).clone()
            }
        });
        let account = Arc::new(Account { budgets: self.clone(), cluster: tally, exempt });
        account.check()?;
        Ok(account)
    }

    /// Bytes in flight in the server.
    pub fn in_flight(&self) -> u64 {
        self.server.get()
    }

    /// Bytes in flight in one cluster.
    pub fn in_flight_of(&self, cluster: &str) -> u64 {
        self.clusters.get(cluster).map_or(0, |t| t.get())
    }

    /// Clusters with an account open.
    pub fn clusters_in_flight(&self) -> usize {
        self.clusters.len()
    }

    fn refuse(&self, why: Refused) -> Refused {
        self.refused
            .with_label_values(&[match why {
                Refused::Server => "server_bytes",
                Refused::Cluster(..) => "cluster_bytes",
            }])
            .inc();
        why
    }
}

/// What one request holds in flight, charged to its cluster and the server. Charges keep it alive.
pub struct Account {
    budgets: Arc<Budgets>,
    cluster: Option<Arc<Tally>>,
    exempt: bool,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account").field("cluster", &self.cluster.as_ref().map(|c| &c.name)).finish()
    }
}

impl Account {
    /// Refused if this account's cluster or the server is at its limit (never when exempt).
    pub fn check(&self) -> Result<(), Refused> {
        match self.at_limit(0) {
            None => Ok(()),
            Some(why) => Err(self.budgets.refuse(why)),
        }
    }

    /// Whether this account's cluster or the server is at its limit (never when exempt); unlike
    /// `check`, not counted as a refusal (a watcher cut off for it resumes later).
    pub fn over(&self) -> bool {
        self.at_limit(0).is_some()
    }

    /// Which limit this account is at, if any (none when exempt), not counting `own` bytes of the
    /// request asking.
    fn at_limit(&self, own: u64) -> Option<Refused> {
        if self.exempt {
            return None;
        }
        let limits = self.budgets.limits;
        if let Some(tally) = &self.cluster {
            if limits.per_cluster > 0 && tally.get().saturating_sub(own) >= limits.per_cluster {
                return Some(Refused::Cluster(tally.name.to_string(), limits.per_cluster));
            }
        }
        let server = self.budgets.server.get().saturating_sub(own);
        (limits.server > 0 && server >= limits.server).then_some(Refused::Server)
    }

    /// Charge a page of a list read from the store, `stored` bytes as stored, to `held`: such a list is
    /// held whole, as trees, until it is sent, so it is charged as it grows and refused once over.
    /// Refused for what the rest of the cluster (and server) holds, not for what this list holds
    /// already: a list larger than the budget still goes when nothing else is in flight, as one answer
    /// does, while lists read at once are refused once together they are over it.
    pub fn charge_read(self: &Arc<Self>, held: &mut Vec<Charge>, stored: usize) -> Result<(), Refused> {
        let own = held.iter().map(|c| c.bytes).sum();
        if let Some(why) = self.at_limit(own) {
            return Err(self.budgets.refuse(why));
        }
        held.push(self.charge(stored as u64 * LIST_TREE_FACTOR));
        Ok(())
    }

    /// Charge `bytes` until the returned charge is dropped.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Charge {
        self.add(bytes);
        Charge { account: self.clone(), bytes }
    }

    /// Charge `bytes`, unless this account's cluster or the server was at its limit already.
    pub fn try_charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, Refused> {
        self.check()?;
        Ok(self.charge(bytes))
    }

    fn add(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if let Some(t) = &self.cluster {
            t.count.fetch_add(bytes, Ordering::AcqRel);
        }
        self.budgets.server.count.fetch_add(bytes, Ordering::AcqRel);
        self.budgets.gauge.add(bytes as i64);
    }

    fn sub(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        if let Some(t) = &self.cluster {
            t.count.fetch_sub(bytes, Ordering::AcqRel);
        }
        self.budgets.server.count.fetch_sub(bytes, Ordering::AcqRel);
        self.budgets.gauge.sub(bytes as i64);
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        if let Some(tally) = self.cluster.take() {
            let name = tally.name.clone();
            drop(tally);
            // Under the entry's lock: an account opened meanwhile holds a clone, and keeps it.
            self.budgets.clusters.remove_if(&*name, |_, t| Arc::strong_count(t) == 1);
        }
    }
}

/// Bytes charged to an account until dropped.
#[derive(Debug)]
pub struct Charge {
    account: Arc<Account>,
    bytes: u64,
}

impl Charge {
    /// The bytes charged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Give back `bytes` of the charge (as what it stands for is sent), never more than it holds.
    pub fn release(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes);
        self.account.sub(bytes);
        self.bytes -= bytes;
    }

    /// Charge `bytes` more.
    pub fn grow(&mut self, bytes: u64) {
        self.account.add(bytes);
        self.bytes += bytes;
    }

    /// The account charged.
    pub fn account(&self) -> &Arc<Account> {
        &self.account
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.account.sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgets(server: u64, per_cluster: u64) -> Arc<Budgets> {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let refused = prometheus::IntCounterVec::new(prometheus::Opts::new("r", "r"), &["limit"]).unwrap();
        Budgets::new(Limits { server, per_cluster }, gauge, refused)
    }

    #[test]
    fn a_cluster_at_its_limit_is_refused_and_others_are_not() {
        let b = budgets(1000, 100);
        let a = b.account(Some("a"), false).unwrap();
        // One answer larger than the limit goes out while nothing else of the cluster is in flight.
        let big = a.charge(150);
        assert_eq!((b.in_flight_of("a"), b.in_flight()), (150, 150));
        assert_eq!(b.account(Some("a"), false).unwrap_err(), Refused::Cluster("a".into(), 100));
        assert!(a.try_charge(1).is_err());
        let other = b.account(Some("b"), false).unwrap();
        let _c = other.charge(10);
        drop(big);
        assert_eq!(b.in_flight_of("a"), 0);
        assert!(b.account(Some("a"), false).is_ok());
    }

    #[test]
    fn a_list_read_in_pages_is_refused_for_what_others_hold_not_for_itself() {
        let b = budgets(1 << 30, 100 * LIST_TREE_FACTOR);
        let a = b.account(Some("a"), false).unwrap();
        // Alone, a list of three times the budget reads every page.
        let mut alone = Vec::new();
        for _ in 0..3 {
            a.charge_read(&mut alone, 100).unwrap();
        }
        drop(alone);
        // Two at once: once the other holds the budget, a list's next page is refused.
        let (mut first, mut second) = (Vec::new(), Vec::new());
        a.charge_read(&mut first, 60).unwrap();
        a.charge_read(&mut second, 110).unwrap();
        assert_eq!(a.charge_read(&mut first, 10), Err(Refused::Cluster("a".into(), 100 * LIST_TREE_FACTOR)));
        drop(second);
        a.charge_read(&mut first, 10).unwrap();
    }

    #[test]
    fn the_server_limit_refuses_everyone_but_the_exempt() {
        let b = budgets(100, 80);
        let x = b.account(Some("x"), false).unwrap();
        let y = b.account(Some("y"), false).unwrap();
        let (_cx, _cy) = (x.charge(60), y.charge(40));
        assert_eq!(b.account(Some("z"), false).unwrap_err(), Refused::Server);
        assert!(b.account(Some("z"), true).is_ok());
        let wildcard = b.account(None, true).unwrap();
        let _w = wildcard.charge(5);
        assert_eq!(b.in_flight(), 105);
    }

    #[test]
    fn charges_shrink_and_grow_and_entries_go_with_their_last_account() {
        let b = budgets(0, 0);
        let a = b.account(Some("a"), false).unwrap();
        let mut c = a.charge(100);
        c.release(30);
        c.grow(5);
        assert_eq!((c.bytes(), b.in_flight_of("a")), (75, 75));
        c.release(1000);
        assert_eq!(b.in_flight(), 0);
        let again = b.account(Some("a"), false).unwrap();
        drop(a);
        assert_eq!(b.clusters_in_flight(), 1, "an open account keeps its cluster's entry");
        drop((c, again));
        assert_eq!(b.clusters_in_flight(), 0);
    }
}
