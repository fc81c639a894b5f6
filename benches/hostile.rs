//! What a tenant that never reads costs everyone else (issue 29's figures), kgate on the embedded store
//! (release build):
//! - resident memory against the number of watches of 24 MiB of the tenant's own objects that its
//!   clients open from the beginning and never read: 0, 100 and 1,000, with the byte budgets off, so
//!   every watch is admitted and what is measured is what a stalled watch holds (target: growth at most
//!   256 MiB at 1,000); then the same with the default budgets, which refuse the tenant once its
//!   budget is spent;
//! - another tenant's GET p99 meanwhile, against its p99 alone (target: at most 2x);
//! - resident memory once the stalled clients are gone, to see what the allocator gives back;
//! - the small requests that once cost gigabytes (`common::amplifying_requests`): each one's status,
//!   time to answer (target: within a second), kgate's memory growth (target: under 100 MiB) and the
//!   slowest `GET /version` another client got meanwhile.
//!
//! Run: `cargo bench --bench hostile`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::KgateProcess;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OBJECTS: usize = 48;
const OBJECT_BYTES: usize = 500 * 1024;
const GETS: usize = 2000;

/// p99 of sequential GETs of one small object by another tenant, in milliseconds.
async fn p99(client: &reqwest::Client, url: &str) -> f64 {
    let samples = common::get_latencies(client, url, GETS).await;
    samples[samples.len() * 99 / 100] * 1e3
}

/// Open `n` watches of `path` with `token`, each on a connection of its own that reads only the status
/// line; returns the connections and how many were admitted (200).
async fn stalled(
    k: &KgateProcess,
    path: &str,
    token: &str,
    n: usize,
) -> (Vec<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>, usize) {
    let opened: Vec<_> = futures::stream::iter(0..n)
        .map(|_| async {
            let mut c = common::raw_tls_with(k.dir.path(), &k.url, &[b"http/1.1"], None, Some(4096)).await;
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
            c.write_all(req.as_bytes()).await.unwrap();
            c.flush().await.unwrap();
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                let mut b = [0u8; 1];
                if c.read(&mut b).await.unwrap_or(0) == 0 {
                    break;
                }
                line.push(b[0]);
            }
            let admitted = line.starts_with(b"HTTP/1.1 200");
            (c, admitted)
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let admitted = opened.iter().filter(|(_, a)| *a).count();
    (opened.into_iter().map(|(c, _)| c).collect(), admitted)
}

async fn run(budgets: &[&str], label: &str) {
    let k = KgateProcess::start(budgets, "kgate-bench-hostile.log").await;
    let admin = k.admin();
    for c in ["greedy", "polite"] {
        let lc = serde_json::json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": c}});
        let r = admin.post(format!("{}/apis/tenancy.kgate.dev/v1alpha1/logicalclusters", k.url)).json(&lc).send().await;
        assert_eq!(r.unwrap().status(), 201);
    }
    let polite = format!("{}/clusters/polite/api/v1/namespaces/default/configmaps", k.url);
    let ready = || async { admin.get(&polite).send().await.unwrap().status() == 200 };
    while !ready().await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let token = common::tenant_token(&admin, &k.url, "greedy", "attacker", "cluster-admin").await;
    let greedy = format!("{}/clusters/greedy/api/v1/namespaces/default/configmaps", k.url);
    for i in 0..OBJECTS {
        let cm =
            serde_json::json!({"metadata": {"name": format!("big-{i}")}, "data": {"blob": "x".repeat(OBJECT_BYTES)}});
        assert_eq!(admin.post(&greedy).json(&cm).send().await.unwrap().status(), 201);
    }
    let r =
        admin.post(&polite).json(&serde_json::json!({"metadata": {"name": "probe"}, "data": {"k": "v"}})).send().await;
    assert_eq!(r.unwrap().status(), 201);
    let probe = format!("{polite}/probe");
    let solo = p99(&admin, &probe).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let base = k.rss_kib();
    println!(
        "\n{label}: {OBJECTS} objects of {} KiB in the tenant's cluster; RSS {} MiB",
        OBJECT_BYTES / 1024,
        base / 1024
    );
    println!("another tenant's GET p99 alone: {solo:.2} ms");
    let watch = "/clusters/greedy/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0";
    let mut held = Vec::new();
    let mut admitted = 0;
    for target in [100, 1000] {
        let (mut more, n) = stalled(&k, watch, &token, target - held.len()).await;
        held.append(&mut more);
        admitted += n;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss = k.rss_kib();
        let during = p99(&admin, &probe).await;
        println!(
            "{target} stalled watches ({admitted} admitted): RSS +{} MiB [target <= 256 MiB at 1,000]; another tenant's GET p99 {during:.2} ms, {:.2}x alone [target <= 2x]",
            rss.saturating_sub(base) / 1024,
            during / solo
        );
    }
    drop(held);
    tokio::time::sleep(Duration::from_secs(15)).await;
    println!("15 s after the stalled clients went: RSS +{} MiB", k.rss_kib().saturating_sub(base) / 1024);
}

#[tokio::main]
async fn main() {
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    let off = ["--max-response-bytes-inflight", "0", "--max-response-bytes-inflight-per-cluster", "0"];
    run(&off, "byte budgets off (what sharing alone costs)").await;
    run(&[], "default byte budgets").await;
    let k = KgateProcess::start(&[], "kgate-bench-hostile-costs.log").await;
    println!("\nsmall requests that once cost gigabytes [targets: a 4xx or a bounded result, within 1 s, memory growth < 100 MiB]");
    for (what, c) in common::amplifying_requests(&k).await {
        println!(
            "{what}: {} in {:.0} ms, RSS +{} MiB, slowest GET /version meanwhile {:.1} ms",
            c.status,
            c.took.as_secs_f64() * 1e3,
            c.rss_growth_mib,
            c.slowest_version.as_secs_f64() * 1e3
        );
    }
}
