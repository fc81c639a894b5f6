//! What kube keeps through an update of a built-in type: fields set once, and the specs of pods,
//! StatefulSets, Jobs, claims and volumes but the few fields each lets change.

use super::*;

/// How kube words a change to a field it keeps once set.
#[derive(Debug, Clone, Copy)]
pub(super) enum Words {
    /// `ValidateImmutableField`: `Invalid value: <new>: field is immutable`.
    Immutable,
    /// `Invalid value: <new>: <why>`.
    Invalid(&'static str),
    /// `Forbidden: <why>`.
    Forbidden(&'static str),
}

/// The fields kube 1.33's validation keeps through updates, by kind: the field's place in the object,
/// the path kube's error names (kube's own, its misspelling included), and kube's words. Kinds with
/// rules beyond one field each have a function (`update_errors`).
pub(super) const KEPT: &[(&str, &str, &str, Words)] = &[
    ("Deployment", "spec.selector", "spec.selector", Words::Immutable),
    ("ReplicaSet", "spec.selector", "spec.selector", Words::Immutable),
    ("DaemonSet", "spec.selector", "spec.selector", Words::Immutable),
    ("Job", "spec.selector", "spec.selector", Words::Immutable),
    ("Job", "spec.completionMode", "spec.completionMode", Words::Immutable),
    ("Job", "spec.podFailurePolicy", "spec.podFailurePolicy", Words::Immutable),
    ("Job", "spec.backoffLimitPerIndex", "spec.backoffLimitPerIndex", Words::Immutable),
    ("Job", "spec.managedBy", "spec.managedBy", Words::Immutable),
    ("Job", "spec.successPolicy", "spec.successPolicy", Words::Immutable),
    ("Secret", "type", "type", Words::Immutable),
    ("PersistentVolumeClaim", "spec.volumeMode", "volumeMode", Words::Immutable),
    ("PersistentVolume", "spec.volumeMode", "volumeMode", Words::Immutable),
    ("RoleBinding", "roleRef", "roleRef", Words::Invalid("cannot change roleRef")),
    ("ClusterRoleBinding", "roleRef", "roleRef", Words::Invalid("cannot change roleRef")),
    ("StorageClass", "parameters", "parameters", Words::Forbidden("updates to parameters are forbidden.")),
    ("StorageClass", "provisioner", "provisioner", Words::Forbidden("updates to provisioner are forbidden.")),
    ("StorageClass", "reclaimPolicy", "reclaimPolicy", Words::Forbidden("updates to reclaimPolicy are forbidden.")),
    ("StorageClass", "volumeBindingMode", "volumeBindingMode", Words::Immutable),
    ("EndpointSlice", "addressType", "addressType", Words::Immutable),
    ("IngressClass", "spec.controller", "spec.controller", Words::Immutable),
    ("PriorityClass", "value", "value", Words::Forbidden("may not be changed in an update.")),
    ("PriorityClass", "preemptionPolicy", "preemptionPolicy", Words::Immutable),
    ("CSIDriver", "spec.attachRequired", "spec.attachedRequired", Words::Immutable),
    ("CSIDriver", "spec.volumeLifecycleModes", "spec.volumeLifecycleModes", Words::Immutable),
    ("VolumeAttachment", "spec", "spec", Words::Immutable),
];

/// The value at a dotted `path` (a null is no value).
pub(super) fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

/// A kept field's new value as kube's message shows it: a selector or role reference as Go shows the
/// struct, nil as
/// `null`, a string quoted, anything else as JSON.
pub(super) fn shown_kept(path: &str, v: Option<&Value>) -> String {
    match v {
        None => "null".to_string(),
        Some(v) if path.ends_with("selector") && v.is_object() => go_selector(v),
        Some(v) if path == "roleRef" => {
            let f = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            format!("rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}", f("apiGroup"), f("kind"), f("name"))
        }
        Some(v) => shown(v),
    }
}

/// kube's checks of an update from `old` to `new` of a built-in `kind` beyond those of the object
/// itself: the fields a type keeps once set (`KEPT`), and the rules of the kinds that keep more (a
/// Pod's and a StatefulSet's spec but a few fields, a Job's template, a claim's and a volume's spec,
/// an immutable ConfigMap's or Secret's data). Run on writes of the object itself, not of its
/// subresources, which kube validates by their own rules.
pub fn update_errors(kind: &str, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (_, field, path, words) in KEPT.iter().filter(|k| k.0 == kind) {
        let (was, is) = (at(old, field), at(new, field));
        if was == is {
            continue;
        }
        match words {
            Words::Immutable => invalid(&mut causes, path.to_string(), shown_kept(path, is), "field is immutable"),
            Words::Invalid(why) => invalid(&mut causes, path.to_string(), shown_kept(path, is), why),
            Words::Forbidden(why) => forbidden(&mut causes, path, why),
        }
    }
    match kind {
        "Pod" => pod_update(old, new, &mut causes),
        "StatefulSet" => statefulset_update(old, new, &mut causes),
        "Job" => job_update(old, new, &mut causes),
        "PersistentVolumeClaim" => claim_update(old, new, &mut causes),
        "PersistentVolume" => volume_update(old, new, &mut causes),
        "CSINode" => csi_node_update(old, new, &mut causes),
        "CSIStorageCapacity" => csi_storage_capacity_update(old, new, &mut causes),
        "IPAddress" => ip_address_update(old, new, &mut causes),
        "ServiceCIDR" => service_cidr_update(old, new, &mut causes),
        // A new `spec.shard` asks for the cluster's objects to be moved there: one move at a time, of
        // a cluster that is Ready (bootstrapped, not being deleted).
        "LogicalCluster" => {
            let target = |o: &Value| crate::shard::target(o).unwrap_or(crate::shard::DEFAULT).to_string();
            if target(old) != target(new) {
                let shown_new = shown(&new["spec"]["shard"]);
                if let Some(to) = crate::shard::moving_to(old) {
                    let why = format!("a move to shard {to:?} is in progress");
                    invalid(&mut causes, "spec.shard".into(), shown_new, &why);
                } else if old["status"]["phase"] != crate::tenancy::PHASE_READY
                    || old["metadata"].get("deletionTimestamp").is_some()
                {
                    invalid(&mut causes, "spec.shard".into(), shown_new, "only a Ready logical cluster can move");
                }
            }
        }
        "ConfigMap" | "Secret" if old["immutable"] == true => {
            let why = "field is immutable when `immutable` is set";
            if new["immutable"] != true {
                forbidden(&mut causes, "immutable", why);
            }
            let fields: &[&str] = if kind == "ConfigMap" { &["data", "binaryData"] } else { &["data"] };
            for f in fields {
                if old.get(*f) != new.get(*f) {
                    forbidden(&mut causes, f, why);
                }
            }
        }
        _ => {}
    }
    causes.truncate(MAX_CAUSES);
    causes
}

/// A spec's fields but those named, by name, for comparing what may not change.
pub(super) fn fields_but<'a>(spec: &'a Value, but: &[&str]) -> std::collections::BTreeMap<&'a str, &'a Value> {
    spec.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !but.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

/// What changed from `old` to `new`, a line per changed leaf (`- path: old`, `+ path: new`), at most
/// `DIFF_LINES` lines: kube appends a diff of the Go structs to its refusals of a changed spec, and a
/// user needs to see which field it was.
pub(super) fn diff(old: &Value, new: &Value) -> String {
    const DIFF_LINES: usize = 20;
    fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<String>) {
        if out.len() >= DIFF_LINES || old == new {
            return;
        }
        let child = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        match (old, new) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for k in keys {
                    walk(&child(k), a.get(k), b.get(k), out);
                }
            }
            (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    walk(&format!("{path}[{i}]"), Some(x), Some(y), out);
                }
            }
            _ => {
                for (sign, v) in [("-", old), ("+", new)] {
                    if let Some(v) = v {
                        out.push(format!("{sign} {path}: {v}"));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk("", Some(old), Some(new), &mut out);
    out.truncate(DIFF_LINES);
    out.join("\n")
}

/// A StatefulSet's spec keeps all but a few fields (kube's `ValidateStatefulSetUpdate`).
pub(super) fn statefulset_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    const MUTABLE: &[&str] = &[
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    ];
    if fields_but(&old["spec"], MUTABLE) != fields_but(&new["spec"], MUTABLE) {
        forbidden(causes, "spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden");
    }
}

/// A Job's completions and template (kube's `ValidateJobSpecUpdate`; its other kept fields are in
/// `KEPT`). A Job suspended before it started may change where its pods go (kube's
/// `AllowMutableSchedulingDirectives`): node affinity, node selector, tolerations, scheduling gates
/// and the template's labels and annotations.
pub(super) fn job_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (was, is) = (at(old, "spec.completions"), at(new, "spec.completions"));
    if was != is {
        if at(new, "spec.completionMode").and_then(Value::as_str) != Some("Indexed") {
            invalid(causes, "spec.completions".into(), shown_kept("", is), "field is immutable");
        } else if is.is_some() && is != at(new, "spec.parallelism") {
            let why = "can only be modified in tandem with spec.parallelism";
            invalid(causes, "spec.completions".into(), shown_kept("", is), why);
        }
    }
    let (was, is) = (&old["spec"]["template"], &new["spec"]["template"]);
    let mut allowed = was.clone();
    let started = at(old, "status.startTime").is_some();
    if old["spec"]["suspend"] == true && !started && allowed.is_object() {
        for (place, field) in [
            ("metadata", "labels"),
            ("metadata", "annotations"),
            ("spec", "nodeSelector"),
            ("spec", "tolerations"),
            ("spec", "schedulingGates"),
        ] {
            set_or_remove(&mut allowed, place, field, is[place].get(field));
        }
        if allowed["spec"].is_object() {
            let node_affinity = is["spec"]["affinity"].get("nodeAffinity").filter(|v| !v.is_null());
            set_or_remove(&mut allowed["spec"], "affinity", "nodeAffinity", node_affinity);
            // An affinity of node affinity alone may go with it.
            if allowed["spec"]["affinity"].as_object().is_some_and(|m| m.is_empty())
                && is["spec"].get("affinity").is_none()
            {
                allowed["spec"].as_object_mut().map(|m| m.remove("affinity"));
            }
        }
    }
    if allowed != *is {
        invalid(causes, "spec.template".into(), is.to_string(), "field is immutable");
    }
}

/// `v[place][field]` set to `to`, or removed when `to` is `None`.
pub(super) fn set_or_remove(v: &mut Value, place: &str, field: &str, to: Option<&Value>) {
    match to {
        Some(to) => {
            if !v.get(place).is_some_and(Value::is_object) {
                v[place] = serde_json::json!({});
            }
            v[place][field] = to.clone();
        }
        None => {
            v.get_mut(place).and_then(Value::as_object_mut).map(|m| m.remove(field));
        }
    }
}

/// A claim's spec is kept but for a volume name or class set once, and a bound claim's size (kube's
/// `ValidatePersistentVolumeClaimUpdate`, with 1.33's `RecoverVolumeExpansionFailure` on: a size may go
/// down, to recover from a failed expansion, but not to what the volume already has).
pub(super) fn claim_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (mut was, mut is) = (old["spec"].clone(), new["spec"].clone());
    if is_empty(was.get("volumeName")) {
        match is.get("volumeName") {
            Some(v) => was["volumeName"] = v.clone(),
            None => {
                was.as_object_mut().map(|m| m.remove("volumeName"));
            }
        }
    }
    if at(&was, "storageClassName").is_none() {
        if let Some(v) = is.get("storageClassName") {
            was["storageClassName"] = v.clone();
        }
    }
    let storage = "resources.requests.storage";
    let (old_size, new_size) = (at(&was, storage).cloned(), at(&is, storage).cloned());
    if at(new, "status.phase").and_then(Value::as_str) == Some("Bound") {
        for spec in [&mut was, &mut is] {
            if let Some(requests) = spec.pointer_mut("/resources/requests").and_then(Value::as_object_mut) {
                requests.remove("storage");
            }
        }
        if at(&is, "volumeAttributesClassName").is_some() {
            was["volumeAttributesClassName"] = is["volumeAttributesClassName"].clone();
        }
    }
    if was != is {
        let why =
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";
        forbidden(causes, "spec", &format!("{why}\n{}", diff(&was, &is)));
    }
    if let (Some(before), Some(now)) = (old_size.as_ref(), new_size.as_ref()) {
        let zero = Value::from(0);
        let capacity = at(new, "status.capacity.storage").unwrap_or(&zero);
        let shrunk = crate::registry::quantity::compare(now, before).is_some_and(|o| o.is_lt());
        if shrunk && crate::registry::quantity::compare(now, capacity).is_some_and(|o| o.is_le()) {
            forbidden(causes, "spec.resources.requests.storage", "field can not be less than status.capacity");
        }
    }
}

/// A volume's source is kept (kube's `ValidatePersistentVolumeUpdate`), but for a CSI volume's
/// expansion secret set once; its node affinity too, once set. kube's exception for node affinity
/// moved from a beta topology label to the GA one is not made.
pub(super) fn volume_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    const NOT_SOURCE: &[&str] = &[
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeAttributesClassName",
        "volumeMode",
    ];
    let mut was = old["spec"].clone();
    if let (Some(secret), Some(csi)) =
        (at(new, "spec.csi.controllerExpandSecretRef"), was.get_mut("csi").and_then(Value::as_object_mut))
    {
        csi.entry("controllerExpandSecretRef").or_insert_with(|| secret.clone());
    }
    let (was, is) = (fields_but(&was, NOT_SOURCE), fields_but(&new["spec"], NOT_SOURCE));
    if was != is {
        let json = |m: std::collections::BTreeMap<&str, &Value>| {
            Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
        };
        let why = format!("spec.persistentvolumesource is immutable after creation\n{}", diff(&json(was), &json(is)));
        forbidden(causes, "spec.persistentvolumesource", &why);
    }
    let (was, is) = (at(old, "spec.nodeAffinity"), at(new, "spec.nodeAffinity"));
    if was.is_some() && was != is {
        let why = "field is immutable, except for updating from beta label to GA";
        invalid(causes, "nodeAffinity".into(), shown_kept("", is), why);
    }
}

/// What a pod's update may change of its spec (kube's `ValidatePodUpdate`): its containers' images,
/// a shorter active deadline, added tolerations (or another `tolerationSeconds`), removed scheduling
/// gates, a negative grace period made 1; while gated, additions to its node selector and its node
/// affinity. Everything else is refused with kube's words and a diff of what changed.
pub(super) fn pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    pod_annotations_update(old, new, causes);
    let (was, is) = (&old["spec"], &new["spec"]);
    for list in ["containers", "initContainers"] {
        let len = |v: &Value| v[list].as_array().map_or(0, Vec::len);
        if len(was) != len(is) {
            return forbidden(causes, &format!("spec.{list}"), "pod updates may not add or remove containers");
        }
    }
    let deadline = "spec.activeDeadlineSeconds".to_string();
    match (was["activeDeadlineSeconds"].as_i64(), is.get("activeDeadlineSeconds").filter(|v| !v.is_null())) {
        (_, Some(v)) if !v.as_i64().is_some_and(|n| (0..=i64::from(i32::MAX)).contains(&n)) => {
            return invalid(causes, deadline, v.to_string(), "must be between 0 and 2147483647, inclusive");
        }
        (Some(before), Some(v)) if v.as_i64() > Some(before) => {
            return invalid(causes, deadline, v.to_string(), "must be less than or equal to previous value");
        }
        (Some(_), None) => {
            invalid(causes, deadline, "null".into(), "must not update from a positive integer to nil value")
        }
        _ => {}
    }
    // Every toleration stays, its `tolerationSeconds` aside. Looked up in sets of their JSON (a map's
    // keys are sorted, so equal values print alike): kube compares each pair, which a pod of many
    // thousand tolerations makes quadratic.
    fn list<'a>(v: &'a Value, field: &str) -> &'a [Value] {
        v[field].as_array().map_or(&[][..], Vec::as_slice)
    }
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        t.as_object_mut().map(|m| m.remove("tolerationSeconds"));
        t.to_string()
    };
    let now: HashSet<String> = list(is, "tolerations").iter().map(without_seconds).collect();
    if list(was, "tolerations").iter().any(|t| !now.contains(&without_seconds(t))) {
        // Reported, and the rest still compared (with the old tolerations, below), as kube does.
        forbidden(causes, "spec.tolerations", "existing toleration can not be modified except its tolerationSeconds");
    }
    let gated: HashSet<String> = list(was, "schedulingGates").iter().map(Value::to_string).collect();
    for (i, g) in list(is, "schedulingGates").iter().enumerate() {
        if !gated.contains(&g.to_string()) {
            let name = g["name"].as_str().unwrap_or_default();
            let why = format!("only deletion is allowed, but found new scheduling gate '{name}'");
            forbidden(causes, &format!("spec.schedulingGates[{i}].name"), &why);
        }
    }
    let mut munged = is.clone();
    let Some(m) = munged.as_object_mut() else { return };
    for list in ["containers", "initContainers"] {
        let images: Vec<Option<Value>> =
            was[list].as_array().into_iter().flatten().map(|c| c.get("image").cloned()).collect();
        for (c, image) in m.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten().zip(images) {
            match (image, c.as_object_mut()) {
                (Some(image), Some(c)) => {
                    c.insert("image".into(), image);
                }
                (None, Some(c)) => {
                    c.remove("image");
                }
                _ => {}
            }
        }
    }
    let mut keep = |field: &str| match was.get(field) {
        Some(v) => {
            m.insert(field.into(), v.clone());
        }
        None => {
            m.remove(field);
        }
    };
    keep("activeDeadlineSeconds");
    keep("tolerations");
    keep("schedulingGates");
    if was["terminationGracePeriodSeconds"].as_i64().is_some_and(|n| n < 0) && is["terminationGracePeriodSeconds"] == 1
    {
        keep("terminationGracePeriodSeconds");
    }
    if !gated.is_empty() {
        let selector = |v: &Value| v["nodeSelector"].as_object().cloned().unwrap_or_default();
        let (before, after) = (selector(was), selector(is));
        if before.iter().any(|(k, v)| after.get(k) != Some(v)) {
            let why = "only additions to spec.nodeSelector are allowed (no mutations or deletions)";
            invalid(causes, "spec.nodeSelector".into(), Value::Object(after).to_string(), why);
        }
        keep("nodeSelector");
        node_affinity_additions(&was["affinity"]["nodeAffinity"], &is["affinity"]["nodeAffinity"], causes);
        let node_affinity = was["affinity"].get("nodeAffinity").filter(|v| !v.is_null());
        if m.get("affinity").is_some_and(Value::is_object) || node_affinity.is_some() {
            let mut affinity = m.get("affinity").cloned().unwrap_or_else(|| serde_json::json!({}));
            match (node_affinity, affinity.as_object_mut()) {
                (Some(n), Some(a)) => {
                    a.insert("nodeAffinity".into(), n.clone());
                }
                (None, Some(a)) => {
                    a.remove("nodeAffinity");
                }
                _ => {}
            }
            if affinity.as_object().is_some_and(|a| a.is_empty()) && was.get("affinity").is_none() {
                m.remove("affinity");
            } else {
                m.insert("affinity".into(), affinity);
            }
        }
    }
    if munged != *was {
        let why = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
        forbidden(causes, "spec", &format!("{why}\n{}", diff(was, &munged)));
    }
}

/// What a gated pod may change of its required node affinity (kube's `validateNodeAffinityMutation`):
/// it may only narrow where the pod goes, by terms' requirements added after those it had; a pod
/// that required nothing may require anything.
fn node_affinity_additions(was: &Value, is: &Value, causes: &mut Vec<Cause>) {
    const TERMS: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let terms =
        |v: &Value| v["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].as_array().cloned();
    if was == is {
        return;
    }
    let Some(before) = terms(was).filter(|t| !t.is_empty()) else { return };
    let after = terms(is).unwrap_or_default();
    if before.len() != after.len() {
        let why = "no additions/deletions to non-empty NodeSelectorTerms list are allowed";
        return invalid(causes, TERMS.into(), Value::Array(after).to_string(), why);
    }
    let list = |t: &Value, f: &str| t[f].as_array().cloned().unwrap_or_default();
    for (i, (old, new)) in before.iter().zip(&after).enumerate() {
        let kept = |f: &str| {
            let (o, n) = (list(old, f), list(new, f));
            o.is_empty() || (n.len() >= o.len() && n[..o.len()] == o[..])
        };
        let was_empty = list(old, "matchExpressions").is_empty() && list(old, "matchFields").is_empty();
        let now_empty = list(new, "matchExpressions").is_empty() && list(new, "matchFields").is_empty();
        if (was_empty && !now_empty) || !kept("matchExpressions") || !kept("matchFields") {
            let why = "only additions are allowed (no mutations or deletions)";
            invalid(causes, format!("{TERMS}[{i}]"), new.to_string(), why);
        }
    }
}

/// What a pod's annotations keep (kube's `ValidatePodSpecificAnnotationUpdates`): its AppArmor
/// annotations and whether it is a mirror pod are fixed at creation, as the kubelet read them then.
fn pod_annotations_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let of = |v: &Value| v["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
    let (was, is) = (of(old), of(new));
    let kept = |k: &str| {
        if k.starts_with("container.apparmor.security.beta.kubernetes.io/") {
            Some("AppArmor annotations")
        } else if k == "kubernetes.io/config.mirror" {
            Some("mirror pod annotation")
        } else {
            None
        }
    };
    for (key, before) in &was {
        if let Some(what) = kept(key).filter(|_| is.get(key) != Some(before)) {
            forbidden(causes, &format!("metadata.annotations[{key}]"), &format!("may not remove or update {what}"));
        }
    }
    for key in is.keys().filter(|k| !was.contains_key(*k)) {
        if let Some(what) = kept(key) {
            forbidden(causes, &format!("metadata.annotations[{key}]"), &format!("may not add {what}"));
        }
    }
}
