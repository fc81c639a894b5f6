//! Logical clusters over two shards (issue 27's figures), on real etcd: one kgate serving two etcd
//! clusters (`--etcd-servers` and `--shard b=...`), placing each new cluster on the emptier one.
//! - create `KGATE_BENCH_CLUSTERS` clusters (default 100,000), 64 at a time: clusters per second
//!   (target at least 1,000), resident memory per empty cluster (target at most 10 KiB), and how many
//!   each shard got;
//! - delete 10,000 of them: seconds until every one is purged and its LogicalCluster gone (target at
//!   most 60 s);
//! - a wildcard list of every cluster's namespaces across both shards, against the same list from a
//!   kgate whose clusters (as many) are on one etcd, in the same run: medians of interleaved rounds;
//! - a cluster of 5,000 ConfigMaps moved from one shard to the other, against the same keys copied
//!   and deleted raw.
//!
//! Run: `cargo bench --bench shards` (`KGATE_BENCH_CLUSTERS=20000` for a shorter run).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use std::sync::Arc;

use common::{KgateProcess, TestEtcd};
use kgate::storage::etcd::EtcdStore;
use kgate::storage::{RangeRequest, Store};
use serde_json::Value;

const CONCURRENCY: usize = 64;
const DELETED: usize = 10_000;
/// Clusters of each kgate in the list comparison (4 namespaces each).
const LISTED: usize = 5_000;
const LIST_ROUNDS: usize = 5;
/// Creations raw etcd is measured doing, as kgate's.
const RAW: usize = 10_000;
/// ConfigMaps in the cluster moved between shards.
const MOVED: usize = 5_000;

const LC: &str = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";

fn clusters() -> usize {
    std::env::var("KGATE_BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// Seconds one wildcard list of namespaces takes, and how many it holds.
async fn list_namespaces(k: &KgateProcess, client: &reqwest::Client) -> (f64, usize) {
    let start = Instant::now();
    let resp = client.get(format!("{}/clusters/*/api/v1/namespaces", k.url)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let list: Value = resp.json().await.unwrap();
    (start.elapsed().as_secs_f64(), list["items"].as_array().map_or(0, Vec::len))
}

/// CPU milliseconds per cluster each process spent between two readings.
fn cpu_per_cluster(before: [f64; 3], after: [f64; 3], clusters: usize) -> [f64; 3] {
    std::array::from_fn(|i| (after[i] - before[i]) / clusters as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

type Counts = std::collections::BTreeMap<String, usize>;

/// Clusters per shard, from the LogicalClusters' `spec.shard`: of all, and of those the deletion takes.
async fn placement(k: &KgateProcess) -> (Counts, Counts) {
    let client = k.admin();
    let (mut counts, mut deleted) = (Counts::new(), Counts::new());
    let mut token = String::new();
    loop {
        let url = format!("{}{LC}?limit=5000&continue={token}", k.url);
        let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        for lc in page["items"].as_array().unwrap() {
            let shard = lc["spec"]["shard"].as_str().unwrap_or("default").to_string();
            let name = lc["metadata"]["name"].as_str().unwrap_or_default();
            if name.strip_prefix('c').and_then(|i| i.parse::<usize>().ok()).is_some_and(|i| i < DELETED) {
                *deleted.entry(shard.clone()).or_insert(0) += 1;
            }
            *counts.entry(shard).or_insert(0) += 1;
        }
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => return (counts, deleted),
        }
    }
}

#[tokio::main]
async fn main() {
    let (a, b, single) = (TestEtcd::start(), TestEtcd::start(), TestEtcd::start());
    let shard = format!("b={}", b.endpoint);
    let k = KgateProcess::start(&["--etcd-servers", &a.endpoint, "--shard", &shard], "kgate-bench-shards.log").await;

    // Creation and memory at scale.
    let n = clusters();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = k.rss_kib();
    let cpu = |k: &KgateProcess| [k.cpu_ms(), a.cpu_ms(), b.cpu_ms()];
    let work = || async { [common::etcd_work(&a.endpoint).await, common::etcd_work(&b.endpoint).await] };
    let (cpu_before, work_before) = (cpu(&k), work().await);
    let rate = k.create_clusters("c", n, CONCURRENCY).await;
    let (cpu_used, work_after) = (cpu_per_cluster(cpu_before, cpu(&k), n), work().await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = k.rss_kib();
    let per_cluster = after.saturating_sub(before) as f64 / n as f64;
    let (spread, of_deleted) = placement(&k).await;
    println!("\n{n} logical clusters over two etcd shards, {CONCURRENCY} at a time");
    println!("created at {rate:.0} clusters/s [target >= 1,000]; placed: {spread:?} (the {DELETED} deleted below: {of_deleted:?})");
    println!(
        "memory per empty cluster: {per_cluster:.1} KiB (RSS {:.1} -> {:.1} MiB) [target <= 10 KiB]",
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );
    println!(
        "CPU per cluster created: kgate {:.2} ms, default shard's etcd {:.2} ms, shard b's etcd {:.2} ms",
        cpu_used[0], cpu_used[1], cpu_used[2]
    );
    println!("etcd work per cluster created, default shard: {}", common::work_per(&work_before[0], &work_after[0], n));
    println!("etcd work per cluster created, shard b: {}", common::work_per(&work_before[1], &work_after[1], n));

    // Raw etcd doing the store work of as many creations, in the same run, as kgate does it: on the
    // default shard, the cluster's objects (the very keys and bytes kgate wrote for c0) and its
    // LogicalCluster in one transaction; on the other, the LogicalCluster's create on the default
    // shard, the objects in one transaction on theirs, and the LogicalCluster's update to Ready.
    let raw = n.min(RAW);
    let tls = Default::default();
    let stores = [
        Arc::new(EtcdStore::connect(std::slice::from_ref(&a.endpoint), &tls).await.unwrap()),
        Arc::new(EtcdStore::connect(std::slice::from_ref(&b.endpoint), &tls).await.unwrap()),
    ];
    let mut template = Vec::new();
    // c0's keys, one resource's prefix at a time (the store holds every cluster's).
    let prefixes: std::collections::BTreeSet<String> = kgate::resources::builtins()
        .iter()
        .map(|d| kgate::storage::keys::collection("/registry", d.storage_group(), &d.plural, Some("c0"), None))
        .collect();
    for st in &stores {
        for prefix in &prefixes {
            let got = st.range(RangeRequest { prefix: prefix.clone(), ..Default::default() }).await.unwrap();
            template.extend(got.kvs.into_iter().map(|kv| (kv.key, kv.value)));
        }
    }
    let lc_value = stores[0].get("/registry/tenancy.kgate.dev/logicalclusters/root/c0").await.unwrap().unwrap().value;
    let (keys, bytes) = (template.len(), template.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>());
    let (template, lc_value) = (Arc::new(template), Arc::new(lc_value));

    // Deleting 10,000: until every one is purged from its shard and its LogicalCluster is gone.
    let deleted = DELETED.min(n);
    let listed: Value = k.admin().get(format!("{}{LC}?limit=1", k.url)).send().await.unwrap().json().await.unwrap();
    let from = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut events =
        common::watch_events(&k.admin(), &format!("{}{LC}?watch=true&resourceVersion={from}", k.url)).await;
    let (cpu_before, work_before) = (cpu(&k), work().await);
    let start = Instant::now();
    let (client, url) = (k.admin(), k.url.clone());
    common::ops_per_second(deleted, CONCURRENCY, move |i| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let r = client.delete(format!("{url}{LC}/c{i}")).send().await.unwrap();
            assert_eq!(r.status(), 200);
        }
    })
    .await;
    let accepted = start.elapsed();
    // Waited for as a client would, on a watch of the LogicalClusters (polling each with GETs added
    // hundreds of reads a second to the default shard's etcd while it worked); then checked one by
    // one: every LogicalCluster gone means every key of its cluster purged (the purge's finalizer
    // holds it until then).
    let mut gone = 0;
    while gone < deleted {
        let left = tokio::time::timeout_at((start + Duration::from_secs(900)).into(), events.recv()).await;
        let ev = left.expect("deletions did not finish").expect("the watch of LogicalClusters ended");
        let name = ev["object"]["metadata"]["name"].as_str().unwrap_or_default();
        let ours = name.strip_prefix('c').and_then(|i| i.parse::<usize>().ok()).is_some_and(|i| i < deleted);
        if ev["type"] == "DELETED" && ours {
            gone += 1;
        }
    }
    let (took, cpu_used) = (start.elapsed().as_secs_f64(), cpu_per_cluster(cpu_before, cpu(&k), deleted));
    let work_after = work().await;
    let client = k.admin();
    for i in 0..deleted {
        let r = client.get(format!("{}{LC}/c{i}", k.url)).send().await.unwrap();
        assert_eq!(r.status(), 404, "c{i} is gone");
    }
    println!(
        "{deleted} clusters deleted (accepted in {:.1} s), all purged and gone in {took:.1} s [target <= 60 s]",
        accepted.as_secs_f64(),
    );
    let busy = |ms: f64| ms * deleted as f64 / took / 10.0;
    println!(
        "CPU per cluster deleted: kgate {:.2} ms, default shard's etcd {:.2} ms, shard b's etcd {:.2} ms (busy {:.0}%, {:.0}%, {:.0}% of a core)",
        cpu_used[0], cpu_used[1], cpu_used[2], busy(cpu_used[0]), busy(cpu_used[1]), busy(cpu_used[2])
    );
    println!(
        "etcd work per cluster deleted, default shard: {}",
        common::work_per(&work_before[0], &work_after[0], deleted)
    );
    println!("etcd work per cluster deleted, shard b: {}", common::work_per(&work_before[1], &work_after[1], deleted));

    // (After the deletions, so that they run on stores of the size they had.)
    let etcd_before = cpu(&k);
    let raw_rate = common::ops_per_second(raw, CONCURRENCY, {
        let stores = stores.clone();
        move |i| {
            let (stores, template, lc_value) = (stores.clone(), template.clone(), lc_value.clone());
            async move {
                let lc = format!("/rawbench/lc/r{i}");
                let mut items: Vec<(String, Vec<u8>)> = template
                    .iter()
                    .map(|(k, v)| {
                        (k.replacen("/registry/", "/rawbench/", 1).replacen("/c0/", &format!("/r{i}/"), 1), v.clone())
                    })
                    .collect();
                if i % 2 == 0 {
                    items.push((lc, lc_value.to_vec()));
                    assert!(stores[0].create_all(&items, None).await.unwrap().is_some());
                } else {
                    let rev = stores[0].create(&lc, lc_value.to_vec()).await.unwrap();
                    assert!(stores[1].create_all(&items, None).await.unwrap().is_some());
                    stores[0].update(&lc, lc_value.to_vec(), rev).await.unwrap();
                }
            }
        }
    })
    .await;
    let raw_cpu = cpu_per_cluster(etcd_before, cpu(&k), raw);
    println!(
        "raw etcd, the same store work ({} keys, {:.1} KiB per cluster): {raw_rate:.0} clusters/s; kgate {:.2}x",
        keys,
        bytes as f64 / 1024.0,
        rate / raw_rate
    );
    println!(
        "CPU per cluster created raw: default shard's etcd {:.2} ms, shard b's etcd {:.2} ms",
        raw_cpu[1], raw_cpu[2]
    );

    // The list across shards against the same list on one etcd: two fresh servers, as many clusters.
    drop(k);
    let args = ["--etcd-servers", &a.endpoint, "--shard", &shard, "--etcd-prefix", "/listed"];
    let k = KgateProcess::start(&args, "kgate-bench-shards-list.log").await;
    let one = KgateProcess::start(&["--etcd-servers", &single.endpoint], "kgate-bench-shards-one.log").await;
    k.create_clusters("l", LISTED, CONCURRENCY).await;
    one.create_clusters("l", LISTED, CONCURRENCY).await;
    let (kc, oc) = (k.admin(), one.admin());
    list_namespaces(&k, &kc).await;
    list_namespaces(&one, &oc).await;
    let (mut across, mut alone, mut items) = (Vec::new(), Vec::new(), (0, 0));
    for _ in 0..LIST_ROUNDS {
        let (t, n) = list_namespaces(&k, &kc).await;
        across.push(t);
        let (u, m) = list_namespaces(&one, &oc).await;
        alone.push(u);
        items = (n, m);
    }
    let (t, u) = (median(across), median(alone));
    println!("\nwildcard list of namespaces, {LISTED} clusters each, medians of {LIST_ROUNDS} interleaved rounds");
    println!(
        "across two shards: {:.0} ms ({} items); on one etcd: {:.0} ms ({} items); ratio {:.2}x",
        t * 1e3,
        items.0,
        u * 1e3,
        items.1,
        t / u
    );

    move_cluster(&k, &kc, &a, &b).await;
}

/// A cluster of `MOVED` ConfigMaps moved from the default shard to b: seconds until the move is done
/// (the cluster answers 503 meanwhile), against the least store work a move needs done raw on the
/// same two etcds (read every key, write it on the other, delete it, in transactions of 100).
async fn move_cluster(k: &KgateProcess, client: &reqwest::Client, a: &TestEtcd, b: &TestEtcd) {
    let lc = serde_json::json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "moved"}, "spec": {"shard": "default"}});
    let resp = client.post(format!("{}{LC}", k.url)).json(&lc).send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.text().await.unwrap());
    let url = k.url.clone();
    common::ops_per_second(MOVED, CONCURRENCY, {
        let client = client.clone();
        move |i| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm{i}")}, "data": {"k": "x".repeat(200)}});
                let path = format!("{url}/clusters/moved/api/v1/namespaces/default/configmaps");
                assert!(client.post(path).json(&cm).send().await.unwrap().status().is_success());
            }
        }
    })
    .await;
    let path = format!("{}{LC}/moved", k.url);
    let mut lc: Value = client.get(&path).send().await.unwrap().json().await.unwrap();
    lc["spec"]["shard"] = "b".into();
    let started = Instant::now();
    assert!(client.put(&path).json(&lc).send().await.unwrap().status().is_success());
    loop {
        let now: Value = client.get(&path).send().await.unwrap().json().await.unwrap();
        if now["status"].get("shard").is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed().as_secs_f64() - kgate::tenancy::MOVE_GRACE.as_secs_f64();

    // Raw: the same keys, copied from a to b and deleted from a, under another prefix.
    let (from, to) = (
        EtcdStore::connect(std::slice::from_ref(&a.endpoint), &Default::default()).await.unwrap(),
        EtcdStore::connect(std::slice::from_ref(&b.endpoint), &Default::default()).await.unwrap(),
    );
    let moved = from
        .range(RangeRequest { prefix: "/listed/".into(), ..Default::default() })
        .await
        .unwrap()
        .kvs
        .into_iter()
        .filter(|kv| kv.key.contains("/moved/"))
        .count();
    let got = to.range(RangeRequest { prefix: "/listed/".into(), ..Default::default() }).await.unwrap();
    let theirs: Vec<_> = got.kvs.into_iter().filter(|kv| kv.key.contains("/moved/")).collect();
    assert_eq!(moved, 0, "nothing of it is left on the default shard");
    for chunk in theirs.chunks(100) {
        let items: Vec<(String, Vec<u8>)> =
            chunk.iter().map(|kv| (kv.key.replacen("/listed/", "/rawmove/", 1), kv.value.clone())).collect();
        assert!(from.create_all(&items, None).await.unwrap().is_some());
    }
    let raw_started = Instant::now();
    let mut start = None;
    loop {
        let page = from
            .range(RangeRequest { prefix: "/rawmove/".into(), start: start.take(), limit: 100, revision: None })
            .await
            .unwrap();
        start = page.next_start();
        let items: Vec<(String, Vec<u8>)> = page.kvs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
        assert!(to.create_all(&items, None).await.unwrap().is_some());
        let gone: Vec<(String, i64)> = page.kvs.iter().map(|kv| (kv.key.clone(), kv.mod_revision)).collect();
        assert!(from.delete_all(&gone).await.unwrap());
        if start.is_none() {
            break;
        }
    }
    let raw = raw_started.elapsed().as_secs_f64();
    println!(
        "
moving a cluster of {} keys ({MOVED} ConfigMaps) from the default shard to b",
        theirs.len()
    );
    println!(
        "kgate: {took:.2} s after its {} s grace ({:.0} keys/s); raw etcd, read, copied and deleted in 100s: {raw:.2} s ({:.0} keys/s); {:.1}x raw's time",
        kgate::tenancy::MOVE_GRACE.as_secs(),
        theirs.len() as f64 / took,
        theirs.len() as f64 / raw,
        took / raw
    );
}
