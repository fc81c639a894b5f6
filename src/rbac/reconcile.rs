//! Bringing a cluster's bootstrap RBAC objects up to the current policy, as kube-apiserver's reconciler
//! does at every start: an object that is not annotated `rbac.authorization.kubernetes.io/autoupdate:
//! "false"` gains what the policy has and it lacks (rules, aggregation selectors, labels, annotations,
//! binding subjects). Nothing it has is taken away, so what a platform team added stays.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::defaults::{default_cluster_role_bindings, default_cluster_roles};
use super::rule::{parse_rules, PolicyRule};

/// The annotation by which an object opts out of reconciliation (`"false"`), as in kube.
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// A short digest of the bootstrap policy this build writes: a cluster that records it needs no
/// reconciling, so a start reconciles only the clusters an older policy made.
pub fn policy_revision() -> &'static str {
    static REVISION: OnceLock<String> = OnceLock::new();
    REVISION.get_or_init(|| {
        let policy = json!([default_cluster_roles(), default_cluster_role_bindings()]);
        let digest = Sha256::digest(serde_json::to_vec(&policy).expect("JSON serialises"));
        hex::encode(&digest[..8])
    })
}

/// Whether `have` allows everything `want` allows (kube's `Covers`, which its reconciler uses too).
fn covered(have: &[PolicyRule], want: &PolicyRule) -> bool {
    super::escalation::uncovered(have, std::slice::from_ref(want)).is_ok_and(|missing| missing.is_empty())
}

/// The object under `field`, made one if it is missing or not an object.
fn object_at<'a>(parent: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let v = parent.entry(field).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("made an object above")
}

/// The array under `field`, made one if it is missing or not an array.
fn array_at<'a>(parent: &'a mut Map<String, Value>, field: &str) -> &'a mut Vec<Value> {
    let v = parent.entry(field).or_insert_with(|| json!([]));
    if !v.is_array() {
        *v = json!([]);
    }
    v.as_array_mut().expect("made an array above")
}

/// Whether two binding subjects name the same subject (`apiGroup` aside, which kube defaults).
fn same_subject(a: &Value, b: &Value) -> bool {
    a["kind"] == b["kind"] && a["name"] == b["name"] && a["namespace"].as_str() == b["namespace"].as_str()
}

/// `existing` brought up to `expected`, or `None` when it already has everything or opts out.
pub fn reconcile(existing: &Value, expected: &Value) -> Option<Value> {
    // Opted out; or not an object the API would have written, left as it is.
    if existing["metadata"]["annotations"][AUTOUPDATE] == "false" || !existing["metadata"].is_object() {
        return None;
    }
    let mut out = existing.clone();
    let obj = out.as_object_mut()?;
    let mut changed = false;
    for field in ["labels", "annotations"] {
        let Some(want) = expected["metadata"][field].as_object() else { continue };
        let have = object_at(object_at(obj, "metadata"), field);
        for (k, v) in want {
            if !have.contains_key(k) {
                have.insert(k.clone(), v.clone());
                changed = true;
            }
        }
    }
    if let Some(want) = expected["rules"].as_array() {
        let have = parse_rules(obj.get("rules"));
        let missing: Vec<Value> =
            want.iter().filter(|r| PolicyRule::parse(r).is_some_and(|r| !covered(&have, &r))).cloned().collect();
        changed |= !missing.is_empty();
        array_at(obj, "rules").extend(missing);
    }
    if let Some(want) = expected["aggregationRule"]["clusterRoleSelectors"].as_array() {
        let have = array_at(object_at(obj, "aggregationRule"), "clusterRoleSelectors");
        for selector in want {
            if !have.contains(selector) {
                have.push(selector.clone());
                changed = true;
            }
        }
    }
    if let Some(want) = expected["subjects"].as_array() {
        let have = array_at(obj, "subjects");
        for subject in want {
            if !have.iter().any(|s| same_subject(s, subject)) {
                have.push(subject.clone());
                changed = true;
            }
        }
    }
    // kube recreates a binding whose roleRef differs; the store takes the corrected one in place.
    if expected.get("roleRef").is_some() && obj.get("roleRef") != expected.get("roleRef") {
        obj.insert("roleRef".into(), expected["roleRef"].clone());
        changed = true;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(objs: &'a [Value], name: &str) -> &'a Value {
        objs.iter().find(|o| o["metadata"]["name"] == name).unwrap()
    }

    #[test]
    fn the_current_policy_needs_nothing() {
        for o in default_cluster_roles().iter().chain(&default_cluster_role_bindings()) {
            assert_eq!(reconcile(o, o), None, "{}", o["metadata"]["name"]);
        }
        assert_eq!(policy_revision().len(), 16);
    }

    #[test]
    fn missing_rules_are_added_and_additions_kept() {
        let roles = default_cluster_roles();
        let want = named(&roles, "system:aggregate-to-view");
        let mut old = want.clone();
        // An older view role: no quotas, and a rule the platform team added.
        let rules = old["rules"].as_array_mut().unwrap();
        rules.retain(|r| !r["resources"].as_array().unwrap().iter().any(|x| x == "resourcequotas"));
        rules.push(json!({"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}));
        let new = reconcile(&old, want).expect("a rule is missing");
        let have = parse_rules(new.get("rules"));
        assert!(have.iter().any(|r| r.allows_resource("list", "", "resourcequotas", "", "")));
        assert!(have.iter().any(|r| r.allows_resource("get", "example.com", "widgets", "", "")));
        assert_eq!(reconcile(&new, want), None, "once is enough");
    }

    #[test]
    fn a_wider_rule_covers_and_a_narrower_one_does_not() {
        let role = |rules: Value| json!({"metadata": {"name": "r"}, "rules": rules});
        let want = role(json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}]));
        let wide = role(json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]));
        assert_eq!(reconcile(&wide, &want), None);
        let named = role(json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"],
            "resourceNames": ["one"]}]));
        assert!(reconcile(&named, &want).is_some(), "a rule for one name does not cover every name");
        let urls = role(json!([{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}]));
        assert_eq!(reconcile(&role(json!([{"verbs": ["get"], "nonResourceURLs": ["*"]}])), &urls), None);
        assert!(reconcile(&role(json!([{"verbs": ["get"], "nonResourceURLs": ["/api"]}])), &urls).is_some());
        // Not an object the API would have written: left as it is.
        assert_eq!(reconcile(&json!({"metadata": "x", "rules": []}), &want), None);
    }

    #[test]
    fn an_object_that_opts_out_is_left_alone() {
        let roles = default_cluster_roles();
        let want = named(&roles, "edit");
        let mut old = json!({"metadata": {"name": "edit", "annotations": {AUTOUPDATE: "false"}}, "rules": []});
        assert_eq!(reconcile(&old, want), None);
        old["metadata"]["annotations"][AUTOUPDATE] = json!("true");
        let new = reconcile(&old, want).unwrap();
        assert_eq!(new["aggregationRule"], want["aggregationRule"]);
        assert_eq!(new["metadata"]["annotations"][AUTOUPDATE], "true");
        assert_eq!(new["metadata"]["labels"], want["metadata"]["labels"]);
    }

    #[test]
    fn bindings_gain_missing_subjects_and_their_role() {
        let bindings = default_cluster_role_bindings();
        let want = named(&bindings, "system:public-info-viewer");
        let mut old = want.clone();
        old["subjects"] = json!([{"kind": "Group", "name": "system:authenticated"}, {"kind": "User", "name": "ops"}]);
        old["roleRef"]["name"] = json!("view");
        let new = reconcile(&old, want).unwrap();
        let names: Vec<&str> =
            new["subjects"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["system:authenticated", "ops", "system:unauthenticated"]);
        assert_eq!(new["roleRef"], want["roleRef"]);
    }
}
