//! The shared watch cache: every acknowledged write reaches every matching watch exactly once and in
//! order across clusters; slow watchers are cut off and catch up without delaying others; deleted
//! clusters produce DELETED events; replicas on one etcd see each other's writes; watches resume across
//! a kgate restart; reads with resourceVersion=0 and fresh consistent lists come from the cache, and a
//! list across clusters from a packed cache is byte for byte what the store holds.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::{Backend, TestServer};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

const CM: &str = "api/v1/namespaces/default/configmaps";

fn rv_of(v: &Value) -> i64 {
    v["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

fn cluster_of(ev: &Value) -> String {
    ev["object"]["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string()
}

/// Collect non-bookmark events until one at or past `upto` arrives (or fail after 20 s of silence).
async fn collect_until(rx: &mut UnboundedReceiver<Value>, upto: i64) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no event up to {upto}; got {} events", out.len()))
            .expect("watch stream stays open");
        assert_ne!(ev["type"], "ERROR", "{ev}");
        if ev["type"] == "BOOKMARK" {
            continue;
        }
        let rv = rv_of(&ev["object"]);
        out.push(ev);
        if rv >= upto {
            return out;
        }
    }
}

/// (revision, event type, cluster, name) of every acknowledged write.
type Acked = Vec<(i64, &'static str, String, String)>;

/// Concurrent creates, updates and deletes of configmaps in `clusters`; returns every acknowledged one.
async fn write_concurrently(s: &Arc<TestServer>, clusters: &[&str], per_writer: usize) -> Acked {
    let mut tasks = Vec::new();
    for c in clusters {
        for w in 0..3 {
            let (s, c) = (s.clone(), c.to_string());
            tasks.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..per_writer {
                    let name = format!("w{w}-{i}");
                    let path = format!("/clusters/{c}/{CM}");
                    let (code, obj) = s.post(&path, &json!({"metadata": {"name": name}, "data": {"n": "0"}})).await;
                    assert_eq!(code, 201, "{obj}");
                    acked.push((rv_of(&obj), "ADDED", c.clone(), name.clone()));
                    let mut next = obj.clone();
                    next["data"]["n"] = json!("1");
                    let (code, obj) = s.put(&format!("{path}/{name}"), &next).await;
                    assert_eq!(code, 200, "{obj}");
                    acked.push((rv_of(&obj), "MODIFIED", c.clone(), name.clone()));
                    if i % 3 == 0 {
                        let (code, st) = s.delete(&format!("{path}/{name}")).await;
                        assert_eq!(code, 200, "{st}");
                        // The delete's revision is the one the DELETED event carries; read it from the
                        // watch side below (a plain delete answers with a Status).
                        acked.push((0, "DELETED", c.clone(), name.clone()));
                    }
                }
                acked
            }));
        }
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// Check one watch's events against the acknowledged writes it should see: each exactly once, in
/// strictly increasing resourceVersion order.
fn check_stream(label: &str, events: &[Value], expected: &Acked) {
    let rvs: Vec<i64> = events.iter().map(|e| rv_of(&e["object"])).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{label}: resourceVersions strictly increase: {rvs:?}");
    let seen: Vec<(&str, String, String)> = events
        .iter()
        .map(|e| {
            let t = match e["type"].as_str().unwrap() {
                "ADDED" => "ADDED",
                "MODIFIED" => "MODIFIED",
                "DELETED" => "DELETED",
                other => panic!("{label}: unexpected event type {other}"),
            };
            (t, cluster_of(e), e["object"]["metadata"]["name"].as_str().unwrap().to_string())
        })
        .collect();
    for (rv, t, c, n) in expected {
        let count = seen.iter().filter(|(st, sc, sn)| st == t && sc == c && sn == n).count();
        assert_eq!(count, 1, "{label}: {t} {c}/{n} (rv {rv}) seen {count} times");
        if *rv > 0 {
            assert!(
                events.iter().any(|e| rv_of(&e["object"]) == *rv && cluster_of(e) == *c),
                "{label}: {t} {c}/{n} at its acknowledged resourceVersion {rv}"
            );
        }
    }
    assert_eq!(seen.len(), expected.len(), "{label}: no events beyond the acknowledged writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_acknowledged_write_reaches_every_matching_watch_once_in_order() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = Arc::new(TestServer::start(backend).await);
        let clusters = ["o1", "o2", "o3"];
        for c in clusters {
            s.create_cluster(c).await;
        }
        let (_, list) = s.get("/clusters/*/api/v1/configmaps").await;
        let from = rv_of(&list);
        let mut wildcard = s.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={from}")).await;
        let mut wildcard_ns =
            s.watch(&format!("/clusters/*/{CM}?watch=true&resourceVersion={from}&allowWatchBookmarks=true")).await;
        let mut per_cluster = Vec::new();
        for c in clusters {
            per_cluster.push(s.watch(&format!("/clusters/{c}/{CM}?watch=true&resourceVersion={from}")).await);
        }
        let acked = write_concurrently(&s, &clusters, 12).await;
        // A write in another namespace: the namespace-scoped watches must not see it.
        let (code, other) = s
            .post("/clusters/o1/api/v1/namespaces/kube-system/configmaps", &json!({"metadata": {"name": "elsewhere"}}))
            .await;
        assert_eq!(code, 201, "{other}");
        // A last marker write per cluster tells each watch where the stream is complete.
        let mut last = BTreeMap::new();
        for c in clusters {
            let (_, m) = s.post(&format!("/clusters/{c}/{CM}"), &json!({"metadata": {"name": "zz-end"}})).await;
            last.insert(c, rv_of(&m));
        }
        let max = *last.values().max().unwrap();
        let with_end = |c: Option<&str>| -> Acked {
            let mut v: Acked = acked.iter().filter(|a| c.is_none_or(|c| a.2 == c)).cloned().collect();
            for (cl, rv) in &last {
                if c.is_none_or(|c| c == *cl) {
                    v.push((*rv, "ADDED", cl.to_string(), "zz-end".into()));
                }
            }
            v
        };
        let all = collect_until(&mut wildcard, max).await;
        let mut expected_all = with_end(None);
        expected_all.push((rv_of(&other), "ADDED", "o1".into(), "elsewhere".into()));
        check_stream(&format!("{backend:?} wildcard"), &all, &expected_all);
        let ns = collect_until(&mut wildcard_ns, max).await;
        check_stream(&format!("{backend:?} wildcard default namespace"), &ns, &with_end(None));
        for (i, c) in clusters.iter().enumerate() {
            let got = collect_until(&mut per_cluster[i], last[c]).await;
            check_stream(&format!("{backend:?} cluster {c}"), &got, &with_end(Some(c)));
        }
        Arc::try_unwrap(s).ok().expect("no other handle").stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_watcher_is_cut_off_catches_up_from_history_and_delays_nobody() {
    let s = TestServer::start(Backend::Embedded).await;
    let (_, list) = s.get(&format!("/{CM}")).await;
    let from = rv_of(&list);
    // The slow watcher has a connection of its own, and nobody reads it for now.
    let (slow_client, _) = common::clients(s.dir.path());
    let slow = slow_client.get(format!("{}/{CM}?watch=true&resourceVersion={from}", s.url)).send().await.unwrap();
    assert_eq!(slow.status(), 200);
    let mut fast = s.watch(&format!("/{CM}?watch=true&resourceVersion={from}")).await;
    // 32 KiB objects: a few MiB fill the slow client's flow-control window and the server's buffers.
    let blob = "x".repeat(32 * 1024);
    let mut rvs = Vec::new();
    for i in 0..600 {
        let (code, obj) =
            s.post(&format!("/{CM}"), &json!({"metadata": {"name": format!("big-{i}")}, "data": {"b": blob}})).await;
        assert_eq!(code, 201, "{obj}");
        rvs.push(rv_of(&obj));
    }
    let last = *rvs.last().unwrap();
    // The fast watcher saw everything while the slow one was stuck.
    let got = tokio::time::timeout(Duration::from_secs(30), collect_until(&mut fast, last))
        .await
        .expect("fast watcher kept up");
    assert_eq!(got.iter().map(|e| rv_of(&e["object"])).collect::<Vec<_>>(), rvs);
    assert!(
        s.metric("kgate_watch_cache_lagging_watchers_total{resource=\"configmaps\"}").await >= 1.0,
        "the slow watcher was cut off from the fan-out"
    );
    // Now it reads: every event, once, in order, without a gap where it was cut off.
    let mut stream = slow.bytes_stream();
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    use futures::StreamExt;
    while seen.len() < rvs.len() {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("slow watcher resumes")
            .unwrap()
            .unwrap();
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let ev: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(ev["type"], "ADDED", "{}", ev["type"]);
            seen.push(rv_of(&ev["object"]));
        }
    }
    assert_eq!(seen, rvs);
    s.stop().await;
}

/// A cluster `wide` of `n` ConfigMaps of `kib` KiB each on `s` (etcd), few enough for its purge to
/// delete them in one transaction (etcd takes 128 operations): as many events at one revision. Returns
/// the revision to watch from, before the purge.
async fn one_transaction_of_deletes(s: &TestServer, n: usize, kib: usize) -> i64 {
    s.create_cluster("wide").await;
    let blob = "x".repeat(kib * 1024);
    for i in 0..n {
        let (code, obj) = s
            .post(
                &format!("/clusters/wide/{CM}"),
                &json!({"metadata": {"name": format!("big-{i}")}, "data": {"b": blob}}),
            )
            .await;
        assert_eq!(code, 201, "{obj}");
    }
    let (_, list) = s.get("/clusters/*/api/v1/configmaps?limit=1").await;
    rv_of(&list)
}

/// A wildcard watch of ConfigMaps from `from`, with `extra` parameters, by a client that takes 64 KiB
/// at a time: once that and the server's send buffer are full, the server's watcher takes no more
/// events from its queue.
async fn slow_watch(s: &TestServer, from: i64, extra: &str) -> reqwest::Response {
    let slow_client = common::admin_builder(s.dir.path())
        .http2_initial_stream_window_size(65_535)
        .http2_initial_connection_window_size(65_535)
        .build()
        .unwrap();
    let url = format!("{}/clusters/*/api/v1/configmaps?watch=true&resourceVersion={from}{extra}", s.url);
    let slow = slow_client.get(url).send().await.unwrap();
    assert_eq!(slow.status(), 200);
    assert_eq!(slow.version(), reqwest::Version::HTTP_2);
    slow
}

/// How many objects of 100 KiB the purge in the tests below deletes in one transaction: their
/// events, each with the object's last version (6 MiB), fit in a watcher's queue (8 MiB).
const PURGED: usize = 30;

/// The lines of a watch, until it ends, read at 320 KiB a second: the 3 MiB of `PURGED` events take
/// longer than a closing watch's grace of 5 s.
async fn read_slowly_to_end(slow: reqwest::Response) -> Vec<Value> {
    use futures::StreamExt;
    let mut stream = slow.bytes_stream();
    let (mut buf, mut events, mut unpaused) = (Vec::new(), Vec::new(), 0);
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next()).await.expect("the watch ends");
        let Some(chunk) = chunk else { break };
        let chunk = chunk.unwrap();
        unpaused += chunk.len();
        if unpaused >= 64 * 1024 {
            unpaused = 0;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            events.push(serde_json::from_slice(&line).unwrap());
        }
    }
    events
}

/// Asserts that `events` hold the DELETED event of each of the purge's `n` objects once, all at one
/// revision, which it returns.
fn whole_purge(events: &[Value], n: usize) -> i64 {
    let (deleted, revisions) = purge_deletes(events);
    assert_eq!(revisions.len(), 1, "one transaction deleted them all: {revisions:?}");
    assert_eq!(deleted.len(), n, "every object's DELETED event before the watch ended");
    assert!(deleted.values().all(|n| *n == 1), "each DELETED once: {deleted:?}");
    *revisions.first().unwrap()
}

/// The purge's DELETED events among `events`: each object's count, and the revisions they came at.
fn purge_deletes(events: &[Value]) -> (BTreeMap<String, usize>, BTreeSet<i64>) {
    let (mut deleted, mut revisions) = (BTreeMap::<String, usize>::new(), BTreeSet::new());
    for ev in events {
        let name = ev["object"]["metadata"]["name"].as_str().unwrap_or_default();
        if ev["type"] == "DELETED" && name.starts_with("big-") {
            *deleted.entry(name.to_string()).or_default() += 1;
            revisions.insert(rv_of(&ev["object"]));
        }
    }
    (deleted, revisions)
}

/// A watch whose time runs out while its client has only part of one transaction's events sends
/// the rest before it ends, however slowly the client reads them, and claims that revision in a
/// bookmark only after them: a client resuming from the last resourceVersion it got would otherwise
/// never see the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_that_times_out_inside_one_transactions_events_sends_all_of_them_first() {
    closing_inside_a_purge(false).await;
}

/// The same when, while the client is still reading the rest after the watch's grace, later writes
/// overflow its queue: the watch is cut off from the queue, resumes, and still sends the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_closing_watch_cut_off_from_its_queue_still_sends_the_whole_transaction() {
    closing_inside_a_purge(true).await;
}

/// A slow client's watch times out inside a purge's transaction (see the two tests above); with
/// `overflow`, 9 MiB of later creates arrive once its grace is over, while it is still reading.
async fn closing_inside_a_purge(overflow: bool) {
    let s = TestServer::start(Backend::Etcd).await;
    // The watcher's queue holds them all, the client's window a few.
    const N: usize = PURGED;
    let from = one_transaction_of_deletes(&s, N, 100).await;
    let slow = slow_watch(&s, from, "&timeoutSeconds=5&allowWatchBookmarks=true").await;
    let opened = tokio::time::Instant::now();
    let (code, st) = s.delete("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/wide").await;
    assert!(code.is_success(), "{st}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (code, list) = s.get(&format!("/clusters/wide/{CM}")).await;
        if code == 404 || list["items"].as_array().is_some_and(|i| i.is_empty()) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the purge never ran: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(opened.elapsed() < Duration::from_secs(5), "the purge ran within the watch's time");
    // The watch's time runs out while its first few events fill the client's window; its grace
    // starts when the client reads again, and is over about 5 s later, some 4 s before the client
    // has read the whole transaction.
    tokio::time::sleep_until(opened + Duration::from_secs(6)).await;
    let reader = tokio::spawn(read_slowly_to_end(slow));
    if overflow {
        tokio::time::sleep_until(opened + Duration::from_secs(12)).await;
        let blob = "y".repeat(900 * 1024);
        for i in 0..10 {
            let (code, obj) = s
                .post(&format!("/{CM}"), &json!({"metadata": {"name": format!("later-{i}")}, "data": {"b": blob}}))
                .await;
            assert_eq!(code, 201, "{obj}");
        }
    }
    let events = reader.await.unwrap();
    let purge = whole_purge(&events, N);
    let last_delete = events.iter().rposition(|e| e["type"] == "DELETED").unwrap();
    for (i, ev) in events.iter().enumerate().filter(|(_, e)| e["type"] == "BOOKMARK") {
        assert!(
            i > last_delete || rv_of(&ev["object"]) < purge,
            "a bookmark at {} before the last DELETED",
            rv_of(&ev["object"])
        );
    }
    let cut_off = s.metric("kgate_watch_cache_lagging_watchers_total{resource=\"configmaps\"}").await;
    if overflow {
        assert!(cut_off >= 1.0, "the later writes overflowed the watcher's queue");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "BOOKMARK", "the watch ends with a bookmark: {last}");
        assert_eq!(rv_of(&last["object"]), purge, "at the transaction it finished");
    } else {
        assert_eq!(cut_off, 0.0, "the events came from the watcher's queue, not a resume");
    }
    s.stop().await;
}

/// The same for a watch fed by a store watch of its own (its resume point is older than the cache's
/// history, as after a restart): it sends the rest of the transaction it is in, then ends with a
/// bookmark at that revision, not sending a later one's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_fed_watch_that_times_out_inside_one_transaction_finishes_it_and_ends_there() {
    const N: usize = PURGED;
    let s = TestServer::start(Backend::Etcd).await;
    let from = one_transaction_of_deletes(&s, N, 100).await;
    let prefix = s.prefix.clone();
    let dir = s.stop().await;
    let s = TestServer::start_in(Backend::Etcd, dir, prefix).await;
    let (code, st) = s.delete("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/wide").await;
    assert!(code.is_success(), "{st}");
    // Waited for in the store: the ConfigMaps cache, loaded by the watch below, then starts after
    // the purge, and the watch from before it is fed by the store.
    let store = s.running_store();
    let def = kgate::resources::find("", "v1", "configmaps").unwrap();
    let keys = kgate::storage::keys::collection(&s.prefix, def.storage_group(), &def.plural, Some("wide"), None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !store
        .range(kgate::storage::RangeRequest { prefix: keys.clone(), ..Default::default() })
        .await
        .unwrap()
        .kvs
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "the purge never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, later) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "after-purge"}})).await;
    assert_eq!(code, 201, "{later}");
    let slow = slow_watch(&s, from, "&timeoutSeconds=2&allowWatchBookmarks=true").await;
    let opened = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(s.metric("kgate_watch_store_fed_watchers").await, 1.0, "the watch is fed by the store");
    tokio::time::sleep_until(opened + Duration::from_secs(3)).await;
    let events = read_slowly_to_end(slow).await;
    let purge = whole_purge(&events, N);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "BOOKMARK", "the watch ends with a bookmark: {last}");
    assert_eq!(rv_of(&last["object"]), purge, "at the transaction it finished");
    let beyond: Vec<&Value> = events.iter().filter(|e| rv_of(&e["object"]) > purge).collect();
    assert!(beyond.is_empty(), "nothing of a later revision: {beyond:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_cluster_sends_deleted_events_to_wildcard_watches() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("doomed").await;
    s.create_cluster("doomed-not").await;
    for c in ["doomed", "doomed-not"] {
        for i in 0..3 {
            s.post(&format!("/clusters/{c}/{CM}"), &json!({"metadata": {"name": format!("cm{i}")}})).await;
        }
    }
    let mut w = s.watch("/clusters/*/api/v1/configmaps?watch=true").await;
    let initial = {
        let mut n = 0;
        while n < 6 {
            let ev = tokio::time::timeout(Duration::from_secs(10), w.recv()).await.unwrap().unwrap();
            if ev["object"]["metadata"]["name"].as_str().unwrap().starts_with("cm") {
                n += 1;
            }
        }
        n
    };
    assert_eq!(initial, 6);
    let (code, st) = s.delete("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/doomed").await;
    assert!(code.is_success(), "{st}");
    let mut deleted = Vec::new();
    while deleted.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(20), w.recv()).await.expect("DELETED events").unwrap();
        if ev["type"] == "BOOKMARK" || common::made_with_namespace(&ev["object"]) {
            continue;
        }
        assert_eq!(ev["type"], "DELETED", "{ev}");
        assert_eq!(cluster_of(&ev), "doomed", "only the deleted cluster's objects go: {ev}");
        deleted.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
    }
    deleted.sort();
    assert_eq!(deleted, ["cm0", "cm1", "cm2"]);
    let (_, list) = s.get("/clusters/*/api/v1/configmaps?resourceVersion=0").await;
    let clusters: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string())
        .collect();
    assert!(!clusters.iter().any(|c| c == "doomed"), "{clusters:?}");
    assert!(clusters.iter().any(|c| c == "doomed-not"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_one_etcd_see_each_others_writes() {
    let one = TestServer::start(Backend::Etcd).await;
    let two = TestServer::start_in(Backend::Etcd, tempfile::tempdir().unwrap(), one.prefix.clone()).await;
    one.create_cluster("shared").await;
    let (_, list) = two.get(&format!("/clusters/shared/{CM}")).await;
    let from = rv_of(&list);
    let mut on_two = two.watch(&format!("/clusters/shared/{CM}?watch=true&resourceVersion={from}")).await;
    let mut wildcard_on_two =
        two.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={from}")).await;
    let (code, obj) = one.post(&format!("/clusters/shared/{CM}"), &json!({"metadata": {"name": "via-one"}})).await;
    assert_eq!(code, 201, "{obj}");
    let rv = rv_of(&obj);
    for (label, rx) in [("cluster", &mut on_two), ("wildcard", &mut wildcard_on_two)] {
        let got = collect_until(rx, rv).await;
        assert_eq!(got.len(), 1, "{label}: {got:?}");
        assert_eq!(got[0]["type"], "ADDED");
        assert_eq!(got[0]["object"]["metadata"]["name"], "via-one");
    }
    // And the second replica's cache serves it to a resourceVersion=0 read.
    let (code, got) = two.get(&format!("/clusters/shared/{CM}/via-one?resourceVersion=0")).await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(rv_of(&got), rv);
    two.stop().await;
    one.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_resumes_from_its_resource_version_across_a_kgate_restart() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let (_, a) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "before"}})).await;
        let from = rv_of(&a);
        let prefix = s.prefix.clone();
        let dir = s.stop().await;
        let s = TestServer::start_in(backend, dir, prefix).await;
        let (_, b) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "after-restart"}})).await;
        // The new process's cache history starts after `from`; the store still has it.
        let mut w = s.watch(&format!("/{CM}?watch=true&resourceVersion={from}")).await;
        let (_, c) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "after-watch"}})).await;
        let got = collect_until(&mut w, rv_of(&c)).await;
        let names: Vec<&str> = got.iter().map(|e| e["object"]["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["after-restart", "after-watch"], "{backend:?}");
        assert_eq!(rv_of(&got[0]["object"]), rv_of(&b));
        // Caught up, the watcher left its own store watch for the shared cache, and still gets events.
        let mut left = false;
        for _ in 0..100 {
            if s.metric("kgate_watch_store_fed_watchers").await == 0.0 {
                left = true;
                break;
            }
            // etcd says nothing until an event in scope arrives; give it one.
            s.post(&format!("/{CM}"), &json!({"metadata": {"generateName": "nudge-"}})).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(left, "{backend:?}: the resumed watcher rejoined the watch cache");
        let (_, d) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "after-rejoin"}})).await;
        let more = collect_until(&mut w, rv_of(&d)).await;
        assert_eq!(more.last().unwrap()["object"]["metadata"]["name"], "after-rejoin");
        let rvs: Vec<i64> = got.iter().chain(&more).map(|e| rv_of(&e["object"])).collect();
        assert!(rvs.windows(2).all(|w| w[0] < w[1]), "no duplicates across the switch: {rvs:?}");
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_reads_are_current_and_paginate_like_store_reads() {
    let s = TestServer::start(Backend::Embedded).await;
    for i in 0..5 {
        s.post(
            &format!("/{CM}"),
            &json!({"metadata": {"name": format!("p{i}"), "labels": {"even": (i % 2 == 0).to_string()}}}),
        )
        .await;
    }
    // resourceVersion=0 starts the cache and is served from it.
    let (code, any) = s.get(&format!("/{CM}?resourceVersion=0")).await;
    assert_eq!(code, 200);
    assert_eq!(common::own_items(&any).len(), 5);
    assert!(s.metric("kgate_watch_cache_reads_total{resource=\"configmaps\",served_by=\"cache\"}").await >= 1.0);
    // A consistent list right after a write sees the write, served from the (caught up) cache.
    let before = s.metric("kgate_watch_cache_reads_total{resource=\"configmaps\",served_by=\"cache\"}").await;
    let (_, new) = s.post(&format!("/{CM}"), &json!({"metadata": {"name": "p5"}})).await;
    let (_, now) = s.get(&format!("/{CM}")).await;
    assert!(rv_of(&now) >= rv_of(&new));
    assert!(now["items"].as_array().unwrap().iter().any(|o| o["metadata"]["name"] == "p5"));
    assert!(s.metric("kgate_watch_cache_reads_total{resource=\"configmaps\",served_by=\"cache\"}").await > before);
    // Pages: the first from the cache, the rest from the store at the same revision.
    let mut names = Vec::new();
    let mut next = format!("/{CM}?limit=2");
    let mut revisions = Vec::new();
    loop {
        let (code, page) = s.get(&next).await;
        assert_eq!(code, 200, "{page}");
        revisions.push(rv_of(&page));
        names.extend(common::own_items(&page).iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()));
        match page["metadata"]["continue"].as_str() {
            Some(c) => next = format!("/{CM}?limit=2&continue={c}"),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4", "p5"]);
    assert!(revisions.windows(2).all(|w| w[0] == w[1]), "one snapshot across pages: {revisions:?}");
    // Selectors apply to cached lists and gets as to store reads.
    let (_, even) = s.get(&format!("/{CM}?resourceVersion=0&labelSelector=even%3Dtrue")).await;
    let even: Vec<&str> =
        even["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(even, ["p0", "p2", "p4"]);
    // With a limit too: the page ends at its last match and the rest continues from the store.
    let (_, first) = s.get(&format!("/{CM}?resourceVersion=0&labelSelector=even%3Dtrue&limit=2")).await;
    let names = |page: &Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&first), ["p0", "p2"]);
    let c = first["metadata"]["continue"].as_str().expect("a continue token");
    let (code, rest) = s.get(&format!("/{CM}?labelSelector=even%3Dtrue&limit=2&continue={c}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["p4"]);
    let (code, missing) = s.get(&format!("/{CM}/nope?resourceVersion=0")).await;
    assert_eq!((code.as_u16(), missing["reason"].as_str()), (404, Some("NotFound")));
    s.stop().await;
}

/// Once the cache has packed its objects (sent as runs of its blocks, not copied one by one), a list
/// across clusters is still exactly what the store holds at that revision, in order, and so is it
/// after writes have broken the runs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_packed_list_across_clusters_is_what_the_store_holds() {
    let s = Arc::new(TestServer::start(Backend::Embedded).await);
    for c in ["pa", "pb", "pc"] {
        s.create_cluster(c).await;
    }
    let wildcard = "/clusters/*/api/v1/configmaps";
    // The cache starts first, so that every write below counts towards a pass.
    assert_eq!(s.get(&format!("{wildcard}?resourceVersion=0")).await.0, 200);
    let posts = (0..1500).map(|i| {
        let s = s.clone();
        async move {
            let c = ["pa", "pb", "pc"][i % 3];
            let body = json!({"metadata": {"name": format!("o{i:04}")}, "data": {"i": i.to_string()}});
            let (code, obj) = s.post(&format!("/clusters/{c}/{CM}"), &body).await;
            assert_eq!(code, 201, "{obj}");
            obj["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap()
        }
    });
    let last = futures::future::join_all(posts).await.into_iter().max().unwrap();
    let packed = "kgate_watch_cache_packed_objects_total{resource=\"configmaps\"}";
    let store_and_cache = |s: Arc<TestServer>| async move {
        let (code, cached) = s.get(&format!("{wildcard}?resourceVersion=0")).await;
        assert_eq!(code, 200, "{cached}");
        let rv = cached["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let (code, stored) = s.get(&format!("{wildcard}?resourceVersion={rv}&resourceVersionMatch=Exact")).await;
        assert_eq!(code, 200, "{stored}");
        (cached["items"].clone(), stored["items"].clone())
    };
    // This list starts the pass, once the cache holds every object (a list of any recent state could
    // find the cache still applying the last writes, and the pass would leave those out).
    let (code, list) = s.get(&format!("{wildcard}?resourceVersion={last}&resourceVersionMatch=NotOlderThan")).await;
    assert_eq!((code.as_u16(), common::own_items(&list).len()), (200, 1500), "{list}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.metric(packed).await < 1500.0 {
        assert!(tokio::time::Instant::now() < deadline, "the cache packed its objects");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (cached, stored) = store_and_cache(s.clone()).await;
    assert_eq!(common::own_items(&json!({"items": cached})).len(), 1500);
    assert_eq!(cached, stored);
    // A delete, an update and a new object among the packed ones.
    let (code, _) = s.req(reqwest::Method::DELETE, &format!("/clusters/pa/{CM}/o0300"), None, None).await;
    assert!(code.is_success());
    let patch = br#"{"data": {"i": "changed"}}"#.to_vec();
    let (code, _) = s
        .req(
            reqwest::Method::PATCH,
            &format!("/clusters/pb/{CM}/o0301"),
            Some("application/merge-patch+json"),
            Some(patch),
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = s.post(&format!("/clusters/pc/{CM}"), &json!({"metadata": {"name": "o0302x"}})).await;
    assert_eq!(code, 201);
    // resourceVersion=0 is any recent state: the cache may not have applied the create yet, and
    // whichever state it serves must be exactly the store's at that revision.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let cached = loop {
        let (cached, stored) = store_and_cache(s.clone()).await;
        assert_eq!(cached, stored);
        if common::own_items(&json!({"items": cached})).len() == 1500 {
            break cached;
        }
        assert!(tokio::time::Instant::now() < deadline, "the cache applied the last writes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(cached.as_array().unwrap().iter().any(|o| o["data"]["i"] == "changed"));
    Arc::try_unwrap(s).ok().expect("no other handle").stop().await;
}
