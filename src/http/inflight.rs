//! Admission by requests in flight: the server-wide budgets of kube-apiserver's
//! `--max-requests-inflight` and `--max-mutating-requests-inflight`, and each logical cluster's share,
//! so that one tenant's flood is answered 429 while every other tenant is still served.
//!
//! When a budget is spent, a request waits in its cluster's queue (bounded) rather than being refused
//! at once, and each unit given back goes to the waiting cluster that holds the fewest units (in turn
//! among equals), as kube's API Priority and Fairness dispatches its queues: a tenant sending ten
//! times more than the others is served once nobody holding less waits, so its flood takes what the
//! others leave, not their share. A request still waiting after `Limits::queue_wait` is answered 429
//! with Retry-After.
//!
//! As in kube-apiserver, watches are long-running and not counted against the server-wide budgets,
//! and `system:masters` is never refused nor queued. Each cluster also has a cap on open watches,
//! because every watch holds memory for as long as it is open.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::auth::Identity;
use crate::metrics::InFlightMetrics;
use dashmap::DashMap;
use http::Method;

/// How much may be in flight; 0 means no limit, as for kube-apiserver's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Non-mutating requests (get, list, discovery) in flight, server-wide.
    pub requests: usize,
    /// Mutating requests (create, update, patch, delete) in flight, server-wide.
    pub mutating: usize,
    /// Requests of either kind in flight in one logical cluster.
    pub per_cluster: usize,
    /// Watches open in one logical cluster.
    pub watches_per_cluster: usize,
    /// How long a request may wait for a unit of a spent server-wide budget; zero refuses at once.
    pub queue_wait: Duration,
}

/// Requests of one cluster that may wait for one budget at once; more are refused at once. A
/// cluster's waiting requests hold connections and memory, so they are few.
const QUEUE_PER_CLUSTER: usize = 32;
/// Requests that may wait for one budget server-wide, as a multiple of that budget (and at least two
/// clusters' queues).
const QUEUE_FACTOR: usize = 4;

fn queue_cap(limit: usize) -> usize {
    (limit * QUEUE_FACTOR).max(2 * QUEUE_PER_CLUSTER)
}

impl Default for Limits {
    /// kube-apiserver's server-wide defaults; a cluster's share is a quarter of the write budget and
    /// an eighth of the read budget, so it takes four tenants flooding writes at once, or eight
    /// flooding reads, before the others are refused too (kube-apiserver's fair queuing, APF, would
    /// share the budget out; kgate shares what waits by turns, see the module).
    fn default() -> Self {
        Limits {
            requests: 400,
            mutating: 200,
            per_cluster: 50,
            watches_per_cluster: 1000,
            queue_wait: Duration::from_secs(5),
        }
    }
}

/// What a request costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// get, list and every non-resource read.
    ReadOnly,
    /// Anything that may write.
    Mutating,
    /// A watch, open until the client or the server ends it.
    Watch,
}

impl Kind {
    /// The kind of a request by its method and whether it asks to watch.
    pub fn of(method: &Method, watch: bool) -> Kind {
        match *method {
            Method::GET | Method::HEAD if watch => Kind::Watch,
            Method::GET | Method::HEAD => Kind::ReadOnly,
            _ => Kind::Mutating,
        }
    }
}

/// Whether a caller is never refused: members of `system:masters`, as kube-apiserver never throttles
/// them, so the platform team can reach a cluster its tenant is flooding. `caller` must be who
/// authenticated, before any impersonation: a tenant's own cluster-admin may impersonate that group in
/// its cluster, and must not escape the limits by it.
pub fn exempt(caller: &Identity) -> bool {
    caller.is_master()
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The server-wide budget of this kind is spent.
    #[error("Too many requests, please try again later.")]
    Server,
    /// The server-wide budget stayed spent for as long as the request could wait.
    #[error("Too many requests, please try again later.")]
    Waited,
    /// The cluster's share is spent.
    #[error("Too many requests in flight in logical cluster {0:?}, please try again later.")]
    Cluster(String),
    /// The cluster has as many watches open as it may.
    #[error("Too many watches open in logical cluster {0:?} (limit {1}), please try again later.")]
    Watches(String, usize),
}

/// What is in flight, server-wide and by cluster.
pub struct InFlight {
    limits: Limits,
    /// The gauges of `readonly` and `mutating`, looked up once.
    gauges: [prometheus::IntGauge; 2],
    refused: prometheus::IntCounterVec,
    /// The read-only and the mutating budget. A mutex each: admission and release change a count and,
    /// when the budget is spent, the queues together, for a moment and never across an await.
    budgets: [Mutex<Budget>; 2],
    /// Per cluster: (requests, watches) in flight. A `DashMap` because each admission and release
    /// touches one cluster's entry for a moment, and its shards keep different clusters from waiting
    /// on each other. An entry goes when both counts reach zero, so the map holds the clusters with
    /// something in flight, never every cluster there is.
    clusters: DashMap<String, (usize, usize)>,
}

/// One server-wide budget: what it has given out, and who waits for it.
#[derive(Default)]
struct Budget {
    in_flight: usize,
    /// Units each cluster holds now, for the clusters holding any (at most the budget's size).
    holding: HashMap<String, usize>,
    /// Clusters with requests waiting, in the order their next one is served.
    turn: VecDeque<String>,
    /// Each waiting cluster's requests, first come first served within the cluster.
    waiting: HashMap<String, VecDeque<Waiter>>,
    /// Requests waiting, over every cluster.
    queued: usize,
    next_id: u64,
}

/// A request waiting for a unit, which `hand_on` sends it.
struct Waiter {
    id: u64,
    to: tokio::sync::oneshot::Sender<()>,
}

impl Budget {
    fn hold(&mut self, cluster: &str, n: isize) {
        let held = self.holding.entry(cluster.to_string()).or_insert(0);
        *held = held.saturating_add_signed(n);
        if *held == 0 {
            self.holding.remove(cluster);
        }
    }

    /// Take `id` of `cluster` out of the queue; false if it was not there (a unit was sent to it).
    fn leave(&mut self, cluster: &str, id: u64) -> bool {
        let Some(q) = self.waiting.get_mut(cluster) else { return false };
        let Some(at) = q.iter().position(|w| w.id == id) else { return false };
        q.remove(at);
        self.queued -= 1;
        if q.is_empty() {
            self.waiting.remove(cluster);
            self.turn.retain(|c| c != cluster);
        }
        true
    }
}

/// Holds a request's place until it is dropped, with the response body that carries it.
pub struct Ticket {
    owner: Arc<InFlight>,
    cluster: String,
    kind: Kind,
    /// It holds a unit of its kind's server-wide budget too (watches never do).
    server: bool,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("cluster", &self.cluster).field("kind", &self.kind).finish()
    }
}

impl InFlight {
    /// Nothing in flight yet.
    pub fn new(limits: Limits, metrics: &InFlightMetrics) -> Arc<InFlight> {
        Arc::new(InFlight {
            limits,
            gauges: ["readOnly", "mutating"].map(|kind| metrics.current.with_label_values(&[kind])),
            refused: metrics.refused.clone(),
            budgets: Default::default(),
            clusters: DashMap::new(),
        })
    }

    /// The server-wide budget of `kind` (its index) and its limit; watches have none.
    fn budget_of(&self, kind: Kind) -> Option<(usize, usize)> {
        match kind {
            Kind::ReadOnly => Some((0, self.limits.requests)),
            Kind::Mutating => Some((1, self.limits.mutating)),
            Kind::Watch => None,
        }
    }

    fn lock(&self, budget: usize) -> std::sync::MutexGuard<'_, Budget> {
        // The counts stay consistent through a panic elsewhere: each change is one statement.
        self.budgets[budget].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `from`'s unit of `budget` back: to the waiting cluster that holds the fewest (the first in
    /// turn among equals), or to the budget. Fewest first is what makes a flood fair: a tenant that
    /// keeps many requests waiting holds many units already, and gets the next only when nobody who
    /// holds fewer waits, as APF's dispatch favours the queue with the least in service.
    fn hand_on(&self, budget: usize, from: &str) {
        let mut b = self.lock(budget);
        b.hold(from, -1);
        loop {
            let next = (0..b.turn.len()).min_by_key(|&i| b.holding.get(&b.turn[i]).copied().unwrap_or(0));
            let Some(cluster) = next.and_then(|i| b.turn.remove(i)) else { break };
            let Some(q) = b.waiting.get_mut(&cluster) else { continue };
            let next = q.pop_front();
            if q.is_empty() {
                b.waiting.remove(&cluster);
            } else {
                b.turn.push_back(cluster.clone());
            }
            let Some(next) = next else { continue };
            b.queued -= 1;
            // Sent under the lock, so a waiter that leaves sees either its place or its unit.
            if next.to.send(()).is_ok() {
                b.hold(&cluster, 1);
                return;
            }
        }
        b.in_flight -= 1;
        self.gauges[budget].dec();
    }

    fn refuse(&self, why: Refused) -> Refused {
        let limit = match why {
            Refused::Server => "server",
            Refused::Waited => "queue",
            Refused::Cluster(_) => "cluster",
            Refused::Watches(..) => "watches",
        };
        self.refused.with_label_values(&[limit]).inc();
        why
    }

    /// Admit a request to `cluster` (`*` for the wildcard), waiting its turn if the server's budget is
    /// spent, or refuse it; `exempt` requests get no ticket (see [`exempt`]).
    pub async fn admit(self: &Arc<Self>, exempt: bool, cluster: &str, kind: Kind) -> Result<Option<Ticket>, Refused> {
        self.admit_within(exempt, cluster, kind, None).await
    }

    /// `admit`, with the cluster's own limits (`spec.limits`) in place of the defaults where set.
    pub async fn admit_within(
        self: &Arc<Self>,
        exempt: bool,
        cluster: &str,
        kind: Kind,
        own: Option<crate::tenancy::TenantLimits>,
    ) -> Result<Option<Ticket>, Refused> {
        let own = own.unwrap_or_default();
        let (per_cluster, watches) = (
            own.requests_in_flight.unwrap_or(self.limits.per_cluster),
            own.watches.unwrap_or(self.limits.watches_per_cluster),
        );
        if exempt {
            return Ok(None);
        }
        // The cluster's share first: a tenant at its share must not take server-wide units, even for
        // a moment, that others would then be refused for.
        let taken = {
            let mut counts = self.clusters.entry(cluster.to_string()).or_insert((0, 0));
            let (n, limit) = match kind {
                Kind::Watch => (&mut counts.1, watches),
                _ => (&mut counts.0, per_cluster),
            };
            let free = limit == 0 || *n < limit;
            *n += usize::from(free);
            free
        };
        if !taken {
            self.release_cluster(cluster, kind, false);
            return Err(self.refuse(match kind {
                Kind::Watch => Refused::Watches(cluster.to_string(), watches),
                _ => Refused::Cluster(cluster.to_string()),
            }));
        }
        // From here the cluster's unit is the ticket's: given back when it drops, and so also when the
        // request is dropped while it waits below (its client went away).
        let mut ticket = Ticket { owner: self.clone(), cluster: cluster.to_string(), kind, server: false };
        if let Some((budget, limit)) = self.budget_of(kind) {
            if let Err(why) = self.take(budget, limit, cluster).await {
                return Err(self.refuse(why));
            }
            ticket.server = true;
        }
        Ok(Some(ticket))
    }

    /// A unit of `budget` (of `limit`, 0: unlimited) for a request of `cluster`: at once if one is
    /// free, else when it is this cluster's turn, within `queue_wait`.
    async fn take(self: &Arc<Self>, budget: usize, limit: usize, cluster: &str) -> Result<(), Refused> {
        let (id, rx) = {
            let mut b = self.lock(budget);
            if limit == 0 || b.in_flight < limit {
                b.in_flight += 1;
                b.hold(cluster, 1);
                self.gauges[budget].inc();
                return Ok(());
            }
            let waiting = b.waiting.get(cluster).map_or(0, VecDeque::len);
            if self.limits.queue_wait.is_zero() || waiting >= QUEUE_PER_CLUSTER || b.queued >= queue_cap(limit) {
                return Err(Refused::Server);
            }
            let (to, rx) = tokio::sync::oneshot::channel();
            let id = b.next_id;
            b.next_id += 1;
            b.queued += 1;
            if waiting == 0 {
                b.turn.push_back(cluster.to_string());
            }
            b.waiting.entry(cluster.to_string()).or_default().push_back(Waiter { id, to });
            (id, rx)
        };
        let mut place = Place { owner: self.clone(), budget, cluster: cluster.to_string(), id, rx: Some(rx) };
        let sent = tokio::time::timeout(self.limits.queue_wait, place.rx.as_mut().expect("set above")).await;
        if let Ok(Ok(())) = sent {
            place.rx = None;
            return Ok(());
        }
        // Timed out: `place` leaves the queue as it goes, or hands on a unit sent meanwhile.
        Err(Refused::Waited)
    }

    /// Give back the cluster's unit of `kind` when `counted` (a request its share refused took none);
    /// the cluster's entry goes when nothing of it is left in flight.
    fn release_cluster(&self, cluster: &str, kind: Kind, counted: bool) {
        if counted {
            if let Some(mut counts) = self.clusters.get_mut(cluster) {
                match kind {
                    Kind::Watch => counts.1 -= 1,
                    _ => counts.0 -= 1,
                }
            }
        }
        // Checked under the entry's lock, so an admission that came in meanwhile keeps it.
        self.clusters.remove_if(cluster, |_, counts| *counts == (0, 0));
    }

    /// Requests of `cluster` in flight (waiting ones included) and watches it has open.
    pub fn cluster_counts(&self, cluster: &str) -> (usize, usize) {
        self.of_cluster(cluster)
    }

    /// Requests of `cluster` in flight and watches it has open.
    fn of_cluster(&self, cluster: &str) -> (usize, usize) {
        self.clusters.get(cluster).map(|c| *c).unwrap_or((0, 0))
    }

    /// Clusters with anything in flight.
    #[cfg(test)]
    fn clusters_in_flight(&self) -> usize {
        self.clusters.len()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some((budget, _)) = self.owner.budget_of(self.kind).filter(|_| self.server) {
            self.owner.hand_on(budget, &self.cluster);
        }
        self.owner.release_cluster(&self.cluster, self.kind, true);
    }
}

/// A request's place in its cluster's queue, for as long as it waits. Dropped without its unit (timed
/// out, or the client went away and the request with it), it leaves the queue, or, if a unit was sent
/// to it meanwhile, hands that unit on.
struct Place {
    owner: Arc<InFlight>,
    budget: usize,
    cluster: String,
    id: u64,
    /// `None` once the unit is received and belongs to the request.
    rx: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        let left = self.owner.lock(self.budget).leave(&self.cluster, self.id);
        if !left && rx.try_recv().is_ok() {
            self.owner.hand_on(self.budget, &self.cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Budgets that refuse at once when spent.
    fn limits(requests: usize, per_cluster: usize, watches: usize) -> Arc<InFlight> {
        queueing(requests, per_cluster, watches, Duration::ZERO)
    }

    fn queueing(requests: usize, per_cluster: usize, watches: usize, wait: Duration) -> Arc<InFlight> {
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().inflight;
        let limits =
            Limits { requests, mutating: requests, per_cluster, watches_per_cluster: watches, queue_wait: wait };
        InFlight::new(limits, &metrics)
    }

    impl InFlight {
        fn readonly(&self) -> usize {
            self.lock(0).in_flight
        }
    }

    #[tokio::test]
    async fn a_cluster_at_its_share_is_refused_while_others_are_admitted() {
        let f = limits(10, 2, 0);
        let a1 = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        let a2 = f.admit(false, "a", Kind::Mutating).await.unwrap();
        assert_eq!(f.admit(false, "a", Kind::ReadOnly).await.unwrap_err(), Refused::Cluster("a".into()));
        let b = f.admit(false, "b", Kind::ReadOnly).await.unwrap();
        assert!(b.is_some());
        assert_eq!(f.of_cluster("a"), (2, 0));
        drop(a1);
        let a3 = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        assert!(a3.is_some());
        drop((a2, a3, b));
        assert_eq!(f.clusters_in_flight(), 0, "entries go when nothing is in flight");
        assert_eq!(f.readonly() + f.lock(1).in_flight, 0);
    }

    #[tokio::test]
    async fn the_server_budget_is_shared_and_a_refusal_takes_nothing() {
        let f = limits(2, 5, 0);
        let _held =
            [f.admit(false, "a", Kind::ReadOnly).await.unwrap(), f.admit(false, "b", Kind::ReadOnly).await.unwrap()];
        assert_eq!(f.admit(false, "c", Kind::ReadOnly).await.unwrap_err(), Refused::Server);
        assert_eq!(f.of_cluster("c"), (0, 0));
        assert_eq!(f.clusters_in_flight(), 2);
        // A cluster at its share is refused by it, without touching the server's budget.
        let f = limits(3, 1, 0);
        let _a = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        assert_eq!(f.admit(false, "a", Kind::ReadOnly).await.unwrap_err(), Refused::Cluster("a".into()));
        assert_eq!(f.readonly(), 1);
        let f = limits(2, 5, 0);
        let held =
            [f.admit(false, "a", Kind::ReadOnly).await.unwrap(), f.admit(false, "b", Kind::ReadOnly).await.unwrap()];
        // Mutating requests have a budget of their own.
        assert!(f.admit(false, "c", Kind::Mutating).await.unwrap().is_some());
        drop(held);
        assert_eq!(f.readonly(), 0);
        assert_eq!(f.clusters_in_flight(), 0);
    }

    #[tokio::test]
    async fn watches_have_their_own_cap_and_masters_are_never_refused() {
        let f = limits(1, 1, 2);
        let _w = [f.admit(false, "a", Kind::Watch).await.unwrap(), f.admit(false, "a", Kind::Watch).await.unwrap()];
        assert_eq!(f.admit(false, "a", Kind::Watch).await.unwrap_err(), Refused::Watches("a".into(), 2));
        // Watches are not requests in flight: a read still gets in.
        let r = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        assert!(r.is_some());
        let admin = Identity::from_cert("admin".into(), vec![crate::auth::MASTERS.into()]);
        for kind in [Kind::ReadOnly, Kind::Mutating, Kind::Watch] {
            assert!(f.admit(exempt(&admin), "a", kind).await.unwrap().is_none(), "{kind:?}");
        }
        assert_eq!(f.of_cluster("a"), (1, 2));
    }

    #[tokio::test]
    async fn zero_means_no_limit() {
        let f = limits(0, 0, 0);
        let mut held = Vec::new();
        for _ in 0..1000 {
            held.push(f.admit(false, "a", Kind::Mutating).await.unwrap());
        }
        assert_eq!(f.of_cluster("a"), (1000, 0));
        drop(held);
        assert_eq!(f.clusters_in_flight(), 0);
    }

    #[test]
    fn watch_is_told_from_its_method() {
        assert_eq!(Kind::of(&Method::GET, true), Kind::Watch);
        assert_eq!(Kind::of(&Method::HEAD, false), Kind::ReadOnly);
        assert_eq!(Kind::of(&Method::POST, true), Kind::Mutating);
        assert_eq!(Kind::of(&Method::DELETE, false), Kind::Mutating);
    }

    /// Waiting requests are served by turns over their clusters: a cluster with ten waiting gets the
    /// next unit like a cluster with one, not ten times as often.
    #[tokio::test]
    async fn a_spent_budget_is_handed_on_by_turns_over_the_clusters_waiting() {
        let f = queueing(2, 20, 0, Duration::from_secs(60));
        let held =
            [f.admit(false, "a", Kind::Mutating).await.unwrap(), f.admit(false, "b", Kind::Mutating).await.unwrap()];
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        let mut waiting = Vec::new();
        for (cluster, n) in [("flood", 10), ("calm", 1)] {
            for i in 0..n {
                let (f, tx) = (f.clone(), order_tx.clone());
                waiting.push(tokio::spawn(async move {
                    let t = f.admit(false, cluster, Kind::Mutating).await.unwrap();
                    tx.send(format!("{cluster}{i}")).unwrap();
                    // Held a moment, then given back for the next.
                    tokio::task::yield_now().await;
                    drop(t);
                }));
                // Queued in this order.
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(f.lock(1).queued, 11);
        drop(held);
        for w in waiting {
            w.await.unwrap();
        }
        let mut served = Vec::new();
        while let Ok(s) = order.try_recv() {
            served.push(s);
        }
        let calm_at = served.iter().position(|s| s == "calm0").unwrap();
        assert!(calm_at <= 2, "the calm cluster waits for one unit of the flood's at most: {served:?}");
        assert_eq!(served.len(), 11);
        let (in_flight, queued) = {
            let b = f.lock(1);
            (b.in_flight, b.queued)
        };
        assert_eq!((in_flight, queued, f.clusters_in_flight()), (0, 0, 0));
    }

    /// A cluster holding units already waits behind one holding none, though it came first.
    #[tokio::test]
    async fn the_next_unit_goes_to_the_waiting_cluster_holding_fewest() {
        let f = queueing(2, 20, 0, Duration::from_secs(60));
        let held = [
            f.admit(false, "big", Kind::Mutating).await.unwrap(),
            f.admit(false, "big", Kind::Mutating).await.unwrap(),
        ];
        let first = tokio::spawn({
            let f = f.clone();
            async move { f.admit(false, "big", Kind::Mutating).await.map(|_| "big") }
        });
        tokio::task::yield_now().await;
        let second = tokio::spawn({
            let f = f.clone();
            async move { f.admit(false, "small", Kind::Mutating).await }
        });
        tokio::task::yield_now().await;
        let [one, two] = held;
        drop(one);
        let small = second.await.unwrap().unwrap();
        tokio::task::yield_now().await;
        assert!(!first.is_finished(), "big, holding one already, waits while small holds its unit");
        drop(two);
        assert_eq!(first.await.unwrap(), Ok("big"));
        drop(small);
    }

    #[tokio::test]
    async fn a_request_waits_its_time_then_is_refused_and_leaves_no_trace() {
        let f = queueing(1, 20, 0, Duration::from_millis(20));
        let held = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        assert_eq!(f.admit(false, "b", Kind::ReadOnly).await.unwrap_err(), Refused::Waited);
        assert_eq!((f.lock(0).queued, f.of_cluster("b")), (0, (0, 0)));
        // One that goes away while waiting (its client disconnected) leaves no place behind.
        let gone = tokio::spawn({
            let f = f.clone();
            async move { f.admit(false, "c", Kind::ReadOnly).await }
        });
        tokio::task::yield_now().await;
        assert_eq!(f.lock(0).queued, 1);
        gone.abort();
        let _ = gone.await;
        assert_eq!(f.lock(0).queued, 0);
        assert_eq!(f.of_cluster("c"), (0, 0), "its cluster's unit came back too");
        drop(held);
        assert_eq!(f.readonly(), 0, "the unit went back to the budget");
        // A cluster's queue is bounded: past it, refused at once.
        let f = queueing(1, 100, 0, Duration::from_secs(60));
        let _held = f.admit(false, "a", Kind::ReadOnly).await.unwrap();
        let mut queued = Vec::new();
        for cluster in ["d", "e"] {
            for _ in 0..QUEUE_PER_CLUSTER {
                let f = f.clone();
                queued.push(tokio::spawn(async move { f.admit(false, cluster, Kind::ReadOnly).await }));
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(f.lock(0).queued, queue_cap(1));
        assert_eq!(f.admit(false, "d", Kind::ReadOnly).await.unwrap_err(), Refused::Server, "d's queue is full");
        assert_eq!(f.admit(false, "z", Kind::ReadOnly).await.unwrap_err(), Refused::Server, "so is the server's");
        for q in queued {
            q.abort();
        }
    }
}
