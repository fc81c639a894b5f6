//! Versions kube keeps in another version's form: an object written in such a version is converted to
//! its storage version before it is stored, and every read in that version converts it back, as
//! kube-apiserver's codec does at the storage boundary. Among kube 1.33's default APIs there is one:
//! autoscaling/v1 HorizontalPodAutoscalers, stored as autoscaling/v2. Its conversion follows kube's
//! `pkg/apis/autoscaling/v1/conversion.go`: v1 has a CPU target only, so every other metric, the
//! current metrics and the conditions ride in annotations that v2 turns back into fields.
//!
//! And one across groups: `events.k8s.io/v1` Events are core `v1` Events in kube's storage (one
//! resource, two APIs: `kubectl events` reads core, the recorders of client-go, controller-runtime
//! and kube-rs write events.k8s.io), converted as `pkg/apis/events/v1/conversion.go` does: fields
//! renamed, nothing lost. Their keys are core's (`ResourceDef::storage_group`).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};

/// One served version stored as another.
struct Conversion {
    group: &'static str,
    plural: &'static str,
    /// The version clients use.
    version: &'static str,
    /// The group and version objects are stored in.
    storage_group: &'static str,
    storage: &'static str,
    to_storage: fn(&mut Value) -> Result<(), String>,
    from_storage: fn(&mut Value),
}

const CONVERSIONS: &[Conversion] = &[
    Conversion {
        group: "autoscaling",
        plural: "horizontalpodautoscalers",
        version: "v1",
        storage_group: "autoscaling",
        storage: "v2",
        to_storage: hpa::to_v2,
        from_storage: hpa::to_v1,
    },
    Conversion {
        group: "events.k8s.io",
        plural: "events",
        version: "v1",
        storage_group: "",
        storage: "v1",
        to_storage: events::to_core,
        from_storage: events::from_core,
    },
];

fn conversion(def: &ResourceDef) -> Option<&'static Conversion> {
    if def.custom.is_some() {
        return None;
    }
    CONVERSIONS.iter().find(|c| c.group == def.group && c.plural == def.plural && c.version == def.version)
}

/// The definition whose form `def`'s objects are stored in: `def` itself but for converted versions.
/// Caches and store reads of a converted version go through it, so that one cache holds one form.
pub fn stored_def(def: &Arc<ResourceDef>) -> Arc<ResourceDef> {
    conversion(def)
        .and_then(|c| crate::resources::find(c.storage_group, c.storage, c.plural))
        .unwrap_or_else(|| def.clone())
}

/// Turn an object of `def`'s version into its storage form (apiVersion included). Fails, as kube's
/// conversion does, when an annotation it reads is not the JSON it expects.
pub fn to_storage(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let Some(c) = conversion(def) else { return Ok(()) };
    (c.to_storage)(obj).map_err(ApiError::bad_request)?;
    let api_version = match c.storage_group {
        "" => c.storage.to_string(),
        g => format!("{g}/{}", c.storage),
    };
    crate::proto::go_shape(&api_version, &def.kind, obj);
    obj["apiVersion"] = Value::String(api_version);
    Ok(())
}

/// Turn a stored object into `def`'s version (apiVersion included).
pub fn from_storage(def: &ResourceDef, obj: &mut Value) {
    let Some(c) = conversion(def) else { return };
    (c.from_storage)(obj);
    crate::proto::go_shape(&def.api_version(), &def.kind, obj);
    obj["apiVersion"] = Value::String(def.api_version());
}

/// A write to the object itself (not its `/status`) keeps the stored status, as kube resets status in
/// its internal form: in a converted version part of the status rides in annotations (autoscaling/v1's
/// current metrics and conditions), which such a write must not set nor drop either.
pub fn keep_stored_status(def: &ResourceDef, current: &Value, desired: &mut Value) {
    if conversion(def).is_none() {
        return;
    }
    for key in hpa::STATUS_ANNOTATIONS {
        let kept = current["metadata"]["annotations"].get(key).cloned();
        let meta = crate::meta::metadata_mut(desired);
        let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
        if let Some(ann) = ann.as_object_mut() {
            match &kept {
                Some(v) => {
                    ann.insert(key.to_string(), v.clone());
                }
                None => {
                    ann.remove(key);
                }
            }
        }
    }
}

/// `obj`, of `def`'s version, as it reads once stored: converted to the storage version and back.
pub fn round_trip(def: &ResourceDef, obj: &mut Value) {
    if conversion(def).is_none() {
        return;
    }
    let mut stored = obj.clone();
    if to_storage(def, &mut stored).is_ok() {
        from_storage(def, &mut stored);
        *obj = stored;
    }
}

/// `events.k8s.io/v1` Events and core `v1` Events: the same fields under other names.
mod events {
    use serde_json::{Map, Value};

    /// events.k8s.io's name of each field core names otherwise (kube's `Convert_v1_Event_To_core_Event`).
    const RENAMED: [(&str, &str); 7] = [
        ("regarding", "involvedObject"),
        ("note", "message"),
        ("reportingController", "reportingComponent"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
    ];

    fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
        let Some(m) = obj.as_object_mut() else { return };
        let moved: Map<String, Value> =
            pairs.filter_map(|(from, to)| Some((to.to_string(), m.remove(from)?))).collect();
        m.extend(moved);
    }

    pub fn to_core(obj: &mut Value) -> Result<(), String> {
        rename(obj, RENAMED.into_iter());
        Ok(())
    }

    pub fn from_core(obj: &mut Value) {
        rename(obj, RENAMED.into_iter().map(|(events, core)| (core, events)));
    }
}

/// Whether `def` is a version stored in another's form.
pub fn converts(def: &ResourceDef) -> bool {
    conversion(def).is_some()
}

/// The value at a dotted `path`, if present and not null.
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

/// Set `value` at a dotted `path` of `v`, making the objects on the way.
fn put(v: &mut Value, path: &str, value: Value) {
    let mut cur = v;
    for k in path.split('.') {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur.as_object_mut().expect("made an object above").entry(k).or_insert(Value::Null);
    }
    *cur = value;
}

mod hpa {
    use super::*;

    const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
    const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
    const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
    /// The annotations that carry v2's status in v1.
    pub(super) const STATUS_ANNOTATIONS: [&str; 2] = [CURRENT_METRICS, CONDITIONS];
    /// What v1 implied when it had no target, made explicit in v2.
    const DEFAULT_CPU_UTILIZATION: i64 = 80;

    /// Per metric source (its key is the same in both versions): v2 paths and the v1 fields they map
    /// to, for a metric spec and for a metric status.
    const SPEC_FIELDS: &[(&str, &[(&str, &str)])] = &[
        (
            "resource",
            &[
                ("name", "name"),
                ("target.averageUtilization", "targetAverageUtilization"),
                ("target.averageValue", "targetAverageValue"),
            ],
        ),
        (
            "containerResource",
            &[
                ("name", "name"),
                ("container", "container"),
                ("target.averageUtilization", "targetAverageUtilization"),
                ("target.averageValue", "targetAverageValue"),
            ],
        ),
        (
            "pods",
            &[
                ("metric.name", "metricName"),
                ("metric.selector", "selector"),
                ("target.averageValue", "targetAverageValue"),
            ],
        ),
        (
            "object",
            &[
                ("describedObject", "target"),
                ("metric.name", "metricName"),
                ("metric.selector", "selector"),
                ("target.value", "targetValue"),
                ("target.averageValue", "averageValue"),
            ],
        ),
        (
            "external",
            &[
                ("metric.name", "metricName"),
                ("metric.selector", "metricSelector"),
                ("target.value", "targetValue"),
                ("target.averageValue", "targetAverageValue"),
            ],
        ),
    ];
    const STATUS_FIELDS: &[(&str, &[(&str, &str)])] = &[
        (
            "resource",
            &[
                ("name", "name"),
                ("current.averageUtilization", "currentAverageUtilization"),
                ("current.averageValue", "currentAverageValue"),
            ],
        ),
        (
            "containerResource",
            &[
                ("name", "name"),
                ("container", "container"),
                ("current.averageUtilization", "currentAverageUtilization"),
                ("current.averageValue", "currentAverageValue"),
            ],
        ),
        (
            "pods",
            &[
                ("metric.name", "metricName"),
                ("metric.selector", "selector"),
                ("current.averageValue", "currentAverageValue"),
            ],
        ),
        (
            "object",
            &[
                ("describedObject", "target"),
                ("metric.name", "metricName"),
                ("metric.selector", "selector"),
                ("current.value", "currentValue"),
                ("current.averageValue", "averageValue"),
            ],
        ),
        (
            "external",
            &[
                ("metric.name", "metricName"),
                ("metric.selector", "metricSelector"),
                ("current.value", "currentValue"),
                ("current.averageValue", "currentAverageValue"),
            ],
        ),
    ];
    /// v1 quantities that are not pointers in Go, so a zero is written as "0": of a spec, of a status.
    const SPEC_REQUIRED: &[(&str, &str)] = &[("pods", "targetAverageValue"), ("object", "targetValue")];
    const STATUS_REQUIRED: &[(&str, &str)] = &[
        ("resource", "currentAverageValue"),
        ("containerResource", "currentAverageValue"),
        ("pods", "currentAverageValue"),
        ("object", "currentValue"),
        ("external", "currentValue"),
    ];

    /// Which half of a metric: what is wanted, or what was seen.
    #[derive(Clone, Copy, PartialEq)]
    enum Part {
        Spec,
        Status,
    }

    /// One metric from v2 to v1, or from v1 to v2 with `back`.
    fn metric(m: &Value, part: Part, back: bool) -> Value {
        let (table, required) = match part {
            Part::Spec => (SPEC_FIELDS, SPEC_REQUIRED),
            Part::Status => (STATUS_FIELDS, STATUS_REQUIRED),
        };
        let mut out = json!({"type": m.get("type").cloned().unwrap_or(Value::Null)});
        for (key, fields) in table {
            let Some(src) = m.get(*key).filter(|v| v.is_object()) else { continue };
            let mut dst = json!({});
            for (v2, v1) in *fields {
                let (from, to) = if back { (v1, v2) } else { (v2, v1) };
                if let Some(v) = at(src, from) {
                    put(&mut dst, to, v.clone());
                }
            }
            if !back {
                for (_, f) in required.iter().filter(|(k, _)| k == key) {
                    if dst.get(*f).is_none() {
                        dst[*f] = json!("0");
                    }
                }
            }
            if back && part == Part::Spec {
                // v2 names what the target measures; v1 implied it by which field was set.
                let kind = match *key {
                    "resource" | "containerResource" if src.get("targetAverageUtilization").is_some() => "Utilization",
                    "resource" | "containerResource" | "pods" => "AverageValue",
                    "object" if at(src, "averageValue").is_none() => "Value",
                    "object" => "AverageValue",
                    _ if at(src, "targetValue").is_none() => "AverageValue",
                    _ => "Value",
                };
                put(&mut dst, "target.type", json!(kind));
            }
            out[*key] = dst;
        }
        out
    }

    fn is_cpu_resource(m: &Value) -> bool {
        m["type"] == "Resource" && m["resource"]["name"] == "cpu"
    }

    fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
        let meta = crate::meta::metadata_mut(obj);
        let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
        if !ann.is_object() {
            *ann = Value::Object(Map::new());
        }
        ann.as_object_mut().expect("made an object above")
    }

    fn take(v: &mut Value, parent: &str, field: &str) -> Vec<Value> {
        match v.get_mut(parent).and_then(Value::as_object_mut).and_then(|m| m.remove(field)) {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        }
    }

    /// Stored v2 to v1.
    pub(super) fn to_v1(obj: &mut Value) {
        let metrics = take(obj, "spec", "metrics");
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("behavior");
        }
        // The first CPU metric gives the target, if it is a utilization; the others ride along.
        if let Some(u) =
            metrics.iter().find(|m| is_cpu_resource(m)).and_then(|m| at(m, "resource.target.averageUtilization"))
        {
            put(obj, "spec.targetCPUUtilizationPercentage", u.clone());
        }
        let others: Vec<Value> = metrics
            .iter()
            .filter(|m| !(is_cpu_resource(m) && at(m, "resource.target.averageUtilization").is_some()))
            .map(|m| metric(m, Part::Spec, false))
            .collect();
        let current = take(obj, "status", "currentMetrics");
        let conditions = take(obj, "status", "conditions");
        if let Some(u) = current
            .iter()
            .rev()
            .filter(|m| is_cpu_resource(m))
            .find_map(|m| at(m, "resource.current.averageUtilization"))
        {
            put(obj, "status.currentCPUUtilizationPercentage", u.clone());
        }
        let encode = |items: Vec<Value>| Value::String(Value::Array(items).to_string());
        if !others.is_empty() {
            annotations(obj).insert(METRICS.into(), encode(others));
        }
        if !current.is_empty() {
            let current = current.iter().map(|m| metric(m, Part::Status, false)).collect();
            annotations(obj).insert(CURRENT_METRICS.into(), encode(current));
        }
        if !conditions.is_empty() {
            annotations(obj).insert(CONDITIONS.into(), encode(conditions));
        }
    }

    /// A JSON list kept in an annotation, removed from it.
    fn from_annotation(obj: &mut Value, key: &str) -> Result<Option<Vec<Value>>, String> {
        let Some(ann) = obj.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) else {
            return Ok(None);
        };
        let Some(text) = ann.remove(key) else { return Ok(None) };
        if ann.is_empty() {
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("annotations");
            }
        }
        let text = text.as_str().unwrap_or_default().to_string();
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(items)) => Ok(Some(items)),
            Ok(Value::Null) => Ok(Some(Vec::new())),
            _ => Err(format!("metadata.annotations[{key}]: not a JSON list: {text:?}")),
        }
    }

    /// v1 to the stored v2.
    pub(super) fn to_v2(obj: &mut Value) -> Result<(), String> {
        let target = obj
            .pointer_mut("/spec")
            .and_then(Value::as_object_mut)
            .and_then(|s| s.remove("targetCPUUtilizationPercentage"));
        let cpu = target.filter(|t| !t.is_null()).map(|t| {
            json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}})
        });
        let mut metrics: Vec<Value> = match from_annotation(obj, METRICS)? {
            Some(others) => others.iter().map(|m| metric(m, Part::Spec, true)).collect(),
            None => Vec::new(),
        };
        metrics.extend(cpu);
        if metrics.is_empty() {
            metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}));
        }
        put(obj, "spec.metrics", Value::Array(metrics));
        let current_cpu = obj
            .pointer_mut("/status")
            .and_then(Value::as_object_mut)
            .and_then(|s| s.remove("currentCPUUtilizationPercentage"));
        // The annotation has more than v1's one figure, so it wins.
        let current = match from_annotation(obj, CURRENT_METRICS)? {
            Some(list) => Some(list.iter().map(|m| metric(m, Part::Status, true)).collect()),
            None => current_cpu.filter(|c| !c.is_null()).map(|c| {
                vec![json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": c}}})]
            }),
        };
        if let Some(current) = current {
            put(obj, "status.currentMetrics", Value::Array(current));
        }
        if let Some(conditions) = from_annotation(obj, CONDITIONS)? {
            put(obj, "status.conditions", Value::Array(conditions));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(version: &str) -> Arc<ResourceDef> {
        crate::resources::find("autoscaling", version, "horizontalpodautoscalers").expect("served")
    }

    #[test]
    fn a_v1_target_is_a_v2_cpu_metric_and_back() {
        let mut v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
            "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 40}});
        let sent = v1.clone();
        to_storage(&def("v1"), &mut v1).unwrap();
        assert_eq!(v1["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v1["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 60}}}])
        );
        assert_eq!(v1["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"], 40);
        assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
        from_storage(&def("v1"), &mut v1);
        assert_eq!(v1["spec"], sent["spec"]);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 40);
        // The current metrics ride in an annotation, as kube writes them.
        let ann = v1["metadata"]["annotations"][hpa_annotation("current-metrics")].as_str().unwrap().to_string();
        let current: Value = serde_json::from_str(&ann).unwrap();
        assert_eq!(current[0]["resource"]["currentAverageUtilization"], 40);
    }

    fn hpa_annotation(name: &str) -> String {
        format!("autoscaling.alpha.kubernetes.io/{name}")
    }

    #[test]
    fn metrics_v1_cannot_hold_ride_in_annotations_and_come_back() {
        let mut v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "maxReplicas": 5, "minReplicas": 1,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                        {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                            "target": {"type": "Value", "value": "30"}}},
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]},
            "status": {"desiredReplicas": 1, "conditions": [{"type": "AbleToScale", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R", "message": "m"}]}});
        let stored = v2.clone();
        from_storage(&def("v1"), &mut v2);
        assert_eq!(v2["spec"]["targetCPUUtilizationPercentage"], 70);
        assert!(v2["spec"].get("metrics").is_none() && v2["status"].get("conditions").is_none(), "{v2}");
        let others: Value =
            serde_json::from_str(v2["metadata"]["annotations"][hpa_annotation("metrics")].as_str().unwrap()).unwrap();
        assert_eq!(others.as_array().unwrap().len(), 3);
        assert_eq!(others[1]["pods"], json!({"metricName": "qps", "targetAverageValue": "10"}));
        assert_eq!(others[2]["external"]["metricSelector"], json!({"matchLabels": {"q": "a"}}));
        to_storage(&def("v1"), &mut v2).unwrap();
        assert_eq!(v2["spec"]["metrics"], stored["spec"]["metrics"], "every metric comes back, CPU last");
        assert_eq!(v2["status"]["conditions"], stored["status"]["conditions"]);
        assert!(v2["metadata"].get("annotations").is_none(), "the annotations are consumed: {v2}");
    }

    #[test]
    fn no_target_means_kubes_default_and_a_broken_annotation_is_refused() {
        let mut v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}});
        to_storage(&def("v1"), &mut v1).unwrap();
        assert_eq!(v1["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
        let mut bad = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "annotations": {(hpa_annotation("metrics")): "abc"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}});
        assert_eq!(to_storage(&def("v1"), &mut bad).unwrap_err().code, 400);
        // The storage version and every other type are left alone.
        let mut v2 = json!({"spec": {"metrics": []}});
        to_storage(&def("v2"), &mut v2).unwrap();
        assert_eq!(v2, json!({"spec": {"metrics": []}}));
        assert_eq!(stored_def(&def("v2")).version, "v2");
        assert_eq!(stored_def(&def("v1")).version, "v2");
    }

    #[test]
    fn events_k8s_io_events_are_core_events_renamed_and_back() {
        let new = crate::resources::find("events.k8s.io", "v1", "events").expect("served");
        let stored = stored_def(&new);
        assert_eq!((stored.group.as_str(), stored.version.as_str()), ("", "v1"));
        assert_eq!(new.storage_group(), "core", "one resource: core's keys");
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "n", "reportingController": "c",
            "deprecatedSource": {"component": "k"}, "deprecatedCount": 3, "reason": "R", "type": "Normal",
        });
        let mut core = written.clone();
        to_storage(&new, &mut core).unwrap();
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "n");
        assert_eq!(core["reportingComponent"], "c");
        assert_eq!(core["source"]["component"], "k");
        assert_eq!(core["count"], 3);
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        let mut back = core.clone();
        from_storage(&new, &mut back);
        for field in
            ["regarding", "note", "reportingController", "deprecatedSource", "deprecatedCount", "reason", "type"]
        {
            assert_eq!(back[field], written[field], "{field} survives the round trip");
        }
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
