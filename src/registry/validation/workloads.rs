//! Workloads' checks: a controller's selector against its template, replicas, restart policies.

use super::*;

/// A Deployment's, ReplicaSet's, DaemonSet's or StatefulSet's spec (`what`, as kube's words name it): a
/// selector that selects, and the template it selects.
pub(super) fn workload_spec(what: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(n) = map.get("replicas").and_then(Value::as_i64).filter(|n| *n < 0) {
        invalid(causes, path.child("replicas"), n.to_string(), "must be greater than or equal to 0");
    }
    // kube's words name the pods of a Deployment's template as a ReplicaSet's.
    let owner = match what {
        "daemonset" => "DaemonSet",
        "statefulset" => "StatefulSet",
        _ => "ReplicaSet",
    };
    if let Some(spec) = map.get("template").and_then(|t| t.get("spec")).and_then(Value::as_object) {
        let at = format!("{}.spec", path.child("template"));
        one_of_at(spec, "restartPolicy", &at, &["Always"], causes);
        if owner != "DaemonSet" && spec.get("activeDeadlineSeconds").is_some_and(|v| !v.is_null()) {
            let why = format!("activeDeadlineSeconds in {owner} is not Supported");
            forbidden(causes, &format!("{at}.activeDeadlineSeconds"), &why);
        }
    }
    let selector = match map.get("selector") {
        None | Some(Value::Null) => return required(causes, path.child("selector")),
        Some(s) => s,
    };
    let empty = ["matchLabels", "matchExpressions"].iter().all(|f| match selector.get(*f) {
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => true,
    });
    if empty {
        let why = format!("empty selector is invalid for {what}");
        return invalid(causes, path.child("selector"), go_selector(selector), &why);
    }
    let written = map.get("template").and_then(|t| t["metadata"]["labels"].as_object());
    let labels: std::collections::BTreeMap<String, String> =
        written.into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
    // A selector kube cannot parse is refused by the schema's own checks; only one that parses is
    // held against the template.
    if let Some(s) = crate::selector::object::Selector::parse(selector) {
        if !s.matches(&labels) {
            // Go's `%#v` of the map, as kube's message shows it.
            let shown = match written {
                None => "map[string]string(nil)".to_string(),
                Some(_) => format!(
                    "map[string]string{{{}}}",
                    labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect::<Vec<_>>().join(", ")
                ),
            };
            let at = format!("{}.metadata.labels", path.child("template"));
            invalid(causes, at, shown, "`selector` does not match template `labels`");
        }
    }
}

/// Go's `%#v` of a selector, as kube's messages show it (a map or list sent is shown, empty or not;
/// one left out is nil).
pub(super) fn go_selector(v: &Value) -> String {
    let strings = |v: &Value| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels = match v.get("matchLabels").and_then(Value::as_object) {
        Some(m) => {
            let mut pairs: Vec<String> =
                m.iter().map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default())).collect();
            pairs.sort();
            format!("{{{}}}", pairs.join(", "))
        }
        None => "(nil)".to_string(),
    };
    let exprs = match v.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let each: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values") {
                        Some(vs) if vs.is_array() => format!("[]string{{{}}}", strings(vs)),
                        _ => "[]string(nil)".to_string(),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{values}}}",
                        e["key"].as_str().unwrap_or_default(),
                        e["operator"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            format!("{{{}}}", each.join(", "))
        }
        None => "(nil)".to_string(),
    };
    format!("v1.LabelSelector{{MatchLabels:map[string]string{labels}, MatchExpressions:[]v1.LabelSelectorRequirement{exprs}}}")
}
