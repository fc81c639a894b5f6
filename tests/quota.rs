//! ResourceQuota object counts enforced as kube-apiserver's quota admission enforces them, with
//! `status.used` kept as kube-controller-manager keeps it: through kubectl, on both stores, and under
//! concurrent creates.

mod common;

use common::{kubectl, kubectl_ok, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn used(s: &TestServer, path: &str) -> Value {
    s.get(path).await.1["status"]["used"].clone()
}

async fn quotas_count_and_refuse(backend: Backend) {
    let s = TestServer::start(backend).await;
    s.create_cluster("team-a").await;
    let kc = s.kubeconfig_for("team-a");
    let run = |args: &'static [&'static str]| {
        let kc = kc.clone();
        tokio::task::spawn_blocking(move || kubectl(&kc, args))
    };
    let ok = |args: &'static [&'static str]| {
        let kc = kc.clone();
        tokio::task::spawn_blocking(move || kubectl_ok(&kc, args))
    };
    ok(&["create", "namespace", "q"]).await.unwrap();
    ok(&["create", "quota", "objs", "-n", "q", "--hard=count/configmaps=3,secrets=1,count/deployments.apps=1"])
        .await
        .unwrap();
    let quota = "/clusters/team-a/api/v1/namespaces/q/resourcequotas/objs";
    // Counted as the quota controller counts: kube-root-ca.crt is a ConfigMap of the namespace.
    assert_eq!(
        used(&s, quota).await,
        json!({"count/configmaps": "1", "secrets": "0", "count/deployments.apps": "0"}),
        "{}",
        s.get(quota).await.1
    );
    ok(&["create", "configmap", "a", "-n", "q"]).await.unwrap();
    ok(&["create", "configmap", "b", "-n", "q"]).await.unwrap();
    let (made, _, err) = run(&["create", "configmap", "c", "-n", "q"]).await.unwrap();
    assert!(!made);
    assert!(
        err.contains(
            "configmaps \"c\" is forbidden: exceeded quota: objs, requested: count/configmaps=1, used: count/configmaps=3, limited: count/configmaps=3"
        ),
        "{err}"
    );
    // A dry run is judged the same and charges nothing.
    let (made, _, err) = run(&["create", "configmap", "c", "-n", "q", "--dry-run=server"]).await.unwrap();
    assert!(!made && err.contains("exceeded quota"), "{err}");
    assert_eq!(used(&s, quota).await["count/configmaps"], "3");
    // A delete gives its count back at once.
    ok(&["delete", "configmap", "a", "-n", "q"]).await.unwrap();
    assert_eq!(used(&s, quota).await["count/configmaps"], "2");
    // A create charged and then refused for another reason (the name is taken) gives its charge back.
    let (made, _, err) = run(&["create", "configmap", "b", "-n", "q"]).await.unwrap();
    assert!(!made && err.contains("already exists"), "{err}");
    assert_eq!(used(&s, quota).await["count/configmaps"], "2");
    ok(&["create", "configmap", "c", "-n", "q"]).await.unwrap();
    assert_eq!(used(&s, quota).await["count/configmaps"], "3");
    // kube-root-ca.crt deleted is published again at once, and keeps its place in the count.
    ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "q"]).await.unwrap();
    assert_eq!(used(&s, quota).await["count/configmaps"], "3");
    let (made, _, _) = run(&["create", "configmap", "d", "-n", "q"]).await.unwrap();
    assert!(!made, "the limit still holds");
    // Other resources and other namespaces are not counted.
    ok(&["create", "configmap", "free", "-n", "default"]).await.unwrap();
    ok(&["create", "serviceaccount", "sa", "-n", "q"]).await.unwrap();

    // Concurrent creates never pass the limit together: one secret of ten.
    let secrets = "/clusters/team-a/api/v1/namespaces/q/secrets";
    let creates = (0..10).map(|i| {
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("s{i}")}});
        let (client, url) = (s.client.clone(), format!("{}{secrets}", s.url));
        tokio::spawn(async move { client.post(url).json(&body).send().await.unwrap().status() })
    });
    let codes: Vec<StatusCode> = futures::future::join_all(creates).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(codes.iter().filter(|c| **c == StatusCode::CREATED).count(), 1, "{codes:?}");
    assert!(codes.iter().all(|c| *c == StatusCode::CREATED || *c == StatusCode::FORBIDDEN), "{codes:?}");
    assert_eq!(used(&s, quota).await["secrets"], "1");

    // Raising the limit is counted afresh, as the controller recounts a changed quota.
    ok(&["patch", "quota", "objs", "-n", "q", "--type=merge", "-p", r#"{"spec":{"hard":{"secrets":"5"}}}"#])
        .await
        .unwrap();
    let (_, q) = s.get(quota).await;
    assert_eq!((&q["status"]["hard"]["secrets"], &q["status"]["used"]["secrets"]), (&json!("5"), &json!("1")), "{q}");
    ok(&["create", "secret", "generic", "more", "-n", "q"]).await.unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_count_and_refuse_on_the_embedded_store() {
    quotas_count_and_refuse(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_count_and_refuse_on_etcd() {
    quotas_count_and_refuse(Backend::Etcd).await;
}

/// A custom resource is counted under `count/<plural>.<group>`, as kube counts them.
#[tokio::test]
async fn custom_resources_are_counted_by_their_group() {
    let s = TestServer::start(Backend::Embedded).await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    assert_eq!(s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await.0, StatusCode::CREATED);
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "w"},
        "spec": {"hard": {"count/widgets.example.com": "1"}}});
    assert_eq!(s.post("/api/v1/namespaces/default/resourcequotas", &quota).await.0, StatusCode::CREATED);
    let widget = |n: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": n}});
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(s.post(path, &widget("one")).await.0, StatusCode::CREATED);
    let (code, err) = s.post(path, &widget("two")).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{err}");
    assert_eq!((&err["reason"], &err["details"]["name"]), (&json!("Forbidden"), &json!("two")), "{err}");
    // The CRD's deletion takes its objects without a delete each; the quota counts them again.
    let (code, _) = s.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").await;
    assert_eq!(code, StatusCode::OK);
    common::eventually(30, "the deleted CRD's objects to leave the quota", || async {
        used(&s, "/api/v1/namespaces/default/resourcequotas/w").await["count/widgets.example.com"] == "0"
    })
    .await;
    s.stop().await;
}

/// A quota written through one replica binds creates through another on the same etcd: each replica's
/// index of namespaces with quotas follows the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_binds_every_replica() {
    let one = TestServer::start(Backend::Etcd).await;
    let two = TestServer::start_in(Backend::Etcd, tempfile::tempdir().unwrap(), one.prefix.clone()).await;
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-secret"},
        "spec": {"hard": {"secrets": "1"}}});
    assert_eq!(one.post("/api/v1/namespaces/default/resourcequotas", &quota).await.0, StatusCode::CREATED);
    let secret = |n: usize| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("s{n}")}});
    let mut made = 0;
    common::eventually(10, "the second replica to refuse past the quota", || {
        made += 1;
        let body = secret(made);
        let two = &two;
        async move { two.post("/api/v1/namespaces/default/secrets", &body).await.0 == StatusCode::FORBIDDEN }
    })
    .await;
    let (_, q) = one.get("/api/v1/namespaces/default/resourcequotas/one-secret").await;
    assert_eq!(q["status"]["used"]["secrets"], "1", "{q}");
    one.stop().await;
    two.stop().await;
}

/// Counts that drifted (objects written or removed around admission, as a replica killed between a
/// delete and its release leaves them) come right at the periodic resync, as kube's quota controller
/// brings them, on both stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resync_counts_every_quota_afresh() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cms"},
            "spec": {"hard": {"count/configmaps": "10"}}});
        assert_eq!(s.post("/api/v1/namespaces/default/resourcequotas", &quota).await.0, StatusCode::CREATED);
        let used = || async {
            let (_, q) = s.get("/api/v1/namespaces/default/resourcequotas/cms").await;
            q["status"]["used"]["count/configmaps"].as_str().unwrap_or_default().to_string()
        };
        let before: u64 = used().await.parse().unwrap();
        let store = s.running_store();
        let key =
            |name: &str| kgate::storage::keys::object(&s.prefix, "core", "configmaps", "root", Some("default"), name);
        let sneaky =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sneaky", "namespace": "default"}});
        store.create(&key("sneaky"), serde_json::to_vec(&sneaky).unwrap()).await.unwrap();
        assert_eq!(used().await, before.to_string(), "written around admission, not charged");
        let registry = kgate::registry::Registry::new(store.clone(), s.prefix.clone());
        assert!(registry.resync_quotas().await.unwrap() >= 1);
        assert_eq!(used().await, (before + 1).to_string(), "counted at the resync");
        store.delete(&key("sneaky"), None).await.unwrap();
        store.delete(&key("kube-root-ca.crt"), None).await.unwrap();
        registry.resync_quotas().await.unwrap();
        assert_eq!(used().await, (before - 1).to_string());
        drop((registry, store)); // the server's stop waits for every handle on its store
        s.stop().await;
    }
}

/// `pods` counts the pods that still hold resources, as kube's pod evaluator does, while `count/pods`
/// counts every pod: a pod that finishes gives its `pods` count back at once and makes room for
/// another; deleting a finished pod gives back only what it still held. On both stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_pods_leave_the_pods_count() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let quotas = "/api/v1/namespaces/default/resourcequotas";
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"},
            "spec": {"hard": {"pods": "2", "count/pods": "10"}}});
        assert_eq!(s.post(quotas, &quota).await.0, StatusCode::CREATED);
        let pods = "/api/v1/namespaces/default/pods";
        let pod = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        };
        for name in ["a", "b"] {
            assert_eq!(s.post(pods, &pod(name)).await.0, StatusCode::CREATED, "{backend:?}");
        }
        let (code, err) = s.post(pods, &pod("c")).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{backend:?}: {err}");
        assert!(err["message"].as_str().unwrap().contains("exceeded quota: pods, requested: pods=1"), "{err}");
        // `a` finishes, as its kubelet would report it.
        let (_, mut a) = s.get(&format!("{pods}/a")).await;
        a["status"]["phase"] = json!("Succeeded");
        assert_eq!(s.put(&format!("{pods}/a/status"), &a).await.0, StatusCode::OK);
        let used = || async { s.get(&format!("{quotas}/pods")).await.1["status"]["used"].clone() };
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "2"}), "{backend:?}");
        assert_eq!(s.post(pods, &pod("c")).await.0, StatusCode::CREATED, "{backend:?}: room made by the finished pod");
        assert_eq!(used().await, json!({"pods": "2", "count/pods": "3"}));
        // Deleting the finished pod gives back only its `count/pods`; a live one gives back both.
        assert_eq!(s.delete(&format!("{pods}/a")).await.0, StatusCode::OK);
        assert_eq!(used().await, json!({"pods": "2", "count/pods": "2"}), "{backend:?}");
        assert_eq!(s.delete(&format!("{pods}/b")).await.0, StatusCode::OK);
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "1"}), "{backend:?}");
        // Set back to running (the quota controller counts what is so): counted again.
        let status = |phase: &'static str| {
            let s = &s;
            async move {
                let (_, mut c) = s.get(&format!("{pods}/c")).await;
                c["status"]["phase"] = json!(phase);
                assert_eq!(s.put(&format!("{pods}/c/status"), &c).await.0, StatusCode::OK);
            }
        };
        status("Failed").await;
        assert_eq!(used().await, json!({"pods": "0", "count/pods": "1"}), "{backend:?}");
        status("Running").await;
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "1"}), "{backend:?}");
        // A pod held by a finalizer holds nothing once marked for deletion (no grace here), and
        // leaves `count/pods` when it goes.
        let mut held = pod("f");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        assert_eq!(s.post(pods, &held).await.0, StatusCode::CREATED);
        assert_eq!(used().await, json!({"pods": "2", "count/pods": "2"}), "{backend:?}");
        assert_eq!(s.delete(&format!("{pods}/f")).await.0, StatusCode::OK);
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "2"}), "{backend:?}: marked, not yet gone");
        let release = json!({"metadata": {"finalizers": null}});
        assert_eq!(s.patch(&format!("{pods}/f"), "application/merge-patch+json", &release).await.0, StatusCode::OK);
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "1"}), "{backend:?}");
        // A fresh count agrees with the running one.
        let store = s.running_store();
        let registry = kgate::registry::Registry::new(store.clone(), s.prefix.clone());
        registry.resync_quotas().await.unwrap();
        assert_eq!(used().await, json!({"pods": "1", "count/pods": "1"}), "{backend:?}");
        drop((registry, store));
        s.stop().await;
    }
}
