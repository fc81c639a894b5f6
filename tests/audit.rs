//! The audit log as kube-apiserver writes it: a policy picks each request's level, and every stage is
//! one `audit.k8s.io/v1` Event JSON line naming the logical cluster.

mod common;

use std::time::Duration;

use common::{Backend, TestServer};
use reqwest::StatusCode;
use serde_json::{json, Value};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: "", resources: ["secrets"]}]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
  omitStages: [RequestReceived]
"#;

/// The events written so far, once `ready` holds for them (the log is written by its own thread).
async fn events_until(path: &std::path::Path, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Only whole lines: the writer may be part way through the last one.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        let events: Vec<Value> = whole.lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect();
        if ready(&events) {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "audit events did not come: {events:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_policy_decides_and_each_stage_is_an_event_naming_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.path().join("audit").join("audit.log");
    let log_path = log.to_string_lossy().into_owned();
    let s = TestServer::start_configured(Backend::Embedded, dir, "/registry".into(), move |c| {
        c.audit = Some(kgate::config::AuditConfig {
            policy_file: policy,
            log: kgate::audit::LogOptions { path: log_path, ..Default::default() },
        });
    })
    .await;
    s.create_cluster("team-a").await;

    // A ConfigMap created in team-a, the cluster chosen by header: RequestResponse.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "audited"}, "data": {"k": "v"}});
    let r = s
        .client
        .post(format!("{}/api/v1/namespaces/default/configmaps", s.url))
        .header("X-Kubernetes-Cluster", "team-a")
        .json(&cm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    // A ServiceAccount named by the server: Metadata, which names it all the same.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"generateName": "gen-"}});
    let (code, made) = s.post("/clusters/team-a/api/v1/namespaces/default/serviceaccounts", &sa).await;
    assert_eq!(code, StatusCode::CREATED);
    // A Secret: level None, no event.
    let secret =
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hidden"}, "stringData": {"p": "w"}});
    assert_eq!(s.post("/clusters/team-a/api/v1/namespaces/default/secrets", &secret).await.0, StatusCode::CREATED);
    // Impersonating alice: Metadata, without RequestReceived.
    let r = s
        .client
        .get(format!("{}/clusters/team-a/apis", s.url))
        .header("Impersonate-User", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // A refused impersonation is recorded too, as the authenticated user.
    let viewer = s.tenant_token("team-a", "viewer", "view").await;
    let r = s
        .anonymous
        .get(format!("{}/clusters/team-a/api", s.url))
        .bearer_auth(&viewer)
        .header("Impersonate-User", "admin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let is_complete = |e: &Value, uri: &str| e["stage"] == "ResponseComplete" && e["requestURI"] == uri;
    let cm_uri = "/clusters/team-a/api/v1/namespaces/default/configmaps";
    let events = events_until(&log, |evs| {
        [
            "/clusters/team-a/apis",
            "/clusters/team-a/api",
            cm_uri,
            "/clusters/team-a/api/v1/namespaces/default/serviceaccounts",
        ]
        .iter()
        .all(|u| evs.iter().any(|e| is_complete(e, u)))
    })
    .await;
    for e in &events {
        assert_eq!((&e["kind"], &e["apiVersion"]), (&json!("Event"), &json!("audit.k8s.io/v1")), "{e}");
        assert!(e["objectRef"]["resource"] != "secrets", "secrets are not audited: {e}");
    }
    let of = |uri: &str| events.iter().filter(|e| e["requestURI"] == uri).cloned().collect::<Vec<_>>();
    let created = of(cm_uri);
    let stages: Vec<&str> = created.iter().map(|e| e["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["RequestReceived", "ResponseComplete"]);
    let done = &created[1];
    assert_eq!(done["level"], "RequestResponse");
    assert_eq!(done["verb"], "create");
    assert_eq!(done["auditID"], created[0]["auditID"]);
    assert_eq!(done["annotations"]["kgate.dev/cluster"], "team-a");
    // kube completes objectRef from the request's object; the answer adds what a create's body
    // cannot name (its uid and resourceVersion).
    let response = &done["responseObject"]["metadata"];
    assert_eq!(
        done["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "audited", "uid": response["uid"],
            "apiVersion": "v1", "resourceVersion": response["resourceVersion"]})
    );
    assert!(response["uid"].is_string() && response["resourceVersion"].is_string(), "{done}");
    assert_eq!(created[0]["objectRef"]["name"], Value::Null, "not known when the request is received");
    assert_eq!(done["responseStatus"]["code"], 201);
    assert_eq!(done["requestObject"]["data"]["k"], "v");
    assert_eq!(done["responseObject"]["metadata"]["name"], "audited");
    assert_eq!(done["sourceIPs"], json!(["127.0.0.1"]));
    assert_eq!(done["user"]["groups"], json!(["system:masters", "system:authenticated"]));

    // The generated name is known only from the answer: the event names it all the same.
    let sa_events = of("/clusters/team-a/api/v1/namespaces/default/serviceaccounts");
    let sa_event = sa_events
        .iter()
        .find(|e| e["objectRef"]["name"] == made["metadata"]["name"])
        .unwrap_or_else(|| panic!("an event naming {}: {sa_events:#?}", made["metadata"]["name"]));
    let sa_ref = &sa_event["objectRef"];
    assert_eq!(sa_event["level"], "Metadata");
    assert_eq!(sa_ref["uid"], made["metadata"]["uid"], "{sa_ref}");
    assert_eq!(sa_ref["resourceVersion"], made["metadata"]["resourceVersion"], "{sa_ref}");
    assert!(sa_event.get("requestObject").is_none(), "Metadata keeps no object");

    let apis = of("/clusters/team-a/apis");
    assert_eq!(apis.len(), 1, "RequestReceived is omitted at this rule: {apis:#?}");
    assert_eq!((&apis[0]["level"], &apis[0]["verb"]), (&json!("Metadata"), &json!("get")));
    assert_eq!(apis[0]["impersonatedUser"]["username"], "alice");
    assert!(apis[0].get("requestObject").is_none() && apis[0].get("responseObject").is_none());
    let refused = of("/clusters/team-a/api");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["responseStatus"]["code"], 403);
    assert_eq!(refused[0]["user"]["username"], "system:serviceaccount:default:viewer");
    assert!(refused[0].get("impersonatedUser").is_none(), "{}", refused[0]);
    assert_eq!(s.metric("kgate_audit_events_dropped_total").await, 0.0);
    s.stop().await;
}
