//! Unit tests for the OpenAPI documents and the schema-driven body checks.

use serde_json::{json, Value};

use super::*;

const DEPLOY_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn apps_doc() -> Value {
    let resources = [ResourceOps {
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        status: true,
        scale: true,
        verbs: DEPLOY_VERBS,
    }];
    Builtins::get().gv_document("apps", "v1", &resources)
}

fn valid_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "annotations": {"a": "b"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "nginx",
                        "image": "nginx:1.27",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "A", "value": "1"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": 0.1}},
                        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}}
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        },
        "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True",
                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    })
}

#[test]
fn document_header_and_index_shape() {
    let doc = apps_doc();
    assert_eq!(doc["openapi"], "3.0.0");
    assert_eq!(doc["info"]["title"], "Kubernetes");
    assert_eq!(doc["info"]["version"], "v1.33.0");
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/apis/apps/v1/namespaces/{namespace}/deployments",
        "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
        "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
        "/apis/apps/v1/deployments",
    ] {
        assert!(paths.contains_key(p), "missing {p}");
    }
    assert!(!doc.to_string().contains("$defs"));
    assert!(!doc.to_string().contains("\"$schema\""));
}

#[test]
fn patch_op_carries_field_validation_and_gvk_object() {
    let doc = apps_doc();
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(patch["x-kubernetes-action"], "patch");
    let names: Vec<&str> = patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "query")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for n in ["fieldValidation", "dryRun", "fieldManager", "force"] {
        assert!(names.contains(&n), "missing {n}");
    }
    let content = patch["requestBody"]["content"].as_object().unwrap();
    for t in [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ] {
        assert!(content.contains_key(t), "missing {t}");
    }
    let scale = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert_eq!(scale["patch"]["x-kubernetes-group-version-kind"]["kind"], "Scale");
    let post = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"];
    assert!(post["parameters"].to_string().contains("fieldValidation"));
}

/// Follows a property the way `kubectl explain` does: through `$ref` and `allOf`.
fn field<'a>(doc: &'a Value, schema: &'a Value, name: &str) -> &'a Value {
    let prop = &schema["properties"][name];
    assert!(!prop.is_null(), "no field {name}");
    let prop = if prop["type"] == "array" { &prop["items"] } else { prop };
    deref(doc, prop)
}

fn deref<'a>(doc: &'a Value, s: &'a Value) -> &'a Value {
    let r = s["$ref"].as_str().or_else(|| s["allOf"][0]["$ref"].as_str());
    match r {
        Some(r) => {
            let name = r.strip_prefix("#/components/schemas/").expect("ref format");
            let target = &doc["components"]["schemas"][name];
            assert!(target.is_object(), "dangling ref {name}");
            target
        }
        None => s,
    }
}

#[test]
fn explain_walk_reaches_container_fields() {
    let doc = apps_doc();
    let schemas = &doc["components"]["schemas"];
    let deploy = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deploy["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    assert!(deploy["description"].as_str().unwrap().contains("Deployment"));
    let spec = field(&doc, deploy, "spec");
    let template = field(&doc, spec, "template");
    let pod_spec = field(&doc, template, "spec");
    let container = field(&doc, pod_spec, "containers");
    assert!(container["properties"]["image"]["description"].is_string());
    assert_eq!(container["required"], json!(["name"]));
    let meta = field(&doc, deploy, "metadata");
    assert!(meta["properties"]["annotations"].is_object());
    let containers = &pod_spec["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(containers["x-kubernetes-list-type"], "map");
    assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(container["properties"]["ports"]["x-kubernetes-list-map-keys"], json!(["containerPort", "protocol"]));
    for name in [
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        "io.k8s.api.apps.v1.DeploymentList",
        "io.k8s.api.autoscaling.v1.Scale",
    ] {
        assert!(schemas[name].is_object(), "missing schema {name}");
    }
    let ios = &schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
    assert_eq!(ios["format"], "int-or-string");
    let time = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"];
    assert_eq!(time["format"], "date-time");
    // Every reference in the document must resolve inside it.
    let mut refs = Vec::new();
    schema::collect_refs(&doc, &mut refs);
    for r in refs {
        assert!(schemas[&r].is_object(), "dangling {r}");
    }
}

#[test]
fn unknown_fields_found_with_kube_paths() {
    let b = Builtins::get();
    let mut d = valid_deployment();
    d["spec"]["replicass"] = json!(3);
    d["spec"]["template"]["spec"]["containers"][0]["imagee"] = json!("x");
    d["metadata"]["labelz"] = json!({});
    let found = b.unknown_fields("apps", "v1", "Deployment", &d);
    assert_eq!(found, vec!["metadata.labelz", "spec.replicass", "spec.template.spec.containers[0].imagee"]);
    assert!(b.unknown_fields("apps", "v1", "Nope", &d).is_empty());
}

#[test]
fn valid_objects_have_no_unknown_fields_or_type_errors() {
    let b = Builtins::get();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"a": "1"}, "binaryData": {"b": "aGk="}, "immutable": false});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}],
        "managedFields": [{"manager": "m", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"containers": [{"name": "c", "image": "i", "command": ["sh"],
                 "securityContext": {"runAsUser": 1000}}],
                 "tolerations": [{"key": "k", "operator": "Exists"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}});
    let cases = [("apps", "Deployment", valid_deployment()), ("", "ConfigMap", cm), ("", "Pod", pod)];
    for (group, kind, obj) in cases {
        assert!(b.unknown_fields(group, "v1", kind, &obj).is_empty(), "{kind}");
        assert!(
            b.type_errors(group, "v1", kind, &obj).is_empty(),
            "{kind}: {:?}",
            b.type_errors(group, "v1", kind, &obj)
        );
    }
}

#[test]
fn type_errors_are_reported_with_paths() {
    let b = Builtins::get();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}});
    let errs = b.type_errors("", "v1", "ConfigMap", &cm);
    assert_eq!(errs, vec!["json: cannot unmarshal number into Go struct field ConfigMap.data of type string"]);
    let mut d = valid_deployment();
    d["spec"]["replicas"] = json!("3");
    let errs = b.type_errors("apps", "v1", "Deployment", &d);
    assert_eq!(
        errs,
        vec!["json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"]
    );
    let secret = json!({"kind": "Secret", "data": {"k": "not base64!"}});
    assert_eq!(b.type_errors("", "v1", "Secret", &secret).len(), 1);
}

#[test]
fn quantities_decode_as_kube_parses_them() {
    let b = Builtins::get();
    let quota = |hard: Value| json!({"kind": "ResourceQuota", "spec": {"hard": hard}});
    let ok =
        quota(json!({"cpu": "500m", "memory": "1.5Gi", "pods": 10, "a": "1e3", "b": " 2 ", "c": "+.5", "d": "-1"}));
    assert_eq!(b.quantity_errors("", "v1", "ResourceQuota", &ok), vec![]);
    let format = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let suffix = "unable to parse quantity's suffix";
    for (bad, why) in [("abc", format), ("", format), ("1Gb", format), ("1m3", suffix), ("2e", suffix)] {
        let got = b.quantity_errors("", "v1", "ResourceQuota", &quota(json!({"cpu": bad})));
        assert_eq!(got, vec![(bad.to_string(), why)], "{bad}");
    }
    let pod = json!({"kind": "Pod", "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}});
    assert_eq!(b.quantity_errors("", "v1", "Pod", &pod), vec![("lots".to_string(), format)]);
    assert_eq!(b.type_errors("", "v1", "Pod", &pod), Vec::<String>::new(), "a quantity is not a type error");
}

/// Every real operator's CRD has `items: {...}` or `additionalProperties: {...}`; Go decodes both
/// either way (schema or array, schema or bool), so neither may be a type error.
#[test]
fn crd_schema_unions_take_every_form_go_accepts() {
    let b = Builtins::get();
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "open": {"type": "object", "additionalProperties": true},
        "color": {"type": "string", "default": "red", "enum": ["red", 1]}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}});
    let errs = b.type_errors("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &crd);
    assert!(errs.is_empty(), "{errs:?}");
    let mut bad = crd.clone();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["tags"]["type"] = json!(1);
    assert_eq!(b.type_errors("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &bad).len(), 1);
}

#[test]
fn prune_removes_exactly_the_unknown_fields() {
    let b = Builtins::get();
    let clean = valid_deployment();
    let mut d = clean.clone();
    d["spec"]["replicass"] = json!(3);
    d["spec"]["template"]["spec"]["containers"][0]["imagee"] = json!("x");
    d["metadata"]["labelz"] = json!({"x": "y"});
    b.prune("apps", "v1", "Deployment", &mut d);
    assert_eq!(d, clean);
}

/// Under one long key (a CRD schema's property name), a hundred thousand unknown fields and values
/// of the wrong type: an error reports the first hundred and stops, and pruning removes every one
/// without writing out their paths.
#[test]
fn unknown_and_mistyped_fields_under_a_long_key_stay_bounded() {
    let b = Builtins::get();
    let key = "k".repeat(1 << 20);
    let junk: serde_json::Map<String, serde_json::Value> = (0..100_000).map(|i| (format!("f{i}"), json!(0))).collect();
    let mistyped: serde_json::Map<String, serde_json::Value> =
        (0..100_000).map(|i| (format!("p{i}"), json!({"type": 7}))).collect();
    let crd = |inner: serde_json::Map<String, serde_json::Value>, props| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"},
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                key.clone(): {"type": "object", "properties": props, "junk": inner}}}}}]}})
    };
    let mut with_junk = crd(junk, json!({}));
    let at = |crd: &mut serde_json::Value| {
        let props = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][&key];
        let junk = props.as_object_mut().unwrap().remove("junk").unwrap();
        props.as_object_mut().unwrap().extend(junk.as_object().unwrap().clone());
    };
    at(&mut with_junk);
    let unknown = b.unknown_fields("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &with_junk);
    assert!(!unknown.is_empty() && unknown.len() <= 100, "{}", unknown.len());
    assert!(unknown[0].ends_with(&format!("{key}.f0")), "{}", &unknown[0][unknown[0].len() - 10..]);
    b.prune("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &mut with_junk);
    let kept = &with_junk["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][&key];
    assert_eq!(kept, &json!({"type": "object", "properties": {}}), "every unknown field pruned");
    let wrong = crd(serde_json::Map::new(), serde_json::Value::Object(mistyped));
    let errors = b.type_errors("apiextensions.k8s.io", "v1", "CustomResourceDefinition", &wrong);
    assert!(!errors.is_empty() && errors.len() <= 100, "{}", errors.len());
}

#[test]
fn logical_cluster_and_crd_documents() {
    let b = Builtins::get();
    assert!(b.has_kind("tenancy.kgate.dev", "v1alpha1", "LogicalCluster"));
    assert!(b.has_kind("", "v1", "ConfigMapList"));
    let lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "team-a"}, "spec": {"anything": 1},
        "status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}], "bogus": 1}});
    assert_eq!(b.unknown_fields("tenancy.kgate.dev", "v1alpha1", "LogicalCluster", &lc), vec!["status.bogus"]);
    let res = [ResourceOps {
        plural: "logicalclusters",
        kind: "LogicalCluster",
        namespaced: false,
        status: true,
        scale: false,
        verbs: DEPLOY_VERBS,
    }];
    let doc = b.gv_document("tenancy.kgate.dev", "v1alpha1", &res);
    let patch = &doc["paths"]["/apis/tenancy.kgate.dev/v1alpha1/logicalclusters/{name}"]["patch"];
    assert!(patch["requestBody"]["content"].get("application/strategic-merge-patch+json").is_none());

    let crd_schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    let custom = [CustomKind { kind: "CronTab", schema: &crd_schema }];
    let res = [ResourceOps {
        plural: "crontabs",
        kind: "CronTab",
        namespaced: true,
        status: false,
        scale: false,
        verbs: DEPLOY_VERBS,
    }];
    let doc = b.gv_document_with("stable.example.com", "v1", &res, &custom).unwrap();
    let s = &doc["components"]["schemas"]["com.example.stable.v1.CronTab"];
    assert_eq!(s["x-kubernetes-group-version-kind"][0]["kind"], "CronTab");
    assert!(doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
}

#[test]
fn token_subresource_and_core_paths() {
    let res = [
        ResourceOps {
            plural: "configmaps",
            kind: "ConfigMap",
            namespaced: true,
            status: false,
            scale: false,
            verbs: DEPLOY_VERBS,
        },
        ResourceOps {
            plural: "namespaces",
            kind: "Namespace",
            namespaced: false,
            status: true,
            scale: false,
            verbs: DEPLOY_VERBS,
        },
        ResourceOps {
            plural: "serviceaccounts/token",
            kind: "TokenRequest",
            namespaced: true,
            status: false,
            scale: false,
            verbs: &["create"],
        },
    ];
    let doc = Builtins::get().gv_document("", "v1", &res);
    let paths = &doc["paths"];
    assert!(paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"].is_object());
    assert!(paths["/api/v1/configmaps"]["get"].is_object());
    assert!(paths["/api/v1/namespaces/{name}/status"]["patch"].is_object());
    let token = &paths["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"];
    assert_eq!(token["x-kubernetes-group-version-kind"]["group"], "authentication.k8s.io");
    assert_eq!(
        paths["/api/v1/namespaces/{namespace}/configmaps"]["get"]["operationId"],
        "listCoreV1NamespacedConfigMap"
    );
}

#[test]
fn hash_is_uppercase_sha512_hex() {
    let h = doc_hash(b"{}");
    assert_eq!(h.len(), 128);
    assert!(h.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
}

#[test]
fn every_served_kind_has_a_self_contained_document() {
    let b = Builtins::get();
    let all: &[(&str, &str, &str, &str, bool)] = &[
        ("", "v1", "Namespace", "namespaces", false),
        ("", "v1", "ConfigMap", "configmaps", true),
        ("", "v1", "Secret", "secrets", true),
        ("", "v1", "ServiceAccount", "serviceaccounts", true),
        ("", "v1", "Service", "services", true),
        ("", "v1", "Event", "events", true),
        ("", "v1", "Pod", "pods", true),
        ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true),
        ("events.k8s.io", "v1", "Event", "events", true),
        ("coordination.k8s.io", "v1", "Lease", "leases", true),
        ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false),
        ("apps", "v1", "StatefulSet", "statefulsets", true),
        ("batch", "v1", "CronJob", "cronjobs", true),
        ("networking.k8s.io", "v1", "Ingress", "ingresses", true),
        ("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true),
        ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true),
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false),
        ("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false),
    ];
    for &(group, version, kind, plural, namespaced) in all {
        assert!(b.has_kind(group, version, kind), "{group}/{kind}");
        let res = [ResourceOps { plural, kind, namespaced, status: true, scale: false, verbs: DEPLOY_VERBS }];
        let doc = b.gv_document(group, version, &res);
        let schemas = &doc["components"]["schemas"];
        let mut refs = Vec::new();
        schema::collect_refs(&doc, &mut refs);
        for r in refs {
            assert!(schemas[&r].is_object(), "{kind}: dangling {r}");
        }
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let has_patch = doc["paths"].as_object().unwrap().values().any(|p| {
            p["patch"]["x-kubernetes-group-version-kind"] == gvk
                && p["patch"]["parameters"].to_string().contains("\"fieldValidation\"")
        });
        assert!(has_patch, "{kind}: no patch op with fieldValidation");
    }
}

#[test]
fn subresources_are_named_after_their_owner_and_streams_connect() {
    let res = [
        ResourceOps { plural: "pods", kind: "Pod", namespaced: true, status: true, scale: false, verbs: DEPLOY_VERBS },
        ResourceOps {
            plural: "pods/eviction",
            kind: "Eviction",
            namespaced: true,
            status: false,
            scale: false,
            verbs: &["create"],
        },
        ResourceOps { plural: "pods/log", kind: "Pod", namespaced: true, status: false, scale: false, verbs: &["get"] },
        ResourceOps {
            plural: "pods/proxy",
            kind: "PodProxyOptions",
            namespaced: true,
            status: false,
            scale: false,
            verbs: &["create", "delete", "get", "patch", "update"],
        },
    ];
    let doc = Builtins::get().gv_document("", "v1", &res);
    let paths = &doc["paths"];
    let eviction = &paths["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"];
    assert_eq!(eviction["operationId"], "createCoreV1NamespacedPodEviction");
    assert_eq!(eviction["x-kubernetes-group-version-kind"]["group"], "policy");
    assert_eq!(
        eviction["requestBody"]["content"]["*/*"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.policy.v1.Eviction"
    );
    assert!(doc["components"]["schemas"]["io.k8s.api.policy.v1.Eviction"].is_object());
    let log = &paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"];
    assert_eq!(
        (&log["operationId"], &log["responses"]["200"]["content"]["text/plain"]["schema"]["type"]),
        (&json!("readCoreV1NamespacedPodLog"), &json!("string"))
    );
    let proxy = &paths["/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}"];
    assert_eq!(proxy["put"]["operationId"], "connectCoreV1PutNamespacedPodProxyWithPath");
    let params: Vec<&str> =
        proxy["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(params, ["name", "path", "namespace", "pretty"]);
    assert_eq!(paths["/api/v1/namespaces/{namespace}/pods/{name}/proxy"]["delete"]["x-kubernetes-action"], "connect");
}
