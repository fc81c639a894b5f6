//! Requests whose work may hold a CPU for a while (large bodies to decode, check and patch) run off the
//! async workers, a bounded number at a time and a bounded number of each logical cluster, so that they
//! never delay the requests and watches those workers serve, and one tenant's cannot queue everyone
//! else's behind them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::turns::Turns;

/// A write body at least this large is decoded and checked off the async workers.
pub const HEAVY_BODY: usize = 64 * 1024;

/// How long a read may take, as kube-apiserver's `--request-timeout`. Writes are not cut short: a write
/// stopped halfway (a create whose managed fields were still to be written, a collection half deleted)
/// would leave what no client asked for, and every step of one is bounded on its own.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where heavy requests run: each takes a turn (see `turns`) and its own thread while it runs.
pub struct Heavy {
    turns: Arc<Turns>,
}

impl Heavy {
    /// At most `concurrency` heavy requests at once (each takes a thread while it runs), and at most half
    /// of them (at least one) of one cluster.
    pub fn new(concurrency: usize) -> Heavy {
        Heavy { turns: Arc::new(Turns::new(concurrency)) }
    }

    /// Run `work` of `cluster` to its end on a thread of its own (the worker it was polled on hands its
    /// other tasks to the runtime first), once its turn comes. On a runtime with one thread (tests) it
    /// runs in place.
    pub async fn run<F: Future>(&self, cluster: &str, work: F) -> F::Output {
        let _turn = self.turns.take(cluster).await;
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
        let busy = |h: Arc<Heavy>, cluster: &'static str| async move {
            h.run(cluster, async { std::thread::sleep(Duration::from_millis(300)) }).await
        };
        // Two blocking jobs, as many as there are workers: without moving off them nothing would tick.
        let jobs = [tokio::spawn(busy(heavy.clone(), "a")), tokio::spawn(busy(heavy.clone(), "b"))];
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = ticks.load(Ordering::Relaxed);
        for j in jobs {
            j.await.unwrap();
        }
        assert!(ticks.load(Ordering::Relaxed) - before >= 20, "the timer task was starved");
        ticking.abort();
        assert_eq!(heavy.turns.clusters(), 0, "entries go with their last request");
    }

    /// One cluster holds at most half of the permits: another's request starts while it waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_cluster_does_not_queue_the_others() {
        let heavy = Arc::new(Heavy::new(2));
        let started = Arc::new(AtomicUsize::new(0));
        let job = |cluster: &'static str| {
            let (heavy, started) = (heavy.clone(), started.clone());
            tokio::spawn(async move {
                heavy
                    .run(cluster, async {
                        started.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(200));
                    })
                    .await
            })
        };
        let flood: Vec<_> = (0..4).map(|_| job("greedy")).collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let polite = job("polite");
        tokio::time::sleep(Duration::from_millis(100)).await;
        // One of greedy's and polite's are running; greedy's others wait for greedy's own permit.
        assert_eq!(started.load(Ordering::Relaxed), 2);
        polite.await.unwrap();
        for j in flood {
            j.await.unwrap();
        }
    }
}
