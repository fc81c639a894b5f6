//! Tenants: `kgate cluster` and `kgate kubeconfig` end to end with kubectl, RBAC roles, and the
//! isolation of ServiceAccount tokens to their own logical cluster; the LogicalCluster lifecycle
//! (Initializing, Ready, Terminating, finalizer-driven purge, resumed after a restart) and the tenants
//! directory applied at start.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{eventually, keys_of, kubectl, kubectl_ok, token_of, Backend, TestServer};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

const LC: &str = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";
const PURGE: &str = "tenancy.kgate.dev/purge";

fn lc(name: &str) -> Value {
    json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}})
}

fn ready_condition(obj: &Value) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Watch LogicalClusters from now on; every event, decoded.
async fn watch_logical_clusters(s: &TestServer) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let (_, list) = s.get(LC).await;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    s.watch(&format!("{LC}?watch=true&resourceVersion={rv}")).await
}

/// The next event about `name` (bookmarks and other objects skipped): (type, object).
async fn next_event(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>, name: &str) -> (String, Value) {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a watch event in time")
            .expect("the watch is open");
        if ev["type"] != "BOOKMARK" && ev["object"]["metadata"]["name"] == name {
            return (ev["type"].as_str().unwrap().to_string(), ev["object"].clone());
        }
    }
}

fn kgate(admin_kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kgate"))
        .args(args)
        .arg("--kubeconfig")
        .arg(admin_kubeconfig)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn printed_kubeconfig(s: &TestServer, cluster: &str, sa: &str, role: &str) -> PathBuf {
    let path = s.role_kubeconfig(cluster, sa, role);
    let out = std::fs::read_to_string(&path).unwrap();
    assert!(out.contains(&format!("/clusters/{cluster}")) && out.contains("token:"), "{out}");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_teams_with_printed_kubeconfigs() {
    let s = TestServer::start(Backend::Embedded).await;
    let admin = s.kubeconfig();
    let (a2, a3) = (admin.clone(), admin.clone());
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    tokio::task::spawn_blocking(move || {
        let s = s2;
        for team in ["team-a", "team-b"] {
            let (ok, out, err) = kgate(&a2, &["cluster", "create", team]);
            assert!(ok && out.contains("created"), "{out}{err}");
        }
        let (_, list, _) = kgate(&a3, &["cluster", "list"]);
        assert!(list.contains("team-a") && list.contains("team-b") && list.contains("Ready"), "{list}");

        let a_admin = printed_kubeconfig(&s, "team-a", "owner", "admin");
        let b_admin = printed_kubeconfig(&s, "team-b", "owner", "admin");
        // Same names in both teams; each sees only its own.
        kubectl_ok(&a_admin, &["create", "cm", "shared-name", "--from-literal=team=a"]);
        kubectl_ok(&b_admin, &["create", "cm", "shared-name", "--from-literal=team=b"]);
        assert_eq!(kubectl_ok(&a_admin, &["get", "cm", "shared-name", "-o", "jsonpath={.data.team}"]), "a");
        assert_eq!(kubectl_ok(&b_admin, &["get", "cm", "shared-name", "-o", "jsonpath={.data.team}"]), "b");
        kubectl_ok(&a_admin, &["create", "ns", "apps"]);
        assert!(kubectl_ok(&a_admin, &["auth", "whoami"]).contains("system:serviceaccount:default:owner"));
        assert_eq!(kubectl_ok(&a_admin, &["auth", "can-i", "create", "namespaces"]).trim(), "yes");

        // A view kubeconfig reads but cannot write, with kube's Forbidden wording.
        let a_view = printed_kubeconfig(&s, "team-a", "viewer", "view");
        assert_eq!(kubectl_ok(&a_view, &["get", "cm", "shared-name", "-o", "jsonpath={.data.team}"]), "a");
        let (ok, _, err) = kubectl(&a_view, &["create", "cm", "nope"]);
        assert!(!ok && err.contains("configmaps is forbidden: User \"system:serviceaccount:default:viewer\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""), "{err}");
        let (ok, out, _) = kubectl(&a_view, &["auth", "can-i", "create", "configmaps"]);
        assert!(!ok && out.trim() == "no", "{out}");
        let (ok, _, _) = kubectl(&a_view, &["get", "secrets"]);
        assert!(!ok, "view cannot read secrets");

        // edit writes workloads but not RBAC.
        let a_edit = printed_kubeconfig(&s, "team-a", "editor", "edit");
        kubectl_ok(&a_edit, &["create", "deployment", "web", "--image=nginx"]);
        let (ok, _, err) = kubectl(&a_edit, &["create", "rolebinding", "x", "--clusterrole=view", "--user=bob"]);
        assert!(!ok && err.contains("forbidden"), "{err}");

        // kubectl create token, in a team's cluster.
        let token = kubectl_ok(&a_admin, &["create", "token", "viewer", "--duration=15m"]);
        assert!(token.trim().split('.').count() == 3, "{token}");

        // The team's kubeconfig cannot reach root's tenancy API.
        let (ok, _, err) = kubectl(&a_admin, &["get", "--raw", "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters"]);
        assert!(!ok, "{err}");

        let (ok, out, err) = kgate(&a2, &["cluster", "delete", "team-b", "--wait"]);
        assert!(ok && out.contains("deleted"), "{out}{err}");
        let (ok, _, _) = kubectl(&b_admin, &["get", "ns"]);
        assert!(!ok, "a deleted cluster's kubeconfig no longer works");
        // --wait returned once the purge had finished and the LogicalCluster was gone.
        let (ok, _, err) = kubectl(&a3, &["get", "logicalcluster", "team-b"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_works_only_in_its_own_cluster() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    s.create_cluster("team-b").await;
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let kc = tokio::task::spawn_blocking(move || printed_kubeconfig(&s2, "team-a", "owner", "admin")).await.unwrap();
    let token = token_of(&kc);
    let bearer = format!("Bearer {token}");
    let call = |path: String, header: Option<&'static str>| {
        let (s, bearer) = (s.clone(), bearer.clone());
        async move {
            let mut r = s.anonymous.get(format!("{}{path}", s.url)).header("authorization", bearer);
            if let Some(h) = header {
                r = r.header("X-Kubernetes-Cluster", h);
            }
            r.send().await.unwrap().status()
        }
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(call(format!("/clusters/team-a{cms}"), None).await, StatusCode::OK);
    assert_eq!(call(cms.to_string(), Some("team-a")).await, StatusCode::OK, "by header");
    for (path, header) in [
        (format!("/clusters/team-b{cms}"), None),
        (cms.to_string(), Some("team-b")),
        (cms.to_string(), None),
        (format!("/clusters/*{cms}"), None),
        (format!("/clusters/team-a{cms}"), Some("team-b")),
        (format!("/clusters/TEAM-A{cms}"), None),
        ("/clusters/team-b/api/v1/namespaces/default/configmaps/x".to_string(), None),
    ] {
        let code = call(path.clone(), header).await;
        assert!(code == StatusCode::UNAUTHORIZED || code == StatusCode::BAD_REQUEST, "{path} {header:?}: {code}");
        assert_ne!(code, StatusCode::OK);
    }
    // Writes with the token into another cluster change nothing.
    let r = s
        .anonymous
        .post(format!("{}/clusters/team-b{cms}", s.url))
        .header("authorization", &bearer)
        .json(&json!({"metadata": {"name": "intruder"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(s.get(&format!("/clusters/team-b{cms}/intruder")).await.0, StatusCode::NOT_FOUND);

    // An expired token (signed with the real key) and a garbage token are 401.
    let key = s.running_store().get(&kgate::token::signing_key_path(&s.running_prefix())).await.unwrap().unwrap().value;
    let signer = kgate::token::Signer::new(key);
    let mut claims = signer.verify(&token, 0).unwrap();
    claims.exp = chrono::Utc::now().timestamp() - 1;
    let expired = format!("Bearer {}", signer.sign(&claims));
    let r = s
        .anonymous
        .get(format!("{}/clusters/team-a{cms}", s.url))
        .header("authorization", expired)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = s
        .anonymous
        .get(format!("{}/clusters/team-a{cms}", s.url))
        .header("authorization", "Bearer x.y.z")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Deleting the ServiceAccount invalidates its tokens, and re-creating it does not revive them.
    s.delete("/clusters/team-a/api/v1/namespaces/default/serviceaccounts/owner").await;
    assert_eq!(call(format!("/clusters/team-a{cms}"), None).await, StatusCode::UNAUTHORIZED);
    s.post("/clusters/team-a/api/v1/namespaces/default/serviceaccounts", &json!({"metadata": {"name": "owner"}})).await;
    assert_eq!(call(format!("/clusters/team-a{cms}"), None).await, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logical_cluster_is_initializing_then_ready_then_terminating_until_purged() {
    let s = TestServer::start(Backend::Embedded).await;
    let store = s.running_store();
    let mut events = watch_logical_clusters(&s).await;

    let (code, created) = s.post(LC, &lc("life")).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"]["phase"], "Ready", "a create answers once the cluster serves");
    assert_eq!(created["metadata"]["finalizers"], json!([PURGE]));
    let (kind, obj) = next_event(&mut events, "life").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("ADDED", &json!("Initializing")), "{obj}");
    assert_eq!(ready_condition(&obj)["status"], "False");
    assert_eq!(obj["metadata"]["finalizers"], json!([PURGE]), "the finalizer comes with the create itself");
    let (kind, obj) = next_event(&mut events, "life").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("MODIFIED", &json!("Ready")), "{obj}");
    assert_eq!(ready_condition(&obj)["status"], "True");

    // Objects of several kinds and namespaces.
    let c = "/clusters/life";
    for (path, body) in [
        ("/api/v1/namespaces", json!({"metadata": {"name": "apps"}})),
        ("/api/v1/namespaces/apps/configmaps", json!({"metadata": {"name": "cm"}})),
        ("/api/v1/namespaces/default/secrets", json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/apps/roles", json!({"metadata": {"name": "r"}, "rules": []})),
    ] {
        let (code, b) = s.post(&format!("{c}{path}"), &body).await;
        assert_eq!(code, StatusCode::CREATED, "{path}: {b}");
    }
    assert!(keys_of(&*store, &s.prefix, "life").await.len() > 10);

    // Someone else's finalizer keeps the object after the purge, so the terminating state lasts as long
    // as this test needs it.
    let hold = json!({"metadata": {"finalizers": [PURGE, "example.com/hold"]}});
    let (code, b) = s.patch(&format!("{LC}/life"), "application/merge-patch+json", &hold).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    assert_eq!(next_event(&mut events, "life").await.0, "MODIFIED");

    // A dry run of the DELETE changes nothing: the cluster goes on serving.
    let (code, dry) = s.req(reqwest::Method::DELETE, &format!("{LC}/life?dryRun=All"), None, None).await;
    assert_eq!(code, StatusCode::OK, "{dry}");
    assert!(dry["metadata"]["deletionTimestamp"].is_string(), "what the DELETE would do: {dry}");
    assert_eq!(s.get(&format!("{c}/api/v1/namespaces")).await.0, StatusCode::OK, "a dry run leaves it serving");

    let (code, deleted) = s.delete(&format!("{LC}/life")).await;
    assert_eq!(code, StatusCode::OK, "{deleted}");
    assert!(deleted["metadata"]["deletionTimestamp"].is_string(), "{deleted}");
    assert_eq!(deleted["status"]["phase"], "Terminating");
    let cond = ready_condition(&deleted);
    assert_eq!((&cond["status"], &cond["reason"]), (&json!("False"), &json!("Terminating")), "{deleted}");
    // The cluster answers 404 from the moment of the DELETE.
    let (code, st) = s.get(&format!("{c}/api/v1/namespaces")).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{st}");
    // Its name stays taken while the object is there.
    let (code, st) = s.post(LC, &lc("life")).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::CONFLICT, Some("AlreadyExists")), "{st}");
    assert!(st["message"].as_str().unwrap().starts_with("object is being deleted: "), "{st}");
    let (kind, obj) = next_event(&mut events, "life").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("MODIFIED", &json!("Terminating")));

    // The purge empties the cluster, then removes its own finalizer and nothing else.
    let (kind, obj) = next_event(&mut events, "life").await;
    assert_eq!((kind.as_str(), &obj["metadata"]["finalizers"]), ("MODIFIED", &json!(["example.com/hold"])), "{obj}");
    assert_eq!(obj["status"]["phase"], "Terminating");
    assert_eq!(keys_of(&*store, &s.prefix, "life").await, vec![], "every key of the cluster is gone");
    assert_eq!(s.post(LC, &lc("life")).await.0, StatusCode::CONFLICT);

    // The last finalizer released, the object goes and the name is free: a new cluster starts empty.
    let (code, b) =
        s.patch(&format!("{LC}/life"), "application/merge-patch+json", &json!({"metadata": {"finalizers": []}})).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    assert_eq!(next_event(&mut events, "life").await.0, "DELETED");
    assert_eq!(s.get(&format!("{LC}/life")).await.0, StatusCode::NOT_FOUND);
    let (code, again) = s.post(LC, &lc("life")).await;
    assert_eq!((code, &again["status"]["phase"]), (StatusCode::CREATED, &json!("Ready")), "{again}");
    assert_eq!(s.get(&format!("{c}/api/v1/namespaces/default")).await.0, StatusCode::OK);
    assert_eq!(s.get(&format!("{c}/api/v1/namespaces/apps")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(s.get(&format!("{c}/api/v1/namespaces/default/secrets/s")).await.0, StatusCode::NOT_FOUND);
    s.stop().await;
}

/// A purge deletes what one pass read in one transaction and stops there (the pass after the
/// LogicalCluster's release catches what raced it); keys past what one transaction or one page takes
/// are read and deleted on until none is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_leaves_no_key_whether_it_takes_one_transaction_or_many_pages() {
    let s = TestServer::start(Backend::Etcd).await;
    let store = s.running_store();
    let registry = kgate::registry::Registry::new(store.clone(), s.prefix.clone());
    let prefix = |name: &str| format!("{}/t/{name}/", s.prefix);
    let (small, mid, big) = (prefix("small"), prefix("mid"), prefix("big"));
    for (at, n) in [(&small, 3), (&mid, 100), (&big, 1_234)] {
        let keys: Vec<(String, Vec<u8>)> = (0..n).map(|i| (format!("{at}{i:04}"), b"{}".to_vec())).collect();
        for chunk in keys.chunks(100) {
            assert!(store.create_all(chunk, None).await.unwrap().is_some());
        }
    }
    for prefixes in [vec![small.clone(), mid.clone()], vec![big.clone()]] {
        let sweep = registry
            .delete_prefixes(&prefixes, kgate::registry::Finalizers::Ignore, || async { Ok(true) })
            .await
            .unwrap();
        assert_eq!(sweep, kgate::registry::Sweep::Empty, "{prefixes:?}");
    }
    for at in [small, mid, big] {
        let left = store.range(kgate::storage::RangeRequest { prefix: at.clone(), ..Default::default() }).await;
        assert_eq!(left.unwrap().kvs.len(), 0, "keys left under {at}");
    }
    s.stop().await;
}

/// A custom resource rewritten while a purge pass deletes its CRD is not lost with the CRD: the
/// purge's later passes still sweep the prefixes an earlier pass found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_finds_a_custom_resource_whose_crd_went_in_an_earlier_pass() {
    let s = TestServer::start(Backend::Etcd).await;
    let store = s.running_store();
    let registry = kgate::registry::Registry::new(store.clone(), s.prefix.clone());
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    let crds = kgate::crd::definitions(&registry, "gone");
    store.create(&format!("{crds}widgets.example.com"), serde_json::to_vec(&crd).unwrap()).await.unwrap();
    let widget = format!("{}/example.com/widgets/gone/default/w", s.prefix);
    store.create(&widget, br#"{"kind":"Widget"}"#.to_vec()).await.unwrap();
    // Rewritten after the first pass read it: that pass's deletes of it fail, its CRD's succeed.
    let rewrites = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sweep = registry
        .delete_cluster_prefixes("gone", std::slice::from_ref(&crds), || {
            let (store, widget, rewrites) = (store.clone(), widget.clone(), rewrites.clone());
            async move {
                if rewrites.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    let kv = store.get(&widget).await.unwrap().expect("the widget");
                    store.update(&widget, br#"{"kind":"Widget","v":2}"#.to_vec(), kv.mod_revision).await.unwrap();
                }
                Ok(true)
            }
        })
        .await
        .unwrap();
    assert_eq!(sweep, kgate::registry::Sweep::Empty);
    assert!(rewrites.load(std::sync::atomic::Ordering::SeqCst) > 0, "the first pass asked before deleting");
    assert!(store.get(&format!("{crds}widgets.example.com")).await.unwrap().is_none(), "the CRD went");
    assert!(store.get(&widget).await.unwrap().is_none(), "the widget went too");
    s.stop().await;
}

/// A replica that still takes a cluster for live while its purge runs cannot put a cluster-wide
/// object into it once the purge has deleted its `kube-system` namespace: such creates are stored under
/// that namespace's revision, so the purge's pass that finds the cluster empty is its last, even if the
/// leader dies before the pass after its release. Namespaced creates are held by their namespace. A
/// tenant cannot stop its own creates by marking `kube-system` Terminating: kube refuses that status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_purge_deleted_kube_system_nothing_cluster_wide_can_be_created() {
    let s = TestServer::start(Backend::Etcd).await;
    let (store, prefix) = (s.running_store(), s.prefix.clone());
    let role = |name: &str| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}});
    let role_key =
        |cluster: &str, name: &str| format!("{prefix}/rbac.authorization.k8s.io/clusterroles/{cluster}/{name}");
    // A replica whose directory still holds a cluster the purge emptied and released: its
    // LogicalCluster and `kube-system` are gone.
    let registry = kgate::registry::Registry::new(store.clone(), prefix.clone());
    let def = kgate::resources::find("rbac.authorization.k8s.io", "v1", "clusterroles").unwrap();
    let admin = kgate::auth::Identity::from_cert("admin".into(), vec!["system:masters".into()]);
    let ctx = kgate::registry::Ctx {
        cluster: "released",
        def: &def,
        namespace: None,
        user: &admin,
        user_agent: None,
        admit: None,
    };
    let opts = kgate::registry::WriteOptions {
        dry_run: false,
        field_manager: None,
        field_validation: kgate::registry::FieldValidation::Strict,
        force: None,
    };
    let refused = registry.create(&ctx, role("late"), &opts).await.unwrap_err();
    assert_eq!(refused.code, 403, "{refused:?}");
    assert!(refused.message.contains("logical cluster \"released\" because it is being deleted"), "{refused:?}");
    assert!(store.get(&role_key("released", "late")).await.unwrap().is_none());
    // A live cluster without its `kube-system` (a bootstrap still running) is asked to retry instead.
    s.create_cluster("young").await;
    let roles = "/clusters/young/apis/rbac.authorization.k8s.io/v1/clusterroles";
    // One create first, so this replica remembers `kube-system` as it was: the store still refuses.
    let (status, body) = s.post(roles, &role("first")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let anchor = format!("{prefix}/core/namespaces/young/kube-system");
    let kv = store.get(&anchor).await.unwrap().expect("kube-system of a bootstrapped cluster");
    store.delete(&anchor, Some(kv.mod_revision)).await.unwrap();
    let (status, body) = s.post(roles, &role("r")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body["message"].as_str().unwrap().contains("still being initialized"), "{body}");
    assert!(store.get(&role_key("young", "r")).await.unwrap().is_none());
    // A tenant cannot mark a live namespace Terminating (kube's namespace status check), which would
    // stop every create in it; a status without a phase is Active, as kube defaults it.
    s.create_cluster("staying").await;
    let status_path = "/clusters/staying/api/v1/namespaces/kube-system/status";
    let (_, mut ns) = s.get("/clusters/staying/api/v1/namespaces/kube-system").await;
    ns["status"]["phase"] = json!("Terminating");
    let (status, body) = s.put(status_path, &ns).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["details"]["causes"][0]["field"], "status.Phase", "{body}");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty",
        "{body}"
    );
    ns["status"] = json!({});
    let (status, body) = s.put(status_path, &ns).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["phase"], "Active", "{body}");
    let (status, body) = s.post("/clusters/staying/apis/rbac.authorization.k8s.io/v1/clusterroles", &role("r")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Root, never purged, takes cluster-wide objects as ever.
    let (status, body) = s.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", &role("in-root")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    s.stop().await;
}

/// `n` ConfigMaps `cm-00000`... in `cluster`'s default namespace, written to the store directly: the
/// same keys the API writes, thousands of times faster.
async fn store_configmaps(store: &std::sync::Arc<dyn kgate::storage::Store>, prefix: &str, cluster: &str, n: usize) {
    let made = futures::stream::iter(0..n)
        .map(|i| async move {
            let name = format!("cm-{i:05}");
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default",
                "uid": format!("uid-{i}"), "creationTimestamp": "2025-01-01T00:00:00Z"}, "data": {"i": i.to_string()}});
            let key = format!("{prefix}/core/configmaps/{cluster}/default/{name}");
            store.create(&key, serde_json::to_vec(&obj).unwrap()).await.unwrap();
        })
        .buffer_unordered(64)
        .count()
        .await;
    assert_eq!(made, n);
}

/// A LogicalCluster whose finalizer someone removes by hand mid-purge goes at once, and a new cluster
/// of its name can be made and deleted while the old purge still runs: a purge asked for meanwhile is
/// queued, not dropped, so the new one goes too and no key of either is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_reused_while_its_old_purge_runs_is_purged_in_turn() {
    const OBJECTS: usize = 4_000;
    let s = TestServer::start(Backend::Etcd).await;
    let (store, prefix) = (s.running_store(), s.prefix.clone());
    s.create_cluster("again").await;
    store_configmaps(&store, &prefix, "again", OBJECTS).await;

    let (code, b) = s.delete(&format!("{LC}/again")).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    let first = format!("{prefix}/core/configmaps/again/default/cm-00000");
    eventually(30, "the purge to start", || async { store.get(&first).await.unwrap().is_none() }).await;
    let no_finalizers = json!({"metadata": {"finalizers": []}});
    let (code, b) = s.patch(&format!("{LC}/again"), "application/merge-patch+json", &no_finalizers).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    assert_eq!(s.get(&format!("{LC}/again")).await.0, StatusCode::NOT_FOUND, "gone with its last finalizer");

    let (code, b) = s.post(LC, &lc("again")).await;
    assert_eq!(code, StatusCode::CREATED, "{b}");
    let (code, b) = s.delete(&format!("{LC}/again")).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    eventually(120, "the new logicalcluster/again to go", || async {
        s.get(&format!("{LC}/again")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    eventually(30, "every key of either cluster to go", || async {
        keys_of(&*store, &prefix, "again").await.is_empty()
    })
    .await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purging_a_cluster_never_touches_one_whose_name_extends_it() {
    let s = TestServer::start(Backend::Etcd).await;
    let store = s.running_store();
    for name in ["a", "a-b"] {
        s.create_cluster(name).await;
        s.post(&format!("/clusters/{name}/api/v1/namespaces"), &json!({"metadata": {"name": "x"}})).await;
        for i in 0..20 {
            let (code, b) = s
                .post(
                    &format!("/clusters/{name}/api/v1/namespaces/x/configmaps"),
                    &json!({"metadata": {"name": format!("cm-{i}")}}),
                )
                .await;
            assert_eq!(code, StatusCode::CREATED, "{b}");
        }
    }
    let ab_before = keys_of(&*store, &s.prefix, "a-b").await;
    assert!(ab_before.len() > 20);

    let (code, b) = s.delete(&format!("{LC}/a")).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    eventually(60, "logicalcluster/a to go", || async { s.get(&format!("{LC}/a")).await.0 == StatusCode::NOT_FOUND })
        .await;
    assert_eq!(keys_of(&*store, &s.prefix, "a").await, vec![]);
    assert_eq!(keys_of(&*store, &s.prefix, "a-b").await, ab_before, "a-b's keys neither deleted nor rewritten");
    // A purge that comes late (another replica's, a repeated one) deletes nothing of a live cluster.
    let registry = kgate::registry::Registry::new(store.clone(), s.prefix.clone());
    kgate::tenancy::purge(&registry, "a-b").await.unwrap();
    kgate::tenancy::purge(&registry, "a").await.unwrap();
    assert_eq!(keys_of(&*store, &s.prefix, "a-b").await, ab_before, "a live cluster is never purged");
    let (code, list) = s.get("/clusters/a-b/api/v1/namespaces/x/configmaps").await;
    assert_eq!((code, common::own_items(&list).len()), (StatusCode::OK, 20));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_cut_short_by_a_restart_resumes_and_interrupted_bootstraps_finish() {
    const OBJECTS: usize = 10_000;
    let s = TestServer::start(Backend::Etcd).await;
    let (store, prefix) = (s.running_store(), s.prefix.clone());
    s.create_cluster("big").await;
    store_configmaps(&store, &prefix, "big", OBJECTS).await;
    let all_keys = keys_of(&*store, &prefix, "big").await.len();
    let (_, page) = s.get("/clusters/big/api/v1/namespaces/default/configmaps?limit=1").await;
    assert_eq!(page["items"][0]["metadata"]["name"], "cm-00000");

    let (code, b) = s.delete(&format!("{LC}/big")).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    let (code, st) = s.post(LC, &lc("big")).await;
    assert_eq!(code, StatusCode::CONFLICT, "no new cluster of that name while the purge runs: {st}");
    // Stop in the middle of the purge: pages go in key order, so the first object goes early.
    let first = format!("{prefix}/core/configmaps/big/default/cm-00000");
    eventually(30, "the purge to start", || async { store.get(&first).await.unwrap().is_none() }).await;
    let dir = s.stop().await;

    let left = keys_of(&*store, &prefix, "big").await.len();
    assert!(left > 0 && left < all_keys, "the stop interrupted the purge ({left} of {all_keys} keys left)");
    let lc_key = format!("{prefix}/tenancy.kgate.dev/logicalclusters/root/big");
    let obj: Value = serde_json::from_slice(&store.get(&lc_key).await.unwrap().expect("still there").value).unwrap();
    assert!(obj["metadata"]["deletionTimestamp"].is_string() && obj["metadata"]["finalizers"] == json!([PURGE]));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(keys_of(&*store, &prefix, "big").await.len(), left, "nothing purges while no server runs");

    // Two LogicalClusters whose bootstrap a crash cut short: one never got a status (nor, as made before
    // kgate set one, the finalizer), one is Initializing with only its default namespace.
    let half = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "half", "uid": "u-half", "creationTimestamp": "2025-01-01T00:00:00Z"}});
    store
        .create(&format!("{prefix}/tenancy.kgate.dev/logicalclusters/root/half"), serde_json::to_vec(&half).unwrap())
        .await
        .unwrap();
    let init = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "init", "uid": "u-init", "creationTimestamp": "2025-01-01T00:00:00Z", "finalizers": [PURGE]},
        "status": {"phase": "Initializing"}});
    store
        .create(&format!("{prefix}/tenancy.kgate.dev/logicalclusters/root/init"), serde_json::to_vec(&init).unwrap())
        .await
        .unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "uid": "u-ns"}, "status": {"phase": "Active"}});
    store.create(&format!("{prefix}/core/namespaces/init/default"), serde_json::to_vec(&ns).unwrap()).await.unwrap();

    let s = TestServer::start_in(Backend::Etcd, dir, prefix.clone()).await;
    eventually(180, "the resumed purge to finish and logicalcluster/big to go", || async {
        s.get(&format!("{LC}/big")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    assert_eq!(keys_of(&*store, &prefix, "big").await, vec![]);
    for name in ["half", "init"] {
        eventually(30, &format!("logicalcluster/{name} to be Ready"), || async {
            s.get(&format!("{LC}/{name}")).await.1["status"]["phase"] == "Ready"
        })
        .await;
        let (_, obj) = s.get(&format!("{LC}/{name}")).await;
        assert_eq!(obj["metadata"]["finalizers"], json!([PURGE]), "{obj}");
        assert_eq!(ready_condition(&obj)["status"], "True");
        assert_eq!(s.get(&format!("/clusters/{name}/api/v1/namespaces/kube-system")).await.0, StatusCode::OK);
        assert_eq!(
            s.get(&format!("/clusters/{name}/api/v1/namespaces/default/serviceaccounts/default")).await.0,
            StatusCode::OK
        );
        assert_eq!(
            s.get(&format!("/clusters/{name}/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin")).await.0,
            StatusCode::OK
        );
    }
    let (_, ns) = s.get("/clusters/init/api/v1/namespaces/default").await;
    assert_eq!(ns["metadata"]["uid"], "u-ns", "the bootstrap keeps what was already there");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_dir_is_applied_at_every_start_and_never_deletes() {
    let tenants = tempfile::tempdir().unwrap();
    let t = tenants.path();
    let write = |f: &str, text: &str| std::fs::write(t.join(f), text).unwrap();
    let team = |name: &str, rest: &str| {
        format!("apiVersion: tenancy.kgate.dev/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: {name}\n{rest}")
    };
    write(
        "teams.yaml",
        &format!(
            "# two teams\n{}---\n{}---\n",
            team("t-one", "  labels: {tier: gold, old: x}\n  annotations: {owner: alice}\nspec:\n  note: first\n"),
            team("t-two", "")
        ),
    );
    write(
        "three.json",
        r#"{"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": "t-three"}}"#,
    );
    write("list.yml", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: tenancy.kgate.dev/v1alpha1\n  kind: LogicalCluster\n  metadata: {name: t-four}\n");
    write("broken.yaml", &format!("{}---\nmetadata: [unclosed\n", team("t-never", "")));
    write(
        "mixed.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: nope}}\n---\n{}", team("t-five", "")),
    );
    write("reserved.yaml", &team("root", ""));
    write("bad-name.yaml", &team("Not_A_Label", ""));
    write("notes.txt", &team("t-ignored", ""));
    std::fs::create_dir(t.join("nested")).unwrap();
    std::fs::write(t.join("nested/t-six.yaml"), team("t-six", "")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let tenants_dir = t.to_path_buf();
    let s =
        TestServer::start_configured(Backend::Etcd, dir, prefix.clone(), |c| c.tenants_dir = Some(tenants_dir.clone()))
            .await;
    for name in ["t-one", "t-two", "t-three", "t-four", "t-five"] {
        let (code, obj) = s.get(&format!("{LC}/{name}")).await;
        assert_eq!((code, &obj["status"]["phase"]), (StatusCode::OK, &json!("Ready")), "{name}: {obj}");
        assert_eq!(obj["metadata"]["finalizers"], json!([PURGE]));
        assert_eq!(s.get(&format!("/clusters/{name}/api/v1/namespaces/default")).await.0, StatusCode::OK, "{name}");
    }
    for name in ["t-never", "t-ignored", "t-six"] {
        assert_eq!(s.get(&format!("{LC}/{name}")).await.0, StatusCode::NOT_FOUND, "{name}");
    }
    let (_, one) = s.get(&format!("{LC}/t-one")).await;
    assert_eq!(one["metadata"]["labels"], json!({"tier": "gold", "old": "x"}));
    assert_eq!(one["metadata"]["annotations"]["owner"], "alice");
    assert_eq!(one["spec"], json!({"note": "first"}));

    // What was skipped is reported, each naming its file (and document).
    let registry = kgate::registry::Registry::new(s.running_store(), prefix.clone());
    let report = kgate::tenancy::apply_dir(&registry, t).await.unwrap();
    let mut errors: Vec<String> = report.errors.iter().map(|e| e.to_string()).collect();
    errors.sort();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    let at = |f: &str| t.join(f).display().to_string();
    assert!(
        errors[0].starts_with(&format!("{} (document 1): logicalcluster/Not_A_Label: ", at("bad-name.yaml"))),
        "{errors:#?}"
    );
    assert!(errors[1].starts_with(&format!("{}: not valid YAML", at("broken.yaml"))), "{errors:#?}");
    assert!(
        errors[2].starts_with(&format!("{} (document 1): only LogicalCluster objects", at("mixed.yaml"))),
        "{errors:#?}"
    );
    assert!(
        errors[3].starts_with(&format!("{} (document 1): logicalcluster/root: ", at("reserved.yaml"))),
        "{errors:#?}"
    );
    assert_eq!(report.clusters, ["t-four", "t-five", "t-one", "t-two", "t-three"], "files in name order");

    // Changes made through the API meanwhile: a label by someone else, a cluster of its own.
    let (code, b) = s
        .patch(
            &format!("{LC}/t-one"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"by-hand": "yes"}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{b}");
    s.create_cluster("by-api").await;
    let dir = s.stop().await;

    // The file changes and loses t-two; at the next start the file wins, and nothing is deleted.
    write(
        "teams.yaml",
        &team("t-one", "  labels: {tier: silver}\n  annotations: {owner: bob}\nspec:\n  note: second\n"),
    );
    let tenants_dir = t.to_path_buf();
    let s = TestServer::start_configured(Backend::Etcd, dir, prefix, |c| c.tenants_dir = Some(tenants_dir)).await;
    let (_, one) = s.get(&format!("{LC}/t-one")).await;
    assert_eq!(one["metadata"]["labels"], json!({"tier": "silver", "by-hand": "yes"}), "{one}");
    assert_eq!(one["metadata"]["annotations"]["owner"], "bob");
    assert_eq!(one["spec"], json!({"note": "second"}));
    assert_eq!(one["status"]["phase"], "Ready");
    for name in ["t-two", "by-api"] {
        assert_eq!(s.get(&format!("/clusters/{name}/api/v1/namespaces/default")).await.0, StatusCode::OK, "{name}");
    }

    // The documented examples in the repository apply cleanly.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tenants");
    let registry = kgate::registry::Registry::new(s.running_store(), s.prefix.clone());
    let report = kgate::tenancy::apply_dir(&registry, &examples).await.unwrap();
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.clusters, ["team-data", "team-web", "team-a"]);
    let (_, data) = s.get(&format!("{LC}/team-data")).await;
    assert_eq!((&data["metadata"]["labels"]["tier"], &data["status"]["phase"]), (&json!("gold"), &json!("Ready")));
    s.stop().await;
}

/// A cluster made by an older kgate has older default roles. At the next start they gain what the
/// current policy grants, as kube-apiserver reconciles its `autoupdate` roles; a platform team's own
/// additions stay, and a role marked `autoupdate: "false"` is left as it is. Root's roles too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_roles_made_by_an_older_kgate_are_brought_up_to_date_at_start() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("older").await;
    let roles = "apis/rbac.authorization.k8s.io/v1/clusterroles";
    let quotas = "/clusters/older/api/v1/namespaces/default/resourcequotas";
    // What an older kgate wrote: a view role without quotas, to which the platform team added a rule
    // of its own; an edit role the team took over; and no record of the policy on the LogicalCluster.
    let widgets = json!({"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]});
    for cluster in ["older", "root"] {
        let path = format!("/clusters/{cluster}/{roles}/system:aggregate-to-view");
        let (_, mut view) = s.get(&path).await;
        let rules = view["rules"].as_array_mut().unwrap();
        rules.retain(|r| !r["resources"].as_array().unwrap().iter().any(|x| x == "resourcequotas"));
        rules.push(widgets.clone());
        let (code, body) = s.put(&path, &view).await;
        assert_eq!(code, StatusCode::OK, "{body}");
    }
    let edit = format!("/clusters/older/{roles}/system:aggregate-to-edit");
    let (_, mut taken_over) = s.get(&edit).await;
    taken_over["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = json!("false");
    taken_over["rules"] = json!([widgets]);
    let (code, body) = s.put(&edit, &taken_over).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let unrecord = json!({"metadata": {"annotations": {kgate::tenancy::POLICY_ANNOTATION: null}}});
    let (code, body) = s.patch(&format!("{LC}/older"), "application/merge-patch+json", &unrecord).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let viewer =
        tokio::task::spawn_blocking(move || token_of(&s2.role_kubeconfig("older", "viewer", "view"))).await.unwrap();
    let list_quotas = |s: &TestServer| s.anonymous.get(format!("{}{quotas}", s.url)).bearer_auth(&viewer).send();
    assert_eq!(list_quotas(&s).await.unwrap().status(), StatusCode::FORBIDDEN);

    let s = std::sync::Arc::into_inner(s).expect("the only handle");
    let prefix = s.prefix.clone();
    let dir = s.stop().await;
    let s = TestServer::start_in(Backend::Embedded, dir, prefix).await;
    eventually(30, "the older cluster to record the current policy", || async {
        let (_, lc) = s.get(&format!("{LC}/older")).await;
        // The policy's revision, and the CA's after it.
        lc["metadata"]["annotations"][kgate::tenancy::POLICY_ANNOTATION]
            .as_str()
            .is_some_and(|r| r.starts_with(&format!("{}-", kgate::rbac::policy_revision())))
    })
    .await;
    for cluster in ["older", "root"] {
        let (_, view) = s.get(&format!("/clusters/{cluster}/{roles}/system:aggregate-to-view")).await;
        let rules = view["rules"].as_array().unwrap();
        assert!(
            rules.iter().any(|r| r["resources"].as_array().unwrap().iter().any(|x| x == "resourcequotas")),
            "{cluster}: {view}"
        );
        assert!(rules.contains(&widgets), "{cluster}: the team's own rule is kept");
    }
    let (_, kept) = s.get(&edit).await;
    assert_eq!(kept["rules"], json!([widgets]), "a role marked autoupdate=false is left alone");
    assert_eq!(list_quotas(&s).await.unwrap().status(), StatusCode::OK, "the view role grants quotas again");
    s.stop().await;
}

/// A kgate that comes back at another address (here another port) points every cluster's
/// `default/kubernetes` Endpoints and EndpointSlice at it, as kube-apiserver's endpoint reconciler
/// does; in-cluster clients that resolve the service reach the server that serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_server_is_where_every_clusters_kubernetes_endpoints_say() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("moved").await;
    let endpoints = "/clusters/moved/api/v1/namespaces/default/endpoints/kubernetes";
    let slice = "/clusters/moved/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes";
    let port_of = |url: &str| url.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    let (_, ep) = s.get(endpoints).await;
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], port_of(&s.url), "{ep}");
    let uid = ep["metadata"]["uid"].clone();
    let prefix = s.prefix.clone();
    let dir = s.stop().await;
    // Back on another port, advertising another address (what a load balancer in front would have).
    let s = TestServer::start_configured(Backend::Embedded, dir, prefix, |c| {
        c.advertise_address = Some("10.1.2.3".parse().unwrap());
    })
    .await;
    let now = port_of(&s.url);
    eventually(30, "the cluster's endpoints to follow the server", || async {
        let (_, ep) = s.get(endpoints).await;
        let (_, sl) = s.get(slice).await;
        ep["subsets"][0]["ports"][0]["port"] == now
            && ep["subsets"][0]["addresses"][0]["ip"] == "10.1.2.3"
            && sl["endpoints"][0]["addresses"][0] == "10.1.2.3"
            && sl["ports"][0]["port"] == now
    })
    .await;
    // Updated in place, not made anew.
    assert_eq!(s.get(endpoints).await.1["metadata"]["uid"], uid);
    s.stop().await;
}

/// A bootstrap or a reconcile writes nothing into a cluster being deleted: each of its creates is
/// checked against the LogicalCluster in the same store step, so nothing is left behind a purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_being_deleted_gets_no_default_objects() {
    // No server runs, so no purge could clean up after a bootstrap that wrote anyway.
    let endpoints = [common::shared_etcd().to_string()];
    let store: std::sync::Arc<dyn kgate::storage::Store> =
        std::sync::Arc::new(kgate::storage::etcd::EtcdStore::connect(&endpoints, &Default::default()).await.unwrap());
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let registry = kgate::registry::Registry::new(store.clone(), prefix.clone());
    for (name, deleting) in [("doomed", true), ("alive", false)] {
        let mut lc = lc(name);
        lc["metadata"]["uid"] = json!(format!("u-{name}"));
        lc["metadata"]["finalizers"] = json!([PURGE]);
        if deleting {
            lc["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        }
        let key = format!("{prefix}/tenancy.kgate.dev/logicalclusters/root/{name}");
        store.create(&key, serde_json::to_vec(&lc).unwrap()).await.unwrap();
        kgate::tenancy::bootstrap(&registry, name).await.unwrap();
    }
    assert_eq!(keys_of(&*store, &prefix, "doomed").await, vec![]);
    let alive = keys_of(&*store, &prefix, "alive").await;
    assert!(alive.iter().any(|(k, _)| k.ends_with("/namespaces/alive/default")), "{alive:?}");
    assert!(alive.iter().any(|(k, _)| k.ends_with("/clusterroles/alive/view")), "{alive:?}");
}

/// On etcd a new cluster's objects are written in one transaction; on the embedded store one by one.
/// Either way the cluster starts with the same objects.
#[tokio::test]
async fn a_new_cluster_starts_with_the_same_objects_written_at_once_or_one_by_one() {
    let mut made = Vec::new();
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        s.create_cluster("fresh").await;
        let all = s
            .running_store()
            .range(kgate::storage::RangeRequest { prefix: format!("{}/", s.prefix), ..Default::default() })
            .await
            .unwrap();
        let mut keys: Vec<String> = all
            .kvs
            .iter()
            .filter_map(|kv| kv.key.strip_prefix(&s.prefix))
            .filter(|k| k.split('/').nth(3) == Some("fresh"))
            .map(str::to_string)
            .collect();
        keys.sort();
        let (code, ns) = s.get("/clusters/fresh/api/v1/namespaces/kube-system").await;
        assert_eq!(
            (code.as_u16(), &ns["metadata"]["labels"]["kubernetes.io/metadata.name"]),
            (200, &json!("kube-system"))
        );
        made.push(keys);
        s.stop().await;
    }
    assert!(made[0].len() >= 20, "{:?}", made[0]);
    assert_eq!(made[0], made[1]);
}

/// On etcd a new LogicalCluster is written Ready in the same transaction as its cluster's objects:
/// one event, and every key at the LogicalCluster's revision. Where a key of the cluster is there
/// already (a bootstrap a crash cut short), it is created Initializing and bootstrapped after,
/// keeping what it finds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_a_logical_cluster_is_made_ready_with_its_objects_in_one_step_unless_keys_are_there() {
    let s = TestServer::start(Backend::Etcd).await;
    let store = s.running_store();
    let mut events = watch_logical_clusters(&s).await;

    let (code, created) = s.post(LC, &lc("once")).await;
    assert_eq!((code, &created["status"]["phase"]), (StatusCode::CREATED, &json!("Ready")), "{created}");
    let (kind, obj) = next_event(&mut events, "once").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("ADDED", &json!("Ready")), "{obj}");
    assert_eq!(ready_condition(&obj)["status"], "True");
    assert_eq!(obj["metadata"]["finalizers"], json!([PURGE]));
    assert!(obj["metadata"]["annotations"]["tenancy.kgate.dev/rbac-policy"].is_string(), "{obj}");
    let rv: i64 = obj["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let made = keys_of(&*store, &s.prefix, "once").await;
    assert!(made.len() >= 20, "{made:?}");
    assert!(made.iter().all(|(_, at)| *at == rv), "every key written with the LogicalCluster: {rv}, {made:?}");

    // A namespace of "left" is there before its LogicalCluster, as a crash may leave one.
    let ns_key = format!("{}/core/namespaces/left/kube-public", s.prefix);
    let stale = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "kube-public", "uid": "kept", "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    store.create(&ns_key, serde_json::to_vec(&stale).unwrap()).await.unwrap();
    let (code, created) = s.post(LC, &lc("left")).await;
    assert_eq!((code, &created["status"]["phase"]), (StatusCode::CREATED, &json!("Ready")), "{created}");
    let (kind, obj) = next_event(&mut events, "left").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("ADDED", &json!("Initializing")), "{obj}");
    let (kind, obj) = next_event(&mut events, "left").await;
    assert_eq!((kind.as_str(), &obj["status"]["phase"]), ("MODIFIED", &json!("Ready")), "{obj}");
    let (code, ns) = s.get("/clusters/left/api/v1/namespaces/kube-public").await;
    assert_eq!((code, &ns["metadata"]["uid"]), (StatusCode::OK, &json!("kept")), "what was there is kept: {ns}");
    let mut names: Vec<String> = keys_of(&*store, &s.prefix, "left").await.into_iter().map(|(k, _)| k).collect();
    let mut want: Vec<String> = made.into_iter().map(|(k, _)| k.replacen("/once", "/left", 1)).collect();
    names.sort();
    want.sort();
    assert_eq!(names, want, "the same objects as a cluster made in one step");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_across_clusters_sees_every_object_a_new_cluster_starts_with() {
    // On etcd a new cluster's objects are written in one transaction, at one revision: each is an
    // event of its own to a watch across every cluster.
    let s = TestServer::start(Backend::Etcd).await;
    let mut rx = s.watch("/clusters/*/api/v1/namespaces?watch=true").await;
    s.create_cluster("fresh").await;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("every namespace").unwrap();
        if ev["object"]["metadata"]["annotations"]["kgate.dev/cluster"] == "fresh" {
            assert_eq!(ev["type"], "ADDED", "{ev}");
            seen.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    seen.sort();
    assert_eq!(seen, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    s.stop().await;
}
