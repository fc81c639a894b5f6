//! Logical clusters spread over several etcd clusters (`--shard`): each cluster's objects on its
//! shard alone, wildcard lists and watches across every shard under one resourceVersion that resumes,
//! and a shard that is down costing only its own clusters.

mod common;

use std::time::{Duration, Instant};

use common::{Backend, TestEtcd, TestServer};
use kgate::storage::{RangeRequest, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};

const LC: &str = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";

async fn create_on(s: &TestServer, name: &str, shard: Option<&str>) -> Value {
    let mut lc =
        json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    if let Some(shard) = shard {
        lc["spec"] = json!({"shard": shard});
    }
    let (code, body) = s.post(LC, &lc).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    body
}

async fn configmap(s: &TestServer, cluster: &str, name: &str) -> Value {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
    let (code, body) = s.post(&format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps"), &cm).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    body
}

async fn keys(store: &dyn Store, prefix: &str) -> Vec<String> {
    let got = store.range(RangeRequest { prefix: prefix.into(), ..Default::default() }).await.unwrap();
    got.kvs.into_iter().map(|kv| kv.key).collect()
}

/// `(cluster, name)` of the ConfigMaps of `list` not made with every namespace.
fn ours(list: &Value) -> Vec<(String, String)> {
    let mut got: Vec<(String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["metadata"]["name"] != "kube-root-ca.crt")
        .map(|o| {
            let m = &o["metadata"];
            (
                m["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string(),
                m["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    got
}

async fn next_named(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>, name: &str) -> Value {
    loop {
        let ev =
            tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("an event in time").expect("open");
        if ev["object"]["metadata"]["name"] == name {
            return ev;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_lives_on_its_shard_and_wildcard_requests_span_every_shard() {
    let b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Etcd, &[("b", &b.endpoint)]).await;
    let shard_b =
        kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&b.endpoint), &Default::default()).await.unwrap();

    // Placed where asked; else on the shard with the fewest clusters; an unknown shard is refused.
    let alpha = create_on(&s, "alpha", Some("b")).await;
    assert_eq!(alpha["spec"]["shard"], "b");
    assert_eq!(alpha["status"]["phase"], "Ready", "bootstrapped on its shard: {alpha}");
    let beta = create_on(&s, "beta", None).await;
    assert_eq!(beta["spec"]["shard"], "default", "b holds one cluster, default none: {beta}");
    create_on(&s, "extra", Some("default")).await;
    let next = create_on(&s, "next", None).await;
    assert_eq!(next["spec"]["shard"], "b", "default holds two clusters, b one: {next}");
    let lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": "gamma"}, "spec": {"shard": "nope"}});
    let (code, body) = s.post(LC, &lc).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("spec.shard: Unsupported value: \"nope\": supported values: \"default\", \"b\""),
        "{body}"
    );
    assert_eq!(s.get(&format!("{LC}/gamma")).await.0, StatusCode::NOT_FOUND, "nothing made");

    // A cluster's objects are on its shard, and only there; root's stay on the default shard.
    configmap(&s, "alpha", "a1").await;
    configmap(&s, "beta", "b1").await;
    let default_store = s.running_store();
    let p = &s.prefix;
    assert_eq!(
        keys(&shard_b, &format!("{p}/core/configmaps/alpha/default/")).await.len(),
        2,
        "a1 and kube-root-ca.crt"
    );
    assert!(keys(&*default_store, &format!("{p}/core/configmaps/alpha/")).await.is_empty());
    assert!(keys(&shard_b, &format!("{p}/core/configmaps/beta/")).await.is_empty());
    assert_eq!(keys(&*default_store, &format!("{p}/core/namespaces/beta/")).await.len(), 4);
    assert!(keys(&shard_b, &format!("{p}/tenancy.kgate.dev/")).await.is_empty(), "LogicalClusters stay in root");
    let (code, got) = s.get("/clusters/alpha/api/v1/namespaces/default/configmaps/a1").await;
    assert_eq!((code, &got["data"]), (StatusCode::OK, &json!({"k": "v"})));

    // A replace without the shard keeps it; a shard not served here is refused (a change of it is a
    // move: see `a_cluster_moves_to_another_shard_and_its_clients_list_again`).
    let (_, mut current) = s.get(&format!("{LC}/alpha")).await;
    current["spec"] = json!({});
    let (code, kept) = s.put(&format!("{LC}/alpha"), &current).await;
    assert_eq!((code, &kept["spec"]["shard"]), (StatusCode::OK, &json!("b")), "{kept}");
    assert!(kept["status"].get("shard").is_none(), "{kept}");
    let mut moved = kept.clone();
    moved["spec"]["shard"] = json!("nope");
    let (code, body) = s.put(&format!("{LC}/alpha"), &moved).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["message"].as_str().unwrap().contains("spec.shard: Unsupported value: \"nope\""), "{body}");

    // A wildcard list holds both shards' objects under one resourceVersion naming each shard.
    let (code, all) = s.get("/clusters/*/api/v1/configmaps").await;
    assert_eq!(code, StatusCode::OK, "{all}");
    assert_eq!(ours(&all), [("alpha".into(), "a1".into()), ("beta".into(), "b1".into())]);
    let rv = all["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(rv.starts_with("default:") && rv.contains(",b:"), "{rv}");
    // Page by page, every object once, the pages crossing from one shard to the next.
    let (mut paged, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let q = if token.is_empty() { String::new() } else { format!("&continue={token}") };
        let (code, page) = s.get(&format!("/clusters/*/api/v1/configmaps?limit=1{q}")).await;
        assert_eq!(code, StatusCode::OK, "{page}");
        assert!(page["items"].as_array().unwrap().len() <= 1);
        paged.extend(page["items"].as_array().unwrap().iter().cloned());
        pages += 1;
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    assert!(pages >= 4, "a page per object: {pages}");
    // client-go's first list (a page of "any" state): every shard's part of it names where the shard
    // was, the shards the page did not reach included, so that a watch from it misses nothing.
    let (_, first) = s.get("/clusters/*/api/v1/configmaps?limit=1&resourceVersion=0").await;
    let composite = first["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(composite.split(',').all(|p| p.rsplit(':').next().unwrap().parse::<i64>().unwrap() > 0), "{composite}");
    assert_eq!(ours(&json!({"items": paged})), ours(&all));
    assert_eq!(paged.len(), all["items"].as_array().unwrap().len());

    // A watch from the list's resourceVersion sees what both shards do next, each event with the
    // composite after it; resumed from one event's, it sends what came after and nothing before.
    let mut rx = s.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={rv}")).await;
    configmap(&s, "alpha", "a2").await;
    let first = next_named(&mut rx, "a2").await;
    configmap(&s, "beta", "b2").await;
    let second = next_named(&mut rx, "b2").await;
    assert_eq!((first["type"].as_str(), second["type"].as_str()), (Some("ADDED"), Some("ADDED")));
    let at = first["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(at.contains(",b:"), "{at}");
    let mut resumed = s.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={at}")).await;
    let again = tokio::time::timeout(Duration::from_secs(10), resumed.recv()).await.unwrap().unwrap();
    assert_eq!(again["object"]["metadata"]["name"], "b2", "the next event, not a2 again: {again}");
    // The object as the watch gave it goes back through its cluster's path: its composite names its
    // revision on its own shard.
    let mut a2 = first["object"].clone();
    a2["data"] = json!({"k": "changed"});
    let (code, body) = s.put("/clusters/alpha/api/v1/namespaces/default/configmaps/a2", &a2).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, body) = s.put("/clusters/alpha/api/v1/namespaces/default/configmaps/a2", &a2).await;
    assert_eq!(code, StatusCode::CONFLICT, "a stale composite is stale: {body}");
    // So does an optimistic lock in a merge patch.
    let (_, now) = s.get("/clusters/alpha/api/v1/namespaces/default/configmaps/a2").await;
    let mut rx2 = s.watch("/clusters/*/api/v1/configmaps?watch=true&resourceVersion=0").await;
    let initial = next_named(&mut rx2, "a2").await;
    assert_eq!(initial["type"], "ADDED");
    let locked = initial["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(locked.contains(&format!("b:{}", now["metadata"]["resourceVersion"].as_str().unwrap())), "{locked}");
    let patch = json!({"metadata": {"resourceVersion": locked}, "data": {"k": "patched"}});
    let (code, body) = s
        .patch("/clusters/alpha/api/v1/namespaces/default/configmaps/a2", "application/merge-patch+json", &patch)
        .await;
    assert_eq!(code, StatusCode::OK, "an initial event's object names its own revision: {body}");
    let (code, _) = s
        .patch("/clusters/alpha/api/v1/namespaces/default/configmaps/a2", "application/merge-patch+json", &patch)
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    // A tenant's own credentials work on a cluster on another shard: its ServiceAccount is read there.
    let token = s.tenant_token("alpha", "dev", "view").await;
    let resp = s
        .anonymous
        .get(format!("{}/clusters/alpha/api/v1/namespaces/default/configmaps/a1", s.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = s
        .anonymous
        .get(format!("{}/clusters/beta/api/v1/namespaces/default/configmaps", s.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "bound to alpha");
    // One shard's own revision says nothing of the others: the client lists again.
    let (code, _) = s.get("/clusters/*/api/v1/configmaps?watch=true&resourceVersion=5").await;
    assert_eq!(code, StatusCode::GONE);

    // The cluster's usage is counted on its shard and written to its LogicalCluster, and follows
    // what it holds (its creation records what the bootstrap wrote).
    let objects = |lc: &Value| lc["status"]["usage"]["objects"].as_i64().unwrap_or(0);
    let before = objects(&s.get(&format!("{LC}/alpha")).await.1);
    configmap(&s, "alpha", "counted").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, lc) = s.get(&format!("{LC}/alpha")).await;
        if objects(&lc) > before {
            break;
        }
        assert!(Instant::now() < deadline, "no usage recorded for a cluster on shard b (was {before}): {lc}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Deleting the cluster purges its shard's keys, then the LogicalCluster goes.
    assert_eq!(s.delete(&format!("{LC}/alpha")).await.0, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.get(&format!("{LC}/alpha")).await.0 != StatusCode::NOT_FOUND {
        assert!(Instant::now() < deadline, "the LogicalCluster stayed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left: Vec<String> =
        keys(&shard_b, &format!("{p}/")).await.into_iter().filter(|k| k.split('/').nth(4) == Some("alpha")).collect();
    assert!(left.is_empty(), "{left:?}");

    // A LogicalCluster whose finalizer was taken off by hand goes at once; its keys are still purged,
    // on the shard its last value names (read back: the watch carries no previous values).
    let on_b = |name: &'static str| {
        let (store, prefix) = (&shard_b, format!("{p}/"));
        async move { keys(store, &prefix).await.into_iter().filter(|k| k.split('/').nth(4) == Some(name)).count() }
    };
    assert!(on_b("next").await > 10, "next's keys are on shard b");
    let unfinalize = json!({"metadata": {"finalizers": []}});
    let (code, body) = s.patch(&format!("{LC}/next"), "application/merge-patch+json", &unfinalize).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(s.delete(&format!("{LC}/next")).await.0, StatusCode::OK);
    assert_eq!(s.get(&format!("{LC}/next")).await.0, StatusCode::NOT_FOUND, "gone at once");
    let deadline = Instant::now() + Duration::from_secs(30);
    while on_b("next").await > 0 {
        assert!(Instant::now() < deadline, "next's keys stayed on shard b");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.stop().await;
}

/// A cluster on the default shard is written Ready with its objects in one transaction; one on
/// another shard, whose store cannot join root's transaction, is created Initializing, bootstrapped
/// there, then marked Ready. A create refused leaves nothing on either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_starts_ready_in_one_step_on_the_default_shard_and_in_three_on_another() {
    let b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Etcd, &[("b", &b.endpoint)]).await;
    let shard_b =
        kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&b.endpoint), &Default::default()).await.unwrap();
    let (_, list) = s.get(LC).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut rx = s.watch(&format!("{LC}?watch=true&resourceVersion={rv}")).await;

    create_on(&s, "alpha", Some("b")).await;
    let ev = next_named(&mut rx, "alpha").await;
    assert_eq!((&ev["type"], &ev["object"]["status"]["phase"]), (&json!("ADDED"), &json!("Initializing")), "{ev}");
    let ev = next_named(&mut rx, "alpha").await;
    assert_eq!((&ev["type"], &ev["object"]["status"]["phase"]), (&json!("MODIFIED"), &json!("Ready")), "{ev}");
    let on_b = common::keys_of(&shard_b, &s.prefix, "alpha").await.len();
    assert!(on_b >= 20, "its objects, on b: {on_b}");

    // "dup" lives on the default shard, made in one step; the same name asked for on b is refused,
    // and b gets nothing.
    create_on(&s, "dup", Some("default")).await;
    let ev = next_named(&mut rx, "dup").await;
    assert_eq!((&ev["type"], &ev["object"]["status"]["phase"]), (&json!("ADDED"), &json!("Ready")), "{ev}");
    let at: i64 = ev["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let on_default = common::keys_of(&*s.running_store(), &s.prefix, "dup").await;
    assert!(on_default.iter().all(|(_, rev)| *rev == at), "written with its LogicalCluster: {on_default:?}");
    let again = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "dup"}, "spec": {"shard": "b"}});
    let (code, body) = s.post(LC, &again).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(common::keys_of(&shard_b, &s.prefix, "dup").await, vec![]);
    assert_eq!(common::keys_of(&*s.running_store(), &s.prefix, "dup").await.len(), on_b, "the first one's kept");
    assert_eq!(s.get("/clusters/dup/api/v1/namespaces/kube-system").await.0, StatusCode::OK);
    s.stop().await;
}

/// A cluster on another shard is bootstrapped there, and the write that marks its LogicalCluster
/// Ready, a compare on the revision it was created at, is the check that it has not changed since:
/// root's store is not read. Where it has changed but is still live, it is marked Ready from what
/// that write found, its objects kept; where its DELETE was accepted meanwhile (whose purge may have
/// passed their keys already), or it is gone, none of them stays and it is not marked Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_on_another_shard_is_checked_by_the_write_that_marks_it_ready() {
    use std::sync::Arc;
    let (root_etcd, b) = (TestEtcd::start(), TestEtcd::start());
    let connect = |e: &TestEtcd| {
        let endpoint = e.endpoint.clone();
        async move {
            let s = kgate::storage::etcd::EtcdStore::connect(&[endpoint], &Default::default()).await.unwrap();
            Arc::new(s) as Arc<dyn Store>
        }
    };
    let (root, shard_b) = (connect(&root_etcd).await, connect(&b).await);
    // Root's calls metered as the registry makes them, the test's own not.
    let metrics = kgate::storage::metered::StoreMetrics::new().unwrap();
    let metered: Arc<dyn Store> = Arc::new(kgate::storage::metered::Metered::new(root.clone(), metrics.clone()));
    let routed = kgate::storage::routed::Routed::new(shard_b.clone(), metered, "/registry");
    let on_b = kgate::registry::Registry::new(Arc::new(routed), "/registry").on_shard("b");
    let reads =
        || ["get", "range"].iter().map(|op| metrics.latency.with_label_values(&[op]).get_sample_count()).sum::<u64>();
    let key = |name: &str| format!("/registry/tenancy.kgate.dev/logicalclusters/root/{name}");
    // A LogicalCluster as the API creates one on shard b, and as the API answers it.
    let create = |name: &'static str| {
        let (root, key) = (root.clone(), key(name));
        async move {
            let mut obj = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
                "metadata": {"name": name, "uid": format!("uid-{name}")}, "spec": {"shard": "b"}});
            kgate::tenancy::prepare_new(&mut obj);
            let rev = root.create(&key, serde_json::to_vec(&obj).unwrap()).await.unwrap();
            let mut answered = obj.clone();
            answered["metadata"]["resourceVersion"] = json!(rev.to_string());
            (obj, answered, rev)
        }
    };
    let stored = |name: &'static str| {
        let (root, key) = (root.clone(), key(name));
        async move { serde_json::from_slice::<Value>(&root.get(&key).await.unwrap().unwrap().value).unwrap() }
    };

    let (_, answered, _) = create("fresh").await;
    let ready = kgate::tenancy::initialize(&on_b, answered).await.unwrap();
    assert_eq!(ready["status"]["phase"], "Ready", "{ready}");
    assert_eq!(stored("fresh").await["status"]["phase"], "Ready");
    assert_eq!(reads(), 0, "root was read during a bootstrap that nothing raced");
    let made = common::keys_of(&*shard_b, "/registry", "fresh").await.len();
    assert!(made >= 20, "its objects, on b: {made}");

    // Labelled meanwhile: Ready with the label kept, and its objects as first made, in one step.
    let (mut obj, answered, rev) = create("edited").await;
    obj["metadata"]["labels"] = json!({"team": "a"});
    root.update(&key("edited"), serde_json::to_vec(&obj).unwrap(), rev).await.unwrap();
    let b_before = shard_b.revision().await.unwrap();
    kgate::tenancy::initialize(&on_b, answered).await.unwrap();
    let now = stored("edited").await;
    assert_eq!((&now["status"]["phase"], &now["metadata"]["labels"]["team"]), (&json!("Ready"), &json!("a")), "{now}");
    let kept = common::keys_of(&*shard_b, "/registry", "edited").await;
    assert_eq!(kept.len(), made, "every object, once");
    assert!(kept.iter().all(|(_, rev)| *rev == b_before + 1), "taken back and made again: {kept:?}");

    // Gone meanwhile (its finalizer taken off by hand): nothing of it stays.
    let (_, answered, rev) = create("vanished").await;
    root.delete(&key("vanished"), Some(rev)).await.unwrap();
    kgate::tenancy::initialize(&on_b, answered).await.unwrap();
    assert_eq!(common::keys_of(&*shard_b, "/registry", "vanished").await, vec![], "left with no LogicalCluster");

    // Its DELETE accepted meanwhile: nothing of it stays on b, and it stays as the DELETE left it.
    let (mut obj, answered, rev) = create("doomed").await;
    obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    root.update(&key("doomed"), serde_json::to_vec(&obj).unwrap(), rev).await.unwrap();
    kgate::tenancy::initialize(&on_b, answered).await.unwrap();
    assert_eq!(common::keys_of(&*shard_b, "/registry", "doomed").await, vec![], "left behind its purge");
    assert_eq!(stored("doomed").await["status"]["phase"], "Initializing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_is_down_costs_only_its_own_clusters() {
    let mut b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Etcd, &[("b", &b.endpoint)]).await;
    create_on(&s, "alpha", Some("b")).await;
    create_on(&s, "beta", Some("default")).await;
    configmap(&s, "alpha", "a1").await;
    configmap(&s, "beta", "b1").await;
    let (_, listed) = s.get("/clusters/*/api/v1/configmaps").await;
    let rv = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    b.kill();
    // The replica stays ready for the live shards' clusters, and says which shard is down.
    let readyz = || async {
        let resp = s.client.get(format!("{}/readyz?verbose", s.url)).send().await.unwrap();
        (resp.status(), resp.text().await.unwrap())
    };
    // etcd is probed at most once a second, so readyz may answer the last probe for that long.
    let reports = |want: &'static str| {
        let readyz = &readyz;
        move || async move { readyz().await.1.contains(want) }
    };
    common::eventually(10, "readyz to report shard b down", reports("[-]etcd-shard-b failed")).await;
    let (code, text) = readyz().await;
    assert_eq!(code, StatusCode::OK, "{text}");
    assert!(text.contains("[+]etcd ok\n[-]etcd-shard-b failed: store is unreachable"), "{text}");
    // Its clusters answer 503; the others as before.
    let started = Instant::now();
    let (code, body) = s.get("/clusters/alpha/api/v1/namespaces/default/configmaps/a1").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(started.elapsed() < Duration::from_secs(20), "answered in {:?}", started.elapsed());
    assert_eq!(s.get("/clusters/beta/api/v1/namespaces/default/configmaps/b1").await.0, StatusCode::OK);
    // A wildcard list answers what the live shards hold, with a warning naming the one left out.
    let started = Instant::now();
    let resp =
        s.client.get(format!("{}/clusters/*/api/v1/configmaps?resourceVersion={rv}", s.url)).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let warning = resp.headers().get("warning").map(|w| w.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(warning.contains("shard \\\"b\\\" is unavailable"), "{warning}");
    let list: Value = resp.json().await.unwrap();
    assert_eq!(ours(&list), [("beta".into(), "b1".into())]);
    // The shard left out is at 0 in the list's resourceVersion: a watch from it sends all it holds.
    assert!(list["metadata"]["resourceVersion"].as_str().unwrap().ends_with(",b:0"), "{}", list["metadata"]);
    assert!(started.elapsed() < Duration::from_secs(15), "answered in {:?}", started.elapsed());

    // A watch across shards starts without it, and sends its changes once it is back.
    let mut rx = s.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={rv}")).await;
    configmap(&s, "beta", "b2").await;
    next_named(&mut rx, "b2").await;
    b.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a2"}});
        let (code, _) = s.post("/clusters/alpha/api/v1/namespaces/default/configmaps", &cm).await;
        if code == StatusCode::CREATED {
            break;
        }
        assert!(Instant::now() < deadline, "shard b did not come back: {code}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let ev = next_named(&mut rx, "a2").await;
    assert_eq!(ev["type"], "ADDED");
    common::eventually(10, "readyz to report shard b back", reports("[+]etcd-shard-b ok\nreadyz check passed")).await;
    assert!(ev["object"]["metadata"]["resourceVersion"].as_str().unwrap().contains(",b:"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_and_initial_events_span_every_shard() {
    let b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Embedded, &[("b", &b.endpoint)]).await;
    create_on(&s, "alpha", Some("b")).await;
    create_on(&s, "beta", Some("default")).await;
    let crd = gadget_crd();
    for c in ["alpha", "beta"] {
        let (code, body) =
            s.post(&format!("/clusters/{c}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"), &crd).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
        let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": format!("g-{c}")}});
        let path = format!("/clusters/{c}/apis/example.com/v1/namespaces/default/gadgets");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (code, body) = s.post(&path, &gadget).await;
            if code == StatusCode::CREATED {
                break;
            }
            assert!(Instant::now() < deadline, "{code} {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Served to one cluster each, on different shards: a wildcard list finds both.
    let (code, list) = s.get("/clusters/*/apis/example.com/v1/gadgets").await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let mut names: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["g-alpha", "g-beta"]);
    // A Table across shards too.
    let resp = s
        .client
        .get(format!("{}/clusters/*/apis/example.com/v1/gadgets", s.url))
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap();
    let table: Value = resp.json().await.unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"].as_array().unwrap().len(), 2, "{table}");

    // A watch from no resourceVersion starts with what every shard holds, as one store's does.
    let mut rx = s.watch("/clusters/*/apis/example.com/v1/gadgets?watch=true").await;
    let mut added = Vec::new();
    for _ in 0..2 {
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
        assert_eq!(ev["type"], "ADDED");
        added.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
    }
    added.sort();
    assert_eq!(added, ["g-alpha", "g-beta"]);

    // A watch list (client-go's WatchListClient): every shard's objects, then one end-of-initial-events
    // bookmark after all of them, at a composite the watch resumes from.
    let mut rx = s
        .watch("/clusters/*/apis/example.com/v1/gadgets?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
        .await;
    let mut added = Vec::new();
    let end = loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
        match ev["type"].as_str().unwrap() {
            "ADDED" => added.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string()),
            "BOOKMARK" => break ev,
            other => panic!("{other}: {ev}"),
        }
    };
    added.sort();
    assert_eq!(added, ["g-alpha", "g-beta"]);
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    let rv = end["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    assert!(rv.starts_with("default:") && rv.contains(",b:"), "{rv}");
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g2"}});
    assert_eq!(
        s.post("/clusters/alpha/apis/example.com/v1/namespaces/default/gadgets", &gadget).await.0,
        StatusCode::CREATED
    );
    let mut resumed =
        s.watch(&format!("/clusters/*/apis/example.com/v1/gadgets?watch=true&resourceVersion={rv}")).await;
    let ev = tokio::time::timeout(Duration::from_secs(10), resumed.recv()).await.unwrap().unwrap();
    assert_eq!((ev["type"].as_str(), ev["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("g2")), "{ev}");
    s.stop().await;
}

/// A namespaced CRD of `gadgets.example.com` that keeps any field.
fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

/// Whether `path` answers 200, and its body.
async fn found(s: &TestServer, path: &str) -> (bool, Value) {
    let (code, body) = s.get(path).await;
    (code == StatusCode::OK, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_moves_to_another_shard_and_its_clients_list_again() {
    let b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Embedded, &[("b", &b.endpoint)]).await;
    let shard_b =
        kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&b.endpoint), &Default::default()).await.unwrap();
    let (p, default_store) = (s.prefix.clone(), s.running_store());
    create_on(&s, "mover", Some("default")).await;
    let cm1 = configmap(&s, "mover", "cm1").await;
    let crd = gadget_crd();
    let (code, body) = s.post("/clusters/mover/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let gadgets = "/clusters/mover/apis/example.com/v1/namespaces/default/gadgets";
    let gadget =
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"x": 1}});
    common::eventually(10, "the gadget is created", || async {
        s.post(gadgets, &gadget).await.0 == StatusCode::CREATED
    })
    .await;
    // Large objects move too, more than a store transaction holds together.
    for i in 0..8 {
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big{i}")},
            "data": {"k": "x".repeat(400_000)}});
        let (code, body) = s.post("/clusters/mover/api/v1/namespaces/default/configmaps", &big).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    // A namespace being deleted, held by an object's finalizer, moves Terminating.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "leaving"}});
    assert_eq!(s.post("/clusters/mover/api/v1/namespaces", &ns).await.0, StatusCode::CREATED);
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    assert_eq!(s.post("/clusters/mover/api/v1/namespaces/leaving/configmaps", &held).await.0, StatusCode::CREATED);
    assert!(s.delete("/clusters/mover/api/v1/namespaces/leaving").await.0.is_success());
    common::eventually(10, "the namespace is emptied but for what holds it", || async {
        s.get("/clusters/mover/api/v1/namespaces/leaving/configmaps/kube-root-ca.crt").await.0 == StatusCode::NOT_FOUND
    })
    .await;
    let (_, listed) = s.get("/clusters/mover/api/v1/namespaces/default/configmaps").await;
    let old_rv = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut watched = s.watch(&format!("/clusters/mover/api/v1/configmaps?watch=true&resourceVersion={old_rv}")).await;
    let (_, everywhere) = s.get("/clusters/*/api/v1/configmaps").await;
    let all_rv = everywhere["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut admin = s.watch(&format!("/clusters/*/api/v1/configmaps?watch=true&resourceVersion={all_rv}")).await;

    // A writer that keeps creating while the cluster moves: whatever it was told was made must be there.
    let writer = {
        let (client, url) = (s.client.clone(), s.url.clone());
        tokio::spawn(async move {
            let mut made = Vec::new();
            for i in 0..400 {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("w{i}")}});
                let resp = client
                    .post(format!("{url}/clusters/mover/api/v1/namespaces/default/configmaps"))
                    .json(&cm)
                    .send()
                    .await
                    .unwrap();
                match resp.status() {
                    StatusCode::CREATED => made.push(format!("w{i}")),
                    StatusCode::SERVICE_UNAVAILABLE => tokio::time::sleep(Duration::from_millis(20)).await,
                    other => panic!("{other}: {}", resp.text().await.unwrap()),
                }
            }
            made
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Asked by changing spec.shard: the write records where the objects are until they have moved.
    let (_, mut lc) = s.get(&format!("{LC}/mover")).await;
    lc["spec"]["shard"] = json!("b");
    let (code, asked) = s.put(&format!("{LC}/mover"), &lc).await;
    assert_eq!(code, StatusCode::OK, "{asked}");
    assert_eq!((&asked["spec"]["shard"], &asked["status"]["shard"]), (&json!("b"), &json!("default")), "{asked}");
    let mut again = asked.clone();
    again["spec"]["shard"] = json!("default");
    let (code, body) = s.put(&format!("{LC}/mover"), &again).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "one move at a time: {body}");
    assert!(body["message"].as_str().unwrap().contains("a move to shard \"b\" is in progress"), "{body}");
    // Nobody else may say where the objects are.
    let mut forged = asked.clone();
    forged["status"]["shard"] = json!("b");
    let (code, body) = s.put(&format!("{LC}/mover/status"), &forged).await;
    assert_eq!((code, &body["status"]["shard"]), (StatusCode::OK, &json!("default")), "{body}");

    // While it moves the cluster answers 503 and its watch ends, without the move's deletes.
    let (code, body) = s.get("/clusters/mover/api/v1/namespaces/default/configmaps/cm1").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), watched.recv()).await.expect("the watch ends") {
        assert_ne!(ev["type"], "DELETED", "{ev}");
    }
    common::eventually(60, "the move ends", || async {
        let (_, lc) = s.get(&format!("{LC}/mover")).await;
        lc["status"].get("shard").is_none()
    })
    .await;
    let made = writer.await.unwrap();
    assert!(!made.is_empty());

    // Everything is on b, and nothing is left on the default shard or in b's staging.
    let (ok, got) = found(&s, "/clusters/mover/api/v1/namespaces/default/configmaps/cm1").await;
    assert!(ok, "{got}");
    assert_eq!((&got["metadata"]["uid"], &got["data"]), (&cm1["metadata"]["uid"], &cm1["data"]));
    assert_ne!(got["metadata"]["resourceVersion"], cm1["metadata"]["resourceVersion"]);
    let (ok, big) = found(&s, "/clusters/mover/api/v1/namespaces/default/configmaps/big7").await;
    assert!(ok && big["data"]["k"].as_str().map(str::len) == Some(400_000), "big7 moved");
    let (ok, g) = found(&s, &format!("{gadgets}/g1")).await;
    assert!(ok && g["spec"]["x"] == 1, "the CRD and its resources moved: {g}");
    for name in &made {
        let (ok, body) = found(&s, &format!("/clusters/mover/api/v1/namespaces/default/configmaps/{name}")).await;
        assert!(ok, "{name} was acknowledged before the move: {body}");
    }
    for group in ["core/configmaps", "core/namespaces", "apiextensions.k8s.io/customresourcedefinitions"] {
        assert!(keys(&*default_store, &format!("{p}/{group}/mover/")).await.is_empty(), "{group}");
        assert!(!keys(&shard_b, &format!("{p}/{group}/mover/")).await.is_empty(), "{group}");
    }
    assert!(keys(&shard_b, &format!("{p}/tenancy.kgate.dev/moves/")).await.is_empty(), "staging is emptied");
    // Its usage is counted where it is now: every key it has on b, as the LogicalCluster reports it.
    let on_b = keys(&shard_b, &format!("{p}/")).await;
    let held = on_b.iter().filter(|k| k.split('/').nth(4) == Some("mover")).count() as u64;
    assert!(held > made.len() as u64, "{held}");
    common::eventually(20, "usage follows the cluster", || async {
        let (_, lc) = s.get(&format!("{LC}/mover")).await;
        let u = &lc["status"]["usage"];
        (u["objects"].as_u64(), u["namespaces"].as_u64(), u["customResourceDefinitions"].as_u64())
            == (Some(held), Some(5), Some(1))
    })
    .await;

    // The namespace's deletion goes on where it is now: released, it goes.
    let (_, ns) = s.get("/clusters/mover/api/v1/namespaces/leaving").await;
    assert_eq!(ns["status"]["phase"], "Terminating", "{ns}");
    let release = json!({"metadata": {"finalizers": null}});
    let path = "/clusters/mover/api/v1/namespaces/leaving/configmaps/held";
    let (code, body) = s.patch(path, "application/merge-patch+json", &release).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    common::eventually(30, "the namespace that moved Terminating goes", || async {
        s.get("/clusters/mover/api/v1/namespaces/leaving").await.0 == StatusCode::NOT_FOUND
    })
    .await;

    // A client's resourceVersion from the shard it left is too old here: it lists again.
    let (code, body) =
        s.get(&format!("/clusters/mover/api/v1/configmaps?resourceVersion={old_rv}&resourceVersionMatch=Exact")).await;
    assert_eq!(code, StatusCode::GONE, "{body}");
    let mut resumed = s.watch(&format!("/clusters/mover/api/v1/configmaps?watch=true&resourceVersion={old_rv}")).await;
    let ev = tokio::time::timeout(Duration::from_secs(10), resumed.recv()).await.unwrap().unwrap();
    assert_eq!((&ev["type"], &ev["object"]["code"]), (&json!("ERROR"), &json!(410)), "{ev}");
    // And writes go on, on b.
    let mut update = got.clone();
    update["data"] = json!({"k": "after"});
    let (code, body) = s.put("/clusters/mover/api/v1/namespaces/default/configmaps/cm1", &update).await;
    assert_eq!(code, StatusCode::OK, "{body}");

    // An administrator's watch over every cluster saw cm1 leave one shard and arrive on the other.
    let mut seen = Vec::new();
    while seen.last().map(|t: &Value| t != "MODIFIED").unwrap_or(true) {
        let ev = next_named(&mut admin, "cm1").await;
        seen.push(ev["type"].clone());
    }
    assert_eq!(seen, ["DELETED", "ADDED", "MODIFIED"]);

    // And back, with the command a platform team uses; the team's kubeconfig (a ServiceAccount's
    // token) works on either shard. The default shard's revisions are not b's either.
    let team = s.role_kubeconfig("mover", "owner", "admin");
    let (_, listed) = s.get("/clusters/mover/api/v1/configmaps").await;
    let b_rv = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let admin = s.kubeconfig();
    let (team2, admin2) = (team.clone(), admin.clone());
    tokio::task::spawn_blocking(move || {
        assert_eq!(common::kubectl_ok(&team2, &["get", "cm", "cm1", "-o", "jsonpath={.data.k}"]), "after");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgate"))
            .args(["cluster", "move", "mover", "--to", "default", "--wait", "--kubeconfig"])
            .arg(&admin2)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && said.contains("moved to shard \"default\""), "{said}{out:?}");
        assert_eq!(common::kubectl_ok(&team2, &["get", "cm", "cm1", "-o", "jsonpath={.data.k}"]), "after");
    })
    .await
    .unwrap();
    let (_, lc) = s.get(&format!("{LC}/mover")).await;
    assert_eq!((&lc["spec"]["shard"], lc["status"].get("shard")), (&json!("default"), None), "{lc}");
    assert!(keys(&shard_b, &format!("{p}/core/configmaps/mover/")).await.is_empty());
    let (code, body) =
        s.get(&format!("/clusters/mover/api/v1/configmaps?resourceVersion={b_rv}&resourceVersionMatch=Exact")).await;
    assert_eq!(code, StatusCode::GONE, "{body}");
    // b's revisions are higher than the default shard's: still too old here, never "too large".
    let mut resumed = s.watch(&format!("/clusters/mover/api/v1/configmaps?watch=true&resourceVersion={b_rv}")).await;
    let ev = tokio::time::timeout(Duration::from_secs(10), resumed.recv()).await.unwrap().unwrap();
    assert_eq!((&ev["type"], &ev["object"]["code"]), (&json!("ERROR"), &json!(410)), "{ev}");
    let (code, body) = s.get(&format!("/clusters/mover/api/v1/configmaps?resourceVersion={b_rv}")).await;
    assert_eq!(code, StatusCode::GONE, "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deleted_while_it_moves_leaves_nothing_on_either_shard() {
    let b = TestEtcd::start();
    let s = TestServer::start_sharded(Backend::Embedded, &[("b", &b.endpoint)]).await;
    let shard_b =
        kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&b.endpoint), &Default::default()).await.unwrap();
    let (p, default_store) = (s.prefix.clone(), s.running_store());
    create_on(&s, "brief", Some("default")).await;
    create_on(&s, "stays", Some("default")).await;
    configmap(&s, "stays", "kept").await;
    let made = futures::future::join_all((0..400).map(|i| {
        let (client, url) = (s.client.clone(), s.url.clone());
        async move {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}")}});
            let path = format!("{url}/clusters/brief/api/v1/namespaces/default/configmaps");
            client.post(path).json(&cm).send().await.unwrap().status()
        }
    }))
    .await;
    assert!(made.iter().all(|c| *c == StatusCode::CREATED), "{made:?}");
    // Custom resources too: mid-move their CRD may be on one shard and they on the other.
    let crd = gadget_crd();
    let (code, body) = s.post("/clusters/brief/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let gadgets = "/clusters/brief/apis/example.com/v1/namespaces/default/gadgets";
    for i in 0..150 {
        let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": format!("g{i}")}});
        common::eventually(10, "a gadget is created", || async {
            s.post(gadgets, &gadget).await.0 == StatusCode::CREATED
        })
        .await;
    }
    let (_, mut lc) = s.get(&format!("{LC}/brief")).await;
    lc["spec"]["shard"] = json!("b");
    assert_eq!(s.put(&format!("{LC}/brief"), &lc).await.0, StatusCode::OK);
    // Deleted about when the move starts (after its grace): staging, leaving or neither, whichever.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let (code, body) = s.delete(&format!("{LC}/brief")).await;
    assert!(code.is_success(), "{body}");
    common::eventually(60, "the LogicalCluster goes", || async {
        s.get(&format!("{LC}/brief")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    // Gone only once both shards are empty of it, staging included: made again at once, the name
    // holds nothing of the old cluster's.
    let theirs = |ks: Vec<String>| ks.into_iter().filter(|k| k.contains("/brief/")).collect::<Vec<_>>();
    assert_eq!(theirs(keys(&*default_store, &format!("{p}/")).await), Vec::<String>::new());
    assert_eq!(theirs(keys(&shard_b, &format!("{p}/")).await), Vec::<String>::new());
    create_on(&s, "brief", Some("b")).await;
    let (_, list) = s.get("/clusters/brief/api/v1/namespaces/default/configmaps").await;
    assert_eq!(ours(&list), Vec::<(String, String)>::new(), "{list}");
    let (ok, _) = found(&s, "/clusters/stays/api/v1/namespaces/default/configmaps/kept").await;
    assert!(ok, "another cluster keeps its objects");
    s.stop().await;
}
