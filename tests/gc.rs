//! Garbage collection by ownerReferences, per logical cluster, on both stores: background, foreground
//! and orphan deletion (through kubectl's `--cascade` too), several owners, dangling and invalid
//! references, custom owners, and a collector that restarts half-way.

mod common;

use common::{eventually, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A ConfigMap's collection in `cluster`'s `default` namespace.
fn cms(cluster: &str) -> String {
    format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps")
}

/// A reference to `owner` (an object as the API answered it).
fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block,
    })
}

async fn create(s: &TestServer, path: &str, obj: Value) -> Value {
    let (code, body) = s.post(path, &obj).await;
    assert_eq!(code, StatusCode::CREATED, "{path}: {body}");
    body
}

/// A ConfigMap named `name`, owned by `owners`, with `finalizers`.
async fn cm(s: &TestServer, cluster: &str, name: &str, owners: Vec<Value>, finalizers: &[&str]) -> Value {
    let obj = json!({"metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers}});
    create(s, &cms(cluster), obj).await
}

async fn exists(s: &TestServer, path: &str) -> bool {
    let (code, body) = s.get(path).await;
    assert!(code == StatusCode::OK || code == StatusCode::NOT_FOUND, "{path}: {code} {body}");
    code == StatusCode::OK
}

async fn gone(s: &TestServer, path: &str, what: &str) {
    eventually(20, what, || async { !exists(s, path).await }).await;
}

/// Owners go, then their dependents; other clusters' objects of the same names stay.
async fn background(backend: Backend) {
    let s = TestServer::start(backend).await;
    for c in ["gc-a", "gc-b"] {
        s.create_cluster(c).await;
    }
    let mut dependents = Vec::new();
    for c in ["gc-a", "gc-b"] {
        let owner = cm(&s, c, "owner", vec![], &[]).await;
        for i in 0..20 {
            dependents.push(cm(&s, c, &format!("dep-{i}"), vec![owner_ref(&owner, false)], &[]).await);
        }
    }
    let (code, body) = s.delete(&format!("{}/owner", cms("gc-a"))).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    for i in 0..20 {
        gone(&s, &format!("{}/dep-{i}", cms("gc-a")), "gc-a's dependents to go with their owner").await;
    }
    // gc-b's owner of the same name is there, so its dependents stay.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for i in 0..20 {
        assert!(exists(&s, &format!("{}/dep-{i}", cms("gc-b"))).await, "gc-b's dep-{i} must stay");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dependents_go_with_their_owner_in_its_cluster_only_embedded() {
    background(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dependents_go_with_their_owner_in_its_cluster_only_etcd() {
    background(Backend::Etcd).await;
}

/// Foreground: the owner stays, marked, while a dependent that blocks is there; the others go.
async fn foreground(backend: Backend) {
    let s = TestServer::start(backend).await;
    let owner = cm(&s, "root", "fg-owner", vec![], &[]).await;
    cm(&s, "root", "fg-blocking", vec![owner_ref(&owner, true)], &["example.com/hold"]).await;
    cm(&s, "root", "fg-free", vec![owner_ref(&owner, false)], &[]).await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"});
    let path = format!("{}/fg-owner", cms("root"));
    let (code, marked) =
        s.req(reqwest::Method::DELETE, &path, Some("application/json"), Some(serde_json::to_vec(&body).unwrap())).await;
    assert_eq!(code, StatusCode::OK, "{marked}");
    assert_eq!(marked["metadata"]["finalizers"], json!(["foregroundDeletion"]), "{marked}");
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    gone(&s, &format!("{}/fg-free", cms("root")), "the dependent that does not block").await;
    // The blocking dependent is being deleted, held by its own finalizer: the owner waits for it.
    let blocking = format!("{}/fg-blocking", cms("root"));
    eventually(20, "the blocking dependent to be marked deleted", || async {
        s.get(&blocking).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(exists(&s, &path).await, "the owner waits for the blocking dependent");
    let (code, b) =
        s.patch(&blocking, "application/merge-patch+json", &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, StatusCode::OK, "{b}");
    gone(&s, &path, "the owner, once its blocking dependent is gone").await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreground_owner_waits_for_its_blocking_dependents_embedded() {
    foreground(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreground_owner_waits_for_its_blocking_dependents_etcd() {
    foreground(Backend::Etcd).await;
}

/// kubectl's three cascades, on a Deployment's ReplicaSet and Pods (no controller makes them here,
/// so the test writes them as the controllers would), with the kubectl on PATH and with 1.35.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_cascades_as_against_kube() {
    let path_kubectl = common::require_binary("kubectl", "install kubectl (or run ./scripts/setup.sh tests)");
    for bin in [path_kubectl, common::kubectl_135()] {
        cascades(&bin).await;
    }
}

async fn cascades(kubectl_bin: &std::path::Path) {
    let s = TestServer::start(Backend::Embedded).await;
    let kc = s.kubeconfig();
    let kubectl = |kc: &std::path::Path, args: &[&str]| common::kubectl_bin(kubectl_bin, kc, args, None);
    let apps = "/apis/apps/v1/namespaces/default";
    let pods = "/api/v1/namespaces/default/pods";
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let spec = json!({"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template});
    for cascade in ["background", "foreground", "orphan"] {
        let name = format!("web-{cascade}");
        let deploy =
            create(&s, &format!("{apps}/deployments"), json!({"metadata": {"name": name}, "spec": spec})).await;
        let rs = json!({"metadata": {"name": format!("{name}-rs"), "ownerReferences": [controller_ref(&deploy)]}, "spec": spec});
        let rs = create(&s, &format!("{apps}/replicasets"), rs).await;
        for i in 0..3 {
            let pod = json!({"metadata": {"name": format!("{name}-{i}"), "labels": {"app": "x"}, "ownerReferences": [controller_ref(&rs)]}, "spec": template["spec"]});
            create(&s, pods, pod).await;
        }
        let (ok, out, err) =
            kubectl(&kc, &["delete", "deployment", &name, &format!("--cascade={cascade}"), "--timeout=30s"]);
        assert!(ok, "{}: kubectl delete --cascade={cascade}: {out} {err}", kubectl_bin.display());
        assert!(
            !exists(&s, &format!("{apps}/deployments/{name}")).await,
            "kubectl returns once the deployment is gone"
        );
        let rs_path = format!("{apps}/replicasets/{name}-rs");
        if cascade == "orphan" {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let (code, rs) = s.get(&rs_path).await;
            assert_eq!(code, StatusCode::OK, "an orphaned ReplicaSet stays");
            assert!(rs["metadata"].get("ownerReferences").is_none(), "and no longer names its owner: {rs}");
            assert!(exists(&s, &format!("{pods}/{name}-0")).await, "its pods stay too");
        } else {
            if cascade == "foreground" {
                // kubectl waited for the deployment, which went only after what it blocked on.
                assert!(!exists(&s, &rs_path).await, "foreground: the ReplicaSet went before its owner");
                for i in 0..3 {
                    assert!(!exists(&s, &format!("{pods}/{name}-{i}")).await, "foreground: pod {i} went first");
                }
            }
            gone(&s, &rs_path, "the ReplicaSet").await;
            for i in 0..3 {
                gone(&s, &format!("{pods}/{name}-{i}"), "the ReplicaSet's pods").await;
            }
        }
    }
    s.stop().await;
}

fn controller_ref(owner: &Value) -> Value {
    let mut r = owner_ref(owner, true);
    r["controller"] = json!(true);
    r
}

/// A dependent goes with its last owner; references to absent owners, or to an owner of that name
/// with another uid, are dangling.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_owners_and_dangling_references() {
    let s = TestServer::start(Backend::Embedded).await;
    let a = cm(&s, "root", "owner-a", vec![], &[]).await;
    let b = cm(&s, "root", "owner-b", vec![], &[]).await;
    cm(&s, "root", "shared", vec![owner_ref(&a, false), owner_ref(&b, false)], &[]).await;
    let shared = format!("{}/shared", cms("root"));
    assert_eq!(s.delete(&format!("{}/owner-a", cms("root"))).await.0, StatusCode::OK);
    eventually(20, "the reference to the absent owner to be removed", || async {
        let refs = s.get(&shared).await.1["metadata"]["ownerReferences"].clone();
        refs.as_array().is_some_and(|r| r.len() == 1 && r[0]["name"] == "owner-b")
    })
    .await;
    assert_eq!(s.delete(&format!("{}/owner-b", cms("root"))).await.0, StatusCode::OK);
    gone(&s, &shared, "the dependent, with its last owner").await;

    let absent = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "00000000-0000-0000-0000-000000000001"});
    cm(&s, "root", "orphan-of-none", vec![absent], &[]).await;
    gone(&s, &format!("{}/orphan-of-none", cms("root")), "a dependent of an owner that never was").await;
    let c = cm(&s, "root", "owner-c", vec![], &[]).await;
    let mut wrong = owner_ref(&c, false);
    wrong["uid"] = json!("00000000-0000-0000-0000-000000000002");
    cm(&s, "root", "wrong-uid", vec![wrong], &[]).await;
    gone(&s, &format!("{}/wrong-uid", cms("root")), "a dependent naming its owner with another uid").await;
    assert!(exists(&s, &format!("{}/owner-c", cms("root"))).await);
    // An owner of a type nobody serves: left alone, as kube leaves it.
    let unknown = json!({"apiVersion": "nowhere.example.com/v1", "kind": "Thing", "name": "t", "uid": "00000000-0000-0000-0000-000000000003"});
    cm(&s, "root", "unresolvable", vec![unknown], &[]).await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(exists(&s, &format!("{}/unresolvable", cms("root"))).await);
    s.stop().await;
}

/// A namespaced owner of a cluster-scoped dependent is invalid: the dependent stays and a warning
/// event says why; an owner in another namespace is dangling, with the same event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_references_get_kubes_event() {
    let s = TestServer::start(Backend::Embedded).await;
    let owner = cm(&s, "root", "ns-owner", vec![], &[]).await;
    let role = json!({"metadata": {"name": "owned-role", "ownerReferences": [owner_ref(&owner, false)]}, "rules": []});
    create(&s, "/apis/rbac.authorization.k8s.io/v1/clusterroles", role).await;
    let events = "/api/v1/namespaces/default/events?fieldSelector=reason%3DOwnerRefInvalidNamespace";
    eventually(20, "an OwnerRefInvalidNamespace event for the cluster role", || async {
        let list = s.get(events).await.1;
        list["items"].as_array().into_iter().flatten().any(|e| e["involvedObject"]["name"] == "owned-role")
    })
    .await;
    assert!(exists(&s, "/apis/rbac.authorization.k8s.io/v1/clusterroles/owned-role").await, "never collected");

    create(&s, "/api/v1/namespaces", json!({"metadata": {"name": "elsewhere"}})).await;
    let (code, far) =
        s.post("/api/v1/namespaces/elsewhere/configmaps", &json!({"metadata": {"name": "far-owner"}})).await;
    assert_eq!(code, StatusCode::CREATED);
    cm(&s, "root", "cross-ns", vec![owner_ref(&far, false)], &[]).await;
    gone(&s, &format!("{}/cross-ns", cms("root")), "a dependent whose owner is in another namespace").await;
    let list = s.get(events).await.1;
    let event = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["involvedObject"]["name"] == "cross-ns")
        .cloned()
        .unwrap_or_else(|| panic!("an event for the cross-namespace reference: {list}"));
    let want = format!(
        "ownerRef [v1/ConfigMap, namespace: default, name: far-owner, uid: {}] does not exist in namespace \"default\"",
        far["metadata"]["uid"].as_str().unwrap()
    );
    assert_eq!(event["message"], want);
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["source"]["component"], "garbage-collector-controller");
    s.stop().await;
}

/// Custom resources own and are owned like built-ins, and cluster-scoped owners own namespaced
/// dependents in any namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn custom_and_cluster_scoped_owners() {
    let s = TestServer::start(Backend::Embedded).await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.gc.example.com"},
        "spec": {"group": "gc.example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    create(&s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).await;
    let gadgets = "/apis/gc.example.com/v1/namespaces/default/gadgets";
    let mut gadget = None;
    for _ in 0..100 {
        let (code, body) = s
            .post(gadgets, &json!({"apiVersion": "gc.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}))
            .await;
        if code == StatusCode::CREATED {
            gadget = Some(body);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let gadget = gadget.expect("the CRD serves");
    cm(&s, "root", "gadget-config", vec![owner_ref(&gadget, true)], &[]).await;
    let child = json!({"apiVersion": "gc.example.com/v1", "kind": "Gadget", "metadata": {"name": "child", "ownerReferences": [owner_ref(&gadget, true)]}});
    create(&s, gadgets, child).await;
    let (code, _) =
        s.req(reqwest::Method::DELETE, &format!("{gadgets}/g?propagationPolicy=Foreground"), None, None).await;
    assert_eq!(code, StatusCode::OK);
    gone(&s, &format!("{gadgets}/g"), "the custom owner, after its dependents").await;
    assert!(!exists(&s, &format!("{}/gadget-config", cms("root"))).await);
    assert!(!exists(&s, &format!("{gadgets}/child")).await);

    let ns_owner = create(&s, "/api/v1/namespaces", json!({"metadata": {"name": "owning"}})).await;
    create(&s, "/api/v1/namespaces", json!({"metadata": {"name": "owned-in"}})).await;
    let dep = json!({"metadata": {"name": "by-namespace", "ownerReferences": [owner_ref(&ns_owner, false)]}});
    create(&s, "/api/v1/namespaces/owned-in/configmaps", dep).await;
    let pv = json!({"metadata": {"name": "owner-pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}});
    let pv = create(&s, "/api/v1/persistentvolumes", pv).await;
    let dep = json!({"metadata": {"name": "by-pv", "ownerReferences": [owner_ref(&pv, false)]}});
    create(&s, "/api/v1/namespaces/owned-in/configmaps", dep).await;
    assert_eq!(s.delete("/api/v1/persistentvolumes/owner-pv").await.0, StatusCode::OK);
    gone(&s, "/api/v1/namespaces/owned-in/configmaps/by-pv", "a dependent of a cluster-scoped owner").await;
    assert!(exists(&s, "/api/v1/namespaces/owned-in/configmaps/by-namespace").await);
    // A namespace owns like any cluster-scoped object.
    assert_eq!(s.delete("/api/v1/namespaces/owning").await.0, StatusCode::OK);
    gone(&s, "/api/v1/namespaces/owned-in/configmaps/by-namespace", "a dependent of a deleted namespace").await;
    s.stop().await;
}

/// A collector stopped half-way (a leader gone) leaves work that the next one, listing at its start,
/// finishes: dependents whose owner went while nobody collected are dangling.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_leader_finishes_what_the_last_began() {
    let s = TestServer::start(Backend::Etcd).await;
    let owner = cm(&s, "root", "big-owner", vec![], &[]).await;
    let refs = vec![owner_ref(&owner, false)];
    for i in 0..200 {
        cm(&s, "root", &format!("big-{i}"), refs.clone(), &[]).await;
    }
    let prefix = s.running_prefix();
    let data = s.stop().await;
    // The owner goes while no collector runs: nobody saw it go.
    let store = kgate::storage::etcd::EtcdStore::connect(&[common::shared_etcd().to_string()], &Default::default())
        .await
        .unwrap();
    let key = format!("{prefix}/core/configmaps/root/default/big-owner");
    kgate::storage::Store::delete(&store, &key, None).await.unwrap();
    let s = TestServer::start_in(Backend::Etcd, data, prefix).await;
    for i in 0..200 {
        gone(&s, &format!("{}/big-{i}", cms("root")), "every dependent, after the restart").await;
    }
    s.stop().await;
}

/// DeleteOptions in every encoding a client sends: Helm 4 deletes its release Secret with a
/// protobuf body, and the policy inside is honoured as from JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_options_decode_by_content_type() {
    use k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message as _;
    let s = TestServer::start(Backend::Embedded).await;
    let protobuf = |policy: &str| {
        let opts = DeleteOptions { propagation_policy: Some(policy.into()), ..Default::default() };
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some("v1".into()), kind: Some("DeleteOptions".into()) }),
            raw: Some(opts.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
    };
    let secrets = "/api/v1/namespaces/default/secrets";
    create(&s, secrets, json!({"metadata": {"name": "sh.helm.release.v1.demo.v1"}, "type": "helm.sh/release.v1"}))
        .await;
    let path = format!("{secrets}/sh.helm.release.v1.demo.v1");
    let (code, body) = s
        .req(reqwest::Method::DELETE, &path, Some("application/vnd.kubernetes.protobuf"), Some(protobuf("Background")))
        .await;
    assert_eq!(code, StatusCode::OK, "a protobuf DeleteOptions: {body}");
    assert!(!exists(&s, &path).await);

    let owner = cm(&s, "root", "pb-owner", vec![], &[]).await;
    cm(&s, "root", "pb-dep", vec![owner_ref(&owner, false)], &[]).await;
    let owner_path = format!("{}/pb-owner", cms("root"));
    let (code, body) = s
        .req(
            reqwest::Method::DELETE,
            &owner_path,
            Some("application/vnd.kubernetes.protobuf"),
            Some(protobuf("Orphan")),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["metadata"]["finalizers"], json!(["orphan"]), "the policy inside the protobuf body: {body}");
    gone(&s, &owner_path, "the orphaning owner").await;
    let dep = s.get(&format!("{}/pb-dep", cms("root"))).await.1;
    assert!(dep["metadata"].get("ownerReferences").is_none(), "orphaned: {dep}");

    create(&s, secrets, json!({"metadata": {"name": "yaml"}})).await;
    let yaml = b"apiVersion: v1\nkind: DeleteOptions\npropagationPolicy: Foreground\n".to_vec();
    let (code, body) =
        s.req(reqwest::Method::DELETE, &format!("{secrets}/yaml"), Some("application/yaml"), Some(yaml)).await;
    assert_eq!(code, StatusCode::OK, "a YAML DeleteOptions: {body}");
    let (code, body) = s
        .req(
            reqwest::Method::DELETE,
            &format!("{secrets}/none"),
            Some("application/vnd.kubernetes.protobuf"),
            Some(b"k8s\0junk".to_vec()),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("error decoding DeleteOptions"), "{body}");
    s.stop().await;
}

/// kube's OwnerReferencesPermissionEnforcement: a reference that blocks its owner's deletion takes
/// `update` on the owner's `finalizers`; changing references on an existing object takes `delete`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocking_an_owner_takes_permission_on_its_finalizers() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("gc-perm").await;
    // Writes configmaps, may not delete them, nor touch any finalizers.
    let role = json!({"metadata": {"name": "writer"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update", "patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments/finalizers"], "verbs": ["update"]}]});
    create(&s, "/clusters/gc-perm/apis/rbac.authorization.k8s.io/v1/clusterroles", role).await;
    let token = s.tenant_token("gc-perm", "writer", "writer").await;
    let owner = cm(&s, "gc-perm", "perm-owner", vec![], &[]).await;
    let as_writer = |method: reqwest::Method, path: String, body: Value| {
        let (s, token) = (&s, token.clone());
        async move {
            let auth = format!("Bearer {token}");
            let bytes = serde_json::to_vec(&body).unwrap();
            s.req_with(&s.anonymous, method, &path, Some("application/json"), Some(bytes), &[("authorization", &auth)])
                .await
        }
    };
    let blocking = json!({"metadata": {"name": "blocks", "ownerReferences": [owner_ref(&owner, true)]}});
    let (code, body) = as_writer(reqwest::Method::POST, cms("gc-perm"), blocking).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        body["message"],
        "configmaps \"blocks\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>"
    );
    assert!(!exists(&s, &format!("{}/blocks", cms("gc-perm"))).await, "nothing written");
    // Not blocking: any writer of the object may name an owner on create.
    let plain = json!({"metadata": {"name": "plain", "ownerReferences": [owner_ref(&owner, false)]}});
    let (code, body) = as_writer(reqwest::Method::POST, cms("gc-perm"), plain).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // Changing the references of an existing object takes delete on it.
    let mut changed = body.clone();
    changed["metadata"]["ownerReferences"] = json!([]);
    let (code, body) = as_writer(reqwest::Method::PUT, format!("{}/plain", cms("gc-perm")), changed).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("cannot set an ownerRef on a resource you can't delete"),
        "{body}"
    );
    // Finalizers of the owner's type granted: blocking a Deployment's deletion passes.
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let deploy =
        json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}});
    let deploy = create(&s, "/clusters/gc-perm/apis/apps/v1/namespaces/default/deployments", deploy).await;
    let owned = json!({"metadata": {"name": "by-deploy", "ownerReferences": [owner_ref(&deploy, true)]}});
    let (code, body) = as_writer(reqwest::Method::POST, cms("gc-perm"), owned).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    s.stop().await;
}

/// Two objects that own each other, both blocking: a foreground delete of one would have each wait
/// for the other; kube's collector makes the dependent's references non-blocking first, and so does
/// this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreground_cycle_does_not_hang() {
    let s = TestServer::start(Backend::Embedded).await;
    let a = cm(&s, "root", "cycle-a", vec![], &[]).await;
    let b = cm(&s, "root", "cycle-b", vec![owner_ref(&a, true)], &[]).await;
    let path_a = format!("{}/cycle-a", cms("root"));
    let (code, _) = s
        .patch(
            &path_a,
            "application/merge-patch+json",
            &json!({"metadata": {"ownerReferences": [owner_ref(&b, true)]}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.req(reqwest::Method::DELETE, &format!("{path_a}?propagationPolicy=Foreground"), None, None).await;
    assert_eq!(code, StatusCode::OK);
    gone(&s, &path_a, "the owner of a cycle").await;
    gone(&s, &format!("{}/cycle-b", cms("root")), "its dependent and owner").await;
    s.stop().await;
}

/// An orphaning delete pending when a leader starts: its owner is listed before its dependents'
/// collection (ConfigMaps before Secrets), and the dependents must be orphaned, not collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pending_orphan_delete_is_finished_by_the_next_leader() {
    let s = TestServer::start(Backend::Etcd).await;
    let owner = cm(&s, "root", "orphaner", vec![], &[]).await;
    let secrets = "/api/v1/namespaces/default/secrets";
    for i in 0..5 {
        let secret = json!({"metadata": {"name": format!("kept-{i}"), "ownerReferences": [owner_ref(&owner, false)]}});
        create(&s, secrets, secret).await;
    }
    let prefix = s.running_prefix();
    let data = s.stop().await;
    // Marked as an orphaning delete marks it, while no collector runs.
    let store = kgate::storage::etcd::EtcdStore::connect(&[common::shared_etcd().to_string()], &Default::default())
        .await
        .unwrap();
    let key = format!("{prefix}/core/configmaps/root/default/orphaner");
    let kv = kgate::storage::Store::get(&store, &key).await.unwrap().unwrap();
    let mut stored: Value = serde_json::from_slice(&kv.value).unwrap();
    stored["metadata"]["deletionTimestamp"] = json!("2026-12-07T00:00:00Z");
    stored["metadata"]["finalizers"] = json!(["orphan"]);
    kgate::storage::Store::update(&store, &key, serde_json::to_vec(&stored).unwrap(), kv.mod_revision).await.unwrap();
    let s = TestServer::start_in(Backend::Etcd, data, prefix).await;
    gone(&s, &format!("{}/orphaner", cms("root")), "the orphaning owner").await;
    for i in 0..5 {
        let (code, secret) = s.get(&format!("{secrets}/kept-{i}")).await;
        assert_eq!(code, StatusCode::OK, "an orphaned dependent stays: {secret}");
        assert!(secret["metadata"].get("ownerReferences").is_none(), "{secret}");
    }
    s.stop().await;
}

/// More dependents than one read gathers: every one goes, in background and in foreground.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn owners_of_more_dependents_than_one_read_takes() {
    let s = TestServer::start(Backend::Embedded).await;
    for policy in ["Background", "Foreground"] {
        let tag = policy.to_lowercase();
        let owner = cm(&s, "root", &format!("many-{tag}"), vec![], &[]).await;
        let refs = vec![owner_ref(&owner, true)];
        let made = futures::future::join_all((0..1_100).map(|i| {
            let obj = json!({"metadata": {"name": format!("many-{tag}-{i}"), "ownerReferences": refs}});
            let path = cms("root");
            let s = &s;
            async move { s.post(&path, &obj).await.0 }
        }))
        .await;
        assert!(made.iter().all(|c| *c == StatusCode::CREATED));
        let path = format!("{}/many-{tag}?propagationPolicy={policy}", cms("root"));
        assert_eq!(s.req(reqwest::Method::DELETE, &path, None, None).await.0, StatusCode::OK);
        eventually(60, "every dependent to go", || async {
            let list = s.get(&format!("{}?limit=2000", cms("root"))).await.1;
            let left = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["metadata"]["name"].as_str().unwrap().starts_with(&format!("many-{tag}")));
            left.count() == 0
        })
        .await;
    }
    s.stop().await;
}

/// Foreground owners deleted together go only after their blocking dependents, never before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn foreground_owners_outlive_their_blocking_dependents() {
    let s = TestServer::start(Backend::Embedded).await;
    let mut owners = Vec::new();
    for o in 0..10 {
        let owner = cm(&s, "root", &format!("fg-owner-{o}"), vec![], &[]).await;
        for i in 0..20 {
            cm(&s, "root", &format!("fg-dep-{o}-{i}"), vec![owner_ref(&owner, true)], &[]).await;
        }
        owners.push(owner);
    }
    let deletes = (0..10).map(|o| {
        let path = format!("{}/fg-owner-{o}?propagationPolicy=Foreground", cms("root"));
        let s = &s;
        async move { s.req(reqwest::Method::DELETE, &path, None, None).await.0 }
    });
    assert!(futures::future::join_all(deletes).await.iter().all(|c| *c == StatusCode::OK));
    for o in 0..10 {
        gone(&s, &format!("{}/fg-owner-{o}", cms("root")), "an owner").await;
        for i in 0..20 {
            let dep = format!("{}/fg-dep-{o}-{i}", cms("root"));
            assert!(!exists(&s, &dep).await, "{dep} is still there after its foreground owner went");
        }
    }
    s.stop().await;
}
