//! Requests whose work may hold a CPU for a while (patches, applies, large bodies to decode and check)
//! run off the async workers, a bounded number at a time, so that they never delay the requests and
//! watches those workers serve, whatever one of them costs.

use std::future::Future;
use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Semaphore;

/// A write body at least this large is decoded and checked off the async workers.
pub const HEAVY_BODY: usize = 64 * 1024;

/// How long a request other than a watch may take, as kube-apiserver's `--request-timeout`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where heavy requests run.
pub struct Heavy {
    /// One permit per heavy request running. A tokio `Semaphore`: waiting for a permit is waiting in
    /// the async world, before the request leaves it.
    permits: Semaphore,
}

impl Heavy {
    /// At most `concurrency` heavy requests at once (each takes a thread while it runs).
    pub fn new(concurrency: usize) -> Heavy {
        Heavy { permits: Semaphore::new(concurrency.max(1)) }
    }

    /// Run `work` to its end on a thread of its own (the worker it was polled on hands its other tasks
    /// to the runtime first), once a permit is free. On a runtime with one thread (tests) it runs in
    /// place.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        let _permit = self.permits.acquire().await.expect("the semaphore is never closed");
        match Handle::current().runtime_flavor() {
            RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| Handle::current().block_on(work)),
            _ => work.await,
        }
    }
}

impl Default for Heavy {
    /// Two per CPU: enough that a store's latency does not idle them, few enough that their threads'
    /// stacks stay small beside the server's memory.
    fn default() -> Self {
        Heavy::new(2 * std::thread::available_parallelism().map_or(2, |n| n.get()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Heavy work holds its thread, yet the workers go on serving other tasks meanwhile.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn heavy_work_leaves_the_workers_free() {
        let heavy = Arc::new(Heavy::new(2));
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticking = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let busy = |h: Arc<Heavy>| async move { h.run(async { std::thread::sleep(Duration::from_millis(300)) }).await };
        // Two blocking jobs, as many as there are workers: without moving off them nothing would tick.
        let jobs = [tokio::spawn(busy(heavy.clone())), tokio::spawn(busy(heavy.clone()))];
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = ticks.load(Ordering::Relaxed);
        for j in jobs {
            j.await.unwrap();
        }
        assert!(ticks.load(Ordering::Relaxed) - before >= 20, "the timer task was starved");
        ticking.abort();
    }
}
