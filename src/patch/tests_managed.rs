//! Tests for server-side apply and managedFields recording.

use serde_json::{json, Value};

use super::managed::{apply, record_update, ApplyRequest};
use super::PatchError;

const T1: &str = "2025-01-01T00:00:00Z";
const T2: &str = "2025-01-02T00:00:00Z";

fn req<'a>(live: Option<&'a Value>, applied: &'a Value, manager: &'a str, force: bool) -> ApplyRequest<'a> {
    ApplyRequest {
        live,
        applied,
        manager,
        force,
        api_version: "v1",
        kind_key: "/ConfigMap",
        now: T1,
        subresource: None,
    }
}

fn deploy_req<'a>(live: Option<&'a Value>, applied: &'a Value, manager: &'a str) -> ApplyRequest<'a> {
    ApplyRequest { api_version: "apps/v1", kind_key: "apps/Deployment", ..req(live, applied, manager, false) }
}

fn ok(r: Result<Value, PatchError>) -> Value {
    match r {
        Ok(v) => v,
        Err(e) => panic!("apply failed: {e}"),
    }
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"].as_array()?.iter().find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}, "data": data})
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}
    })
}

#[test]
fn apply_create_records_apply_entry() {
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"app": "x"}}, "data": {"x": "1"}});
    let out = ok(apply(req(None, &applied, "kubectl", false)));
    assert_eq!(out["data"], json!({"x": "1"}));
    assert_eq!(
        out["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
        }])
    );
}

#[test]
fn apply_list_items_are_keyed() {
    let applied = deployment(json!([{"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]}]));
    let out = ok(apply(deploy_req(None, &applied, "kubectl")));
    let fields = &entry(&out, "kubectl", "Apply").expect("entry")["fieldsV1"];
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"a\"}": {
            ".": {}, "f:image": {}, "f:name": {},
            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
        }})
    );
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert!(fields["f:metadata"].get("f:name").is_none(), "name is never owned");
}

#[test]
fn reapply_changes_and_removes_containers() {
    let first = deployment(json!([{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "redis"}]));
    let live = ok(apply(deploy_req(None, &first, "kubectl")));
    let second = deployment(json!([{"name": "a", "image": "nginx:2"}, {"name": "c", "image": "busybox"}]));
    let out = ok(apply(deploy_req(Some(&live), &second, "kubectl")));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "nginx:2"}, {"name": "c", "image": "busybox"}])
    );
    let cs =
        &entry(&out, "kubectl", "Apply").expect("entry")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert!(cs.get("k:{\"name\":\"b\"}").is_none());
    assert!(cs.get("k:{\"name\":\"c\"}").is_some());
}

#[test]
fn reapply_keeps_fields_of_other_managers() {
    let first = deployment(json!([{"name": "a", "image": "nginx:1"}]));
    let mut live = ok(apply(deploy_req(None, &first, "kubectl")));
    // A controller adds a sidecar and an env var through an update.
    let old = live.clone();
    live["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "a", "image": "nginx:1", "env": [{"name": "E", "value": "1"}]},
        {"name": "sidecar", "image": "envoy"}
    ]);
    record_update(Some(&old), &mut live, "injector", "apps/v1", T2, None, "apps/Deployment");
    let injector = entry(&live, "injector", "Update").expect("update entry");
    assert_eq!(injector["time"], T2);

    // Re-applying without the sidecar leaves it alone: kubectl never owned it.
    let second = deployment(json!([{"name": "a", "image": "nginx:2"}]));
    let out = ok(apply(deploy_req(Some(&live), &second, "kubectl")));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([
            {"name": "a", "image": "nginx:2", "env": [{"name": "E", "value": "1"}]},
            {"name": "sidecar", "image": "envoy"}
        ])
    );
}

#[test]
fn apply_env_var_changes_and_removal() {
    let first = deployment(
        json!([{"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]),
    );
    let live = ok(apply(deploy_req(None, &first, "kubectl")));
    let second = deployment(json!([{"name": "a", "image": "x", "env": [{"name": "B", "value": "3"}]}]));
    let out = ok(apply(deploy_req(Some(&live), &second, "kubectl")));
    assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["env"], json!([{"name": "B", "value": "3"}]));
}

#[test]
fn apply_removes_dropped_labels_and_data() {
    let live = ok(apply(req(None, &cm(json!({"x": "1", "y": "2"})), "kubectl", false)));
    let out = ok(apply(req(Some(&live), &cm(json!({"x": "1"})), "kubectl", false)));
    assert_eq!(out["data"], json!({"x": "1"}));
    assert_eq!(out["metadata"]["name"], "c");
}

#[test]
fn conflict_with_update_manager_renders_like_apiserver() {
    let mut live = cm(json!({"x": "1"}));
    record_update(None, &mut live, "kubectl-client-side-apply", "v1", T1, None, "/ConfigMap");
    let applied = cm(json!({"x": "2"}));
    let err = apply(req(Some(&live), &applied, "kubectl", false)).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.x"
    );
    let PatchError::Conflict { conflicts } = err else { panic!("not a conflict") };
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].manager, "kubectl-client-side-apply");
    assert_eq!(conflicts[0].field, ".data.x");
    assert_eq!(conflicts[0].message, "conflict with \"kubectl-client-side-apply\" using v1");
}

#[test]
fn same_value_is_shared_not_conflicting() {
    let mut live = cm(json!({"x": "1"}));
    record_update(None, &mut live, "kubectl-client-side-apply", "v1", T1, None, "/ConfigMap");
    let out = ok(apply(req(Some(&live), &cm(json!({"x": "1"})), "kubectl", false)));
    assert!(entry(&out, "kubectl", "Apply").is_some());
    assert!(entry(&out, "kubectl-client-side-apply", "Update").is_some());
}

#[test]
fn several_conflicts_are_grouped() {
    let mut live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "paused": false}});
    record_update(None, &mut live, "m", "apps/v1", T1, None, "apps/Deployment");
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 3, "paused": true}});
    let err = apply(deploy_req(Some(&live), &applied, "kubectl")).expect_err("conflicts");
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"m\" using apps/v1:\n- .spec.paused\n- .spec.replicas"
    );
}

#[test]
fn conflicts_with_appliers_and_subresources() {
    let live = ok(apply(req(None, &cm(json!({"x": "1"})), "other", false)));
    let err = apply(req(Some(&live), &cm(json!({"x": "2"})), "kubectl", false)).expect_err("conflict");
    assert_eq!(err.to_string(), "Apply failed with 1 conflict: conflict with \"other\": .data.x");

    let mut live = json!({"kind": "Deployment", "metadata": {"name": "d"}, "status": {"replicas": 1}});
    record_update(None, &mut live, "ctrl", "apps/v1", T1, Some("status"), "apps/Deployment");
    let applied = json!({"kind": "Deployment", "metadata": {"name": "d"}, "status": {"replicas": 5}});
    let err = apply(deploy_req(Some(&live), &applied, "kubectl")).expect_err("conflict");
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"ctrl\" with subresource \"status\" using apps/v1: .status.replicas"
    );
}

#[test]
fn force_takes_ownership() {
    let mut live = cm(json!({"x": "1", "y": "1"}));
    record_update(None, &mut live, "editor", "v1", T1, None, "/ConfigMap");
    let out = ok(apply(req(Some(&live), &cm(json!({"x": "2"})), "kubectl", true)));
    assert_eq!(out["data"], json!({"x": "2", "y": "1"}));
    let editor = entry(&out, "editor", "Update").expect("editor keeps y");
    assert_eq!(editor["fieldsV1"]["f:data"], json!({".": {}, "f:y": {}}));
    let mine = entry(&out, "kubectl", "Apply").expect("apply entry");
    assert_eq!(mine["fieldsV1"]["f:data"], json!({"f:x": {}}));
}

#[test]
fn releasing_a_shared_field_keeps_its_value() {
    let live = ok(apply(req(None, &cm(json!({"x": "1"})), "a", false)));
    let live = ok(apply(req(Some(&live), &cm(json!({"x": "1"})), "b", false)));
    // `a` stops applying x, but `b` still owns it.
    let out = ok(apply(req(Some(&live), &cm(json!({})), "a", false)));
    assert_eq!(out["data"], json!({"x": "1"}));
    // Then `b` releases it too and it goes away.
    let out = ok(apply(req(Some(&out), &cm(json!({})), "b", false)));
    assert!(out["data"].as_object().is_none_or(|d| d.is_empty()), "{out}");
}

#[test]
fn apply_orders_list_like_structured_merge_diff() {
    let first = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let mut live = ok(apply(deploy_req(None, &first, "kubectl")));
    let old = live.clone();
    live["spec"]["template"]["spec"]["containers"] = json!([{"name": "a"}, {"name": "x"}, {"name": "b"}]);
    record_update(Some(&old), &mut live, "other", "apps/v1", T1, None, "apps/Deployment");
    let second = deployment(json!([{"name": "b"}, {"name": "new"}, {"name": "a"}]));
    let out = ok(apply(deploy_req(Some(&live), &second, "kubectl")));
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["x", "b", "new", "a"]);
}

#[test]
fn apply_rejects_items_without_keys() {
    let applied = deployment(json!([{"image": "x"}]));
    let err = apply(deploy_req(None, &applied, "kubectl")).expect_err("missing key");
    assert!(err.to_string().contains("omits key field \"name\""), "{err}");
}

#[test]
fn record_update_create_update_and_removal() {
    let mut obj = cm(json!({"x": "1"}));
    obj["metadata"]["labels"] = json!({"app": "a"});
    record_update(None, &mut obj, "kubectl-create", "v1", T1, None, "/ConfigMap");
    let e = entry(&obj, "kubectl-create", "Update").expect("entry");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {".": {}, "f:x": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );

    // Another manager changes x and adds y: it takes x over.
    let old = obj.clone();
    obj["data"] = json!({"x": "2", "y": "3"});
    record_update(Some(&old), &mut obj, "kubectl-edit", "v1", T2, None, "/ConfigMap");
    let create = entry(&obj, "kubectl-create", "Update").expect("entry");
    // Only the map itself is left, encoded as a bare member.
    assert_eq!(create["fieldsV1"]["f:data"], json!({}));
    let edit = entry(&obj, "kubectl-edit", "Update").expect("entry");
    assert_eq!(edit["fieldsV1"]["f:data"], json!({"f:x": {}, "f:y": {}}));

    // Removing the labels drops them from every owner.
    let old = obj.clone();
    if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.remove("labels");
    }
    record_update(Some(&old), &mut obj, "kubectl-label", "v1", T2, None, "/ConfigMap");
    let create = entry(&obj, "kubectl-create", "Update").expect("entry");
    assert!(create["fieldsV1"].get("f:metadata").is_none(), "{create}");
    assert!(entry(&obj, "kubectl-label", "Update").is_none(), "a pure removal owns nothing");
}

#[test]
fn record_update_with_no_change_adds_nothing() {
    let mut obj = cm(json!({"x": "1"}));
    let old = obj.clone();
    record_update(Some(&old), &mut obj, "m", "v1", T1, None, "/ConfigMap");
    assert!(obj["metadata"].get("managedFields").is_none());
}

#[test]
fn record_update_honours_rewritten_managed_fields() {
    // kubectl's client-side-apply migration rewrites managedFields with a JSON patch.
    let mut live = cm(json!({"x": "1"}));
    record_update(None, &mut live, "kubectl-client-side-apply", "v1", T1, None, "/ConfigMap");
    let mut new = live.clone();
    new["metadata"]["managedFields"][0]["manager"] = json!("kubectl");
    new["metadata"]["managedFields"][0]["operation"] = json!("Apply");
    record_update(Some(&live), &mut new, "kubectl", "v1", T2, None, "/ConfigMap");
    let mf = new["metadata"]["managedFields"].as_array().expect("entries");
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Apply");
    // And the next apply by kubectl owns x without conflict.
    let out = ok(apply(req(Some(&new), &cm(json!({"x": "2"})), "kubectl", false)));
    assert_eq!(out["data"]["x"], "2");
}

#[test]
fn managed_fields_are_sorted_apply_first() {
    let mut live = cm(json!({"x": "1"}));
    record_update(None, &mut live, "zz-update", "v1", T1, None, "/ConfigMap");
    let out = ok(apply(req(Some(&live), &cm(json!({"y": "1"})), "aa-apply", false)));
    let mf = out["metadata"]["managedFields"].as_array().expect("entries");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[1]["operation"], "Update");
}

#[test]
fn custom_resources_apply_without_schema() {
    let applied = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"items": [1, 2], "nested": {"a": 1}}});
    let r = ApplyRequest {
        kind_key: "example.com/Widget",
        api_version: "example.com/v1",
        ..req(None, &applied, "kubectl", false)
    };
    let out = ok(apply(r));
    let fields = &entry(&out, "kubectl", "Apply").expect("entry")["fieldsV1"];
    assert_eq!(fields, &json!({"f:spec": {"f:items": {}, "f:nested": {"f:a": {}}}}));
}
