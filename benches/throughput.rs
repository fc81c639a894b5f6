//! Throughput of creates, gets and lists through kgate against the same operations on raw etcd, at
//! concurrency 1, 16 and 64, in one run; and idle memory with 1,000 logical clusters of 10 objects.
//!
//! Run: `cargo bench --bench throughput` (needs etcd; `./scripts/setup.sh` installs it).
//! Targets (issue 2): kgate creates on etcd >= 0.5x raw etcd puts at concurrency 64; idle RSS < 50 MiB.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use etcd_client::{Client, GetOptions};
use serde_json::json;

/// Operations per measurement.
const OPS: usize = 3000;
const CONCURRENCY: [usize; 3] = [1, 16, 64];

struct Row {
    what: &'static str,
    conc: usize,
    etcd: f64,
    kgate_etcd: f64,
    kgate_embedded: f64,
}

async fn raw_etcd(endpoint: &str, what: &str, conc: usize, prefix: String) -> f64 {
    let client = Client::connect([endpoint], None).await.unwrap();
    let value = serde_json::to_vec(&json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default","uid":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"k":"v"}})).unwrap();
    match what {
        "create" => {
            common::ops_per_second(OPS, conc, move |i| {
                let (mut c, k, v) = (client.clone(), format!("{prefix}{i}"), value.clone());
                async move {
                    c.put(k, v, None).await.unwrap();
                }
            })
            .await
        }
        "get" => {
            common::ops_per_second(OPS, conc, move |i| {
                let (mut c, k) = (client.clone(), format!("{prefix}{}", i % 500));
                async move {
                    c.get(k, None).await.unwrap();
                }
            })
            .await
        }
        _ => {
            common::ops_per_second(OPS, conc, move |_| {
                let (mut c, p) = (client.clone(), prefix.clone());
                async move {
                    c.get(p.clone(), Some(GetOptions::new().with_prefix().with_limit(100))).await.unwrap();
                }
            })
            .await
        }
    }
}

async fn through_kgate(s: &TestServer, what: &str, conc: usize, ns: &str) -> f64 {
    let client = s.client.clone();
    let base = format!("{}/api/v1/namespaces/{ns}/configmaps", s.url);
    match what {
        "create" => {
            common::ops_per_second(OPS, conc, move |i| {
                let (c, url) = (client.clone(), base.clone());
                async move {
                    let r = c
                        .post(url)
                        .json(&json!({"metadata": {"name": format!("c{i}")}, "data": {"k": "v"}}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 201);
                    // Read every body: an h2 client that drops responses early cancels streams and, past
                    // 1,024 of them, shuts its own connection down.
                    let _ = r.bytes().await;
                }
            })
            .await
        }
        "get" => {
            common::ops_per_second(OPS, conc, move |i| {
                let (c, url) = (client.clone(), format!("{base}/c{}", i % 500));
                async move {
                    let r = c.get(url).send().await.unwrap();
                    assert_eq!(r.status(), 200);
                    let _ = r.bytes().await;
                }
            })
            .await
        }
        _ => {
            common::ops_per_second(OPS, conc, move |_| {
                let (c, url) = (client.clone(), format!("{base}?limit=100"));
                async move {
                    let r = c.get(url).send().await.unwrap();
                    assert_eq!(r.status(), 200);
                    let _ = r.bytes().await;
                }
            })
            .await
        }
    }
}

/// What a create is on etcd: a put guarded by `create_revision == 0` (kube-apiserver's etcd3 store
/// does the same transaction), so this is the ceiling for creates on etcd, not a plain put.
async fn raw_etcd_txn_create(endpoint: &str, conc: usize) -> f64 {
    let client = Client::connect([endpoint], None).await.unwrap();
    let run = uuid::Uuid::new_v4().simple().to_string();
    common::ops_per_second(OPS, conc, move |i| {
        let mut c = client.clone();
        let k = format!("/bench-txn/{run}/{i}");
        async move {
            let t = etcd_client::Txn::new()
                .when([etcd_client::Compare::create_revision(k.clone(), etcd_client::CompareOp::Equal, 0)])
                .and_then([etcd_client::TxnOp::put(k, vec![b'x'; 200], None)]);
            c.txn(t).await.unwrap();
        }
    })
    .await
}

async fn idle_memory() {
    let k = common::KgateProcess::start(&[], "kgate-bench-server.log").await;
    let (client, url) = (k.admin(), k.url.clone());
    let empty = k.rss_kib();
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= 1000 {
                    return;
                }
                let name = format!("t{i}");
                let lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
                let r = client.post(format!("{url}/apis/tenancy.kgate.dev/v1alpha1/logicalclusters")).json(&lc).send().await.unwrap();
                assert_eq!(r.status(), 201);
                let _ = r.bytes().await;
                for j in 0..10 {
                    let cm = json!({"metadata": {"name": format!("cm{j}")}, "data": {"k": "v"}});
                    let r = client.post(format!("{url}/clusters/{name}/api/v1/namespaces/default/configmaps")).json(&cm).send().await.unwrap();
                    assert_eq!(r.status(), 201);
                    let _ = r.bytes().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fill = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settling = k.rss_kib();
    // The allocator gives back what it no longer uses after its decay time (10 s): idle is after that.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let idle = k.rss_kib();
    println!("\nidle memory (embedded store): empty {:.1} MiB; 1,000 clusters x 10 configmaps (+ their namespaces and service accounts) {:.1} MiB 15 s after the last write [target < 50 MiB] ({:.1} MiB 3 s after); filled in {:.1}s",
        empty as f64 / 1024.0, idle as f64 / 1024.0, settling as f64 / 1024.0, fill.as_secs_f64());
}

#[tokio::main]
async fn main() {
    if std::env::var("KGATE_BENCH").as_deref() == Ok("memory") {
        idle_memory().await;
        return;
    }
    let endpoint = common::shared_etcd().to_string();
    let on_etcd = TestServer::start(Backend::Etcd).await;
    let embedded = TestServer::start(Backend::Embedded).await;
    let mut rows = Vec::new();
    for (round, what) in ["create", "get", "list"].into_iter().enumerate() {
        for conc in CONCURRENCY {
            let ns = format!("b{round}-{conc}");
            // Gets and lists read what the creates of this concurrency wrote.
            let ns = if what == "create" { ns } else { format!("b0-{conc}") };
            for s in [&on_etcd, &embedded] {
                if what == "create" {
                    s.post("/api/v1/namespaces", &json!({"metadata": {"name": ns}})).await;
                }
            }
            let prefix = format!("/bench-raw/{conc}/");
            let etcd = raw_etcd(&endpoint, what, conc, prefix).await;
            let kgate_etcd = through_kgate(&on_etcd, what, conc, &ns).await;
            let kgate_embedded = through_kgate(&embedded, what, conc, &ns).await;
            rows.push(Row { what, conc, etcd, kgate_etcd, kgate_embedded });
        }
    }
    println!("\n{OPS} operations each; ops/s (ratio to raw etcd)");
    println!("{:<8} {:>5} {:>12} {:>22} {:>22}", "op", "conc", "raw etcd", "kgate on etcd", "kgate embedded");
    for r in &rows {
        println!(
            "{:<8} {:>5} {:>12.0} {:>14.0} ({:>4.2}x) {:>14.0} ({:>4.2}x)",
            r.what,
            r.conc,
            r.etcd,
            r.kgate_etcd,
            r.kgate_etcd / r.etcd,
            r.kgate_embedded,
            r.kgate_embedded / r.etcd
        );
    }
    let c64 = rows.iter().find(|r| r.what == "create" && r.conc == 64).unwrap();
    println!(
        "target: creates through kgate at concurrency 64 >= 0.5x raw etcd puts: on etcd {:.2}x, embedded {:.2}x",
        c64.kgate_etcd / c64.etcd,
        c64.kgate_embedded / c64.etcd
    );
    println!("\nthe ceiling for creates on etcd: raw compare-and-put transactions");
    for conc in CONCURRENCY {
        let txn = raw_etcd_txn_create(&endpoint, conc).await;
        let row = rows.iter().find(|r| r.what == "create" && r.conc == conc).unwrap();
        println!(
            "conc {conc:>3}: raw txn {txn:>8.0}/s; kgate creates on etcd {:>8.0}/s ({:.2}x of raw txn)",
            row.kgate_etcd,
            row.kgate_etcd / txn
        );
    }
    on_etcd.stop().await;
    embedded.stop().await;
    idle_memory().await;
}
