//! Tests for content-type mapping, JSON patch, merge patch and strategic merge patch.

use serde_json::{json, Value};

use super::*;

fn smp(target: Value, patch: Value, kind: &str) -> Value {
    match strategic_merge_patch(&target, patch.clone(), kind) {
        Ok(v) => v,
        Err(e) => panic!("strategic merge patch failed: {e}"),
    }
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": containers}}}
    })
}

fn containers_of(d: &Value) -> &Value {
    &d["spec"]["template"]["spec"]["containers"]
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect()).unwrap_or_default()
}

// === content types ===

#[test]
fn content_types_map_to_patch_types() {
    assert_eq!(PatchType::from_content_type("application/json-patch+json"), Some(PatchType::Json));
    assert_eq!(PatchType::from_content_type("application/merge-patch+json; charset=utf-8"), Some(PatchType::Merge));
    assert_eq!(PatchType::from_content_type("Application/Strategic-Merge-Patch+JSON"), Some(PatchType::StrategicMerge));
    assert_eq!(PatchType::from_content_type("application/apply-patch+yaml"), Some(PatchType::Apply));
    assert_eq!(PatchType::from_content_type("application/json"), None);
    assert_eq!(PatchType::Apply.content_type(), "application/apply-patch+yaml");
}

// === JSON patch and merge patch ===

#[test]
fn json_patch_applies_operations() {
    let target = json!({"metadata": {"name": "a", "labels": {"x": "1"}}});
    let patch = json!([
        {"op": "test", "path": "/metadata/name", "value": "a"},
        {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/x"},
        {"op": "replace", "path": "/metadata/managedFields", "value": []}
    ]);
    // `replace` of a missing path is an error in RFC 6902; use add semantics check separately.
    assert!(json_patch(&target, patch.clone()).is_err());
    let patch = json!([
        {"op": "test", "path": "/metadata/name", "value": "a"},
        {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/x"}
    ]);
    let out = json_patch(&target, patch.clone()).expect("patch applies");
    assert_eq!(out, json!({"metadata": {"name": "a", "labels": {"y": "2"}}}));
}

#[test]
fn json_patch_test_failure_is_distinct() {
    let target = json!({"metadata": {"resourceVersion": "5"}});
    let patch = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "4"}]);
    match json_patch(&target, patch.clone()) {
        Err(PatchError::TestFailed(msg)) => {
            assert!(msg.contains("/metadata/resourceVersion"), "{msg}")
        }
        other => panic!("expected TestFailed, got {other:?}"),
    }
}

#[test]
fn json_patch_rejects_malformed_bodies() {
    let target = json!({});
    assert!(matches!(json_patch(&target, json!({"op": "add"})), Err(PatchError::InvalidPatch(_))));
    assert!(matches!(
        json_patch(&target, json!([{"op": "frobnicate", "path": "/a"}])),
        Err(PatchError::InvalidPatch(_))
    ));
    assert!(matches!(
        json_patch(&target, json!([{"op": "remove", "path": "/nope"}])),
        Err(PatchError::InvalidPatch(_))
    ));
}

#[test]
fn json_patch_errors_name_the_failing_operation() {
    let target = json!({"a": 1});
    let patch = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/nope"}]);
    match json_patch(&target, patch.clone()) {
        Err(PatchError::InvalidPatch(m)) => assert!(m.contains("operation '/1' failed at path '/nope'"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// A kilobyte of `copy` operations that copy an array into itself would double it each time (24 of
/// them, 1.8 GiB); kube-apiserver bounds what copies add in all, and so does kgate, before each copy.
#[test]
fn json_patch_copies_are_bounded_in_bytes() {
    let target = json!({"a": vec!["0123456789abcdef"; 64]});
    let doubling: Vec<Value> = (0..28).map(|_| json!({"op": "copy", "from": "/a", "path": "/a/-"})).collect();
    assert!(matches!(json_patch(&target, Value::Array(doubling)), Err(PatchError::Rejected)));
    // Copies within the bound apply.
    let few: Vec<Value> = (0..3).map(|_| json!({"op": "copy", "from": "/a", "path": "/a/-"})).collect();
    let out = json_patch(&target, Value::Array(few)).unwrap();
    assert_eq!(out["a"].as_array().unwrap().len(), 67);
    // Copying something that is not there is the usual error, not a size one.
    let missing = json!([{"op": "copy", "from": "/nope", "path": "/b"}]);
    assert!(matches!(json_patch(&target, missing.clone()), Err(PatchError::InvalidPatch(_))));
}

#[test]
fn json_patch_copies_and_moves_cannot_nest_deeper_than_can_be_read() {
    // Each copy of /x into itself doubles its depth: seventeen make 131,072 levels, which no stack
    // clones or drops. The op that would pass the limit is refused before it is made.
    let mut ops = vec![json!({"op": "add", "path": "/x", "value": {}})];
    for k in 0..17 {
        // The deepest empty object after k copies is 2^k - 1 levels below /x: each copy goes in there.
        let to = format!("/x{}", "/a".repeat(1 << k));
        ops.push(json!({"op": "copy", "from": "/x", "path": to}));
    }
    // Six copies (64 levels) are fine; the seventh would make 128.
    assert_eq!(crate::meta::nesting(&json_patch(&json!({}), Value::Array(ops[..7].to_vec())).unwrap(), 200), 65);
    let err = json_patch(&json!({}), Value::Array(ops)).unwrap_err();
    assert!(matches!(&err, PatchError::InvalidPatch(m) if m.contains("more than 127 levels deep")), "{err:?}");
    // Moves deepen as copies do; an add of a deep value at a deep path is counted too.
    let deep = (0..100).fold(json!(1), |v, _| json!([v]));
    let ok = json_patch(&json!({}), json!([{"op": "add", "path": "/a", "value": deep.clone()}])).unwrap();
    assert_eq!(crate::meta::nesting(&ok, 200), 101);
    let err = json_patch(
        &ok,
        json!([{"op": "move", "from": "/a", "path": "/a/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/b"}]),
    );
    assert!(err.is_err());
    assert!(json_patch(&ok, json!([{"op": "add", "path": "/b", "value": {"c": deep.clone()}}])).is_ok());
    // A small value moved deep into a deep document is fine: the bound says "maybe too deep", the
    // walk of what is moved says it is not.
    let nested = (0..100).fold(json!({}), |v, _| json!({"d": v}));
    let doc = json!({"nested": nested, "s": {"t": 1}});
    let to = format!("/nested{}/s", "/d".repeat(60));
    let moved = json_patch(&doc, json!([{"op": "move", "from": "/s", "path": to}])).unwrap();
    assert!(moved.get("s").is_none());
    let path = format!("/a{}", "/0".repeat(29));
    let err = json_patch(&ok, json!([{"op": "add", "path": path, "value": deep}]));
    assert!(err.is_err(), "30 + 101 levels");
}

#[test]
fn json_patch_operations_are_bounded_in_number() {
    let ops = |n: usize| Value::Array((0..n).map(|_| json!({"op": "test", "path": "/a", "value": 1})).collect());
    assert!(json_patch(&json!({"a": 1}), ops(MAX_JSON_PATCH_OPERATIONS)).is_ok());
    match json_patch(&json!({"a": 1}), ops(MAX_JSON_PATCH_OPERATIONS + 1)) {
        Err(PatchError::TooLarge(m)) => {
            assert_eq!(
                m,
                "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// Inserts and removals inside a large array shift what follows them: a small patch repeating them
/// is refused once the shifts pass the bound, before it costs a shared worker seconds; appends,
/// removals at the end and replacements shift nothing and pass whatever their number.
#[test]
fn json_patch_array_shifts_are_bounded() {
    let doc = json!({"a": vec![0; 100_000]});
    let repeat = |op: Value, n: usize| Value::Array(vec![op; n]);
    match json_patch(&doc, repeat(json!({"op": "remove", "path": "/a/0"}), 200)) {
        Err(PatchError::TooLarge(m)) => assert!(m.contains("would shift more than 10000000 array elements"), "{m}"),
        other => panic!("{other:?}"),
    }
    let front = repeat(json!({"op": "add", "path": "/a/0", "value": 1}), 101);
    assert!(matches!(json_patch(&doc, front), Err(PatchError::TooLarge(_))));
    let moves = repeat(json!({"op": "move", "from": "/a/0", "path": "/a/-"}), 101);
    assert!(matches!(json_patch(&doc, moves), Err(PatchError::TooLarge(_))));
    // Within the bound, the patch applies as written.
    let few = json_patch(&doc, repeat(json!({"op": "remove", "path": "/a/0"}), 50)).unwrap();
    assert_eq!(few["a"].as_array().unwrap().len(), 99_950);
    let cheap = Value::Array(
        (0..5_000)
            .flat_map(|i| {
                [json!({"op": "add", "path": "/a/-", "value": i}), json!({"op": "replace", "path": "/a/7", "value": i})]
            })
            .collect(),
    );
    let grown = json_patch(&doc, cheap).unwrap();
    assert_eq!(grown["a"].as_array().unwrap().len(), 105_000);
    let tail = repeat(json!({"op": "remove", "path": "/a/99999"}), 1);
    assert!(json_patch(&doc, tail).is_ok());
}

/// Merging by key looks each item up rather than scanning the list for it: 20,000 containers, the
/// patch adding a field to every one and 20,000 new ones, merge in the order kube gives.
#[test]
fn strategic_merge_of_long_lists_keeps_kubes_order() {
    let live: Vec<Value> = (0..20_000).map(|i| json!({"name": format!("c{i}"), "image": "x"})).collect();
    let mut patch: Vec<Value> =
        (0..20_000).rev().filter(|i| *i != 5).map(|i| json!({"name": format!("c{i}"), "tty": true})).collect();
    patch.extend((0..20_000).map(|i| json!({"name": format!("n{i}"), "image": "y"})));
    patch.push(json!({"name": "c5", "$patch": "delete"}));
    let out = smp(
        deployment(Value::Array(live)),
        json!({"spec": {"template": {"spec": {"containers": patch}}}}),
        "apps/Deployment",
    );
    let merged = containers_of(&out).as_array().unwrap();
    assert_eq!(merged.len(), 39_999);
    // Patched items in the patch's order, then the new ones.
    assert_eq!((merged[0]["name"].as_str(), merged[0]["tty"].as_bool()), (Some("c19999"), Some(true)));
    assert_eq!(merged[19_998]["name"], "c0");
    assert_eq!(merged[19_999]["name"], "n0");
    assert!(merged.iter().all(|c| c["name"] != "c5"));
}

#[test]
fn merge_patch_follows_rfc7386() {
    let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"list": [1, 2]}});
    let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"list": [3]}});
    let out = merge_patch(&target, &patch).expect("merge applies");
    assert_eq!(out, json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"list": [3]}}));
    let err = merge_patch(&target, &json!([1])).expect_err("array body");
    assert_eq!(err.to_string(), "json: cannot unmarshal array into Go value of type map[string]interface {}");
}

// === strategic merge patch ===

#[test]
fn smp_rejects_custom_resources_with_415_message() {
    let err = strategic_merge_patch(&json!({}), json!({}), "example.com/Widget").expect_err("CR");
    assert!(matches!(err, PatchError::UnsupportedMediaType));
    assert_eq!(
        err.to_string(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
}

#[test]
fn smp_maps_merge_and_null_deletes() {
    let cm =
        json!({"kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
    let out = smp(
        cm,
        json!({"metadata": {"labels": {"a": null, "c": "3", "missing": null}}, "data": {"y": "2"}}),
        "/ConfigMap",
    );
    assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(out["data"], json!({"x": "1", "y": "2"}));
}

#[test]
fn smp_merges_containers_by_name_and_replaces_atomic_lists() {
    let d = deployment(json!([
        {"name": "a", "image": "nginx:1", "args": ["x", "y"], "env": [{"name": "A", "value": "1"}]},
        {"name": "b", "image": "redis"}
    ]));
    let out = smp(
        d,
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx:2", "args": ["z"], "env": [{"name": "B", "value": "2"}]}
        ]}}}}),
        "apps/Deployment",
    );
    let cs = containers_of(&out);
    assert_eq!(names(cs), ["a", "b"]);
    assert_eq!(cs[0]["image"], "nginx:2");
    assert_eq!(cs[0]["args"], json!(["z"]), "args has no merge strategy");
    // New patch items land before server-only ones, as Go's mergeSortedSlice orders them.
    assert_eq!(cs[0]["env"], json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]));
    assert_eq!(cs[1]["image"], "redis");
}

#[test]
fn smp_kubectl_apply_body_with_set_element_order_and_delete() {
    let d = deployment(json!([
        {"name": "a", "image": "nginx:1"},
        {"name": "c", "image": "busybox"},
        {"name": "b", "image": "redis"}
    ]));
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"image": "nginx:2", "name": "a"}, {"name": "c", "$patch": "delete"}]
        }}}
    });
    let out = smp(d, patch, "apps/Deployment");
    let cs = containers_of(&out);
    assert_eq!(names(cs), ["a", "b"]);
    assert_eq!(cs[0], json!({"name": "a", "image": "nginx:2"}));
    assert_eq!(cs[1], json!({"name": "b", "image": "redis"}));
    assert_eq!(out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"], "{}\n");
    assert!(out["spec"]["template"]["spec"].get("$setElementOrder/containers").is_none());
}

#[test]
fn smp_set_element_order_reorders_and_inserts() {
    let d = deployment(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "new"}, {"name": "a"}],
        "containers": [{"name": "new", "image": "3"}]
    }}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(names(containers_of(&out)), ["b", "new", "a"]);
}

#[test]
fn smp_set_element_order_without_list_only_reorders() {
    let d = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]
    }}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(names(containers_of(&out)), ["b", "a"]);
}

#[test]
fn smp_set_element_order_rejects_items_not_listed() {
    let d = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"name": "zzz", "image": "x"}]
    }}}});
    assert!(matches!(strategic_merge_patch(&d, patch.clone(), "apps/Deployment"), Err(PatchError::InvalidPatch(_))));
}

#[test]
fn smp_new_items_go_before_live_ones_in_patch_order() {
    let d = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "d"}, {"name": "c"}]}}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(names(containers_of(&out)), ["d", "c", "a", "b"]);

    // Items the live list has keep their live order relative to server-only items.
    let d = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}, {"name": "a", "image": "y"}]}}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(names(containers_of(&out)), ["b", "c", "a"]);
}

#[test]
fn smp_env_changes_with_set_element_order() {
    let d = deployment(json!([{"name": "a", "env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}
    ]}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{
            "name": "a",
            "$setElementOrder/env": [{"name": "C"}, {"name": "A"}, {"name": "D"}],
            "env": [{"name": "A", "value": "10"}, {"name": "D", "value": "4"}, {"name": "B", "$patch": "delete"}]
        }]
    }}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(
        containers_of(&out)[0]["env"],
        json!([{"name": "C", "value": "3"}, {"name": "A", "value": "10"}, {"name": "D", "value": "4"}])
    );
    assert!(containers_of(&out)[0].get("$setElementOrder/env").is_none());
}

#[test]
fn smp_env_value_from_replaced_via_null() {
    let d = deployment(json!([{"name": "a", "env": [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    ]}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{
        "name": "a", "env": [{"name": "A", "value": "plain", "valueFrom": null}]
    }]}}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(containers_of(&out)[0]["env"], json!([{"name": "A", "value": "plain"}]));
}

#[test]
fn smp_container_ports_merge_by_container_port() {
    let pod = json!({"kind": "Pod", "spec": {"containers": [{"name": "a", "ports": [
        {"containerPort": 80, "name": "http"}, {"containerPort": 443}
    ]}]}});
    let patch = json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "web"}]}]}});
    let out = smp(pod, patch, "/Pod");
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "name": "web"}, {"containerPort": 443}])
    );
}

#[test]
fn smp_service_ports_merge_by_port_and_selector_merges() {
    let svc = json!({"kind": "Service", "spec": {"selector": {"app": "a"}, "ports": [
        {"port": 80, "targetPort": 8080}, {"port": 81}
    ]}});
    let patch = json!({"spec": {"selector": {"tier": "x"}, "ports": [{"port": 80, "targetPort": 9090}]}});
    let out = smp(svc, patch, "/Service");
    assert_eq!(out["spec"]["selector"], json!({"app": "a", "tier": "x"}));
    assert_eq!(out["spec"]["ports"], json!([{"port": 80, "targetPort": 9090}, {"port": 81}]));
}

#[test]
fn smp_tolerations_and_readiness_gates_are_replaced() {
    let pod = json!({"spec": {
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "readinessGates": [{"conditionType": "x"}]
    }});
    let patch = json!({"spec": {"tolerations": [{"key": "b", "operator": "Exists"}], "readinessGates": [{"conditionType": "y"}]}});
    let out = smp(pod, patch, "/Pod");
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "b", "operator": "Exists"}]));
    assert_eq!(out["spec"]["readinessGates"], json!([{"conditionType": "y"}]));
}

#[test]
fn smp_volumes_with_retain_keys() {
    let d = json!({"spec": {"template": {"spec": {"volumes": [
        {"name": "v", "emptyDir": {}}, {"name": "w", "configMap": {"name": "c"}}
    ]}}}});
    let patch = json!({"spec": {"template": {"spec": {"volumes": [
        {"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/tmp"}}
    ]}}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "v", "hostPath": {"path": "/tmp"}}, {"name": "w", "configMap": {"name": "c"}}])
    );
}

#[test]
fn smp_retain_keys_on_deployment_strategy() {
    let d = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));

    let bad = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}});
    assert!(strategic_merge_patch(&out, bad.clone(), "apps/Deployment").is_err());
}

#[test]
fn smp_patch_replace_in_map_and_list() {
    let d = deployment(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]));
    let patch = json!({"metadata": {"labels": {"$patch": "replace", "only": "me"}}});
    let out = smp(d.clone(), patch, "apps/Deployment");
    assert_eq!(out["metadata"]["labels"], json!({"only": "me"}));

    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "z", "image": "9"}, {"$patch": "replace"}]}}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(containers_of(&out), &json!([{"name": "z", "image": "9"}]));
}

#[test]
fn smp_patch_delete_in_map() {
    let d = json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 2}});
    let out = smp(d, json!({"spec": {"strategy": {"$patch": "delete"}}}), "apps/Deployment");
    assert_eq!(out["spec"], json!({"strategy": {}, "replicas": 2}));
}

#[test]
fn smp_delete_without_merge_key_is_an_error() {
    let d = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "delete", "image": "x"}]}}}});
    let err = strategic_merge_patch(&d, patch.clone(), "apps/Deployment").expect_err("no key");
    assert_eq!(err.to_string(), "map: map[$patch:delete image:x] does not contain declared merge key: name");
}

#[test]
fn smp_finalizers_union_and_delete_from_primitive_list() {
    let obj = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = smp(obj.clone(), json!({"metadata": {"finalizers": ["c", "a"]}}), "/ConfigMap");
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));

    let patch = json!({"metadata": {
        "$setElementOrder/finalizers": ["b", "c"],
        "$deleteFromPrimitiveList/finalizers": ["a"],
        "finalizers": ["c"]
    }});
    let out = smp(obj, patch, "/ConfigMap");
    assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
}

#[test]
fn smp_owner_references_merge_by_uid() {
    let obj = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "x"}]}});
    let out = smp(obj, json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "y"}]}}), "/Pod");
    assert_eq!(names(&out["metadata"]["ownerReferences"]), ["y", "x"]);
}

#[test]
fn smp_status_conditions_merge_by_type() {
    let d = json!({"status": {"conditions": [
        {"type": "Available", "status": "False"}, {"type": "Progressing", "status": "True"}
    ]}});
    let out = smp(d, json!({"status": {"conditions": [{"type": "Available", "status": "True"}]}}), "apps/Deployment");
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}])
    );
}

#[test]
fn smp_cronjob_pod_template_is_typed() {
    let cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "image": "1"}, {"name": "b", "image": "2"}
    ]}}}}}});
    let patch = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "3"}
    ]}}}}}});
    let out = smp(cj, patch, "batch/CronJob");
    assert_eq!(
        out["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "1"}, {"name": "b", "image": "3"}])
    );
}

#[test]
fn smp_label_removal_by_client_side_apply_body() {
    let d = deployment(json!([{"name": "a"}]));
    let patch = json!({
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"x\":1}\n"},
            "labels": {"tier": null}
        },
        "spec": {"replicas": 3}
    });
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(out["spec"]["replicas"], 3);
}

#[test]
fn smp_directives_inside_new_values_are_stripped() {
    let d = json!({"spec": {"template": {"spec": {}}}});
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"name": "a", "image": "x", "gone": null, "$setElementOrder/env": [{"name": "E"}], "env": [{"name": "E", "value": "1"}]}],
        "volumes": [{"name": "v", "$retainKeys": ["emptyDir", "name"], "emptyDir": {}}]
    }}}});
    let out = smp(d, patch, "apps/Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"],
        json!({
            "containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]}],
            "volumes": [{"name": "v", "emptyDir": {}}]
        })
    );
}

#[test]
fn smp_rejects_bad_bodies() {
    let d = deployment(json!([]));
    assert!(matches!(strategic_merge_patch(&d, json!([1]), "apps/Deployment"), Err(PatchError::InvalidPatch(_))));
    assert!(matches!(
        strategic_merge_patch(&d, json!({"spec": {"$patch": "bogus"}}), "apps/Deployment"),
        Err(PatchError::InvalidPatch(_))
    ));
    assert!(matches!(
        strategic_merge_patch(
            &d,
            json!({"spec": {"template": {"spec": {"containers": [{"$patch": "merge"}]}}}}),
            "apps/Deployment"
        ),
        Err(PatchError::InvalidPatch(_))
    ));
}

#[test]
fn smp_type_change_takes_the_patch() {
    let cm = json!({"data": {"x": "1"}});
    let out = smp(cm, json!({"data": "oops"}), "/ConfigMap");
    assert_eq!(out["data"], "oops");
}
