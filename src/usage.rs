//! Each logical cluster's own request figures: for its team, at `/clusters/<name>/metrics`, and for the
//! platform, the busiest clusters named in root's `/metrics`. Kept in memory of bounded size, never in
//! the Prometheus registry (whose series would grow with the clusters): at most `CAP` clusters have
//! figures at once, one of the least recently active giving way, so 100,000 idle clusters cost nothing
//! and a full table costs about `CAP` times 1.5 KiB.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::registry::footprint::Usage as Holdings;

/// Clusters with figures at once.
pub const CAP: usize = 4096;
/// Root's series of the busiest clusters' request rates.
pub const TOP_METRIC: &str = "kgate_cluster_request_rate";
/// Clusters looked at to choose one to evict.
const EVICTION_SAMPLE: usize = 64;
/// How many of the busiest clusters root's `/metrics` names by default.
pub const DEFAULT_TOP: usize = 100;
/// The request rate that ranks clusters is an average over about this long (decayed exponentially).
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Verb labels, in a fixed set so that no client mints new ones.
const VERBS: [&str; 9] = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "other"];
/// Code classes of `apiserver_request_total` here (429s are also `kgate_requests_refused_total`).
const CLASSES: [&str; 4] = ["2xx", "3xx", "4xx", "5xx"];
/// Latency buckets, as root's `apiserver_request_duration_seconds` has them.
const BUCKETS: [f64; 13] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// One cluster's figures.
struct Stats {
    requests: [[AtomicU64; CLASSES.len()]; VERBS.len()],
    /// Per verb: a count per bucket (not cumulative), then the count above the last.
    latency: [[AtomicU64; BUCKETS.len() + 1]; VERBS.len()],
    latency_micros: [AtomicU64; VERBS.len()],
    refused: AtomicU64,
    /// Decayed request rate and when it was last brought up to date; a mutex for the pair, held for a
    /// few arithmetic operations per request of this cluster.
    rate: Mutex<(f64, Instant)>,
    /// Seconds since the table started, of its last request: who gives way when the table is full.
    last: AtomicU64,
}

impl Stats {
    fn new(now: Instant) -> Stats {
        Stats {
            requests: Default::default(),
            latency: Default::default(),
            latency_micros: Default::default(),
            refused: AtomicU64::new(0),
            rate: Mutex::new((0.0, now)),
            last: AtomicU64::new(0),
        }
    }

    /// The rate as of `now`, decayed since its last update, after adding `n` requests.
    fn rate(&self, now: Instant, n: f64) -> f64 {
        let mut r = self.rate.lock().unwrap_or_else(|p| p.into_inner());
        let dt = now.saturating_duration_since(r.1).as_secs_f64();
        // An exponentially decayed count over the window, read as a rate.
        let decayed = r.0 * (-dt / RATE_WINDOW.as_secs_f64()).exp();
        *r = (decayed + n, now);
        r.0 / RATE_WINDOW.as_secs_f64()
    }
}

/// The figures of the clusters.
pub struct Usage {
    /// A DashMap: every request records into its own cluster's entry, and its shards keep clusters
    /// from waiting on each other; entries are added and evicted rarely.
    clusters: DashMap<String, Arc<Stats>>,
    started: Instant,
    /// How many clusters root's `/metrics` names.
    top: usize,
    /// Whether requests are recorded at all (`--usage-accounting`).
    enabled: bool,
}

impl Usage {
    /// An empty table naming the `top` busiest clusters in root's metrics.
    pub fn new(top: usize) -> Usage {
        Usage { clusters: DashMap::new(), started: Instant::now(), top, enabled: true }
    }

    /// A table that records nothing (`--usage-accounting=false`).
    pub fn disabled() -> Usage {
        Usage { enabled: false, ..Usage::new(0) }
    }

    /// Record a request of `cluster`, answered `code` after `elapsed`.
    pub fn record(&self, cluster: &str, verb: &str, code: u16, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let stats = match self.clusters.get(cluster) {
            Some(s) => s.clone(),
            None => {
                if self.clusters.len() >= CAP {
                    self.evict_one();
                }
                self.clusters.entry(cluster.to_string()).or_insert_with(|| Arc::new(Stats::new(now))).clone()
            }
        };
        stats.last.store(now.duration_since(self.started).as_secs(), Ordering::Relaxed);
        let v = VERBS.iter().position(|x| *x == verb).unwrap_or(VERBS.len() - 1);
        let class = match code {
            200..=299 => 0,
            300..=399 => 1,
            400..=499 => 2,
            _ => 3,
        };
        stats.requests[v][class].fetch_add(1, Ordering::Relaxed);
        if code == 429 {
            stats.refused.fetch_add(1, Ordering::Relaxed);
        }
        if verb != "watch" {
            let secs = elapsed.as_secs_f64();
            let b = BUCKETS.iter().position(|le| secs <= *le).unwrap_or(BUCKETS.len());
            stats.latency[v][b].fetch_add(1, Ordering::Relaxed);
            stats.latency_micros[v].fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
        }
        stats.rate(now, 1.0);
    }

    /// Make room: the cluster active least recently among a sample goes (a full scan per new cluster
    /// would cost every request of a table that churns).
    fn evict_one(&self) {
        let oldest = self
            .clusters
            .iter()
            .take(EVICTION_SAMPLE)
            .min_by_key(|e| e.value().last.load(Ordering::Relaxed))
            .map(|e| e.key().clone());
        if let Some(name) = oldest {
            self.clusters.remove(&name);
        }
    }

    /// `cluster`'s figures in Prometheus text format, with `in_flight` requests and `watches` open now.
    pub fn render_cluster(&self, cluster: &str, in_flight: usize, watches: usize) -> String {
        let mut out = String::new();
        let stats = self.clusters.get(cluster).map(|s| s.clone());
        out.push_str("# HELP apiserver_request_total Requests to this logical cluster by verb and code class.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        if let Some(s) = &stats {
            for (v, verb) in VERBS.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    let n = s.requests[v][c].load(Ordering::Relaxed);
                    if n > 0 {
                        let _ = writeln!(out, "apiserver_request_total{{verb=\"{verb}\",code=\"{class}\"}} {n}");
                    }
                }
            }
        }
        out.push_str("# HELP apiserver_request_duration_seconds Response latency of this logical cluster's requests by verb (watches not included).\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        if let Some(s) = &stats {
            for (v, verb) in VERBS.iter().enumerate() {
                let counts: Vec<u64> = s.latency[v].iter().map(|c| c.load(Ordering::Relaxed)).collect();
                let total: u64 = counts.iter().sum();
                if total == 0 {
                    continue;
                }
                let mut cumulative = 0;
                for (b, le) in BUCKETS.iter().enumerate() {
                    cumulative += counts[b];
                    let _ = writeln!(
                        out,
                        "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",le=\"{le}\"}} {cumulative}"
                    );
                }
                let _ =
                    writeln!(out, "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",le=\"+Inf\"}} {total}");
                let sum = s.latency_micros[v].load(Ordering::Relaxed) as f64 / 1e6;
                let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{verb=\"{verb}\"}} {sum}");
                let _ = writeln!(out, "apiserver_request_duration_seconds_count{{verb=\"{verb}\"}} {total}");
            }
        }
        let refused = stats.as_ref().map_or(0, |s| s.refused.load(Ordering::Relaxed));
        out.push_str("# HELP kgate_requests_refused_total Requests of this logical cluster answered 429.\n");
        out.push_str("# TYPE kgate_requests_refused_total counter\n");
        let _ = writeln!(out, "kgate_requests_refused_total {refused}");
        out.push_str("# HELP apiserver_current_inflight_requests Requests of this logical cluster in flight now (watches not included).\n");
        out.push_str("# TYPE apiserver_current_inflight_requests gauge\n");
        let _ = writeln!(out, "apiserver_current_inflight_requests {in_flight}");
        out.push_str("# HELP apiserver_longrunning_requests Watches of this logical cluster open now.\n");
        out.push_str("# TYPE apiserver_longrunning_requests gauge\n");
        let _ = writeln!(out, "apiserver_longrunning_requests{{verb=\"WATCH\"}} {watches}");
        out
    }

    /// Root's series of the busiest clusters: each of the `top` clusters with the highest recent
    /// request rate by name, every other cluster summed as `cluster="other"`. The number of series is
    /// `top + 1` whatever the number of clusters.
    pub fn render_top(&self) -> String {
        let now = Instant::now();
        let mut rates: Vec<(String, f64)> =
            self.clusters.iter().map(|e| (e.key().clone(), e.value().rate(now, 0.0))).collect();
        rates.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let other: f64 = rates.iter().skip(self.top).map(|r| r.1).sum();
        let mut out = String::new();
        let _ = writeln!(out, "# HELP kgate_cluster_request_rate Requests per second, averaged over about a minute, of the {} busiest logical clusters by name and of all others as cluster=\"other\".", self.top);
        out.push_str("# TYPE kgate_cluster_request_rate gauge\n");
        for (name, rate) in rates.iter().take(self.top) {
            let _ = writeln!(out, "kgate_cluster_request_rate{{cluster=\"{}\"}} {rate:.3}", escape(name));
        }
        let _ = writeln!(out, "kgate_cluster_request_rate{{cluster=\"other\"}} {other:.3}");
        out
    }

    /// Clusters with figures now.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// Whether no cluster has figures.
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }
}

/// A label value as the text format wants it (cluster names are DNS labels, so this is defensive).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A cluster's holdings in the store, for its `/metrics`: objects by resource as kube-apiserver's
/// `apiserver_storage_objects` names them, and the totals its LogicalCluster's `status.usage` has.
pub fn render_holdings(usage: Holdings, by_resource: &[(String, u64)]) -> String {
    let mut out = String::new();
    out.push_str("# HELP apiserver_storage_objects Objects this logical cluster holds, by resource.\n");
    out.push_str("# TYPE apiserver_storage_objects gauge\n");
    for (resource, n) in by_resource {
        let _ = writeln!(out, "apiserver_storage_objects{{resource=\"{resource}\"}} {n}");
    }
    for (name, help, n) in [
        ("kgate_cluster_objects", "Objects this logical cluster holds.", usage.objects),
        ("kgate_cluster_storage_bytes", "Bytes its objects' keys and values take in the store.", usage.storage_bytes),
        ("kgate_cluster_namespaces", "Namespaces this logical cluster holds.", usage.namespaces),
        (
            "kgate_cluster_custom_resource_definitions",
            "CustomResourceDefinitions this logical cluster holds.",
            usage.custom_resource_definitions,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_figures_are_its_own_and_the_table_stays_bounded() {
        let u = Usage::new(2);
        u.record("a", "get", 200, Duration::from_millis(3));
        u.record("a", "create", 429, Duration::from_millis(1));
        u.record("b", "list", 200, Duration::from_millis(30));
        let a = u.render_cluster("a", 1, 2);
        assert!(a.contains("apiserver_request_total{verb=\"get\",code=\"2xx\"} 1"), "{a}");
        assert!(a.contains("apiserver_request_total{verb=\"create\",code=\"4xx\"} 1"), "{a}");
        assert!(a.contains("kgate_requests_refused_total 1"), "{a}");
        assert!(a.contains("apiserver_request_duration_seconds_bucket{verb=\"get\",le=\"0.005\"} 1"), "{a}");
        assert!(!a.contains("list"), "b's requests are not a's: {a}");
        assert!(a.contains("apiserver_longrunning_requests{verb=\"WATCH\"} 2"));
        for i in 0..CAP + 10 {
            u.record(&format!("c{i}"), "get", 200, Duration::ZERO);
        }
        assert_eq!(u.len(), CAP);
    }

    #[test]
    fn root_names_the_busiest_and_sums_the_rest() {
        let u = Usage::new(2);
        for (cluster, n) in [("quiet", 1), ("busy", 50), ("busier", 100), ("mild", 5)] {
            for _ in 0..n {
                u.record(cluster, "get", 200, Duration::ZERO);
            }
        }
        let top = u.render_top();
        let series: Vec<&str> = top.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(series.len(), 3, "{top}");
        assert!(series[0].starts_with("kgate_cluster_request_rate{cluster=\"busier\"}"), "{top}");
        assert!(series[1].starts_with("kgate_cluster_request_rate{cluster=\"busy\"}"), "{top}");
        let other: f64 = series[2].rsplit(' ').next().unwrap().parse().unwrap();
        assert!((other - 6.0 / 60.0).abs() < 0.01, "quiet and mild together: {top}");
    }
}
