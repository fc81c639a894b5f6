//! How many pods a workload may have and may lose, as kube checks it: HorizontalPodAutoscalers
//! (kube's `pkg/apis/autoscaling/validation`, through v1 and v2) and PodDisruptionBudgets, with
//! the int-or-percent fields they share with a Deployment's rolling update.

use super::*;

/// An int-or-string as kube's messages show one: Go's `%#v` of the `IntOrString` struct.
pub(super) fn shown_int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!("intstr.IntOrString{{Type:0, IntVal:{other}, StrVal:\"\"}}"),
    }
}

/// An int-or-percent field that counts pods (kube's `ValidatePositiveIntOrPercent`): a number not
/// below 0, or `N%`; `at_most_all` adds `IsNotMoreThan100Percent`. Its value as kube's
/// `getIntOrPercentValue` reads it (a percent's number, a string that is no number as 0, unset as 0).
pub(super) fn int_or_percent(
    map: &Map<String, Value>,
    field: &str,
    within: &str,
    at_most_all: bool,
    causes: &mut Vec<Cause>,
) -> i64 {
    let at = || format!("{within}.{field}");
    match map.get(field) {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or_default();
            if n < 0 {
                invalid(causes, at(), n.to_string(), "must be greater than or equal to 0");
            }
            n
        }
        Some(v @ Value::String(s)) => {
            let digits = s.strip_suffix('%').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            // kube reads the number with Atoi, and one it cannot read as 0.
            let Some(n) = digits.map(|d| d.parse::<i64>().unwrap_or(0)) else {
                let why = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
                invalid(causes, at(), shown_int_or_string(v), why);
                return s.parse().unwrap_or(0);
            };
            if at_most_all && n > 100 {
                invalid(causes, at(), shown_int_or_string(v), "must not be greater than 100%");
            }
            n
        }
        _ => 0,
    }
}

/// A PodDisruptionBudget's spec (kube's `ValidatePodDisruptionBudgetSpec`; its selector is checked as a
/// label selector): one of `minAvailable` and `maxUnavailable`, each a count or a percent of at most
/// all pods, and a known eviction policy. kube shows the spec as its Go struct, with addresses; kgate
/// shows its JSON.
pub(super) fn disruption_budget(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let set = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    if set("minAvailable") && set("maxUnavailable") {
        let shown = Value::Object(map.clone()).to_string();
        invalid(causes, path.render(), shown, "minAvailable and maxUnavailable cannot be both set");
    }
    for field in ["minAvailable", "maxUnavailable"] {
        int_or_percent(map, field, &path.render(), true, causes);
    }
    if set("unhealthyPodEvictionPolicy") {
        one_of(map, "unhealthyPodEvictionPolicy", path, &["AlwaysAllow", "IfHealthyBudget"], causes);
    }
}

/// A reference to a scaled object (kube's `ValidateCrossVersionObjectReference`): a kind and a name,
/// each a path segment.
pub(super) fn object_reference(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    for field in ["kind", "name"] {
        path_segment(map, field, path, causes);
    }
}

/// A field that names a path segment: required, and no `.`, `..`, `/` or `%`.
fn path_segment(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    match map.get(field).and_then(Value::as_str).unwrap_or_default() {
        "" => required(causes, path.child(field)),
        name @ ("." | "..") => invalid(causes, path.child(field), format!("{name:?}"), &format!("may not be '{name}'")),
        name => {
            for bad in ["/", "%"].into_iter().filter(|b| name.contains(b)) {
                invalid(causes, path.child(field), format!("{name:?}"), &format!("may not contain '{bad}'"));
            }
        }
    }
}

/// An autoscaler's spec, v1 or v2 (kube's `validateHorizontalPodAutoscalerSpec`): at least one
/// replica, a maximum not below the minimum.
pub(super) fn autoscaler_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let min = map.get("minReplicas").and_then(Value::as_i64);
    if let Some(n) = min.filter(|n| *n < 1) {
        invalid(causes, path.child("minReplicas"), n.to_string(), "must be greater than or equal to 1");
    }
    if let Some(max) = map.get("maxReplicas").and_then(Value::as_i64) {
        if max < 1 {
            invalid(causes, path.child("maxReplicas"), max.to_string(), "must be greater than 0");
        }
        if min.is_some_and(|min| max < min) {
            invalid(
                causes,
                path.child("maxReplicas"),
                max.to_string(),
                "must be greater than or equal to `minReplicas`",
            );
        }
    }
    // v1's single target is a utilization of CPU, which kube checks as v2's.
    if let Some(n) = map.get("targetCPUUtilizationPercentage").and_then(Value::as_i64).filter(|n| *n < 1) {
        let at = path.child("metrics[0].resource.target.averageUtilization");
        invalid(causes, at, n.to_string(), "must be greater than 0");
    }
}

/// The sources a metric may name, in the order kube looks at them, by the metric type naming each.
const METRIC_SOURCES: [(&str, &str); 5] = [
    ("Object", "object"),
    ("External", "external"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
];

/// One metric of an autoscaler (kube's `validateMetricSpec`): a known type, and the one source that
/// type names, with what that source's target needs.
pub(super) fn metric(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        push(
            causes,
            cause("FieldValueRequired", &path.child("type"), "Required value: must specify a metric source type"),
        );
    }
    let Some((_, own)) = METRIC_SOURCES.iter().find(|(t, _)| *t == kind) else {
        let mut supported: Vec<&str> = METRIC_SOURCES.iter().map(|(t, _)| *t).collect();
        supported.sort_unstable();
        return not_supported(causes, path.child("type"), &Value::String(kind.into()), &supported);
    };
    let present = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    if !present(own) {
        let at = path.child(own);
        push(
            causes,
            cause("FieldValueRequired", &at, "Required value: must populate information for the given metric source"),
        );
    }
    for (_, field) in METRIC_SOURCES.iter().filter(|(_, f)| f != own && present(f)) {
        forbidden(causes, &path.child(field), "must populate the given metric source only");
    }
    let Some(source) = map.get(*own).and_then(Value::as_object) else { return };
    let at = path.child(own);
    let target = source.get("target").and_then(Value::as_object);
    let has = |f: &str| target.is_some_and(|t| t.get(f).is_some_and(|v| !v.is_null()));
    let required_at = |causes: &mut Vec<Cause>, field: &str, why: &str| {
        push(causes, cause("FieldValueRequired", &format!("{at}.target.{field}"), format!("Required value: {why}")));
    };
    match *own {
        "object" if !has("value") && !has("averageValue") => {
            required_at(causes, "averageValue", "must set either a target value or averageValue")
        }
        "external" if !has("value") && !has("averageValue") => {
            required_at(causes, "averageValue", "must set either a target value for metric or a per-pod target")
        }
        "external" if has("value") && has("averageValue") => forbidden(
            causes,
            &format!("{at}.target.value"),
            "may not set both a target value for metric and a per-pod target",
        ),
        "pods" if !has("averageValue") => {
            required_at(causes, "averageValue", "must specify a positive target averageValue")
        }
        "resource" | "containerResource" => {
            if is_empty(source.get("name")) {
                push(
                    causes,
                    cause("FieldValueRequired", &format!("{at}.name"), "Required value: must specify a resource name"),
                );
            }
            if *own == "containerResource" {
                match source.get("container").and_then(Value::as_str).unwrap_or_default() {
                    "" => push(
                        causes,
                        cause(
                            "FieldValueRequired",
                            &format!("{at}.container"),
                            "Required value: must specify a container",
                        ),
                    ),
                    name => dns_label(causes, format!("{at}.container"), name),
                }
            }
            if !has("averageUtilization") && !has("averageValue") {
                required_at(causes, "averageUtilization", "must set either a target raw value or a target utilization");
            } else if has("averageUtilization") && has("averageValue") {
                let why = "may not set both a target raw value and a target utilization";
                forbidden(causes, &format!("{at}.target.averageValue"), why);
            }
        }
        _ => {}
    }
}

/// The metric a source names (kube's `validateMetricIdentifier`): a name that is a path segment.
pub(super) fn metric_identifier(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("name")) {
        push(causes, cause("FieldValueRequired", &path.child("name"), "Required value: must specify a metric name"));
    } else {
        path_segment(map, "name", path, causes);
    }
}

/// A metric's target (kube's `validateMetricTarget`): a known type, positive values.
pub(super) fn metric_target(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        push(
            causes,
            cause("FieldValueRequired", &path.child("type"), "Required value: must specify a metric target type"),
        );
    }
    if !["Utilization", "Value", "AverageValue"].contains(&kind) {
        invalid(causes, path.child("type"), format!("{kind:?}"), "must be either Utilization, Value, or AverageValue");
    }
    for field in ["value", "averageValue"] {
        let Some(q) = map.get(field).filter(|v| !v.is_null()) else { continue };
        let positive = crate::registry::quantity::compare(q, &Value::String("0".into())).is_some_and(|o| o.is_gt());
        if !positive {
            invalid(causes, path.child(field), shown(q), "must be positive");
        }
    }
    if let Some(n) = map.get("averageUtilization").and_then(Value::as_i64).filter(|n| *n < 1) {
        invalid(causes, path.child("averageUtilization"), n.to_string(), "must be greater than 0");
    }
}

/// One direction of an autoscaler's behaviour (kube's `validateScalingRules`): a window of at most an
/// hour, a known policy selection, policies of a known type, a positive value and a period of at most
/// 30 minutes.
pub(super) fn scaling_rules(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(n) = map.get("stabilizationWindowSeconds").and_then(Value::as_i64) {
        let at = || path.child("stabilizationWindowSeconds");
        if n < 0 {
            invalid(causes, at(), n.to_string(), "must be greater than or equal to zero");
        } else if n > 3600 {
            invalid(causes, at(), n.to_string(), "must be less than or equal to 3600");
        }
    }
    if map.get("selectPolicy").is_some_and(|v| !v.is_null()) {
        one_of(map, "selectPolicy", path, &["Disabled", "Max", "Min"], causes);
    }
    let policies = map.get("policies").and_then(Value::as_array);
    if policies.is_none_or(|p| p.is_empty()) {
        push(
            causes,
            cause("FieldValueRequired", &path.child("policies"), "Required value: must specify at least one Policy"),
        );
    }
    for (i, p) in policies.into_iter().flatten().enumerate() {
        let Some(p) = p.as_object() else { continue };
        let at = format!("{}[{i}]", path.child("policies"));
        one_of_at(p, "type", &at, &["Percent", "Pods"], causes);
        if let Some(n) = p.get("value").and_then(Value::as_i64).filter(|n| *n <= 0) {
            invalid(causes, format!("{at}.value"), n.to_string(), "must be greater than zero");
        }
        match p.get("periodSeconds").and_then(Value::as_i64) {
            Some(n) if n <= 0 => {
                invalid(causes, format!("{at}.periodSeconds"), n.to_string(), "must be greater than zero")
            }
            Some(n) if n > 1800 => {
                invalid(causes, format!("{at}.periodSeconds"), n.to_string(), "must be less than or equal to 1800")
            }
            _ => {}
        }
    }
}
