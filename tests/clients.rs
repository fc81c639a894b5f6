//! Real client libraries against kgate: the Python `kubernetes` client (typed and DynamicClient) and
//! the Rust `kube` crate (typed Api, discovery, watcher), for root and for a second logical cluster.

mod common;

use std::time::Duration;

use common::{Backend, TestServer};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn python_client_and_dynamic_client() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("py-team").await;
    let check = std::process::Command::new("python3").args(["-c", "import kubernetes"]).output().expect("python3 runs");
    assert!(
        check.status.success(),
        "the Python `kubernetes` package is required: pip install kubernetes==37.0.2 (or run ./scripts/test.sh)"
    );
    let kc = s.kubeconfig();
    let url = s.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/clients.py"))
            .env("KGATE_KUBECONFIG", kc)
            .env("KGATE_CLUSTER", "py-team")
            .env("KGATE_URL", url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    s.stop().await;
}

async fn kube_client(s: &TestServer, cluster: Option<&str>) -> Client {
    let path = match cluster {
        Some(c) => s.kubeconfig_for(c),
        None => s.kubeconfig(),
    };
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    Client::try_from(cfg).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_rs_typed_api_discovery_and_watcher() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("rs-team").await;
    for cluster in [None, Some("rs-team")] {
        let client = kube_client(&s, cluster).await;
        let disc = kube::Discovery::new(client.clone()).run().await.expect("legacy discovery succeeds for every group");
        assert!(disc.groups().any(|g| g.name() == "apps"));
        let agg = kube::Discovery::new(client.clone()).run_aggregated().await.expect("aggregated discovery");
        assert!(agg.groups().any(|g| g.name() == "rbac.authorization.k8s.io"));

        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("rs".into());
        cm.data = Some([("k".to_string(), "v".to_string())].into());
        cms.create(&PostParams::default(), &cm).await.unwrap();
        let got = cms.get("rs").await.unwrap();
        let expected_cluster = cluster.unwrap_or("root");
        assert_eq!(got.metadata.annotations.unwrap()["kgate.dev/cluster"], expected_cluster);
        let applied = cms
            .patch(
                "rs",
                &PatchParams::apply("rs-test").force(),
                &Patch::Apply(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "w"}})),
            )
            .await
            .unwrap();
        assert_eq!(applied.data.unwrap()["k"], "w");

        // The watcher relists and streams; it sees a create made after it started.
        let stream = watcher(cms.clone(), watcher::Config::default()).boxed();
        let writer = cms.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some("rs-late".into());
            writer.create(&PostParams::default(), &cm).await.unwrap();
        });
        let mut stream = stream;
        let seen = tokio::time::timeout(Duration::from_secs(15), async {
            while let Some(ev) = stream.try_next().await.unwrap() {
                if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = ev {
                    if o.metadata.name.as_deref() == Some("rs-late") {
                        return o.metadata.name;
                    }
                }
            }
            None
        })
        .await
        .expect("watcher delivers in time");
        assert_eq!(seen.as_deref(), Some("rs-late"));

        let list = cms.list(&ListParams::default().limit(1)).await.unwrap();
        assert_eq!(list.items.len(), 1);
        assert!(list.metadata.continue_.is_some());
        cms.delete("rs", &DeleteParams::default()).await.unwrap();
        cms.delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
        // Only the CA ConfigMap is left: kgate publishes it again at once, as kube's publisher does.
        let left: Vec<Option<String>> =
            cms.list(&ListParams::default()).await.unwrap().items.into_iter().map(|c| c.metadata.name).collect();
        assert_eq!(left, [Some("kube-root-ca.crt".to_string())]);
    }

    // An administrator's watcher across every cluster (`/clusters/*`) sees writes in each, labelled.
    let all: Api<ConfigMap> = Api::all(kube_client(&s, Some("*")).await);
    let mut stream = watcher(all, watcher::Config::default()).boxed();
    for (i, cluster) in [None, Some("rs-team")].into_iter().enumerate() {
        let cms: Api<ConfigMap> = Api::namespaced(kube_client(&s, cluster).await, "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("rs-all-{i}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), async {
        while seen.len() < 2 {
            if let Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = stream.try_next().await.unwrap() {
                let name = o.metadata.name.clone().unwrap_or_default();
                if name.starts_with("rs-all-") {
                    seen.push((name, o.metadata.annotations.unwrap()["kgate.dev/cluster"].clone()));
                }
            }
        }
    })
    .await
    .expect("the wildcard watcher delivers in time");
    seen.sort();
    assert_eq!(seen, [("rs-all-0".into(), "root".into()), ("rs-all-1".into(), "rs-team".into())]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_rs_custom_resources_by_discovery() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::DynamicObject;
    use kube::runtime::wait::{await_condition, conditions};

    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("rs-team").await;
    let client = kube_client(&s, Some("rs-team")).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = await_condition(crds, "gizmos.example.com", conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(15), established).await.expect("established in time").unwrap();

    // A controller finds the kind by discovery and works with it as a dynamic object.
    let disc = kube::Discovery::new(client.clone()).run_aggregated().await.unwrap();
    let (ar, caps) = disc.resolve_gvk(&kube::api::GroupVersionKind::gvk("example.com", "v1", "Gizmo")).expect("found");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let gizmos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let all: Api<DynamicObject> = Api::all_with(kube_client(&s, Some("*")).await, &ar);
    let mut everywhere = watcher(all, watcher::Config::default()).boxed();
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g1"}, "spec": {"free": ["form"]}
    }))
    .unwrap();
    gizmos.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(gizmos.get("g1").await.unwrap().data["spec"]["free"][0], "form");
    let seen = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            if let Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = everywhere.try_next().await.unwrap()
            {
                return (o.metadata.name.unwrap(), o.metadata.annotations.unwrap()["kgate.dev/cluster"].clone());
            }
        }
    })
    .await
    .expect("the wildcard watcher delivers in time");
    assert_eq!(seen, ("g1".to_string(), "rs-team".to_string()));
    // Not served in root.
    let root = kube::Discovery::new(kube_client(&s, None).await).run_aggregated().await.unwrap();
    assert!(root.resolve_gvk(&kube::api::GroupVersionKind::gvk("example.com", "v1", "Gizmo")).is_none());
    s.stop().await;
}
