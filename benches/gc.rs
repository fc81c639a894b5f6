//! The garbage collector (issue 55's figures):
//! - 10,000 dependents of 100 owners, on the embedded store and on etcd: the time from deleting the
//!   owners (background) to the last dependent gone, and kgate's resident memory meanwhile; then the
//!   same with foreground deletion, to the last owner gone (it waits for its dependents);
//! - what the collector holds with 100,000 logical clusters that each have owned objects (an owner
//!   and two dependents: 300,000 keys in etcd): heap allocated by it (jemalloc's count, before and
//!   after its listing, in this process), its own account of what it holds, and its listing's time.
//!   kube's collector would hold a node for each of the 300,000 objects.
//!
//! Run: `cargo bench --bench gc`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, KgateProcess};
use serde_json::{json, Value};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const OWNERS: usize = 100;
const PER_OWNER: usize = 100;
const CONCURRENCY: usize = 32;
const CLUSTERS: usize = 100_000;

fn reference(owner: &Value, block: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block})
}

/// Whether any ConfigMap labelled `bench=<tag>` is left: a one-item page, so that polling costs the
/// server little beside what it measures.
async fn any_left(client: &reqwest::Client, url: &str, tag: &str) -> bool {
    let path = format!("{url}/api/v1/namespaces/default/configmaps?labelSelector=bench%3D{tag}&limit=1");
    let list: Value = client.get(path).send().await.unwrap().json().await.unwrap();
    !list["items"].as_array().unwrap().is_empty()
}

/// Make the owners and their dependents, delete the owners with `policy`, and time until nothing of
/// `wait_for` (`dep` or `owner`) is left; returns seconds, and RSS before and at its peak in MiB.
async fn round(k: &KgateProcess, tag: &str, policy: &str, block: bool, wait_for: &str) -> (f64, f64, f64) {
    let client = k.admin();
    let url = k.url.clone();
    let cms = format!("{url}/api/v1/namespaces/default/configmaps");
    let mut owners = Vec::new();
    for o in 0..OWNERS {
        let owner =
            json!({"metadata": {"name": format!("{tag}-owner-{o}"), "labels": {"bench": format!("{tag}-owner")}}});
        let r = client.post(&cms).json(&owner).send().await.unwrap();
        assert_eq!(r.status(), 201);
        owners.push(r.json::<Value>().await.unwrap());
    }
    let owners = Arc::new(owners);
    let (c, u, t) = (client.clone(), cms.clone(), tag.to_string());
    common::ops_per_second(OWNERS * PER_OWNER, CONCURRENCY, move |i| {
        let (c, u, owners) = (c.clone(), u.clone(), owners.clone());
        let body = json!({"metadata": {"name": format!("{t}-dep-{i}"), "labels": {"bench": format!("{t}-dep")},
            "ownerReferences": [reference(&owners[i / PER_OWNER], block)]}});
        async move {
            let r = c.post(&u).json(&body).send().await.unwrap();
            assert_eq!(r.status(), 201);
            let _ = r.bytes().await;
        }
    })
    .await;
    let before = k.rss_kib() as f64 / 1024.0;
    let started = Instant::now();
    let (c, u, t, p) = (client.clone(), cms.clone(), tag.to_string(), policy.to_string());
    common::ops_per_second(OWNERS, 16, move |o| {
        let (c, u) = (c.clone(), u.clone());
        let path = format!("{u}/{t}-owner-{o}?propagationPolicy={p}");
        async move {
            let r = c.delete(&path).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().await;
        }
    })
    .await;
    let mut peak = before;
    let label = format!("{tag}-{wait_for}");
    while any_left(&client, &url, &label).await {
        peak = peak.max(k.rss_kib() as f64 / 1024.0);
        assert!(started.elapsed() < Duration::from_secs(600), "collection did not finish in 10 minutes");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    for what in ["owner", "dep"] {
        assert!(!any_left(&client, &url, &format!("{tag}-{what}")).await, "{tag}: {what}s are left");
    }
    (secs, before, peak)
}

async fn collection(backend: Backend) {
    let k = KgateProcess::start_on(backend, "kgate-bench-gc.log", None).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = OWNERS * PER_OWNER;
    let (secs, before, peak) = round(&k, "bg", "Background", false, "dep").await;
    println!(
        "{backend:?}: {n} dependents of {OWNERS} owners, background: last dependent gone {secs:.2} s after the deletes began ({:.0} dependents/s); RSS {before:.1} MiB, peak {peak:.1} MiB",
        n as f64 / secs
    );
    let (secs, before, peak) = round(&k, "fg", "Foreground", true, "owner").await;
    println!(
        "{backend:?}: {n} blocking dependents of {OWNERS} owners, foreground: last owner gone {secs:.2} s after the deletes began ({:.0} dependents/s); RSS {before:.1} MiB, peak {peak:.1} MiB",
        n as f64 / secs
    );
}

fn allocated() -> usize {
    tikv_jemalloc_ctl::epoch::advance().unwrap();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap()
}

/// The collector's own memory with `CLUSTERS` clusters holding owned objects, written to etcd
/// directly (an owner and two dependents each), in this process.
async fn at_scale() {
    use kgate::storage::Store;
    let etcd = common::shared_etcd();
    let store = kgate::storage::etcd::EtcdStore::connect(&[etcd.to_string()], &Default::default()).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let prefix = format!("/gc{}", uuid::Uuid::new_v4().simple());
    let started = Instant::now();
    let batch = 30;
    let mut items = Vec::new();
    for c in 0..CLUSTERS {
        let cluster = format!("tenant-{c}");
        let owner_uid = uuid::Uuid::new_v4().to_string();
        let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": "default", "uid": owner_uid}});
        items.push((format!("{prefix}/core/configmaps/{cluster}/default/owner"), serde_json::to_vec(&owner).unwrap()));
        for d in 0..2 {
            let dep = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("dep-{d}"), "namespace": "default",
                "uid": uuid::Uuid::new_v4().to_string(),
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid, "blockOwnerDeletion": true}]}});
            items.push((
                format!("{prefix}/core/configmaps/{cluster}/default/dep-{d}"),
                serde_json::to_vec(&dep).unwrap(),
            ));
        }
        if items.len() >= batch || c + 1 == CLUSTERS {
            assert!(store.create_all(&items, None).await.unwrap().is_some(), "etcd takes a batch at once");
            items.clear();
        }
    }
    println!("wrote {} keys of {CLUSTERS} clusters in {:.1} s", CLUSTERS * 3, started.elapsed().as_secs_f64());
    let registry = kgate::registry::Registry::new(store.clone(), prefix.clone());
    let crds = kgate::crd::CrdIndex::new(registry.clone());
    let before = allocated();
    let collector = kgate::gc::Collector::new(registry, crds);
    let started = Instant::now();
    let running = tokio::spawn(collector.clone().run());
    collector.wait_listed().await;
    let listing = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = allocated();
    let (tracked, held) = collector.footprint();
    println!(
        "{CLUSTERS} clusters with owned objects: listed (and every owner looked up) in {listing:.1} s; the collector tracks {tracked} clusters, \
         holding {:.1} MiB by its own account ({:.0} bytes a cluster); heap allocated since it started: {:.1} MiB ({:.0} bytes a cluster, \
         its owner lookups' cache of up to 16 MiB included)",
        held as f64 / (1 << 20) as f64,
        held as f64 / CLUSTERS as f64,
        after.saturating_sub(before) as f64 / (1 << 20) as f64,
        after.saturating_sub(before) as f64 / CLUSTERS as f64,
    );
    running.abort();
    let _ = running.await;
}

#[tokio::main]
async fn main() {
    collection(Backend::Embedded).await;
    collection(Backend::Etcd).await;
    at_scale().await;
}
