//! Request metrics in Prometheus form, named as kube-apiserver names them. Labels are verb, resource and
//! code only: a per-cluster label would grow with the number of tenants.

use std::time::Duration;

use http::Method;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The metrics kgate exports; the registry is passed in, never global.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// The name of every family registered.
    names: Vec<String>,
    requests: IntCounterVec,
    latency: HistogramVec,
    /// Watch cache counters, handed to the cache.
    pub cache: CacheMetrics,
    /// Admission figures, handed to the in-flight limits.
    pub inflight: InFlightMetrics,
    /// Connections open now.
    pub connections: IntGauge,
    /// Bytes that answers being sent hold now (see `budget`).
    pub bytes_in_flight: IntGauge,
    /// Connections closed as soon as accepted because `--max-connections` were open.
    pub connections_refused: prometheus::IntCounter,
    /// Connections cut because their client stopped reading what was sent to it.
    pub connections_stalled: prometheus::IntCounter,
    /// Writes run off the async workers (see `http::heavy`).
    pub heavy: prometheus::IntCounter,
    /// Audit events written and dropped.
    pub audit: crate::audit::AuditMetrics,
    /// Store call latency and errors.
    pub store: crate::storage::metered::StoreMetrics,
}

/// What admission by requests in flight reports. No label names a cluster.
#[derive(Clone)]
pub struct InFlightMetrics {
    /// Requests counted against the server-wide budgets now, by kind (`readOnly`, `mutating`).
    pub current: IntGaugeVec,
    /// Requests answered 429, by which limit refused them (`server`, `queue`, `cluster`, `watches`).
    pub refused: IntCounterVec,
    /// Watches open now, server-wide (kube-apiserver's `apiserver_longrunning_requests`).
    pub watches: IntGauge,
}

/// What the watch cache reports.
#[derive(Clone)]
pub struct CacheMetrics {
    /// Watchers cut off from the fan-out for reading too slowly (then resumed from history), by resource.
    pub lagging: IntCounterVec,
    /// Reads the cache could serve, by resource and by what served them (`cache` or `store`).
    pub reads: IntCounterVec,
    /// Watchers on a store watch of their own (resumed from before the cache's history) right now.
    pub store_fed: IntGauge,
    /// Loads of a cache from the store (a start, or a reload after losing the store), by resource.
    pub initializations: IntCounterVec,
    /// Objects copied into shared blocks by packing passes (`watch::cache::pack`), by resource.
    pub packed: IntCounterVec,
}

impl Metrics {
    /// Register the metrics in `registry`.
    pub fn new(registry: Registry) -> Result<Self, prometheus::Error> {
        // Every family registered, series or not, for `names`.
        let mut names = Vec::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out by verb, resource and HTTP code.",
            ),
            &["verb", "resource", "code"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds by verb and resource.",
            )
            .buckets(vec![0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0]),
            &["verb", "resource"],
        )?;
        let lagging = IntCounterVec::new(
            Opts::new(
                "kgate_watch_cache_lagging_watchers_total",
                "Watchers cut off from the watch cache's fan-out for reading too slowly, by resource.",
            ),
            &["resource"],
        )?;
        let reads = IntCounterVec::new(
            Opts::new(
                "kgate_watch_cache_reads_total",
                "Lists and gets eligible for the watch cache, by resource and by what served them.",
            ),
            &["resource", "served_by"],
        )?;
        // kube-apiserver's name for the same figure.
        let initializations = IntCounterVec::new(
            Opts::new(
                "apiserver_watch_cache_initializations_total",
                "Counter of watch cache initializations broken by resource type.",
            ),
            &["resource"],
        )?;
        let packed = IntCounterVec::new(
            Opts::new(
                "kgate_watch_cache_packed_objects_total",
                "Cached objects copied into shared blocks in key order, so that lists read them in a few runs, by resource.",
            ),
            &["resource"],
        )?;
        let store_fed = IntGauge::new(
            "kgate_watch_store_fed_watchers",
            "Watchers on a store watch of their own until they catch up with the watch cache's history.",
        )?;
        // kube-apiserver's name for the same figure.
        let current = IntGaugeVec::new(
            Opts::new(
                "apiserver_current_inflight_requests",
                "Requests counted against the server-wide in-flight budgets, by kind; watches are not counted.",
            ),
            &["request_kind"],
        )?;
        let refused = IntCounterVec::new(
            Opts::new(
                "kgate_requests_refused_total",
                "Requests answered 429, by the limit that refused them: server, cluster, watches, server_bytes or cluster_bytes.",
            ),
            &["limit"],
        )?;
        let connections = IntGauge::new("kgate_connections", "Client connections open.")?;
        let bytes_in_flight = IntGauge::new(
            "kgate_response_bytes_in_flight",
            "Bytes held by answers being sent: chunks not yet written out, cached objects and events a tenant's lists and watches still have to send.",
        )?;
        register(&registry, &mut names, Box::new(bytes_in_flight.clone()))?;
        let connections_refused = prometheus::IntCounter::new(
            "kgate_connections_refused_total",
            "Connections closed as soon as they were accepted because --max-connections were open.",
        )?;
        let connections_stalled = prometheus::IntCounter::new(
            "kgate_connections_stalled_total",
            "Connections cut because their client did not read what waited for it within the stall timeout.",
        )?;
        let heavy = prometheus::IntCounter::new(
            "kgate_heavy_requests_total",
            "Writes run off the async workers, a bounded number at a time, because their body or the object they change is large.",
        )?;
        register(&registry, &mut names, Box::new(heavy.clone()))?;
        let audit = crate::audit::AuditMetrics {
            events: prometheus::IntCounter::new(
                "apiserver_audit_event_total",
                "Counter of audit events generated and sent to the audit backend.",
            )?,
            dropped: prometheus::IntCounter::new(
                "kgate_audit_events_dropped_total",
                "Audit events dropped because the log's buffer was full (its disk is slower than the requests).",
            )?,
        };
        let store = crate::storage::metered::StoreMetrics::new()?;
        register(&registry, &mut names, Box::new(store.latency.clone()))?;
        register(&registry, &mut names, Box::new(store.errors.clone()))?;
        register(&registry, &mut names, Box::new(audit.events.clone()))?;
        register(&registry, &mut names, Box::new(audit.dropped.clone()))?;
        register(&registry, &mut names, Box::new(connections.clone()))?;
        register(&registry, &mut names, Box::new(connections_refused.clone()))?;
        register(&registry, &mut names, Box::new(connections_stalled.clone()))?;
        for c in [&requests, &lagging, &reads, &initializations, &packed, &refused] {
            register(&registry, &mut names, Box::new(c.clone()))?;
        }
        register(&registry, &mut names, Box::new(store_fed.clone()))?;
        register(&registry, &mut names, Box::new(latency.clone()))?;
        register(&registry, &mut names, Box::new(current.clone()))?;
        let watches = IntGauge::with_opts(
            Opts::new("apiserver_longrunning_requests", "Watches open now.").const_label("verb", "WATCH"),
        )?;
        register(&registry, &mut names, Box::new(watches.clone()))?;
        Ok(Metrics {
            registry,
            names,
            requests,
            latency,
            cache: CacheMetrics { lagging, reads, store_fed, initializations, packed },
            inflight: InFlightMetrics { current, refused, watches },
            connections,
            bytes_in_flight,
            connections_refused,
            connections_stalled,
            heavy,
            audit,
            store,
        })
    }

    /// Record one request. Resource and verb come from fixed sets (the built-in types, one label for
    /// every custom resource), so label cardinality is bounded.
    pub fn observe(&self, method: &Method, verb: &str, resource: &str, code: u16, elapsed: Duration) {
        // Label values come from fixed sets only: a client-chosen method must not mint new series.
        let verb = if !verb.is_empty() {
            verb
        } else {
            match *method {
                Method::GET => "GET",
                Method::POST => "POST",
                Method::PUT => "PUT",
                Method::PATCH => "PATCH",
                Method::DELETE => "DELETE",
                Method::HEAD => "HEAD",
                Method::OPTIONS => "OPTIONS",
                _ => "OTHER",
            }
        };
        self.requests.with_label_values(&[verb, resource, &code.to_string()]).inc();
        if verb != "watch" {
            self.latency.with_label_values(&[verb, resource]).observe(elapsed.as_secs_f64());
        }
    }

    /// The name of every metric root's `/metrics` may show (a series appears once it has a value),
    /// for dashboards and alerts to be checked against.
    pub fn names(&self) -> Vec<String> {
        let mut names = self.names.clone();
        names.push(crate::usage::TOP_METRIC.to_string());
        names.sort();
        names
    }

    /// Text exposition format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

/// Register `c` in `registry`, noting its families' names in `names`.
fn register(
    registry: &Registry,
    names: &mut Vec<String>,
    c: Box<dyn prometheus::core::Collector>,
) -> Result<(), prometheus::Error> {
    names.extend(c.desc().iter().map(|d| d.fq_name.clone()));
    registry.register(c)
}
