//! Gives a built-in object the JSON that kube-apiserver writes for it: kube decodes every write into
//! its Go struct and encodes that back, so a field Go writes even when zero (no `omitempty`) is always
//! there, and an `omitempty` field that is zero or empty is never there. Strict typed clients (the
//! Python client's models) refuse objects that lack the former. Key order is `order`'s concern.

use serde_json::{Map, Value};

use super::convert::{absent_collection, absent_single, is_zero, Budget};
use super::schema_types::{find, message, package_for, Field, Kind, Rep, Shape, INLINE, OMITEMPTY, POINTER};

/// Nesting deeper than any Kubernetes type has; deeper parts are left as they are.
const MAX_DEPTH: usize = 100;

/// Fields `obj` (an object of `apiVersion`/`kind`) gains or loses as Go would write it. Does nothing for
/// kinds without a protobuf schema (custom resources, kgate's own types). The zero values added are
/// bounded by a multiple of the object's own size, so a list of a million empty structs cannot make
/// the server build a million filled ones: past that, the rest is left as sent.
pub fn go_shape(api_version: &str, kind: &str, obj: &mut Value) {
    let Some(package) = package_for(api_version) else { return };
    let Some(index) = find(&format!("{package}.{kind}")) else { return };
    let budget = Budget::values(4 * count_values(obj, 0) + 10_000);
    message_value(index, obj, 0, &budget);
}

/// How many JSON values `v` holds, to size the budget.
fn count_values(v: &Value, depth: usize) -> usize {
    if depth > MAX_DEPTH {
        return 1;
    }
    match v {
        Value::Array(a) => 1 + a.iter().map(|x| count_values(x, depth + 1)).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(|x| count_values(x, depth + 1)).sum::<usize>(),
        _ => 1,
    }
}

fn message_value(index: u16, v: &mut Value, depth: usize, budget: &Budget) {
    let msg = message(index);
    // Times, quantities, int-or-strings and raw JSON are written as they are stored.
    if msg.shape != Shape::Object || depth > MAX_DEPTH {
        return;
    }
    if let Value::Object(map) = v {
        fields(msg.fields, map, depth, budget);
    }
}

fn fields(fields: &[Field], map: &mut Map<String, Value>, depth: usize, budget: &Budget) {
    for f in fields {
        if f.has(INLINE) {
            // An embedded struct's fields belong to this object.
            if let Kind::Msg(index) = f.kind {
                let inner = message(index);
                if inner.shape == Shape::Object && depth < MAX_DEPTH {
                    self::fields(inner.fields, map, depth + 1, budget);
                }
            }
            continue;
        }
        let present = map.get(f.json).is_some_and(|v| !v.is_null());
        if present {
            let keep = map.get_mut(f.json).map(|v| present_value(f, v, depth, budget)).unwrap_or(true);
            if !keep {
                map.remove(f.json);
            }
            continue;
        }
        // Absent or null: Go decodes both to the zero value, then writes what the zero value writes.
        map.remove(f.json);
        if budget.spend(1).is_err() {
            return;
        }
        let zero = match f.rep {
            Rep::L | Rep::M => absent_collection(f),
            Rep::S => absent_single(f, depth + 1, budget).ok().flatten(),
        };
        if let Some(z) = zero {
            map.insert(f.json.to_string(), z);
        }
    }
}

/// Shapes a present, non-null value; `false` when Go would leave the field out.
fn present_value(f: &Field, v: &mut Value, depth: usize, budget: &Budget) -> bool {
    match (f.rep, f.kind) {
        (Rep::S, Kind::Msg(index)) => {
            message_value(index, v, depth + 1, budget);
            true
        }
        (Rep::S, _) => !(f.has(OMITEMPTY) && !f.has(POINTER) && is_zero(v)),
        (Rep::L, kind) => {
            let Value::Array(items) = v else { return true };
            if items.is_empty() {
                return !f.has(OMITEMPTY);
            }
            if let Kind::Msg(index) = kind {
                items.iter_mut().for_each(|item| message_value(index, item, depth + 1, budget));
            }
            true
        }
        (Rep::M, kind) => {
            let Value::Object(entries) = v else { return true };
            if entries.is_empty() {
                return !f.has(OMITEMPTY);
            }
            if let Kind::Msg(index) = kind {
                entries.values_mut().for_each(|item| message_value(index, item, depth + 1, budget));
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn zero_fields_go_writes_appear_and_omitted_zeros_go() {
        let mut ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "minReadySeconds": 0,
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {}});
        go_shape("apps/v1", "DaemonSet", &mut ds);
        let status = &ds["status"];
        for f in ["currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"] {
            assert_eq!(status[f], 0, "{f}: {status}");
        }
        assert!(status.get("observedGeneration").is_none(), "omitempty zero stays out: {status}");
        assert!(ds["spec"].get("minReadySeconds").is_none(), "an omitempty zero sent is dropped: {ds}");
        // A non-pointer struct is always written; its own zero Time is null.
        assert_eq!(ds["spec"]["template"]["metadata"]["creationTimestamp"], Value::Null);
        assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["name"], "c");
        // What is not in the schema stays, and kinds without one are untouched.
        let mut cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}});
        let before = cr.clone();
        go_shape("example.com/v1", "Widget", &mut cr);
        assert_eq!(cr, before);
    }

    #[test]
    fn a_rolebinding_without_subjects_and_a_role_without_rules_read_as_go_writes_them() {
        let mut role =
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
        go_shape("rbac.authorization.k8s.io/v1", "ClusterRole", &mut role);
        assert_eq!(role["rules"], Value::Null, "{role}");
        assert!(role.get("aggregationRule").is_none());
    }

    #[test]
    fn zero_values_added_are_bounded_by_the_objects_size() {
        let containers: Vec<Value> = (0..200_000).map(|_| json!({})).collect();
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": containers}});
        let before = count_values(&pod, 0);
        go_shape("v1", "Pod", &mut pod);
        assert!(count_values(&pod, 0) <= 6 * before + 20_000, "{} from {before}", count_values(&pod, 0));
    }
}
