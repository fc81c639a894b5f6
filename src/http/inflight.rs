//! Admission by requests in flight: the server-wide budgets of kube-apiserver's
//! `--max-requests-inflight` and `--max-mutating-requests-inflight`, and each logical cluster's share,
//! so that one tenant's flood is answered 429 while every other tenant is still served.
//!
//! As in kube-apiserver, watches are long-running and not counted against the server-wide budgets,
//! and `system:masters` is never refused. Each cluster also has a cap on open watches, because every
//! watch holds memory for as long as it is open.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
}

impl Default for Limits {
    /// kube-apiserver's server-wide defaults; a cluster's share is a quarter of the write budget and
    /// an eighth of the read budget, so it takes four tenants flooding writes at once, or eight
    /// flooding reads, before the others are refused too (kube-apiserver's fair queuing, APF, would
    /// share the budget out instead; kgate has none).
    fn default() -> Self {
        Limits { requests: 400, mutating: 200, per_cluster: 50, watches_per_cluster: 1000 }
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
    readonly: AtomicUsize,
    mutating: AtomicUsize,
    /// Per cluster: (requests, watches) in flight. A `DashMap` because each admission and release
    /// touches one cluster's entry for a moment, and its shards keep different clusters from waiting
    /// on each other. An entry goes when both counts reach zero, so the map holds the clusters with
    /// something in flight, never every cluster there is.
    clusters: DashMap<String, (usize, usize)>,
}

/// Holds a request's place until it is dropped, with the response body that carries it.
pub struct Ticket {
    owner: Arc<InFlight>,
    cluster: String,
    kind: Kind,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("cluster", &self.cluster).field("kind", &self.kind).finish()
    }
}

/// Take one unit of `counter` unless it is at `limit` (0: unlimited).
fn take(counter: &AtomicUsize, limit: usize) -> bool {
    counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (limit == 0 || n < limit).then_some(n + 1)).is_ok()
}

impl InFlight {
    /// Nothing in flight yet.
    pub fn new(limits: Limits, metrics: &InFlightMetrics) -> Arc<InFlight> {
        Arc::new(InFlight {
            limits,
            gauges: ["readOnly", "mutating"].map(|kind| metrics.current.with_label_values(&[kind])),
            refused: metrics.refused.clone(),
            readonly: AtomicUsize::new(0),
            mutating: AtomicUsize::new(0),
            clusters: DashMap::new(),
        })
    }

    /// The server-wide counter of `kind`, its limit and its gauge; watches have none.
    fn server_counter(&self, kind: Kind) -> Option<(&AtomicUsize, usize, &prometheus::IntGauge)> {
        match kind {
            Kind::ReadOnly => Some((&self.readonly, self.limits.requests, &self.gauges[0])),
            Kind::Mutating => Some((&self.mutating, self.limits.mutating, &self.gauges[1])),
            Kind::Watch => None,
        }
    }

    fn refuse(&self, why: Refused) -> Refused {
        let limit = match why {
            Refused::Server => "server",
            Refused::Cluster(_) => "cluster",
            Refused::Watches(..) => "watches",
        };
        self.refused.with_label_values(&[limit]).inc();
        why
    }

    /// Admit a request to `cluster` (`*` for the wildcard), or refuse it; `exempt` requests get no
    /// ticket (see [`exempt`]).
    pub fn admit(self: &Arc<Self>, exempt: bool, cluster: &str, kind: Kind) -> Result<Option<Ticket>, Refused> {
        if exempt {
            return Ok(None);
        }
        // The cluster's share first: a tenant at its share must not take server-wide units, even for
        // a moment, that others would then be refused for.
        let taken = {
            let mut counts = self.clusters.entry(cluster.to_string()).or_insert((0, 0));
            let (n, limit) = match kind {
                Kind::Watch => (&mut counts.1, self.limits.watches_per_cluster),
                _ => (&mut counts.0, self.limits.per_cluster),
            };
            let free = limit == 0 || *n < limit;
            *n += usize::from(free);
            free
        };
        if !taken {
            self.release_cluster(cluster, kind, false);
            return Err(self.refuse(match kind {
                Kind::Watch => Refused::Watches(cluster.to_string(), self.limits.watches_per_cluster),
                _ => Refused::Cluster(cluster.to_string()),
            }));
        }
        if let Some((counter, limit, gauge)) = self.server_counter(kind) {
            if !take(counter, limit) {
                self.release_cluster(cluster, kind, true);
                return Err(self.refuse(Refused::Server));
            }
            gauge.inc();
        }
        Ok(Some(Ticket { owner: self.clone(), cluster: cluster.to_string(), kind }))
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

    /// Requests of `cluster` in flight and watches it has open.
    #[cfg(test)]
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
        if let Some((counter, _, gauge)) = self.owner.server_counter(self.kind) {
            counter.fetch_sub(1, Ordering::AcqRel);
            gauge.dec();
        }
        self.owner.release_cluster(&self.cluster, self.kind, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(requests: usize, per_cluster: usize, watches: usize) -> Arc<InFlight> {
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().inflight;
        InFlight::new(Limits { requests, mutating: requests, per_cluster, watches_per_cluster: watches }, &metrics)
    }

    #[test]
    fn a_cluster_at_its_share_is_refused_while_others_are_admitted() {
        let f = limits(10, 2, 0);
        let a1 = f.admit(false, "a", Kind::ReadOnly).unwrap();
        let a2 = f.admit(false, "a", Kind::Mutating).unwrap();
        assert_eq!(f.admit(false, "a", Kind::ReadOnly).unwrap_err(), Refused::Cluster("a".into()));
        let b = f.admit(false, "b", Kind::ReadOnly).unwrap();
        assert!(b.is_some());
        assert_eq!(f.of_cluster("a"), (2, 0));
        drop(a1);
        let a3 = f.admit(false, "a", Kind::ReadOnly).unwrap();
        assert!(a3.is_some());
        drop((a2, a3, b));
        assert_eq!(f.clusters_in_flight(), 0, "entries go when nothing is in flight");
        assert_eq!(f.readonly.load(Ordering::Acquire) + f.mutating.load(Ordering::Acquire), 0);
    }

    #[test]
    fn the_server_budget_is_shared_and_a_refusal_takes_nothing() {
        let f = limits(2, 5, 0);
        let _held: Vec<_> = ["a", "b"].iter().map(|c| f.admit(false, c, Kind::ReadOnly).unwrap()).collect();
        assert_eq!(f.admit(false, "c", Kind::ReadOnly).unwrap_err(), Refused::Server);
        assert_eq!(f.of_cluster("c"), (0, 0));
        assert_eq!(f.clusters_in_flight(), 2);
        // A cluster at its share is refused by it, without touching the server's budget.
        let f = limits(3, 1, 0);
        let _a = f.admit(false, "a", Kind::ReadOnly).unwrap();
        assert_eq!(f.admit(false, "a", Kind::ReadOnly).unwrap_err(), Refused::Cluster("a".into()));
        assert_eq!(f.readonly.load(Ordering::Acquire), 1);
        let f = limits(2, 5, 0);
        let held: Vec<_> = ["a", "b"].iter().map(|c| f.admit(false, c, Kind::ReadOnly).unwrap()).collect();
        // Mutating requests have a budget of their own.
        assert!(f.admit(false, "c", Kind::Mutating).unwrap().is_some());
        drop(held);
        assert_eq!(f.readonly.load(Ordering::Acquire), 0);
        assert_eq!(f.clusters_in_flight(), 0);
    }

    #[test]
    fn watches_have_their_own_cap_and_masters_are_never_refused() {
        let f = limits(1, 1, 2);
        let _w: Vec<_> = (0..2).map(|_| f.admit(false, "a", Kind::Watch).unwrap()).collect();
        assert_eq!(f.admit(false, "a", Kind::Watch).unwrap_err(), Refused::Watches("a".into(), 2));
        // Watches are not requests in flight: a read still gets in.
        let r = f.admit(false, "a", Kind::ReadOnly).unwrap();
        assert!(r.is_some());
        let admin = Identity::from_cert("admin".into(), vec![crate::auth::MASTERS.into()]);
        for kind in [Kind::ReadOnly, Kind::Mutating, Kind::Watch] {
            assert!(f.admit(exempt(&admin), "a", kind).unwrap().is_none(), "{kind:?}");
        }
        assert_eq!(f.of_cluster("a"), (1, 2));
    }

    #[test]
    fn zero_means_no_limit() {
        let f = limits(0, 0, 0);
        let held: Vec<_> = (0..1000).map(|_| f.admit(false, "a", Kind::Mutating).unwrap()).collect();
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
}
