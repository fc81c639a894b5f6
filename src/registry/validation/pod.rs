//! A pod spec's checks, wherever a pod spec is (a Pod's and every template's): containers, volumes
//! and mounts, environment, resources, ports, scheduling terms, security IDs and projected files.

use std::collections::HashMap;

use super::*;

pub(super) fn pod_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
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
    if let Some(selector) = map.get("nodeSelector").and_then(Value::as_object) {
        meta::label_errors(selector, &path.child("nodeSelector"), causes);
    }
    spread_pairs(map, path, causes);
    scheduling_gates(map, path, causes);
    // A Pod's spec is at `spec`; a template's is deeper.
    pod_spec_rest(map, path, path.render() == "spec", causes);
    ephemeral_containers(map, path, causes);
    pod_security(map, path, causes);
}

/// A pod's volumes, named uniquely, and its containers' mounts of them (kube's `ValidateVolumes` and
/// `validateVolumeMounts`): each mount names a volume of the pod, at a path given once per container.
pub(super) fn volumes_and_mounts(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let mut volumes = HashMap::new();
    for (i, v) in map.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{}[{i}].name", path.child("volumes"));
        match v.get("name").and_then(Value::as_str) {
            None | Some("") => required(causes, at),
            Some(name) => {
                dns_label(causes, at.clone(), name);
                if volumes.insert(name, v).is_some() {
                    duplicate(causes, &at, name);
                }
            }
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for (c, container) in map.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let mut paths = HashSet::new();
            let mounts = container.get("volumeMounts").and_then(Value::as_array);
            for (m, mount) in mounts.into_iter().flatten().enumerate() {
                let at = format!("{}[{c}].volumeMounts[{m}]", path.child(list));
                match mount.get("name").and_then(Value::as_str) {
                    None | Some("") => required(causes, format!("{at}.name")),
                    Some(name) if !volumes.contains_key(name) => {
                        push(causes, cause("FieldValueNotFound", &format!("{at}.name"), format!("Not found: {name:?}")))
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
            mounts_and_devices(container, &format!("{}[{c}]", path.child(list)), &volumes, causes);
        }
    }
}

/// A pod volume's sources in the order kube's `validateVolumeSource` takes them, each with the path
/// kube names it at when it is one too many (two of kube's spellings are not the field's).
const VOLUME_SOURCES: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

/// A volume's sources that are set, in kube's order.
fn set_sources(map: &Map<String, Value>) -> impl Iterator<Item = &'static (&'static str, &'static str)> + '_ {
    VOLUME_SOURCES.iter().filter(|(field, _)| map.get(*field).is_some_and(|v| !v.is_null()))
}

/// A volume's source: exactly one (kube's `validateVolumeSource`), the first in kube's order kept and
/// checked, each other one refused (and, by `extra_volume_sources`, not looked into).
pub(super) fn volume_source(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let mut set = set_sources(map);
    if set.next().is_none() {
        required_why(causes, &path.render(), "must specify a volume type");
    }
    for (_, shown_at) in set {
        forbidden(causes, &path.child(shown_at), "may not specify more than 1 volume type");
    }
    if let Some(iscsi) = map.get("iscsi").filter(|s| !s.is_null()) {
        let name = map.get("name").and_then(Value::as_str).unwrap_or_default();
        iscsi_name(name, iscsi, path.child("name"), name, causes);
    }
}

/// The sources of a volume after its first: kube refuses them whole and checks none of their fields.
pub(super) fn extra_volume_sources(map: &Map<String, Value>) -> Vec<&'static str> {
    set_sources(map).skip(1).map(|(field, _)| *field).collect()
}

/// What a pod spec holds that kube refuses whole without looking inside: the probes and hooks of init
/// containers that are not sidecars, and of ephemeral containers.
pub(super) fn refused_whole(spec: &Map<String, Value>) -> Vec<(&'static str, usize, &'static str)> {
    let mut found = Vec::new();
    for list in ["initContainers", "ephemeralContainers"] {
        for (i, c) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            if list == "initContainers" && c["restartPolicy"] == "Always" {
                continue;
            }
            for field in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
                if c.get(field).is_some_and(|v| !v.is_null()) {
                    found.push((list, i, field));
                }
            }
        }
    }
    found
}

pub(super) fn container(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
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
pub(super) fn env_var(var: &Value, at: &str, causes: &mut Vec<Cause>) {
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
pub(super) fn resources(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
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
            container_resource_name(name, &format!("{at}[{name}]"), causes);
            let Some(v) = crate::registry::quantity::value(q) else { continue };
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
                let Some(order) = crate::registry::quantity::compare(q, l) else { continue };
                let l = l.as_str().map_or_else(|| l.to_string(), str::to_string);
                if exact(name) && order.is_ne() {
                    invalid(causes, req_path.clone(), shown(q), &format!("must be equal to {name} limit of {l}"));
                } else if order.is_gt() {
                    let why = format!("must be less than or equal to {name} limit of {l}");
                    invalid(causes, req_path.clone(), shown(q), &why);
                }
            }
            None if exact(name) => push(
                causes,
                cause(
                    "FieldValueRequired",
                    &lim_path,
                    "Required value: Limit must be set for non overcommitable resources",
                ),
            ),
            None => {}
        }
    }
}

pub(super) fn container_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
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

/// User or group IDs, each within 0 to 2^31-1 (`indexed`: a list, each reported at its index).
pub(super) fn ids<'a>(values: impl Iterator<Item = &'a Value>, at: &str, indexed: bool, causes: &mut Vec<Cause>) {
    for (i, v) in values.enumerate() {
        let Some(n) = v.as_i64().filter(|n| !(0..=i64::from(i32::MAX)).contains(n)) else { continue };
        let at = if indexed { format!("{at}[{i}]") } else { at.to_string() };
        invalid(causes, at, n.to_string(), "must be between 0 and 2147483647, inclusive");
    }
}

/// A file mode kube writes a projected file with: 0 to 0777.
pub(super) fn file_mode(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
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
pub(super) fn key_to_path(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("key")) {
        required(causes, path.child("key"));
    }
    match map.get("path").and_then(Value::as_str) {
        None | Some("") => required(causes, path.child("path")),
        Some(p) => non_reserved(p, &path.child("path"), causes),
    }
    file_mode(map, "mode", path, causes);
}

/// A seccomp profile (kube's `validateSeccompProfileField`): a known type, and a relative path below
/// the kubelet's profiles exactly when the type is `Localhost`.
pub(super) fn seccomp_profile(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let at = path.child("localhostProfile");
    let profile = map.get("localhostProfile").filter(|p| !p.is_null());
    match map.get("type").and_then(Value::as_str).unwrap_or_default() {
        "" => push(
            causes,
            cause(
                "FieldValueRequired",
                &path.child("type"),
                "Required value: type is required when seccompProfile is set",
            ),
        ),
        "Localhost" => match profile.map(|p| p.as_str().unwrap_or_default()) {
            None => push(
                causes,
                cause("FieldValueRequired", &at, "Required value: must be set when seccomp type is Localhost"),
            ),
            Some(p) => {
                if let Some(why) = local_path_problem(p) {
                    invalid(causes, at, format!("{p:?}"), why);
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if profile.is_some() {
                // kube shows the profile's Go struct, with a pointer's address; kgate its JSON.
                let shown = Value::Object(map.clone()).to_string();
                invalid(causes, at, shown, "can only be set when seccomp type is Localhost");
            }
        }
        other => not_supported(
            causes,
            path.child("type"),
            &Value::String(other.into()),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        ),
    }
}

/// An AppArmor profile (kube's `ValidateAppArmorProfileField`): a known type, and a profile name,
/// unpadded and at most 4095 bytes, exactly when the type is `Localhost`.
pub(super) fn apparmor_profile(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let at = path.child("localhostProfile");
    let profile = map.get("localhostProfile").filter(|p| !p.is_null()).map(|p| p.as_str().unwrap_or_default());
    const UNSET: &str = "Required value: must be set when AppArmor type is Localhost";
    match map.get("type").and_then(Value::as_str).unwrap_or_default() {
        "Localhost" => match profile {
            None => push(causes, cause("FieldValueRequired", &at, UNSET)),
            Some(p) => {
                if p.trim() != p {
                    invalid(causes, at.clone(), format!("{p:?}"), "must not be padded with whitespace");
                } else if p.is_empty() {
                    push(causes, cause("FieldValueRequired", &at, UNSET));
                }
                if p.len() > 4095 {
                    push(causes, cause("FieldValueTooLong", &at, "Too long: may not be more than 4095 bytes"));
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(p) = profile {
                invalid(causes, at, format!("{p:?}"), "can only be set when AppArmor type is Localhost");
            }
        }
        "" => push(
            causes,
            cause(
                "FieldValueRequired",
                &path.child("type"),
                "Required value: type is required when appArmorProfile is set",
            ),
        ),
        other => not_supported(
            causes,
            path.child("type"),
            &Value::String(other.into()),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        ),
    }
}

/// A CSI driver's name (kube's `ValidateCSIDriverName`): at most 63 characters of a DNS subdomain,
/// whatever their case.
pub(super) fn csi_driver_name(causes: &mut Vec<Cause>, at: String, name: &str) {
    if name.is_empty() {
        required(causes, at.clone());
    }
    if name.len() > 63 {
        push(causes, cause("FieldValueTooLong", &at, "Too long: may not be more than 63 bytes"));
    }
    for why in meta::dns1123_subdomain_errors(&name.to_ascii_lowercase()) {
        invalid(causes, at.clone(), format!("{name:?}"), &why);
    }
}

/// An inline CSI volume (kube's `validateCSIVolumeSource`): a driver, and a named secret if one is
/// referenced (kube reports a bad secret name at the source's `name`).
pub(super) fn csi_volume(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    csi_driver_name(causes, path.child("driver"), map.get("driver").and_then(Value::as_str).unwrap_or_default());
    if let Some(secret) = map.get("nodePublishSecretRef").filter(|s| !s.is_null()) {
        match secret["name"].as_str().unwrap_or_default() {
            "" => required(causes, format!("{}.name", path.child("nodePublishSecretRef"))),
            name => {
                for why in meta::dns1123_subdomain_errors(name) {
                    invalid(causes, path.child("name"), format!("{name:?}"), &why);
                }
            }
        }
    }
}

/// The annotations kube reads on a pod, a Pod's and every template's alike (kube's
/// `ValidatePodSpecificAnnotations`): a mirror pod's node, a whole deletion cost, and the seccomp and
/// AppArmor annotations that came before the fields (still honoured by kubelets, so still checked).
pub(super) fn pod_annotations(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    // A template's labels and annotations are checked as an object's are (kube's
    // `ValidatePodTemplateSpec`), its annotations' size bounded too; a Pod's are, as its metadata.
    let pod = path.render().is_empty();
    if let (false, Some(meta)) = (pod, map.get("metadata").and_then(Value::as_object)) {
        for c in meta::labels_annotations_errors(meta, &path.child("labels"), &path.child("annotations")) {
            push(causes, c);
        }
    }
    let Some(annotations) = map.get("metadata").and_then(|m| m.get("annotations")).and_then(Value::as_object) else {
        return;
    };
    // kube names a Pod's at `metadata.annotations`, a template's at `<template>.annotations`.
    let at = if pod { "metadata.annotations".to_string() } else { path.child("annotations") };
    let spec = map.get("spec").unwrap_or(&Value::Null);
    // Once, not per annotation: a body of many annotations and many containers must not cost their product.
    let containers: HashSet<&str> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| spec.get(*list).and_then(Value::as_array).into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    if let Some(v) = annotations.get("kubernetes.io/config.mirror") {
        if is_empty(spec.get("nodeName")) {
            let why = "must set spec.nodeName if mirror pod annotation is set";
            invalid(causes, format!("{at}[kubernetes.io/config.mirror]"), shown(v), why);
        }
    }
    if let Some(v) = annotations.get("controller.kubernetes.io/pod-deletion-cost") {
        if !deletion_cost(v.as_str().unwrap_or_default()) {
            let at = format!("{at}[controller.kubernetes.io/pod-deletion-cost]");
            invalid(causes, at, shown(v), "must be a 32bit integer");
        }
    }
    for (key, v) in annotations {
        let (key, profile) = (key.as_str(), v.as_str().unwrap_or_default());
        if key == "seccomp.security.alpha.kubernetes.io/pod"
            || key.starts_with("container.seccomp.security.alpha.kubernetes.io/")
        {
            // kube names these as a child field, not as a map key.
            let at = format!("{at}.{key}");
            match profile.strip_prefix("localhost/") {
                _ if ["runtime/default", "docker/default", "unconfined"].contains(&profile) => {}
                Some(p) => {
                    if let Some(why) = local_path_problem(p) {
                        invalid(causes, at, format!("{p:?}"), why);
                    }
                }
                None => invalid(causes, at, format!("{profile:?}"), "must be a valid seccomp profile"),
            }
        } else if let Some(container) = key.strip_prefix("container.apparmor.security.beta.kubernetes.io/") {
            let at = format!("{at}[{key}]");
            if !containers.contains(container) {
                invalid(causes, at.clone(), format!("{container:?}"), "container not found");
            }
            let known = ["", "runtime/default", "unconfined"].contains(&profile);
            if !known && !profile.starts_with("localhost/") {
                invalid(causes, at, format!("{profile:?}"), &format!("invalid AppArmor profile name: {profile:?}"));
            }
        }
    }
}

/// What is wrong with a profile's path on the node (kube's `validateLocalDescendingPath`): it must
/// stay below the kubelet's profile directory.
fn local_path_problem(p: &str) -> Option<&'static str> {
    if p.starts_with('/') {
        Some("must be a relative path")
    } else if p.split('/').any(|s| s == "..") {
        Some("must not contain '..'")
    } else {
        None
    }
}

/// A deletion cost as kube reads it (`GetDeletionCostFromPodAnnotations`): a 32-bit integer written
/// without a plus sign or leading zeros.
fn deletion_cost(v: &str) -> bool {
    let first_ok = match v.as_bytes().first() {
        None | Some(b'-') | Some(b'1'..=b'9') => true,
        Some(b'0') => v == "0",
        _ => false,
    };
    first_ok && v.parse::<i32>().is_ok()
}
