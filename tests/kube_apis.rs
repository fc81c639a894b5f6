//! The default API of kube-apiserver 1.33 as clients meet it: every group a real install uses, the
//! subresources that act (binding, eviction) or refuse (exec, log), access reviews answered from the
//! cluster's RBAC, and real operators' manifests applied by kubectl.

mod common;

use std::path::Path;
use std::process::Command;

use base64::Engine;

use common::{kubectl_ok, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::json;

/// Kinds that real installs create and that kgate once refused with "no matches for kind".
const INSTALLED_KINDS: &[(&str, &str, &str)] = &[
    ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
    ("apiregistration.k8s.io/v1", "apiservices", "APIService"),
    ("certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io/v1", "flowschemas", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "PriorityLevelConfiguration"),
    ("node.k8s.io/v1", "runtimeclasses", "RuntimeClass"),
    ("storage.k8s.io/v1", "csidrivers", "CSIDriver"),
    ("storage.k8s.io/v1", "csinodes", "CSINode"),
    ("storage.k8s.io/v1", "volumeattachments", "VolumeAttachment"),
    ("networking.k8s.io/v1", "ipaddresses", "IPAddress"),
    ("networking.k8s.io/v1", "servicecidrs", "ServiceCIDR"),
    ("v1", "nodes", "Node"),
    ("v1", "persistentvolumes", "PersistentVolume"),
];

fn path_of(api_version: &str) -> String {
    if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    }
}

/// Every resource discovery lists can be listed, and the kinds installs need are there with kube's
/// discovery facts (storage version hash, short names, categories, subresources).
#[tokio::test]
async fn every_discovered_resource_is_served_with_kubes_discovery_facts() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let base = "/clusters/team-a";
    for (gv, plural, kind) in INSTALLED_KINDS {
        let (code, list) = s.get(&format!("{base}{}", path_of(gv))).await;
        assert_eq!(code, StatusCode::OK, "{gv}: {list}");
        let r = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == *plural);
        let r = r.unwrap_or_else(|| panic!("{plural} missing from {gv}: {list}"));
        assert_eq!(r["kind"], *kind);
        assert!(r["storageVersionHash"].as_str().is_some_and(|h| h.len() == 12), "{r}");
    }
    let (_, core) = s.get(&format!("{base}/api/v1")).await;
    let names: Vec<&str> = core["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    for sub in
        ["pods/eviction", "pods/binding", "pods/exec", "pods/log", "pods/ephemeralcontainers", "namespaces/finalize"]
    {
        assert!(names.contains(&sub), "{sub} missing: {names:?}");
    }
    let eviction = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods/eviction").unwrap();
    assert_eq!(
        (&eviction["group"], &eviction["version"], &eviction["kind"]),
        (&json!("policy"), &json!("v1"), &json!("Eviction"))
    );
    // kube's published hash for apps/v1 Deployment, which clients compare across restarts.
    let (_, apps) = s.get(&format!("{base}/apis/apps/v1")).await;
    let deploy = apps["resources"].as_array().unwrap().iter().find(|r| r["name"] == "deployments").unwrap();
    assert_eq!(deploy["storageVersionHash"], "8aSe+NMegvE=");
    let (_, cert) = s.get(&format!("{base}/apis/certificates.k8s.io/v1")).await;
    let csr: Vec<&str> = cert["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(
        csr,
        ["certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"]
    );

    // Every listable resource of every served group-version lists.
    let (_, groups) = s.get(&format!("{base}/apis")).await;
    let mut gvs = vec!["v1".to_string()];
    for g in groups["groups"].as_array().unwrap() {
        for v in g["versions"].as_array().unwrap() {
            gvs.push(v["groupVersion"].as_str().unwrap().to_string());
        }
    }
    let mut listed = 0;
    let mut subresources = 0;
    for gv in gvs {
        let (_, doc) = s.get(&format!("{base}{}", path_of(&gv))).await;
        let (code, openapi) = s.get(&format!("{base}/openapi/v3{}", path_of(&gv))).await;
        assert_eq!(code, StatusCode::OK, "{gv}");
        for r in doc["resources"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            // Every subresource discovery lists has its path in the group-version's OpenAPI, with an
            // operation for each verb it serves.
            if let Some((parent, sub)) = name.split_once('/') {
                let ns = if r["namespaced"] == true { "/namespaces/{namespace}" } else { "" };
                let path = format!("{}{ns}/{parent}/{{name}}/{sub}", path_of(&gv));
                let item = &openapi["paths"][&path];
                for verb in r["verbs"].as_array().unwrap() {
                    let method = match verb.as_str().unwrap() {
                        "create" => "post",
                        "update" => "put",
                        other => other,
                    };
                    assert!(item[method]["operationId"].is_string(), "{gv} {name}: no {method} at {path}: {item}");
                }
                subresources += 1;
            }
            if name.contains('/') || !r["verbs"].as_array().unwrap().contains(&json!("list")) {
                continue;
            }
            let (code, list) = s.get(&format!("{base}{}/{name}", path_of(&gv))).await;
            assert_eq!(code, StatusCode::OK, "{gv} {name}: {list}");
            assert_eq!(list["kind"], format!("{}List", r["kind"].as_str().unwrap()), "{gv} {name}");
            listed += 1;
        }
    }
    assert!(listed >= 50, "only {listed} resources listed");
    assert!(subresources >= 30, "only {subresources} subresources published");
    let (_, core) = s.get(&format!("{base}/openapi/v3/api/v1")).await;
    let post = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"];
    assert_eq!(post["operationId"], "createCoreV1NamespacedPodEviction", "{post}");
    assert_eq!(
        post["x-kubernetes-group-version-kind"],
        json!({"group": "policy", "kind": "Eviction", "version": "v1"})
    );
    let exec = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/exec"];
    assert_eq!(
        (&exec["get"]["operationId"], &exec["get"]["x-kubernetes-action"]),
        (&json!("connectCoreV1GetNamespacedPodExec"), &json!("connect"))
    );
    s.stop().await;
}

/// A webhook configuration is stored and validated as kube validates its type, never called.
#[tokio::test]
async fn webhook_configurations_are_stored_and_type_checked() {
    let s = TestServer::start(Backend::Embedded).await;
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let hook = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "guard"},
        "webhooks": [{"name": "guard.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "clientConfig": {"service": {"namespace": "default", "name": "guard", "path": "/check"}},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}]});
    let (code, created) = s.post(path, &hook).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    // Not called: a pod is still created although the webhook's service does not exist.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let (code, _) = s.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(code, StatusCode::CREATED);
    let mut bad = hook.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["webhooks"][0]["timeoutSeconds"] = json!("ten");
    let (code, err) = s.post(path, &bad).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{err}");
    assert!(err["message"].as_str().unwrap().contains("cannot unmarshal string"), "{err}");
    let (code, _) = s.get(&format!("{path}/bad")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    // kubectl get prints kube's columns for it.
    let table: serde_json::Value = s
        .client
        .get(format!("{}{path}", s.url))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Name", "Webhooks", "Age"]);
    assert_eq!((&table["rows"][0]["cells"][0], &table["rows"][0]["cells"][1]), (&json!("guard"), &json!(1)), "{table}");
    s.stop().await;
}

#[tokio::test]
async fn cluster_level_kinds_of_real_installs_are_accepted_and_checked() {
    let s = TestServer::start(Backend::Embedded).await;
    // (path, a valid object as installs write it, a field made wrong, what kube says of it)
    let cases = [
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "replicas"},
                "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                    "validations": [{"expression": "object.spec.replicas <= 5"}]}}),
            ("/spec/validations/0/expression", json!("")),
            "spec.validations[0].expression: Required value: expression is not specified",
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "replicas"},
                "spec": {"policyName": "replicas", "validationActions": ["Deny"]}}),
            ("/spec/validationActions", json!(["Deny", "Warn"])),
            "must not contain both Deny and Warn",
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "batch"},
                "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}),
            ("/spec/type", json!("Exempt")),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "batch"},
                "spec": {"priorityLevelConfiguration": {"name": "batch"}, "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                    "rules": [{"subjects": [{"kind": "Group", "group": {"name": "batch"}}],
                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}}),
            ("/spec/matchingPrecedence", json!(20000)),
            "spec.matchingPrecedence: Invalid value: 20000: must not be greater than 10000",
        ),
        (
            "/apis/storage.k8s.io/v1/csidrivers",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "ebs.csi.aws.com"},
                "spec": {"attachRequired": true, "podInfoOnMount": false, "fsGroupPolicy": "File"}}),
            ("/spec/fsGroupPolicy", json!("Sometimes")),
            "spec.fsGroupPolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            "/apis/storage.k8s.io/v1/csinodes",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-1"},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0123", "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}]}}),
            ("/spec/drivers/0/nodeID", json!("")),
            "spec.drivers[0].nodeID: Required value",
        ),
        (
            "/apis/storage.k8s.io/v1/volumeattachments",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "csi-1"},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}}),
            ("/spec/nodeName", json!("Node_1")),
            "spec.nodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain",
        ),
        (
            "/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap-1"},
                "storageClassName": "fast", "capacity": "10Gi"}),
            ("/storageClassName", json!("Fast!")),
            "storageClassName: Invalid value: \"Fast!\"",
        ),
        (
            "/apis/networking.k8s.io/v1/ipaddresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "2001:db8::1"},
                "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "web"}}}),
            ("/metadata/name", json!("2001:db8:0::1")),
            "metadata.name: Invalid value: \"2001:db8:0::1\": must be in canonical form (\"2001:db8::1\")",
        ),
        (
            "/apis/networking.k8s.io/v1/servicecidrs",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                "spec": {"cidrs": ["10.100.0.0/16"]}}),
            ("/spec/cidrs/0", json!("10.100.0.1/16")),
            "must not have bits set beyond the prefix length",
        ),
    ];
    for (path, obj, (pointer, wrong), says) in cases {
        let (code, made) = s.post(path, &obj).await;
        assert_eq!(code, StatusCode::CREATED, "{path}: {made}");
        let mut bad = obj.clone();
        *bad.pointer_mut(pointer).unwrap() = wrong;
        if pointer != "/metadata/name" {
            bad["metadata"]["name"] = json!("bad");
        }
        let (code, st) = s.post(path, &bad).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {st}");
        assert!(st["message"].as_str().unwrap().contains(says), "{path}: {st}");
        let name = bad["metadata"]["name"].as_str().unwrap();
        assert_eq!(s.get(&format!("{path}/{name}")).await.0, StatusCode::NOT_FOUND, "{path}: refused, so not stored");
    }
    s.stop().await;
}

#[tokio::test]
async fn pods_are_bound_and_evicted_and_what_needs_a_kubelet_is_refused_clearly() {
    let s = TestServer::start(Backend::Embedded).await;
    let pods = "/api/v1/namespaces/default/pods";
    for name in ["a", "b"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert_eq!(s.post(pods, &pod).await.0, StatusCode::CREATED);
    }
    let binding = |pod: &str, node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}});
    let (code, st) = s.post(&format!("{pods}/a/binding"), &binding("a", "n1")).await;
    assert_eq!((code, &st["status"]), (StatusCode::CREATED, &json!("Success")), "{st}");
    assert_eq!(s.get(&format!("{pods}/a")).await.1["spec"]["nodeName"], "n1");
    let (code, st) = s.post(&format!("{pods}/a/binding"), &binding("a", "n2")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{st}");
    let (code, st) = s.post(&format!("{pods}/b/binding"), &binding("a", "n2")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "the Binding names another pod: {st}");
    assert_eq!(s.get(&format!("{pods}/a")).await.1["spec"]["nodeName"], "n1");
    // The older form names the pod in the Binding; any other shape of its URL binds nothing (RBAC
    // checked the verb that URL asked for, so it must not act).
    for path in ["/api/v1/namespaces/default/bindings/b", "/api/v1/namespaces/default/bindings/b/status"] {
        let (code, _) = s.post(path, &binding("b", "n9")).await;
        assert!(code == StatusCode::NOT_FOUND || code == StatusCode::METHOD_NOT_ALLOWED, "{path}: {code}");
    }
    let (code, _) = s.put("/api/v1/namespaces/default/bindings/b/x", &binding("b", "n9")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(s.get(&format!("{pods}/b")).await.1["spec"].get("nodeName").is_none());
    let (code, _) = s.post("/api/v1/namespaces/default/bindings", &binding("b", "n3")).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(s.get(&format!("{pods}/b")).await.1["spec"]["nodeName"], "n3");

    for sub in ["exec", "log", "attach", "portforward", "proxy"] {
        let (code, st) = s.get(&format!("{pods}/a/{sub}")).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{sub}: {st}");
        assert!(st["message"].as_str().unwrap().contains("runs no workloads"), "{st}");
    }
    let (code, _) = s.get(&format!("{pods}/nope/log")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = s.get("/api/v1/namespaces/default/services/nope/proxy").await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}});
    let (code, st) = s.post(&format!("{pods}/a/eviction?dryRun=All"), &eviction).await;
    assert_eq!(code, StatusCode::CREATED, "{st}");
    assert_eq!(s.get(&format!("{pods}/a")).await.0, StatusCode::OK, "a dry-run eviction deletes nothing");
    let (code, st) = s.post(&format!("{pods}/a/eviction"), &eviction).await;
    assert_eq!((code, &st["status"]), (StatusCode::CREATED, &json!("Success")), "{st}");
    assert_eq!(s.get(&format!("{pods}/a")).await.0, StatusCode::NOT_FOUND);
    s.stop().await;
}

/// A pod's QoS class is kube's, from its containers' requests and limits (requests defaulted from
/// limits first), and a resize that would change it is refused, as kube refuses it.
#[tokio::test]
async fn a_pods_qos_class_is_computed_and_no_resize_changes_it() {
    let s = TestServer::start(Backend::Embedded).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, resources: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}})
    };
    let limits = json!({"limits": {"cpu": "500m", "memory": "256Mi"}});
    for (name, resources, class) in [
        ("none", json!({}), "BestEffort"),
        ("limited", limits.clone(), "Guaranteed"),
        ("requested", json!({"requests": {"cpu": "100m"}}), "Burstable"),
    ] {
        let (code, created) = s.post(pods, &pod(name, resources)).await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
        assert_eq!(created["status"]["qosClass"], class, "{name}");
        assert_eq!(s.get(&format!("{pods}/{name}")).await.1["status"]["qosClass"], class, "{name}: as stored");
    }
    let merge = "application/strategic-merge-patch+json";
    let resize = |cpu: &str, memory: &str| json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}}]}});
    let (code, st) = s.patch(&format!("{pods}/limited/resize"), merge, &resize("1", "512Mi")).await;
    assert_eq!(code, StatusCode::OK, "still Guaranteed: {st}");
    let only_requests = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}});
    let (code, st) = s.patch(&format!("{pods}/limited/resize"), merge, &only_requests).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    let says = "spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing";
    assert!(st["message"].as_str().unwrap().contains(says), "{st}");
    let stored = s.get(&format!("{pods}/limited")).await.1;
    assert_eq!(
        stored["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1",
        "the refused resize changed nothing"
    );
    let (code, st) = s.patch(&format!("{pods}/none/resize"), merge, &resize("1", "1Gi")).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "a BestEffort pod gains no resources: {st}");
    s.stop().await;
}

/// An eviction asks the pod's PodDisruptionBudget, as kube's eviction subresource does: a running, ready
/// pod goes only while its budget allows a disruption, which the eviction spends; pods not running, or
/// not ready while the application is healthy, go without spending; two budgets over one pod refuse.
#[tokio::test]
async fn evictions_spend_the_pods_disruption_budget() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let pods = "/api/v1/namespaces/default/pods";
        let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
        let pod = |name: &str, app: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        };
        // As a kubelet reports them: running, and ready or not.
        let run = |name: &'static str, ready: bool| {
            let s = &s;
            async move {
                let mut p = s.get(&format!("{pods}/{name}")).await.1;
                let cond = if ready { "True" } else { "False" };
                p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": cond}]});
                assert_eq!(s.put(&format!("{pods}/{name}/status"), &p).await.0, StatusCode::OK);
            }
        };
        for (name, app) in [("web-0", "web"), ("web-1", "web"), ("web-2", "web"), ("web-3", "web"), ("lone", "db")] {
            assert_eq!(s.post(pods, &pod(name, app)).await.0, StatusCode::CREATED);
        }
        for (name, ready) in [("web-0", true), ("web-1", true), ("web-2", false), ("lone", true)] {
            run(name, ready).await;
        }
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
        assert_eq!(s.post(pdbs, &pdb).await.0, StatusCode::CREATED);
        let evict = |name: &'static str| {
            let s = &s;
            async move {
                let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
                s.post(&format!("{pods}/{name}/eviction"), &body).await
            }
        };

        // The budget's controller has not seen it yet: nothing covered by it goes.
        let (code, st) = evict("web-0").await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{backend:?}: {st}");
        assert_eq!(st["details"]["retryAfterSeconds"], 10, "{st}");
        assert_eq!(st["details"]["causes"][0]["reason"], "DisruptionBudget", "{st}");
        // What a disruption controller writes: two healthy, one needed, one disruption allowed.
        let mut b = s.get(&format!("{pdbs}/web")).await.1;
        b["status"] = json!({"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 2,
            "desiredHealthy": 1, "expectedPods": 2});
        assert_eq!(s.put(&format!("{pdbs}/web/status"), &b).await.0, StatusCode::OK);
        // A finalizer keeps the evicted pod in sight, to read the condition the eviction leaves.
        let hold = json!({"metadata": {"finalizers": ["example.com/hold"]}});
        let merge = "application/merge-patch+json";
        assert_eq!(s.patch(&format!("{pods}/web-0"), merge, &hold).await.0, StatusCode::OK);

        let (code, st) = evict("web-0").await;
        assert_eq!((code, &st["status"]), (StatusCode::CREATED, &json!("Success")), "{backend:?}: {st}");
        let gone = s.get(&format!("{pods}/web-0")).await.1;
        assert!(gone["metadata"]["deletionTimestamp"].is_string(), "{gone}");
        let target = gone["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "DisruptionTarget");
        assert_eq!(target.map(|c| &c["reason"]), Some(&json!("EvictionByEvictionAPI")), "{gone}");
        let b = s.get(&format!("{pdbs}/web")).await.1;
        assert_eq!(b["status"]["disruptionsAllowed"], 0, "{b}");
        assert!(b["status"]["disruptedPods"]["web-0"].is_string(), "{b}");
        assert_eq!(b["status"]["conditions"][0]["reason"], "InsufficientPods", "{b}");

        // Spent: the next ready pod stays, with kube's words.
        let (code, st) = evict("web-1").await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{st}");
        assert_eq!(st["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
        assert_eq!(
            st["details"]["causes"][0]["message"],
            "The disruption budget web needs 1 healthy pods and has 2 currently"
        );
        assert_eq!(s.get(&format!("{pods}/web-1")).await.0, StatusCode::OK);
        // An unready pod while the application is healthy, a pod not yet running, and a pod no budget
        // covers all go, and spend nothing.
        for name in ["web-2", "web-3", "lone"] {
            let (code, st) = evict(name).await;
            assert_eq!(code, StatusCode::CREATED, "{backend:?} {name}: {st}");
            assert_eq!(s.get(&format!("{pods}/{name}")).await.0, StatusCode::NOT_FOUND, "{name}");
        }
        assert_eq!(s.get(&format!("{pdbs}/web")).await.1["status"]["disruptionsAllowed"], 0);

        // Two budgets over one pod: the eviction cannot tell which to spend.
        let mut second = pdb.clone();
        second["metadata"]["name"] = json!("web-too");
        assert_eq!(s.post(pdbs, &second).await.0, StatusCode::CREATED);
        let (code, st) = evict("web-1").await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{st}");
        assert!(st["message"].as_str().unwrap().contains("more than one PodDisruptionBudget"), "{st}");
        assert_eq!(s.get(&format!("{pods}/web-1")).await.0, StatusCode::OK);
        s.stop().await;
    }
}

/// Built-in objects are checked as kube validates their types, not only their schema's types: what
/// kubectl shows is kube's message, with kube's field paths, and nothing is stored. A status write to
/// an object is judged by its status alone.
#[tokio::test]
async fn built_in_objects_are_validated_as_kube_validates_them() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let kc = s.kubeconfig_for("team-a");
    let manifest = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]
"#;
    let (applied, _, err) = tokio::task::spawn_blocking({
        let kc = kc.clone();
        move || common::kubectl_stdin(&kc, &["apply", "-f", "-"], Some(manifest))
    })
    .await
    .unwrap();
    assert!(!applied);
    assert!(
        err.contains(r#"The Deployment "web" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"api"}: `selector` does not match template `labels`"#),
        "{err}"
    );
    let pods = "/clusters/team-a/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "x", "ports": [{"containerPort": 0}]}]}});
    let (code, st) = s.post(pods, &pod).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    let causes: Vec<(&str, &str)> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["reason"].as_str().unwrap(), c["field"].as_str().unwrap()))
        .collect();
    for want in [
        ("FieldValueRequired", "spec.containers[0].image"),
        ("FieldValueDuplicate", "spec.containers[1].name"),
        ("FieldValueRequired", "spec.containers[1].ports[0].containerPort"),
    ] {
        assert!(causes.contains(&want), "{want:?} in {causes:?}");
    }
    assert_eq!(s.get(&format!("{pods}/p")).await.0, StatusCode::NOT_FOUND, "nothing stored");
    // A volume source is checked by its own fields after defaulting: an Azure disk's kind defaults to
    // Shared, whose URI must be a blob's; a GCE disk's fields are reported as kube reports them.
    let disks = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "disks"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [
            {"name": "a", "azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/disks/d"}},
            {"name": "g", "gcePersistentDisk": {"pdName": ""}}]}});
    let (code, st) = s.post(pods, &disks).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    let fields: Vec<&str> =
        st["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["spec.volumes[0].azureDisk.diskURI", "spec.volumes[1].persistentDisk.pdName"], "{st}");
    // A valid pod, and its status written as a kubelet writes it.
    let good = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    assert_eq!(s.post(pods, &good).await.0, StatusCode::CREATED);
    let (_, mut p) = s.get(&format!("{pods}/p")).await;
    p["status"]["phase"] = json!("Running");
    assert_eq!(s.put(&format!("{pods}/p/status"), &p).await.0, StatusCode::OK);
    // What an update may not change: a Deployment's selector; an immutable ConfigMap's data.
    let deploys = "/clusters/team-a/apis/apps/v1/namespaces/default/deployments";
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d", "tier": "x"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    assert_eq!(s.post(deploys, &deploy).await.0, StatusCode::CREATED);
    let reselect = json!({"spec": {"selector": {"matchLabels": {"app": "d", "tier": "x"}}}});
    let (code, st) = s.patch(&format!("{deploys}/d"), "application/merge-patch+json", &reselect).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"d\", \"tier\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"), "{st}");
    let cms = "/clusters/team-a/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"}, "immutable": true, "data": {"k": "v"}});
    assert_eq!(s.post(cms, &cm).await.0, StatusCode::CREATED);
    let thaw = json!({"data": {"k": "w"}});
    let (code, st) = s.patch(&format!("{cms}/frozen"), "application/merge-patch+json", &thaw).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{st}"
    );
    let relabel = json!({"metadata": {"labels": {"may": "change"}}});
    assert_eq!(s.patch(&format!("{cms}/frozen"), "application/merge-patch+json", &relabel).await.0, StatusCode::OK);
    // A name too long and badly made has two problems, each its own cause, as kube reports them.
    let long =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("Bad{}", "x".repeat(300))}});
    let (code, st) = s.post(cms, &long).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    let said: Vec<&str> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["field"] == "metadata.name")
        .map(|c| c["message"].as_str().unwrap())
        .collect();
    assert_eq!(said.len(), 2, "{st}");
    assert!(said[0].ends_with(": must be no more than 253 characters"), "{st}");
    assert!(said[1].contains(": a lowercase RFC 1123 subdomain must consist of"), "{st}");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "Internal"}});
    let (code, st) = s.post("/clusters/team-a/api/v1/namespaces/default/services", &svc).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains(r#"spec.type: Unsupported value: "Internal""#), "{st}");

    // What a StatefulSet, a Pod and a RoleBinding keep, as kubectl users meet it.
    let sts = |size: &str, replicas: u32| {
        format!(
            r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  replicas: {replicas}
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec: {{containers: [{{name: db, image: postgres}}]}}
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: {size}}}}}}}
"#
        )
    };
    let apply = |manifest: String| {
        let kc = kc.clone();
        tokio::task::spawn_blocking(move || common::kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&manifest)))
    };
    assert!(apply(sts("1Gi", 1)).await.unwrap().0);
    let (ok, out, err) = apply(sts("1Gi", 3)).await.unwrap();
    assert!(ok, "replicas may change: {out} {err}");
    let (ok, _, err) = apply(sts("5Gi", 3)).await.unwrap();
    assert!(!ok);
    assert!(err.contains(r#"The StatefulSet "db" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"#), "{err}");
    let (_, mut p) = s.get(&format!("{pods}/p")).await;
    p["spec"]["containers"][0]["image"] = json!("y");
    assert_eq!(s.put(&format!("{pods}/p"), &p).await.0, StatusCode::OK, "an image may change");
    let (_, mut p) = s.get(&format!("{pods}/p")).await;
    p["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    let (code, st) = s.put(&format!("{pods}/p"), &p).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    let message = st["message"].as_str().unwrap();
    assert!(
        message.contains("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{st}"
    );
    assert!(message.contains(r#"+ containers[0].env: [{"name":"A","value":"1"}]"#), "the diff names the field: {st}");
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "jane"}]});
    let rbs = "/clusters/team-a/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    assert_eq!(s.post(rbs, &rb).await.0, StatusCode::CREATED);
    let escalate = json!({"roleRef": {"name": "edit"}});
    let (code, st) = s.patch(&format!("{rbs}/rb"), "application/merge-patch+json", &escalate).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains(r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef"#), "{st}");
    s.stop().await;
}

#[tokio::test]
async fn access_reviews_answer_from_the_clusters_rbac() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]});
    let base = "/clusters/team-a/apis";
    assert_eq!(
        s.post(&format!("{base}/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings"), &rb).await.0,
        StatusCode::CREATED
    );
    let sar = |user: &str, verb: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}}})
    };
    let sars = format!("{base}/authorization.k8s.io/v1/subjectaccessreviews");
    for (user, verb, ns, allowed) in [
        ("alice", "list", "default", true),
        ("alice", "delete", "default", false),
        ("alice", "list", "kube-system", false),
        ("bob", "list", "default", false),
    ] {
        let (code, r) = s.post(&sars, &sar(user, verb, ns)).await;
        assert_eq!((code, &r["status"]["allowed"]), (StatusCode::CREATED, &json!(allowed)), "{user} {verb} {ns}: {r}");
    }
    // Another cluster's RBAC says nothing about this one.
    let root = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}});
    let (_, r) = s.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", &root).await;
    assert_eq!(r["status"]["allowed"], false);

    let local = format!("{base}/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews");
    let mut lsar = sar("alice", "get", "");
    lsar["kind"] = json!("LocalSubjectAccessReview");
    let (code, r) = s.post(&local, &lsar).await;
    assert_eq!((code, &r["status"]["allowed"]), (StatusCode::CREATED, &json!(true)), "{r}");
    assert_eq!(r["spec"]["resourceAttributes"]["namespace"], "default");
    let mut non_resource = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "spec": {"user": "alice", "nonResourceAttributes": {"verb": "get", "path": "/healthz"}}});
    assert_eq!(s.post(&local, &non_resource).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    non_resource["kind"] = json!("SubjectAccessReview");
    assert_eq!(
        s.post(&format!("{base}/authorization.k8s.io/v1/subjectaccessreviews"), &non_resource).await.0,
        StatusCode::CREATED
    );
    let mut elsewhere = sar("alice", "get", "kube-system");
    elsewhere["kind"] = json!("LocalSubjectAccessReview");
    assert_eq!(s.post(&local, &elsewhere).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let nobody = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let (code, r) = s.post(&format!("{base}/authorization.k8s.io/v1/subjectaccessreviews"), &nobody).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    s.stop().await;
}

/// Writes through a field subresource change those fields only, as kube's strategies do.
#[tokio::test]
async fn field_subresources_change_only_their_fields() {
    let s = TestServer::start(Backend::Embedded).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    assert_eq!(s.post(pods, &pod).await.0, StatusCode::CREATED);
    let mut next = s.get(&format!("{pods}/p")).await.1;
    next["spec"]["containers"][0]["image"] = json!("evil");
    next["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    let (code, r) = s.put(&format!("{pods}/p/ephemeralcontainers"), &next).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_eq!(r["spec"]["ephemeralContainers"][0]["name"], "debug");
    assert_eq!(r["spec"]["containers"][0]["image"], "nginx");
    // As kube: ephemeral containers are added, never changed or removed.
    let mut changed = r.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("other");
    let (code, st) = s.put(&format!("{pods}/p/ephemeralcontainers"), &changed).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains("may not be changed"), "{st}");
    // An update of the pod itself keeps them, whatever it sends.
    let mut plain = r.clone();
    plain["spec"].as_object_mut().unwrap().remove("ephemeralContainers");
    let (code, st) = s.put(&format!("{pods}/p"), &plain).await;
    assert_eq!((code, &st["spec"]["ephemeralContainers"][0]["name"]), (StatusCode::OK, &json!("debug")), "{st}");
    let mut removed = st.clone();
    removed["spec"]["ephemeralContainers"] = json!([]);
    let (code, st) = s.put(&format!("{pods}/p/ephemeralcontainers"), &removed).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains("may not be removed"), "{st}");
    // A new ephemeral container is held to kube's allow-list: no ports, probes or resources.
    let mut with_port = removed.clone();
    let debug = r["spec"]["ephemeralContainers"][0].clone();
    with_port["spec"]["ephemeralContainers"] =
        json!([debug, {"name": "net", "image": "busybox", "ports": [{"containerPort": 80}]}]);
    with_port["metadata"]["resourceVersion"] = json!(null);
    let (code, st) = s.put(&format!("{pods}/p/ephemeralcontainers"), &with_port).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.ephemeralContainers[1].ports", "{st}");
    assert!(st["message"].as_str().unwrap().contains("cannot be set for an Ephemeral Container"), "{st}");
    // Never on create, and a pod for Windows takes no Linux settings.
    let mut created = pod.clone();
    created["metadata"]["name"] = json!("q");
    created["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    let (code, st) = s.post(pods, &created).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(
        st["message"].as_str().unwrap().contains("spec.ephemeralContainers: Forbidden: cannot be set on create"),
        "{st}"
    );
    let mut windows = pod.clone();
    windows["metadata"]["name"] = json!("w");
    windows["spec"]["os"] = json!({"name": "windows"});
    windows["spec"]["securityContext"] = json!({"runAsUser": 1000});
    let (code, st) = s.post(pods, &windows).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.securityContext.runAsUser", "{st}");
    windows["spec"]["securityContext"] = json!({"windowsOptions": {"runAsUserName": "ContainerUser"}});
    assert_eq!(s.post(pods, &windows).await.0, StatusCode::CREATED);
    // A static pod's mirror takes none, as kube says at its root path.
    let mut mirror = pod.clone();
    mirror["metadata"] = json!({"name": "m", "annotations": {"kubernetes.io/config.mirror": "hash"}});
    mirror["spec"]["nodeName"] = json!("node-1");
    let (code, mut m) = s.post(pods, &mirror).await;
    assert_eq!(code, StatusCode::CREATED, "{m}");
    m["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
    let (code, st) = s.put(&format!("{pods}/m/ephemeralcontainers"), &m).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "[]", "{st}");
    assert!(
        st["message"].as_str().unwrap().ends_with("[]: Forbidden: static pods do not support ephemeral containers"),
        "{st}"
    );

    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let key = rcgen::KeyPair::generate().unwrap();
    let request =
        rcgen::CertificateParams::new(vec!["c1.example.com".into()]).unwrap().serialize_request(&key).unwrap();
    let request = base64::engine::general_purpose::STANDARD.encode(request.pem().unwrap());
    let mut csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c1"},
        "spec": {"request": "aGVsbG8=", "signerName": "example.com/signer", "usages": ["client auth"],
                 "username": "system:node:someone-else", "groups": ["example:forged"]}});
    // A request must be a PEM-encoded PKCS#10 request, as kube parses it.
    let (code, st) = s.post(csrs, &csr).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{st}");
    assert!(st["message"].as_str().unwrap().contains("PEM block type must be CERTIFICATE REQUEST"), "{st}");
    csr["spec"]["request"] = json!(request);
    let (code, r) = s.post(csrs, &csr).await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    // Who asks is who sent it, whatever the body claims: approvers decide by these fields.
    assert_ne!(r["spec"]["username"], "system:node:someone-else", "{r}");
    assert!(r["spec"]["username"].as_str().is_some_and(|u| !u.is_empty()), "{r}");
    let groups = r["spec"]["groups"].as_array().unwrap();
    assert!(groups.contains(&json!("system:authenticated")) && !groups.contains(&json!("example:forged")), "{r}");
    // An update of the request itself keeps its spec, as kube's strategy does.
    let mut forged = r.clone();
    forged["spec"]["username"] = json!("system:node:someone-else");
    forged["metadata"]["labels"] = json!({"team": "a"});
    let (code, r) = s.put(&format!("{csrs}/c1"), &forged).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_ne!(r["spec"]["username"], "system:node:someone-else", "{r}");
    assert_eq!(r["metadata"]["labels"]["team"], "a", "{r}");
    let mut approve = r.clone();
    approve["spec"]["signerName"] = json!("example.com/other");
    approve["status"] =
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]});
    let (code, r) = s.put(&format!("{csrs}/c1/approval"), &approve).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_eq!(r["status"]["conditions"][0]["type"], "Approved");
    assert!(r["status"]["conditions"][0]["lastUpdateTime"].is_string(), "stamped as kube stamps it: {r}");
    assert_eq!(r["spec"]["signerName"], "example.com/signer");
    // The signer's status write issues the certificate; it cannot undo the approver's decision.
    let mut issue = r.clone();
    issue["status"] = json!({"certificate": "Y2VydA==",
        "conditions": [{"type": "Failed", "status": "True", "reason": "Signer", "message": "partly"}]});
    let (code, r) = s.put(&format!("{csrs}/c1/status"), &issue).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    let kinds: Vec<&str> =
        r["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!((kinds, &r["status"]["certificate"]), (vec!["Failed", "Approved"], &json!("Y2VydA==")), "{r}");
    // Nor can an approval be withdrawn, or turned into a denial as well.
    let mut undo = r.clone();
    undo["status"]["conditions"] = json!([]);
    assert_eq!(s.put(&format!("{csrs}/c1/approval"), &undo).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    // The approver's write keeps the signer's verdict too: dropping `Failed` while keeping the approval
    // is refused, and the condition stays.
    let mut unfail = r.clone();
    unfail["status"]["conditions"].as_array_mut().unwrap().retain(|c| c["type"] != "Failed");
    let (code, err) = s.put(&format!("{csrs}/c1/approval"), &unfail).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(err["message"].as_str().unwrap().contains(r#"may not remove a condition of type "Failed""#), "{err}");
    assert_eq!(s.get(&format!("{csrs}/c1")).await.1["status"]["conditions"][0]["type"], "Failed");
    let mut both = r.clone();
    both["status"]["conditions"].as_array_mut().unwrap().push(json!({"type": "Denied", "status": "True"}));
    let (code, err) = s.put(&format!("{csrs}/c1/approval"), &both).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(err["message"].as_str().unwrap().contains("mutually exclusive"), "{err}");

    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "held"}});
    assert_eq!(s.post("/api/v1/namespaces", &ns).await.0, StatusCode::CREATED);
    let mut fin = s.get("/api/v1/namespaces/held").await.1;
    assert_eq!(fin["spec"]["finalizers"], json!(["kubernetes"]));
    fin["spec"]["finalizers"] = json!([]);
    fin["metadata"]["labels"] = json!({"changed": "no"});
    // finalize serves update only, as kube.
    let merge = json!({"spec": {"finalizers": []}});
    let (code, _) = s.patch("/api/v1/namespaces/held/finalize", "application/merge-patch+json", &merge).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    let (code, r) = s.put("/api/v1/namespaces/held/finalize", &fin).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    // Go leaves an empty `finalizers` out (omitempty).
    assert!(r["spec"].get("finalizers").is_none(), "{r}");
    assert!(r["metadata"]["labels"].get("changed").is_none(), "{r}");

    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"},
        "spec": {"replicas": 1, "selector": {"app": "r"},
                 "template": {"metadata": {"labels": {"app": "r"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(s.post(rcs, &rc).await.0, StatusCode::CREATED);
    let (code, scale) = s.get(&format!("{rcs}/r/scale")).await;
    assert_eq!(code, StatusCode::OK, "{scale}");
    assert_eq!((&scale["spec"]["replicas"], &scale["status"]["selector"]), (&json!(1), &json!("app=r")));
    s.stop().await;
}

/// Approving a CertificateSigningRequest takes `approve` on its signer and issuing one `sign`, as kube's
/// CertificateApproval and CertificateSigning admission have it; and nothing, apply included, changes
/// the request once made.
#[tokio::test]
async fn approving_and_signing_take_the_signers_verbs() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("certs").await;
    let base = "/clusters/certs";
    let csrs = format!("{base}/apis/certificates.k8s.io/v1/certificatesigningrequests");
    let role = |signers: serde_json::Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "approver"},
            "rules": [{"verbs": ["get", "update", "patch"], "apiGroups": ["certificates.k8s.io"],
                "resources": ["certificatesigningrequests", "certificatesigningrequests/approval",
                    "certificatesigningrequests/status"]}, signers]})
    };
    let roles = format!("{base}/apis/rbac.authorization.k8s.io/v1/clusterroles");
    let other = json!({"verbs": ["approve", "sign"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
        "resourceNames": ["example.com/other"]});
    assert_eq!(s.post(&roles, &role(other)).await.0, StatusCode::CREATED);
    let token = s.tenant_token("certs", "approver", "approver").await;
    let auth = format!("Bearer {token}");
    let as_approver = |path: String, body: serde_json::Value| {
        let auth = auth.clone();
        let s = &s;
        async move {
            let body = Some(serde_json::to_vec(&body).unwrap());
            s.req_with(
                &s.anonymous,
                reqwest::Method::PUT,
                &path,
                Some("application/json"),
                body,
                &[("authorization", &auth)],
            )
            .await
        }
    };
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = |name: &str| {
        let request = rcgen::CertificateParams::new(vec![name.into()]).unwrap().serialize_request(&key).unwrap();
        base64::engine::general_purpose::STANDARD.encode(request.pem().unwrap())
    };
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c1"},
        "spec": {"request": pem("c1.example.com"), "signerName": "example.com/signer", "usages": ["client auth"]}});
    let (code, created) = s.post(&csrs, &csr).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let mut approve = created.clone();
    approve["status"] =
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]});
    // Naming a signer the approver may approve does not help: the stored request's signer is what counts.
    approve["spec"]["signerName"] = json!("example.com/other");
    let (code, err) = as_approver(format!("{csrs}/c1/approval"), approve.clone()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{err}");
    assert_eq!(
        err["message"],
        "certificatesigningrequests.certificates.k8s.io \"c1\" is forbidden: user not permitted to approve requests with signerName \"example.com/signer\""
    );
    let mut issue = created.clone();
    issue["status"] = json!({"certificate": "Y2VydA=="});
    let (code, err) = as_approver(format!("{csrs}/c1/status"), issue.clone()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .ends_with("user not permitted to sign requests with signerName \"example.com/signer\""),
        "{err}"
    );
    // A status write that changes neither the certificate nor the conditions is no signing.
    let (code, r) = as_approver(format!("{csrs}/c1/status"), created.clone()).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    // `approve` on the signer's domain, `example.com/*`, is enough to approve; signing still is not allowed.
    let domain = json!({"verbs": ["approve"], "apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
        "resourceNames": ["example.com/*"]});
    assert_eq!(s.put(&format!("{roles}/approver"), &role(domain)).await.0, StatusCode::OK);
    let (code, r) = as_approver(format!("{csrs}/c1/approval"), approve).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_eq!(
        (&r["status"]["conditions"][0]["type"], &r["spec"]["signerName"]),
        (&json!("Approved"), &json!("example.com/signer"))
    );
    issue["metadata"]["resourceVersion"] = r["metadata"]["resourceVersion"].clone();
    assert_eq!(as_approver(format!("{csrs}/c1/status"), issue).await.0, StatusCode::FORBIDDEN);
    // A server-side apply of another request to the approved one changes nothing of it.
    let mut changed = csr.clone();
    changed["spec"]["request"] = json!(pem("evil.example.com"));
    changed["spec"]["usages"] = json!(["server auth"]);
    let (code, r) =
        s.patch(&format!("{csrs}/c1?fieldManager=tool&force=true"), "application/apply-patch+yaml", &changed).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_eq!(
        (&r["spec"]["request"], &r["spec"]["usages"]),
        (&created["spec"]["request"], &json!(["client auth"])),
        "{r}"
    );
    assert_eq!(r["status"]["conditions"][0]["type"], "Approved", "{r}");
    s.stop().await;
}

/// `../shared/corpus`: real manifests from public projects (CRDs of operators, webhook configurations,
/// admission policies), applied server-side by kubectl to a logical cluster, every CRD Established.
/// `kubectl apply` without `--server-side` sends a strategic merge patch on its second run; kgate
/// once refused it (415) for every kind outside a hand-kept list, webhook configurations and
/// APIServices among them. The server merges by the markers its OpenAPI publishes, as kubectl
/// computed the patch from them: a webhook changed by name keeps the fields the patch does not name.
#[tokio::test]
async fn a_second_kubectl_apply_patches_every_kind_by_its_merge_keys() {
    common::require_binary("kubectl", "kubectl (./scripts/setup.sh installs it)");
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let kc = s.kubeconfig_for("team-a");
    let manifests = |timeout: u32, priority: u32, strategy: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: guard}}
webhooks:
- name: pods.guard.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  timeoutSeconds: {timeout}
  clientConfig: {{service: {{namespace: guard, name: guard, path: /pods}}}}
  rules: [{{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]
- name: nodes.guard.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {{service: {{namespace: guard, name: guard, path: /nodes}}}}
  rules: [{{apiGroups: [''], apiVersions: [v1], operations: [UPDATE], resources: [nodes]}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1beta1.metrics.example.com}}
spec:
  group: metrics.example.com
  version: v1beta1
  groupPriorityMinimum: {priority}
  versionPriority: 100
  service: {{namespace: metrics, name: metrics-server}}
  insecureSkipTLSVerify: true
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{type: {strategy}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: nginx}}]}}
"
        )
    };
    for (timeout, priority, strategy) in [(5, 100, "RollingUpdate"), (7, 200, "Recreate")] {
        let kc = kc.clone();
        let (ok, out, err) = tokio::task::spawn_blocking(move || {
            common::kubectl_stdin(&kc, &["apply", "-f", "-"], Some(&manifests(timeout, priority, strategy)))
        })
        .await
        .unwrap();
        assert!(ok, "{out}\n{err}");
    }
    let (_, hook) =
        s.get("/clusters/team-a/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guard").await;
    let hooks = hook["webhooks"].as_array().unwrap();
    let names: Vec<&str> = hooks.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pods.guard.example.com", "nodes.guard.example.com"], "{hook}");
    assert_eq!(hooks[0]["timeoutSeconds"], 7, "{hook}");
    assert_eq!(hooks[0]["clientConfig"]["service"]["path"], "/pods", "{hook}");
    assert_eq!(hooks[1]["timeoutSeconds"], 10, "the default, kept: {hook}");
    let (_, service) =
        s.get("/clusters/team-a/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.example.com").await;
    assert_eq!(service["spec"]["groupPriorityMinimum"], 200, "{service}");
    assert_eq!(service["spec"]["service"]["name"], "metrics-server", "{service}");
    // The Deployment's strategy is kept by its keys (`retainKeys`): Recreate drops the defaulted room.
    let (_, web) = s.get("/clusters/team-a/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!(web["spec"]["strategy"], json!({"type": "Recreate"}), "{web}");
    s.stop().await;
}

#[tokio::test]
async fn real_operators_manifests_apply_to_a_logical_cluster() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/apply.sh");
    assert!(
        script.exists(),
        "{} is missing: the corpus of real manifests comes with the project's shared/ folder",
        script.display()
    );
    common::require_binary("kubectl", "kubectl (./scripts/setup.sh installs it)");
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("corpus").await;
    let kc = s.kubeconfig_for("corpus");
    let out =
        tokio::task::spawn_blocking(move || Command::new("bash").arg(script).arg(kc).output().unwrap()).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let failures: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.lines().last().is_some_and(|l| l.ends_with(" 0 failed")), "{text}");
    s.stop().await;
}

/// Fields behind feature gates kube 1.33 has off by default are dropped from what a write stores, as
/// kube drops them, templates and statuses included; an object that already holds one (stored by a
/// server with the gate on) keeps it through its updates.
#[tokio::test]
async fn fields_behind_gates_kube_has_off_are_dropped_unless_already_stored() {
    let s = TestServer::start(Backend::Embedded).await;
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let container = json!({"name": "c", "image": "nginx", "lifecycle": {"stopSignal": "SIGUSR1"},
                           "resources": {"claims": [{"name": "gpu"}]}});
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}],
                     "resources": {"limits": {"cpu": "1"}}}}}});
    let (code, made) = s.post(deployments, &d).await;
    assert_eq!(code, StatusCode::CREATED, "{made}");
    let (_, got) = s.get(&format!("{deployments}/d")).await;
    let spec = &got["spec"]["template"]["spec"];
    for gone in ["resourceClaims", "resources"] {
        assert!(spec.get(gone).is_none(), "{gone}: {got}");
    }
    assert!(spec["containers"][0].get("lifecycle").is_none(), "{got}");
    assert!(spec["containers"][0]["resources"].get("claims").is_none(), "{got}");

    // As a kube with ContainerStopSignals on would have stored it: the signal stays through an update.
    let store = s.running_store();
    let key = format!("{}/apps/deployments/root/default/d", s.prefix);
    let kv = store.get(&key).await.unwrap().expect("stored");
    let mut stored: serde_json::Value = serde_json::from_slice(&kv.value).unwrap();
    stored["spec"]["template"]["spec"]["containers"][0]["lifecycle"] = json!({"stopSignal": "SIGUSR1"});
    store.update(&key, serde_json::to_vec(&stored).unwrap(), kv.mod_revision).await.unwrap();
    let mut next = stored.clone();
    next["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    next["metadata"]["labels"] = json!({"changed": "yes"});
    let (code, updated) = s.put(&format!("{deployments}/d"), &next).await;
    assert_eq!(code, StatusCode::OK, "{updated}");
    assert_eq!(updated["metadata"]["labels"]["changed"], "yes");
    assert_eq!(updated["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["stopSignal"], "SIGUSR1");

    // A pod's status drops what the kubelet of 1.33 would not report either.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    assert_eq!(s.post(pods, &pod).await.0, StatusCode::CREATED);
    let (_, mut p) = s.get(&format!("{pods}/p")).await;
    p["status"] = json!({"phase": "Running", "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]});
    let (code, p) = s.put(&format!("{pods}/p/status"), &p).await;
    assert_eq!(code, StatusCode::OK, "{p}");
    assert_eq!(p["status"]["phase"], "Running");
    assert!(p["status"].get("observedGeneration").is_none(), "{p}");
    assert!(p["status"]["conditions"][0].get("observedGeneration").is_none(), "{p}");

    // A reference to another namespace goes before the claim's sources are mirrored, as in kube: the
    // claim ends up with its `dataSource` given both ways.
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"},
                 "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "far", "namespace": "other"}}});
    let (code, c) = s.post("/api/v1/namespaces/default/persistentvolumeclaims", &claim).await;
    assert_eq!(code, StatusCode::CREATED, "{c}");
    let reference = &c["spec"]["dataSourceRef"];
    assert_eq!((&reference["name"], reference.get("namespace")), (&json!("src"), None), "{c}");
    s.stop().await;
}

/// A Secret's `stringData` is merged into `data` on every write, over a key of the same name, and
/// never stored, as kube converts a v1 Secret.
#[tokio::test]
async fn secret_string_data_becomes_data() {
    let s = TestServer::start(Backend::Embedded).await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                        "data": {"user": "b2xk", "keep": "a2VlcA=="}, "stringData": {"user": "admin", "pass": "s3cret"}});
    let (code, r) = s.post(secrets, &secret).await;
    assert_eq!(code, StatusCode::CREATED, "{r}");
    let (_, got) = s.get(&format!("{secrets}/creds")).await;
    assert_eq!(got["data"], json!({"user": "YWRtaW4=", "pass": "czNjcmV0", "keep": "a2VlcA=="}));
    assert!(got.get("stringData").is_none(), "{got}");
    let patch = json!({"stringData": {"pass": "new"}});
    let (code, r) = s.patch(&format!("{secrets}/creds"), "application/merge-patch+json", &patch).await;
    assert_eq!(code, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["pass"], "bmV3");
    assert!(r.get("stringData").is_none(), "{r}");
    let mut bad = secret.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["stringData"] = json!({"n": 1});
    assert_eq!(s.post(secrets, &bad).await.0, StatusCode::BAD_REQUEST);
    s.stop().await;
}

/// An immediate delete of a type whose kube registry returns the deleted object answers that object
/// (typed clients parse it as one); other types answer a Status.
#[tokio::test]
async fn deletes_answer_the_object_where_kube_does() {
    let s = TestServer::start(Backend::Embedded).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    assert_eq!(s.post("/api/v1/namespaces/default/pods", &pod).await.0, StatusCode::CREATED);
    let (code, r) = s.delete("/api/v1/namespaces/default/pods/p").await;
    assert_eq!((code, &r["kind"], &r["metadata"]["name"]), (StatusCode::OK, &json!("Pod"), &json!("p")), "{r}");
    assert!(r["metadata"]["resourceVersion"].is_string(), "{r}");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(s.post("/api/v1/namespaces/default/configmaps", &cm).await.0, StatusCode::CREATED);
    let (code, r) = s.delete("/api/v1/namespaces/default/configmaps/c").await;
    assert_eq!((code, &r["kind"], &r["status"]), (StatusCode::OK, &json!("Status"), &json!("Success")), "{r}");
    s.stop().await;
}

/// A new logical cluster holds what a new kube cluster does: its four namespaces, each with
/// `kube-root-ca.crt`, and the `default/kubernetes` Service with endpoints at this server.
#[tokio::test]
async fn a_new_cluster_holds_what_a_kube_cluster_does() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let ca = std::fs::read_to_string(s.dir.path().join("ca.crt")).unwrap();
    let port: u64 = s.url.rsplit(':').next().unwrap().parse().unwrap();
    let base = "/clusters/team-a/api/v1";
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(s.get(&format!("{base}/namespaces/{ns}")).await.0, StatusCode::OK, "{ns}");
        let (code, cm) = s.get(&format!("{base}/namespaces/{ns}/configmaps/kube-root-ca.crt")).await;
        assert_eq!((code, cm["data"]["ca.crt"].as_str()), (StatusCode::OK, Some(ca.as_str())), "{ns}");
    }
    let (code, svc) = s.get(&format!("{base}/namespaces/default/services/kubernetes")).await;
    assert_eq!(code, StatusCode::OK, "{svc}");
    assert_eq!((&svc["spec"]["ports"][0]["port"], &svc["spec"]["ports"][0]["targetPort"]), (&json!(443), &json!(port)));
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    let (_, ep) = s.get(&format!("{base}/namespaces/default/endpoints/kubernetes")).await;
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "127.0.0.1", "{ep}");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], json!(port));
    let (_, eps) =
        s.get("/clusters/team-a/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes").await;
    assert_eq!(
        (&eps["addressType"], &eps["endpoints"][0]["addresses"][0]),
        (&json!("IPv4"), &json!("127.0.0.1")),
        "{eps}"
    );

    // A namespace made later gets its CA ConfigMap too.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "later"}});
    assert_eq!(s.post(&format!("{base}/namespaces"), &ns).await.0, StatusCode::CREATED);
    let (code, _) = s.get(&format!("{base}/namespaces/later/configmaps/kube-root-ca.crt")).await;
    assert_eq!(code, StatusCode::OK);
    // kube-node-lease may go; kube-public may not.
    assert_eq!(s.delete(&format!("{base}/namespaces/kube-public")).await.0, StatusCode::FORBIDDEN);
    assert_eq!(s.delete(&format!("{base}/namespaces/kube-node-lease")).await.0, StatusCode::OK);
    s.stop().await;
}

/// Every verb's answer is negotiated: a patch asked for as PartialObjectMetadata (kube-rs's
/// `patch_metadata`) answers metadata only; objects carry Go's zero values.
#[tokio::test]
async fn writes_answer_in_the_negotiated_shape_with_gos_zero_values() {
    let s = TestServer::start(Backend::Embedded).await;
    let path = "/apis/apps/v1/namespaces/default/daemonsets";
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let (code, created) = s.post(path, &ds).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    for f in ["currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"] {
        assert_eq!(created["status"][f], 0, "{f}: {}", created["status"]);
    }
    let accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let patch = json!({"metadata": {"labels": {"x": "y"}}});
    let r = s
        .client
        .patch(format!("{}{path}/d", s.url))
        .header("Content-Type", "application/merge-patch+json")
        .header("Accept", accept)
        .body(patch.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (&body["kind"], &body["apiVersion"]),
        (&json!("PartialObjectMetadata"), &json!("meta.k8s.io/v1")),
        "{body}"
    );
    assert_eq!(body["metadata"]["labels"]["x"], "y");
    assert!(body.get("spec").is_none(), "{body}");
    s.stop().await;
}

/// autoscaling/v1 HorizontalPodAutoscalers are stored as v2, as kube stores them: each version reads
/// every write of the other, through reads, lists and watches from the cache, and kubectl's columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaling_v1_and_v2_read_each_others_autoscalers() {
    let s = TestServer::start(Backend::Embedded).await;
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let mut watch = s.watch(&format!("{v1}?watch=true")).await;
    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}});
    let (code, created) = s.post(v1, &hpa).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(
        (&created["apiVersion"], &created["spec"]["targetCPUUtilizationPercentage"]),
        (&json!("autoscaling/v1"), &json!(60))
    );
    let (_, as_v2) = s.get(&format!("{v2}/web")).await;
    assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        as_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );
    assert!(as_v2["spec"].get("targetCPUUtilizationPercentage").is_none(), "{as_v2}");

    // A metric v1 cannot say survives a v1 update, carried in kube's annotation.
    let mut more = as_v2.clone();
    more["spec"]["metrics"].as_array_mut().unwrap().insert(
        0,
        json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}}),
    );
    assert_eq!(s.put(&format!("{v2}/web"), &more).await.0, StatusCode::OK);
    let (_, read) = s.get(&format!("{v1}/web")).await;
    let carried = read["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"].as_str().unwrap();
    assert!(carried.contains("memory") && carried.contains("targetAverageValue"), "{carried}");
    let mut update = read.clone();
    update["spec"]["maxReplicas"] = json!(7);
    let (code, updated) = s.put(&format!("{v1}/web"), &update).await;
    assert_eq!((code, &updated["spec"]["maxReplicas"]), (StatusCode::OK, &json!(7)), "{updated}");
    let (_, as_v2) = s.get(&format!("{v2}/web")).await;
    assert_eq!(as_v2["spec"]["metrics"], more["spec"]["metrics"], "{as_v2}");
    assert!(as_v2["metadata"]["annotations"].get("autoscaling.alpha.kubernetes.io/metrics").is_none(), "{as_v2}");

    // A v1 write of the object itself keeps the status, though v1 carries part of it in annotations:
    // a manifest replaced without them (kubectl replace) drops nothing, and one with them sets nothing.
    let mut status = s.get(&format!("{v2}/web")).await.1;
    status["status"]["conditions"] = json!([{"type": "AbleToScale", "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "ReadyForNewScale", "message": "ok"}]);
    assert_eq!(s.put(&format!("{v2}/web/status"), &status).await.0, StatusCode::OK);
    let mut replaced = s.get(&format!("{v1}/web")).await.1;
    let annotations = replaced["metadata"]["annotations"].as_object_mut().unwrap();
    assert!(annotations.remove("autoscaling.alpha.kubernetes.io/conditions").is_some());
    assert_eq!(s.put(&format!("{v1}/web"), &replaced).await.0, StatusCode::OK);
    let (_, as_v2) = s.get(&format!("{v2}/web")).await;
    assert_eq!(as_v2["status"]["conditions"][0]["type"], "AbleToScale", "{as_v2}");

    // Reads from the watch cache convert too: a list, a resourceVersion=0 get, a watch.
    let (_, list) = s.get(&format!("{v1}?resourceVersion=0")).await;
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(
        (&list["items"][0]["apiVersion"], &list["items"][0]["spec"]["maxReplicas"]),
        (&json!("autoscaling/v1"), &json!(7))
    );
    assert_eq!(list["items"][0]["spec"]["targetCPUUtilizationPercentage"], 60, "{list}");
    let (_, any) = s.get(&format!("{v1}/web?resourceVersion=0")).await;
    assert_eq!(
        (&any["apiVersion"], &any["spec"]["targetCPUUtilizationPercentage"]),
        (&json!("autoscaling/v1"), &json!(60))
    );
    let added = tokio::time::timeout(std::time::Duration::from_secs(10), watch.recv()).await.unwrap().unwrap();
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["apiVersion"], "autoscaling/v1", "{added}");
    assert_eq!(added["object"]["spec"]["targetCPUUtilizationPercentage"], 60, "{added}");
    assert!(added["object"]["spec"].get("metrics").is_none(), "{added}");

    // A create answers what a read gives: v1's implied target made explicit.
    let mut implied = hpa.clone();
    implied["metadata"]["name"] = json!("implied");
    implied["spec"].as_object_mut().unwrap().remove("targetCPUUtilizationPercentage");
    let (code, made) = s.post(v1, &implied).await;
    assert_eq!((code, &made["spec"]["targetCPUUtilizationPercentage"]), (StatusCode::CREATED, &json!(80)), "{made}");
    assert_eq!(s.get(&format!("{v1}/implied")).await.1["spec"], made["spec"]);

    // What cannot be converted is refused and not stored.
    let mut broken = hpa.clone();
    broken["metadata"] = json!({"name": "broken", "annotations": {"autoscaling.alpha.kubernetes.io/metrics": "abc"}});
    let (code, err) = s.post(v1, &broken).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(s.get(&format!("{v2}/broken")).await.0, StatusCode::NOT_FOUND);

    // kubectl reads it in either version with kube's columns, the targets taken from every metric.
    let kc = s.kubeconfig();
    let out = kubectl_ok(&kc, &["get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", "default"]);
    assert!(out.contains("memory: <unknown>/500Mi, cpu: <unknown>/60%"), "{out}");
    let out = kubectl_ok(
        &kc,
        &["get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", "default", "-o", "jsonpath={.apiVersion}"],
    );
    assert_eq!(out, "autoscaling/v1");
    s.stop().await;
}

/// `kube-root-ca.crt` is kept as kube-controller-manager's publisher keeps it: remade when deleted,
/// set back when changed, and rewritten in every namespace of every cluster when the CA changes.
#[tokio::test]
async fn kube_root_ca_is_kept_as_kubes_publisher_keeps_it() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("team-a").await;
    let base = "/clusters/team-a/api/v1/namespaces";
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}});
    assert_eq!(s.post(base, &ns).await.0, StatusCode::CREATED);
    let cm = format!("{base}/apps/configmaps/kube-root-ca.crt");
    let ca = std::fs::read_to_string(s.dir.path().join("ca.crt")).unwrap();
    let (code, _) = s.delete(&cm).await;
    assert_eq!(code, StatusCode::OK);
    let (code, back) = s.get(&cm).await;
    assert_eq!((code, back["data"]["ca.crt"].as_str()), (StatusCode::OK, Some(ca.as_str())), "{back}");
    assert!(back["metadata"]["annotations"]["kubernetes.io/description"]
        .as_str()
        .is_some_and(|d| d.contains("CA bundle")));
    let forged = json!({"metadata": {"labels": {"team": "a"}}, "data": {"ca.crt": "forged", "extra": "x"}});
    let (code, patched) = s.patch(&cm, "application/merge-patch+json", &forged).await;
    assert_eq!(code, StatusCode::OK, "{patched}");
    assert_eq!(patched["data"], json!({"ca.crt": ca}), "the data is the publisher's");
    assert_eq!(patched["metadata"]["labels"]["team"], "a", "the rest is the tenant's");
    // Other ConfigMaps are the tenant's own.
    let mine = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}, "data": {"ca.crt": "x"}});
    let (_, made) = s.post(&format!("{base}/apps/configmaps"), &mine).await;
    assert_eq!(made["data"]["ca.crt"], "x");

    // A new CA: every namespace of every cluster gets it after the restart.
    let prefix = s.prefix.clone();
    let dir = s.stop().await;
    for f in ["ca.crt", "ca.key", "serving.crt", "serving.key", "admin.kubeconfig"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let s = TestServer::start_in(Backend::Embedded, dir, prefix).await;
    let new_ca = std::fs::read_to_string(s.dir.path().join("ca.crt")).unwrap();
    assert_ne!(new_ca, ca);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for path in [
        cm.clone(),
        format!("{base}/default/configmaps/kube-root-ca.crt"),
        "/api/v1/namespaces/default/configmaps/kube-root-ca.crt".into(),
    ] {
        loop {
            let (_, got) = s.get(&path).await;
            if got["data"]["ca.crt"].as_str() == Some(new_ca.as_str()) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{path} still holds the old CA: {got}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    s.stop().await;
}

/// `kubectl get componentstatuses` answers what kgate has, as kube-apiserver builds the list: the store
/// as `etcd-0`, healthy while it answers; a component that is not there is a 404 and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_statuses_report_the_store() {
    let s = TestServer::start(Backend::Etcd).await;
    let (code, list) = s.get("/api/v1/componentstatuses").await;
    assert_eq!(code, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "ComponentStatusList");
    assert_eq!(list["items"][0]["metadata"]["name"], "etcd-0");
    assert_eq!(list["items"][0]["conditions"][0], json!({"type": "Healthy", "status": "True", "message": "ok"}));
    assert_eq!(s.get("/api/v1/componentstatuses/etcd-0").await.0, StatusCode::OK);
    assert_eq!(s.get("/api/v1/componentstatuses/scheduler").await.0, StatusCode::NOT_FOUND);
    let (code, _) = s.post("/api/v1/componentstatuses", &json!({"metadata": {"name": "x"}})).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    let kc = s.kubeconfig();
    let table = tokio::task::spawn_blocking(move || kubectl_ok(&kc, &["get", "componentstatuses"])).await.unwrap();
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row, ["etcd-0", "Healthy", "ok"], "{table}");
    s.stop().await;
}
