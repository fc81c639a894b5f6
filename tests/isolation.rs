//! Tenant isolation matrix: identities of cluster A (tokens of admin, edit and view ServiceAccounts, a
//! deleted ServiceAccount's token, an expired token, a certificate from an unknown CA, no credentials)
//! against every verb on resources and subresources of cluster B, addressed by path, by header, by both
//! disagreeing, by wildcard and by encoded or odd paths. Nothing of B may be returned or changed, and
//! each case gets the status kube-apiserver would give.

mod common;

use std::collections::BTreeMap;

use common::{Backend, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

const MARKER: &str = "b-only-marker-7f3a";

fn kgate_kubeconfig(s: &TestServer, cluster: &str, sa: &str, role: &str) -> String {
    common::token_of(&s.role_kubeconfig(cluster, sa, role))
}

/// Every key of a cluster with its revision.
async fn snapshot(s: &TestServer, cluster: &str) -> BTreeMap<String, i64> {
    let store = s.running_store();
    let mut out = BTreeMap::new();
    for def in kgate::resources::builtins() {
        let prefix = kgate::storage::keys::collection(&s.prefix, def.storage_group(), &def.plural, Some(cluster), None);
        let page = store.range(kgate::storage::RangeRequest { prefix, ..Default::default() }).await.unwrap();
        out.extend(page.kvs.into_iter().map(|kv| (kv.key, kv.mod_revision)));
    }
    out
}

/// One way of addressing cluster B (or trying to).
struct Address {
    label: &'static str,
    /// Path prefix before `/api/...`.
    prefix: &'static str,
    header: Option<&'static str>,
    /// What kube-apiserver-like routing answers before authentication matters, if anything.
    malformed: bool,
}

const ADDRESSES: &[Address] = &[
    Address { label: "path", prefix: "/clusters/iso-b", header: None, malformed: false },
    Address { label: "header", prefix: "", header: Some("iso-b"), malformed: false },
    Address { label: "path A, header B", prefix: "/clusters/iso-a", header: Some("iso-b"), malformed: true },
    Address { label: "wildcard", prefix: "/clusters/*", header: None, malformed: false },
    Address { label: "encoded dash", prefix: "/clusters/iso%2Db", header: None, malformed: false },
    Address { label: "encoded slash", prefix: "/clusters/iso-a%2F..%2Fiso-b", header: None, malformed: true },
    Address { label: "upper case", prefix: "/clusters/ISO-B", header: None, malformed: true },
    Address { label: "double slash", prefix: "/clusters/iso-b/", header: None, malformed: true },
    Address { label: "empty name", prefix: "/clusters/", header: None, malformed: true },
];

/// (verb label, method, path after the cluster prefix, body).
fn operations() -> Vec<(&'static str, Method, String, Option<Value>)> {
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "victim"}, "data": {"v": "overwritten"}});
    vec![
        ("get", Method::GET, format!("{cms}/victim"), None),
        ("list", Method::GET, cms.to_string(), None),
        ("list all namespaces", Method::GET, "/api/v1/configmaps".to_string(), None),
        ("watch", Method::GET, format!("{cms}?watch=true&timeoutSeconds=1"), None),
        ("get secret", Method::GET, "/api/v1/namespaces/default/secrets/victim-secret".to_string(), None),
        ("create", Method::POST, cms.to_string(), Some(json!({"metadata": {"name": "intruder"}}))),
        ("update", Method::PUT, format!("{cms}/victim"), Some(cm)),
        ("patch", Method::PATCH, format!("{cms}/victim"), Some(json!({"data": {"v": "patched"}}))),
        ("delete", Method::DELETE, format!("{cms}/victim"), None),
        ("deletecollection", Method::DELETE, cms.to_string(), None),
        (
            "create token",
            Method::POST,
            "/api/v1/namespaces/default/serviceaccounts/default/token".to_string(),
            Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
        ),
        ("get scale", Method::GET, "/apis/apps/v1/namespaces/default/deployments/victim/scale".to_string(), None),
        (
            "update scale",
            Method::PUT,
            "/apis/apps/v1/namespaces/default/deployments/victim/scale".to_string(),
            Some(
                json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "victim", "namespace": "default"}, "spec": {"replicas": 9}}),
            ),
        ),
        (
            "update status",
            Method::PUT,
            "/api/v1/namespaces/default/status".to_string(),
            Some(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}, "status": {"phase": "Terminating"}}),
            ),
        ),
        ("discovery", Method::GET, "/api".to_string(), None),
        ("get custom", Method::GET, "/apis/example.com/v1/namespaces/default/widgets/victim".to_string(), None),
        ("list custom", Method::GET, "/apis/example.com/v1/widgets".to_string(), None),
        (
            "patch custom",
            Method::PATCH,
            "/apis/example.com/v1/namespaces/default/widgets/victim".to_string(),
            Some(json!({"spec": {"v": "patched"}})),
        ),
        ("custom discovery", Method::GET, "/apis/example.com/v1".to_string(), None),
        ("openapi of a custom group", Method::GET, "/openapi/v3/apis/example.com/v1".to_string(), None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn identities_of_one_cluster_cannot_see_or_touch_another() {
    let s = TestServer::start(Backend::Embedded).await;
    for c in ["iso-a", "iso-b"] {
        s.create_cluster(c).await;
    }
    // B's data, which nothing below may read or change.
    let b = "/clusters/iso-b/api/v1/namespaces/default";
    let (code, body) =
        s.post(&format!("{b}/configmaps"), &json!({"metadata": {"name": "victim"}, "data": {"v": MARKER}})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let secret = json!({"metadata": {"name": "victim-secret"}, "stringData": {"v": MARKER}});
    assert_eq!(s.post(&format!("{b}/secrets"), &secret).await.0, StatusCode::CREATED);
    let deploy = json!({"metadata": {"name": "victim", "labels": {"m": MARKER}}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(
        s.post("/clusters/iso-b/apis/apps/v1/namespaces/default/deployments", &deploy).await.0,
        StatusCode::CREATED
    );

    // A custom resource only B serves, with the marker in an object and in its schema's description.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "description": MARKER, "x-kubernetes-preserve-unknown-fields": true}}}]}});
    assert_eq!(
        s.post("/clusters/iso-b/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await.0,
        StatusCode::CREATED
    );
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "victim"}, "spec": {"v": MARKER}});
    assert_eq!(
        s.post("/clusters/iso-b/apis/example.com/v1/namespaces/default/widgets", &widget).await.0,
        StatusCode::CREATED
    );

    let dir = s.dir.path().to_path_buf();
    let tokens = {
        let s = std::sync::Arc::new(s);
        let s2 = s.clone();
        let t = tokio::task::spawn_blocking(move || {
            ["admin", "edit", "view", "doomed"].map(|role| {
                let r = if role == "doomed" { "edit" } else { role };
                (role, kgate_kubeconfig(&s2, "iso-a", &format!("sa-{role}"), r))
            })
        })
        .await
        .unwrap();
        (std::sync::Arc::try_unwrap(s).ok().expect("one handle"), t)
    };
    let (s, tokens) = tokens;
    // The tokens work in A (so every refusal below is about B, not a broken token).
    for (role, token) in &tokens {
        let r = s
            .anonymous
            .get(format!("{}/clusters/iso-a/api/v1/namespaces/default/configmaps", s.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{role} token in its own cluster");
    }
    assert_eq!(s.delete("/clusters/iso-a/api/v1/namespaces/default/serviceaccounts/sa-doomed").await.0, StatusCode::OK);
    let expired = {
        let key =
            s.running_store().get(&kgate::token::signing_key_path(&s.running_prefix())).await.unwrap().unwrap().value;
        let signer = kgate::token::Signer::new(key);
        let mut claims = signer.verify(&tokens[0].1, 0).unwrap();
        claims.exp = chrono::Utc::now().timestamp() - 1;
        signer.sign(&claims)
    };
    let before = snapshot(&s, "iso-b").await;

    // (identity, client, bearer token)
    // A certificate signed by a CA kgate has never seen.
    let other = tempfile::tempdir().unwrap();
    let foreign_ca = kgate::pki::ensure(other.path(), "127.0.0.1", "https://127.0.0.1:1").unwrap().ca;
    let foreign = common::cert_client(&dir, &foreign_ca, "intruder", &["system:masters"]);
    let mut identities: Vec<(String, reqwest::Client, Option<String>)> =
        tokens.iter().map(|(role, t)| (format!("{role} token of A"), s.anonymous.clone(), Some(t.clone()))).collect();
    identities.push(("expired token of A".into(), s.anonymous.clone(), Some(expired)));
    identities.push(("certificate from an unknown CA".into(), foreign, None));
    identities.push(("no credentials".into(), s.anonymous.clone(), None));

    let mut cases = 0;
    for (who, client, token) in &identities {
        for addr in ADDRESSES {
            for (verb, method, rest, body) in operations() {
                let url = format!("{}{}{}", s.url, addr.prefix, rest);
                let mut req = client.request(method.clone(), &url);
                if let Some(t) = token {
                    req = req.bearer_auth(t);
                }
                if let Some(h) = addr.header {
                    req = req.header("X-Kubernetes-Cluster", h);
                }
                if let Some(b) = &body {
                    let ct = if method == Method::PATCH { "application/merge-patch+json" } else { "application/json" };
                    req = req.header("content-type", ct).body(b.to_string());
                }
                let label = format!("{who} / {} / {verb} {url}", addr.label);
                cases += 1;
                let resp = match req.send().await {
                    Ok(r) => r,
                    // kube-apiserver refuses the TLS handshake for a certificate it cannot verify.
                    Err(e) => {
                        assert!(who.contains("unknown CA"), "{label}: request failed: {e}");
                        continue;
                    }
                };
                assert!(!who.contains("unknown CA"), "{label}: a foreign certificate got an HTTP answer");
                let code = resp.status();
                let text = resp.text().await.unwrap_or_default();
                assert!(!text.contains(MARKER), "{label}: B's data leaked: {text}");
                assert!(!code.is_success(), "{label}: {code} {text}");
                let expected: &[u16] = if addr.malformed {
                    // Refused as a bad request or an unknown path, or as unauthenticated first.
                    &[400, 401, 404]
                } else {
                    // A token bound to A, a dead or expired token, or nothing: unauthenticated.
                    &[401]
                };
                assert!(expected.contains(&code.as_u16()), "{label}: {code} (expected one of {expected:?}) {text}");
                if code.as_u16() == 401 {
                    let st: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    assert_eq!(st["reason"], "Unauthorized", "{label}: {text}");
                }
            }
        }
    }
    assert!(cases > 500, "{cases} cases");
    assert_eq!(snapshot(&s, "iso-b").await, before, "nothing of B changed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn impersonation_needs_rbac_and_then_acts_as_the_named_user() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("imp").await;
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let edit = tokio::task::spawn_blocking(move || kgate_kubeconfig(&s2, "imp", "editor", "edit")).await.unwrap();
    let cms = format!("{}/clusters/imp/api/v1/namespaces/default/configmaps", s.url);
    // An editor may not impersonate: 403 in kube's words, and the write does not happen.
    for (header, value, resource) in
        [("Impersonate-User", "root-admin", "users"), ("Impersonate-Group", "system:masters", "users")]
    {
        let mut r = s.anonymous.post(&cms).bearer_auth(&edit).json(&json!({"metadata": {"name": "sneaky"}}));
        r = r.header(header, value);
        if header == "Impersonate-Group" {
            r = r.header("Impersonate-User", "someone");
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{header}");
        let st: Value = resp.json().await.unwrap();
        let msg = st["message"].as_str().unwrap();
        assert!(msg.contains(&format!("cannot impersonate resource \"{resource}\"")), "{msg}");
    }
    assert_eq!(s.get("/clusters/imp/api/v1/namespaces/default/configmaps/sneaky").await.0, StatusCode::NOT_FOUND);
    // system:masters may impersonate; the request then has only the impersonated user's rights.
    let as_dev = s.client.get(&cms).header("Impersonate-User", "dev").send().await.unwrap();
    assert_eq!(as_dev.status(), StatusCode::FORBIDDEN);
    let st: Value = as_dev.json().await.unwrap();
    assert!(st["message"].as_str().unwrap().contains("User \"dev\" cannot list resource \"configmaps\""), "{st}");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let whoami = s
        .client
        .post(format!("{}/clusters/imp/apis/authentication.k8s.io/v1/selfsubjectreviews", s.url))
        .header("Impersonate-User", "dev")
        .header("Impersonate-Group", "devs")
        .json(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status(), StatusCode::CREATED);
    let got: Value = whoami.json().await.unwrap();
    assert_eq!(got["status"]["userInfo"]["username"], "dev");
    let groups = got["status"]["userInfo"]["groups"].as_array().unwrap();
    assert!(groups.contains(&json!("devs")) && !groups.contains(&json!("system:masters")), "{groups:?}");
    std::sync::Arc::try_unwrap(s).ok().expect("one handle").stop().await;
}

/// Root's `/metrics` describes the whole server: only root's RBAC grants it, never a tenant's own
/// cluster-admin (whose `nonResourceURLs: ["*"]` covers every path), and all custom resources share
/// one label value, so tenants' type names neither show nor add series. A cluster's `/metrics` is its
/// own requests only, granted by its own RBAC, so a team can scrape its cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_metrics_are_root_only_and_do_not_name_tenant_types() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("met-a").await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "secretplans.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "secretplans", "kind": "SecretPlan"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let (code, body) = s.post("/clusters/met-a/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let plans = "/clusters/met-a/apis/example.com/v1/namespaces/default/secretplans";
    common::eventually(20, "the custom resource to be served", || async { s.get(plans).await.0 == StatusCode::OK })
        .await;
    let plan = json!({"apiVersion": "example.com/v1", "kind": "SecretPlan", "metadata": {"name": "p"}});
    assert_eq!(s.post(plans, &plan).await.0, StatusCode::CREATED);

    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let admin = tokio::task::spawn_blocking(move || kgate_kubeconfig(&s2, "met-a", "ops", "admin")).await.unwrap();
    let get = |path: &str| s.anonymous.get(format!("{}{path}", s.url)).bearer_auth(&admin).send();
    let own = get("/clusters/met-a/metrics").await.unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let own = own.text().await.unwrap();
    assert!(own.contains("apiserver_request_total{verb=\"list\",code=\"2xx\"}"), "{own}");
    assert!(own.contains("apiserver_request_duration_seconds_count{verb=\"create\"}"), "{own}");
    assert!(
        !own.contains("request_kind") && !own.contains("apiserver_storage_objects{resource=\"logicalclusters"),
        "the server's own series stay root's: {own}"
    );
    // What it holds, as kube-apiserver's storage metric names it, once counted (within moments).
    for want in [
        "apiserver_storage_objects{resource=\"namespaces\"} 4",
        "apiserver_storage_objects{resource=\"customresourcedefinitions.apiextensions.k8s.io\"} 1",
        "apiserver_storage_objects{resource=\"secretplans.example.com\"} 1",
        "kgate_cluster_namespaces 4",
    ] {
        common::eventually(10, want, || async {
            get("/clusters/met-a/metrics").await.unwrap().text().await.unwrap().contains(want)
        })
        .await;
    }
    // The token is bound to its cluster, so root does not know it.
    assert_eq!(get("/metrics").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let r = s.anonymous.get(format!("{}/metrics", s.url)).header("X-Kubernetes-Cluster", "met-a").bearer_auth(&admin);
    assert_eq!(r.send().await.unwrap().status(), StatusCode::OK);
    // A viewer of the cluster is not granted the path.
    let s3 = s.clone();
    let viewer = tokio::task::spawn_blocking(move || kgate_kubeconfig(&s3, "met-a", "watcher", "view")).await.unwrap();
    let r = s.anonymous.get(format!("{}/clusters/met-a/metrics", s.url)).bearer_auth(&viewer);
    assert_eq!(r.send().await.unwrap().status(), StatusCode::FORBIDDEN);

    let root = s.client.get(format!("{}/metrics", s.url)).send().await.unwrap();
    assert_eq!(root.status(), StatusCode::OK);
    let text = root.text().await.unwrap();
    assert!(!text.contains("secretplans"), "a tenant's type is named in the metrics");
    assert!(
        text.lines().any(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"customresources\"")),
        "the custom resource's requests are counted under one label"
    );
    assert!(text.contains("kgate_cluster_request_rate{cluster=\"met-a\"}"), "the busy cluster is named");
}

/// Root names only the busiest clusters (`--metrics-top-clusters`) and sums the rest, so its series
/// do not grow with the number of clusters.
#[tokio::test]
async fn root_metrics_name_only_the_busiest_clusters() {
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let s = TestServer::start_configured(Backend::Embedded, tempfile::tempdir().unwrap(), prefix, |c| {
        c.metrics_top_clusters = 2;
    })
    .await;
    for (i, name) in ["top-a", "top-b", "top-c", "top-d"].into_iter().enumerate() {
        s.create_cluster(name).await;
        // top-d is the busiest, then top-c.
        for _ in 0..(i + 1) * 5 {
            assert_eq!(s.get(&format!("/clusters/{name}/api/v1/namespaces")).await.0, StatusCode::OK);
        }
    }
    let text = s.client.get(format!("{}/metrics", s.url)).send().await.unwrap().text().await.unwrap();
    let named: Vec<&str> = text.lines().filter(|l| l.starts_with("kgate_cluster_request_rate{")).collect();
    assert_eq!(named.len(), 3, "{named:?}");
    assert!(named[0].contains("\"top-d\"") && named[1].contains("\"top-c\""), "{named:?}");
    assert!(named[2].contains("\"other\""), "{named:?}");
    s.stop().await;
}

/// One tenant's flood of requests or watches is answered 429 with `Retry-After`, which client-go and
/// kubectl wait out and retry, while other tenants and the platform's admin are still served. A place
/// comes back when its request ends, and a refused write changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_in_flight_share_gets_429_and_the_others_are_served() {
    // A write that finds the server's budget spent waits its turn this long, then is refused.
    let queue_wait = std::time::Duration::from_millis(500);
    let limits = kgate::http::inflight::Limits {
        requests: 100,
        mutating: 3,
        per_cluster: 2,
        watches_per_cluster: 2,
        queue_wait,
    };
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let s = TestServer::start_configured(Backend::Embedded, tempfile::tempdir().unwrap(), prefix, |c| {
        c.inflight = limits;
    })
    .await;
    let clusters = ["fl-a", "fl-b", "fl-c"];
    for c in clusters {
        s.create_cluster(c).await;
    }
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let (kubeconfigs, boss) = tokio::task::spawn_blocking(move || {
        (
            clusters.map(|c| s2.role_kubeconfig(c, "dev", "edit")),
            common::token_of(&s2.role_kubeconfig("fl-a", "boss", "admin")),
        )
    })
    .await
    .unwrap();
    let tokens = kubeconfigs.clone().map(|k| common::token_of(&k));
    let cms = |c: usize| format!("{}/clusters/{}/api/v1/namespaces/default/configmaps", s.url, clusters[c]);
    // A write whose body never ends stays in flight until the client gives it up.
    let hang = |c: usize| {
        let body = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
        let r = s.anonymous.post(cms(c)).bearer_auth(&tokens[c]).header("content-type", "application/json");
        let r = r.body(reqwest::Body::wrap_stream(body));
        tokio::spawn(async move {
            let _ = r.send().await;
        })
    };
    let writes_in_flight = || s.metric("apiserver_current_inflight_requests{request_kind=\"mutating\"}");
    let get = |c: usize| s.anonymous.get(cms(c)).bearer_auth(&tokens[c]).send();

    // fl-a's share is two: its third request is refused, with the hint clients wait on.
    let (a1, a2) = (hang(0), hang(0));
    common::eventually(10, "two writes of fl-a in flight", || async { writes_in_flight().await == 2.0 }).await;
    let r = get(0).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "1");
    let status: Value = r.json().await.unwrap();
    assert_eq!((status["kind"].as_str(), status["reason"].as_str()), (Some("Status"), Some("TooManyRequests")));
    assert_eq!((status["code"].as_u64(), status["details"]["retryAfterSeconds"].as_u64()), (Some(429), Some(1)));
    assert!(status["message"].as_str().unwrap().contains("\"fl-a\""), "{status}");
    // fl-a's own cluster-admin may impersonate system:masters there, but is still fl-a's.
    let r = s.anonymous.get(cms(0)).bearer_auth(&boss).header("Impersonate-User", "root-admin");
    let r = r.header("Impersonate-Group", "system:masters").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another tenant, and the admin in fl-a itself, are served.
    assert_eq!(get(1).await.unwrap().status(), StatusCode::OK);
    assert_eq!(s.get("/clusters/fl-a/api/v1/namespaces/default/configmaps").await.0, StatusCode::OK);

    // The server's budget of writes is three: with fl-b holding the last, fl-c waits its turn, and
    // when none comes is refused although its own share is free; its write is not made; the admin's is.
    let b1 = hang(1);
    common::eventually(10, "three writes in flight", || async { writes_in_flight().await == 3.0 }).await;
    let r = s.anonymous.post(cms(2)).bearer_auth(&tokens[2]).json(&json!({"metadata": {"name": "refused"}}));
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json::<Value>().await.unwrap()["message"], "Too many requests, please try again later.");
    assert_eq!(s.get("/clusters/fl-c/api/v1/namespaces/default/configmaps/refused").await.0, StatusCode::NOT_FOUND);
    let (code, body) =
        s.post("/clusters/fl-c/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": "by-admin"}})).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    b1.abort();
    common::eventually(10, "a given-up write to leave", || async { writes_in_flight().await == 2.0 }).await;

    // kubectl is refused while fl-a's share is full, waits, and succeeds once a place comes back.
    let refused = || s.metric("kgate_requests_refused_total{limit=\"cluster\"}");
    let before = refused().await;
    let kubeconfig = kubeconfigs[0].clone();
    let kubectl =
        tokio::task::spawn_blocking(move || common::kubectl(&kubeconfig, &["get", "configmaps", "-o", "name"]));
    common::eventually(20, "kubectl to be refused", || async { refused().await > before }).await;
    a1.abort();
    let (ok, _, err) = kubectl.await.unwrap();
    assert!(ok, "kubectl gave up instead of retrying: {err}");
    a2.abort();
    common::eventually(10, "fl-a's writes to leave", || async { writes_in_flight().await == 0.0 }).await;

    // Watches are not requests in flight; fl-a may hold two open, and a closed one gives its place back.
    let watch = |c: usize| s.anonymous.get(format!("{}?watch=true", cms(c))).bearer_auth(&tokens[c]).send();
    let w1 = watch(0).await.unwrap();
    let w2 = watch(0).await.unwrap();
    assert_eq!((w1.status(), w2.status()), (StatusCode::OK, StatusCode::OK));
    let r = watch(0).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.json::<Value>().await.unwrap()["message"].as_str().unwrap().contains("watches"));
    assert_eq!(get(0).await.unwrap().status(), StatusCode::OK);
    let other = watch(1).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    let admin = s.client.get(format!("{}?watch=true", cms(0))).send().await.unwrap();
    assert_eq!(admin.status(), StatusCode::OK);
    drop(w1);
    common::eventually(10, "a closed watch to give its place back", || async {
        watch(0).await.unwrap().status() == StatusCode::OK
    })
    .await;
    drop((w2, other, admin));
}

/// A platform caps one tenant below the server's defaults with `spec.limits` on its LogicalCluster:
/// requests in flight and watches open. Others keep the defaults, and lifting the cap takes effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clusters_own_limits_override_the_defaults() {
    let s = TestServer::start(Backend::Embedded).await;
    let lcs = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";
    let capped = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "capped"}, "spec": {"limits": {"requestsInFlight": 1, "watches": 1}}});
    assert_eq!(s.post(lcs, &capped).await.0, StatusCode::CREATED);
    s.create_cluster("uncapped").await;
    let mut bad = capped.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["limits"]["watches"] = json!("many");
    assert_eq!(s.post(lcs, &bad).await.0, StatusCode::BAD_REQUEST);
    let tokens = [s.tenant_token("capped", "dev", "edit").await, s.tenant_token("uncapped", "dev", "edit").await];
    let cms =
        |c: usize| format!("{}/clusters/{}/api/v1/namespaces/default/configmaps", s.url, ["capped", "uncapped"][c]);
    let get = |c: usize| s.anonymous.get(cms(c)).bearer_auth(&tokens[c]).send();
    let watch = |c: usize| s.anonymous.get(format!("{}?watch=true", cms(c))).bearer_auth(&tokens[c]).send();

    let w1 = watch(0).await.unwrap();
    assert_eq!(w1.status(), StatusCode::OK);
    let refused = watch(0).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.text().await.unwrap().contains("(limit 1)"));
    let others: Vec<_> = futures::future::join_all((0..3).map(|_| watch(1))).await;
    assert!(others.iter().all(|w| w.as_ref().unwrap().status() == StatusCode::OK), "the defaults hold elsewhere");

    // A write whose body never ends holds capped's one place.
    let body = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
    let hung = s.anonymous.post(cms(0)).bearer_auth(&tokens[0]).header("content-type", "application/json");
    let hung = tokio::spawn(hung.body(reqwest::Body::wrap_stream(body)).send());
    let writes = || s.metric("apiserver_current_inflight_requests{request_kind=\"mutating\"}");
    common::eventually(10, "capped's write in flight", || async { writes().await == 1.0 }).await;
    let r = get(0).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let message = r.json::<Value>().await.unwrap()["message"].as_str().unwrap().to_string();
    assert!(message.contains("in flight in logical cluster \"capped\""), "{message}");
    assert_eq!(get(1).await.unwrap().status(), StatusCode::OK);

    // Lifting the cap holds at once for the next request.
    let lift = json!({"spec": {"limits": null}});
    let (code, body) = s.patch(&format!("{lcs}/capped"), "application/merge-patch+json", &lift).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    common::eventually(10, "the cap to be lifted", || async { get(0).await.unwrap().status() == StatusCode::OK }).await;
    hung.abort();
    drop((w1, others));
    s.stop().await;
}

/// Usage counting on etcd watches every key without previous values (etcd 3.4 reads one for each
/// event of a watch that asks, in a read that copies every write not yet on disk) and reads an old
/// size back only where it needs one: never for a LogicalCluster, whose size it remembers, since
/// clusters created and deleted by the thousand rewrite theirs two or three times each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counting_reads_back_old_sizes_only_where_a_change_needs_one() {
    use kgate::storage::Store;
    let etcd = common::TestEtcd::start();
    let inner = kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), &Default::default())
        .await
        .unwrap();
    let inner: std::sync::Arc<dyn Store> = std::sync::Arc::new(inner);
    // The registry's calls metered, the test's own not.
    let metrics = kgate::storage::metered::StoreMetrics::new().unwrap();
    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(kgate::storage::metered::Metered::new(inner.clone(), metrics.clone()));
    let lc = |name: &str, pad: usize| {
        let obj = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
            "metadata": {"name": name, "annotations": {"pad": "p".repeat(pad)}}, "spec": {}});
        serde_json::to_vec(&obj).unwrap()
    };
    let key = |name: &str| format!("/registry/tenancy.kgate.dev/logicalclusters/root/{name}");
    // One LogicalCluster there before counting starts: its size comes from the first listing.
    let early = inner.create(&key("early"), lc("early", 100)).await.unwrap();
    let registry = kgate::registry::Registry::new(store.clone(), "/registry");
    let counting = tokio::spawn(registry.clone().run_counts(true));
    common::eventually(20, "the first listing to be counted", || async { registry.footprint.counting() }).await;
    let reads = || metrics.latency.with_label_values(&["range"]).get_sample_count();
    // The quota index lists alongside: counted reads are those after both listings.
    let mut settled = reads();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let now = reads();
        if now == settled {
            break;
        }
        settled = now;
    }
    let root_counted = || async {
        let all = kgate::storage::RangeRequest { prefix: "/registry/".into(), ..Default::default() };
        let root: Vec<(String, Vec<u8>)> = inner
            .range(all)
            .await
            .unwrap()
            .kvs
            .into_iter()
            .filter(|kv| kv.key.split('/').nth(4) == Some("root"))
            .map(|kv| (kv.key, kv.value))
            .collect();
        kgate::registry::footprint::Usage::of_keys("/registry", &root) == registry.footprint.usage("root")
    };

    // LogicalClusters made, rewritten larger and smaller, and deleted: each change counted in root,
    // and nothing read back.
    let listed = reads();
    store.update(&key("early"), lc("early", 700), early).await.unwrap();
    let mut revs = Vec::new();
    for i in 0..6 {
        revs.push(store.create(&key(&format!("t{i}")), lc(&format!("t{i}"), 100)).await.unwrap());
    }
    for (i, rev) in revs.iter_mut().enumerate() {
        *rev = store.update(&key(&format!("t{i}")), lc(&format!("t{i}"), 100 + 300 * (i % 3)), *rev).await.unwrap();
    }
    for (i, rev) in revs.iter().enumerate().take(3) {
        store.delete(&key(&format!("t{i}")), Some(*rev)).await.unwrap();
    }
    common::eventually(20, "root's counts to equal a count of its keys", root_counted).await;
    assert_eq!(reads(), listed, "a LogicalCluster's old size was read back");

    // Another object's update needs its old size, read back at the revision before it.
    let cm = "/registry/core/configmaps/root/default/sized";
    let rev = store.create(cm, vec![b'x'; 2_000]).await.unwrap();
    store.update(cm, vec![b'y'; 500], rev).await.unwrap();
    common::eventually(20, "root's counts to equal a count of its keys after an update", root_counted).await;
    assert!(reads() > listed, "the update's old size was not read back");
    counting.abort();
}

/// A registry on a fresh etcd (prefix `/registry`) with usage counting running and its first listing
/// counted; the etcd stops when its handle is dropped.
async fn counting_on_etcd(
) -> (common::TestEtcd, std::sync::Arc<dyn kgate::storage::Store>, kgate::registry::Registry, tokio::task::JoinHandle<()>)
{
    let etcd = common::TestEtcd::start();
    let store = kgate::storage::etcd::EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), &Default::default())
        .await
        .unwrap();
    let store: std::sync::Arc<dyn kgate::storage::Store> = std::sync::Arc::new(store);
    let registry = kgate::registry::Registry::new(store.clone(), "/registry");
    let counting = tokio::spawn(registry.clone().run_counts(true));
    common::eventually(20, "the first listing to be counted", || async { registry.footprint.counting() }).await;
    (etcd, store, registry, counting)
}

/// Usage counting stays exact under writes that race each other and its own reads: many writers
/// create, resize and delete keys of three clusters at once, each key rewritten several times within
/// moments (so that the old sizes it reads back, at the revision before each change, come while later
/// changes of the same key are already in its backlog), with LogicalClusters rewritten meanwhile.
/// When the writes stop, each cluster's counts equal a count of its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_equal_a_recount_after_racing_writes() {
    use kgate::storage::StoreError;
    let (_etcd, store, registry, counting) = counting_on_etcd().await;
    let clusters = ["race-a", "race-b", "race-c"];
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..12usize {
        let store = store.clone();
        writers.spawn(async move {
            for round in 0..25usize {
                let cluster = clusters[(w + round) % clusters.len()];
                let key = format!("/registry/core/configmaps/{cluster}/default/k{}", (w * 7 + round) % 10);
                let size = 50 + (w * 131 + round * 977) % 4000;
                // Create, or else resize what is there; every third round deletes it after.
                let rev = match store.create(&key, vec![b'c'; size]).await {
                    Ok(rev) => Some(rev),
                    Err(StoreError::AlreadyExists) => match store.get(&key).await.unwrap() {
                        Some(kv) => store.update(&key, vec![b'u'; size / 2 + 10], kv.mod_revision).await.ok(),
                        None => None,
                    },
                    // A slow write sent again after another writer's change: a lost race, as the
                    // others; what landed is counted either way.
                    Err(StoreError::OutcomeUnknown(_)) => None,
                    Err(e) => panic!("{e}"),
                };
                if let (Some(rev), 0) = (rev, round % 3) {
                    let _ = store.delete(&key, Some(rev)).await;
                }
                if w == 0 {
                    // A LogicalCluster rewritten among them, its size changing each time.
                    let lc = format!("/registry/tenancy.kgate.dev/logicalclusters/root/{cluster}");
                    let value =
                        serde_json::to_vec(&json!({"metadata": {"name": cluster}, "pad": "p".repeat(round * 40)}))
                            .unwrap();
                    match store.get(&lc).await.unwrap() {
                        Some(kv) => drop(store.update(&lc, value, kv.mod_revision).await),
                        None => drop(store.create(&lc, value).await),
                    }
                }
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let counted = || async {
        let all = kgate::storage::RangeRequest { prefix: "/registry/".into(), ..Default::default() };
        let kvs = store.range(all).await.unwrap().kvs;
        ["root"].iter().chain(&clusters).all(|c| {
            let keys: Vec<(String, Vec<u8>)> = kvs
                .iter()
                .filter(|kv| kv.key.split('/').nth(4) == Some(*c))
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect();
            kgate::registry::footprint::Usage::of_keys("/registry", &keys) == registry.footprint.usage(c)
        })
    };
    common::eventually(30, "every cluster's counts to equal a count of its keys", counted).await;
    counting.abort();
}

/// Usage is not written to a LogicalCluster being bootstrapped: the write that marks it Ready records
/// what the bootstrap wrote and compares the revision it was created at, which a usage write would
/// move (on another shard, the bootstrap's objects are then taken back and written again). Once it
/// is Ready, counts it does not record are written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_waits_for_a_logical_cluster_to_be_ready() {
    let (_etcd, store, registry, counting) = counting_on_etcd().await;
    let key = "/registry/tenancy.kgate.dev/logicalclusters/root/young";
    let mut lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster",
        "metadata": {"name": "young", "uid": "u1"}, "spec": {}});
    kgate::tenancy::prepare_new(&mut lc);
    let created = store.create(key, serde_json::to_vec(&lc).unwrap()).await.unwrap();
    store.create("/registry/core/namespaces/young/default", b"{}".to_vec()).await.unwrap();
    common::eventually(20, "young's namespace to be counted", || async {
        registry.footprint.usage("young").namespaces == 1
    })
    .await;
    registry.flush_usage().await;
    let kv = store.get(key).await.unwrap().unwrap();
    assert_eq!(kv.mod_revision, created, "usage written to an Initializing LogicalCluster");

    lc["status"]["phase"] = json!("Ready");
    store.update(key, serde_json::to_vec(&lc).unwrap(), created).await.unwrap();
    common::eventually(20, "young's usage to be written once it is Ready", || async {
        registry.flush_usage().await;
        let kv = store.get(key).await.unwrap().unwrap();
        serde_json::from_slice::<serde_json::Value>(&kv.value).unwrap()["status"]["usage"]["namespaces"] == 1
    })
    .await;
    counting.abort();
}

/// A platform sees what each tenant holds on its LogicalCluster (`status.usage`, kept within seconds,
/// shown by `kubectl get logicalclusters`) and caps it with `spec.limits`: objects, stored bytes,
/// namespaces and CRDs, each refused past its limit with kube's quota words and nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_shown_and_capped_per_cluster_on_both_stores() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let lcs = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";
        s.create_cluster("acme").await;
        let usage = || async { s.get(&format!("{lcs}/acme")).await.1["status"]["usage"].clone() };
        common::eventually(20, "acme's usage to be written", || async { usage().await["namespaces"] == 4 }).await;
        let before = usage().await;
        let objects = before["objects"].as_u64().unwrap();
        let bytes = before["storageBytes"].as_u64().unwrap();
        assert!(objects > 10 && bytes > 1000, "a new cluster's defaults are counted: {before}");
        assert_eq!(before["customResourceDefinitions"], 0);

        let cms = "/clusters/acme/api/v1/namespaces/default/configmaps";
        let cm = |name: &str, size: usize| json!({"metadata": {"name": name}, "data": {"k": "x".repeat(size)}});
        assert_eq!(s.post(cms, &cm("one", 10_000)).await.0, StatusCode::CREATED);
        common::eventually(20, "the new object to be counted", || async {
            let u = usage().await;
            u["objects"].as_u64() >= Some(objects + 1) && u["storageBytes"].as_u64().unwrap() > bytes + 10_000
        })
        .await;
        let kc = s.kubeconfig();
        let table = common::kubectl_ok(&kc, &["get", "logicalclusters", "acme"]);
        let (head, row) = table.split_once('\n').unwrap();
        assert!(head.split_whitespace().eq(["NAME", "PHASE", "OBJECTS", "STORAGE", "NAMESPACES", "AGE"]), "{table}");
        let cells: Vec<&str> = row.split_whitespace().collect();
        // The columns show what the LogicalCluster's status holds (which moves on as writes land).
        assert_eq!(&cells[..2], ["acme", "Ready"], "{table}");
        assert!(cells[2].parse::<u64>().unwrap() > objects, "{table}");
        assert!(cells[3].ends_with("Ki"), "{table}");

        // Caps at what it holds now: the next object, namespace, CRD and byte are refused.
        let now = usage().await;
        let limits = json!({"spec": {"limits": {"objects": now["objects"], "namespaces": 4,
            "customResourceDefinitions": 0, "storageBytes": now["storageBytes"].as_u64().unwrap() + 5_000}}});
        let (code, body) = s.patch(&format!("{lcs}/acme"), "application/merge-patch+json", &limits).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        // Waited for by dry runs, which limits hold too and which write nothing: a real create sent
        // before this replica's watch brought the new limits would be made.
        common::eventually(10, "the objects cap to hold", || async {
            s.post(&format!("{cms}?dryRun=All"), &cm("two", 1)).await.0 == StatusCode::FORBIDDEN
        })
        .await;
        let (_, refused) = s.post(cms, &cm("two", 1)).await;
        // `status.usage` trails the live count by up to its 5 s interval (a namespace's defaults may
        // land after it was written), so the count used may be past the cap set from it.
        let message = refused["message"].as_str().unwrap();
        let head = "configmaps \"two\" is forbidden: exceeded quota: logicalcluster/acme, requested: objects=1, used: objects=";
        let rest = message.strip_prefix(head).unwrap_or_else(|| panic!("{refused}"));
        let (used, limited) = rest.split_once(", limited: objects=").unwrap_or_else(|| panic!("{refused}"));
        assert_eq!(limited, now["objects"].to_string(), "{refused}");
        assert!(used.parse::<u64>().unwrap() >= now["objects"].as_u64().unwrap(), "{refused}");
        let (code, refused) = s.post("/clusters/acme/api/v1/namespaces", &json!({"metadata": {"name": "fifth"}})).await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(refused["message"].as_str().unwrap().contains("namespaces=1, used: objects="), "{refused}");
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let (code, refused) =
            s.post("/clusters/acme/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(refused["message"].as_str().unwrap().contains("customResourceDefinitions=1"), "{refused}");
        // An update that grows past the bytes is refused; one within them passes.
        let (_, mut one) = s.get(&format!("{cms}/one")).await;
        one["data"]["k"] = json!("y".repeat(20_000));
        let (code, refused) = s.put(&format!("{cms}/one"), &one).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{refused}");
        assert!(refused["message"].as_str().unwrap().contains("storageBytes="), "{refused}");
        one["data"]["k"] = json!("y".repeat(12_000));
        assert_eq!(s.put(&format!("{cms}/one"), &one).await.0, StatusCode::OK);
        assert_eq!(s.get(&format!("{cms}/two")).await.0, StatusCode::NOT_FOUND, "nothing refused was written");
        // Others are not capped, and deleting makes room again.
        s.create_cluster("other").await;
        assert_eq!(
            s.post("/clusters/other/api/v1/namespaces/default/configmaps", &cm("two", 1)).await.0,
            StatusCode::CREATED
        );
        assert_eq!(s.delete(&format!("{cms}/one")).await.0, StatusCode::OK);
        common::eventually(10, "room to be made", || async {
            s.post(cms, &cm("two", 1)).await.0 == StatusCode::CREATED
        })
        .await;

        // A burst through one replica never passes the cap, though the counts trail the watch: each
        // admitted create holds its room until the watch counts it. At the cap now; five more allowed.
        let (code, refused) = s.post(cms, &cm("probe", 1)).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{refused}");
        let message = refused["message"].as_str().unwrap();
        let used: u64 =
            message.split("used: objects=").nth(1).and_then(|r| r.split(',').next()).unwrap().parse().unwrap();
        let raise = json!({"spec": {"limits": {"objects": used + 5}}});
        assert_eq!(s.patch(&format!("{lcs}/acme"), "application/merge-patch+json", &raise).await.0, StatusCode::OK);
        common::eventually(10, "the raised cap to hold", || async {
            s.post(cms, &cm("probe", 1)).await.0 == StatusCode::CREATED
        })
        .await;
        let creates = (0..30).map(|i| {
            let (client, url, body) = (s.client.clone(), format!("{}{cms}", s.url), cm(&format!("burst-{i}"), 1));
            tokio::spawn(async move { client.post(url).json(&body).send().await.unwrap().status() })
        });
        let codes: Vec<StatusCode> = futures::future::join_all(creates).await.into_iter().map(Result::unwrap).collect();
        let made = codes.iter().filter(|c| **c == StatusCode::CREATED).count();
        assert_eq!(made, 4, "{backend:?}: four of the five places were left: {codes:?}");
        assert!(codes.iter().all(|c| *c == StatusCode::CREATED || *c == StatusCode::FORBIDDEN), "{codes:?}");

        // The counts kept from the watch, through creates, updates and deletes, are what a count of
        // the store's keys finds.
        let lift = json!({"spec": {"limits": null}});
        assert_eq!(s.patch(&format!("{lcs}/acme"), "application/merge-patch+json", &lift).await.0, StatusCode::OK);
        let one = json!({"metadata": {"name": "one"}, "data": {"k": "z".repeat(3_000)}});
        common::eventually(10, "the cap to be lifted", || async { s.post(cms, &one).await.0 == StatusCode::CREATED })
            .await;
        let (_, mut one) = s.get(&format!("{cms}/one")).await;
        one["data"]["k"] = json!("w".repeat(2_000));
        assert_eq!(s.put(&format!("{cms}/one"), &one).await.0, StatusCode::OK);
        for name in ["two", "probe"] {
            assert_eq!(s.delete(&format!("{cms}/{name}")).await.0, StatusCode::OK);
        }
        let (store, prefix) = (s.running_store(), s.running_prefix());
        let recount = || async {
            let all = kgate::storage::RangeRequest { prefix: format!("{prefix}/"), ..Default::default() };
            let kvs = store.range(all).await.unwrap().kvs;
            let acme: Vec<(String, Vec<u8>)> = kvs
                .into_iter()
                .filter(|kv| kv.key[prefix.len() + 1..].split('/').nth(2) == Some("acme"))
                .map(|kv| (kv.key, kv.value))
                .collect();
            kgate::registry::footprint::Usage::of_keys(&prefix, &acme).to_json()
        };
        common::eventually(20, "acme's usage to equal a count of its keys", || async {
            usage().await == recount().await
        })
        .await;
        s.stop().await;
    }
}
