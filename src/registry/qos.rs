//! A pod's quality-of-service class, as kube computes it when the pod is created (`ComputePodQOS`): the
//! kubelet evicts and schedules by it, and `kubectl describe` and typed clients show it. It never
//! changes afterwards, so a resize that would change it is refused.

use std::collections::BTreeMap;

use serde_json::Value;

use super::gates::{enabled, Gate};
use super::quantity::Total;

/// The resources kube's QoS counts.
const COUNTED: [&str; 2] = ["cpu", "memory"];

/// `BestEffort`, `Burstable` or `Guaranteed`, from a pod's spec (its requests already defaulted from
/// its limits): the sums of the positive CPU and memory requests and limits of its containers and init
/// containers (ephemeral ones have none), or the pod's own resources where their gate is on.
pub(super) fn class(pod: &Value) -> &'static str {
    let spec = &pod["spec"];
    let (mut requests, mut limits) = (BTreeMap::new(), BTreeMap::new());
    let mut guaranteed = true;
    let pod_level = enabled(Gate::PodLevelResources) && spec["resources"].is_object();
    let each: Vec<&Value> = if pod_level {
        vec![&spec["resources"]]
    } else {
        ["containers", "initContainers"]
            .iter()
            .flat_map(|list| spec[list].as_array().into_iter().flatten())
            .map(|c| &c["resources"])
            .collect()
    };
    for resources in each {
        add_positive(&mut requests, &resources["requests"]);
        let found = add_positive(&mut limits, &resources["limits"]);
        // kube asks every container for both limits; of the pod's own, only when it sets limits.
        let asked = !pod_level || resources["limits"].as_object().is_some_and(|l| !l.is_empty());
        if asked && found < COUNTED.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let matched = requests.iter().all(|(name, r)| limits.get(name).is_some_and(|l: &Total| l.same(*r)));
    if guaranteed && matched && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Adds the positive CPU and memory quantities of `list` to `sums`; how many it found.
fn add_positive(sums: &mut BTreeMap<&'static str, Total>, list: &Value) -> usize {
    let mut found = 0;
    for name in COUNTED {
        let Some(q) = list.get(name).and_then(Total::of) else { continue };
        if super::quantity::compare(&list[name], &Value::String("0".into())).is_none_or(|o| o.is_le()) {
            continue;
        }
        found += 1;
        let sum = sums.get(name).map_or(q, |s: &Total| s.plus(q));
        sums.insert(name, sum);
    }
    found
}

/// kube's check of a resize (`ValidatePodResize`) that needs the class: it is the stored one, and the
/// resized spec must compute to it.
pub(super) fn resize_errors(old: &Value, new: &Value) -> Vec<crate::status::Cause> {
    let stored = match old["status"]["qosClass"].as_str() {
        // kgate recorded every pod as BestEffort before it computed classes; no pod with CPU or memory
        // requests or limits is one, so such a pod's class is what its spec says.
        Some(c) if !c.is_empty() && c != "BestEffort" => c,
        _ => class(old),
    };
    if class(new) == stored {
        return Vec::new();
    }
    // kube names the class the pod keeps (its status is the stored one), quoted as Go does.
    let why = format!("Invalid value: \"{stored}\": Pod QOS Class may not change as a result of resizing");
    vec![crate::status::cause("FieldValueInvalid", "spec", why)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value, init: Value) -> Value {
        json!({"spec": {"containers": containers, "initContainers": init}})
    }

    fn res(requests: Value, limits: Value) -> Value {
        json!({"name": "c", "resources": {"requests": requests, "limits": limits}})
    }

    #[test]
    fn classes_as_kube_computes_them() {
        let both = json!({"cpu": "500m", "memory": "1Gi"});
        assert_eq!(class(&pod(json!([{"name": "c"}]), json!([]))), "BestEffort");
        assert_eq!(class(&pod(json!([res(both.clone(), both.clone())]), json!([]))), "Guaranteed");
        // Zero requests count for nothing; other resources are not counted.
        let nothing = json!({"cpu": "0", "memory": "0", "nvidia.com/gpu": "1"});
        assert_eq!(class(&pod(json!([res(nothing.clone(), nothing)]), json!([]))), "BestEffort");
        // Requests below limits, or a container without both limits: Burstable.
        let less = json!({"cpu": "250m", "memory": "1Gi"});
        assert_eq!(class(&pod(json!([res(less, both.clone())]), json!([]))), "Burstable");
        let cpu = json!({"cpu": "1"});
        assert_eq!(class(&pod(json!([res(cpu.clone(), cpu)]), json!([]))), "Burstable");
        let guaranteed = res(both.clone(), both.clone());
        assert_eq!(class(&pod(json!([guaranteed.clone(), {"name": "d"}]), json!([]))), "Burstable");
        // Init containers count too, and sums compare exactly: 0.3 CPUs as 100m and 200m.
        assert_eq!(class(&pod(json!([guaranteed.clone()]), json!([guaranteed.clone()]))), "Guaranteed");
        let split = [json!({"cpu": "100m", "memory": "1Gi"}), json!({"cpu": "200m", "memory": "1Gi"})];
        let pod_of = |limit: &str| {
            let l = json!({"cpu": limit, "memory": "1Gi"});
            pod(
                json!([
                    res(split[0].clone(), l.clone()),
                    res(split[1].clone(), json!({"cpu": "200m", "memory": "1Gi"}))
                ]),
                json!([]),
            )
        };
        assert_eq!(class(&pod_of("100m")), "Guaranteed");
        assert_eq!(class(&pod_of("0.1")), "Guaranteed");
        assert_eq!(class(&pod_of("101m")), "Burstable");
    }

    #[test]
    fn a_resize_keeps_the_class() {
        let both = json!({"cpu": "500m", "memory": "1Gi"});
        let mut old = pod(json!([res(both.clone(), both.clone())]), json!([]));
        old["status"] = json!({"qosClass": "Guaranteed"});
        let bigger = json!({"cpu": "1", "memory": "2Gi"});
        assert!(resize_errors(&old, &pod(json!([res(bigger.clone(), bigger)]), json!([]))).is_empty());
        let errs = resize_errors(&old, &pod(json!([res(json!({"cpu": "250m", "memory": "1Gi"}), both)]), json!([])));
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].message,
            "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
        );
        // A pod stored by an older kgate as BestEffort, whatever its resources: its class is its spec's.
        old["status"] = json!({"qosClass": "BestEffort"});
        let bigger = json!({"cpu": "1", "memory": "2Gi"});
        assert!(resize_errors(&old, &pod(json!([res(bigger.clone(), bigger)]), json!([]))).is_empty());
    }
}
