//! Tenants: `kgate cluster` and `kgate kubeconfig` end to end with kubectl, RBAC roles, and the
//! isolation of ServiceAccount tokens to their own logical cluster.

mod common;

use std::path::{Path, PathBuf};

use common::{kubectl, kubectl_ok, Backend, TestServer};
use reqwest::StatusCode;
use serde_json::json;

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
    let (ok, out, err) = kgate(
        &s.kubeconfig(),
        &["kubeconfig", "--cluster", cluster, "--service-account", &format!("default/{sa}"), "--role", role],
    );
    assert!(ok, "{err}");
    assert!(out.contains(&format!("/clusters/{cluster}")) && out.contains("token:"), "{out}");
    let path = s.dir.path().join(format!("{cluster}-{sa}.kubeconfig"));
    std::fs::write(&path, out).unwrap();
    path
}

fn token_of(kubeconfig: &Path) -> String {
    let v: serde_json::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    v["users"][0]["user"]["token"].as_str().unwrap().to_string()
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
