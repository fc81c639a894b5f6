//! The storage contract, run against both backends: the embedded store and a real etcd.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kgate::storage::embedded::EmbeddedStore;
use kgate::storage::etcd::{EtcdStore, EtcdTls};
use kgate::storage::{Guard, RangeRequest, Store, StoreError, WatchEvent, WatchStream};

async fn next_change(w: &mut WatchStream) -> WatchEvent {
    loop {
        let ev =
            tokio::time::timeout(Duration::from_secs(10), w.next()).await.expect("event in time").expect("stream open");
        match ev.expect("no error") {
            WatchEvent::Progress(_) => continue,
            other => return other,
        }
    }
}

/// Every behaviour kgate relies on, under a fresh prefix `p` (ends with `/`).
async fn contract(store: Arc<dyn Store>, p: &str) {
    let k = |s: &str| format!("{p}{s}");
    let r0 = store.revision().await.unwrap();

    // Create, get, create again.
    let r1 = store.create(&k("a/x"), b"1".to_vec()).await.unwrap();
    assert!(r1 > r0, "revisions grow");
    let got = store.get(&k("a/x")).await.unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.mod_revision), (&b"1"[..], r1));
    assert!(matches!(store.create(&k("a/x"), b"2".to_vec()).await, Err(StoreError::AlreadyExists)));
    assert!(store.get(&k("a/missing")).await.unwrap().is_none());

    // Compare-and-swap update.
    let r2 = store.update(&k("a/x"), b"2".to_vec(), r1).await.unwrap();
    assert!(r2 > r1);
    match store.update(&k("a/x"), b"3".to_vec(), r1).await {
        Err(StoreError::Conflict { current: Some(c) }) => assert_eq!(c.mod_revision, r2),
        other => panic!("expected conflict, got {other:?}"),
    }
    assert!(matches!(store.update(&k("a/missing"), b"1".to_vec(), 1).await, Err(StoreError::NotFound)));

    // Guarded create: only while the guard key is at its revision; an existing key is reported first.
    let g = store.create(&k("g/ns"), b"active".to_vec()).await.unwrap();
    let guard = Guard { key: k("g/ns"), mod_revision: g };
    let rg = store.create_guarded(&k("g/obj1"), b"1".to_vec(), Some(&guard)).await.unwrap();
    assert!(rg > g);
    assert!(matches!(
        store.create_guarded(&k("g/obj1"), b"1".to_vec(), Some(&guard)).await,
        Err(StoreError::AlreadyExists)
    ));
    let g2 = store.update(&k("g/ns"), b"terminating".to_vec(), g).await.unwrap();
    assert!(matches!(
        store.create_guarded(&k("g/obj2"), b"2".to_vec(), Some(&guard)).await,
        Err(StoreError::GuardChanged)
    ));
    assert!(store.get(&k("g/obj2")).await.unwrap().is_none(), "a refused create writes nothing");

    // Many creates at once: all or nothing (a store may decline, writing nothing).
    let now = Guard { key: k("g/ns"), mod_revision: g2 };
    let items = vec![(k("m/1"), b"1".to_vec()), (k("m/2"), b"2".to_vec())];
    if let Some(made) = store.create_all(&items, Some(&now)).await.unwrap() {
        let (a, b) = (store.get(&k("m/1")).await.unwrap().unwrap(), store.get(&k("m/2")).await.unwrap().unwrap());
        assert_eq!((a.value.as_slice(), b.value.as_slice()), (&b"1"[..], &b"2"[..]));
        assert_eq!((a.mod_revision, b.mod_revision), (made, made), "one step, at the revision it answers");
    } else {
        assert!(store.get(&k("m/1")).await.unwrap().is_none() && store.get(&k("m/2")).await.unwrap().is_none());
    }
    let clash = vec![(k("m/3"), b"3".to_vec()), (k("g/obj1"), b"x".to_vec())];
    assert!(store.create_all(&clash, Some(&now)).await.unwrap().is_none(), "one key exists");
    assert!(store.create_all(&[(k("m/4"), b"4".to_vec())], Some(&guard)).await.unwrap().is_none(), "the guard moved");
    for gone in ["m/3", "m/4"] {
        assert!(store.get(&k(gone)).await.unwrap().is_none(), "{gone}: a refused create writes nothing");
    }
    assert_eq!(store.get(&k("g/obj1")).await.unwrap().unwrap().value, b"1");

    // Many deletes at once: all or nothing, each key only at its revision.
    let (d1, d2) =
        (store.create(&k("d/1"), b"1".to_vec()).await.unwrap(), store.create(&k("d/2"), b"2".to_vec()).await.unwrap());
    assert!(!store.delete_all(&[(k("d/1"), d1), (k("d/2"), d1)]).await.unwrap(), "d/2 is not at that revision");
    assert!(store.get(&k("d/1")).await.unwrap().is_some(), "a refused delete deletes nothing");
    if store.delete_all(&[(k("d/1"), d1), (k("d/2"), d2)]).await.unwrap() {
        assert!(store.get(&k("d/1")).await.unwrap().is_none() && store.get(&k("d/2")).await.unwrap().is_none());
    } else {
        assert!(store.get(&k("d/1")).await.unwrap().is_some() && store.get(&k("d/2")).await.unwrap().is_some());
    }

    // Several reads in one go, in order, each within its prefix and limit.
    let read = |prefix: &str, limit: usize| RangeRequest { prefix: k(prefix), limit, ..Default::default() };
    let got = store.ranges(vec![read("g/", 0), read("none/", 0), read("g/", 1)]).await.unwrap();
    let keys: Vec<Vec<String>> = got.iter().map(|r| r.kvs.iter().map(|kv| kv.key.clone()).collect()).collect();
    assert_eq!(keys, [vec![k("g/ns"), k("g/obj1")], vec![], vec![k("g/ns")]]);
    assert_eq!((got[0].more, got[2].more), (false, true));
    assert!(matches!(
        store.create_guarded(&k("g/obj1"), b"1".to_vec(), Some(&guard)).await,
        Err(StoreError::AlreadyExists)
    ));
    let fresh = Guard { key: k("g/ns"), mod_revision: g2 };
    store.create_guarded(&k("g/obj2"), b"2".to_vec(), Some(&fresh)).await.unwrap();
    let (ns_gone, _) = store.delete(&k("g/ns"), None).await.unwrap();
    assert!(matches!(
        store.create_guarded(&k("g/obj3"), b"3".to_vec(), Some(&fresh)).await,
        Err(StoreError::GuardChanged)
    ));
    // Reads in one go at their own past revisions: a key as it was before its delete, and gone at it
    // (a key sharing its start is not taken for it).
    let past = store
        .ranges(vec![RangeRequest::key_at(&k("g/ns"), ns_gone - 1), RangeRequest::key_at(&k("g/ns"), ns_gone)])
        .await
        .unwrap();
    assert_eq!(past[0].kvs.len(), 1, "g/ns before its delete");
    assert_eq!((past[0].kvs[0].key.as_str(), past[0].kvs[0].mod_revision), (k("g/ns").as_str(), g2));
    assert!(past[1].kvs.iter().all(|kv| kv.key != k("g/ns")), "gone at its delete's revision");

    // Prefix isolation: `a/` never sees `a-b/` or `a0/` (which sort before and after it).
    store.create(&k("a-b/y"), b"other".to_vec()).await.unwrap();
    store.create(&k("a0/y"), b"other".to_vec()).await.unwrap();
    for i in 0..5 {
        store.create(&k(&format!("a/item{i}")), vec![i]).await.unwrap();
    }
    let all = store.range(RangeRequest { prefix: k("a/"), ..Default::default() }).await.unwrap();
    assert_eq!(all.kvs.len(), 6);
    assert!(all.kvs.iter().all(|kv| kv.key.starts_with(&k("a/"))));
    assert!(!all.more);
    let keys: Vec<&str> = all.kvs.iter().map(|kv| kv.key.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "range is in key order");

    // Limit and continuation from a start key.
    let page = store.range(RangeRequest { prefix: k("a/"), limit: 2, ..Default::default() }).await.unwrap();
    assert_eq!(page.kvs.len(), 2);
    assert!(page.more);
    let next_start = format!("{}\0", page.kvs[1].key);
    let rest = store
        .range(RangeRequest { prefix: k("a/"), start: Some(next_start), limit: 0, revision: Some(page.revision) })
        .await
        .unwrap();
    assert_eq!(rest.kvs.len(), 4);

    // A read at a past revision sees the past, even after deletes and updates.
    let before = store.revision().await.unwrap();
    let (rd, prev) = store.delete(&k("a/item0"), None).await.unwrap();
    assert_eq!(prev.value, vec![0]);
    store
        .update(&k("a/item1"), b"changed".to_vec(), store.get(&k("a/item1")).await.unwrap().unwrap().mod_revision)
        .await
        .unwrap();
    store.create(&k("a/item9-new"), b"new".to_vec()).await.unwrap();
    store.delete(&k("a-b/y"), None).await.unwrap();
    store.delete(&k("a0/y"), None).await.unwrap();
    let past =
        store.range(RangeRequest { prefix: k("a/"), revision: Some(before), ..Default::default() }).await.unwrap();
    assert_eq!(past.kvs.len(), 6, "keys created later are not in the past");
    assert!(past.kvs.iter().all(|kv| kv.key.starts_with(&k("a/"))), "nor keys of another prefix changed since");
    let page = store
        .range(RangeRequest { prefix: k("a/"), start: Some(k("a/item0")), limit: 2, revision: Some(before) })
        .await
        .unwrap();
    let names: Vec<String> = page.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(names, vec![k("a/item0"), k("a/item1")], "a past page starts at the start key, deleted keys included");
    assert_eq!(page.kvs[1].value, vec![1], "with their values of then");
    assert!(page.more);
    assert_eq!(past.kvs.iter().find(|kv| kv.key == k("a/item1")).unwrap().value, vec![1]);
    let now = store.range(RangeRequest { prefix: k("a/"), ..Default::default() }).await.unwrap();
    assert_eq!(now.kvs.len(), 6);

    // Delete preconditions.
    let cur = store.get(&k("a/item2")).await.unwrap().unwrap();
    assert!(matches!(store.delete(&k("a/item2"), Some(cur.mod_revision - 1)).await, Err(StoreError::Conflict { .. })));
    assert!(matches!(store.delete(&k("a/missing"), None).await, Err(StoreError::NotFound)));

    // Watch from a past revision replays history in order, with previous values, then goes live.
    let mut w = store.watch(&k("a/"), before).await.unwrap();
    match next_change(&mut w).await {
        WatchEvent::Delete { revision, prev: Some(p), key } => {
            assert_eq!((revision, key.as_str(), p.value.as_slice()), (rd, k("a/item0").as_str(), &[0u8][..]))
        }
        other => panic!("expected delete, got {other:?}"),
    }
    match next_change(&mut w).await {
        WatchEvent::Put { kv, prev: Some(p), created: false } => {
            assert_eq!((kv.value.as_slice(), p.value.as_slice()), (&b"changed"[..], &[1u8][..]))
        }
        other => panic!("expected update, got {other:?}"),
    }
    assert!(matches!(next_change(&mut w).await, WatchEvent::Put { prev: None, created: true, .. }), "the later create");
    store.create(&k("a-b/z"), b"not mine".to_vec()).await.unwrap();
    let live = store.create(&k("a/live"), b"L".to_vec()).await.unwrap();
    match next_change(&mut w).await {
        WatchEvent::Put { kv, prev: None, created: true } => assert_eq!((kv.key, kv.mod_revision), (k("a/live"), live)),
        other => panic!("expected the live create (and nothing from a-b/), got {other:?}"),
    }

    // A watch of what keys are now replays the same changes in the same order (previous values may
    // be left out: the followers that use it read none, or read them at the revision before), and
    // still tells a create from an update.
    let mut current = store.watch_current(&k("a/"), before).await.unwrap();
    match next_change(&mut current).await {
        WatchEvent::Delete { revision, key, .. } => assert_eq!((revision, key), (rd, k("a/item0"))),
        other => panic!("expected delete, got {other:?}"),
    }
    match next_change(&mut current).await {
        WatchEvent::Put { kv, created: false, .. } => assert_eq!(kv.value.as_slice(), &b"changed"[..]),
        other => panic!("expected update, got {other:?}"),
    }
    assert!(matches!(next_change(&mut current).await, WatchEvent::Put { created: true, .. }), "the later create");
    match next_change(&mut current).await {
        WatchEvent::Put { kv, created: true, .. } => assert_eq!((kv.key, kv.mod_revision), (k("a/live"), live)),
        other => panic!("expected the live create, got {other:?}"),
    }
    drop(current);

    // A watch of deletions alone: the same history gives only its delete, then a live delete, and no
    // write in between.
    let mut deletes = store.watch_deletes(&k("a/"), before).await.unwrap();
    match next_change(&mut deletes).await {
        WatchEvent::Delete { revision, key, .. } => assert_eq!((revision, key), (rd, k("a/item0"))),
        other => panic!("expected the delete alone, got {other:?}"),
    }
    let gone = store.delete(&k("a/live"), Some(live)).await.unwrap().0;
    match next_change(&mut deletes).await {
        WatchEvent::Delete { revision, key, .. } => assert_eq!((revision, key), (gone, k("a/live"))),
        other => panic!("expected the live delete and no write, got {other:?}"),
    }
    drop(deletes);
    // Put back as it was, for what follows.
    store.create(&k("a/live"), b"L".to_vec()).await.unwrap();

    // Compaction: history before the compacted revision is gone for watches and past reads.
    let latest = store.revision().await.unwrap();
    store.compact(latest).await.unwrap();
    match store.watch(&k("a/"), before).await {
        Err(StoreError::Compacted { .. }) => {}
        Ok(mut s) => match tokio::time::timeout(Duration::from_secs(10), s.next()).await.unwrap() {
            Some(Err(StoreError::Compacted { .. })) => {}
            other => panic!("expected compacted, got {other:?}"),
        },
        Err(e) => panic!("expected compacted, got {e:?}"),
    }
    assert!(matches!(
        store.range(RangeRequest { prefix: k("a/"), revision: Some(before), ..Default::default() }).await,
        Err(StoreError::Compacted { .. })
    ));
    // Watching from the latest revision still works after compaction.
    let mut w2 = store.watch(&k("a/"), latest).await.unwrap();
    store.create(&k("a/after"), b"A".to_vec()).await.unwrap();
    assert!(matches!(next_change(&mut w2).await, WatchEvent::Put { .. }));
    assert!(store.healthy().await);

    // An unpaged read, or a watch catching up on many writes, larger than gRPC's default 4 MiB reply:
    // kube-apiserver reads whole collections in one range, and a watch resuming after a disconnect gets
    // the missed events in large batches. Each value stays under etcd's 1.5 MiB request limit.
    let big = vec![b'x'; 900 * 1024];
    let from = store.revision().await.unwrap();
    for i in 0..6 {
        store.create(&k(&format!("big/{i}")), big.clone()).await.unwrap();
    }
    let all = store.range(RangeRequest { prefix: k("big/"), ..Default::default() }).await.unwrap();
    assert_eq!(all.kvs.len(), 6, "a 5.3 MiB range in one reply");
    assert!(all.kvs.iter().all(|kv| kv.value == big));
    let mut w3 = store.watch(&k("big/"), from).await.unwrap();
    for i in 0..6 {
        match next_change(&mut w3).await {
            WatchEvent::Put { kv, .. } => assert_eq!((kv.key, kv.value.len()), (k(&format!("big/{i}")), big.len())),
            other => panic!("expected big/{i}, got {other:?}"),
        }
    }

    // A write over etcd's default 1.5 MiB request limit is refused by either store, and writes nothing.
    let huge = vec![b'x'; 1800 * 1024];
    assert!(matches!(store.create(&k("huge"), huge.clone()).await, Err(StoreError::TooLarge(_))));
    assert!(store.get(&k("huge")).await.unwrap().is_none());
    let small = store.create(&k("grows"), b"v".to_vec()).await.unwrap();
    assert!(matches!(store.update(&k("grows"), huge, small).await, Err(StoreError::TooLarge(_))));
    let kept = store.get(&k("grows")).await.unwrap().unwrap();
    assert_eq!((kept.value.as_slice(), kept.mod_revision), (b"v".as_slice(), small));
}

#[tokio::test]
async fn embedded_store_meets_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    contract(store, "/contract/").await;
}

/// On both etcd versions kgate is tested with, whichever `KGATE_TEST_ETCD` picks for the other tests:
/// Debian's 3.4 and etcd 3.5.
#[tokio::test]
async fn etcd_store_meets_the_contract_on_3_4_and_3_5() {
    for version in [common::EtcdVersion::V3_4, common::EtcdVersion::V3_5] {
        let etcd = common::TestEtcd::start_version(version);
        let store = EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), &EtcdTls::default()).await.unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let p = format!("/contract-{}/", uuid::Uuid::new_v4().simple());
        contract(store.clone(), &p).await;
        // etcd makes many keys in one transaction (the contract lets a store decline).
        let items: Vec<(String, Vec<u8>)> = (0..40).map(|i| (format!("{p}batch/{i}"), b"v".to_vec())).collect();
        assert!(store.create_all(&items, None).await.unwrap().is_some());
        let all = store.range(RangeRequest { prefix: format!("{p}batch/"), ..Default::default() }).await.unwrap();
        assert_eq!(all.kvs.len(), 40);
        let gone: Vec<(String, i64)> = all.kvs.iter().map(|kv| (kv.key.clone(), kv.mod_revision)).collect();
        assert!(store.delete_all(&gone).await.unwrap());
        assert!(store
            .range(RangeRequest { prefix: format!("{p}batch/"), ..Default::default() })
            .await
            .unwrap()
            .kvs
            .is_empty());
        // The server says which it is: the matrix is what it claims.
        let client = reqwest::get(format!("{}/version", etcd.endpoint))
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap();
        let want = match version {
            common::EtcdVersion::V3_4 => "3.4.",
            common::EtcdVersion::V3_5 => "3.5.",
        };
        assert!(client["etcdserver"].as_str().unwrap().starts_with(want), "{version:?}: {client}");
        drop(store);
    }
}

/// `/readyz` and `componentstatuses` are open to anyone, and each health probe is a read through
/// etcd's leader: a storm of them reaches etcd as at most one read a second, as kube-apiserver's check
/// does, and the answer still follows etcd going down and coming back within about a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_probes_reach_etcd_at_most_once_a_second_and_follow_it() {
    let mut etcd = common::TestEtcd::start();
    let store = Arc::new(EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), &EtcdTls::default()).await.unwrap());
    let ranges = || async { common::etcd_work(&etcd.endpoint).await.get("grpc Range").copied().unwrap_or(0.0) };
    let before = ranges().await;
    let started = std::time::Instant::now();
    assert!(store.healthy().await, "the first probe asks etcd");
    let storm: Vec<_> = (0..500)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.healthy().await })
        })
        .collect();
    let mut healthy = 0;
    for t in storm {
        healthy += usize::from(t.await.unwrap());
    }
    for _ in 0..500 {
        healthy += usize::from(store.healthy().await);
    }
    let probes = ranges().await - before;
    let allowed = started.elapsed().as_secs_f64().ceil() + 1.0;
    assert!(probes >= 1.0 && probes <= allowed, "{probes} probes reached etcd in {:?}", started.elapsed());
    assert_eq!(healthy, 1000, "probes answered by the last one found etcd down");

    etcd.stop();
    common::eventually(10, "the store to be reported down", || async { !store.healthy().await }).await;
    etcd.restart();
    common::eventually(20, "the store to be reported back", || async { store.healthy().await }).await;
}

/// A cluster on another shard is bootstrapped by one create of all its keys there, guarded by its
/// LogicalCluster in the default shard's etcd: two stores, so no one transaction holds both.
#[tokio::test]
async fn a_create_across_two_etcds_holds_only_while_its_guard_does() {
    let (a, b) = (common::TestEtcd::start(), common::TestEtcd::start());
    let tls = EtcdTls::default();
    let root: Arc<dyn Store> = Arc::new(EtcdStore::connect(std::slice::from_ref(&a.endpoint), &tls).await.unwrap());
    let own: Arc<dyn Store> = Arc::new(EtcdStore::connect(std::slice::from_ref(&b.endpoint), &tls).await.unwrap());
    let routed = kgate::storage::routed::Routed::new(own.clone(), root.clone(), "/registry");
    let lc = "/registry/tenancy.kgate.dev/logicalclusters/root/team";
    let created = routed.create(lc, b"{}".to_vec()).await.unwrap();
    let keys = ["/registry/core/namespaces/team/a", "/registry/core/namespaces/team/b"];
    let items: Vec<(String, Vec<u8>)> = keys.iter().map(|k| (k.to_string(), b"{}".to_vec())).collect();

    // The LogicalCluster changed (a DELETE, say): refused, and none of the keys is left behind.
    let stale = Guard { key: lc.into(), mod_revision: created };
    routed.update(lc, b"{\"deleting\":true}".to_vec(), created).await.unwrap();
    assert!(routed.create_all(&items, Some(&stale)).await.unwrap().is_none(), "the guard moved");
    for k in keys {
        assert!(own.get(k).await.unwrap().is_none(), "{k} was taken back");
    }
    // As it is now: all made, on the cluster's shard alone.
    let current = Guard { key: lc.into(), mod_revision: root.get(lc).await.unwrap().unwrap().mod_revision };
    assert!(routed.create_all(&items, Some(&current)).await.unwrap().is_some());
    for k in keys {
        assert!(own.get(k).await.unwrap().is_some() && root.get(k).await.unwrap().is_none(), "{k}");
    }
    // A key there already: nothing more is made.
    let more = vec![items[0].clone(), ("/registry/core/namespaces/team/c".to_string(), b"{}".to_vec())];
    assert!(routed.create_all(&more, Some(&current)).await.unwrap().is_none());
    assert!(own.get("/registry/core/namespaces/team/c").await.unwrap().is_none());
}

#[tokio::test]
async fn embedded_store_keeps_everything_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let rev = {
        let s = EmbeddedStore::open(dir.path()).unwrap();
        s.create("/k/a", b"1".to_vec()).await.unwrap();
        s.create("/k/b", b"2".to_vec()).await.unwrap()
    };
    let s = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(s.revision().await.unwrap(), rev, "revision survives a restart");
    assert_eq!(s.get("/k/b").await.unwrap().unwrap().value, b"2".to_vec());
    let next = s.create("/k/c", b"3".to_vec()).await.unwrap();
    assert!(next > rev, "revisions never repeat after a restart");
}

#[tokio::test]
async fn concurrent_creates_get_distinct_ordered_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let mut tasks = Vec::new();
    for i in 0..64 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move { s.create(&format!("/c/{i}"), vec![1]).await.unwrap() }));
    }
    let mut revs = Vec::new();
    for t in tasks {
        revs.push(t.await.unwrap());
    }
    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), 64, "every write has its own revision");
}
