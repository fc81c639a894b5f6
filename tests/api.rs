//! HTTP-level semantics of each verb and its errors, against a real server (embedded store, and etcd
//! where the backend matters).

mod common;

use common::{Backend, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn create_get_update_conflict_delete_on_both_backends() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let (code, created) = s.post(CM, &cm("a", json!({"k": "v"}))).await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
        let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        assert!(!created["metadata"]["uid"].as_str().unwrap().is_empty());
        assert!(created["metadata"]["creationTimestamp"].is_string());
        assert_eq!(created["metadata"]["annotations"]["kgate.dev/cluster"], "root");

        let (code, again) = s.post(CM, &cm("a", json!({}))).await;
        assert_eq!((code, again["reason"].as_str()), (StatusCode::CONFLICT, Some("AlreadyExists")));
        assert_eq!(again["message"], "configmaps \"a\" already exists");

        let (code, got) = s.get(&format!("{CM}/a")).await;
        assert_eq!((code, &got["data"]["k"]), (StatusCode::OK, &json!("v")));

        let mut next = got.clone();
        next["data"]["k"] = json!("w");
        let (code, updated) = s.put(&format!("{CM}/a"), &next).await;
        assert_eq!(code, StatusCode::OK, "{updated}");
        assert_ne!(updated["metadata"]["resourceVersion"].as_str().unwrap(), rv);
        assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

        // The stale resourceVersion from the first read now conflicts.
        let (code, stale) = s.put(&format!("{CM}/a"), &got).await;
        assert_eq!(code, StatusCode::CONFLICT);
        assert_eq!(stale["reason"], "Conflict");
        assert!(stale["message"].as_str().unwrap().contains("the object has been modified"));

        let (code, st) = s.delete(&format!("{CM}/a")).await;
        assert_eq!((code, st["status"].as_str()), (StatusCode::OK, Some("Success")));
        let (code, nf) = s.get(&format!("{CM}/a")).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert_eq!(nf["message"], "configmaps \"a\" not found");
        assert_eq!(nf["details"]["kind"], "configmaps");
        s.stop().await;
    }
}

#[tokio::test]
async fn bad_input_gets_a_status_and_changes_nothing() {
    let s = TestServer::start(Backend::Embedded).await;
    let post_raw = |ct: &'static str, body: &'static [u8]| {
        let s = &s;
        async move { s.req(Method::POST, CM, Some(ct), Some(body.to_vec())).await }
    };
    let (code, st) = post_raw("application/json", b"{not json").await;
    assert_eq!((code, st["kind"].as_str()), (StatusCode::BAD_REQUEST, Some("Status")));
    let (code, _) = post_raw("application/yaml", b"a: [unclosed").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    let (code, _) = post_raw("text/plain", b"hello").await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let (code, st) =
        s.post(CM, &json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(st["message"].as_str().unwrap().contains("does not match the expected API version"));

    let (code, st) = s.post(CM, &cm("Bad_Name", json!({}))).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")));
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");

    let (code, st) = s.post(CM, &json!({"metadata": {"name": "l", "labels": {"bad key!": "v"}}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");

    let (code, st) = s.post(CM, &json!({"metadata": {}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(st["message"].as_str().unwrap().contains("name or generateName is required"));

    let (code, st) = s.post(CM, &json!({"metadata": {"name": "n", "namespace": "other"}})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{st}");

    let (code, st) = s.post(CM, &json!({"metadata": {"name": "t"}, "data": {"a": 1}})).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "type errors are rejected: {st}");

    let big = vec![b'a'; 4 * 1024 * 1024];
    let (code, _) = s.req(Method::POST, CM, Some("application/json"), Some(big)).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);

    let (code, st) = s.post("/api/v1/namespaces/nope/configmaps", &cm("x", json!({}))).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(st["message"], "namespaces \"nope\" not found");

    // Nothing of the above was stored.
    let (_, list) = s.get(CM).await;
    assert_eq!(common::own_items(&list), Vec::<Value>::new());
    s.stop().await;
}

/// An object under kgate's 3 MiB body limit but over etcd's 1.5 MiB request limit is refused by etcd:
/// the client is told it is too large (kube-apiserver answers 500, kubernetes/kubernetes#112152) and
/// nothing changes.
#[tokio::test]
async fn objects_over_the_stores_limit_get_413_on_etcd() {
    // etcd's gRPC server refuses the 2 MiB create before etcd looks at it; the 1.8 MiB update is between
    // etcd's own limit and its gRPC server's, which refuse with different errors.
    objects_over_the_stores_limit_get_413(
        Backend::Etcd,
        "received message larger than max",
        "etcdserver: request is too large",
    )
    .await;
}

/// The embedded store keeps etcd's default limit: an object either store takes, the other takes too.
#[tokio::test]
async fn objects_over_the_stores_limit_get_413_on_the_embedded_store() {
    objects_over_the_stores_limit_get_413(Backend::Embedded, "request is too large", "request is too large").await;
}

/// A 2 MiB create and a 1.8 MiB update are refused with 413, saying `create_says` and `update_says`,
/// and change nothing.
async fn objects_over_the_stores_limit_get_413(backend: Backend, create_says: &str, update_says: &str) {
    let s = TestServer::start(backend).await;
    let big = "x".repeat(2 * 1024 * 1024);
    let (code, st) = s.post(CM, &cm("big", json!({"k": big}))).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("RequestEntityTooLarge")), "{st}");
    assert!(st["message"].as_str().unwrap().contains(create_says), "{st}");
    assert_eq!(s.get(&format!("{CM}/big")).await.0, StatusCode::NOT_FOUND);

    let (code, small) = s.post(CM, &cm("grows", json!({"k": "v"}))).await;
    assert_eq!(code, StatusCode::CREATED, "{small}");
    let mut next = small.clone();
    next["data"]["k"] = json!("x".repeat(1800 * 1024));
    let (code, st) = s.put(&format!("{CM}/grows"), &next).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("RequestEntityTooLarge")), "{st}");
    assert!(st["message"].as_str().unwrap().contains(update_says), "{st}");
    let (_, got) = s.get(&format!("{CM}/grows")).await;
    assert_eq!(
        (&got["data"]["k"], &got["metadata"]["resourceVersion"]),
        (&json!("v"), &small["metadata"]["resourceVersion"])
    );
    s.stop().await;
}

#[tokio::test]
async fn field_validation_strict_warn_ignore() {
    let s = TestServer::start(Backend::Embedded).await;
    let body = json!({"metadata": {"name": "fv"}, "data": {"a": "b"}, "bogus": 1});
    let (code, st) = s.post(&format!("{CM}?fieldValidation=Strict"), &body).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(st["message"], "strict decoding error: unknown field \"bogus\"");

    let resp = s.client.post(format!("{}{CM}?fieldValidation=Warn", s.url)).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let warning = resp.headers().get("warning").unwrap().to_str().unwrap().to_string();
    assert_eq!(warning, "299 - \"unknown field \\\"bogus\\\"\"");
    let stored: Value = resp.json().await.unwrap();
    assert!(stored.get("bogus").is_none(), "unknown fields are dropped");

    let mut b2 = body.clone();
    b2["metadata"]["name"] = json!("fv2");
    let (code, obj) = s.post(&format!("{CM}?fieldValidation=Ignore"), &b2).await;
    assert_eq!(code, StatusCode::CREATED);
    assert!(obj.get("bogus").is_none());
    let (code, _) = s.post(&format!("{CM}?fieldValidation=Maybe"), &b2).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    s.stop().await;
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let s = TestServer::start(Backend::Embedded).await;
    let (code, obj) = s.post(CM, &json!({"metadata": {"generateName": "gen-"}})).await;
    assert_eq!(code, StatusCode::CREATED);
    let name = obj["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let (code, dry) = s.post(&format!("{CM}?dryRun=All"), &cm("dry", json!({}))).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(dry["metadata"]["name"], "dry");
    assert_eq!(s.get(&format!("{CM}/dry")).await.0, StatusCode::NOT_FOUND, "dry run stores nothing");

    let (code, _) = s.req(Method::DELETE, &format!("{CM}/{name}?dryRun=All"), None, None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(s.get(&format!("{CM}/{name}")).await.0, StatusCode::OK, "dry-run delete deletes nothing");
    s.stop().await;
}

#[tokio::test]
async fn patches_of_every_type() {
    let s = TestServer::start(Backend::Embedded).await;
    s.post(CM, &cm("p", json!({"a": "1", "b": "2"}))).await;
    let path = format!("{CM}/p");
    let (code, o) = s.patch(&path, "application/merge-patch+json", &json!({"data": {"a": null, "c": "3"}})).await;
    assert_eq!(code, StatusCode::OK, "{o}");
    assert_eq!(o["data"], json!({"b": "2", "c": "3"}));
    let (code, o) = s
        .patch(&path, "application/json-patch+json", &json!([{"op": "replace", "path": "/data/b", "value": "x"}]))
        .await;
    assert_eq!((code, &o["data"]["b"]), (StatusCode::OK, &json!("x")));
    let (code, o) = s
        .patch(&path, "application/json-patch+json", &json!([{"op": "test", "path": "/data/b", "value": "nope"}]))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{o}");
    let (code, o) = s.patch(&path, "application/strategic-merge-patch+json", &json!({"data": {"d": "4"}})).await;
    assert_eq!((code, &o["data"]["d"]), (StatusCode::OK, &json!("4")));
    let (code, _) = s.patch(&path, "application/x-unknown", &json!({})).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (code, _) = s.patch(&format!("{CM}/missing"), "application/merge-patch+json", &json!({})).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    // A resourceVersion in a patch is a precondition.
    let (code, _) = s
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": "1"}, "data": {"z": "z"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);

    // Server-side apply creates, then conflicts with another manager, then force takes over.
    let apply = |mgr: &str, force: bool, v: &str| {
        let body = cm("ssa", json!({"k": v}));
        let q = format!("{CM}/ssa?fieldManager={mgr}{}", if force { "&force=true" } else { "" });
        (q, body)
    };
    let (q, b) = apply("one", false, "1");
    let (code, o) = s.patch(&q, "application/apply-patch+yaml", &b).await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    assert_eq!(o["metadata"]["managedFields"][0]["manager"], "one");
    assert_eq!(o["metadata"]["managedFields"][0]["operation"], "Apply");
    let (q, b) = apply("two", false, "2");
    let (code, o) = s.patch(&q, "application/apply-patch+yaml", &b).await;
    assert_eq!(code, StatusCode::CONFLICT, "{o}");
    assert_eq!(o["message"], "Apply failed with 1 conflict: conflict with \"one\": .data.k");
    let (q, b) = apply("two", true, "2");
    let (code, o) = s.patch(&q, "application/apply-patch+yaml", &b).await;
    assert_eq!((code, &o["data"]["k"]), (StatusCode::OK, &json!("2")));
    let (code, o) = s.patch(&format!("{CM}/ssa"), "application/apply-patch+yaml", &cm("ssa", json!({}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "fieldManager is required: {o}");
    s.stop().await;
}

#[tokio::test]
async fn lists_select_and_paginate() {
    let s = TestServer::start(Backend::Embedded).await;
    for i in 0..7 {
        s.post(CM, &json!({"metadata": {"name": format!("c{i}"), "labels": {"n": format!("{}", i % 2)}}})).await;
    }
    let (_, all) = s.get(CM).await;
    assert_eq!(all["kind"], "ConfigMapList");
    assert_eq!(common::own_items(&all).len(), 7);
    let (_, odd) = s.get(&format!("{CM}?labelSelector=n%3D1")).await;
    assert_eq!(odd["items"].as_array().unwrap().len(), 3);
    let (_, set) = s.get(&format!("{CM}?labelSelector=n+in+%280%29")).await;
    assert_eq!(set["items"].as_array().unwrap().len(), 4);
    let (_, one) = s.get(&format!("{CM}?fieldSelector=metadata.name%3Dc3")).await;
    assert_eq!(one["items"][0]["metadata"]["name"], "c3");
    let (code, bad) = s.get(&format!("{CM}?fieldSelector=spec.nope%3D1")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(bad["message"], "field label not supported: spec.nope");
    let (code, _) = s.get(&format!("{CM}?labelSelector=a+in+%28")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);

    // Pages of 3 at one resourceVersion, even with writes in between.
    let (_, p1) = s.get(&format!("{CM}?limit=3")).await;
    assert_eq!(p1["items"].as_array().unwrap().len(), 3);
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    s.post(CM, &json!({"metadata": {"name": "c00-late"}})).await;
    let (_, p2) = s.get(&format!("{CM}?limit=3&continue={token}")).await;
    let token2 = p2["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, p3) = s.get(&format!("{CM}?limit=3&continue={token2}")).await;
    assert!(p3["metadata"].get("continue").is_none(), "last page has no continue");
    let names: Vec<String> = [&p1, &p2, &p3]
        .iter()
        .flat_map(|p| {
            p["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        })
        .filter(|n| n != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, (0..7).map(|i| format!("c{i}")).collect::<Vec<_>>(), "the late write is not in the snapshot");
    assert_eq!(p1["metadata"]["resourceVersion"], p3["metadata"]["resourceVersion"]);
    let (code, _) = s.get(&format!("{CM}?limit=3&continue=garbage")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    let (code, _) = s.get(&format!("{CM}?resourceVersionMatch=Exact")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);

    // Table output for kubectl get.
    let (code, table) = s
        .req_with(
            &s.client,
            Method::GET,
            CM,
            None,
            None,
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")],
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.iter().filter(|r| r["cells"][0] != "kube-root-ca.crt").count(), 8, "{table}");
    s.stop().await;
}

#[tokio::test]
async fn finalizers_defer_deletion_until_removed() {
    let s = TestServer::start(Backend::Embedded).await;
    s.post(CM, &json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})).await;
    let (code, o) = s.delete(&format!("{CM}/f")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(o["metadata"]["deletionTimestamp"].is_string(), "{o}");
    let (code, o) = s.get(&format!("{CM}/f")).await;
    assert_eq!(code, StatusCode::OK, "still there while finalizers remain: {o}");
    let (code, _) =
        s.patch(&format!("{CM}/f"), "application/merge-patch+json", &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(s.get(&format!("{CM}/f")).await.0, StatusCode::NOT_FOUND);

    // Foreground and Orphan propagation: marked, as kube marks them, and the garbage collector lets
    // an object without dependents go at once (tests/gc.rs has the rest).
    for policy in ["Foreground", "Orphan"] {
        s.post(CM, &cm("fg", json!({}))).await;
        let body = serde_json::to_vec(&json!({"propagationPolicy": policy})).unwrap();
        let (code, o) = s.req(Method::DELETE, &format!("{CM}/fg"), Some("application/json"), Some(body)).await;
        assert_eq!(code, StatusCode::OK);
        let finalizer = if policy == "Orphan" { "orphan" } else { "foregroundDeletion" };
        assert_eq!(o["metadata"]["finalizers"], json!([finalizer]), "{o}");
        common::eventually(10, "the collector to finish the delete", || async {
            s.get(&format!("{CM}/fg")).await.0 == StatusCode::NOT_FOUND
        })
        .await;
    }

    // Preconditions.
    let (_, o) = s.post(CM, &cm("pre", json!({}))).await;
    let body = serde_json::to_vec(&json!({"preconditions": {"uid": "wrong"}})).unwrap();
    let (code, st) = s.req(Method::DELETE, &format!("{CM}/pre"), Some("application/json"), Some(body)).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(st["message"].as_str().unwrap().contains("Precondition failed: UID in precondition: wrong"));
    let uid = o["metadata"]["uid"].as_str().unwrap();
    let body = serde_json::to_vec(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}, "gracePeriodSeconds": null})).unwrap();
    let (code, _) = s.req(Method::DELETE, &format!("{CM}/pre"), Some("application/json"), Some(body)).await;
    assert_eq!(code, StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn namespaces_terminate_and_take_their_contents() {
    let s = TestServer::start(Backend::Embedded).await;
    s.post("/api/v1/namespaces", &json!({"metadata": {"name": "doomed"}})).await;
    let (code, sa) = s.get("/api/v1/namespaces/doomed/serviceaccounts/default").await;
    assert_eq!(code, StatusCode::OK, "every namespace gets a default ServiceAccount: {sa}");
    s.post("/api/v1/namespaces/doomed/configmaps", &cm("x", json!({}))).await;
    let (code, ns) = s.delete("/api/v1/namespaces/doomed").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ns["status"]["phase"], "Terminating");
    for _ in 0..100 {
        if s.get("/api/v1/namespaces/doomed").await.0 == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(s.get("/api/v1/namespaces/doomed").await.0, StatusCode::NOT_FOUND);
    let (_, list) = s.get("/api/v1/configmaps").await;
    assert!(list["items"].as_array().unwrap().iter().all(|i| i["metadata"]["namespace"] != "doomed"));
    s.stop().await;
}

/// As kube's namespace controller: an object with finalizers is marked deleted, not removed, and holds
/// its namespace in Terminating until its finalizers' owner lets it go, across a restart too.
#[tokio::test]
async fn namespace_deletion_waits_for_finalizers_of_its_objects() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        s.post("/api/v1/namespaces", &json!({"metadata": {"name": "held"}})).await;
        let objs = "/api/v1/namespaces/held/configmaps";
        let guarded = json!({"metadata": {"name": "guarded", "finalizers": ["example.com/cleanup"]}});
        assert_eq!(s.post(objs, &guarded).await.0, StatusCode::CREATED);
        assert_eq!(s.post(objs, &cm("plain", json!({}))).await.0, StatusCode::CREATED);
        let (code, ns) = s.delete("/api/v1/namespaces/held").await;
        assert_eq!((code, &ns["status"]["phase"]), (StatusCode::OK, &json!("Terminating")));
        let gone = |path: String| {
            let s = &s;
            async move { s.get(&path).await.0 == StatusCode::NOT_FOUND }
        };
        common::eventually(10, "the object without finalizers goes", || gone(format!("{objs}/plain"))).await;
        let (code, obj) = s.get(&format!("{objs}/guarded")).await;
        assert_eq!(code, StatusCode::OK, "{backend:?}: the object with a finalizer stays");
        assert!(obj["metadata"]["deletionTimestamp"].is_string(), "{backend:?}: and is marked deleted: {obj}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let (code, ns) = s.get("/api/v1/namespaces/held").await;
        assert_eq!((code, &ns["status"]["phase"]), (StatusCode::OK, &json!("Terminating")), "{backend:?}");
        // It says what holds it, as kube's namespace controller does (`kubectl describe namespace`).
        let said = |ns: &Value, kind: &str| {
            let conditions = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
            conditions.into_iter().find(|c| c["type"] == kind).map(|c| (c["status"].clone(), c["message"].clone()))
        };
        let finalizers =
            "Some content in the namespace has finalizers remaining: example.com/cleanup in 1 resource instances";
        common::eventually(10, "the namespace names the finalizer holding it", || async {
            said(&s.get("/api/v1/namespaces/held").await.1, "NamespaceFinalizersRemaining")
                == Some((json!("True"), json!(finalizers)))
        })
        .await;
        let (_, ns) = s.get("/api/v1/namespaces/held").await;
        let content = "Some resources are remaining: configmaps has 1 resource instances";
        assert_eq!(said(&ns, "NamespaceContentRemaining"), Some((json!("True"), json!(content))), "{backend:?}: {ns}");

        // A restart in the meantime: the new process takes up the wait (and the old one stops at once).
        let prefix = s.prefix.clone();
        let stopping = std::time::Instant::now();
        let dir = s.stop().await;
        assert!(stopping.elapsed() < std::time::Duration::from_secs(5), "a held namespace delayed the stop");
        let s = TestServer::start_in(backend, dir, prefix).await;
        let gone = |path: String| {
            let s = &s;
            async move { s.get(&path).await.0 == StatusCode::NOT_FOUND }
        };
        let release = json!({"metadata": {"finalizers": null}});
        let (code, _) = s.patch(&format!("{objs}/guarded"), "application/merge-patch+json", &release).await;
        assert_eq!(code, StatusCode::OK);
        common::eventually(10, "the namespace goes once its last object is released", || {
            gone("/api/v1/namespaces/held".to_string())
        })
        .await;
        assert_eq!(s.get(&format!("{objs}/guarded")).await.0, StatusCode::NOT_FOUND);
        s.stop().await;
    }
}

/// A replica remembers namespaces it saw active, so a create costs one store round trip; the store
/// still refuses a create into a namespace that has since started terminating (here written straight
/// to the store, as another replica whose cleanup is still running leaves it) or gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn creates_respect_namespace_changes_this_replica_did_not_see() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let objs = "/api/v1/namespaces/shared/configmaps";
        s.post("/api/v1/namespaces", &json!({"metadata": {"name": "shared"}})).await;
        let (code, _) = s.post(objs, &cm("seen", json!({}))).await;
        assert_eq!(code, StatusCode::CREATED);

        let store = s.running_store();
        let key = format!("{}/core/namespaces/root/shared", s.running_prefix());
        let kv = store.get(&key).await.unwrap().unwrap();
        let mut ns: Value = serde_json::from_slice(&kv.value).unwrap();
        ns["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        ns["status"] = json!({"phase": "Terminating"});
        store.update(&key, serde_json::to_vec(&ns).unwrap(), kv.mod_revision).await.unwrap();
        let (code, st) = s.post(objs, &cm("late", json!({}))).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{backend:?}: {st}");
        assert!(st["message"].as_str().unwrap().contains("because it is being terminated"), "{st}");

        store.delete(&key, None).await.unwrap();
        let (code, st) = s.post(objs, &cm("later", json!({}))).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{backend:?}: {st}");

        // Made again: what the replica remembers of the old namespace does not stand in the way.
        s.post("/api/v1/namespaces", &json!({"metadata": {"name": "shared"}})).await;
        let (code, st) = s.post(objs, &cm("again", json!({}))).await;
        assert_eq!(code, StatusCode::CREATED, "{backend:?}: {st}");
        let (_, list) = s.get(objs).await;
        let own = common::own_items(&list);
        let names: Vec<&str> = own.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
        assert_eq!(names, ["again", "seen"], "{backend:?}: nothing was created while the namespace was going");
        drop(store);
        s.stop().await;
    }
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// Deployment `d` (two replicas) created in root's default namespace; the object as created.
async fn created_deployment(s: &TestServer) -> serde_json::Value {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let (code, o) = s.post(DEPLOYMENTS, &d).await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    o
}

/// A status write is checked as kube's status strategies check it: a controller's counts can be
/// neither negative nor more than the whole, a collision count only grows, a finished Job stays
/// finished. Nothing of a refused write is kept.
#[tokio::test]
async fn status_writes_are_checked_as_kube_checks_them() {
    let s = TestServer::start(Backend::Embedded).await;
    let base = DEPLOYMENTS;
    created_deployment(&s).await;
    let merge = "application/merge-patch+json";
    let status = format!("{base}/d/status");
    let good = json!({"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "collisionCount": 1}});
    let (code, o) = s.patch(&status, merge, &good).await;
    assert_eq!(code, StatusCode::OK, "{o}");
    let (code, o) = s.patch(&status, merge, &json!({"status": {"readyReplicas": 3, "collisionCount": 0}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{o}");
    let causes: Vec<String> = o["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    assert_eq!(
        causes,
        [
            "status.readyReplicas: Invalid value: 3: cannot be greater than status.replicas",
            "status.collisionCount: Invalid value: 0: cannot be decremented",
        ]
    );
    let (_, o) = s.get(&format!("{base}/d")).await;
    assert_eq!((o["status"]["readyReplicas"].clone(), o["status"]["collisionCount"].clone()), (json!(2), json!(1)));
    // A finished Job's terminal condition stays.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let (code, o) = s.post("/apis/batch/v1/namespaces/default/jobs", &job).await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    let job_status = "/apis/batch/v1/namespaces/default/jobs/j/status";
    let now = "2025-01-01T00:00:00Z";
    let done = json!({"status": {"succeeded": 1, "startTime": now, "completionTime": now, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
        {"type": "Complete", "status": "True", "lastTransitionTime": now}]}});
    let (code, o) = s.patch(job_status, merge, &done).await;
    assert_eq!(code, StatusCode::OK, "{o}");
    let (code, o) = s.patch(job_status, merge, &json!({"status": {"conditions": []}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{o}");
    assert_eq!(
        o["details"]["causes"][0]["message"],
        "Invalid value: cannot disable the terminal Complete=True condition"
    );
    // A pod that never restarts keeps its finished containers finished; what a kubelet writes of its
    // IPs is stored as kube stores it, the list following the single field, and a status without a QoS
    // class keeps the stored one.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
    let (code, o) = s.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    let pod_status = "/api/v1/namespaces/default/pods/p/status";
    let finished = json!({"status": {"phase": "Succeeded", "podIP": "10.0.0.7", "hostIP": "192.168.0.3",
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0}}}]}});
    let (code, o) = s.patch(pod_status, merge, &finished).await;
    assert_eq!(code, StatusCode::OK, "{o}");
    assert_eq!(
        (&o["status"]["podIPs"], &o["status"]["hostIPs"], &o["status"]["qosClass"]),
        (&json!([{"ip": "10.0.0.7"}]), &json!([{"ip": "192.168.0.3"}]), &json!("BestEffort"))
    );
    let again = json!({"status": {"containerStatuses": [{"name": "c", "image": "busybox", "imageID": "",
        "ready": true, "restartCount": 1, "state": {"running": {}}}], "nominatedNodeName": "Node_1"}});
    let (code, o) = s.patch(pod_status, merge, &again).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{o}");
    let messages: Vec<&str> =
        o["details"]["causes"].as_array().unwrap().iter().map(|c| c["message"].as_str().unwrap()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].starts_with("Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain"), "{messages:?}");
    assert_eq!(messages[1], "Forbidden: may not be transitioned to non-terminated state");
    s.stop().await;
}

#[tokio::test]
async fn status_and_scale_subresources() {
    let s = TestServer::start(Backend::Embedded).await;
    let (base, o) = (DEPLOYMENTS, created_deployment(&s).await);
    assert_eq!(o["metadata"]["generation"], 1);
    // Status through the main resource is ignored; through /status it is taken.
    let (_, o) =
        s.patch(&format!("{base}/d"), "application/merge-patch+json", &json!({"status": {"replicas": 9}})).await;
    assert!(o["status"].get("replicas").is_none());
    let (code, o) = s
        .patch(
            &format!("{base}/d/status"),
            "application/merge-patch+json",
            &json!({"status": {"replicas": 1}, "spec": {"replicas": 7}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{o}");
    assert_eq!((o["status"]["replicas"].clone(), o["spec"]["replicas"].clone()), (json!(1), json!(2)));
    let (code, sc) = s.get(&format!("{base}/d/scale")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(sc["kind"], "Scale");
    assert_eq!(sc["spec"]["replicas"], 2);
    assert_eq!(sc["status"]["selector"], "app=d");
    let (code, sc) =
        s.patch(&format!("{base}/d/scale"), "application/merge-patch+json", &json!({"spec": {"replicas": 4}})).await;
    assert_eq!((code, &sc["spec"]["replicas"]), (StatusCode::OK, &json!(4)));
    let (_, o) = s.get(&format!("{base}/d")).await;
    assert_eq!(o["spec"]["replicas"], 4);
    assert_eq!(o["metadata"]["generation"], 2, "spec changes bump generation");
    assert_eq!(s.get("/api/v1/namespaces/default/configmaps/x/scale").await.0, StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test]
async fn cluster_addressing_and_isolation() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    s.create_cluster("team-a-b").await;
    let (code, _) = s.post(&format!("/clusters/team-a{CM}"), &cm("same", json!({"owner": "a"}))).await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = s
        .req_with(
            &s.client,
            Method::POST,
            CM,
            Some("application/json"),
            Some(serde_json::to_vec(&cm("same", json!({"owner": "ab"}))).unwrap()),
            &[("X-Kubernetes-Cluster", "team-a-b")],
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "addressed by header");
    let (_, a) = s.get(&format!("/clusters/team-a{CM}/same")).await;
    assert_eq!(a["data"]["owner"], "a");
    assert_eq!(a["metadata"]["annotations"]["kgate.dev/cluster"], "team-a");
    let (_, ab) = s.get(&format!("/clusters/team-a-b{CM}/same")).await;
    assert_eq!(ab["data"]["owner"], "ab");
    assert_eq!(s.get(&format!("{CM}/same")).await.0, StatusCode::NOT_FOUND, "root sees neither");
    let (_, list_a) = s.get(&format!("/clusters/team-a{CM}")).await;
    assert_eq!(common::own_items(&list_a).len(), 1, "cluster a never lists a-b's keys");

    // Writing the cluster annotation does not move an object.
    let mut evil = a.clone();
    evil["metadata"]["annotations"]["kgate.dev/cluster"] = json!("team-a-b");
    evil["data"]["owner"] = json!("changed");
    let (code, o) = s.put(&format!("/clusters/team-a{CM}/same"), &evil).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(o["metadata"]["annotations"]["kgate.dev/cluster"], "team-a");
    let (_, ab) = s.get(&format!("/clusters/team-a-b{CM}/same")).await;
    assert_eq!(ab["data"]["owner"], "ab");

    let hdr = |h: &'static str| [("X-Kubernetes-Cluster", h)];
    let (code, st) =
        s.req_with(&s.client, Method::GET, &format!("/clusters/team-a{CM}"), None, None, &hdr("team-a-b")).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::BAD_REQUEST, Some("BadRequest")));
    assert_eq!(s.get(&format!("/clusters/Nope{CM}")).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(s.get(&format!("/clusters/nope{CM}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.get(&format!("/clusters/..%2Froot{CM}")).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(s.get("/clusters/team-a/api/v1/namespaces/a%2Fb/configmaps").await.0, StatusCode::BAD_REQUEST);

    // Wildcard: list across clusters, every item says where it lives; writes are 405.
    let (code, all) = s.get(&format!("/clusters/*{CM}")).await;
    assert_eq!(code, StatusCode::OK, "{all}");
    let mut owners: Vec<String> = common::own_items(&all)
        .iter()
        .map(|i| i["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string())
        .collect();
    owners.sort();
    assert_eq!(owners, vec!["team-a", "team-a-b"]);
    let (code, _) = s.post(&format!("/clusters/*{CM}"), &cm("w", json!({}))).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(s.delete(&format!("/clusters/*{CM}/same")).await.0, StatusCode::METHOD_NOT_ALLOWED);

    // root is reserved: a LogicalCluster named root could only be used to purge it.
    let (code, _) =
        s.post("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters", &json!({"metadata": {"name": "root"}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);

    // Tenancy types only in root.
    assert_eq!(
        s.get("/clusters/team-a/apis/tenancy.kgate.dev/v1alpha1/logicalclusters").await.0,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

#[tokio::test]
async fn anonymous_requests_get_401_except_health_and_version() {
    let s = TestServer::start(Backend::Embedded).await;
    for p in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, _) = s.req_with(&s.anonymous, Method::GET, p, None, None, &[]).await;
        assert_eq!(code, StatusCode::OK, "{p}");
    }
    for p in ["/api", "/api/v1/namespaces", "/openapi/v3", "/clusters/root/api/v1/configmaps"] {
        let (code, st) = s
            .req_with(
                &s.anonymous,
                Method::GET,
                p,
                None,
                None,
                &[("X-Remote-User", "admin"), ("X-Remote-Group", "system:masters")],
            )
            .await;
        assert_eq!((code, st["reason"].as_str()), (StatusCode::UNAUTHORIZED, Some("Unauthorized")), "{p}");
    }
    let (_, v) = s.get("/version").await;
    assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("33")));
    s.stop().await;
}

#[tokio::test]
async fn discovery_and_openapi_documents() {
    let s = TestServer::start(Backend::Embedded).await;
    let agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let resp = s.client.get(format!("{}/apis", s.url)).header("accept", agg).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    let body: Value = resp.json().await.unwrap();
    assert!(body["items"].as_array().unwrap().iter().any(|g| g["metadata"]["name"] == "apps"));
    let again = s
        .client
        .get(format!("{}/apis", s.url))
        .header("accept", agg)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // A tenant's discovery differs from root's (no tenancy group), so its ETag does too.
    let tenant = s.client.get(format!("{}/clusters/*/apis", s.url)).header("accept", agg).send().await.unwrap();
    assert_ne!(tenant.headers()["etag"].to_str().unwrap(), etag);

    let (_, legacy) = s.get("/apis").await;
    assert_eq!(legacy["kind"], "APIGroupList");
    for g in legacy["groups"].as_array().unwrap() {
        assert!(g["versions"].as_array().unwrap().contains(&g["preferredVersion"]), "{g}");
        let gv = g["preferredVersion"]["groupVersion"].as_str().unwrap();
        let (code, rl) = s.get(&format!("/apis/{gv}")).await;
        assert_eq!((code, rl["kind"].as_str()), (StatusCode::OK, Some("APIResourceList")), "{gv}");
    }
    let (_, idx) = s.get("/openapi/v3").await;
    let url = idx["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (code, doc) = s.get(&url).await;
    assert_eq!(code, StatusCode::OK);
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Deployment");
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    let stale = s.client.get(format!("{}/openapi/v3/apis/apps/v1?hash=old", s.url)).send().await.unwrap();
    assert_eq!(
        stale.url().query().unwrap().strip_prefix("hash=").unwrap(),
        url.split("hash=").nth(1).unwrap(),
        "stale hash redirects"
    );
    // /openapi/v2: protobuf for kubectl (which asks with the '@' spelling), JSON for anyone else.
    let v2 = s
        .client
        .get(format!("{}/openapi/v2", s.url))
        .header("Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(v2.status(), StatusCode::OK);
    assert_eq!(v2.headers()["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    let (code, doc) = s.get("/openapi/v2").await;
    assert_eq!((code, &doc["swagger"]), (StatusCode::OK, &json!("2.0")));
    s.stop().await;
}

#[tokio::test]
async fn lifecycle_rules_found_in_review() {
    let s = TestServer::start(Backend::Embedded).await;
    // The initial namespaces cannot be deleted.
    let (code, st) = s.delete("/api/v1/namespaces/default").await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{st}");
    // A PUT carrying another object's uid is a failed precondition.
    s.post(CM, &cm("u", json!({}))).await;
    let (_, mut o) = s.get(&format!("{CM}/u")).await;
    o["metadata"]["uid"] = json!("not-the-uid");
    let (code, st) = s.put(&format!("{CM}/u"), &o).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(st["message"].as_str().unwrap().contains("Precondition failed: UID in precondition"));
    // deletecollection of a namespaced resource needs a namespace.
    assert_eq!(s.delete("/api/v1/configmaps").await.0, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(s.get(&format!("{CM}/u")).await.0, StatusCode::OK);

    // Changing a terminating namespace does not remove it before its contents are gone.
    s.post("/api/v1/namespaces", &json!({"metadata": {"name": "t1"}})).await;
    s.post("/api/v1/namespaces/t1/configmaps", &cm("inside", json!({}))).await;
    s.delete("/api/v1/namespaces/t1").await;
    let (code, _) = s
        .patch("/api/v1/namespaces/t1", "application/merge-patch+json", &json!({"metadata": {"labels": {"a": "b"}}}))
        .await;
    assert!(code == StatusCode::OK || code == StatusCode::NOT_FOUND, "{code}");
    for _ in 0..100 {
        if s.get("/api/v1/namespaces/t1").await.0 == StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(s.get("/api/v1/namespaces/t1/configmaps/inside").await.0, StatusCode::NOT_FOUND, "contents went first");

    // Server-side apply of a LogicalCluster bootstraps it like a POST; root stays reserved on that path too.
    let lc = |n: &str| json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": n}});
    let (code, o) = s
        .patch(
            "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/applied?fieldManager=t",
            "application/apply-patch+yaml",
            &lc("applied"),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    assert_eq!(o["status"]["phase"], "Ready");
    assert_eq!(s.get("/clusters/applied/api/v1/namespaces/default").await.0, StatusCode::OK);
    let (code, _) = s
        .patch(
            "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/root?fieldManager=t",
            "application/apply-patch+yaml",
            &lc("root"),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);

    // Deleting a logical cluster removes every key under it, and only its keys.
    s.create_cluster("applied-b").await;
    s.post(&format!("/clusters/applied{CM}"), &cm("x", json!({}))).await;
    s.post(&format!("/clusters/applied-b{CM}"), &cm("x", json!({}))).await;
    let (code, _) = s.delete("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/applied").await;
    assert_eq!(code, StatusCode::OK);
    let store = s.running_store();
    // The purge runs in the background, resource type by resource type: wait for all of them.
    let mut left_over = Vec::new();
    for _ in 0..200 {
        left_over.clear();
        for def in kgate::resources::builtins() {
            let p = format!("{}/{}/{}/applied/", s.running_prefix(), def.storage_group(), def.plural);
            let left =
                store.range(kgate::storage::RangeRequest { prefix: p.clone(), ..Default::default() }).await.unwrap();
            if !left.kvs.is_empty() {
                left_over.push(p);
            }
        }
        if left_over.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(left_over.is_empty(), "still has keys: {left_over:?}");
    assert_eq!(s.get(&format!("/clusters/applied-b{CM}/x")).await.0, StatusCode::OK, "a-b untouched");
    assert_eq!(s.get(&format!("/clusters/applied{CM}")).await.0, StatusCode::NOT_FOUND);

    // Wildcard lists honour the namespace in the path.
    s.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await;
    s.post("/api/v1/namespaces/other/configmaps", &cm("elsewhere", json!({}))).await;
    let (_, all) = s.get(&format!("/clusters/*{CM}")).await;
    assert!(all["items"].as_array().unwrap().iter().all(|i| i["metadata"]["namespace"] == "default"), "{all}");
    s.stop().await;
}

/// The bytes of a built-in object are in its Go struct's order (TypeMeta's kind first, then metadata's
/// fields as ObjectMeta declares them), with kube's defaults (a Deployment's strategy, its template's
/// pod and container defaults), and a custom resource list's keys are sorted with `items` among
/// them, as kube-apiserver writes them, on every read path: a create's answer, a GET from the store
/// and from the watch cache, a list from either, a watch event, and a Status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_have_kubes_key_order_on_both_backends() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let raw = |path: String| {
            let (client, url) = (s.client.clone(), s.url.clone());
            async move {
                let resp = client.get(format!("{url}{path}")).send().await.unwrap();
                String::from_utf8(resp.bytes().await.unwrap().to_vec()).unwrap()
            }
        };
        const DEPLOY: &str = "/apis/apps/v1/namespaces/default/deployments";
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"b": "1", "a": "2"}},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let resp = s.client.post(format!("{}{DEPLOY}", s.url)).json(&d).send().await.unwrap();
        let created = resp.text().await.unwrap();
        let object_start =
            r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","namespace":"default","uid":""#;
        assert!(created.starts_with(object_start), "{created}");
        // ObjectMeta's order past uid, map keys sorted, and a PodSpec's fields in Go's order.
        for want in [
            r#""resourceVersion":"#,
            r#""generation":1,"creationTimestamp":"#,
            r#""labels":{"a":"2","b":"1"},"annotations":"#,
            r#""spec":{"replicas":1,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"#,
            r#""containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}]"#,
            r#""restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}"#,
            r#""strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},"revisionHistoryLimit":10,"progressDeadlineSeconds":600},"status":{}}"#,
        ] {
            assert!(created.contains(want), "{want} in {created}");
        }
        let got = raw(format!("{DEPLOY}/d")).await;
        assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), serde_json::from_str::<Value>(&created).unwrap());
        assert!(got.starts_with(object_start), "{got}");
        let cached = raw(format!("{DEPLOY}/d?resourceVersion=0")).await;
        assert!(cached.starts_with(object_start), "{cached}");
        for list in [raw(DEPLOY.to_string()).await, raw(format!("{DEPLOY}?resourceVersion=0")).await] {
            assert!(
                list.starts_with(r#"{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"#),
                "{list}"
            );
            assert!(
                list.contains(r#""items":[{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","#),
                "{list}"
            );
        }
        let resp = s.client.get(format!("{}{DEPLOY}?watch=1&resourceVersion=0", s.url)).send().await.unwrap();
        let mut stream = resp.bytes_stream();
        use futures::StreamExt;
        let first = stream.next().await.unwrap().unwrap();
        let first = String::from_utf8_lossy(&first);
        assert!(
            first.starts_with(
                r#"{"type":"ADDED","object":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"d","#
            ),
            "{first}"
        );
        drop(stream);

        let missing = raw(format!("{DEPLOY}/nope")).await;
        assert!(
            missing.starts_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"#),
            "{missing}"
        );

        // A custom resource's list: unstructured, so sorted, with items between apiVersion and kind.
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        let (code, body) = s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
        const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";
        let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"z": 1, "a": 2}});
        common::eventually(20, "the gadget to be created", || async {
            s.post(GADGETS, &g).await.0 == StatusCode::CREATED
        })
        .await;
        for list in [raw(GADGETS.to_string()).await, raw(format!("{GADGETS}?resourceVersion=0")).await] {
            assert!(list.starts_with(r#"{"apiVersion":"example.com/v1","items":[{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"annotations":"#), "{list}");
            assert!(
                list.contains(r#""spec":{"a":2,"z":1}}],"kind":"GadgetList","metadata":{"resourceVersion":"#),
                "{list}"
            );
            serde_json::from_str::<Value>(&list).expect("a list is one JSON document");
        }
        s.stop().await;
    }
}

/// A list that reads the store with a filter few objects pass grows its reads as kube's etcd store
/// does, so it costs the logarithm of the objects it passes over in store reads, not half their number.
#[tokio::test]
async fn a_selective_list_from_the_store_doubles_its_reads() {
    let s = TestServer::start(Backend::Embedded).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let created = futures::future::join_all((0..1000).map(|i| {
        let s = &s;
        async move { s.post(cms, &json!({"metadata": {"name": format!("cm-{i:04}")}})).await.0 }
    }))
    .await;
    assert!(created.iter().all(|c| *c == StatusCode::CREATED));
    let (_, list) = s.get(cms).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let reads = r#"kgate_store_request_duration_seconds_count{operation="range"}"#;
    let before = s.metric(reads).await;
    let (code, page) =
        s.get(&format!("{cms}?limit=1&labelSelector=x%3Dnone&resourceVersion={rv}&resourceVersionMatch=Exact")).await;
    assert_eq!(code, StatusCode::OK, "{page}");
    assert_eq!(page["items"], json!([]));
    let spent = s.metric(reads).await - before;
    // 2, 4, 8, ... 1,024 keys: ten reads where two keys a read took five hundred.
    assert!((1.0..=16.0).contains(&spent), "{spent} store reads for 1,000 objects");
    s.stop().await;
}

/// Core `v1` and `events.k8s.io/v1` Events are one resource, as in kube: written through either API,
/// read, listed (by field too) and watched through both, each in its own fields; `kubectl events`
/// (which reads core) shows what a recorder wrote through events.k8s.io.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn core_and_events_k8s_io_events_are_one_resource() {
    let s = TestServer::start(Backend::Embedded).await;
    let core = "/api/v1/namespaces/default/events";
    let new = "/apis/events.k8s.io/v1/namespaces/default/events";
    let mut from_new = s.watch(&format!("{new}?watch=true")).await;
    let mut from_core = s.watch(&format!("{core}?watch=true")).await;
    let recorded = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "web.1"},
        "eventTime": "2026-12-07T10:00:00.000000Z",
        "reportingController": "example.com/operator", "reportingInstance": "operator-0",
        "action": "Reconcile", "reason": "Scaled", "note": "scaled to 3", "type": "Normal",
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"},
    });
    let (code, made) = s.post(new, &recorded).await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    assert_eq!(made["note"], "scaled to 3", "{made}");
    let (code, as_core) = s.get(&format!("{core}/web.1")).await;
    assert_eq!(code, StatusCode::OK, "an events.k8s.io Event reads through core: {as_core}");
    assert_eq!(as_core["apiVersion"], "v1");
    assert_eq!(as_core["message"], "scaled to 3");
    assert_eq!(as_core["involvedObject"]["name"], "web");
    assert_eq!(as_core["reportingComponent"], "example.com/operator");
    assert_eq!(as_core["metadata"]["resourceVersion"], made["metadata"]["resourceVersion"]);
    assert!(as_core.get("note").is_none() && as_core.get("regarding").is_none(), "{as_core}");

    let legacy = json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "db.1"},
        "involvedObject": {"kind": "Pod", "name": "db-0", "namespace": "default"},
        "reason": "Started", "message": "started container", "type": "Warning",
        "source": {"component": "kubelet", "host": "node-1"}, "count": 2,
        "firstTimestamp": "2026-12-07T10:00:00Z", "lastTimestamp": "2026-12-07T10:01:00Z",
    });
    assert_eq!(s.post(core, &legacy).await.0, StatusCode::CREATED);
    let (code, as_new) = s.get(&format!("{new}/db.1")).await;
    assert_eq!(code, StatusCode::OK, "{as_new}");
    assert_eq!(as_new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(as_new["note"], "started container");
    assert_eq!(as_new["regarding"]["name"], "db-0");
    assert_eq!(as_new["deprecatedSource"]["component"], "kubelet");
    assert_eq!(as_new["deprecatedCount"], 2);
    assert_eq!(as_new["deprecatedLastTimestamp"], "2026-12-07T10:01:00Z");

    // Lists through both, from the store and from the cache, and by each API's field names.
    for rv in ["", "&resourceVersion=0"] {
        let names = |list: &Value| -> Vec<String> {
            let mut n: Vec<String> = list["items"]
                .as_array()
                .unwrap_or_else(|| panic!("{list}"))
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(&s.get(&format!("{core}?limit=500{rv}")).await.1), ["db.1", "web.1"]);
        assert_eq!(names(&s.get(&format!("{new}?limit=500{rv}")).await.1), ["db.1", "web.1"]);
        let by_regarding = s.get(&format!("{new}?fieldSelector=regarding.name%3Dweb{rv}")).await.1;
        assert_eq!(names(&by_regarding), ["web.1"], "{by_regarding}");
        let by_involved = s.get(&format!("{core}?fieldSelector=involvedObject.name%3Ddb-0{rv}")).await.1;
        assert_eq!(names(&by_involved), ["db.1"], "{by_involved}");
        let by_controller =
            s.get(&format!("{new}?fieldSelector=reportingController%3Dexample.com%2Foperator{rv}")).await.1;
        assert_eq!(names(&by_controller), ["web.1"], "{by_controller}");
    }
    // Watches of both APIs see both writes, each in its own form.
    for (watch, field) in [(&mut from_new, "note"), (&mut from_core, "message")] {
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let ev =
                tokio::time::timeout(std::time::Duration::from_secs(5), watch.recv()).await.expect("an event").unwrap();
            seen.push(ev["object"][field].as_str().unwrap_or_default().to_string());
        }
        assert_eq!(seen, ["scaled to 3", "started container"], "{field}");
    }
    let (ok, out, err) = common::kubectl(&s.kubeconfig(), &["events", "-n", "default"]);
    assert!(ok, "{err}");
    assert!(out.contains("scaled to 3") && out.contains("Scaled"), "kubectl events shows the recorder's event: {out}");
    // Deleted through one API, gone from both.
    assert_eq!(s.delete(&format!("{core}/web.1")).await.0, StatusCode::OK);
    assert_eq!(s.get(&format!("{new}/web.1")).await.0, StatusCode::NOT_FOUND);
    s.stop().await;
}
