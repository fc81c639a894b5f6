//! Tenancy at scale (issue 3's figures), on the embedded store:
//! - create 10,000 logical clusters: clusters per second (kcp's published load test: 2 to 8 per second;
//!   target at least 300) and resident memory per empty cluster (kcp: about 7.4 MiB per workspace;
//!   target at most 20 KiB);
//! - what authorization adds to the median GET latency: the same GET by a client certificate in
//!   `system:masters` (no RBAC evaluation) and by one whose access comes from a RoleBinding (target: at
//!   most 10% more).
//!
//! Run: `cargo bench --bench tenancy`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::KgateProcess;
use serde_json::json;

const CLUSTERS: usize = 10_000;
const CONCURRENCY: usize = 32;
const GETS: usize = 3000;

/// Median latency of sequential GETs of one object, in microseconds.
async fn median_get(client: &reqwest::Client, url: &str) -> f64 {
    let samples = common::get_latencies(client, url, GETS).await;
    samples[samples.len() / 2] * 1e6
}

#[tokio::main]
async fn main() {
    let k = KgateProcess::start(&[], "kgate-bench-tenancy.log").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = k.rss_kib();
    let rate = k.create_clusters("t", CLUSTERS, CONCURRENCY).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = k.rss_kib();
    let per_cluster = (after.saturating_sub(before)) as f64 / CLUSTERS as f64;
    println!("\n{CLUSTERS} logical clusters on the embedded store, {CONCURRENCY} at a time");
    println!("created at {rate:.0} clusters/s [target >= 300; kcp's load test: 2 to 8]");
    println!(
        "memory per empty cluster: {per_cluster:.1} KiB (RSS {:.1} -> {:.1} MiB) [target <= 20 KiB; kcp: about 7.4 MiB]",
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );

    // Authorization's share of a GET: a system:masters certificate skips RBAC; `dev` is bound to `edit`.
    let admin = k.admin();
    let cluster = "t0";
    let ns_url = format!("{}/clusters/{cluster}/api/v1/namespaces/default", k.url);
    let r = admin
        .post(format!("{ns_url}/configmaps"))
        .json(&json!({"metadata": {"name": "probe"}, "data": {"k": "v"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "dev-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dev"}]
    });
    let r = admin
        .post(format!("{}/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", k.url))
        .json(&binding)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let dev = common::cert_client(k.dir.path(), &common::server_ca(k.dir.path()), "dev", &[]);
    let url = format!("{ns_url}/configmaps/probe");
    // Warm both (connections, the cluster's RBAC index), then alternate rounds to share the noise.
    median_get(&admin, &url).await;
    median_get(&dev, &url).await;
    let (mut masters, mut rbac) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        masters.push(median_get(&admin, &url).await);
        rbac.push(median_get(&dev, &url).await);
    }
    masters.sort_by(|a, b| a.partial_cmp(b).unwrap());
    rbac.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (m, r) = (masters[1], rbac[1]);
    println!(
        "median GET: system:masters {m:.0} us; RBAC-authorized user {r:.0} us; authorization adds {:+.1}% [target <= 10%]",
        (r / m - 1.0) * 100.0
    );
}
