//! Custom resources: a logical cluster's CRDs are served in that cluster alone (discovery, OpenAPI,
//! kubectl's whole workflow, schema validation, status and scale), two clusters hold different versions
//! of one CRD side by side, a wildcard request spans the clusters whose CRD serves the version asked
//! for, and deleting a CRD, a namespace or a cluster deletes the objects with it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{eventually, keys_of, kubectl, kubectl_ok, kubectl_stdin, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// `widgets.example.com`, served at `version`, with printer columns, status and scale, and a schema in
/// which `spec.size` is an integer of at least 0 (or, with `size_type = "string"`, a string).
fn widget_crd(version: &str, size_type: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": version, "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"}
                ],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": if size_type == "integer" {
                            json!({"type": "integer", "minimum": 0, "description": "How many widgets to make."})
                        } else {
                            json!({"type": "string"})
                        },
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}
                    }},
                    "status": {"type": "object", "properties": {"size": {"type": "integer"}}}
                }}}
            }]
        }
    })
}

fn widget(version: &str, name: &str, size: Value) -> Value {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}})
}

fn yaml(v: &Value) -> String {
    serde_yaml_ng::to_string(v).unwrap()
}

fn apply(kc: &Path, v: &Value) -> (bool, String, String) {
    kubectl_stdin(kc, &["apply", "-f", "-"], Some(&yaml(v)))
}

fn names(list: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string(),
                i["metadata"]["name"].as_str().unwrap().to_string(),
                i["apiVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn triple(cluster: &str, name: &str, api_version: &str) -> (String, String, String) {
    (cluster.into(), name.into(), api_version.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_works_with_a_clusters_own_crds() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    s.create_cluster("team-b").await;
    let (a, b, root) = (s.kubeconfig_for("team-a"), s.kubeconfig_for("team-b"), s.kubeconfig());

    let (ok, out, err) = apply(&a, &widget_crd("v1", "integer"));
    assert!(ok, "{out}{err}");
    kubectl_ok(&a, &["wait", "--for", "condition=established", "--timeout=20s", "crd/widgets.example.com"]);

    // Served in team-a alone.
    assert!(kubectl_ok(&a, &["api-resources", "--api-group=example.com"]).contains("widgets"));
    for other in [&b, &root] {
        let out = kubectl_ok(other, &["api-resources", "--api-group=example.com"]);
        assert!(!out.contains("widgets"), "{out}");
        let (ok, _, err) = kubectl(other, &["get", "widgets"]);
        assert!(!ok && err.contains("doesn't have a resource type"), "{err}");
    }

    // Create with defaults, print with the CRD's columns, explain from its schema.
    let (ok, out, err) = apply(&a, &widget("v1", "w1", json!(3)));
    assert!(ok, "{out}{err}");
    let table = kubectl_ok(&a, &["get", "wd"]);
    let mut lines = table.lines();
    assert_eq!(lines.next().unwrap().split_whitespace().collect::<Vec<_>>(), ["NAME", "SIZE", "COLOR"]);
    assert_eq!(lines.next().unwrap().split_whitespace().collect::<Vec<_>>(), ["w1", "3", "red"]);
    let explain = kubectl_ok(&a, &["explain", "widget.spec.size"]);
    assert!(explain.contains("How many widgets to make."), "{explain}");

    // Bad values are refused with the fields named; unknown fields are refused under strict validation.
    let mut bad = widget("v1", "bad", json!(-1));
    bad["spec"]["color"] = json!("green");
    let (ok, _, err) = apply(&a, &bad);
    assert!(!ok, "a bad widget was accepted");
    assert!(err.contains("spec.size") && err.contains("greater than or equal to 0"), "{err}");
    assert!(err.contains("spec.color") && err.contains("supported values"), "{err}");
    let mut unknown = widget("v1", "bad", json!(1));
    unknown["spec"]["colour"] = json!("red");
    let (ok, _, err) = apply(&a, &unknown);
    assert!(!ok && err.contains("unknown field \"spec.colour\""), "{err}");
    let (ok, _, _) = kubectl(&a, &["get", "widget", "bad"]);
    assert!(!ok, "a refused widget was stored");

    // Change, diff, scale, patch (merge; strategic merge is refused as kube-apiserver does), status.
    let (ok, _, _) = apply(&a, &widget("v1", "w1", json!(5)));
    assert!(ok);
    let (_, diff, _) = kubectl_stdin(&a, &["diff", "-f", "-"], Some(&yaml(&widget("v1", "w1", json!(6)))));
    assert!(diff.contains("-  size: 5") && diff.contains("+  size: 6"), "{diff}");
    kubectl_ok(&a, &["scale", "widget", "w1", "--replicas=7"]);
    kubectl_ok(&a, &["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"color":"blue"}}"#]);
    let (ok, _, err) = kubectl(&a, &["patch", "widget", "w1", "-p", r#"{"spec":{"color":"red"}}"#]);
    assert!(!ok && err.contains("strategic-merge-patch"), "{err}");
    kubectl_ok(
        &a,
        &["patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", r#"{"status":{"size":2}}"#],
    );
    let got: Value = serde_json::from_str(&kubectl_ok(&a, &["get", "widget", "w1", "-o", "json"])).unwrap();
    assert_eq!(
        (&got["spec"]["size"], &got["spec"]["color"], &got["status"]["size"]),
        (&json!(7), &json!("blue"), &json!(2))
    );
    // Status only changes through /status.
    let mut with_status = widget("v1", "w1", json!(7));
    with_status["status"] = json!({"size": 99});
    assert!(apply(&a, &with_status).0);
    let got: Value = serde_json::from_str(&kubectl_ok(&a, &["get", "widget", "w1", "-o", "json"])).unwrap();
    assert_eq!(got["status"]["size"], 2);

    // team-b holds another version and schema of the same CRD: size is a string there.
    assert!(apply(&b, &widget_crd("v2", "string")).0);
    let (ok, out, err) = apply(&b, &widget("v2", "b1", json!("large")));
    assert!(ok, "{out}{err}");
    assert!(!apply(&a, &widget("v1", "a-str", json!("large"))).0, "team-a's schema must still apply in team-a");
    let (ok, _, err) = kubectl(&b, &["get", "widgets.v1.example.com"]);
    assert!(!ok, "team-b does not serve v1: {err}");

    // Deleting the CRD deletes its objects: re-created, it starts empty.
    kubectl_ok(&a, &["delete", "crd", "widgets.example.com", "--timeout=30s"]);
    assert!(apply(&a, &widget_crd("v1", "integer")).0);
    kubectl_ok(&a, &["wait", "--for", "condition=established", "--timeout=20s", "crd/widgets.example.com"]);
    let (ok, out, err) = kubectl(&a, &["get", "widgets"]);
    assert!(ok && out.trim().is_empty() && err.contains("No resources found"), "{out}{err}");
    // team-b's objects were not touched.
    assert!(kubectl_ok(&b, &["get", "widgets"]).contains("b1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_are_checked_and_change_discovery_and_openapi() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let base = "/clusters/team-a";

    // What kube-apiserver refuses: a built-in group, a group without a dot, a name not plural.group.
    for (group, name) in
        [("apps", "widgets.apps"), ("example", "widgets.example"), ("example.com", "gadgets.example.com")]
    {
        let mut crd = widget_crd("v1", "integer");
        crd["spec"]["group"] = json!(group);
        crd["metadata"]["name"] = json!(name);
        let (st, body) = s.post(&format!("{base}{CRDS}"), &crd).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{group}: {body}");
    }

    let etag = |s: &TestServer| {
        let url = format!("{}{base}/apis", s.url);
        let client = s.client.clone();
        async move {
            let r = client
                .get(url)
                .header("accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
                .send()
                .await
                .unwrap();
            r.headers()["etag"].to_str().unwrap().to_string()
        }
    };
    let before = etag(&s).await;
    let (st, crd) = s.post(&format!("{base}{CRDS}"), &widget_crd("v1", "integer")).await;
    assert_eq!(st, StatusCode::CREATED, "{crd}");
    assert!(crd["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .contains(&json!("customresourcecleanup.apiextensions.k8s.io")));
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    let with_widgets = etag(&s).await;
    assert_ne!(with_widgets, before, "discovery must change with the cluster's APIs");
    // A second CRD changes the cluster's cached documents again.
    let mut gadgets = widget_crd("v1", "integer");
    gadgets["metadata"]["name"] = json!("gadgets.example.com");
    gadgets["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    assert_eq!(s.post(&format!("{base}{CRDS}"), &gadgets).await.0, StatusCode::CREATED);
    assert_ne!(etag(&s).await, with_widgets, "a cached discovery document outlived a CRD change");
    let (_, list) = s.get(&format!("{base}/apis/example.com/v1")).await;
    let served: Vec<&str> = list["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert!(served.contains(&"gadgets") && served.contains(&"widgets"), "{served:?}");

    // OpenAPI v3: the group-version is published in team-a only, with the CRD's schema.
    let (_, index) = s.get(&format!("{base}/openapi/v3")).await;
    let url =
        index["paths"]["apis/example.com/v1"]["serverRelativeURL"].as_str().expect("team-a publishes example.com/v1");
    // Relative to the cluster's URL, as client-go resolves it.
    let (st, doc) = s.get(&format!("{base}{url}")).await;
    assert_eq!(st, StatusCode::OK);
    let schema = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["properties"]["size"]["type"], "integer", "{schema}");
    let (_, root_index) = s.get("/openapi/v3").await;
    assert!(root_index["paths"].get("apis/example.com/v1").is_none());

    // A CR's URL answers only where the CRD is; the wrong patch type gets 415.
    let w = format!("{base}/apis/example.com/v1/namespaces/default/widgets");
    let (st, body) = s.post(&w, &widget("v1", "w1", json!(1))).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    let (st, _) = s.get("/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, body) = s.patch(&format!("{w}/w1"), "application/strategic-merge-patch+json", &json!({})).await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");

    // CRDs survive a restart: the index is loaded before serving.
    let prefix = s.running_prefix();
    let dir = s.stop().await;
    let s = TestServer::start_in(Backend::Embedded, dir, prefix).await;
    let (st, body) = s.get(&format!("{w}/w1")).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["spec"]["color"], "red");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_spans_the_clusters_whose_crd_serves_the_version() {
    let s = TestServer::start(Backend::Etcd).await;
    for c in ["a", "b", "c"] {
        s.create_cluster(c).await;
    }
    for (c, version) in [("a", "v1"), ("b", "v1"), ("c", "v2")] {
        let (st, body) = s.post(&format!("/clusters/{c}{CRDS}"), &widget_crd(version, "integer")).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
        let url = format!("/clusters/{c}/apis/example.com/{version}/namespaces/default/widgets");
        let (st, body) = s.post(&url, &widget(version, &format!("{c}1"), json!(1))).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
    }

    let all = "/clusters/*/apis/example.com/v1/widgets";
    let (st, list) = s.get(all).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(names(&list), [triple("a", "a1", "example.com/v1"), triple("b", "b1", "example.com/v1")]);
    let (_, v2) = s.get("/clusters/*/apis/example.com/v2/widgets").await;
    assert_eq!(names(&v2), [triple("c", "c1", "example.com/v2")]);
    let (st, _) = s.get("/clusters/*/apis/example.com/v3/widgets").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) =
        s.post("/clusters/*/apis/example.com/v1/namespaces/default/widgets", &widget("v1", "x", json!(1))).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED);

    // A watch from the list: new objects in v1 clusters only, and DELETED for a deleted CRD's objects.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut events = s.watch(&format!("{all}?watch=true&resourceVersion={rv}")).await;
    for (c, version) in [("c", "v2"), ("b", "v1")] {
        let url = format!("/clusters/{c}/apis/example.com/{version}/namespaces/default/widgets");
        let (st, _) = s.post(&url, &widget(version, &format!("{c}2"), json!(2))).await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let (st, _) = s.delete(&format!("/clusters/a{CRDS}/widgets.example.com")).await;
    assert_eq!(st, StatusCode::OK);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(20), events.recv()).await.expect("event in time").unwrap();
        let o = &ev["object"];
        seen.push((
            ev["type"].as_str().unwrap().to_string(),
            o["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string(),
            o["metadata"]["name"].as_str().unwrap().to_string(),
        ));
    }
    assert_eq!(
        seen,
        [
            ("ADDED".to_string(), "b".to_string(), "b2".to_string()),
            ("DELETED".to_string(), "a".to_string(), "a1".to_string())
        ]
    );
    eventually(20, "a's CRD to go", || async {
        s.get(&format!("/clusters/a{CRDS}/widgets.example.com")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    let (_, list) = s.get(all).await;
    assert_eq!(names(&list), [triple("b", "b1", "example.com/v1"), triple("b", "b2", "example.com/v1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_and_cluster_deletion_take_custom_objects_along() {
    let s = TestServer::start(Backend::Embedded).await;
    let store = s.running_store();
    s.create_cluster("team-a").await;
    let base = "/clusters/team-a";
    let (st, _) = s.post(&format!("{base}{CRDS}"), &widget_crd("v1", "integer")).await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, _) = s.post(&format!("{base}/api/v1/namespaces"), &json!({"metadata": {"name": "ns1"}})).await;
    assert_eq!(st, StatusCode::CREATED);
    for ns in ["ns1", "default"] {
        let (st, body) =
            s.post(&format!("{base}/apis/example.com/v1/namespaces/{ns}/widgets"), &widget("v1", "w", json!(1))).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
    }
    let widget_keys = |ns: &'static str| {
        let (store, prefix) = (store.clone(), s.prefix.clone());
        async move {
            keys_of(store.as_ref(), &prefix, "team-a")
                .await
                .into_iter()
                .filter(|(k, _)| {
                    k.contains("/example.com/widgets/") && (ns.is_empty() || k.contains(&format!("/{ns}/")))
                })
                .count()
        }
    };
    assert_eq!(widget_keys("ns1").await, 1);

    let (st, _) = s.delete(&format!("{base}/api/v1/namespaces/ns1")).await;
    assert_eq!(st, StatusCode::OK);
    eventually(20, "ns1's widget to go", || async { widget_keys("ns1").await == 0 }).await;
    assert_eq!(widget_keys("default").await, 1, "other namespaces keep theirs");

    let (st, _) = s.delete("/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/team-a").await;
    assert_eq!(st, StatusCode::OK);
    eventually(30, "team-a's keys to go", || async { keys_of(store.as_ref(), &s.prefix, "team-a").await.is_empty() })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_deletion_waits_for_object_finalizers_without_holding_up_other_tenants() {
    let s = TestServer::start(Backend::Embedded).await;
    for cluster in ["team-a", "team-b"] {
        s.create_cluster(cluster).await;
        let (st, _) = s.post(&format!("/clusters/{cluster}{CRDS}"), &widget_crd("v1", "integer")).await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let widgets = |cluster: &str| format!("/clusters/{cluster}/apis/example.com/v1/namespaces/default/widgets");
    let crd = |cluster: &str| format!("/clusters/{cluster}{CRDS}/widgets.example.com");
    let mut held = widget("v1", "held", json!(1));
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let (st, body) = s.post(&widgets("team-a"), &held).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    let (st, body) = s.post(&widgets("team-b"), &widget("v1", "plain", json!(1))).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");

    // team-a's CRD waits for its held object first, then team-b's CRD goes all the same.
    assert_eq!(s.delete(&crd("team-a")).await.0, StatusCode::OK);
    eventually(10, "the held widget to be marked deleted", || async {
        s.get(&format!("{}/held", widgets("team-a"))).await.1["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert_eq!(s.delete(&crd("team-b")).await.0, StatusCode::OK);
    eventually(20, "team-b's CRD to go while team-a's waits", || async {
        s.get(&crd("team-b")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    let (st, body) = s.get(&crd("team-a")).await;
    assert_eq!(st, StatusCode::OK, "a CRD stays while its objects' finalizers do: {body}");
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    // As kube's CRD finalizer reports it.
    let terminating = body["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Terminating");
    let terminating = terminating.unwrap_or_else(|| panic!("no Terminating condition: {body}"));
    assert_eq!(
        (&terminating["status"], &terminating["reason"]),
        (&json!("True"), &json!("InstanceDeletionInProgress"))
    );
    assert!(body["status"]["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Established"));

    // Its finalizer's owner lets go: the object goes, then the CRD.
    let (st, body) = s
        .patch(
            &format!("{}/held", widgets("team-a")),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    eventually(40, "team-a's CRD to go once its object has", || async {
        s.get(&crd("team-a")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
}

/// Two clusters may define one custom resource, one namespaced and one cluster-scoped; their objects
/// share the resource's store prefix. Neither definition may stall the other cluster's watches and
/// cached reads of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_of_the_other_scope_elsewhere_leaves_watches_alone() {
    let s = TestServer::start(Backend::Embedded).await;
    for c in ["scope-a", "scope-b"] {
        s.create_cluster(c).await;
    }
    let (st, body) = s.post(&format!("/clusters/scope-a{CRDS}"), &widget_crd("v1", "integer")).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    let a = "/clusters/scope-a/apis/example.com/v1/namespaces/default/widgets";
    eventually(20, "a's widgets to be served", || async { s.get(a).await.0 == StatusCode::OK }).await;
    assert_eq!(s.post(a, &widget("v1", "a1", json!(1))).await.0, StatusCode::CREATED);
    let (st, list) = s.get(&format!("{a}?resourceVersion=0")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut events = s.watch(&format!("{a}?watch=true&resourceVersion={rv}")).await;

    let mut crd = widget_crd("v1", "integer");
    crd["spec"]["scope"] = json!("Cluster");
    let (st, body) = s.post(&format!("/clusters/scope-b{CRDS}"), &crd).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    let b = "/clusters/scope-b/apis/example.com/v1/widgets";
    eventually(20, "b's widgets to be served", || async { s.get(b).await.0 == StatusCode::OK }).await;
    let (st, body) = s.post(b, &widget("v1", "b1", json!(1))).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    assert_eq!(s.post(a, &widget("v1", "a2", json!(2))).await.0, StatusCode::CREATED);

    let ev = tokio::time::timeout(Duration::from_secs(10), events.recv()).await.expect("a's watch goes on").unwrap();
    assert_eq!((ev["type"].as_str(), ev["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("a2")));
    let cached_names = |list: &Value| -> Vec<String> {
        list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    let (st, list) = s.get(&format!("{a}?resourceVersion=0")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(cached_names(&list), ["a1", "a2"]);
    let (st, list) = s.get(&format!("{b}?resourceVersion=0")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(cached_names(&list), ["b1"]);
}

/// One tenant declares a custom resource in many versions, another declares the same group and plural
/// with another kind. One watch cache serves them all (a cache per version or kind would let a tenant
/// multiply every tenant's objects in memory by declaring versions), and each request still gets the
/// objects in its own version and kind: lists, gets and watches, with and without selectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cache_serves_a_resource_in_every_version_and_kind_declared() {
    let s = TestServer::start(Backend::Embedded).await;
    for c in ["vers-a", "vers-b"] {
        s.create_cluster(c).await;
    }
    let versions = ["v1", "v2", "v3", "v4", "v5"];
    let mut many = widget_crd("v1", "integer");
    let v1 = many["spec"]["versions"][0].clone();
    many["spec"]["versions"] = versions
        .iter()
        .map(|v| {
            let mut d = v1.clone();
            d["name"] = json!(v);
            d["storage"] = json!(*v == "v1");
            d
        })
        .collect();
    let mut gadgets = widget_crd("v1", "integer");
    gadgets["spec"]["names"] = json!({"plural": "widgets", "singular": "gadget", "kind": "Gadget"});
    for (c, crd) in [("vers-a", &many), ("vers-b", &gadgets)] {
        let (st, body) = s.post(&format!("/clusters/{c}{CRDS}"), crd).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
    }
    let at = |c: &str, v: &str| format!("/clusters/{c}/apis/example.com/{v}/namespaces/default/widgets");
    for (c, kind) in [("vers-a", "Widget"), ("vers-b", "Gadget")] {
        eventually(20, "the widgets to be served", || async { s.get(&at(c, "v1")).await.0 == StatusCode::OK }).await;
        let mut w = widget("v1", &format!("{c}-1"), json!(1));
        w["kind"] = json!(kind);
        let (st, body) = s.post(&at(c, "v1"), &w).await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
    }
    let caches = "apiserver_watch_cache_initializations_total{resource=\"customresources\"}";
    let before = s.metric(caches).await;

    let heads = |o: &Value| (o["apiVersion"].as_str().unwrap().to_string(), o["kind"].as_str().unwrap().to_string());
    let want = |v: &str, kind: &str| (format!("example.com/{v}"), kind.to_string());
    let mut watches = Vec::new();
    for v in versions {
        let (st, list) = s.get(&format!("{}?resourceVersion=0", at("vers-a", v))).await;
        assert_eq!(st, StatusCode::OK, "{list}");
        assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("WidgetList"), Some(&*want(v, "").0)));
        assert_eq!(list["items"].as_array().unwrap().iter().map(heads).collect::<Vec<_>>(), [want(v, "Widget")]);
        let (st, one) = s.get(&format!("{}/vers-a-1?resourceVersion=0", at("vers-a", v))).await;
        assert_eq!((st, heads(&one)), (StatusCode::OK, want(v, "Widget")));
        // Every other version's watch selects by label, so both ways of sending an event are covered.
        let selector = if v == "v2" || v == "v4" { "&labelSelector=app%3Dx" } else { "" };
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        watches.push((v, s.watch(&format!("{}?watch=true&resourceVersion={rv}{selector}", at("vers-a", v))).await));
    }
    let (st, list) = s.get(&format!("{}?resourceVersion=0", at("vers-b", "v1"))).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(list["items"].as_array().unwrap().iter().map(heads).collect::<Vec<_>>(), [want("v1", "Gadget")]);
    // Across clusters at v1: those whose CRD serves v1 with the first one's kind.
    let (st, list) = s.get("/clusters/*/apis/example.com/v1/widgets?resourceVersion=0").await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(names(&list), [triple("vers-a", "vers-a-1", "example.com/v1")]);

    let mut w = widget("v3", "vers-a-2", json!(2));
    w["metadata"]["labels"] = json!({"app": "x"});
    let (st, body) = s.post(&at("vers-a", "v3"), &w).await;
    assert_eq!(st, StatusCode::CREATED, "{body}");
    for (v, events) in &mut watches {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.recv()).await.expect("event in time").unwrap();
        assert_eq!(ev["type"], "ADDED", "{v}: {ev}");
        assert_eq!(ev["object"]["metadata"]["name"], "vers-a-2", "{v}: {ev}");
        assert_eq!(heads(&ev["object"]), want(v, "Widget"), "{v}: {ev}");
    }
    // Leaving the selection, then going: each watch's events are in its own version.
    let (st, body) = s
        .patch(
            &format!("{}/vers-a-2", at("vers-a", "v1")),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": null}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(s.delete(&format!("{}/vers-a-2", at("vers-a", "v5"))).await.0, StatusCode::OK);
    for (v, events) in &mut watches {
        let selected = *v == "v2" || *v == "v4";
        let expected: &[&str] = if selected { &["DELETED"] } else { &["MODIFIED", "DELETED"] };
        for kind in expected {
            let ev =
                tokio::time::timeout(Duration::from_secs(10), events.recv()).await.expect("event in time").unwrap();
            assert_eq!(ev["type"], *kind, "{v}: {ev}");
            assert_eq!(heads(&ev["object"]), want(v, "Widget"), "{v}: {ev}");
        }
    }
    // A Table with whole objects in its rows, also in the version asked for.
    let table = s
        .client
        .get(format!("{}{}?resourceVersion=0&includeObject=Object", s.url, at("vers-a", "v4")))
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(heads(&table["rows"][0]["object"]), want("v4", "Widget"), "{table}");
    assert_eq!(s.metric(caches).await - before, 1.0, "one cache for every version and kind of widgets");
}

/// `selectableFields` (GA in kube 1.32): a CRD's own field selectors in lists and watches, checked as
/// kube checks them; another cluster's CRD of the same name without them refuses the selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn selectable_fields_of_a_crd_select_in_lists_and_watches() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("sel-b").await;
    let mut crd = widget_crd("v1", "integer");
    crd["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]);
    let mut bad = crd.clone();
    bad["spec"]["versions"][0]["selectableFields"] = json!([
        {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}, {"jsonPath": ".metadata.name"},
        {"jsonPath": ".spec"}, {"jsonPath": ".spec.missing"}, {"jsonPath": "spec.size"}, {"jsonPath": ""},
        {"jsonPath": ".spec.a"}, {"jsonPath": ".spec.b"}]);
    let (code, body) = s.post(CRDS, &bad).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let messages: Vec<&str> =
        body["details"]["causes"].as_array().unwrap().iter().map(|c| c["message"].as_str().unwrap()).collect();
    for want in [
        "Too many: 9: must have at most 8 items",
        "Duplicate value: \".spec.color\"",
        "must not point to fields in metadata",
        "must point to a field of type string, boolean or integer",
        "does not refer to a valid field",
        "must be a simple json path",
        "Required value",
    ] {
        assert!(messages.iter().any(|m| m.contains(want)), "{want:?} in {messages:?}");
    }
    assert_eq!(s.post(CRDS, &crd).await.0, StatusCode::CREATED);
    assert_eq!(s.post(&format!("/clusters/sel-b{CRDS}"), &widget_crd("v1", "integer")).await.0, StatusCode::CREATED);
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    eventually(10, "the CRD to serve", || async { s.get(widgets).await.0 == StatusCode::OK }).await;
    let mut watch = s.watch(&format!("{widgets}?watch=true&fieldSelector=spec.color%3Dblue")).await;
    for (name, color, size) in [("a", "red", 1), ("b", "blue", 2), ("c", "blue", 3)] {
        let mut w = widget("v1", name, json!(size));
        w["spec"]["color"] = json!(color);
        assert_eq!(s.post(widgets, &w).await.0, StatusCode::CREATED);
    }
    let listed = s.get(&format!("{widgets}?fieldSelector=spec.color%3Dblue,spec.size!%3D3")).await.1;
    let names: Vec<&str> =
        listed["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b"], "{listed}");
    let by_int = s.get(&format!("{widgets}?fieldSelector=spec.size%3D1&resourceVersion=0")).await.1;
    assert_eq!(by_int["items"][0]["metadata"]["name"], "a", "an integer field, from the cache: {by_int}");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(5), watch.recv()).await.expect("an event").unwrap();
        seen.push((
            ev["type"].as_str().unwrap().to_string(),
            ev["object"]["metadata"]["name"].as_str().unwrap().to_string(),
        ));
    }
    assert_eq!(seen, [("ADDED".to_string(), "b".to_string()), ("ADDED".to_string(), "c".to_string())]);
    // Leaving the selection is a DELETED, as for built-in fields.
    let (code, _) =
        s.patch(&format!("{widgets}/b"), "application/merge-patch+json", &json!({"spec": {"color": "red"}})).await;
    assert_eq!(code, StatusCode::OK);
    let ev = tokio::time::timeout(Duration::from_secs(5), watch.recv()).await.expect("an event").unwrap();
    assert_eq!((ev["type"].as_str(), ev["object"]["metadata"]["name"].as_str()), (Some("DELETED"), Some("b")));
    let (code, body) = s.get(&format!("/clusters/sel-b{widgets}?fieldSelector=spec.color%3Dblue")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "sel-b's CRD has no selectable fields: {body}");
    s.stop().await;
}
