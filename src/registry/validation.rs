//! kube's validation of the built-in types beyond what their schema's types say (kube 1.33's
//! `pkg/apis/core/validation` and `pkg/apis/apps/validation`), for the checks clients and operators
//! meet: a pod spec's containers (names, images, ports), its restart and DNS policies, a workload's
//! selector and template labels, a Service's type and ports, ConfigMap and Secret keys. Each check is
//! keyed by the Go struct it belongs to and runs wherever that struct appears (a Pod's spec and every
//! template's alike), by a walk along the schema (`proto::visit`), with kube's field paths and words.
//!
//! Also: probes' and lifecycle hooks' handlers, requests against limits, volumes and their mounts,
//! environment variables, port names, node selector and affinity terms, user and group IDs, resource
//! names, the common volume sources' fields and file lists, topology spread constraints, privilege
//! escalation kept off with privileges, workloads' restart policies, Role rules, Ingress paths and
//! backends, and on
//! updates what each type keeps once set (`update_errors`). As in kube, a StatefulSet's template is
//! checked for its labels and restart policy only.
//!
//! Not checked: rarer rules (seccomp and AppArmor profiles, the cloud and CSI volume sources' own
//! fields, label keys inside affinity and spread terms), which kube refuses and kgate stores; nor
//! kube-apiserver's `--allow-privileged`, off by default there and on in every cluster tool's setup.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::meta;
use crate::proto::visit::Path;
use crate::status::{cause, Cause};

/// The kinds holding a checked struct; other kinds are not walked at all.
const CHECKED: &[&str] = &[
    "Pod",
    "PodTemplate",
    "ReplicationController",
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "Job",
    "CronJob",
    "Service",
    "ConfigMap",
    "Secret",
    "Role",
    "ClusterRole",
    "Ingress",
];

/// Causes reported at most: an object of a hundred thousand empty containers (a few bytes each as
/// sent) must not make an answer of megabytes. kube lists them all; the first ones tell the client
/// what is wrong.
const MAX_CAUSES: usize = 256;

/// The protocols a port may name (kube's `supportedPortProtocols`, listed sorted as kube lists a set).
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// kube's checks of `obj`, an object of the built-in `api_version`/`kind` (defaulted already, as kube
/// validates after defaulting).
pub fn errors(api_version: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    if !CHECKED.contains(&kind) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    // Their checks are of their own top-level keys: no walk, so no copy of what may be a megabyte.
    if let ("v1", "ConfigMap" | "Secret", Some(map)) = (api_version, kind, obj.as_object()) {
        let name = if kind == "ConfigMap" { "core.v1.ConfigMap" } else { "core.v1.Secret" };
        check(name, map, &Path::default(), &mut causes);
        return causes;
    }
    if let ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") = (api_version, kind) {
        for (i, rule) in obj["rules"].as_array().into_iter().flatten().enumerate().take(MAX_CAUSES) {
            policy_rule(rule, &format!("rules[{i}]"), kind == "Role", &mut causes);
        }
        causes.truncate(MAX_CAUSES);
        return causes;
    }
    // The walk makes nothing (a budget of 0), so the copy is only what the walk's signature asks for.
    // kube validates a StatefulSet's template by its labels alone (its pods' mounts name the claim
    // templates, which are no volumes of the template's); the restart policy is checked with the spec.
    let statefulset = kind == "StatefulSet";
    crate::proto::visit::visit_structs(api_version, kind, &mut obj.clone(), 0, &mut |name, map, path| {
        if causes.len() < MAX_CAUSES && !(statefulset && path.render().starts_with("spec.template")) {
            check(name, map, path, &mut causes)
        }
    });
    causes.truncate(MAX_CAUSES);
    causes
}

/// How kube words a change to a field it keeps once set.
#[derive(Debug, Clone, Copy)]
enum Words {
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
const KEPT: &[(&str, &str, &str, Words)] = &[
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
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

/// A kept field's new value as kube's message shows it: a selector or role reference as Go shows the
/// struct, nil as
/// `null`, a string quoted, anything else as JSON.
fn shown_kept(path: &str, v: Option<&Value>) -> String {
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

fn duplicate(causes: &mut Vec<Cause>, at: &str, value: &str) {
    causes.push(cause("FieldValueDuplicate", at, format!("Duplicate value: {value:?}")));
}

/// A name that must be a DNS-1123 label.
fn dns_label(causes: &mut Vec<Cause>, at: String, name: &str) {
    if let Err(why) = meta::validate_dns1123_label(name) {
        invalid(causes, at, format!("{name:?}"), &why);
    }
}

/// Exactly one of `kinds` set (a volume's source, a probe's handler): the first kept, the others
/// refused in the struct's order; `what` names them in kube's words.
fn exactly_one(map: &Map<String, Value>, path: &Path, kinds: &[&str], what: &str, causes: &mut Vec<Cause>) {
    let mut set = kinds.iter().filter(|k| map.get(**k).is_some_and(|v| !v.is_null()));
    if set.next().is_none() {
        causes.push(cause("FieldValueRequired", &path.render(), format!("Required value: must specify a {what}")));
    }
    for extra in set {
        forbidden(causes, &path.child(extra), &format!("may not specify more than 1 {what}"));
    }
}

fn forbidden(causes: &mut Vec<Cause>, at: &str, why: &str) {
    causes.push(cause("FieldValueForbidden", at, format!("Forbidden: {why}")));
}

/// A spec's fields but those named, by name, for comparing what may not change.
fn fields_but<'a>(spec: &'a Value, but: &[&str]) -> std::collections::BTreeMap<&'a str, &'a Value> {
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
fn diff(old: &Value, new: &Value) -> String {
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
fn statefulset_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
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
fn job_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
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
fn set_or_remove(v: &mut Value, place: &str, field: &str, to: Option<&Value>) {
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
fn claim_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
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
        let shrunk = super::quantity::compare(now, before).is_some_and(|o| o.is_lt());
        if shrunk && super::quantity::compare(now, capacity).is_some_and(|o| o.is_le()) {
            forbidden(causes, "spec.resources.requests.storage", "field can not be less than status.capacity");
        }
    }
}

/// A volume's source is kept (kube's `ValidatePersistentVolumeUpdate`), but for a CSI volume's
/// expansion secret set once; its node affinity too, once set. kube's exception for node affinity
/// moved from a beta topology label to the GA one is not made.
fn volume_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
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
fn pod_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
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

fn check(name: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match name {
        "core.v1.PodSpec" => pod_spec(map, path, causes),
        "core.v1.Container" => container(map, path, causes),
        "core.v1.ContainerPort" => container_port(map, path, causes),
        // Inline in a Probe: visited with the probe's fields, at its path.
        "core.v1.ProbeHandler" => {
            exactly_one(map, path, &["exec", "httpGet", "tcpSocket", "grpc"], "handler type", causes)
        }
        "core.v1.LifecycleHandler" => {
            exactly_one(map, path, &["exec", "httpGet", "tcpSocket", "sleep"], "handler type", causes)
        }
        "core.v1.ResourceRequirements" => resources(map, path, causes),
        "core.v1.ServiceSpec" => service_spec(map, path, causes),
        "core.v1.ServicePort" => service_port(map, path, causes),
        "core.v1.NodeSelector" if is_empty(map.get("nodeSelectorTerms")) => {
            let at = path.child("nodeSelectorTerms");
            causes.push(cause("FieldValueRequired", &at, "Required value: must have at least one node selector term"));
        }
        "core.v1.NodeSelectorRequirement" => node_selector_requirement(map, path, causes),
        "core.v1.PodAffinityTerm" if is_empty(map.get("topologyKey")) => {
            causes.push(cause("FieldValueRequired", &path.child("topologyKey"), "Required value: can not be empty"));
        }
        "core.v1.WeightedPodAffinityTerm" | "core.v1.PreferredSchedulingTerm" => {
            if let Some(w) = map.get("weight").and_then(Value::as_i64).filter(|w| !(1..=100).contains(w)) {
                invalid(causes, path.child("weight"), w.to_string(), "must be in the range 1-100");
            }
        }
        "core.v1.TopologySpreadConstraint" => spread_constraint(map, path, causes),
        "networking.v1.HTTPIngressPath" => ingress_path(map, path, causes),
        "networking.v1.IngressBackend" => ingress_backend(map, path, causes),
        // User and group IDs (kube's `IsValidUserID` and `IsValidGroupID`); a container's escalation
        // kept off while it is privileged or adds CAP_SYS_ADMIN (shown as JSON, where kube shows the
        // Go struct with its pointers' addresses).
        "core.v1.PodSecurityContext" | "core.v1.SecurityContext" => {
            for field in ["runAsUser", "runAsGroup", "fsGroup"] {
                ids(map.get(field).into_iter(), &path.child(field), false, causes);
            }
            if map.get("allowPrivilegeEscalation") == Some(&Value::Bool(false)) {
                let shown = || Value::Object(map.clone()).to_string();
                if map.get("privileged") == Some(&Value::Bool(true)) {
                    let why = "cannot set `allowPrivilegeEscalation` to false and `privileged` to true";
                    invalid(causes, path.render(), shown(), why);
                }
                let added = map.get("capabilities").and_then(|c| c.get("add")).and_then(Value::as_array);
                if added.into_iter().flatten().any(|c| c == "CAP_SYS_ADMIN") {
                    let why = "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN";
                    invalid(causes, path.render(), shown(), why);
                }
            }
            ids(
                map.get("supplementalGroups").and_then(Value::as_array).into_iter().flatten(),
                &path.child("supplementalGroups"),
                true,
                causes,
            );
        }
        "core.v1.ConfigMapVolumeSource" => {
            if is_empty(map.get("name")) {
                required(causes, path.child("name"));
            }
            file_mode(map, "defaultMode", path, causes);
        }
        "core.v1.SecretVolumeSource" => {
            if is_empty(map.get("secretName")) {
                required(causes, path.child("secretName"));
            }
            file_mode(map, "defaultMode", path, causes);
        }
        "core.v1.ProjectedVolumeSource" | "core.v1.DownwardAPIVolumeSource" => {
            file_mode(map, "defaultMode", path, causes)
        }
        "core.v1.PersistentVolumeClaimVolumeSource" if is_empty(map.get("claimName")) => {
            required(causes, path.child("claimName"))
        }
        "core.v1.HostPathVolumeSource" if is_empty(map.get("path")) => required(causes, path.child("path")),
        "core.v1.NFSVolumeSource" => {
            for field in ["server", "path"] {
                if is_empty(map.get(field)) {
                    required(causes, path.child(field));
                }
            }
        }
        "core.v1.KeyToPath" => key_to_path(map, path, causes),
        // kube's words name a ReplicaSet's selector as a Deployment's.
        "apps.v1.DeploymentSpec" | "apps.v1.ReplicaSetSpec" => workload_spec("deployment", map, path, causes),
        "apps.v1.DaemonSetSpec" => workload_spec("daemonset", map, path, causes),
        "apps.v1.StatefulSetSpec" => workload_spec("statefulset", map, path, causes),
        "batch.v1.JobSpec" => {
            let at = format!("{}.spec", path.child("template"));
            let spec = map.get("template").and_then(|t| t.get("spec")).and_then(Value::as_object);
            if let Some(spec) = spec {
                one_of_at(spec, "restartPolicy", &at, &["OnFailure", "Never"], causes);
            }
        }
        // Inline in a Volume: visited with the volume's fields, at its path.
        "core.v1.VolumeSource" => volume_source(map, path, causes),
        "core.v1.ConfigMap" => {
            for field in ["data", "binaryData"] {
                config_keys(map, field, path, causes);
            }
        }
        "core.v1.Secret" => config_keys(map, "data", path, causes),
        _ => {}
    }
}

fn required(causes: &mut Vec<Cause>, at: String) {
    causes.push(cause("FieldValueRequired", &at, "Required value"));
}

fn invalid(causes: &mut Vec<Cause>, at: String, shown: String, why: &str) {
    causes.push(cause("FieldValueInvalid", &at, format!("Invalid value: {shown}: {why}")));
}

/// Go's `%q` of a string, or the JSON of anything else.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn not_supported(causes: &mut Vec<Cause>, at: String, value: &Value, supported: &[&str]) {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    let message = format!("Unsupported value: {}: supported values: {}", shown(value), list.join(", "));
    causes.push(cause("FieldValueNotSupported", &at, message));
}

/// A string field that must be one of `supported` (and is required: defaults have filled it if the
/// client left it out).
fn one_of(map: &Map<String, Value>, field: &str, path: &Path, supported: &[&str], causes: &mut Vec<Cause>) {
    one_of_at(map, field, &path.render(), supported, causes)
}

/// `one_of` of the struct at `at`, a path already rendered.
fn one_of_at(map: &Map<String, Value>, field: &str, at: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    let place = || if at.is_empty() { field.to_string() } else { format!("{at}.{field}") };
    match map.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => required(causes, place()),
        Some(Value::String(s)) if supported.contains(&s.as_str()) => {}
        Some(v) => not_supported(causes, place(), v, supported),
    }
}

/// A port number, if set: 1 to 65535 (kube's `IsValidPortNum`); 0 passes where kube takes it as unset
/// (`zero_unset`: a host port, or a container port whose absence is reported as Required).
fn port_number(map: &Map<String, Value>, field: &str, path: &Path, zero_unset: bool, causes: &mut Vec<Cause>) {
    let checked = |n: &i64| !((1..=65535).contains(n) || zero_unset && *n == 0);
    if let Some(n) = map.get(field).and_then(Value::as_i64).filter(checked) {
        invalid(causes, path.child(field), n.to_string(), "must be between 1 and 65535, inclusive");
    }
}

fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn pod_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("containers")) {
        required(causes, path.child("containers"));
    }
    // Names are unique across the pod's containers and init containers: kube checks the containers
    // first, then the init containers against them (an empty name is only Required, in `container`).
    let mut seen = HashSet::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in map.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(name) = c.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
            if !seen.insert(name) {
                let at = format!("{}[{i}].name", path.child(list));
                duplicate(causes, &at, name);
            }
        }
    }
    one_of(map, "restartPolicy", path, &["Always", "OnFailure", "Never"], causes);
    one_of(map, "dnsPolicy", path, &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], causes);
    volumes_and_mounts(map, path, causes);
}

/// A pod's volumes, named uniquely, and its containers' mounts of them (kube's `ValidateVolumes` and
/// `validateVolumeMounts`): each mount names a volume of the pod, at a path given once per container.
fn volumes_and_mounts(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let mut volumes = HashSet::new();
    for (i, v) in map.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{}[{i}].name", path.child("volumes"));
        match v.get("name").and_then(Value::as_str) {
            None | Some("") => required(causes, at),
            Some(name) => {
                dns_label(causes, at.clone(), name);
                if !volumes.insert(name) {
                    duplicate(causes, &at, name);
                }
            }
        }
    }
    for list in ["containers", "initContainers"] {
        for (c, container) in map.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let mut paths = HashSet::new();
            let mounts = container.get("volumeMounts").and_then(Value::as_array);
            for (m, mount) in mounts.into_iter().flatten().enumerate() {
                let at = format!("{}[{c}].volumeMounts[{m}]", path.child(list));
                match mount.get("name").and_then(Value::as_str) {
                    None | Some("") => required(causes, format!("{at}.name")),
                    Some(name) if !volumes.contains(name) => {
                        causes.push(cause("FieldValueNotFound", &format!("{at}.name"), format!("Not found: {name:?}")))
                    }
                    Some(_) => {}
                }
                match mount.get("mountPath").and_then(Value::as_str) {
                    None | Some("") => required(causes, format!("{at}.mountPath")),
                    Some(p) if !paths.insert(p) => {
                        invalid(causes, format!("{at}.mountPath"), format!("{p:?}"), "must be unique")
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// A volume's source: exactly one (kube's `validateVolumeSource`).
fn volume_source(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    exactly_one(map, path, &crate::proto::visit::field_names("core.v1.VolumeSource"), "volume type", causes);
}

fn container(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match map.get("name").and_then(Value::as_str) {
        None | Some("") => required(causes, path.child("name")),
        Some(name) => {
            dns_label(causes, path.child("name"), name);
        }
    }
    if is_empty(map.get("image")) {
        required(causes, path.child("image"));
    }
    let mut names = HashSet::new();
    for (i, port) in map.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(name) = port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
        if port_name_errors(name).is_empty() && !names.insert(name) {
            let at = format!("{}[{i}].name", path.child("ports"));
            duplicate(causes, &at, name);
        }
    }
    for (i, var) in map.get("env").and_then(Value::as_array).into_iter().flatten().enumerate() {
        env_var(var, &format!("{}[{i}]", path.child("env")), causes);
    }
}

/// One environment variable (kube's `validateEnv`, with 1.33's relaxed names): a name of printable
/// ASCII but '=', and a value or exactly one source.
fn env_var(var: &Value, at: &str, causes: &mut Vec<Cause>) {
    match var.get("name").and_then(Value::as_str) {
        None | Some("") => required(causes, format!("{at}.name")),
        Some(name) if name.bytes().any(|b| !(0x20..=0x7e).contains(&b) || b == b'=') => invalid(
            causes,
            format!("{at}.name"),
            format!("{name:?}"),
            "a valid environment variable name must consist only of printable ASCII characters other than '='",
        ),
        Some(_) => {}
    }
    let Some(from) = var.get("valueFrom").filter(|v| !v.is_null()) else { return };
    const SOURCES: &[&str] = &["fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"];
    let sources = SOURCES.iter().filter(|s| from.get(**s).is_some_and(|v| !v.is_null())).count();
    let at = format!("{at}.valueFrom");
    if sources == 0 {
        let why = "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`";
        invalid(causes, at.clone(), "\"\"".into(), why);
    }
    if sources > 0 && !is_empty(var.get("value")) {
        invalid(causes, at.clone(), "\"\"".into(), "may not be specified when `value` is not empty");
    }
    if sources > 1 {
        invalid(causes, at, "\"\"".into(), "may not have more than one field specified at a time");
    }
}

/// A container's (or a pod's) requests and limits (kube's `validateResourceRequirements`): none
/// negative; a request within its limit; hugepages and extended resources, which cannot be
/// overcommitted, requested exactly at their limit and in whole units.
fn resources(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let quantities = |f: &str| map.get(f).and_then(Value::as_object);
    // A resource kube schedules by a node's exact amount: hugepages, and extended resources (a
    // domain-qualified name outside kubernetes.io).
    let exact = |name: &str| {
        name.starts_with("hugepages-")
            || name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
    };
    let extended = |name: &str| !name.starts_with("hugepages-") && exact(name);
    let (lim_path, req_path) = (path.child("limits"), path.child("requests"));
    for (field, at) in [("limits", &lim_path), ("requests", &req_path)] {
        for (name, q) in quantities(field).into_iter().flatten() {
            // kube's `validateContainerResourceName`: a standard resource or an extended one.
            let standard =
                matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
            if !standard && !extended(name) {
                let why = "must be a standard resource for containers";
                invalid(causes, format!("{at}[{name}]"), format!("{name:?}"), why);
            }
            let Some(v) = super::quantity::value(q) else { continue };
            if v < 0.0 {
                invalid(causes, format!("{at}[{name}]"), shown(q), "must be greater than or equal to 0");
            } else if extended(name) && v.fract() != 0.0 {
                invalid(causes, format!("{at}[{name}]"), shown(q), "must be an integer");
            }
        }
    }
    let limits = quantities("limits");
    for (name, q) in quantities("requests").into_iter().flatten() {
        match limits.and_then(|l| l.get(name)) {
            Some(l) => {
                let Some(order) = super::quantity::compare(q, l) else { continue };
                let l = l.as_str().map_or_else(|| l.to_string(), str::to_string);
                if exact(name) && order.is_ne() {
                    invalid(causes, req_path.clone(), shown(q), &format!("must be equal to {name} limit of {l}"));
                } else if order.is_gt() {
                    let why = format!("must be less than or equal to {name} limit of {l}");
                    invalid(causes, req_path.clone(), shown(q), &why);
                }
            }
            None if exact(name) => causes.push(cause(
                "FieldValueRequired",
                &lim_path,
                "Required value: Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
}

fn container_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("containerPort")) {
        required(causes, path.child("containerPort"));
    }
    if let Some(name) = map.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        for why in port_name_errors(name) {
            invalid(causes, path.child("name"), format!("{name:?}"), why);
        }
    }
    port_number(map, "containerPort", path, true, causes);
    port_number(map, "hostPort", path, true, causes);
    one_of(map, "protocol", path, PROTOCOLS, causes);
}

fn service_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    one_of(map, "type", path, TYPES, causes);
    let headless = map.get("clusterIP").and_then(Value::as_str) == Some("None");
    let external = map.get("type").and_then(Value::as_str) == Some("ExternalName");
    let ports = map.get("ports").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if ports.is_empty() && !headless && !external {
        required(causes, path.child("ports"));
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(name) = p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
        if !names.insert(name) {
            let at = format!("{}[{i}].name", path.child("ports"));
            duplicate(causes, &at, name);
        }
    }
    // With more than one port, each is named (kube: the names tell the ports apart in Endpoints).
    if ports.len() > 1 {
        for (i, p) in ports.iter().enumerate() {
            if is_empty(p.get("name")) {
                required(causes, format!("{}[{i}].name", path.child("ports")));
            }
        }
    }
}

fn service_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    port_number(map, "port", path, false, causes);
    one_of(map, "protocol", path, PROTOCOLS, causes);
    if let Some(name) = map.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        dns_label(causes, path.child("name"), name);
    }
    // A number, or the name of a port of the pods.
    match map.get("targetPort") {
        Some(Value::String(name)) => {
            for why in port_name_errors(name) {
                invalid(causes, path.child("targetPort"), format!("{name:?}"), why);
            }
        }
        Some(Value::Number(_)) => port_number(map, "targetPort", path, false, causes),
        _ => {}
    }
}

/// What is wrong with a port's name (kube's `IsValidPortName`, an IANA service name).
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut why = Vec::new();
    if name.len() > 15 {
        why.push("must be no more than 15 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        why.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        why.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        why.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        why.push("must not begin or end with a hyphen");
    }
    why
}

/// A topology spread constraint (kube's `validateTopologySpreadConstraints`): a positive skew and
/// minimum of domains, a topology key, a known action.
fn spread_constraint(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    for field in ["maxSkew", "minDomains"] {
        if let Some(n) = map.get(field).and_then(Value::as_i64).filter(|n| *n <= 0) {
            invalid(causes, path.child(field), n.to_string(), "must be greater than zero");
        }
    }
    if is_empty(map.get("topologyKey")) {
        causes.push(cause("FieldValueRequired", &path.child("topologyKey"), "Required value: can not be empty"));
    }
    one_of(map, "whenUnsatisfiable", path, &["DoNotSchedule", "ScheduleAnyway"], causes);
}

/// User or group IDs, each within 0 to 2^31-1 (`indexed`: a list, each reported at its index).
fn ids<'a>(values: impl Iterator<Item = &'a Value>, at: &str, indexed: bool, causes: &mut Vec<Cause>) {
    for (i, v) in values.enumerate() {
        let Some(n) = v.as_i64().filter(|n| !(0..=i64::from(i32::MAX)).contains(n)) else { continue };
        let at = if indexed { format!("{at}[{i}]") } else { at.to_string() };
        invalid(causes, at, n.to_string(), "must be between 0 and 2147483647, inclusive");
    }
}

/// A file mode kube writes a projected file with: 0 to 0777.
fn file_mode(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(mode) = map.get(field).and_then(Value::as_i64).filter(|m| !(0..=0o777).contains(m)) {
        invalid(
            causes,
            path.child(field),
            mode.to_string(),
            "must be a number between 0 and 0777 (octal), both inclusive",
        );
    }
}

/// One item of a ConfigMap's, Secret's or projection's file list (kube's `validateKeyToPathList`): a
/// key, a relative path that stays below the volume, a file mode.
fn key_to_path(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("key")) {
        required(causes, path.child("key"));
    }
    match map.get("path").and_then(Value::as_str) {
        None | Some("") => required(causes, path.child("path")),
        Some(p) => {
            if p.starts_with('/') {
                invalid(causes, path.child("path"), format!("{p:?}"), "must be a relative path");
            }
            if p.split('/').any(|part| part == "..") {
                invalid(causes, path.child("path"), format!("{p:?}"), "must not contain '..'");
            }
        }
    }
    file_mode(map, "mode", path, causes);
}

/// An Ingress rule's path (kube's `validateHTTPIngressPath`): a path type, and a path that is absolute
/// and, for `Exact` and `Prefix`, free of what would escape it.
fn ingress_path(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let p = map.get("path").and_then(Value::as_str).unwrap_or_default();
    let at = path.child("path");
    match map.get("pathType").and_then(Value::as_str) {
        None | Some("") => causes.push(cause(
            "FieldValueRequired",
            &path.child("pathType"),
            "Required value: pathType must be specified",
        )),
        Some("Exact" | "Prefix") => {
            if !p.starts_with('/') {
                invalid(causes, at.clone(), format!("{p:?}"), "must be an absolute path");
            }
            for bad in ["//", "/./", "/../", "%2f", "%2F"] {
                if p.contains(bad) {
                    invalid(causes, at.clone(), format!("{p:?}"), &format!("must not contain '{bad}'"));
                }
            }
            for bad in ["/..", "/."] {
                if p.ends_with(bad) {
                    invalid(causes, at.clone(), format!("{p:?}"), &format!("cannot end with '{bad}'"));
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !p.is_empty() && !p.starts_with('/') {
                invalid(causes, at, format!("{p:?}"), "must be an absolute path");
            }
        }
        Some(_) => one_of(map, "pathType", path, &["Exact", "ImplementationSpecific", "Prefix"], causes),
    }
}

/// Where an Ingress sends traffic (kube's `validateIngressBackend`): a Service by name and one port,
/// or a resource, not both.
fn ingress_backend(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let set = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    let here = path.render();
    match (set("resource"), map.get("service").filter(|v| !v.is_null())) {
        (true, Some(_)) => invalid(causes, here, "\"\"".into(), "cannot set both resource and service backends"),
        (true, None) => {}
        (false, Some(service)) => {
            let at = path.child("service");
            match service.get("name").and_then(Value::as_str) {
                None | Some("") => required(causes, format!("{at}.name")),
                Some(name) => {
                    dns_label(causes, format!("{at}.name"), name);
                }
            }
            let port = &service["port"];
            let name = port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
            let number = port.get("number").and_then(Value::as_i64).filter(|n| *n != 0);
            match (name, number) {
                (Some(_), Some(_)) => invalid(causes, here, "\"\"".into(), "cannot set both port name & port number"),
                (Some(name), None) => {
                    for why in port_name_errors(name) {
                        invalid(causes, format!("{at}.port.name"), format!("{name:?}"), why);
                    }
                }
                (None, Some(n)) if !(1..=65535).contains(&n) => invalid(
                    causes,
                    format!("{at}.port.number"),
                    n.to_string(),
                    "must be between 1 and 65535, inclusive",
                ),
                (None, Some(_)) => {}
                (None, None) => causes.push(cause(
                    "FieldValueRequired",
                    &format!("{at}.port.name"),
                    "Required value: port name or number is required",
                )),
            }
        }
        (false, None) => invalid(causes, here, "\"\"".into(), "resource or service backend is required"),
    }
}

/// One rule of a Role or ClusterRole (kube's `ValidatePolicyRule`): verbs, and either non-resource
/// URLs (a ClusterRole's only) or API groups and resources.
fn policy_rule(rule: &Value, at: &str, namespaced: bool, causes: &mut Vec<Cause>) {
    let list = |f: &str| rule.get(f).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if list("verbs").is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            &format!("{at}.verbs"),
            "Required value: verbs must contain at least one value",
        ));
    }
    let urls = list("nonResourceURLs");
    if !urls.is_empty() {
        // Go's `%#v` of the list.
        let shown = format!("[]string{{{}}}", urls.iter().map(shown).collect::<Vec<_>>().join(", "));
        if namespaced {
            invalid(
                causes,
                format!("{at}.nonResourceURLs"),
                shown.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            );
        }
        if !list("apiGroups").is_empty() || !list("resources").is_empty() || !list("resourceNames").is_empty() {
            let why = "rules cannot apply to both regular resources and non-resource URLs";
            invalid(causes, format!("{at}.nonResourceURLs"), shown, why);
        }
        return;
    }
    if list("apiGroups").is_empty() {
        let why = "Required value: resource rules must supply at least one api group";
        causes.push(cause("FieldValueRequired", &format!("{at}.apiGroups"), why));
    }
    if list("resources").is_empty() {
        let why = "Required value: resource rules must supply at least one resource";
        causes.push(cause("FieldValueRequired", &format!("{at}.resources"), why));
    }
}

/// One term of a node selector (kube's `ValidateNodeSelectorRequirement`): values as its operator
/// wants them.
fn node_selector_requirement(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let values = map.get("values").and_then(Value::as_array).map_or(0, Vec::len);
    let at = path.child("values");
    match map.get("operator").and_then(Value::as_str) {
        Some("In" | "NotIn") if values == 0 => causes.push(cause(
            "FieldValueRequired",
            &at,
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        )),
        Some("Exists" | "DoesNotExist") if values > 0 => {
            forbidden(causes, &at, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        }
        Some("Gt" | "Lt") if values != 1 => causes.push(cause(
            "FieldValueRequired",
            &at,
            "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        Some("In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt") => {}
        _ => {
            const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
            let op = map.get("operator").cloned().unwrap_or(Value::String(String::new()));
            not_supported(causes, path.child("operator"), &op, OPERATORS);
        }
    }
}

/// A Deployment's, ReplicaSet's, DaemonSet's or StatefulSet's spec (`what`, as kube's words name it): a
/// selector that selects, and the template it selects.
fn workload_spec(what: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
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
fn go_selector(v: &Value) -> String {
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

/// The keys of a ConfigMap's or Secret's `field`: kube's `IsConfigMapKey`, each failing rule its own
/// error at `field[key]`.
fn config_keys(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    const PATTERN: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    for key in map.get(field).and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
        let mut why = Vec::new();
        if key.len() > 253 {
            why.push("must be no more than 253 characters");
        }
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
            why.push(PATTERN);
        }
        match key.as_str() {
            "." => why.push("must not be '.'"),
            ".." => why.push("must not be '..'"),
            k if k.starts_with("..") => why.push("must not start with '..'"),
            _ => {}
        }
        for w in why {
            invalid(causes, format!("{}[{key}]", path.child(field)), format!("{key:?}"), w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds_all(got: &[String], wants: &[&str]) {
        for want in wants {
            assert!(got.iter().any(|g| g == want), "{want} in {got:?}");
        }
    }

    fn messages(api_version: &str, kind: &str, obj: Value) -> Vec<String> {
        errors(api_version, kind, &obj).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn a_pod_spec_is_checked_wherever_it_is() {
        let spec = json!({"containers": [{"name": "Web", "ports": [{"containerPort": 70000, "protocol": "TCP"}]},
            {"name": "sidecar", "image": "busybox"}], "initContainers": [{"name": "sidecar", "image": "x"}],
            "restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst"});
        let pod = json!({"metadata": {"name": "p"}, "spec": spec});
        let got = messages("v1", "Pod", pod);
        holds_all(
            &got,
            &[
                "spec.initContainers[0].name: Duplicate value: \"sidecar\"",
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.containers[0].image: Required value",
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ],
        );
        assert!(got
            .iter()
            .any(|g| g.starts_with("spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label")));
        let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}});
        assert_eq!(messages("apps/v1", "Deployment", deploy), ["spec.template.spec.containers: Required value"]);
    }

    #[test]
    fn a_workload_selects_its_template() {
        let deploy = |selector: Value| {
            json!({"spec": {"replicas": -1, "selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        };
        let got = messages("apps/v1", "Deployment", deploy(json!({"matchLabels": {"app": "db"}})));
        assert_eq!(
            got,
            [
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
            ]
        );
        let got = messages("apps/v1", "Deployment", deploy(json!({})));
        assert_eq!(got[1], "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment");
        let rs = json!({"spec": {"selector": {"matchLabels": {}}, "template": {}}});
        assert!(messages("apps/v1", "ReplicaSet", rs)[0].ends_with("empty selector is invalid for deployment"));
        let got = messages("apps/v1", "Deployment", deploy(json!({"matchLabels": {"app": "web"}})));
        assert_eq!(got.len(), 1, "only replicas: {got:?}");
    }

    #[test]
    fn what_an_update_may_not_change() {
        let deploy = |app: &str| json!({"spec": {"selector": {"matchLabels": {"app": app}}}});
        let got: Vec<String> = update_errors("Deployment", &deploy("web"), &deploy("api"))
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(got, ["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"api\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]);
        assert!(update_errors("Deployment", &deploy("web"), &deploy("web")).is_empty());
        let cm = |v: &str, immutable: bool| json!({"immutable": immutable, "data": {"k": v}});
        assert!(update_errors("ConfigMap", &cm("a", false), &cm("b", true)).is_empty(), "not immutable yet");
        let got: Vec<String> =
            update_errors("ConfigMap", &cm("a", true), &cm("b", false)).into_iter().map(|c| c.field).collect();
        assert_eq!(got, ["immutable", "data"]);
        let secret = |t: &str| json!({"type": t});
        assert_eq!(update_errors("Secret", &secret("Opaque"), &secret("kubernetes.io/tls"))[0].field, "type");
    }

    fn update_messages(kind: &str, old: &Value, new: &Value) -> Vec<String> {
        update_errors(kind, old, new).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    #[test]
    fn kept_fields_in_kubes_words() {
        let rb = |role: &str| json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}});
        assert_eq!(
            update_messages("RoleBinding", &rb("view"), &rb("admin")),
            ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"admin\"}: cannot change roleRef"]
        );
        let sc =
            |p: &str, mode: &str| json!({"provisioner": p, "volumeBindingMode": mode, "parameters": {"type": "gp3"}});
        assert_eq!(
            update_messages("StorageClass", &sc("a", "Immediate"), &sc("b", "WaitForFirstConsumer")),
            [
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable"
            ]
        );
        let csi = |attach: bool| json!({"spec": {"attachRequired": attach, "podInfoOnMount": attach}});
        assert_eq!(
            update_messages("CSIDriver", &csi(true), &csi(false)),
            ["spec.attachedRequired: Invalid value: false: field is immutable"],
            "kube's misspelt path; podInfoOnMount may change"
        );
        let pc = |v: i64| json!({"value": v});
        assert_eq!(
            update_messages("PriorityClass", &pc(1), &pc(2)),
            ["value: Forbidden: may not be changed in an update."]
        );
        assert!(update_messages("PriorityClass", &pc(1), &pc(1)).is_empty());
    }

    #[test]
    fn a_statefulset_and_a_job_keep_their_specs() {
        let sts = |replicas: i64, size: &str| {
            json!({"spec": {"replicas": replicas, "serviceName": "db", "template": {"metadata": {"labels": {"a": "b"}}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": size}}}}]}})
        };
        assert!(update_messages("StatefulSet", &sts(1, "1Gi"), &sts(3, "1Gi")).is_empty(), "replicas may change");
        assert_eq!(
            update_messages("StatefulSet", &sts(1, "1Gi"), &sts(1, "2Gi")),
            ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
        );
        let job = |suspend: bool, selector: &str, image: &str| {
            json!({"spec": {"suspend": suspend, "completions": 3, "selector": {"matchLabels": {"j": "x"}},
                "template": {"metadata": {"labels": {"j": "x"}},
                    "spec": {"nodeSelector": {"zone": selector}, "containers": [{"name": "c", "image": image}]}}}})
        };
        let got = update_messages("Job", &job(false, "a", "x"), &job(false, "b", "x"));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("spec.template: Invalid value: {") && got[0].ends_with("}: field is immutable"),
            "{got:?}"
        );
        assert!(
            update_messages("Job", &job(true, "a", "x"), &job(true, "b", "x")).is_empty(),
            "a suspended job not yet started may move its pods"
        );
        assert_eq!(update_messages("Job", &job(true, "a", "x"), &job(true, "a", "y")).len(), 1, "but not change them");
        let mut started = job(true, "a", "x");
        started["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
        assert_eq!(update_messages("Job", &started, &job(true, "b", "x")).len(), 1, "once started, not even that");
        let mut more = job(false, "a", "x");
        more["spec"]["completions"] = json!(4);
        assert_eq!(
            update_messages("Job", &job(false, "a", "x"), &more),
            ["spec.completions: Invalid value: 4: field is immutable"]
        );
    }

    #[test]
    fn a_claim_and_a_volume_keep_theirs() {
        let pvc = |class: Option<&str>, size: &str, phase: &str| {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
            if let Some(c) = class {
                spec["storageClassName"] = json!(c);
            }
            json!({"spec": spec, "status": {"phase": phase, "capacity": {"storage": "2Gi"}}})
        };
        assert!(
            update_messages(
                "PersistentVolumeClaim",
                &pvc(None, "1Gi", "Pending"),
                &pvc(Some("fast"), "1Gi", "Pending")
            )
            .is_empty(),
            "a class may be set once"
        );
        let got = update_messages(
            "PersistentVolumeClaim",
            &pvc(Some("a"), "1Gi", "Pending"),
            &pvc(Some("b"), "1Gi", "Pending"),
        );
        assert_eq!(
            got,
            ["spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n- storageClassName: \"a\"\n+ storageClassName: \"b\""]
        );
        assert_eq!(
            update_messages("PersistentVolumeClaim", &pvc(None, "1Gi", "Pending"), &pvc(None, "5Gi", "Pending")).len(),
            1,
            "an unbound claim keeps its size"
        );
        assert!(
            update_messages("PersistentVolumeClaim", &pvc(None, "2Gi", "Bound"), &pvc(None, "5Gi", "Bound")).is_empty(),
            "a bound one grows"
        );
        assert_eq!(
            update_messages("PersistentVolumeClaim", &pvc(None, "5Gi", "Bound"), &pvc(None, "1Gi", "Bound")),
            ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
        );
        let pv = |path: &str, policy: &str| json!({"spec": {"hostPath": {"path": path}, "persistentVolumeReclaimPolicy": policy}});
        assert!(update_messages("PersistentVolume", &pv("/a", "Retain"), &pv("/a", "Delete")).is_empty());
        let got = update_messages("PersistentVolume", &pv("/a", "Retain"), &pv("/b", "Retain"));
        assert_eq!(got, ["spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n- hostPath.path: \"/a\"\n+ hostPath.path: \"/b\""]);
    }

    #[test]
    fn a_pod_changes_only_what_kube_lets_it() {
        let pod = |image: &str, env: &str| {
            json!({"spec": {"containers": [{"name": "c", "image": image, "env": [{"name": "A", "value": env}]}],
                "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}], "activeDeadlineSeconds": 100}})
        };
        assert!(update_messages("Pod", &pod("a", "1"), &pod("b", "1")).is_empty(), "images may change");
        let got = update_messages("Pod", &pod("a", "1"), &pod("a", "2"));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with(
                "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
            ),
            "{got:?}"
        );
        assert!(
            got[0].ends_with("\n- containers[0].env[0].value: \"1\"\n+ containers[0].env[0].value: \"2\""),
            "{got:?}"
        );
        let mut more = pod("a", "1");
        more["spec"]["tolerations"].as_array_mut().unwrap().push(json!({"key": "other", "operator": "Exists"}));
        more["spec"]["tolerations"][0]["tolerationSeconds"] = json!(60);
        more["spec"]["activeDeadlineSeconds"] = json!(50);
        assert!(
            update_messages("Pod", &pod("a", "1"), &more).is_empty(),
            "added tolerations, new seconds, a shorter deadline"
        );
        more["spec"]["activeDeadlineSeconds"] = json!(200);
        assert_eq!(
            update_messages("Pod", &pod("a", "1"), &more),
            ["spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
        );
        let mut fewer = pod("a", "1");
        fewer["spec"]["tolerations"] = json!([]);
        assert_eq!(
            update_messages("Pod", &pod("a", "1"), &fewer),
            ["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
        );
        let mut two = pod("a", "1");
        two["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "d", "image": "x"}));
        assert_eq!(
            update_messages("Pod", &pod("a", "1"), &two),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
    }

    #[test]
    fn probes_and_resources() {
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
            "livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}},
            "readinessProbe": {"periodSeconds": 5},
            "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
            "resources": {"requests": {"cpu": "2", "memory": "-1Mi", "example.com/gpu": "1", "ephemeral-storage": "700m"},
                "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "0.7"}}}]}});
        let got = messages("v1", "Pod", pod);
        holds_all(
            &got,
            &[
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].readinessProbe: Required value: must specify a handler type",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
            ],
        );
        assert_eq!(got.len(), 5, "a sleep is a hook's handler: {got:?}");
    }

    #[test]
    fn volumes_mounts_and_restart_policies() {
        let spec = json!({"containers": [{"name": "c", "image": "x",
                "volumeMounts": [{"name": "data", "mountPath": "/d"}, {"name": "cfg", "mountPath": "/d"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "c"}, "emptyDir": {}}, {"name": "cfg", "secret": {}}, {"name": "none"}]});
        let got = messages("v1", "Pod", json!({"spec": spec.clone()}));
        holds_all(
            &got,
            &[
                "spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[1].name: Duplicate value: \"cfg\"",
                "spec.volumes[2]: Required value: must specify a volume type",
                "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
                "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
                "spec.volumes[1].secret.secretName: Required value",
            ],
        );
        assert_eq!(got.len(), 6, "{got:?}");
        // A StatefulSet's pods mount its claim templates: kube checks its template's labels only.
        let mut template = json!({"metadata": {"labels": {"app": "db"}}, "spec": spec});
        let sts = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template.clone()}});
        assert!(messages("apps/v1", "StatefulSet", sts).is_empty());
        template["spec"] = json!({"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"});
        let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template.clone()}});
        assert_eq!(
            messages("apps/v1", "Deployment", deploy),
            ["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
        );
        template["spec"]["restartPolicy"] = json!("Always");
        let job = json!({"spec": {"template": template}});
        assert_eq!(
            messages("batch/v1", "Job", job.clone()),
            ["spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
        );
        let cron = json!({"spec": {"schedule": "* * * * *", "jobTemplate": job}});
        assert_eq!(messages("batch/v1", "CronJob", cron).len(), 1, "a CronJob's jobs alike");
    }

    #[test]
    fn env_ports_and_node_selectors() {
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
            "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}, {"containerPort": 82, "name": "Metrics-Port-Long"}],
            "env": [{"name": "A=B", "value": "1"}, {"name": "B", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}, {"name": "C", "valueFrom": {}}]}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In"}, {"key": "gpu", "operator": "Exists", "values": ["x"]}, {"key": "k", "operator": "Near"}]}]}}}}});
        let got = messages("v1", "Pod", pod);
        holds_all(
            &got,
            &[
                "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
                "spec.containers[0].ports[2].name: Invalid value: \"Metrics-Port-Long\": must be no more than 15 characters",
                "spec.containers[0].ports[2].name: Invalid value: \"Metrics-Port-Long\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[2].operator: Unsupported value: \"Near\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
            ],
        );
        assert_eq!(got.len(), 9, "{got:?}");
        let svc = json!({"spec": {"type": "ClusterIP", "ports": [{"name": "web", "port": 80, "targetPort": "http"},
            {"name": "web", "port": 81, "targetPort": 70000}]}});
        assert_eq!(
            messages("v1", "Service", svc),
            [
                "spec.ports[1].name: Duplicate value: \"web\"",
                "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
            ]
        );
    }

    #[test]
    fn affinity_ids_resource_names_and_volume_sources() {
        let pod = json!({"spec": {
            "securityContext": {"runAsUser": -1, "supplementalGroups": [5, -2]},
            "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"a": "b"}}}],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}]}},
            "containers": [{"name": "c", "image": "x", "securityContext": {"runAsGroup": 4294967296u64},
                "resources": {"limits": {"gpu": "1", "example.com/gpu": "1", "cpu": "1"}, "requests": {"example.com/gpu": "1"}},
                "volumeMounts": [{"name": "cm", "mountPath": "/a"}, {"name": "claim", "mountPath": "/b"}]}],
            "volumes": [{"name": "cm", "configMap": {"defaultMode": 1000, "items": [{"key": "k", "path": "../x"}, {"key": "", "path": "/abs"}]}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": ""}}]}});
        let got = messages("v1", "Pod", pod);
        holds_all(
            &got,
            &[
                "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
                "spec.containers[0].securityContext.runAsGroup: Invalid value: 4294967296: must be between 0 and 2147483647, inclusive",
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
                "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
                "spec.containers[0].resources.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                "spec.volumes[0].configMap.name: Required value",
                "spec.volumes[0].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
                "spec.volumes[0].configMap.items[0].path: Invalid value: \"../x\": must not contain '..'",
                "spec.volumes[0].configMap.items[1].key: Required value",
                "spec.volumes[0].configMap.items[1].path: Invalid value: \"/abs\": must be a relative path",
                "spec.volumes[1].persistentVolumeClaim.claimName: Required value",
            ],
        );
        assert_eq!(got.len(), 12, "{got:?}");
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
                "securityContext": {"privileged": true, "allowPrivilegeEscalation": false}}],
            "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Maybe"}]}});
        let got = messages("v1", "Pod", pod);
        holds_all(
            &got,
            &[
                "spec.containers[0].securityContext: Invalid value: {\"allowPrivilegeEscalation\":false,\"privileged\":true}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
                "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
                "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty",
                "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Maybe\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            ],
        );
        assert_eq!(got.len(), 4, "{got:?}");
    }

    #[test]
    fn ingress_paths_and_backends() {
        let ing = json!({"spec": {"rules": [{"http": {"paths": [
            {"path": "/api", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
            {"path": "api//v1", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}},
            {"path": "/", "pathType": "Exact", "backend": {}}]}}]}});
        assert_eq!(
            messages("networking.k8s.io/v1", "Ingress", ing),
            [
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
                "spec.rules[0].http.paths[1].path: Invalid value: \"api//v1\": must be an absolute path",
                "spec.rules[0].http.paths[1].path: Invalid value: \"api//v1\": must not contain '//'",
                "spec.rules[0].http.paths[1].backend.service.port.name: Required value: port name or number is required",
                "spec.rules[0].http.paths[2].backend: Invalid value: \"\": resource or service backend is required",
            ]
        );
    }

    #[test]
    fn role_rules() {
        let role = json!({"rules": [{"resources": ["pods"], "verbs": ["get"]}, {"nonResourceURLs": ["/healthz"], "verbs": []}]});
        assert_eq!(
            messages("rbac.authorization.k8s.io/v1", "Role", role.clone()),
            [
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[1].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"
            ]
        );
        assert_eq!(
            messages("rbac.authorization.k8s.io/v1", "ClusterRole", role).len(),
            2,
            "a ClusterRole may name URLs"
        );
        let aggregated = json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
        assert!(messages("rbac.authorization.k8s.io/v1", "ClusterRole", aggregated).is_empty());
    }

    #[test]
    fn services_and_config_keys() {
        let svc = json!({"spec": {"type": "Internal", "ports": [{"port": 80}, {"port": 0, "protocol": "ICMP"}]}});
        let got = messages("v1", "Service", svc);
        holds_all(
            &got,
            &[
                "spec.type: Unsupported value: \"Internal\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                "spec.ports[0].name: Required value",
                "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ],
        );
        let headless = json!({"spec": {"clusterIP": "None", "type": "ClusterIP"}});
        assert!(messages("v1", "Service", headless).is_empty());
        let cm = json!({"data": {"ok.key_1-x": "", "bad key": "", "..x": ""}});
        let got = messages("v1", "ConfigMap", cm);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.iter().any(|g| g.starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key")),
            "{got:?}"
        );
        assert!(got.contains(&"data[..x]: Invalid value: \"..x\": must not start with '..'".to_string()), "{got:?}");
        // A port of 0 is unset to Go: a host port may be left so; a container port is then required.
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 0, "hostPort": 0}]}],
            "initContainers": [{"name": "c", "image": "x"}]}});
        assert_eq!(
            messages("v1", "Pod", pod),
            [
                "spec.initContainers[0].name: Duplicate value: \"c\"",
                "spec.containers[0].ports[0].containerPort: Required value"
            ]
        );
    }
}
