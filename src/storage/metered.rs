//! A store that times every call and counts the calls that failed for the store's own reasons (not
//! a conflict or a missing key, which are answers), for `/metrics` and the alerts built on it.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

use super::{Guard, KeyValue, RangeRequest, RangeResult, Revision, Store, StoreError, WatchStream};

/// What a metered store reports, by operation (`get`, `range`, `create`, `update`, `delete`,
/// `revision`, `watch`, `compact`).
#[derive(Clone)]
pub struct StoreMetrics {
    /// Call latency.
    pub latency: HistogramVec,
    /// Calls that failed with the store unavailable or broken.
    pub errors: IntCounterVec,
}

impl StoreMetrics {
    /// The metrics, unregistered.
    pub fn new() -> Result<StoreMetrics, prometheus::Error> {
        Ok(StoreMetrics {
            latency: HistogramVec::new(
                HistogramOpts::new(
                    "kgate_store_request_duration_seconds",
                    "Store call latency in seconds by operation.",
                )
                .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
                &["operation"],
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "kgate_store_errors_total",
                    "Store calls that failed with the store unavailable or in error, by operation.",
                ),
                &["operation"],
            )?,
        })
    }
}

/// `inner`, metered.
pub struct Metered {
    inner: Arc<dyn Store>,
    metrics: StoreMetrics,
}

impl Metered {
    /// Meter `inner`'s calls into `metrics`.
    pub fn new(inner: Arc<dyn Store>, metrics: StoreMetrics) -> Metered {
        Metered { inner, metrics }
    }

    fn done<T>(&self, op: &str, started: Instant, r: Result<T, StoreError>) -> Result<T, StoreError> {
        self.metrics.latency.with_label_values(&[op]).observe(started.elapsed().as_secs_f64());
        if let Err(StoreError::Unavailable(_) | StoreError::Internal(_)) = &r {
            self.metrics.errors.with_label_values(&[op]).inc();
        }
        r
    }
}

#[async_trait]
impl Store for Metered {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let t = Instant::now();
        let r = self.inner.get(key).await;
        self.done("get", t, r)
    }

    async fn get_relaxed(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let t = Instant::now();
        let r = self.inner.get_relaxed(key).await;
        self.done("get", t, r)
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError> {
        let t = Instant::now();
        let r = self.inner.range(req).await;
        self.done("range", t, r)
    }

    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError> {
        let t = Instant::now();
        let r = self.inner.create_guarded(key, value, guard).await;
        self.done("create", t, r)
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError> {
        let t = Instant::now();
        let r = self.inner.update(key, value, expected).await;
        self.done("update", t, r)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError> {
        let t = Instant::now();
        let r = self.inner.delete(key, expected).await;
        self.done("delete", t, r)
    }

    async fn create_all(
        &self,
        items: &[(String, Vec<u8>)],
        guard: Option<&Guard>,
    ) -> Result<Option<Revision>, StoreError> {
        let t = Instant::now();
        let r = self.inner.create_all(items, guard).await;
        self.done("create", t, r)
    }

    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        let t = Instant::now();
        let r = self.inner.delete_all(items).await;
        self.done("delete", t, r)
    }

    async fn ranges(&self, reqs: Vec<RangeRequest>) -> Result<Vec<RangeResult>, StoreError> {
        let t = Instant::now();
        let r = self.inner.ranges(reqs).await;
        self.done("range", t, r)
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let t = Instant::now();
        let r = self.inner.revision().await;
        self.done("revision", t, r)
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let t = Instant::now();
        let r = self.inner.watch(prefix, after).await;
        self.done("watch", t, r)
    }

    async fn watch_current(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let t = Instant::now();
        let r = self.inner.watch_current(prefix, after).await;
        self.done("watch", t, r)
    }

    async fn watch_deletes(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let t = Instant::now();
        let r = self.inner.watch_deletes(prefix, after).await;
        self.done("watch", t, r)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let t = Instant::now();
        let r = self.inner.compact(revision).await;
        self.done("compact", t, r)
    }

    async fn healthy(&self) -> bool {
        self.inner.healthy().await
    }

    fn reports_progress(&self) -> bool {
        self.inner.reports_progress()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_are_timed_and_only_the_stores_own_failures_counted() {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let metrics = StoreMetrics::new().unwrap();
        let store = Metered::new(inner, metrics.clone());
        store.create("/k", b"v".to_vec()).await.unwrap();
        assert!(store.create("/k", b"v".to_vec()).await.is_err(), "already exists: an answer, not a failure");
        assert!(store.get("/missing").await.unwrap().is_none());
        assert_eq!(metrics.latency.with_label_values(&["create"]).get_sample_count(), 2);
        assert_eq!(metrics.latency.with_label_values(&["get"]).get_sample_count(), 1);
        assert_eq!(metrics.errors.with_label_values(&["create"]).get(), 0);
    }
}
