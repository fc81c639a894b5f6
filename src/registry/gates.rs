//! Fields of the served APIs whose feature gates kube 1.33 has off by default: dropped from what a
//! write stores, as each kube strategy's `dropDisabledFields` drops them before validation, unless the
//! stored object already uses the field (so an object written while a gate was on stays writable).
//!
//! Following a later kube minor is a change to [`OFF`]: a gate it turns on keeps its fields.

use serde_json::{Map, Value};

/// The feature gates behind fields of the served APIs that some kube minor has off by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `spec.resources` of a pod.
    PodLevelResources,
    /// A pod's `resourceClaims`, its containers' `resources.claims`, and its status's claims.
    DynamicResourceAllocation,
    /// Projected volumes' `clusterTrustBundle` sources.
    ClusterTrustBundleProjection,
    /// Volumes of an OCI image (`image`), and the mounts of them.
    ImageVolume,
    /// Containers' `lifecycle.stopSignal`.
    ContainerStopSignals,
    /// Container statuses' `allocatedResourcesStatus`.
    ResourceHealthStatus,
    /// A pod status's and its conditions' `observedGeneration`.
    PodObservedGenerationTracking,
    /// HorizontalPodAutoscaler scaling rules' `tolerance`.
    HpaConfigurableTolerance,
    /// A StatefulSet rolling update's `maxUnavailable`.
    MaxUnavailableStatefulSet,
    /// Deployment and ReplicaSet statuses' `terminatingReplicas`.
    DeploymentReplicaSetTerminatingReplicas,
    /// EndpointSlice hints' `forNodes`, and a Service's `PreferSameZone` and `PreferSameNode` traffic
    /// distributions (refused, not dropped).
    PreferSameTrafficDistribution,
    /// `volumeAttributesClassName` of claims and volumes, and a claim status's modification fields.
    VolumeAttributesClass,
    /// A claim's `dataSourceRef` in another namespace.
    CrossNamespaceVolumeDataSource,
    /// A Lease's `strategy` and `preferredHolder`.
    CoordinatedLeaderElection,
    /// A CSIDriver's `nodeAllocatableUpdatePeriodSeconds`.
    MutableCsiNodeAllocatableCount,
}

/// The gates kube 1.33 has off by default (its `pkg/features` defaults for 1.33), every one of them.
const OFF: &[Gate] = &[
    Gate::PodLevelResources,
    Gate::DynamicResourceAllocation,
    Gate::ClusterTrustBundleProjection,
    Gate::ImageVolume,
    Gate::ContainerStopSignals,
    Gate::ResourceHealthStatus,
    Gate::PodObservedGenerationTracking,
    Gate::HpaConfigurableTolerance,
    Gate::MaxUnavailableStatefulSet,
    Gate::DeploymentReplicaSetTerminatingReplicas,
    Gate::PreferSameTrafficDistribution,
    Gate::VolumeAttributesClass,
    Gate::CrossNamespaceVolumeDataSource,
    Gate::CoordinatedLeaderElection,
    Gate::MutableCsiNodeAllocatableCount,
];

/// Whether `gate` is on in the kube minor served.
pub(crate) fn enabled(gate: Gate) -> bool {
    !OFF.contains(&gate)
}

/// The container lists of a pod spec.
const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
/// The container status lists of a pod status.
const CONTAINER_STATUSES: [&str; 3] = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"];

/// Drop from `obj`, of `group` and `kind`, every field behind a gate that is off and that `old` (the
/// stored object, on an update) does not use. Called where kube's strategies prepare a create or an
/// update, status and other subresources included, before the checks.
pub fn drop_disabled(group: &str, kind: &str, obj: &mut Value, old: Option<&Value>) {
    // Where each kind holds a pod spec (kube's `DropDisabledTemplateFields` for the templates).
    let template: &[&str] = match (group, kind) {
        ("", "Pod") => &["spec"],
        ("", "PodTemplate") => &["template", "spec"],
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => &["spec", "template", "spec"],
        ("batch", "CronJob") => &["spec", "jobTemplate", "spec", "template", "spec"],
        _ => &[],
    };
    if !template.is_empty() {
        if let Some(spec) = map_at_mut(obj, template) {
            pod_spec(spec, old.and_then(|o| map_at(o, template)));
        }
    }
    match (group, kind) {
        ("", "Pod") => pod_status(obj, old),
        ("apps", "StatefulSet") if !enabled(Gate::MaxUnavailableStatefulSet) => {
            drop_unless_used(obj, old, &["spec", "updateStrategy", "rollingUpdate"], "maxUnavailable")
        }
        ("apps", "Deployment" | "ReplicaSet") if !enabled(Gate::DeploymentReplicaSetTerminatingReplicas) => {
            drop_unless_used(obj, old, &["status"], "terminatingReplicas")
        }
        ("autoscaling", "HorizontalPodAutoscaler") => tolerances(obj, old),
        ("discovery.k8s.io", "EndpointSlice") => node_hints(obj, old),
        ("", "PersistentVolumeClaim") => claim(obj, old),
        ("", "PersistentVolume") if !enabled(Gate::VolumeAttributesClass) => {
            drop_unless_used(obj, old, &["spec"], "volumeAttributesClassName")
        }
        ("coordination.k8s.io", "Lease") if !enabled(Gate::CoordinatedLeaderElection) => {
            // Each kept only where the stored Lease has it; a new Lease never has either.
            drop_unless_used(obj, old, &["spec"], "strategy");
            drop_unless_used(obj, old, &["spec"], "preferredHolder");
        }
        ("storage.k8s.io", "CSIDriver") if !enabled(Gate::MutableCsiNodeAllocatableCount) => {
            drop_unless_used(obj, old, &["spec"], "nodeAllocatableUpdatePeriodSeconds")
        }
        _ => {}
    }
}

/// A pod spec's gated fields, wherever the spec is.
fn pod_spec(spec: &mut Map<String, Value>, old: Option<&Map<String, Value>>) {
    let old_uses = |test: &dyn Fn(&Map<String, Value>) -> bool| old.is_some_and(test);
    if !enabled(Gate::PodLevelResources)
        && !old_uses(&|o| o.get("resources").is_some_and(|r| filled(r.get("requests")) || filled(r.get("limits"))))
    {
        spec.remove("resources");
    }
    if !enabled(Gate::DynamicResourceAllocation) && !old_uses(&|o| filled(o.get("resourceClaims"))) {
        spec.remove("resourceClaims");
        for c in containers_mut(spec) {
            if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
                r.remove("claims");
            }
        }
    }
    if !enabled(Gate::ClusterTrustBundleProjection) && !old_uses(&|o| projected_sources(o).any(trust_bundle)) {
        // The source stays, empty, as kube leaves it.
        for volume in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
            let sources = volume.pointer_mut("/projected/sources").and_then(Value::as_array_mut);
            for source in sources.into_iter().flatten().filter_map(Value::as_object_mut) {
                source.remove("clusterTrustBundle");
            }
        }
    }
    if !enabled(Gate::ImageVolume) && !old_uses(&|o| volumes(o).any(image_volume)) {
        image_volumes(spec);
    }
    if !enabled(Gate::ContainerStopSignals) && !old_uses(&|o| containers(o).any(stop_signal)) {
        for c in containers_mut(spec) {
            let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) else { continue };
            if lifecycle.remove("stopSignal").is_some() && lifecycle.values().all(Value::is_null) {
                c.remove("lifecycle");
            }
        }
    }
}

/// A pod's volumes of an image go, and every mount of them (kube's `dropImageVolumes`).
fn image_volumes(spec: &mut Map<String, Value>) {
    let Some(list) = spec.get_mut("volumes").and_then(Value::as_array_mut) else { return };
    // A set: a hostile pod's thousands of mounts are each looked up once, not compared with every
    // volume gone.
    let mut gone = std::collections::HashSet::new();
    list.retain(|v| {
        if !image_volume(v) {
            return true;
        }
        gone.insert(v.get("name").and_then(Value::as_str).unwrap_or_default().to_string());
        false
    });
    if gone.is_empty() {
        return;
    }
    if list.is_empty() {
        spec.remove("volumes");
    }
    for c in containers_mut(spec) {
        let Some(mounts) = c.get_mut("volumeMounts").and_then(Value::as_array_mut) else { continue };
        mounts.retain(|m| !gone.contains(m.get("name").and_then(Value::as_str).unwrap_or_default()));
        if mounts.is_empty() {
            c.remove("volumeMounts");
        }
    }
}

/// A pod status's gated fields (kube's `dropPodStatusDisabledFields`).
fn pod_status(obj: &mut Value, old: Option<&Value>) {
    let old_claims = old.is_some_and(|o| filled(o.pointer("/spec/resourceClaims")));
    let old_generations = old.is_some_and(|o| {
        let status = &o["status"];
        generation(status.get("observedGeneration"))
            || status["conditions"].as_array().into_iter().flatten().any(|c| generation(c.get("observedGeneration")))
    });
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else { return };
    if !enabled(Gate::DynamicResourceAllocation) && !old_claims {
        status.remove("resourceClaimStatuses");
    }
    if !enabled(Gate::ResourceHealthStatus) {
        for list in CONTAINER_STATUSES {
            for s in status.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                s.as_object_mut().map(|s| s.remove("allocatedResourcesStatus"));
            }
        }
    }
    if !enabled(Gate::PodObservedGenerationTracking) && !old_generations {
        status.remove("observedGeneration");
        for c in status.get_mut("conditions").and_then(Value::as_array_mut).into_iter().flatten() {
            c.as_object_mut().map(|c| c.remove("observedGeneration"));
        }
    }
}

/// An autoscaler's scaling rules' tolerances, both kept when the stored one has either.
fn tolerances(obj: &mut Value, old: Option<&Value>) {
    const RULES: [&str; 2] = ["/spec/behavior/scaleUp", "/spec/behavior/scaleDown"];
    if enabled(Gate::HpaConfigurableTolerance)
        || old.is_some_and(|o| RULES.iter().any(|r| o.pointer(r).is_some_and(|rule| set(rule.get("tolerance")))))
    {
        return;
    }
    for rule in RULES {
        if let Some(rule) = obj.pointer_mut(rule).and_then(Value::as_object_mut) {
            rule.remove("tolerance");
        }
    }
}

/// An EndpointSlice's hints for nodes, kept when any endpoint of the stored one has them.
fn node_hints(obj: &mut Value, old: Option<&Value>) {
    let has_them =
        |o: &Value| o["endpoints"].as_array().into_iter().flatten().any(|e| filled(e.pointer("/hints/forNodes")));
    if enabled(Gate::PreferSameTrafficDistribution) || old.is_some_and(has_them) {
        return;
    }
    for e in obj.get_mut("endpoints").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(hints) = e.get_mut("hints").and_then(Value::as_object_mut) {
            hints.remove("forNodes");
        }
    }
}

/// A claim's gated fields (kube's `persistentvolumeclaim.DropDisabledFields` and its status's).
fn claim(obj: &mut Value, old: Option<&Value>) {
    if !enabled(Gate::VolumeAttributesClass) {
        drop_unless_used(obj, old, &["spec"], "volumeAttributesClassName");
        drop_unless_used(obj, old, &["status"], "currentVolumeAttributesClassName");
        drop_unless_used(obj, old, &["status"], "modifyVolumeStatus");
    }
    let elsewhere =
        obj.pointer("/spec/dataSourceRef/namespace").and_then(Value::as_str).is_some_and(|ns| !ns.is_empty());
    if !enabled(Gate::CrossNamespaceVolumeDataSource)
        && elsewhere
        && !old.is_some_and(|o| set(o.pointer("/spec/dataSourceRef")))
    {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("dataSourceRef");
        }
    }
}

/// Drop `field` of the object at `path` unless the stored object sets it there.
fn drop_unless_used(obj: &mut Value, old: Option<&Value>, path: &[&str], field: &str) {
    if old.and_then(|o| map_at(o, path)).is_some_and(|m| set(m.get(field))) {
        return;
    }
    if let Some(m) = map_at_mut(obj, path) {
        m.remove(field);
    }
}

fn map_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_object()
}

fn map_at_mut<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    path.iter().try_fold(v, |v, k| v.get_mut(k))?.as_object_mut()
}

/// Given, and not null.
fn set(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// Given with something in it: a non-empty list or map (Go's `len(x) > 0`).
fn filled(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(m)) => !m.is_empty(),
        _ => false,
    }
}

/// A non-zero generation.
fn generation(v: Option<&Value>) -> bool {
    v.and_then(Value::as_i64).is_some_and(|g| g != 0)
}

fn containers(spec: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    CONTAINERS.iter().flat_map(move |l| spec.get(*l).and_then(Value::as_array).into_iter().flatten())
}

fn containers_mut(spec: &mut Map<String, Value>) -> Vec<&mut Map<String, Value>> {
    let mut out = Vec::new();
    for (name, list) in spec.iter_mut() {
        if CONTAINERS.contains(&name.as_str()) {
            out.extend(list.as_array_mut().into_iter().flatten().filter_map(Value::as_object_mut));
        }
    }
    out
}

fn volumes(spec: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    spec.get("volumes").and_then(Value::as_array).into_iter().flatten()
}

fn projected_sources(spec: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    volumes(spec).flat_map(|v| v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten())
}

fn trust_bundle(source: &Value) -> bool {
    set(source.get("clusterTrustBundle"))
}

fn image_volume(volume: &Value) -> bool {
    set(volume.get("image"))
}

fn stop_signal(container: &Value) -> bool {
    set(container.pointer("/lifecycle/stopSignal"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dropped(group: &str, kind: &str, mut obj: Value, old: Option<&Value>) -> Value {
        drop_disabled(group, kind, &mut obj, old);
        obj
    }

    #[test]
    fn a_new_pod_loses_every_field_behind_a_gate_that_is_off() {
        let container = json!({"name": "c", "image": "x",
            "resources": {"limits": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
            "lifecycle": {"stopSignal": "SIGTERM"},
            "volumeMounts": [{"name": "img", "mountPath": "/i"}, {"name": "cfg", "mountPath": "/c"}]});
        let pod = json!({"spec": {
            "resources": {"limits": {"cpu": "2"}},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}],
            "containers": [container.clone()],
            "initContainers": [{"name": "i", "image": "x", "lifecycle": {"stopSignal": "SIGKILL", "preStop": {"sleep": {"seconds": 1}}}}],
            "volumes": [
                {"name": "img", "image": {"reference": "r"}},
                {"name": "cfg", "projected": {"sources": [{"clusterTrustBundle": {"name": "b", "path": "p"}}, {"configMap": {"name": "m"}}]}}
            ]},
            "status": {"observedGeneration": 3, "conditions": [{"type": "Ready", "observedGeneration": 3}],
                "resourceClaimStatuses": [{"name": "gpu"}],
                "containerStatuses": [{"name": "c", "allocatedResourcesStatus": [{"name": "x"}]}]}});
        let got = dropped("", "Pod", pod, None);
        assert_eq!(
            got["spec"],
            json!({
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}},
                    "volumeMounts": [{"name": "cfg", "mountPath": "/c"}]}],
                "initContainers": [{"name": "i", "image": "x", "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}],
                "volumes": [{"name": "cfg", "projected": {"sources": [{}, {"configMap": {"name": "m"}}]}}]
            })
        );
        assert_eq!(got["status"], json!({"conditions": [{"type": "Ready"}], "containerStatuses": [{"name": "c"}]}));
    }

    #[test]
    fn what_the_stored_object_uses_stays_and_templates_are_pod_specs_too() {
        let spec = json!({"resources": {"requests": {"cpu": "1"}}, "resourceClaims": [{"name": "a"}],
            "containers": [{"name": "c", "lifecycle": {"stopSignal": "SIGTERM"}, "resources": {"claims": [{"name": "a"}]}}],
            "volumes": [{"name": "i", "image": {"reference": "r"}}]});
        let deployment = json!({"spec": {"template": {"spec": spec}}, "status": {"terminatingReplicas": 1}});
        assert_eq!(dropped("apps", "Deployment", deployment.clone(), Some(&deployment)), deployment);
        let new = dropped("apps", "Deployment", deployment.clone(), None);
        assert_eq!(new["spec"]["template"]["spec"], json!({"containers": [{"name": "c", "resources": {}}]}));
        assert_eq!(new["status"], json!({}));
        // An empty `resources` of the stored pod does not count as using pod-level resources.
        let old = json!({"spec": {"resources": {}}});
        let pod = dropped("", "Pod", json!({"spec": {"resources": {"limits": {"cpu": "1"}}}}), Some(&old));
        assert_eq!(pod["spec"], json!({}));
        let cron =
            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"resourceClaims": [{"name": "a"}]}}}}}});
        assert_eq!(
            dropped("batch", "CronJob", cron, None)["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            json!({})
        );
        let ss = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0, "maxUnavailable": 2}}}});
        assert_eq!(dropped("apps", "StatefulSet", ss.clone(), Some(&ss)), ss);
        assert_eq!(
            dropped("apps", "StatefulSet", ss, None)["spec"]["updateStrategy"],
            json!({"rollingUpdate": {"partition": 0}})
        );
    }

    #[test]
    fn each_field_is_kept_by_its_own_use_alone() {
        let container = json!({"name": "c", "lifecycle": {"stopSignal": "SIGTERM"}, "volumeMounts": [{"name": "i"}]});
        let spec = json!({"resourceClaims": [{"name": "a"}], "containers": [container],
            "volumes": [{"name": "i", "image": {"reference": "r"}},
                        {"name": "p", "projected": {"sources": [{"clusterTrustBundle": {"name": "b"}}]}}]});
        let pod = json!({"spec": spec});
        // Each stored pod uses one gated field: that one stays, the others go.
        let fields = ["resourceClaims", "stopSignal", "image", "clusterTrustBundle"];
        let uses = [
            json!({"resourceClaims": [{"name": "x"}]}),
            json!({"containers": [{"lifecycle": {"stopSignal": "SIGINT"}}]}),
            json!({"volumes": [{"name": "j", "image": {}}]}),
            json!({"volumes": [{"projected": {"sources": [{"clusterTrustBundle": {}}]}}]}),
        ];
        for (kept, old_spec) in fields.iter().zip(uses) {
            let got = dropped("", "Pod", pod.clone(), Some(&json!({"spec": old_spec}))).to_string();
            for field in fields {
                let present = got.contains(&format!("\"{field}\""));
                assert_eq!(present, field == *kept, "{field} with the stored pod using {kept}: {got}");
            }
        }
        // A pod status keeps observed generations when the stored one has some, and claim statuses
        // when the stored spec has claims.
        let status = json!({"observedGeneration": 2, "resourceClaimStatuses": [{"name": "a"}]});
        let old =
            json!({"spec": {"resourceClaims": [{"name": "a"}]}, "status": {"conditions": [{"observedGeneration": 1}]}});
        let got = dropped("", "Pod", json!({"spec": {}, "status": status.clone()}), Some(&old));
        assert_eq!(got["status"], status);
        let old_driver = json!({"spec": {"nodeAllocatableUpdatePeriodSeconds": 30}});
        let driver = json!({"spec": {"nodeAllocatableUpdatePeriodSeconds": 60}});
        assert_eq!(dropped("storage.k8s.io", "CSIDriver", driver.clone(), Some(&old_driver)), driver);
        let pv = json!({"spec": {"volumeAttributesClassName": "gold"}});
        assert_eq!(dropped("", "PersistentVolume", pv.clone(), None), json!({"spec": {}}));
        assert_eq!(dropped("", "PersistentVolume", pv.clone(), Some(&pv)), pv);
    }

    #[test]
    fn other_kinds_drop_their_gated_fields_unless_already_set() {
        let hpa = json!({"spec": {"behavior": {"scaleUp": {"tolerance": "0.1"}, "scaleDown": {"stabilizationWindowSeconds": 5}}}});
        let kept = json!({"spec": {"behavior": {"scaleDown": {"tolerance": "0.2"}}}});
        assert_eq!(dropped("autoscaling", "HorizontalPodAutoscaler", hpa.clone(), Some(&kept)), hpa);
        assert_eq!(
            dropped("autoscaling", "HorizontalPodAutoscaler", hpa, None)["spec"]["behavior"],
            json!({"scaleUp": {}, "scaleDown": {"stabilizationWindowSeconds": 5}})
        );
        let slice = json!({"endpoints": [{"hints": {"forZones": [{"name": "a"}], "forNodes": [{"name": "n"}]}}]});
        assert_eq!(
            dropped("discovery.k8s.io", "EndpointSlice", slice.clone(), None)["endpoints"][0]["hints"],
            json!({"forZones": [{"name": "a"}]})
        );
        assert_eq!(dropped("discovery.k8s.io", "EndpointSlice", slice.clone(), Some(&slice)), slice);
        let pvc = json!({"spec": {"volumeAttributesClassName": "gold", "dataSourceRef": {"kind": "K", "name": "n", "namespace": "other"}},
            "status": {"currentVolumeAttributesClassName": "gold", "phase": "Bound"}});
        assert_eq!(
            dropped("", "PersistentVolumeClaim", pvc.clone(), None),
            json!({"spec": {}, "status": {"phase": "Bound"}})
        );
        assert_eq!(dropped("", "PersistentVolumeClaim", pvc.clone(), Some(&pvc)), pvc);
        let same_ns = json!({"spec": {"dataSourceRef": {"kind": "K", "name": "n"}}});
        assert_eq!(dropped("", "PersistentVolumeClaim", same_ns.clone(), None), same_ns);
        let lease =
            json!({"spec": {"holderIdentity": "a", "strategy": "OldestEmulationVersion", "preferredHolder": "b"}});
        assert_eq!(
            dropped("coordination.k8s.io", "Lease", lease.clone(), None)["spec"],
            json!({"holderIdentity": "a"})
        );
        let old = json!({"spec": {"strategy": "OldestEmulationVersion"}});
        assert_eq!(
            dropped("coordination.k8s.io", "Lease", lease, Some(&old))["spec"],
            json!({"holderIdentity": "a", "strategy": "OldestEmulationVersion"})
        );
        let driver = json!({"spec": {"nodeAllocatableUpdatePeriodSeconds": 60, "attachRequired": true}});
        assert_eq!(dropped("storage.k8s.io", "CSIDriver", driver, None)["spec"], json!({"attachRequired": true}));
        let cm = json!({"data": {"resources": "x"}});
        assert_eq!(dropped("", "ConfigMap", cm.clone(), None), cm);
    }
}
