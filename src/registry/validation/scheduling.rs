//! What selects objects and places pods, as kube checks it: label selectors (wherever one is: a
//! workload's, an affinity term's, a policy's, a webhook's), node selector terms, pod affinity
//! terms, topology spread constraints and scheduling gates.

use super::*;

/// The operators a label selector's expression takes.
const SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

fn strings(v: Option<&Value>) -> impl Iterator<Item = &str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// A label key (kube's `ValidateLabelName`): each broken rule its own error at `at`.
pub(super) fn label_key(causes: &mut Vec<Cause>, at: &str, key: &str) {
    for why in meta::qualified_name_errors(key) {
        invalid(causes, at.to_string(), format!("{key:?}"), &why);
    }
}

/// An operator's values: some for `In` and `NotIn`, none for `Exists` and `DoesNotExist`. Whether
/// the operator was one of those.
fn operator_values(map: &Map<String, Value>, at: &str, causes: &mut Vec<Cause>) -> bool {
    let values = map.get("values").and_then(Value::as_array).map_or(0, Vec::len);
    let at = format!("{at}.values");
    match map.get("operator").and_then(Value::as_str) {
        Some("In" | "NotIn") if values == 0 => push(
            causes,
            cause("FieldValueRequired", &at, "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ),
        Some("Exists" | "DoesNotExist") if values > 0 => {
            forbidden(causes, &at, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        }
        Some(op) if SELECTOR_OPERATORS.contains(&op) => {}
        _ => return false,
    }
    true
}

fn not_an_operator(map: &Map<String, Value>, at: &str, causes: &mut Vec<Cause>) {
    let op = map.get("operator").cloned().unwrap_or(Value::String(String::new()));
    invalid(causes, format!("{at}.operator"), shown(&op), "not a valid selector operator");
}

/// A label selector (kube's `ValidateLabelSelector`): its labels, and each expression's operator,
/// values and key. kube checks the values as label values wherever it checks a selector of a new
/// object.
pub(super) fn label_selector(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(labels) = map.get("matchLabels").and_then(Value::as_object) {
        meta::label_errors(labels, &path.child("matchLabels"), causes);
    }
    let expressions = map.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in expressions.into_iter().flatten().enumerate() {
        let Some(e) = e.as_object() else { continue };
        let at = format!("{}[{i}]", path.child("matchExpressions"));
        if !operator_values(e, &at, causes) {
            not_an_operator(e, &at, causes);
        }
        label_key(causes, &format!("{at}.key"), e.get("key").and_then(Value::as_str).unwrap_or_default());
        for (j, v) in strings(e.get("values")).enumerate() {
            for why in meta::label_value_errors(v) {
                invalid(causes, format!("{at}.values[{j}]"), format!("{v:?}"), &why);
            }
        }
    }
}

/// One requirement of a node selector term (kube's `ValidateNodeSelectorRequirement` and, under
/// `matchFields`, `ValidateNodeFieldSelectorRequirement`). A required term's values are label values;
/// a preferred term's are not checked.
pub(super) fn node_selector_requirement(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let values: Vec<&str> = strings(map.get("values")).collect();
    let count = map.get("values").and_then(Value::as_array).map_or(0, Vec::len);
    let key = map.get("key").and_then(Value::as_str).unwrap_or_default();
    if path.has("matchFields") {
        match map.get("operator").and_then(Value::as_str) {
            Some("In" | "NotIn") if count != 1 => push(
                causes,
                cause(
                    "FieldValueRequired",
                    &path.child("values"),
                    "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ),
            ),
            Some("In" | "NotIn") => {}
            _ => not_an_operator(map, &path.render(), causes),
        }
        if key != "metadata.name" {
            invalid(causes, path.child("key"), format!("{key:?}"), "not a valid field selector key");
        }
        for (i, v) in values.iter().enumerate() {
            for why in meta::dns1123_subdomain_errors(v) {
                invalid(causes, format!("{}[{i}]", path.child("values")), format!("{v:?}"), &why);
            }
        }
        return;
    }
    match map.get("operator").and_then(Value::as_str) {
        Some("Gt" | "Lt") if count != 1 => push(
            causes,
            cause(
                "FieldValueRequired",
                &path.child("values"),
                "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
            ),
        ),
        Some("Gt" | "Lt") => {}
        _ => {
            let at = path.render();
            if !operator_values(map, &at, causes) {
                not_an_operator(map, &at, causes);
            }
        }
    }
    label_key(causes, &path.child("key"), key);
    if !path.has("preferredDuringSchedulingIgnoredDuringExecution") {
        for (i, v) in values.iter().enumerate() {
            for why in meta::label_value_errors(v) {
                invalid(causes, format!("{}[{i}]", path.child("values")), format!("{v:?}"), &why);
            }
        }
    }
}

/// Label keys a term takes from the pod's own labels (`matchLabelKeys`, `mismatchLabelKeys`): only
/// beside a label selector, each a label key.
fn label_keys(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get(field)) {
        return;
    }
    if map.get("labelSelector").is_none_or(Value::is_null) {
        return forbidden(causes, &path.child(field), "must not be specified when labelSelector is not set");
    }
    for (i, key) in strings(map.get(field)).enumerate() {
        label_key(causes, &format!("{}[{i}]", path.child(field)), key);
    }
}

/// The keys a label selector names, in matchLabels and matchExpressions.
fn selector_keys(selector: Option<&Value>) -> impl Iterator<Item = &str> {
    let labels = selector.and_then(|s| s["matchLabels"].as_object()).into_iter().flat_map(|m| m.keys());
    let expressions = selector.and_then(|s| s["matchExpressions"].as_array()).into_iter().flatten();
    labels.map(String::as_str).chain(expressions.filter_map(|e| e["key"].as_str()))
}

/// A pod (anti-)affinity term (kube's `validatePodAffinityTerm`; its selectors are checked as label
/// selectors where they are): namespaces that are names, label keys that take no key twice, a
/// topology key.
pub(super) fn pod_affinity_term(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    // kube names every namespace's error at one `namespace`, without an index.
    for ns in strings(map.get("namespaces")) {
        for why in meta::dns1123_label_errors(ns) {
            invalid(causes, path.child("namespace"), format!("{ns:?}"), &why);
        }
    }
    label_keys(map, "matchLabelKeys", path, causes);
    label_keys(map, "mismatchLabelKeys", path, causes);
    if map.get("labelSelector").is_some_and(|s| !s.is_null()) {
        // A key taken from the pod's labels must not be one the selector already names twice (kube
        // reports it at the term's path, indexed by the key's place in `matchLabelKeys`).
        let from_pod: std::collections::HashMap<&str, usize> =
            strings(map.get("matchLabelKeys")).enumerate().map(|(i, k)| (k, i)).collect();
        let selector = map.get("labelSelector");
        let mut seen: HashSet<&str> = selector
            .and_then(|s| s["matchLabels"].as_object())
            .into_iter()
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        let expressions = selector.and_then(|s| s["matchExpressions"].as_array()).into_iter().flatten();
        for key in expressions.filter_map(|e| e["key"].as_str()) {
            if let (Some(i), false) = (from_pod.get(key), seen.insert(key)) {
                invalid(
                    causes,
                    format!("{}[{i}]", path.render()),
                    format!("{key:?}"),
                    "exists in both matchLabelKeys and labelSelector",
                );
            }
        }
    }
    let mismatched: HashSet<&str> = strings(map.get("mismatchLabelKeys")).collect();
    for (i, key) in strings(map.get("matchLabelKeys")).enumerate() {
        if mismatched.contains(key) {
            let at = format!("{}[{i}]", path.child("matchLabelKeys"));
            invalid(causes, at, format!("{key:?}"), "exists in both matchLabelKeys and mismatchLabelKeys");
        }
    }
    let topology_key = map.get("topologyKey").and_then(Value::as_str).unwrap_or_default();
    if topology_key.is_empty() {
        push(causes, cause("FieldValueRequired", &path.child("topologyKey"), "Required value: can not be empty"));
    }
    label_key(causes, &path.child("topologyKey"), topology_key);
}

/// A topology spread constraint (kube's `validateTopologySpreadConstraints`, its selector checked as
/// a label selector where it is): a positive skew and minimum of domains, a topology key, known
/// actions and policies, label keys not in the selector.
pub(super) fn spread_constraint(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(n) = map.get("maxSkew").and_then(Value::as_i64).filter(|n| *n <= 0) {
        invalid(causes, path.child("maxSkew"), n.to_string(), "must be greater than zero");
    }
    if is_empty(map.get("topologyKey")) {
        push(causes, cause("FieldValueRequired", &path.child("topologyKey"), "Required value: can not be empty"));
    }
    one_of(map, "whenUnsatisfiable", path, &["DoNotSchedule", "ScheduleAnyway"], causes);
    if let Some(n) = map.get("minDomains").and_then(Value::as_i64) {
        if n <= 0 {
            invalid(causes, path.child("minDomains"), n.to_string(), "must be greater than zero");
        }
        if let Some(action) = map.get("whenUnsatisfiable").and_then(Value::as_str).filter(|a| *a != "DoNotSchedule") {
            let why = format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}");
            invalid(causes, path.child("minDomains"), n.to_string(), &why);
        }
    }
    for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
        one_of(map, policy, path, &["Honor", "Ignore"], causes);
    }
    label_keys(map, "matchLabelKeys", path, causes);
    let named: HashSet<&str> = selector_keys(map.get("labelSelector")).collect();
    for (i, key) in strings(map.get("matchLabelKeys")).enumerate() {
        if named.contains(key) {
            let at = format!("{}[{i}]", path.child("matchLabelKeys"));
            invalid(causes, at, format!("{key:?}"), "exists in both matchLabelKeys and labelSelector");
        }
    }
}

/// A pod spec's constraints as a list: no `{topologyKey, whenUnsatisfiable}` pair twice.
pub(super) fn spread_pairs(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let list = spec.get("topologySpreadConstraints").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let pair = |c: &Value| {
        let field = |f: &str| c[f].as_str().unwrap_or_default().to_string();
        (field("topologyKey"), field("whenUnsatisfiable"))
    };
    // kube reports a pair at the first constraint that a later one repeats.
    let mut later = HashSet::new();
    let mut repeated = vec![false; list.len()];
    for (i, c) in list.iter().enumerate().rev() {
        repeated[i] = !later.insert(pair(c));
    }
    for (i, c) in list.iter().enumerate().filter(|(i, _)| repeated[*i]) {
        let (key, action) = pair(c);
        let at = format!("{}[{i}].{{topologyKey, whenUnsatisfiable}}", path.child("topologySpreadConstraints"));
        duplicate(causes, &at, &format!("{{{key}, {action}}}"));
    }
}

/// A pod spec's scheduling gates (kube's `validateSchedulingGates`): qualified names, each once.
pub(super) fn scheduling_gates(spec: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let mut seen = HashSet::new();
    let gates = spec.get("schedulingGates").and_then(Value::as_array);
    for (i, gate) in gates.into_iter().flatten().enumerate() {
        let name = gate["name"].as_str().unwrap_or_default();
        let at = format!("{}[{i}]", path.child("schedulingGates"));
        label_key(causes, &at, name);
        if !seen.insert(name) {
            duplicate(causes, &at, name);
        }
    }
}
